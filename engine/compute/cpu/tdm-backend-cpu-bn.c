/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-bn.c — the CPU backend's batch normalization: the statistics into
 * slots and their merge (tdm-bn-moments.h), the forward in training and evaluation,
 * the backward's sums and input gradient. Plain loops over NHWC data (channels
 * innermost, so the per-channel loops vectorize), sums in double and in a fixed order.
 * Without FMA contraction choices of its own, so a run resumed on another CPU of the
 * architecture continues with the same bits: the BN loops are built twice, for any
 * x86-64 and for AVX2 (wider vectors over the channels, no FMA, the same operations on
 * each value), the better picked when the program starts. A bf16 input (a conv's output
 * stored as bf16) is widened, exactly, a block of rows at a time into float32 and goes
 * through the same loops, so its results are the float32 ops' on the widened tensor. */
#include "tdm-backend-cpu-private.h"
#include "tdm-bf16.h"
#include "tdm-relu-bits.h"

#include <math.h>
#include <string.h>

/* AVX2 alone, not AVX-512F: GCC may contract a multiply and an add into one FMA where
 * the target has it for the vector width, and AVX-512F has it for 16 floats. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                    \
  !defined(__SANITIZE_ADDRESS__)
#define BN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define BN_CLONES
#endif

/* Rows widened at a time from a bf16 input: a few dozen kilobytes, in cache. */
#define BN_BLOCK_VALUES 16384

/* Rows of x a pass takes at a time: all of a float32 x, a block of a bf16 one. */
static int
block_rows(TdmDtype x_type, int rows, int channels)
{
  return x_type == TDM_DTYPE_F32 ? MAX(rows, 1) : MAX(1, BN_BLOCK_VALUES / channels);
}

/* x's rows [row, row + count) as float32: x itself, or its bf16 values widened into
 * tmp (block_rows() × channels floats). */
static const float *
rows_f32(const void *x, TdmDtype x_type, int row, int count, int channels, float *tmp)
{
  const size_t at = (size_t)row * channels;
  if (x_type == TDM_DTYPE_F32)
    return (const float *)x + at;
  const uint16_t *h = (const uint16_t *)x + at;
  for (size_t i = 0; i < (size_t)count * channels; i++)
    tmp[i] = tdm_bf16_value(h[i]);
  return tmp;
}

/* The type a pass over x and dy blocks by: bf16 where either is (each bf16 one is
 * widened a block at a time, block_rows()). */
static TdmDtype
blocked_type(TdmDtype x_type, TdmDtype dy_type)
{
  return x_type == TDM_DTYPE_F32 && dy_type == TDM_DTYPE_F32 ? TDM_DTYPE_F32 : TDM_DTYPE_BF16;
}

static float *
block_scratch(TdmDtype x_type, int rows, int channels)
{
  return x_type == TDM_DTYPE_F32
             ? NULL
             : g_new(float, (size_t)block_rows(x_type, rows, channels) * channels);
}

/* The shift is the first row (tdm-bn-moments.h); differences exact in double. */
BN_CLONES static void
moments_sums(double *restrict s1, double *restrict s2, const float *restrict x,
             const float *restrict first, int rows, int channels)
{
  for (int r = 0; r < rows; r++) {
    const float *restrict xr = x + (size_t)r * channels;
    for (int ch = 0; ch < channels; ch++) {
      const double d = (double)xr[ch] - (double)first[ch];
      s1[ch] += d;
      s2[ch] += d * d;
    }
  }
}

void
tdm_cpu_bn_moments(TdmBackend *b, float *slots, const void *x, TdmDtype x_type, int rows,
                   int channels, int slot, int slot_count)
{
  const size_t size = TDM_BN_SLOT_FLOATS(channels);
  memset(slots, 0, size * slot_count * sizeof(float));
  if (rows == 0)
    return;
  double *s1 = g_new0(double, 2 * (size_t)channels), *s2 = s1 + channels;
  float *first = g_new(float, channels), *tmp = block_scratch(x_type, rows, channels);
  /* The shift, x's first row: a bf16 row is widened into `first` itself, a float32
   * one copied there. */
  const float *row0 = rows_f32(x, x_type, 0, 1, channels, first);
  if (row0 != first)
    memcpy(first, row0, sizeof(float) * channels);
  const int block = block_rows(x_type, rows, channels);
  for (int r = 0; r < rows; r += block) {
    const int count = MIN(block, rows - r);
    moments_sums(s1, s2, rows_f32(x, x_type, r, count, channels, tmp), first, count, channels);
  }
  float *mine = slots + size * slot;
  for (int ch = 0; ch < channels; ch++) {
    double mean, m2;
    tdm_bnm_finish(first[ch], s1[ch], s2[ch], rows, &mean, &m2);
    tdm_bnm_store(mine, channels, ch, mean, m2);
  }
  tdm_bnm_store_count(mine, channels, rows);
  g_free(s1);
  g_free(first);
  g_free(tmp);
}

