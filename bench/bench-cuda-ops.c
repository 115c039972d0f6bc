/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-cuda-ops.c — microseconds per CUDA backend operation at the sizes of a CNN
 * layer at batch 256 (upload, gather, im2col, GEMMs, bias, ReLU, pooling, softmax,
 * Adam), issued back to back so the launch cost is included; then the memory-bound
 * passes of a bf16 CIFAR ResNet-18 step at batch 512 (batch norm's sums, forward and
 * backward, the strided residual add, the bf16 → float32 widening) at each stage's
 * size, timed with CUDA events on the backend's stream, with the bytes each moves
 * and the rate (GB/s) against the memory's; then a torchvision ResNet's stem at 224 px
 * and batch 128 (the photo gather with its normalization, the bf16 copy padded to 8
 * channels, the 3×3 stride-2 max pool both ways); then a projection block's start in
 * backward at CIFAR ResNet-18's three projections at 128 px, batch 128 (its compact
 * share added in a pass of its own and in the bn sums' pass). TANDEM_DESCENDING=0 walks
 * the bn's elementwise passes upwards (the pairs' rows say what the default's downward
 * walk gains). `bench-cuda-ops bn`, `bench-cuda-ops stem` and `bench-cuda-ops
 * projection` print only that table. A table on stdout, run by hand on a GPU machine
 * (record numbers in NOTES.md); exits 77 without a GPU. Not a test: test-cuda-kernels.c
 * and test-cuda-layers.c check these operations' results.
 */
#include "tdm-backend.h"
#include "tdm-backend-cuda.h"
#include "tdm-build-config.h"
#include "tdm-bench.h"
#include "tdm-error.h"
#include "tdm-kernels.h"
#include "tdm-relu-bits.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static TdmBackend *gpu;

static void
assert_ok(TdmBackend *b)
{
  g_autoptr(GError) error = NULL;
  if (!tdm_backend_check(b, &error))
    g_error("%s", error->message);
}

/* Timings: µs per operation, issued back to back (launch cost included), median of
 * five runs of 200 after a warm-up, at the sizes of a CNN layer at batch 256. */

typedef void (*BenchFn) (gpointer data);

static double
bench_us(BenchFn fn, gpointer data)
{
  for (int i = 0; i < 20; i++)
    fn(data);
  tdm_backend_synchronize(gpu);
  double runs[5];
  for (int k = 0; k < 5; k++) {
    gint64 t0 = g_get_monotonic_time();
    for (int i = 0; i < 200; i++)
      fn(data);
    tdm_backend_synchronize(gpu);
    runs[k] = (g_get_monotonic_time() - t0) / 200.0;
  }
  for (int a = 0; a < 5; a++)
    for (int b = a + 1; b < 5; b++)
      if (runs[b] < runs[a]) {
        double t = runs[a];
        runs[a] = runs[b];
        runs[b] = t;
      }
  return runs[2];
}

typedef struct {
  float *x, *col, *w, *y, *dy, *p, *g, *m, *v, *logits, *dl;
  int32_t *arg, *labels, *indices, *yl;
  uint8_t *images, *ilabels;
  TdmMetrics *metrics;
} Bench;

static void b_im2col(gpointer d) { Bench *s = d; tdm_backend_im2col(gpu, s->col, s->x, 256, 28, 28, 32, 3, 3, 1, 1); }
static void b_col2im(gpointer d) { Bench *s = d; tdm_backend_col2im(gpu, s->x, s->col, 256, 28, 28, 32, 3, 3, 1, 1); }
static void b_gemm_conv(gpointer d) { Bench *s = d; tdm_backend_gemm(gpu, false, true, 256 * 784, 64, 288, 1, s->col, 288, s->w, 288, 0, s->y, 64); }
static void b_gemm_mlp(gpointer d) { Bench *s = d; tdm_backend_gemm(gpu, false, true, 256, 1000, 784, 1, s->x, 784, s->w, 784, 0, s->y, 1000); }
static void b_bias(gpointer d) { Bench *s = d; tdm_backend_bias_forward(gpu, s->y, s->w, 256 * 784, 64, 1, true); }
static void b_bias_bw(gpointer d) { Bench *s = d; tdm_backend_bias_backward(gpu, s->w, s->y, 256 * 784, 64, 1); }
static void b_relu_bw(gpointer d) { Bench *s = d; tdm_backend_relu_backward(gpu, s->dy, s->dy, s->y, (size_t)256 * 784 * 64); }
static void b_pool(gpointer d) { Bench *s = d; tdm_backend_maxpool_forward(gpu, s->dy, s->arg, s->y, NULL, false, 256, 28, 28, 64, 2); }
static void b_pool_bw(gpointer d) { Bench *s = d; tdm_backend_maxpool_backward(gpu, s->y, NULL, s->dy, s->arg, NULL, 256, 28, 28, 64, 2); }
static void b_softmax(gpointer d) { Bench *s = d; tdm_backend_softmax_xent(gpu, s->logits, s->labels, 256, 10, 0.0f, 1.0f / 256, s->dl, s->metrics); }
static void b_gather(gpointer d) { Bench *s = d; tdm_backend_gather(gpu, s->x, s->yl, s->images, s->ilabels, s->indices, 256, 784, 1.0f / 255); }
static void b_adam(gpointer d) { Bench *s = d; tdm_backend_adam_update(gpu, s->p, s->g, s->m, s->v, 1863690, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, NULL); }
static void b_upload(gpointer d) { Bench *s = d; static int32_t idx[256]; tdm_backend_upload(gpu, s->indices, idx, sizeof idx); }

