/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-replica-windows.h — where a replica keeps what only its backward pass uses: the
 * skip-gradient buffers (a projection's holding its start's sum and its compact share),
 * the gradient region, and the two windows they lie in. The rules the plan sizes them by
 * (tdm-replica-plan.c), the replica places them by (tdm-replica.c) and the walks use them
 * by (tdm-replica-backward.c, the window a layer's pass takes); part of
 * tdm-replica-private.h's rules, for the same files and their tests. */
#pragma once

#include "tdm-replica-private.h"

/* The bn below residual block start i that takes the start's sum as its gradient, whose
 * backward sums the start's pass can make as it writes that sum
 * (add_relu_backward_bn_sums_bf16): the layer below the block, or below the end that
 * only hands the gradient on where the start applies that end's ReLU (its mask kept as
 * bits, relu_bits_kept(); the end keeping bf16 gradients), is a bn; -1 where none (a
 * pool, the network's input). The run's own conditions come on top
 * (tdm-replica-backward.c's start_sums_bn(): the backend's op, a frozen bn). */
static inline int
start_sums_below(const TdmNetwork *net, int i, gboolean stores16)
{
  gboolean masked = i >= 1 && relu_bits_kept(net, i - 1, stores16);
  int k = masked ? i - 2 : i - 1;
  if (k < 0 || (masked && !block_grad_bf16(net, i - 1, stores16)))
    return -1;
  return net->layers[k].kind == TDM_LAYER_BN ? k : -1;
}

/* The bytes of projection end i's compact float32 input gradient (its share of its
 * block's input gradient) for n samples: the pixels its 1×1 conv of no padding reads,
 * its block's input channels. */
static inline size_t
projection_share_bytes(const TdmNetwork *net, int i, size_t n)
{
  const TdmLayer *end = &net->layers[i];
  return n * end->out_h * end->out_w * net->layers[end->partner].in_c * sizeof(float);
}

/* The room before projection end i's share in its skip buffer, where the buffer holds
 * both, for n samples: its block start's sum, the block's input gradient as bf16, as a
 * piece of the arena's alignment (the share's float loads stay aligned). */
static inline size_t
projection_sum_bytes(const TdmNetwork *net, int i, size_t n)
{
  return arena_piece(n * block_in_floats(net, &net->layers[i]) * sizeof(uint16_t));
}

/* The skip gradient of residual block `end` as kept: *count elements of *type per
 * sample (block_grad_bf16()). Float32: the block's input gradient (a projection's
 * conv writes its part of it there and its start adds the first layer's in place: no
 * pass to fold the share into, so no room for more). Bf16 without a
 * projection: the block's output gradient, which its start sums into. A projection
 * keeping bf16 gradients holds its compact float32 input gradient (the share,
 * projection_share_bytes()) and its start's sum (the block's input gradient as bf16):
 * where that start's pass can make the bn below's sums (start_sums_below()), both, the
 * sum first in projection_sum_bytes() for one sample and the share past it, so that the
 * pass reads the share as it writes the sum (tdm-replica-backward.c's
 * projection_share(): no thread's sum may overwrite a share another thread has yet to
 * read); n samples' sum, rounded once, takes no more than n times one sample's, so the
 * room of n samples holds both (equal where a sample's sum is a multiple of 16 bytes, as
 * where the block's input channels are a multiple of 8). Elsewhere (after a pool: two passes,
 * add_strided_bf16 then the start's, whatever the room) the larger of the two, one at
 * the buffer's start at a time. */
static inline void
skip_grad_of(const TdmNetwork *net, int end, gboolean stores16, size_t *count, TdmDtype *type)
{
  const TdmLayer *l = &net->layers[end];
  *count = block_in_floats(net, l);
  *type = TDM_DTYPE_F32;
  if (!block_grad_bf16(net, end, stores16))
    return;
  if (!l->projection) {
    *type = TDM_DTYPE_BF16;
    return;
  }
  size_t share = projection_share_bytes(net, end, 1);
  size_t bytes = start_sums_below(net, l->partner, stores16) >= 0
                     ? projection_sum_bytes(net, end, 1) + share
                     : MAX(share, *count * sizeof(uint16_t));
  *count = (bytes + sizeof(float) - 1) / sizeof(float);
}

/* Where residual block start i writes its sum, its block keeping bf16 gradients
 * (tdm-replica-backward.c's block_begin_backward()): into the skip buffer of the end
 * below where it takes it there (sum_to_end_below(); another window's at the windows'
 * split, TdmGradientWindows, else the same buffer as the block's), else the block's. */
static inline uint16_t *
start_sum_of(const TdmReplica *r, int i)
{
  return (uint16_t *)
      r->skip_grad[sum_to_end_below(r->net, i, r->stores_bf16) ? i - 1
                                                               : r->net->layers[i].partner];
}

/* Where projection end i keeps its compact float32 input gradient for n samples, its
 * block keeping bf16 gradients: in its skip buffer past its start's sum
 * (projection_sum_bytes()) where the buffer holds both (skip_grad_of() sizes it so
 * where the start can take the one pass), else at the buffer's start. */
static inline float *
projection_share(const TdmReplica *r, int i, int n)
{
  size_t sum = projection_sum_bytes(r->net, i, (size_t)n);
  char *skip = (char *)r->skip_grad[i];
  return (float *)(sum + projection_share_bytes(r->net, i, (size_t)n) <= r->skip_grad_bytes[i]
                       ? skip + sum
                       : skip);
}

/* Whether projection end i's share for n samples (projection_share()) and its start's
 * sum (start_sum_of()) share no byte: the start may then add the share in the pass that
 * writes the sum. */
static inline gboolean
projection_share_clear(const TdmReplica *r, int i, int n)
{
  const TdmNetwork *net = r->net;
  int begin = net->layers[i].partner;
  return !tdm_bytes_overlap(
      start_sum_of(r, begin),
      (size_t)n * block_in_floats(net, &net->layers[i]) * sizeof(uint16_t),
      projection_share(r, i, n), projection_share_bytes(net, i, (size_t)n));
}

/* Bytes of a ReLU mask of `bits` elements (bits past the last whole word in one more). */
/* The skip-gradient buffers: widths[level − 1] (NULL: not wanted) and their sum *skips,
 * bytes per sample. */
void tdm_replica_shared_block_buffers (const TdmNetwork *net, TdmBackendKind kind,
                                       TdmPrecision precision, gboolean stores16,
                                       size_t *widths, size_t *skips);
/* The same over the block ends of layers [lo, hi): a projection block starting at lo
 * whose sum goes to the end below it (sum_to_end_below()) keeps only its compact input
 * gradient there. */
void tdm_replica_block_buffers_in (const TdmNetwork *net, TdmBackendKind kind,
                                   TdmPrecision precision, gboolean stores16, int lo, int hi,
                                   size_t *widths, size_t *skips);

/* Where a replica's backward-only buffers lie, the skip buffer and the gradient region
 * (grad_a, grad_b), in two windows. The layers from `split` on (and the loss) use the
 * high window's, allocated apart from the arena; the layers before it the low window's,
 * which lies in the activation arena over the pieces of the layers from split on: every
 * reader of a layer's pieces comes at or after that layer in either walk, so those pieces
 * are not yet written while the forward uses the low window and are dead once the walk
 * back reaches it (the block start at split, the last high layer back, hands its sum to
 * the low window's skip buffer: sum_to_end_below()). split is a block's start at the top
 * level, keeping bf16 gradients, chosen where the two windows take the fewest bytes
 * beyond the pieces (a network of one level of blocks, activations stored as bf16); 0:
 * one window, the high one, as the buffers were always kept. Bytes a sample, but low_at
 * and arena. CIFAR ResNet-18 at 128 px, batch 128: the first stages' 403 MB skip buffer
 * (layer2.0's start's sum and its projection's share) and 268 MB region over the third
 * and fourth stages' pieces (54 MB past them where no bn output is stored for its conv). */
typedef struct {
  int split;
  size_t high_skip, high_half; /* the skip buffers' sum over the levels; a half */
  size_t low_skip, low_half;
  size_t low_at;               /* the low window's offset in the arena */
  size_t arena;                /* the training's arena: its pieces, the low window */
} TdmGradientWindows;

/* The low window's skip buffer, rounded up so that its region starts aligned as the
 * arena's allocation (cuDNN's plans, vector loads). */
#define TDM_WINDOW_PIECE(bytes) (((bytes) + 255) / 256 * 256)

/* The windows of a replica of cap samples a step (TANDEM_GRADIENT_WINDOWS=0: one). */
TdmGradientWindows tdm_replica_gradient_windows (const TdmNetwork *net, TdmBackendKind kind,
                                                 TdmPrecision precision, gboolean stores16,
                                                 gboolean bn16, size_t bn_store, size_t cap);

/* Points grad_a, grad_b and grad_half_bytes at the window layer i uses. */
static inline void
tdm_replica_use_window(TdmReplica *r, int i)
{
  gboolean low = i < r->window_split;
  r->grad_a = low ? r->grad_low : r->grad_high;
  r->grad_half_bytes = low ? r->half_low : r->half_high;
  r->grad_b = (float *)((char *)r->grad_a + r->grad_half_bytes);
}