void
tdm_cpu_bn_stats(TdmBackend *b, float *saved, const float *slots, int slot_count, int channels,
                 float eps, float momentum, float *running_mean, float *running_var)
{
  for (int ch = 0; ch < channels; ch++) {
    double count, mean, m2;
    tdm_bnm_merge(slots, slot_count, channels, ch, &count, &mean, &m2);
    tdm_bnm_stats(saved, channels, ch, count, mean, m2, eps, momentum, running_mean,
                  running_var);
  }
}

/* y = x · scale + shift per channel, the affine form of (x − mean)·invstd·γ + β. */
BN_CLONES static void
bn_apply(float *restrict y, const float *restrict x, const float *restrict scale,
         const float *restrict shift, int rows, int channels, bool relu)
{
  for (int r = 0; r < rows; r++) {
    const float *restrict xr = x + (size_t)r * channels;
    float *restrict yr = y + (size_t)r * channels;
    for (int ch = 0; ch < channels; ch++) {
      const float v = xr[ch] * scale[ch] + shift[ch];
      yr[ch] = relu && v < 0.0f ? 0.0f : v;
    }
  }
}

/* bn_apply over x of either type. */
static void
bn_apply_any(float *y, const void *x, TdmDtype x_type, const float *scale, const float *shift,
             int rows, int channels, bool relu)
{
  float *tmp = block_scratch(x_type, rows, channels);
  const int block = block_rows(x_type, rows, channels);
  for (int r = 0; r < rows; r += block) {
    const int count = MIN(block, rows - r);
    bn_apply(y + (size_t)r * channels, rows_f32(x, x_type, r, count, channels, tmp), scale,
             shift, count, channels, relu);
  }
  g_free(tmp);
}

void
tdm_cpu_bn_affine(float *scale, float *shift, const float *mean, const float *invstd,
                  const float *gamma, const float *beta, int channels)
{
  for (int ch = 0; ch < channels; ch++) {
    scale[ch] = invstd[ch] * gamma[ch];
    shift[ch] = beta[ch] - mean[ch] * scale[ch];
  }
}

void
tdm_cpu_bn_forward(TdmBackend *b, float *y, const void *x, TdmDtype x_type, const float *mean,
                   const float *invstd, const float *gamma, const float *beta, int rows,
                   int channels, bool relu)
{
  float *scale = g_new(float, 2 * (size_t)channels), *shift = scale + channels;
  tdm_cpu_bn_affine(scale, shift, mean, invstd, gamma, beta, channels);
  bn_apply_any(y, x, x_type, scale, shift, rows, channels, relu);
  g_free(scale);
}

/* y = bn(x) (ReLU'd when relu_in), + a when given (then ReLU'd when relu_out), a block of
 * rows at a time in float32, each value rounded once into y. */