static void
run_bench(void)
{
  Bench s;
  size_t act = (size_t)256 * 784 * 64;
  s.x = tdm_bench_alloc(gpu, (size_t)256 * 784 * 32 * 4);
  s.col = tdm_bench_alloc(gpu, (size_t)256 * 784 * 288 * 4);
  s.w = tdm_bench_alloc(gpu, (size_t)1000 * 784 * 4);
  s.y = tdm_bench_alloc(gpu, act * 4);
  s.dy = tdm_bench_alloc(gpu, act * 4);
  s.arg = tdm_bench_alloc(gpu, act * 4);
  s.p = tdm_bench_alloc(gpu, 1863690 * 4);
  s.g = tdm_bench_alloc(gpu, 1863690 * 4);
  s.m = tdm_bench_alloc(gpu, 1863690 * 4);
  s.v = tdm_bench_alloc(gpu, 1863690 * 4);
  s.logits = tdm_bench_alloc(gpu, 2560 * 4);
  s.dl = tdm_bench_alloc(gpu, 2560 * 4);
  s.labels = tdm_bench_alloc(gpu, 256 * 4);
  s.indices = tdm_bench_alloc(gpu, 256 * 4);
  s.yl = tdm_bench_alloc(gpu, 256 * 4);
  s.images = tdm_bench_alloc(gpu, (size_t)60000 * 784);
  s.ilabels = tdm_bench_alloc(gpu, 60000);
  s.metrics = tdm_bench_alloc(gpu, sizeof(TdmMetrics));
  void *all[] = {s.x, s.col, s.w, s.y, s.dy, s.arg, s.p, s.g, s.m, s.v, s.logits, s.dl,
                 s.labels, s.indices, s.yl, s.images, s.ilabels, s.metrics};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_zero(gpu, all[i], 4);
  g_autofree float *ones = g_new(float, act);
  for (size_t i = 0; i < act; i++)
    ones[i] = (float)(i % 7) * 0.1f + 0.05f;
  tdm_backend_upload(gpu, s.y, ones, act * 4);
  tdm_backend_upload(gpu, s.x, ones, (size_t)256 * 784 * 32 * 4);
  tdm_backend_upload(gpu, s.col, ones, MIN(act, (size_t)256 * 784 * 288) * 4);
  tdm_backend_upload(gpu, s.w, ones, (size_t)1000 * 784 * 4);
  tdm_backend_upload(gpu, s.logits, ones, 2560 * 4);
  tdm_backend_upload(gpu, s.p, ones, 1863690 * 4);
  tdm_backend_upload(gpu, s.g, ones, 1863690 * 4);
  tdm_backend_zero(gpu, s.labels, 256 * 4);
  tdm_backend_zero(gpu, s.indices, 256 * 4);
  tdm_backend_zero(gpu, s.m, 1863690 * 4);
  tdm_backend_zero(gpu, s.v, 1863690 * 4);

  struct {
    const char *name;
    BenchFn fn;
  } ops[] = {
    {"upload 256 indices (ring)", b_upload},
    {"gather 256×784", b_gather},
    {"im2col 256×28×28×32 k3", b_im2col},
    {"col2im 256×28×28×32 k3", b_col2im},
    {"gemm conv 200704×64×288", b_gemm_conv},
    {"gemm mlp 256×1000×784", b_gemm_mlp},
    {"bias+relu 200704×64", b_bias},
    {"bias_backward 200704×64", b_bias_bw},
    {"relu_backward 12.8M", b_relu_bw},
    {"maxpool fwd 256×28×28×64", b_pool},
    {"maxpool bwd 256×28×28×64", b_pool_bw},
    {"softmax_xent 256×10", b_softmax},
    {"adam 1.86M params", b_adam},
  };
  for (guint i = 0; i < G_N_ELEMENTS(ops); i++) {
    double us = bench_us(ops[i].fn, &s);
    printf("%-28s %9.2f us\n", ops[i].name, us);
  }
  assert_ok(gpu);
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(gpu, all[i]);
}

