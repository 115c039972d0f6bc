/* test-cuda-train.c — training on GPUs (suite gpu): the CUDA backend trains as the CPU
 * does, several replicas on one GPU train as one, and the networks reach their
 * accuracy. Skips with a message where no CUDA GPU is present. */
#include "tdm-backend.h"
#include "tdm-dataset.h"
#include "tdm-events.h"
#include "tdm-trainer.h"

#include <math.h>
#include <string.h>

#define NETWORK "conv8k3p1,relu,pool2,conv8k3p1,relu,pool2,fc32,relu,fc10"

static gboolean
have_gpu(void)
{
  if (tdm_backend_cuda_available())
    return TRUE;
  g_test_skip("no CUDA GPU");
  return FALSE;
}

static size_t bucket_bytes = 4 << 20;

static float *
train(const char *devices, const char *network, TdmStrategy strategy, long steps,
      TdmPrecision precision, size_t *count)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_free(cfg->dataset);
  cfg->dataset = g_strdup("synthetic");
  g_free(cfg->network);
  cfg->network = g_strdup(network);
  g_assert_true(tdm_config_set_devices(cfg, devices, &error));
  cfg->batch = 64;
  cfg->strategy = strategy;
  cfg->precision = precision;
  cfg->max_steps = steps;
  cfg->seed = 5;
  cfg->bucket_bytes = bucket_bytes;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, NULL, NULL);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  const float *params = tdm_trainer_get_parameters(trainer, count);
  return g_memdup2(params, *count * sizeof(float));
}

static double
relative_difference(const float *a, const float *b, size_t n)
{
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; i++) {
    diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    norm += (double)b[i] * b[i];
  }
  return sqrt(diff / norm);
}

static void
test_gpu_matches_cpu(void)
{
  if (!have_gpu())
    return;
  size_t n_cpu, n_gpu, n_tf32;
  g_autofree float *cpu = train("cpu", NETWORK, TDM_STRATEGY_ALLREDUCE, 20, TDM_PRECISION_FP32,
                                &n_cpu);
  g_autofree float *gpu = train("cuda:0", NETWORK, TDM_STRATEGY_ALLREDUCE, 20,
                                TDM_PRECISION_FP32, &n_gpu);
  g_assert_cmpuint(n_cpu, ==, n_gpu);
  double rel = relative_difference(gpu, cpu, n_cpu);
  g_test_message("20 steps, cuda:0 fp32 vs cpu: relative difference %.3g", rel);
  g_assert_cmpfloat(rel, <=, 1e-4);
  g_autofree float *tf32 = train("cuda:0", NETWORK, TDM_STRATEGY_ALLREDUCE, 20,
                                 TDM_PRECISION_TF32, &n_tf32);
  double rel_tf32 = relative_difference(tf32, cpu, n_cpu);
  g_test_message("20 steps, cuda:0 tf32 vs cpu: relative difference %.3g", rel_tf32);
  g_assert_cmpfloat(rel_tf32, <=, 1e-2);
}

static void
test_replicas_on_one_gpu(void)
{
  if (!have_gpu())
    return;
  size_t n_ref;
  g_autofree float *reference = train("cuda:0", NETWORK, TDM_STRATEGY_ALLREDUCE, 20,
                                      TDM_PRECISION_FP32, &n_ref);
  const char *sets[] = {"cuda:0,cuda:0", "cuda:0,cuda:0,cuda:0"};
  for (int i = 0; i < 2; i++)
    for (int s = 0; s < 2; s++) {
      TdmStrategy strategy = s ? TDM_STRATEGY_MAIN : TDM_STRATEGY_ALLREDUCE;
      size_t n;
      g_autofree float *params = train(sets[i], NETWORK, strategy, 20, TDM_PRECISION_FP32, &n);
      double rel = relative_difference(params, reference, n_ref);
      g_test_message("%s %s vs cuda:0: relative difference %.3g", sets[i],
                     tdm_strategy_name(strategy), rel);
      g_assert_cmpfloat(rel, <=, 1e-5);
    }

  /* Small buckets: many all-reduces start during backward, layer by layer. */
  bucket_bytes = 4096;
  size_t n;
  g_autofree float *bucketed = train("cuda:0,cuda:0,cuda:0", NETWORK, TDM_STRATEGY_ALLREDUCE,
                                     20, TDM_PRECISION_FP32, &n);
  bucket_bytes = 4 << 20;
  double rel = relative_difference(bucketed, reference, n_ref);
  g_test_message("3 replicas, 4 KiB buckets vs cuda:0: relative difference %.3g", rel);
  g_assert_cmpfloat(rel, <=, 1e-5);
}

typedef struct {
  double accuracy;
} Last;

static void
remember(const TdmEvent *e, gpointer data)
{
  if (e->kind == TDM_EVENT_EPOCH)
    ((Last *)data)->accuracy = e->epoch.test_accuracy;
}