static void
bn_add_rows_bf16(uint16_t *y, const void *x, TdmDtype x_type, const float *mean,
                 const float *invstd, const float *gamma, const float *beta, const void *a,
                 TdmDtype a_type, int rows, int channels, bool relu_in, bool relu_out)
{
  float *scale = g_new(float, 2 * (size_t)channels), *shift = scale + channels;
  tdm_cpu_bn_affine(scale, shift, mean, invstd, gamma, beta, channels);
  const int block = block_rows(TDM_DTYPE_BF16, rows, channels);
  float *out = g_new(float, (size_t)block * channels);
  float *x_tmp = g_new(float, (size_t)block * channels);
  float *a_tmp = g_new(float, (size_t)block * channels);
  for (int r = 0; r < rows; r += block) {
    const int count = MIN(block, rows - r);
    const size_t values = (size_t)count * channels, at = (size_t)r * channels;
    bn_apply(out, rows_f32(x, x_type, r, count, channels, x_tmp), scale, shift, count,
             channels, relu_in);
    if (a != NULL) {
      const float *add = rows_f32(a, a_type, r, count, channels, a_tmp);
      for (size_t i = 0; i < values; i++) {
        const float v = out[i] + add[i];
        out[i] = relu_out && v < 0.0f ? 0.0f : v;
      }
    }
    for (size_t i = 0; i < values; i++)
      y[at + i] = tdm_bf16_round(out[i]);
  }
  g_free(a_tmp);
  g_free(x_tmp);
  g_free(out);
  g_free(scale);
}

/* bn_forward, and then with a the add and ReLU of bn_forward_add (add_out's: NaN
 * passes), a block of rows at a time into float32, then rounded into y; the mask read
 * back from y (the reference's plain way: the kernel writes it as it stores y). */
void
tdm_cpu_bn_forward_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                        const float *mean, const float *invstd, const float *gamma,
                        const float *beta, const void *a, TdmDtype a_type, int rows,
                        int channels, bool relu, uint32_t *bits)
{
  bn_add_rows_bf16(y, x, x_type, mean, invstd, gamma, beta, a, a_type, rows, channels,
                   relu && a == NULL, relu && a != NULL);
  if (bits != NULL)
    tdm_relu_bits_of(bits, y, (size_t)rows * channels);
}

void
tdm_cpu_bn_forward_eval(TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                        const float *running_mean, const float *running_var, const float *gamma,
                        const float *beta, float eps, int rows, int channels, bool relu)
{
  float *scale = g_new(float, 2 * (size_t)channels), *shift = scale + channels;
  for (int ch = 0; ch < channels; ch++) {
    scale[ch] = gamma[ch] / sqrtf(running_var[ch] + eps);
    shift[ch] = beta[ch] - running_mean[ch] * scale[ch];
  }
  bn_apply_any(y, x, x_type, scale, shift, rows, channels, relu);
  g_free(scale);
}

/* bn_forward with its ReLU, + a, a block of rows at a time in float32, rounded into y. */
void
tdm_cpu_bn_relu_add_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                         const float *mean, const float *invstd, const float *gamma,
                         const float *beta, const void *a, TdmDtype a_type, int rows,
                         int channels)
{
  bn_add_rows_bf16(y, x, x_type, mean, invstd, gamma, beta, a, a_type, rows, channels, true,
                   false);
}

/* bn_forward_eval a block of rows at a time into float32, rounded into y. */
void
tdm_cpu_bn_forward_eval_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                             const float *running_mean, const float *running_var,
                             const float *gamma, const float *beta, float eps, int rows,
                             int channels, bool relu)
{
  float *scale = g_new(float, 2 * (size_t)channels), *shift = scale + channels;
  for (int ch = 0; ch < channels; ch++) {
    scale[ch] = gamma[ch] / sqrtf(running_var[ch] + eps);
    shift[ch] = beta[ch] - running_mean[ch] * scale[ch];
  }
  const int block = block_rows(TDM_DTYPE_BF16, rows, channels);
  float *out = g_new(float, (size_t)block * channels);
  float *x_tmp = g_new(float, (size_t)block * channels);
  for (int r = 0; r < rows; r += block) {
    const int count = MIN(block, rows - r);
    const size_t values = (size_t)count * channels, at = (size_t)r * channels;
    bn_apply(out, rows_f32(x, x_type, r, count, channels, x_tmp), scale, shift, count,
             channels, relu);
    for (size_t i = 0; i < values; i++)
      y[at + i] = tdm_bf16_round(out[i]);
  }
  g_free(x_tmp);
  g_free(out);
  g_free(scale);
}

/* Per-channel constants of a BN backward, in one allocation: the channel loops read
 * them through restrict pointers, so that GCC vectorizes those loops. */
typedef struct {
  float *mean, *invstd, *scale, *shift;
} BnChannels;

