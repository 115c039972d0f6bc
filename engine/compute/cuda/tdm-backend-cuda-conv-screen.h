/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-screen.h — the convolution engine's screen of its candidates:
 * how far a candidate's result may lie from the reference candidate's result on the
 * same inputs before the engine leaves it out of the choice (tdm-backend-cuda-conv-engine.c's
 * fastest()), which candidate is the reference, and the order the choice tries the others
 * in. Knows nothing of CUDA: tested on
 * any machine (tests/engine/test-conv-screen.c).
 *
 * Every candidate computes the same sums of products of the same operands; a result
 * lies from those exact sums by at most
 *   e = u_out + 2·u_op + λ·√L·u₃₂
 * relative, in the 2-norm over the whole result (‖result − exact‖₂ ≤ e·‖exact‖₂):
 * - u_out, its output's rounding: each value rounded to nearest into a type of unit
 *   roundoff u (bf16 2⁻⁸, float32 2⁻²⁴) moves by at most u of itself, so the whole
 *   result by at most u in the 2-norm (a bound, not an estimate); the type is the
 *   narrowest the result passes through (a cuDNN plan writing bf16 that is widened
 *   after, im2col's bf16 columns of an input gradient, a bf16 destination), counted per
 *   rounding on the way (a bf16 weight gradient summed in k chunks: √k of them,
 *   tdm-backend-cuda-conv-candidates.c's tdm_conv_candidate_rounding());
 * - 2·u_op, its operands' rounding where candidates may round them differently: TF32's
 *   products keep 10 of a float's 23 fraction bits (truncated: 2⁻¹⁰ each operand). In
 *   a bf16 run every candidate reads the same bf16 operands (the layout's dy16 and w16,
 *   the input rounded or normalized by the same conversion), and in a float32 run the
 *   same floats, so there this term is 0;
 * - λ·√L·u₃₂, its float32 sums of L products (the reduction: kernel²·c forward,
 *   kernel²·out_c input gradient, the output's pixels n·oh·ow weight gradient). Taken
 *   as independent random variables of mean 0 (Higham and Mary, SIAM J. Sci. Comput.
 *   41(5), 2019), the roundings of a sum of L terms stay within λ·√L·u of the size of
 *   its partial sums with probability at least 1 − 2L·exp(−λ²/2): λ = 8 makes that one
 *   in a million at L = 2²⁰ (7.5 would). A convolution's partial sums are of its
 *   result's size in norm, whether the terms' signs are random (they cancel, and so do
 *   the partial sums) or alike; two float32 results then lie within 2·8 = 16·√L·u₃₂ of
 *   each other, the constant the GPU suite holds every float32 candidate to against the
 *   CPU's sums (tests/gpu/test-cuda-conv.c's bound()), which its random operands meet.
 *   The model is round-to-nearest's. Tensor cores (a bf16 run's products) truncate
 *   their sums (Fasi, Higham, Mikaitis and Pranesh, PeerJ Comput. Sci. 7, 2021): where
 *   the terms' signs are random the truncations' directions are too and the model
 *   holds; along one long chain of same-signed terms they drift together, up to about
 *   L·2⁻²⁸ at 16 products an instruction (2⁻⁸ at L = 2²⁰), which the bound does not
 *   grant: on such data two candidates that chain their sums differently may lie
 *   further apart than it, and the one that is not the reference is left out: a choice
 *   among fewer, each within the bound of the reference. The pre-warm's data are the
 *   first batch's, at the initial weights.
 * Two results each within their e of the same exact sums lie within e_c + e_r of each
 * other (the triangle inequality): a candidate further than that from the reference
 * has an error the run's precision does not account for (cuDNN's engine 62 writing
 * bf16 over a million-row weight gradient on the H100: 0.0065–0.0100 from the CPU's
 * where the others were 0.0028, the operands' bf16 share included), and is left out.
 * The metric is norm-wise (‖c − r‖₂ / ‖r‖₂, kernels/compare.cu's sums in double), so
 * single small values of either sign do not decide it.
 *
 * The reference is the candidate whose own e is least (a float32 result before a
 * bf16 one), the first such in the list's order: im2col with cuBLAS before our own
 * kernels before cuDNN's plans — the replica's own composition, which the CPU
 * comparisons of the whole suite check, where it writes float32.
 */
#pragma once

#include <glib.h>
#include "tdm-backend.h"

G_BEGIN_DECLS

/* Unit roundoffs: round to nearest into bf16 (8 significant bits) and float32 (24);
 * TF32's products, their operands truncated to 11 significant bits. */
#define TDM_CONV_UNIT_BF16 0x1p-8
#define TDM_CONV_UNIT_F32 0x1p-24
#define TDM_CONV_UNIT_TF32 0x1p-10
/* The accumulation's λ (above). */
#define TDM_CONV_SCREEN_LAMBDA 8.0

/* The roundings a candidate's result carries beyond the exact sums of the shared
 * operands: the unit roundoff of the narrowest type its output passes through, and of
 * its operands where the candidates may round them differently (0 where they do not). */
typedef struct {
  double output;
  double operands;
} TdmConvRounding;

/* L, the number of products each value of direction dir's result sums. */
guint64 tdm_conv_screen_length (const TdmConvShape *s, TdmConvDirection dir);
/* e = output + 2·operands + λ·√length·2⁻²⁴: how far a result with rounding r lies from
 * the exact sums, relative, in the 2-norm. */
double tdm_conv_screen_share (TdmConvRounding r, guint64 length);
/* How far candidate's result may lie from reference's: the sum of their shares. */
double tdm_conv_screen_bound (TdmConvRounding candidate, TdmConvRounding reference,
                              guint64 length);
/* The index of the reference among count candidates' roundings: the least share, the
 * first of equals; 0 when count is 0. */
guint tdm_conv_screen_reference (const TdmConvRounding *r, guint count);
/* ‖c − r‖₂ / ‖r‖₂ from Σ (c − r)² and Σ r² (tdm_backend_deviation()): 0 for two
 * zero results, infinite for a non-zero one against a zero reference, NaN where the
 * candidate wrote a NaN. */
double tdm_conv_screen_deviation (double diff_squares, double ref_squares);
/* Whether a candidate whose result lies `deviation` from the reference stays (FALSE
 * for a NaN). */
gboolean tdm_conv_screen_keeps (double deviation, double bound);

/* The order a timing's choice tries count candidates in, by their times ms[i] (NaN where
 * candidate i did not run): fastest first, the first in the list's order of equals, as far
 * as the reference (index `reference`; G_MAXUINT where there is none: then every one that
 * ran). The engine compares each before the reference with it in this order and chooses
 * the first kept, else the reference, which needs no comparison; one behind the reference
 * is never tried. Writes the indices to order (room for count), returns how many. */
guint tdm_conv_screen_order (const double *ms, guint count, guint reference, guint *order);

/* The screen compares a result with the reference's in pieces, the reference's piece
 * uploaded into `room` bytes of the timed candidate's scratch (dead after its runs):
 * *piece bytes each, a multiple of TDM_CONV_SCREEN_PIECE_ALIGN (of value_bytes, 2 or 4,
 * where the room holds less), and not more than the result, the last shorter; *count
 * of them. Both 0 where the room holds not one value or the result is empty. */
#define TDM_CONV_SCREEN_PIECE_ALIGN 256
void tdm_conv_screen_pieces (guint64 result_bytes, guint64 room, guint64 value_bytes,
                             guint64 *piece, guint64 *count);
/* The room TANDEM_CONV_SCREEN_PIECE_BYTES (tests only: many pieces on small shapes)
 * makes the pieces keep within, G_MAXUINT64 where it is unset or not a positive whole
 * number; read once, until tdm_conv_screen_reset(). */
guint64 tdm_conv_screen_room_cap (void);
/* Forgets what tdm_conv_screen_room_cap() read (for tests). */
void tdm_conv_screen_reset (void);

G_END_DECLS