/* The batch-norm table: µs per call by CUDA events around 200 calls back to back
 * (after 20 of warm-up), the median of five such runs. */

typedef struct {
  int rows, c;
  uint16_t *x16, *dy16, *out16, *bnx16;
  uint32_t *mask; /* x16's ReLU mask as bits, as a block's end writes it */
  float *a, *xs, *p, *sums, *slots, *wide;
} BnBench;

static double
events_us(BenchFn fn, gpointer data)
{
  cudaStream_t stream = tdm_backend_cuda_stream(gpu);
  cudaEvent_t e0, e1;
  if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
    g_error("cudaEventCreate failed");
  for (int i = 0; i < 20; i++)
    fn(data);
  double runs[5];
  for (int k = 0; k < 5; k++) {
    cudaEventRecord(e0, stream);
    for (int i = 0; i < 200; i++)
      fn(data);
    cudaEventRecord(e1, stream);
    cudaEventSynchronize(e1);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, e0, e1);
    runs[k] = ms * 1000.0 / 200.0;
  }
  assert_ok(gpu);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  for (int a = 0; a < 5; a++)
    for (int b = a + 1; b < 5; b++)
      if (runs[b] < runs[a]) {
        double t = runs[a];
        runs[a] = runs[b];
        runs[b] = t;
      }
  return runs[2];
}

#define BN_P(s, k) ((s)->p + (size_t)(k) * (s)->c)

static void
bn_moments_op(gpointer d)
{
  BnBench *s = d;
  tdm_backend_bn_moments(gpu, s->slots, s->x16, TDM_DTYPE_BF16, s->rows, s->c, 0, 1);
}

static void
bn_stats_op(gpointer d)
{
  BnBench *s = d;
  tdm_backend_bn_stats(gpu, s->sums, s->slots, 1, s->c, 1e-5f, 0.1f, BN_P(s, 4), BN_P(s, 5));
}

/* The two above in one launch (a bn not synchronized over replicas). */
static void
bn_moments_stats_op(gpointer d)
{
  BnBench *s = d;
  tdm_backend_bn_moments_stats(gpu, s->sums, s->slots, s->x16, TDM_DTYPE_BF16, s->rows, s->c,
                               1e-5f, 0.1f, BN_P(s, 4), BN_P(s, 5));
}

static void
bn_forward_op(gpointer d)
{
  BnBench *s = d;
  tdm_backend_bn_forward_bf16(gpu, s->out16, s->x16, TDM_DTYPE_BF16, BN_P(s, 0), BN_P(s, 1),
                              BN_P(s, 2), BN_P(s, 3), NULL, TDM_DTYPE_F32, s->rows, s->c, true,
                              NULL);
}

/* A block's end: its last bn, the bf16 skip added, the ReLU, stored as bf16 with its mask
 * as bits beside (the mask a sixteenth of the output's bytes). */
static void
bn_end_op(gpointer d)
{
  BnBench *s = d;
  tdm_backend_bn_forward_bf16(gpu, s->out16, s->x16, TDM_DTYPE_BF16, BN_P(s, 0), BN_P(s, 1),
                              BN_P(s, 2), BN_P(s, 3), s->dy16, TDM_DTYPE_BF16, s->rows, s->c,
                              true, s->mask);
}

static void
bn_sums_op(gpointer d)
{
  BnBench *s = d;
  tdm_backend_bn_backward_sums(gpu, s->sums, s->sums + s->c, s->dy16, TDM_DTYPE_BF16, s->x16,
                               TDM_DTYPE_BF16, BN_P(s, 0), BN_P(s, 1), BN_P(s, 2), BN_P(s, 3),
                               true, s->rows, s->c);
}

static void
bn_dx_op(gpointer d)
{
  BnBench *s = d;
  tdm_backend_bn_backward_dx_bf16(gpu, s->out16, s->dy16, TDM_DTYPE_BF16, s->x16,
                                  TDM_DTYPE_BF16, BN_P(s, 0), BN_P(s, 1), BN_P(s, 2),
                                  BN_P(s, 3), true, BN_P(s, 4), BN_P(s, 5), 1.0f / s->rows,
                                  s->rows, s->c);
}

