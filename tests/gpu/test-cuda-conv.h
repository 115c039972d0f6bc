/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-conv.h — what test-cuda-conv.c's family shares: its cases, problems (host
 * data and CPU reference) and device sides, and the helpers test-cuda-conv.c defines
 * for them (random inputs, the bounds, every candidate checked against a reference);
 * the registration of test-cuda-conv-bf16.c's, test-cuda-conv-workspace.c's,
 * test-cuda-conv-small.c's, test-cuda-conv-fused.c's, test-cuda-conv-screen.c's and
 * test-cuda-conv-phases.c's tests (the backends are test-cuda-layers.h's, set up by
 * test-cuda-conv.c's main()).
 * Only with TDM_HAVE_CUDA. */
#pragma once

#include "tdm-backend.h"
#include "tdm-conv-columns.h"

#include <glib.h>
#include <stdint.h>

typedef struct {
  int n, h, w, c, out_c, kernel, pad, stride;
} Case;

/* A case's host data and CPU reference. */
typedef struct {
  TdmConvShape s;
  size_t in, out, weights, rows, k;
  float *x, *w, *dy;
  float *y_ref, *dx_ref, *dw_ref;
  /* The chunks a bf16 cuDNN weight gradient runs the batch in where the engine writes its
   * input (tdm-backend-cuda-conv-chunks.h), and ‖Σᵢ|Sᵢ|‖₂ / ‖S‖₂ of the reference's
   * chunk sums Sᵢ against their sum S (1 for one chunk): chunk_rounding_share(). */
  TdmConvChunks chunks;
  double chunk_ratio;
} Problem;

/* The device side of a problem on backend b: its buffers and the engine's call. */
typedef struct {
  TdmBackend *b;
  TdmConvArgs a;
  float *x, *w, *dy, *y, *dx, *dw;
  uint16_t *w16;
  void *work;
} Device;

/* A device side whose input a bn before stored as bf16 and the conv normalizes as it
 * reads it: x as bf16 (x16) at `offset` elements into its buffer (1: misaligned), the
 * bn's statistics and affine (bn: mean, invstd, gamma, beta), the output as bf16 (y16)
 * or float32 (d.y). */
typedef struct {
  Device d;
  float *bn;
  uint16_t *x16, *y16;
} BnInput;

/* count random values rounded to bf16: their bits in *bits, the values returned. */
float *random_bf16_input (size_t count, uint16_t **bits);
/* A bn's mean, invstd, gamma and beta for c channels, one after the other. */
float *random_bn (int c);
/* p's host data for case c and its CPU reference (of x_override's input where given). */
void problem_init (Problem *p, const Case *c, const float *x_override);
void problem_clear (Problem *p);
/* The bound for a direction: its reduction length L and the backend's precision. */
double bound (TdmBackend *b, const Problem *p, TdmConvDirection dir);
/* What candidate `name` may err beyond a whole result's bound: for a cuDNN weight
 * gradient writing bf16 in chunks, its chunk sums' roundings' growth, 2⁻⁸ (ratio − 1);
 * 0 for any other. */
double chunk_rounding_share (const Problem *p, TdmConvDirection dir, const char *name);
/* d's buffers on backend b for p (with the weights' bf16 copy where with_w16). */
void device_init (Device *d, TdmBackend *b, const Problem *p, gboolean with_w16);
void device_clear (Device *d);
/* in's buffers on backend b for p, the bn's 4·c floats and x16's bits given, with the
 * bn's ReLU where relu, the output bf16 where out16, x16 `offset` elements in. */
void bn_input_init (BnInput *in, TdmBackend *b, const Problem *p, const float *bn,
                    const uint16_t *x16, gboolean relu, gboolean out16, size_t offset);
void bn_input_clear (BnInput *in);
/* NaN in in's output. */
void bn_input_poison (BnInput *in, const Problem *p);
/* in's output, widened, against p's forward reference: its relative error; a bf16
 * output's bits also in `bits` where given (p->out of them). */
double bn_input_forward_error (BnInput *in, const Problem *p, uint16_t *bits);
/* One engine call (backward where `backward`) on d's buffers as the replica makes it:
 * from a workspace of 16 bytes, grown to what the engine asks for (room to time and
 * screen its candidates, then its choice's need) and tried again, at most three times.
 * TRUE when the engine ran it; *need the choice's bytes. */
gboolean engine_call_grown (Device *d, gboolean backward, size_t *need);
/* The names of TdmConvDirection's values, for messages. */
extern const char *const direction_names[];
/* Every candidate of every direction against the reference (y_ref the forward's); the
 * number of cuDNN's. */
int check_candidates (Device *d, const Problem *p, const char *what, const float *y_ref);

/* Registers test-cuda-conv-bf16.c's tests (operands stored as bf16, a bn's input). */
void test_cuda_conv_add_bf16 (void);
/* Registers test-cuda-conv-workspace.c's tests (the budget, columns in chunks). */
void test_cuda_conv_add_workspace (void);
/* Registers test-cuda-conv-small.c's tests (the few-channel candidates). */
void test_cuda_conv_add_small (void);
/* Registers test-cuda-conv-fused.c's tests (cuDNN's fused bn-prologue forward). */
void test_cuda_conv_add_fused (void);
/* Registers test-cuda-conv-screen.c's tests (the screen of the candidates' results). */
void test_cuda_conv_add_screen (void);
/* Registers test-cuda-conv-phases.c's tests (a strided input gradient by phases). */
void test_cuda_conv_add_phases (void);
