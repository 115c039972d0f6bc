/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-cnn-ops.c — where one training step's time goes, operation by operation, as
 * a table.
 *
 * It builds one replica of a network (cnn by default) on cuda:0 (or the CPU) over a
 * synthetic dataset, swaps the backend's operation table for one that brackets every
 * operation with CUDA events (host clock reads on the CPU), runs steps without a
 * graph and prints each operation's median time over the timed steps. Then it times
 * whole steps as the trainer issues them (the captured graph, then the Adam update)
 * for the total. With --gemms it times only the GEMMs of the weight gradients, the
 * shapes cuBLAS handles worst (TDM_CUDA_SPLIT_K=0 or N: without split-K, N chunks). Not a test: it checks nothing but CUDA's errors.
 *
 *   bench-cnn-ops --batch 1024           one table
 *   bench-cnn-ops                        batch 100 and 1024
 *   bench-cnn-ops --device cpu --batch 1024 --steps 3
 */
#include "tdm-build-config.h"
#include "tdm-backend-ops.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-network.h"
#include "tdm-replica.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if TDM_HAVE_CUDA
#include "tdm-backend-cuda.h"
#include <cuda_runtime.h>

#define MAX_OPS 128
#define MAX_STEPS 32

typedef struct {
  char name[24];
  char shape[48];
} OpLabel;

/* One step's records: the i-th operation issued, its label and its two events. */
static struct {
  const TdmBackendOps *real;
  TdmBackend *b;
  gboolean cuda;               /* else the CPU: host clock, µs */
  cudaStream_t stream;
  OpLabel labels[MAX_OPS];
  cudaEvent_t start[MAX_STEPS][MAX_OPS], end[MAX_STEPS][MAX_OPS];
  gint64 host_start[MAX_STEPS][MAX_OPS], host_end[MAX_STEPS][MAX_OPS];
  int step, count;
  gboolean failed;
} T;

static void
check(cudaError_t err, const char *what)
{
  if (err != cudaSuccess && !T.failed) {
    g_printerr("bench-cnn-ops: %s: %s\n", what, cudaGetErrorString(err));
    T.failed = TRUE;
  }
}

static int
begin(const char *name, const char *format, ...) G_GNUC_PRINTF(2, 3);

static int
begin(const char *name, const char *format, ...)
{
  int i = T.count++;
  if (i >= MAX_OPS) {
    T.failed = TRUE;
    return -1;
  }
  if (T.step == 0) {
    va_list args;
    va_start(args, format);
    g_strlcpy(T.labels[i].name, name, sizeof T.labels[i].name);
    g_vsnprintf(T.labels[i].shape, sizeof T.labels[i].shape, format, args);
    va_end(args);
  }
  if (T.cuda)
    check(cudaEventRecord(T.start[T.step][i], T.stream), "cudaEventRecord");
  else
    T.host_start[T.step][i] = g_get_monotonic_time();
  return i;
}

static void
end(int i)
{
  if (i < 0)
    return;
  if (T.cuda)
    check(cudaEventRecord(T.end[T.step][i], T.stream), "cudaEventRecord");
  else
    T.host_end[T.step][i] = g_get_monotonic_time();
}

static void
t_gemm(TdmBackend *b, bool ta, bool tb, int m, int n, int k, float alpha, const float *a,
       int lda, const float *bm, int ldb, float beta, float *c, int ldc)
{
  int i = begin("gemm", "%d×%d×%d %c%c", m, n, k, ta ? 'T' : 'N', tb ? 'T' : 'N');
  T.real->gemm(b, ta, tb, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc);
  end(i);
}

static void
t_bias_forward(TdmBackend *b, float *y, const float *bias, int outer, int channels,
               int inner, bool relu)
{
  int i = begin("bias_forward", "%d×%d%s", outer, channels, relu ? " relu" : "");
  T.real->bias_forward(b, y, bias, outer, channels, inner, relu);
  end(i);
}

static void
t_bias_backward(TdmBackend *b, float *dbias, const float *dy, int outer, int channels,
                int inner)
{
  int i = begin("bias_backward", "%d×%d", outer, channels);
  T.real->bias_backward(b, dbias, dy, outer, channels, inner);
  end(i);
}