/* An elementwise pass right after a pass over the same tensor, as a step runs them: the
 * moments then a block's end, the backward sums then the input gradient. The second walks
 * downwards unless TANDEM_DESCENDING=0, to find the first's last reads in L2: run the
 * table both ways to see what that gains (and the next pair's first pass, upwards again,
 * finds the second's last in turn, as a conv reading its input from the start does). */
static void
moments_then_end_op(gpointer d)
{
  bn_moments_op(d);
  bn_end_op(d);
}

static void
sums_then_dx_op(gpointer d)
{
  bn_sums_op(d);
  bn_dx_op(d);
}

/* A stride-2 block's input gradient: the first conv's (float32, full size) plus the
 * projection's (float32, a quarter), rounded to bf16. Rows = n · h · w. */
static void
add_strided_op(gpointer d)
{
  BnBench *s = d;
  tdm_backend_add_strided_bf16(gpu, s->out16, TDM_DTYPE_BF16, s->a, TDM_DTYPE_F32, s->xs,
                               s->rows / 1024, 32, 32, s->c, 2);
}

/* A block's start in backward as it was: the first conv's float32 input gradient plus
 * the bf16 skip share rounded into the skip buffer, then the ReLU mask of the end below
 * in place; and as it is: the conv's bf16 gradient summed and masked in one pass (the
 * mask as bits). */
static void
block_start_unfused_op(gpointer d)
{
  BnBench *s = d;
  size_t n = (size_t)s->rows * s->c;
  tdm_backend_add_out_bf16(gpu, s->out16, s->a, s->dy16, TDM_DTYPE_BF16, n, false, NULL);
  tdm_backend_relu_backward_bf16(gpu, s->out16, TDM_DTYPE_BF16, s->out16, TDM_DTYPE_BF16,
                                 s->mask, n);
}

static void
block_start_fused_op(gpointer d)
{
  BnBench *s = d;
  tdm_backend_add_relu_backward_bf16(gpu, s->out16, s->dy16, TDM_DTYPE_BF16, s->out16,
                                     TDM_DTYPE_BF16, s->mask, (size_t)s->rows * s->c);
}

/* The block start then the sums of the bn below it (its input bnx16), as two passes and
 * as one (add_relu_backward_bn_sums_bf16). */
static void
start_then_sums_op(gpointer d)
{
  BnBench *s = d;
  block_start_fused_op(d);
  tdm_backend_bn_backward_sums(gpu, s->sums, s->sums + s->c, s->out16, TDM_DTYPE_BF16,
                               s->bnx16, TDM_DTYPE_BF16, BN_P(s, 0), BN_P(s, 1), BN_P(s, 2),
                               BN_P(s, 3), false, s->rows, s->c);
}

static void
start_sums_op(gpointer d)
{
  BnBench *s = d;
  TdmBlockStart in = {
      .a = s->dy16, .a_type = TDM_DTYPE_BF16, .skip = s->out16, .mask = s->mask};
  tdm_backend_add_relu_backward_bn_sums_bf16(gpu, s->out16, &in, s->bnx16, TDM_DTYPE_BF16,
                                             BN_P(s, 0), BN_P(s, 1), BN_P(s, 2), BN_P(s, 3),
                                             false, s->rows, s->c, s->sums, s->sums + s->c);
}

static void
from_bf16_op(gpointer d)
{
  BnBench *s = d;
  tdm_backend_from_bf16(gpu, s->wide, s->x16, (size_t)s->rows * s->c);
}

/* The memory-bound passes' inputs: n bf16 values of 0.125 … 2 (by a hash of their index)
 * into each of the `count` tensors, their ReLU mask as bits into mask (allocated here),
 * and sets · c bn parameters into p, the first set (the mean) 0.3, the others 1. */
