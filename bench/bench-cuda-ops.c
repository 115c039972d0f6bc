/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-cuda-ops.c — microseconds per CUDA backend operation at the sizes of a CNN
 * layer at batch 256 (upload, gather, im2col, GEMMs, bias, ReLU, pooling, softmax,
 * Adam), issued back to back so the launch cost is included. A table on stdout, run
 * by hand on a GPU machine (record numbers in NOTES.md); exits 77 without a GPU.
 * Not a test: test-cuda-kernels.c checks these operations' results.
 */
#include "tdm-backend.h"
#include "tdm-build-config.h"
#include "tdm-error.h"

#include <stdint.h>
#include <stdio.h>

static TdmBackend *gpu;

static void *
on(TdmBackend *b, size_t bytes)
{
  g_autoptr(GError) error = NULL;
  void *d = tdm_backend_alloc(b, bytes, &error);
  if (d == NULL)
    g_error("%s", error->message);
  return d;
}

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
  s.x = on(gpu, (size_t)256 * 784 * 32 * 4);
  s.col = on(gpu, (size_t)256 * 784 * 288 * 4);
  s.w = on(gpu, (size_t)1000 * 784 * 4);
  s.y = on(gpu, act * 4);
  s.dy = on(gpu, act * 4);
  s.arg = on(gpu, act * 4);
  s.p = on(gpu, 1863690 * 4);
  s.g = on(gpu, 1863690 * 4);
  s.m = on(gpu, 1863690 * 4);
  s.v = on(gpu, 1863690 * 4);
  s.logits = on(gpu, 2560 * 4);
  s.dl = on(gpu, 2560 * 4);
  s.labels = on(gpu, 256 * 4);
  s.indices = on(gpu, 256 * 4);
  s.yl = on(gpu, 256 * 4);
  s.images = on(gpu, (size_t)60000 * 784);
  s.ilabels = on(gpu, 60000);
  s.metrics = on(gpu, sizeof(TdmMetrics));
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

int
main(void)
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
  run_bench();
  tdm_backend_free(gpu);
  return 0;
}