static void
t_relu_backward(TdmBackend *b, float *dx, const float *dy, const float *y, size_t n)
{
  int i = begin("relu_backward", "%zu", n);
  T.real->relu_backward(b, dx, dy, y, n);
  end(i);
}

static void
t_im2col(TdmBackend *b, float *col, const float *x, int n, int h, int w, int c, int kh,
         int kw, int pad, int stride)
{
  int i = begin("im2col", "%d×%d×%d×%d k%d s%d", n, h, w, c, kh, stride);
  T.real->im2col(b, col, x, n, h, w, c, kh, kw, pad, stride);
  end(i);
}

static void
t_col2im(TdmBackend *b, float *dx, const float *col, int n, int h, int w, int c, int kh,
         int kw, int pad, int stride)
{
  int i = begin("col2im", "%d×%d×%d×%d k%d s%d", n, h, w, c, kh, stride);
  T.real->col2im(b, dx, col, n, h, w, c, kh, kw, pad, stride);
  end(i);
}

static void
t_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x, const float *bias,
                  bool relu, int n, int h, int w, int c, int k)
{
  int i = begin("maxpool_forward", "%d×%d×%d×%d%s%s", n, h, w, c, bias ? " bias" : "",
                relu ? " relu" : "");
  T.real->maxpool_forward(b, y, argmax, x, bias, relu, n, h, w, c, k);
  end(i);
}

static void
t_maxpool_backward(TdmBackend *b, float *dx, float *dbias, const float *dy,
                   const int32_t *argmax, const float *y, int n, int h, int w, int c, int k)
{
  int i = begin("maxpool_backward", "%d×%d×%d×%d%s%s", n, h, w, c, y ? " masked" : "",
                dbias ? " dbias" : "");
  T.real->maxpool_backward(b, dx, dbias, dy, argmax, y, n, h, w, c, k);
  end(i);
}

static void
t_conv_pool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x, const float *wt,
                    const float *bias, bool relu, int n, int h, int w, int c, int out, int kh,
                    int kw, int pad, int pk)
{
  int i = begin("conv_pool_forward", "%d×%d×%d×%d→%d k%d pool%d", n, h, w, c, out, kh, pk);
  T.real->conv_pool_forward(b, y, argmax, x, wt, bias, relu, n, h, w, c, out, kh, kw, pad, pk);
  end(i);
}

static void
t_conv_pool_backward(TdmBackend *b, float *dwt, float *dbias, const float *dy,
                     const int32_t *argmax, const float *y, const float *x, bool relu, int n,
                     int h, int w, int c, int out, int kh, int kw, int pad, int pk)
{
  int i = begin("conv_pool_backward", "%d×%d×%d×%d→%d k%d pool%d", n, h, w, c, out, kh, pk);
  T.real->conv_pool_backward(b, dwt, dbias, dy, argmax, y, x, relu, n, h, w, c, out, kh, kw,
                             pad, pk);
  end(i);
}

static void
t_softmax_xent(TdmBackend *b, const float *logits, const int32_t *labels, int rows,
               int classes, float smoothing, float grad_scale, float *dlogits,
               TdmMetrics *metrics)
{
  int i = begin("softmax_xent", "%d×%d", rows, classes);
  T.real->softmax_xent(b, logits, labels, rows, classes, smoothing, grad_scale, dlogits,
                       metrics);
  end(i);
}

static void
t_gather(TdmBackend *b, float *x, int32_t *y, const uint8_t *images, const uint8_t *labels,
         const int32_t *indices, int count, int sample_size, float scale)
{
  int i = begin("gather", "%d×%d", count, sample_size);
  T.real->gather(b, x, y, images, labels, indices, count, sample_size, scale);
  end(i);
}

static void
t_adam_update(TdmBackend *b, float *p, const float *g, float *m, float *v, size_t n,
              float lr_t, float beta1, float beta2, float eps, float weight_decay,
              const float *rates)
{
  int i = begin("adam_update", "%zu", n);
  T.real->adam_update(b, p, g, m, v, n, lr_t, beta1, beta2, eps, weight_decay, rates);
  end(i);
}