static uint32_t *
bench_inputs(uint16_t *const *tensors, guint count, size_t n, float *p, int sets, int c)
{
  g_autofree uint16_t *h16 = g_new(uint16_t, n);
  for (size_t i = 0; i < n; i++)
    h16[i] = (uint16_t)(0x3e00 + (i * 2654435761u >> 20) % 512);
  for (guint k = 0; k < count; k++)
    tdm_backend_upload(gpu, tensors[k], h16, n * 2);
  g_autofree uint32_t *hmask = g_new(uint32_t, TDM_RELU_BITS_WORDS(n));
  tdm_relu_bits_of(hmask, h16, n);
  uint32_t *mask = tdm_bench_alloc(gpu, TDM_RELU_BITS_WORDS(n) * 4);
  tdm_backend_upload(gpu, mask, hmask, TDM_RELU_BITS_WORDS(n) * 4);
  g_autofree float *hp = g_new(float, (size_t)sets *c);
  for (size_t i = 0; i < (size_t)sets * c; i++)
    hp[i] = i < (size_t)c ? 0.3f : 1.0f;
  tdm_backend_upload(gpu, p, hp, (size_t)sets * c * 4);
  return mask;
}

static void
run_bn_bench(void)
{
  /* CIFAR ResNet-18 at batch 512: each stage's rows (images × pixels) and channels. */
  static const int stages[][2] = {{512 * 32 * 32, 64}, {512 * 16 * 16, 128},
                                  {512 * 8 * 8, 256}, {512 * 4 * 4, 512}};
  printf("\n%-34s %9s %9s %9s\n", "bf16 ResNet-18 b512 pass", "us", "MB", "GB/s");
  for (guint k = 0; k < G_N_ELEMENTS(stages); k++) {
    BnBench s = {.rows = stages[k][0], .c = stages[k][1]};
    size_t n = (size_t)s.rows * s.c;
    s.x16 = tdm_bench_alloc(gpu, n * 2);
    s.dy16 = tdm_bench_alloc(gpu, n * 2);
    s.out16 = tdm_bench_alloc(gpu, n * 2);
    s.bnx16 = tdm_bench_alloc(gpu, n * 2);
    s.a = tdm_bench_alloc(gpu, n * 4);
    s.xs = tdm_bench_alloc(gpu, n);
    s.wide = tdm_bench_alloc(gpu, n * 4);
    s.p = tdm_bench_alloc(gpu, 6 * (size_t)s.c * 4);
    s.sums = tdm_bench_alloc(gpu, 2 * (size_t)s.c * 4);
    s.slots = tdm_bench_alloc(gpu, (3 * (size_t)s.c + 2) * 4);
    s.mask = bench_inputs((uint16_t *[]){s.x16, s.dy16, s.bnx16}, 3, n, s.p, 6, s.c);
    tdm_backend_zero(gpu, s.a, n * 4);
    tdm_backend_zero(gpu, s.xs, n);
    /* MB: a bf16 tensor's; a mask of bits is a sixteenth of it. */
    double mb = (double)n * 2 / 1e6, bits = mb / 16;
    struct {
      const char *name;
      BenchFn fn;
      double mb;
    } ops[] = {
      {"bn_moments", bn_moments_op, mb},
      {"bn_stats", bn_stats_op, 0.0},
      {"bn_moments_stats", bn_moments_stats_op, mb},
      {"bn_forward_bf16 relu", bn_forward_op, 2 * mb},
      {"bn_forward_bf16 + skip, relu, mask", bn_end_op, 3 * mb + bits},
      {"bn_backward_sums relu", bn_sums_op, 2 * mb},
      {"bn_backward_dx_bf16 relu", bn_dx_op, 3 * mb},
      {"moments, then the end", moments_then_end_op, 4 * mb + bits},
      {"bn sums, then dx", sums_then_dx_op, 5 * mb},
      {"add_strided_bf16 stride 2", add_strided_op, 3 * mb + mb / 2},
      {"block start, unfused", block_start_unfused_op, 6 * mb + bits},
      {"add_relu_backward_bf16", block_start_fused_op, 3 * mb + bits},
      {"start, then bn sums", start_then_sums_op, 5 * mb + bits},
      {"add_relu_backward_bn_sums_bf16", start_sums_op, 4 * mb + bits},
      {"from_bf16", from_bf16_op, 3 * mb},
    };
    for (guint i = 0; i < G_N_ELEMENTS(ops); i++) {
      double us = events_us(ops[i].fn, &s);
      g_autofree char *what = g_strdup_printf("%s %d×%d", ops[i].name, s.rows, s.c);
      printf("%-34s %9.2f %9.1f %9.0f\n", what, us, ops[i].mb, ops[i].mb * 1e6 / (us * 1e3));
    }
    void *all[] = {s.x16,  s.dy16, s.out16, s.bnx16, s.mask,
                   s.a,    s.xs,   s.wide,  s.p,     s.sums, s.slots};
    for (guint i = 0; i < G_N_ELEMENTS(all); i++)
      tdm_backend_release(gpu, all[i]);
  }
}