static BnChannels
bn_channels(const float *mean, const float *invstd, const float *gamma, const float *beta,
            int channels)
{
  BnChannels p;
  p.mean = g_new(float, 4 * (size_t)channels);
  p.invstd = p.mean + channels;
  p.scale = p.invstd + channels;
  p.shift = p.scale + channels;
  memcpy(p.mean, mean, sizeof(float) * (size_t)channels);
  memcpy(p.invstd, invstd, sizeof(float) * (size_t)channels);
  /* As bn_forward computes them, so that the mask below has the forward's bits. */
  tdm_cpu_bn_affine(p.scale, p.shift, mean, invstd, gamma, beta, channels);
  return p;
}

/* One row's share of the sums. The ReLU's mask is a select, not a branch: which
 * values pass is as good as random, and a mispredicted branch per value cost more
 * than the rest of the loop (10 % of a resnet step, bench/NOTES.md). Each channel
 * adds its rows in order, in double, as before: vectorizing across channels changes
 * no bit. */
static inline void
bn_sums_row(double *restrict acc, double *restrict accb, const float *restrict xr,
            const float *restrict dr, const float *restrict mean,
            const float *restrict invstd, const float *restrict scale,
            const float *restrict shift, bool relu, int channels)
{
  if (relu) {
    for (int ch = 0; ch < channels; ch++) {
      const float x = xr[ch];
      /* dy's bits where the output passed, +0 elsewhere (what `? dy : 0.0f` gives):
       * GCC if-converts an integer mask here, not a float select whose value feeds a
       * double. */
      uint32_t bits;
      memcpy(&bits, dr + ch, sizeof bits);
      bits &= -(uint32_t)(x * scale[ch] + shift[ch] > 0.0f);
      float g;
      memcpy(&g, &bits, sizeof g);
      const float xhat = (x - mean[ch]) * invstd[ch];
      acc[ch] += (double)g * xhat;
      accb[ch] += g;
    }
    return;
  }
  for (int ch = 0; ch < channels; ch++) {
    const float g = dr[ch];
    const float xhat = (xr[ch] - mean[ch]) * invstd[ch];
    acc[ch] += (double)g * xhat;
    accb[ch] += g;
  }
}

BN_CLONES static void
bn_sums_rows(double *acc, double *accb, const float *x, const float *dy, const BnChannels *p,
             bool relu, int rows, int channels)
{
  for (int r = 0; r < rows; r++)
    bn_sums_row(acc, accb, x + (size_t)r * channels, dy + (size_t)r * channels, p->mean,
                p->invstd, p->scale, p->shift, relu, channels);
}

/* The sums' doubles (acc: Σ dy·xhat, then Σ dy) rounded into dgamma and dbeta, and the
 * scratch freed (acc and p's arrays). */
static void
bn_sums_finish(float *dgamma, float *dbeta, double *acc, BnChannels *p, int channels)
{
  for (int ch = 0; ch < channels; ch++) {
    dgamma[ch] = (float)acc[ch];
    dbeta[ch] = (float)acc[channels + ch];
  }
  g_free(acc);
  g_free(p->mean);
}

void
tdm_cpu_bn_backward_sums(TdmBackend *b, float *dgamma, float *dbeta, const void *dy,
                         TdmDtype dy_type, const void *x, TdmDtype x_type, const float *mean,
                         const float *invstd, const float *gamma, const float *beta, bool relu,
                         int rows, int channels)
{
  /* With a fused ReLU, g = dy where the forward's output x·scale + shift was positive:
   * the mask from x, computed as bn_forward computes it (the same bits). */
  BnChannels p = bn_channels(mean, invstd, gamma, beta, channels);
  double *acc = g_new0(double, 2 * (size_t)channels), *accb = acc + channels;
  float *tmp = block_scratch(x_type, rows, channels);
  float *dytmp = block_scratch(dy_type, rows, channels);
  const int block = block_rows(blocked_type(x_type, dy_type), rows, channels);
  for (int r = 0; r < rows; r += block) {
    const int count = MIN(block, rows - r);
    bn_sums_rows(acc, accb, rows_f32(x, x_type, r, count, channels, tmp),
                 rows_f32(dy, dy_type, r, count, channels, dytmp), &p, relu, count, channels);
  }
  g_free(dytmp);
  g_free(tmp);
  bn_sums_finish(dgamma, dbeta, acc, &p, channels);
}

