/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu.c — the CPU backend against plain double-precision references.
 *
 * Every operation runs on fresh random inputs (g_test_rand_*, so --seed replays a run)
 * with its outputs poisoned with NaN first, and is compared with a naive loop written
 * here, by relative error ||out − ref|| / ||ref||. This file: the backend's memory,
 * which copy of its loops runs, its sticky error and several backends on threads; the
 * operations are the family's (test-backend-cpu-layers.c, -step.c, -pool2d.c, -bf16.c,
 * -bf16-resnet.c, -start-sums.c), and the layers built from them (Linear, Conv2d,
 * MaxPool, ReLU, softmax cross-entropy) are checked against central differences
 * (test-backend-cpu-gradcheck.c). This is not a speed test; bench/ times the backend.
 */
#include "test-backend-cpu.h"
#include "tdm-cpu-kernels.h"

/* Memory */

static void
test_alloc(void)
{
  TdmBackend *b = new_backend();
  g_assert_cmpint(b->kind, ==, TDM_BACKEND_CPU);
  g_assert_cmpstr(b->name, ==, "cpu");
  g_assert_cmpuint(b->bytes_in_use, ==, 0);

  void *p1 = dev_alloc(b, 1000);
  void *p2 = dev_alloc(b, 3);
  void *p3 = dev_alloc(b, 0);
  g_assert_true(p1 != p2 && p2 != p3 && p1 != p3);
  g_assert_cmpuint((uintptr_t)p1 % 64, ==, 0);
  g_assert_cmpuint((uintptr_t)p2 % 64, ==, 0);
  g_assert_cmpuint((uintptr_t)p3 % 64, ==, 0);
  g_assert_cmpuint(b->bytes_in_use, ==, 1003);
  g_assert_cmpuint(b->bytes_peak, ==, 1003);
  memset(p1, 0xab, 1000);
  memset(p2, 0xcd, 3);

  tdm_backend_release(b, p1);
  g_assert_cmpuint(b->bytes_in_use, ==, 3);
  g_assert_cmpuint(b->bytes_peak, ==, 1003);
  void *p4 = dev_alloc(b, 500);
  g_assert_cmpuint(b->bytes_in_use, ==, 503);
  g_assert_cmpuint(b->bytes_peak, ==, 1003);
  void *p5 = dev_alloc(b, 1 << 20);
  g_assert_cmpuint(b->bytes_in_use, ==, 503 + (1 << 20));
  g_assert_cmpuint(b->bytes_peak, ==, 503 + (1 << 20));
  tdm_backend_release(b, p5);
  tdm_backend_release(b, p4);
  tdm_backend_release(b, p3);
  tdm_backend_release(b, p2);
  tdm_backend_release(b, NULL);
  g_assert_cmpuint(b->bytes_in_use, ==, 0);
  g_assert_cmpuint(b->bytes_peak, ==, 503 + (1 << 20));

  /* Out of memory: an error naming the device and the size, counters untouched. */
  void *keep = dev_alloc(b, 64);
  g_autoptr(GError) error = NULL;
  const size_t absurd = SIZE_MAX / 2;
  void *p = tdm_backend_alloc(b, absurd, &error);
  g_assert_null(p);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull(strstr(error->message, "cpu"));
  g_autofree char *digits = g_strdup_printf("%zu", absurd);
  g_assert_nonnull(strstr(error->message, digits));
  g_assert_cmpuint(b->bytes_in_use, ==, 64);
  /* A failed allocation is not a sticky device failure. */
  g_assert_true(tdm_backend_check(b, NULL));
  tdm_backend_release(b, keep);

  free_backend(b);
}

static void
test_memory_ops(void)
{
  TdmBackend *b = new_backend();
  const size_t n = 1037;
  float *host = g_new(float, n), *back = g_new(float, n);
  float *d1 = dev_floats(b, n), *d2 = dev_floats(b, n);
  fill_random(host, n, -1, 1);
  poison(d1, n);
  poison(d2, n);

  tdm_backend_upload(b, d1, host, n * sizeof(float));
  tdm_backend_copy(b, d2, d1, n * sizeof(float));
  poison(back, n);
  tdm_backend_download(b, back, d2, n * sizeof(float));
  g_assert_cmpmem(back, n * sizeof(float), host, n * sizeof(float));

  tdm_backend_zero(b, d2 + 1, (n - 2) * sizeof(float));
  g_assert_cmpfloat(d2[0], ==, host[0]);
  g_assert_cmpfloat(d2[n - 1], ==, host[n - 1]);
  for (size_t i = 1; i < n - 1; i++)
    g_assert_cmpfloat(d2[i], ==, 0.0f);
  tdm_backend_synchronize(b);

  tdm_backend_release(b, d1);
  tdm_backend_release(b, d2);
  g_free(host);
  g_free(back);
  free_backend(b);
}

/* Which copy of the CPU loops runs: the best this CPU has, unless
 * TANDEM_CPU_KERNELS names another it runs (the tests of the other copies set it). */
static void
test_kernel_choice(void)
{
  const char *best = "generic";
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    best = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw")
             ? "avx512" : "avx2";
#endif
  const char *wanted = g_getenv("TANDEM_CPU_KERNELS");
  const char *name = tdm_cpu_kernels_pick()->name;
  if (wanted == NULL || g_str_equal(name, wanted)) {
    g_assert_cmpstr(name, ==, wanted != NULL ? wanted : best);
    return;
  }
  /* A copy this CPU cannot run: the best one runs instead. */
  g_assert_cmpstr(name, ==, best);
  g_test_skip_printf("this CPU does not run the %s copy; %s ran", wanted, name);
}