static void
check_accuracy(const char *network, int epochs, double expected)
{
  if (!have_gpu())
    return;
  if (!g_file_test(TDM_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", G_FILE_TEST_EXISTS)) {
    g_test_skip("Fashion-MNIST is not installed");
    return;
  }
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_free(cfg->network);
  cfg->network = g_strdup(network);
  g_assert_true(tdm_config_set_devices(cfg, "cuda:0", NULL));
  cfg->epochs = epochs;
  Last last = {0};
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, remember, &last);
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_test_message("%s on cuda:0: test accuracy %.4f after %d epochs", network, last.accuracy,
                 epochs);
  g_assert_cmpfloat(last.accuracy, >=, expected);
}

static void
test_mlp_accuracy(void)
{
  check_accuracy("mlp", 1, 0.84);
}

static void
test_cnn_accuracy(void)
{
  check_accuracy("cnn", 2, 0.88);
}

static void
test_out_of_memory_is_reported(void)
{
  if (!have_gpu())
    return;
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup("synthetic");
  g_free(cfg->network);
  /* Activations of 2²⁶ floats a sample at batch 60000 far exceed any GPU. */
  cfg->network = g_strdup("conv4096k3p1,fc10");
  cfg->batch = 60000;
  g_assert_true(tdm_config_set_devices(cfg, "cuda:0", NULL));
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, NULL, NULL);
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_trainer_run(trainer, NULL, &error));
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, "cuda:0"));
  /* The process survives and the GPU can train again. */
  size_t n;
  g_autofree float *params = train("cuda:0", "fc16,fc10", TDM_STRATEGY_ALLREDUCE, 3,
                                   TDM_PRECISION_FP32, &n);
  g_assert_cmpuint(n, >, 0);
}

typedef struct {
  TdmMemoryEvent estimate;
  gint64 tandem_bytes[TDM_MAX_REPLICAS];
  int replicas, estimates;
} MemorySeen;

static void
on_memory_event(const TdmEvent *e, gpointer data)
{
  MemorySeen *seen = data;
  if (e->kind == TDM_EVENT_MEMORY) {
    seen->estimate = e->memory;
    seen->estimates++;
  } else if (e->kind == TDM_EVENT_DEVICES) {
    seen->replicas = e->devices.replicas;
    for (int r = 0; r < e->devices.replicas; r++)
      seen->tandem_bytes[r] = e->devices.device[r].tandem_bytes;
  }
}

/* The memory estimate is what each GPU's backend counter holds during the run, to the
 * byte: replica, optimizer (on the main GPU only with `main`), cuBLAS's workspace. */
static void
test_memory_estimate(void)
{
  if (!have_gpu())
    return;
  static const char *const devices[] = {"cuda:0", "cuda:0,cuda:0"};
  static const char *const networks[] = {NETWORK, "cnn", "mlp"};
  for (guint d = 0; d < G_N_ELEMENTS(devices); d++)
    for (guint n = 0; n < G_N_ELEMENTS(networks); n++)
      for (int strategy = TDM_STRATEGY_MAIN; strategy <= TDM_STRATEGY_ALLREDUCE; strategy++) {
        g_autoptr(TdmConfig) cfg = tdm_config_new();
        g_free(cfg->dataset);
        cfg->dataset = g_strdup("synthetic");
        g_free(cfg->network);
        cfg->network = g_strdup(networks[n]);
        g_assert_true(tdm_config_set_devices(cfg, devices[d], NULL));
        cfg->batch = 256;
        cfg->strategy = strategy;
        cfg->max_steps = 3;
        MemorySeen seen = {0};
        g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, on_memory_event, &seen);
        g_autoptr(GError) error = NULL;
        g_assert_true(tdm_trainer_run(trainer, NULL, &error));
        g_assert_no_error(error);
        g_assert_cmpint(seen.estimates, ==, 1);
        g_assert_cmpint(seen.replicas, ==, seen.estimate.replicas);
        for (int r = 0; r < seen.replicas; r++) {
          g_test_message("%s on %s, %s, replica %d: estimate %" G_GUINT64_FORMAT
                         ", counter %" G_GINT64_FORMAT, networks[n], devices[d],
                         tdm_strategy_name(strategy), r, seen.estimate.device[r].total,
                         seen.tandem_bytes[r]);
          g_assert_cmpuint(seen.estimate.device[r].total, ==, (guint64)seen.tandem_bytes[r]);
        }
      }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cuda-train/gpu-matches-cpu", test_gpu_matches_cpu);
  g_test_add_func("/cuda-train/replicas-on-one-gpu", test_replicas_on_one_gpu);
  g_test_add_func("/cuda-train/out-of-memory", test_out_of_memory_is_reported);
  g_test_add_func("/cuda-train/memory-estimate", test_memory_estimate);
  g_test_add_func("/cuda-train/mlp-accuracy", test_mlp_accuracy);
  g_test_add_func("/cuda-train/cnn-accuracy", test_cnn_accuracy);
  return g_test_run();
}