/* The stem of a torchvision ResNet at 224 px, batch 128, bf16: the photo batch's
 * gather with its normalization (in the gather's pass, and as the two passes it was),
 * the 8-channel bf16 copy cuDNN's stem plan reads, and the 3×3 stride-2 max pool over
 * 112×112×64 both ways. */

enum { STEM_N = 128, STEM_PX = 224, STEM_POOL_IN = 112, STEM_POOL_OUT = 56, STEM_C = 64 };

typedef struct {
  uint8_t *images, *labels;
  int32_t *indices, *y;
  float *x;
  uint16_t *padded, *pool_x, *pool_y, *pool_dy, *pool_dx;
  void *argmax;
  TdmPhotoAugment augment;
  TdmChannelAffine affine;
  TdmPool2d pool;
} StemBench;

static void
photo_normalized_op(gpointer d)
{
  StemBench *s = d;
  TdmPhotoAugment a = s->augment;
  a.normalize = 1;
  memcpy(a.mul, s->affine.mul, sizeof a.mul);
  memcpy(a.add, s->affine.add, sizeof a.add);
  tdm_backend_gather_photo(gpu, s->x, s->y, s->images, s->labels, s->indices, STEM_N,
                           STEM_PX, STEM_PX, 3, &a, 7, 1);
}

static void
photo_then_affine_op(gpointer d)
{
  StemBench *s = d;
  tdm_backend_gather_photo(gpu, s->x, s->y, s->images, s->labels, s->indices, STEM_N,
                           STEM_PX, STEM_PX, 3, &s->augment, 7, 1);
  tdm_backend_channel_affine(gpu, s->x, (size_t)STEM_N * STEM_PX * STEM_PX, s->affine);
}

static void
padded_op(gpointer d)
{
  StemBench *s = d;
  if (tdm_k_to_bf16_padded(s->padded, s->x, (size_t)STEM_N * STEM_PX * STEM_PX, 3, 8,
                           tdm_backend_cuda_stream(gpu)) != cudaSuccess)
    g_error("to_bf16_padded failed");
}

static void
pool_forward_op(gpointer d)
{
  StemBench *s = d;
  tdm_backend_maxpool2d_forward(gpu, s->pool_y, TDM_DTYPE_BF16, s->argmax, s->pool_x,
                                TDM_DTYPE_BF16, s->pool);
}

static void
pool_backward_op(gpointer d)
{
  StemBench *s = d;
  tdm_backend_maxpool2d_backward(gpu, s->pool_dx, TDM_DTYPE_BF16, s->pool_dy, TDM_DTYPE_BF16,
                                 s->argmax, s->pool);
}