/* The sticky error: the first failure is kept and later operations do nothing. */
static void
test_sticky_error(void)
{
  TdmBackend *b = new_backend();
  float a[4] = { 1, 2, 3, 4 }, c[4] = { 7, 7, 7, 7 };
  tdm_backend_gemm(b, false, false, 2, 2, 2, 1.0f, a, 1, a, 2, 0.0f, c, 2); /* lda < k */
  g_assert_true(tdm_backend_failed(b));
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_BACKEND);
  g_assert_nonnull(strstr(error->message, "cpu"));
  g_assert_nonnull(strstr(error->message, "lda"));
  g_assert_cmpfloat(c[0], ==, 7.0f);

  tdm_backend_zero(b, c, sizeof c);
  g_assert_cmpfloat(c[0], ==, 7.0f);
  int32_t bad_label = 5;
  TdmMetrics m = { 0, 0 };
  tdm_backend_softmax_xent(b, a, &bad_label, 1, 4, 0.0f, 1.0f, NULL, &m);
  g_clear_error(&error);
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_nonnull(strstr(error->message, "lda"));  /* the first failure wins */
  tdm_backend_free(b);

  b = new_backend();
  tdm_backend_softmax_xent(b, a, &bad_label, 1, 4, 0.0f, 1.0f, NULL, &m);
  g_clear_error(&error);
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_nonnull(strstr(error->message, "label 5"));
  g_assert_cmpfloat(m.loss_sum, ==, 0.0);
  tdm_backend_free(b);
}

/* Several backends at once, one per thread, as CPU workers use them: each must get
 * exactly what the same work gives on one thread. */
typedef struct {
  guint32 seed;
  float result[64];
} ThreadWork;

static gpointer
thread_work(gpointer data)
{
  ThreadWork *work = data;
  TdmBackend *b = tdm_backend_cpu_new(NULL);
  const int m = 64, k = 300, n = 64;
  GRand *rand = g_rand_new_with_seed(work->seed);
  float *a = tdm_backend_alloc(b, sizeof(float) * m * k, NULL);
  float *w = tdm_backend_alloc(b, sizeof(float) * n * k, NULL);
  float *out = tdm_backend_alloc(b, sizeof(float) * m * n, NULL);
  float *mom = tdm_backend_alloc(b, sizeof(float) * n * k, NULL);
  float *vel = tdm_backend_alloc(b, sizeof(float) * n * k, NULL);
  for (int i = 0; i < m * k; i++)
    a[i] = (float)g_rand_double_range(rand, -1, 1);
  for (int i = 0; i < n * k; i++)
    w[i] = (float)g_rand_double_range(rand, -1, 1);
  tdm_backend_zero(b, mom, sizeof(float) * n * k);
  tdm_backend_zero(b, vel, sizeof(float) * n * k);
  for (int step = 0; step < 50; step++) {
    tdm_backend_gemm(b, false, true, m, n, k, 1.0f, a, k, w, k, 0.0f, out, n);
    tdm_backend_bias_forward(b, out, w, m, n, 1, true);
    /* out^T a as a gradient for w, then an Adam step. */
    float *grad = tdm_backend_alloc(b, sizeof(float) * n * k, NULL);
    tdm_backend_gemm(b, true, false, n, k, m, 1e-3f, out, n, a, k, 0.0f, grad, k);
    tdm_backend_adam_update(b, w, grad, mom, vel, (size_t)n * k, 1e-3f, 0.9f, 0.999f, 1e-8f,
                            0.0f, NULL);
    tdm_backend_release(b, grad);
  }
  memcpy(work->result, out, sizeof work->result);
  gboolean ok = tdm_backend_check(b, NULL) && b->bytes_in_use == sizeof(float) * (m * k + 3 * n * k + m * n);
  tdm_backend_release(b, a);
  tdm_backend_release(b, w);
  tdm_backend_release(b, out);
  tdm_backend_release(b, mom);
  tdm_backend_release(b, vel);
  tdm_backend_free(b);
  g_rand_free(rand);
  return GINT_TO_POINTER(ok);
}

static void
test_threads(void)
{
  enum { THREADS = 4 };
  ThreadWork serial[THREADS], parallel[THREADS];
  GThread *threads[THREADS];
  for (int i = 0; i < THREADS; i++) {
    serial[i].seed = parallel[i].seed = g_test_rand_int();
    g_assert_true(GPOINTER_TO_INT(thread_work(&serial[i])));
  }
  for (int i = 0; i < THREADS; i++)
    threads[i] = g_thread_new("cpu-worker", thread_work, &parallel[i]);
  for (int i = 0; i < THREADS; i++) {
    g_assert_true(GPOINTER_TO_INT(g_thread_join(threads[i])));
    g_assert_cmpmem(parallel[i].result, sizeof parallel[i].result, serial[i].result,
                    sizeof serial[i].result);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);

  g_test_add_func("/backend-cpu/alloc", test_alloc);
  g_test_add_func("/backend-cpu/memory", test_memory_ops);
  test_backend_cpu_add_layers();
  g_test_add_func("/backend-cpu/kernel-choice", test_kernel_choice);
  test_backend_cpu_add_step();
  g_test_add_func("/backend-cpu/sticky-error", test_sticky_error);
  g_test_add_func("/backend-cpu/threads", test_threads);
  test_backend_cpu_add_gradchecks();
  test_backend_cpu_add_bf16();
  test_backend_cpu_add_bf16_resnet();
  test_backend_cpu_add_pool2d();
  test_backend_cpu_add_start_sums();
  test_backend_cpu_add_stem_bn();
  test_backend_cpu_add_bn();

  return g_test_run();
}