/* A block start's rows [r, r + count) of dx = mask's bit ? a + share : 0 (mask NULL: no
 * ReLU) rounded once to bf16: add_relu_backward_bf16's bits with the skip's share, and
 * add_strided_bf16's then masked with a projection's (a + 0 where its conv reads no
 * value of the pixel, as add_strided_bf16 adds: −0 becomes +0). With no share, a alone
 * (not a + 0: −0 kept), and a bf16 a with neither share nor mask copied (a NaN's bits
 * kept, as the unfused copy keeps them). Each element is read before it is written. */
static void
block_start_rows(uint16_t *dx, const TdmBlockStart *in, int r, int count, int channels)
{
  const float *af = in->a_type == TDM_DTYPE_F32 ? in->a : NULL;
  const uint16_t *ah = in->a_type == TDM_DTYPE_BF16 ? in->a : NULL;
  const gboolean copy =
      ah != NULL && in->skip == NULL && in->strided == NULL && in->mask == NULL;
  for (size_t row = (size_t)r; row < (size_t)r + count; row++) {
    const float *xs = in->strided != NULL ? tdm_cpu_strided_row(in->strided, row, in->h, in->w,
                                                                channels, in->stride)
                                          : NULL;
    for (size_t i = row * channels; i < (row + 1) * channels; i++) {
      if (copy) {
        dx[i] = ah[i];
        continue;
      }
      float v = af != NULL ? af[i] : tdm_bf16_value(ah[i]);
      if (in->skip != NULL)
        v = v + tdm_bf16_value(in->skip[i]);
      else if (in->strided != NULL)
        v = v + (xs != NULL ? xs[i - row * channels] : 0.0f);
      dx[i] = tdm_bf16_round(in->mask == NULL || tdm_relu_bit_at(in->mask, i) ? v : 0.0f);
    }
  }
}

/* A residual block's start in backward and the sums of the bn below it in one pass: a
 * block of rows of dx (block_start_rows()), then that block widened and added into the
 * sums as bn_backward_sums adds its dy: every channel's rows in order, the same bits. dx
 * may be a or the skip where that one is bf16 (each element is read before it is
 * written), but not the projection's share (the front door checks). */
void
tdm_cpu_add_relu_backward_bn_sums_bf16(TdmBackend *b, uint16_t *dx, const TdmBlockStart *in,
                                       const void *x, TdmDtype x_type, const float *mean,
                                       const float *invstd, const float *gamma,
                                       const float *beta, bool relu, int rows, int channels,
                                       float *dgamma, float *dbeta)
{
  BnChannels p = bn_channels(mean, invstd, gamma, beta, channels);
  double *acc = g_new0(double, 2 * (size_t)channels), *accb = acc + channels;
  float *tmp = block_scratch(x_type, rows, channels);
  float *dytmp = block_scratch(TDM_DTYPE_BF16, rows, channels);
  const int block = block_rows(TDM_DTYPE_BF16, rows, channels);
  for (int r = 0; r < rows; r += block) {
    const int count = MIN(block, rows - r);
    block_start_rows(dx, in, r, count, channels);
    bn_sums_rows(acc, accb, rows_f32(x, x_type, r, count, channels, tmp),
                 rows_f32(dx, TDM_DTYPE_BF16, r, count, channels, dytmp), &p, relu, count,
                 channels);
  }
  g_free(dytmp);
  g_free(tmp);
  bn_sums_finish(dgamma, dbeta, acc, &p, channels);
}

/* One row of dx. out may be dr (dx == dy): each value is read before it is written at
 * the same index, so the loop vectorizes whatever the overlap (ivdep says so). */
static inline void
bn_dx_row(float *out, const float *dr, const float *restrict xr, const float *restrict k,
          const float *restrict a, const float *restrict c, const float *restrict scale,
          const float *restrict shift, bool relu, int channels)
{
  if (relu) {
#pragma GCC ivdep
    for (int ch = 0; ch < channels; ch++) {
      const float x = xr[ch], d = dr[ch];
      const float g = x * scale[ch] + shift[ch] > 0.0f ? d : 0.0f;
      out[ch] = k[ch] * g + a[ch] * x + c[ch];
    }
    return;
  }
#pragma GCC ivdep
  for (int ch = 0; ch < channels; ch++)
    out[ch] = k[ch] * dr[ch] + a[ch] * xr[ch] + c[ch];
}