static void
run_stem_bench(void)
{
  StemBench s = {
    .pool = {STEM_N, STEM_POOL_IN, STEM_POOL_IN, STEM_C, 3, 2, 1, STEM_POOL_OUT, STEM_POOL_OUT},
    .affine = {.channels = 3, .mul = {1 / 0.229f, 1 / 0.224f, 1 / 0.225f},
               .add = {-0.485f / 0.229f, -0.456f / 0.224f, -0.406f / 0.225f}},
  };
  const int samples = 256;
  size_t image = (size_t)STEM_PX * STEM_PX * 3, pixels = (size_t)STEM_N * STEM_PX * STEM_PX;
  size_t pool_in = (size_t)STEM_N * STEM_POOL_IN * STEM_POOL_IN * STEM_C;
  size_t pool_out = (size_t)STEM_N * STEM_POOL_OUT * STEM_POOL_OUT * STEM_C;
  s.images = tdm_bench_alloc(gpu, samples * image);
  s.labels = tdm_bench_alloc(gpu, samples);
  s.indices = tdm_bench_alloc(gpu, STEM_N * sizeof(int32_t));
  s.y = tdm_bench_alloc(gpu, STEM_N * sizeof(int32_t));
  s.x = tdm_bench_alloc(gpu, pixels * 3 * sizeof(float));
  s.padded = tdm_bench_alloc(gpu, pixels * 8 * 2);
  s.pool_x = tdm_bench_alloc(gpu, pool_in * 2);
  s.pool_dx = tdm_bench_alloc(gpu, pool_in * 2);
  s.pool_y = tdm_bench_alloc(gpu, pool_out * 2);
  s.pool_dy = tdm_bench_alloc(gpu, pool_out * 2);
  s.argmax = tdm_bench_alloc(gpu, pool_out * tdm_pool2d_argmax_size(s.pool.k));
  g_autofree uint8_t *host = g_new(uint8_t, samples * image);
  for (size_t i = 0; i < samples * image; i++)
    host[i] = (uint8_t)(i * 2654435761u >> 24);
  tdm_backend_upload(gpu, s.images, host, samples * image);
  tdm_backend_zero(gpu, s.labels, samples);
  int32_t idx[STEM_N];
  for (int i = 0; i < STEM_N; i++)
    idx[i] = (i * 37) % samples;
  tdm_backend_upload(gpu, s.indices, idx, sizeof idx);
  g_autofree uint16_t *h16 = g_new(uint16_t, pool_in);
  for (size_t i = 0; i < pool_in; i++)
    h16[i] = (uint16_t)(0x3e00 + (i * 2654435761u >> 20) % 512);
  tdm_backend_upload(gpu, s.pool_x, h16, pool_in * 2);
  tdm_backend_upload(gpu, s.pool_dy, h16, pool_out * 2);
  /* The photo recipe's crop and flip; the jitter row adds contrast, whose box mean
   * takes one block a sample. */
  TdmPhotoAugment crop = {.scale_min = 0.08f, .scale_max = 1.0f, .ratio_min = 0.75f,
                          .ratio_max = 4.0f / 3.0f, .flip = 1};
  TdmPhotoAugment jitter = crop;
  jitter.jitter[0] = jitter.jitter[1] = jitter.jitter[2] = 0.4f;
  double batch_mb = pixels * 3 * 4 / 1e6, source_mb = STEM_N * image / 1e6;
  /* The bf16 output (2 bytes an element) and the argmax (a byte: a 3×3 window's position)
   * move 1.5 times out_mb. */
  double in_mb = pool_in * 2 / 1e6, out_mb = pool_out * 2 / 1e6;
  struct {
    const char *name;
    BenchFn fn;
    const TdmPhotoAugment *augment;
    double mb;
  } ops[] = {
    {"gather_photo normalized, crop", photo_normalized_op, &crop, batch_mb + source_mb},
    {"gather_photo + channel_affine, crop", photo_then_affine_op, &crop,
     3 * batch_mb + source_mb},
    {"gather_photo normalized, jitter", photo_normalized_op, &jitter, batch_mb + source_mb},
    {"gather_photo + channel_affine, jitter", photo_then_affine_op, &jitter,
     3 * batch_mb + source_mb},
    {"to_bf16_padded 3 → 8", padded_op, &crop, batch_mb + pixels * 8 * 2 / 1e6},
    {"maxpool2d_forward bf16", pool_forward_op, &crop, in_mb + 1.5 * out_mb},
    {"maxpool2d_backward bf16", pool_backward_op, &crop, 1.5 * out_mb + in_mb},
  };
  printf("\n%-40s %9s %9s %9s\n", "ResNet stem, 224 px, batch 128", "us", "MB", "GB/s");
  for (guint i = 0; i < G_N_ELEMENTS(ops); i++) {
    s.augment = *ops[i].augment;
    double us = events_us(ops[i].fn, &s);
    printf("%-40s %9.2f %9.1f %9.0f\n", ops[i].name, us, ops[i].mb,
           ops[i].mb * 1e6 / (us * 1e3));
  }
  void *all[] = {s.images, s.labels, s.indices, s.y, s.x, s.padded, s.pool_x, s.pool_dx,
                 s.pool_y, s.pool_dy, s.argmax};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(gpu, all[i]);
}

/* A projection block's start in backward, with the sums of the bn below it (the last
 * bn of the block before, no ReLU of its own): the first conv's bf16 input gradient a,
 * the projection's compact float32 one (a quarter of the pixels at stride 2), the ReLU
 * mask of the block's end below. As two passes (add_strided_bf16 in place over a, then
 * add_relu_backward_bn_sums_bf16 with no share) and as one (the share added as a is
 * read), at the shapes of CIFAR ResNet-18's three projections at 128 px, batch 128. */
typedef struct {
  int images, h, w, c;
  uint16_t *a16, *x16, *dx16;
  float *share, *p, *sums;
  uint32_t *mask;
} ProjectionBench;

static void
projection_start(ProjectionBench *s, const float *share)
{
  TdmBlockStart in = {.a = s->a16,
                      .a_type = TDM_DTYPE_BF16,
                      .strided = share,
                      .h = s->h,
                      .w = s->w,
                      .stride = 2,
                      .mask = s->mask};
  const float *p = s->p;
  size_t c = (size_t)s->c;
  tdm_backend_add_relu_backward_bn_sums_bf16(
      gpu, s->dx16, &in, s->x16, TDM_DTYPE_BF16, p, p + c, p + 2 * c, p + 3 * c, false,
      s->images * s->h * s->w, s->c, s->sums, s->sums + c);
}