static int
compare_floats(const void *a, const void *b)
{
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* A replica of `network` for `batch` samples on a fresh cuda:0 backend. */
typedef struct {
  TdmBackend *b;
  TdmNetwork *net;
  TdmDatasetPair *data;
  TdmReplica *r;
  float *m, *v;
  int32_t *indices;
} Setup;

static gboolean
setup(Setup *s, const char *device, const char *network, int batch, TdmPrecision precision)
{
  g_autoptr(GError) error = NULL;
  memset(s, 0, sizeof *s);
  TdmDeviceId id;
  s->b = tdm_device_id_parse(device, &id) ? tdm_backend_new(id, precision, &error) : NULL;
  s->data = tdm_dataset_synthetic(7, 60000, 1000);
  s->net = s->b ? tdm_network_new(network, 28, 28, 1, 10, &error) : NULL;
  s->r = s->net ? tdm_replica_new(s->b, s->net, batch, s->data->train, s->data->test, &error)
                : NULL;
  if (s->r == NULL) {
    g_printerr("bench-cnn-ops: %s\n", error ? error->message : "no replica");
    return FALSE;
  }
  g_autofree float *p = g_new(float, s->net->parameter_count);
  tdm_network_init_parameters(s->net, 1, p);
  tdm_backend_upload(s->b, s->r->params, p, s->net->parameter_count * sizeof(float));
  s->m = tdm_backend_alloc(s->b, s->net->parameter_count * sizeof(float), NULL);
  s->v = tdm_backend_alloc(s->b, s->net->parameter_count * sizeof(float), NULL);
  tdm_backend_zero(s->b, s->m, s->net->parameter_count * sizeof(float));
  tdm_backend_zero(s->b, s->v, s->net->parameter_count * sizeof(float));
  s->indices = g_new(int32_t, batch);
  for (int i = 0; i < batch; i++)
    s->indices[i] = (i * 7919) % 60000;
  return tdm_backend_check(s->b, NULL);
}

static void
teardown(Setup *s)
{
  if (s->b != NULL) {
    tdm_backend_release(s->b, s->m);
    tdm_backend_release(s->b, s->v);
  }
  tdm_replica_free(s->r);
  tdm_network_free(s->net);
  tdm_dataset_pair_free(s->data);
  if (s->b != NULL)
    tdm_backend_free(s->b);
  g_free(s->indices);
}

static void
one_step(Setup *s, int batch)
{
  tdm_replica_train_step(s->r, s->indices, batch, 1.0f / batch);
  tdm_backend_adam_update(s->b, s->r->params, s->r->grads, s->m, s->v, s->net->parameter_count,
                          1e-4f, 0.9f, 0.999f, 1e-8f, 0.0f, NULL);
}

static void
op_table(const char *device, const char *network, int batch, TdmPrecision precision, int steps)
{
  Setup s;
  if (!setup(&s, device, network, batch, precision)) {
    teardown(&s);
    return;
  }
  /* The timed table: graphs off (graph_launch NULL), every op between events. */
  TdmBackendOps timed = *s.b->ops;
  T.real = s.b->ops;
  T.b = s.b;
  T.cuda = s.b->kind == TDM_BACKEND_CUDA;
  T.stream = T.cuda ? tdm_backend_cuda_stream(s.b) : NULL;
  timed.gemm = t_gemm;
  timed.bias_forward = t_bias_forward;
  timed.bias_backward = t_bias_backward;
  timed.relu_backward = t_relu_backward;
  timed.im2col = t_im2col;
  timed.col2im = t_col2im;
  timed.maxpool_forward = t_maxpool_forward;
  timed.maxpool_backward = t_maxpool_backward;
  timed.conv_pool_forward = t_conv_pool_forward;
  timed.conv_pool_backward = t_conv_pool_backward;
  timed.softmax_xent = t_softmax_xent;
  timed.gather = t_gather;
  timed.adam_update = t_adam_update;
  timed.graph_begin = NULL;
  timed.graph_end = NULL;
  timed.graph_launch = NULL;

  steps = CLAMP(steps, 1, MAX_STEPS);
  for (int j = 0; j < steps && T.cuda; j++)
    for (int i = 0; i < MAX_OPS; i++) {
      check(cudaEventCreate(&T.start[j][i]), "cudaEventCreate");
      check(cudaEventCreate(&T.end[j][i]), "cudaEventCreate");
    }
  s.b->ops = &timed;
  for (int w = 0; w < 3; w++) {      /* warm-up: cuBLAS heuristics, caches */
    T.step = 0;
    T.count = 0;
    one_step(&s, batch);
  }
  int count = 0;
  for (T.step = 0; T.step < steps; T.step++) {
    T.count = 0;
    one_step(&s, batch);
    count = T.count;
  }
  s.b->ops = T.real;
  tdm_backend_synchronize(s.b);

  printf("\n%s, batch %d, %s, %s: median µs of %d steps, each operation between %s\n",
         network, batch, device, precision == TDM_PRECISION_TF32 ? "tf32" : "fp32", steps,
         T.cuda ? "events" : "clock reads");
  printf("| # | operation | shape | µs |\n|---|---|---|---|\n");
  double total = 0;
  for (int i = 0; i < count && !T.failed; i++) {
    float ms[MAX_STEPS];
    for (int j = 0; j < steps; j++) {
      if (T.cuda)
        check(cudaEventElapsedTime(&ms[j], T.start[j][i], T.end[j][i]), "cudaEventElapsedTime");
      else
        ms[j] = (T.host_end[j][i] - T.host_start[j][i]) / 1e3f;
    }
    qsort(ms, steps, sizeof ms[0], compare_floats);
    double us = ms[steps / 2] * 1e3;
    total += us;
    printf("| %d | %s | %s | %.1f |\n", i, T.labels[i].name, T.labels[i].shape, us);
  }
  printf("| | sum | | %.1f |\n", total);
  for (int j = 0; j < steps && T.cuda; j++)
    for (int i = 0; i < MAX_OPS; i++) {
      (void)cudaEventDestroy(T.start[j][i]);
      (void)cudaEventDestroy(T.end[j][i]);
    }

  /* The step as the trainer issues it: graph replay, Adam, no waiting between. */
  for (int w = 0; w < (T.cuda ? 5 : 1); w++)
    one_step(&s, batch);
  tdm_backend_synchronize(s.b);
  const int reps = T.cuda ? 200 : steps;
  gint64 t0 = g_get_monotonic_time();
  for (int k = 0; k < reps; k++)
    one_step(&s, batch);
  tdm_backend_synchronize(s.b);
  double us = (g_get_monotonic_time() - t0) / (double)reps;
  g_autoptr(GError) error = NULL;
  gboolean ok = tdm_backend_check(s.b, &error);
  printf("whole step (%s + adam): %.1f µs = %.0f samples/s%s%s\n",
         T.cuda ? "graph" : "no graph", us, batch / us * 1e6, ok ? "" : " FAILED: ",
         ok ? "" : error->message);
  teardown(&s);
}

/* The weight gradients' GEMMs at this batch: dW[out × k] = dyᵀ · col (or · x). */
static void
gemm_table(int batch, TdmPrecision precision)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), precision, &error);
  if (b == NULL) {
    g_printerr("bench-cnn-ops: %s\n", error->message);
    return;
  }
  struct {
    int m, n, k;
  } shapes[] = {
    {32, 9, batch * 784},     /* conv1 dW */
    {64, 288, batch * 196},   /* conv2 dW */
    {128, 3136, batch},       /* fc1 dW */
    {10, 128, batch},         /* fc2 dW */
  };
  const char *split = g_getenv("TDM_CUDA_SPLIT_K");
  for (guint s = 0; s < G_N_ELEMENTS(shapes); s++) {
    int m = shapes[s].m, n = shapes[s].n, k = shapes[s].k;
    float *a = tdm_backend_alloc(b, (size_t)k * m * 4, NULL);
    float *bm = tdm_backend_alloc(b, (size_t)k * n * 4, NULL);
    float *c = tdm_backend_alloc(b, (size_t)m * n * 4, NULL);
    g_autofree float *host = g_new(float, (size_t)k * MAX(m, n));
    for (size_t i = 0; i < (size_t)k * MAX(m, n); i++)
      host[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    tdm_backend_upload(b, a, host, (size_t)k * m * 4);
    tdm_backend_upload(b, bm, host, (size_t)k * n * 4);
    cudaStream_t stream = tdm_backend_cuda_stream(b);
    cudaEvent_t e0, e1;
    check(cudaEventCreate(&e0), "cudaEventCreate");
    check(cudaEventCreate(&e1), "cudaEventCreate");
    float ms[21];
    for (int r = -3; r < 21; r++) {
      check(cudaEventRecord(e0, stream), "cudaEventRecord");
      tdm_backend_gemm(b, true, false, m, n, k, 1.0f, a, m, bm, n, 0.0f, c, n);
      check(cudaEventRecord(e1, stream), "cudaEventRecord");
      check(cudaEventSynchronize(e1), "cudaEventSynchronize");
      if (r >= 0)
        check(cudaEventElapsedTime(&ms[r], e0, e1), "cudaEventElapsedTime");
    }
    qsort(ms, 21, sizeof ms[0], compare_floats);
    double us = ms[10] * 1e3;
    printf("gemm dW %d×%d×%d TN split-k %s: %.1f µs, %.2f TFLOP/s, %.0f GB/s\n", m, n, k,
           split ? split : "default", us, 2.0 * m * n * k / us / 1e6,
           4.0 * ((double)k * (m + n) + (double)m * n) / us / 1e3);
    (void)cudaEventDestroy(e0);
    (void)cudaEventDestroy(e1);
    tdm_backend_release(b, a);
    tdm_backend_release(b, bm);
    tdm_backend_release(b, c);
  }
  if (!tdm_backend_check(b, &error))
    g_printerr("bench-cnn-ops: %s\n", error->message);
  tdm_backend_free(b);
}