BN_CLONES static void
bn_dx_rows(float *dx, const float *dy, const float *x, const float *k, const float *a,
           const float *c, const BnChannels *p, bool relu, int rows, int channels)
{
  for (int r = 0; r < rows; r++) {
    const size_t at = (size_t)r * channels;
    bn_dx_row(dx + at, dy + at, x + at, k, a, c, p->scale, p->shift, relu, channels);
  }
}

/* dx = k·g + a·x + c per channel, with k = γ·invstd, a = −k·invstd·Σdγ/M and
 * c = −k·Σdβ/M − a·mean: the same expression with xhat expanded; g as in the sums.
 * Rows at a time into dx, or through a float32 block rounded into dx16. */
static void
bn_backward_dx_any(float *dx, uint16_t *dx16, const void *dy, TdmDtype dy_type, const void *x,
                   TdmDtype x_type, const float *mean, const float *invstd, const float *gamma,
                   const float *beta, bool relu, const float *sum_dgamma,
                   const float *sum_dbeta, float inv_count, int rows, int channels)
{
  BnChannels p = bn_channels(mean, invstd, gamma, beta, channels);
  float *k = g_new(float, 3 * (size_t)channels), *a = k + channels, *c = a + channels;
  for (int ch = 0; ch < channels; ch++) {
    k[ch] = gamma[ch] * invstd[ch];
    a[ch] = -k[ch] * invstd[ch] * sum_dgamma[ch] * inv_count;
    c[ch] = -k[ch] * sum_dbeta[ch] * inv_count - a[ch] * mean[ch];
  }
  /* The float32 values bn_backward_dx would write, a block of rows at a time, each
   * rounded as to_bf16 rounds into dx16 when asked: the same bits as the two
   * operations. */
  const int block = dx16 != NULL ? MAX(1, BN_BLOCK_VALUES / channels)
                                 : block_rows(blocked_type(x_type, dy_type), rows, channels);
  float *xtmp = block_scratch(x_type, rows, channels);
  float *dytmp = block_scratch(dy_type, rows, channels);
  float *tmp = dx16 != NULL ? g_new(float, (size_t)block * channels) : NULL;
  for (int r = 0; r < rows; r += block) {
    const int count = MIN(block, rows - r);
    const size_t at = (size_t)r * channels, values = (size_t)count * channels;
    float *out = dx16 != NULL ? tmp : dx + at;
    bn_dx_rows(out, rows_f32(dy, dy_type, r, count, channels, dytmp),
               rows_f32(x, x_type, r, count, channels, xtmp), k, a, c, &p, relu, count,
               channels);
    for (size_t i = 0; dx16 != NULL && i < values; i++)
      dx16[at + i] = tdm_bf16_round(tmp[i]);
  }
  g_free(tmp);
  g_free(dytmp);
  g_free(xtmp);
  g_free(k);
  g_free(p.mean);
}

void
tdm_cpu_bn_backward_dx(TdmBackend *b, float *dx, const void *dy, TdmDtype dy_type,
                       const void *x, TdmDtype x_type, const float *mean, const float *invstd,
                       const float *gamma, const float *beta, bool relu,
                       const float *sum_dgamma, const float *sum_dbeta, float inv_count,
                       int rows, int channels)
{
  bn_backward_dx_any(dx, NULL, dy, dy_type, x, x_type, mean, invstd, gamma, beta, relu,
                     sum_dgamma, sum_dbeta, inv_count, rows, channels);
}

void
tdm_cpu_bn_backward_dx_bf16(TdmBackend *b, uint16_t *dx, const void *dy, TdmDtype dy_type,
                            const void *x, TdmDtype x_type, const float *mean,
                            const float *invstd, const float *gamma, const float *beta,
                            bool relu, const float *sum_dgamma, const float *sum_dbeta,
                            float inv_count, int rows, int channels)
{
  bn_backward_dx_any(NULL, dx, dy, dy_type, x, x_type, mean, invstd, gamma, beta, relu,
                     sum_dgamma, sum_dbeta, inv_count, rows, channels);
}