static void
projection_add_op(gpointer d)
{
  ProjectionBench *s = d;
  tdm_backend_add_strided_bf16(gpu, s->a16, TDM_DTYPE_BF16, s->a16, TDM_DTYPE_BF16, s->share,
                               s->images, s->h, s->w, s->c, 2);
}

static void
projection_sums_op(gpointer d)
{
  projection_start(d, NULL);
}

static void
projection_two_passes_op(gpointer d)
{
  projection_add_op(d);
  projection_sums_op(d);
}

static void
projection_one_pass_op(gpointer d)
{
  ProjectionBench *s = d;
  projection_start(s, s->share);
}

static void
run_projection_bench(void)
{
  /* Each projection's block input: images, h, w, channels. */
  static const int starts[][4] = {{128, 128, 128, 64}, {128, 64, 64, 128}, {128, 32, 32, 256}};
  printf("\n%-40s %9s %9s %9s\n", "projection start, CIFAR R18 128 px b128", "us", "MB",
         "GB/s");
  for (guint k = 0; k < G_N_ELEMENTS(starts); k++) {
    ProjectionBench s = {starts[k][0], starts[k][1], starts[k][2], starts[k][3]};
    size_t n = (size_t)s.images * s.h * s.w * s.c;
    size_t compact = (size_t)s.images * ((s.h + 1) / 2) * ((s.w + 1) / 2) * s.c;
    s.a16 = tdm_bench_alloc(gpu, n * 2);
    s.x16 = tdm_bench_alloc(gpu, n * 2);
    s.dx16 = tdm_bench_alloc(gpu, n * 2);
    s.share = tdm_bench_alloc(gpu, compact * 4);
    s.p = tdm_bench_alloc(gpu, 4 * (size_t)s.c * 4);
    s.sums = tdm_bench_alloc(gpu, 2 * (size_t)s.c * 4);
    s.mask = bench_inputs((uint16_t *[]){s.x16, s.a16}, 2, n, s.p, 4, s.c);
    /* Zeros: a stays the same through the in-place adds of the timing loop. */
    tdm_backend_zero(gpu, s.share, compact * 4);
    /* MB: a bf16 tensor's; the share's float32 values, the mask a sixteenth. */
    double mb = (double)n * 2 / 1e6, share = (double)compact * 4 / 1e6, bits = mb / 16;
    struct {
      const char *name;
      BenchFn fn;
      double mb;
    } ops[] = {
        {"add_strided_bf16 in place", projection_add_op, 2 * mb + share},
        {"start sums, no share", projection_sums_op, 3 * mb + bits},
        {"the two", projection_two_passes_op, 5 * mb + share + bits},
        {"start sums with the share", projection_one_pass_op, 3 * mb + share + bits},
    };
    for (guint i = 0; i < G_N_ELEMENTS(ops); i++) {
      double us = events_us(ops[i].fn, &s);
      g_autofree char *what =
          g_strdup_printf("%s %d×%d×%d×%d", ops[i].name, s.images, s.h, s.w, s.c);
      printf("%-40s %9.2f %9.1f %9.0f\n", what, us, ops[i].mb, ops[i].mb * 1e6 / (us * 1e3));
    }
    void *all[] = {s.a16, s.x16, s.dx16, s.share, s.p, s.sums, s.mask};
    for (guint i = 0; i < G_N_ELEMENTS(all); i++)
      tdm_backend_release(gpu, all[i]);
  }
}

int
main(int argc, char **argv)
{
  if (!tdm_backend_cuda_available()) {
    fprintf(stderr, "bench-cuda-ops: no CUDA GPU\n");
    return 77;
  }
  g_autoptr(GError) error = NULL;
  gpu = tdm_backend_cuda_new(0, TDM_PRECISION_FP32, &error);
  if (gpu == NULL) {
    fprintf(stderr, "bench-cuda-ops: %s\n", error->message);
    return 1;
  }
  const char *only = argc > 1 ? argv[1] : "";
  if (only[0] == '\0')
    run_bench();
  if (only[0] == '\0' || strcmp(only, "bn") == 0)
    run_bn_bench();
  if (only[0] == '\0' || strcmp(only, "stem") == 0)
    run_stem_bench();
  if (only[0] == '\0' || strcmp(only, "projection") == 0)
    run_projection_bench();
  tdm_backend_free(gpu);
  return 0;
}