int
main(int argc, char **argv)
{
  g_autofree char *network = NULL, *precision_name = NULL, *device = NULL;
  int batch = 0, steps = 15;
  gboolean gemms = FALSE;
  GOptionEntry entries[] = {
    {"device", 0, 0, G_OPTION_ARG_STRING, &device, "cuda:0 (default) or cpu", "DEVICE"},
    {"network", 0, 0, G_OPTION_ARG_STRING, &network, "Network (default cnn)", "NET"},
    {"batch", 0, 0, G_OPTION_ARG_INT, &batch, "One batch size (default: 100 and 1024)", "N"},
    {"precision", 0, 0, G_OPTION_ARG_STRING, &precision_name, "fp32 or tf32", "P"},
    {"steps", 0, 0, G_OPTION_ARG_INT, &steps, "Timed steps (default 15, at most 32)", "N"},
    {"gemms", 0, 0, G_OPTION_ARG_NONE, &gemms, "Only the weight-gradient GEMMs", NULL},
    {NULL},
  };
  g_autoptr(GOptionContext) context = g_option_context_new("— a step's time by operation");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    g_printerr("bench-cnn-ops: %s\n", error->message);
    return 2;
  }
  if (device == NULL)
    device = g_strdup("cuda:0");
  if (g_str_has_prefix(device, "cuda") && !tdm_backend_cuda_available()) {
    g_printerr("bench-cnn-ops: no CUDA GPU\n");
    return 1;
  }
  TdmPrecision precision = TDM_PRECISION_FP32;
  if (precision_name != NULL)
    tdm_precision_from_name(precision_name, &precision);
  const int batches[] = {100, 1024};
  for (int j = 0; j < 2; j++) {
    if (batch != 0 && j > 0)
      break;
    int n = batch != 0 ? batch : batches[j];
    if (gemms)
      gemm_table(n, precision);
    else
      op_table(device, network ? network : "cnn", n, precision, steps);
  }
  return T.failed ? 1 : 0;
}

#else /* !TDM_HAVE_CUDA */

int
main(void)
{
  g_printerr("bench-cnn-ops: this build has no CUDA backend\n");
  return 1;
}

#endif
