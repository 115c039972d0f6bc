/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-precision-auto.c — `--precision auto`, the default: the rule on made-up device
 * lists (bf16 only where every device is a GPU of compute capability 8.0 or later), the
 * words that say why, a backend that refuses auto, and a run on CPU workers that asks
 * for auto: it trains the bits an fp32 run trains, its started event says fp32 and why,
 * and its checkpoint keeps "auto" as asked. Auto on a GPU is tests/gpu/'s. */
#include "tdm-backend.h"
#include "tdm-checkpoint.h"
#include "tdm-error.h"
#include "tdm-precision-auto.h"
#include "tdm-trainer.h"
#include "synthetic-idx.h"

#include <string.h>
#include <glib/gstdio.h>

static char *dataset;

static TdmDeviceInfo
gpu(int ordinal, int major, int minor)
{
  TdmDeviceInfo info = {.kind = TDM_BACKEND_CUDA, .index = ordinal,
                        .compute_major = major, .compute_minor = minor};
  g_snprintf(info.id, sizeof info.id, "cuda:%d", ordinal);
  return info;
}

static TdmDeviceInfo
cpu(void)
{
  TdmDeviceInfo info = {.kind = TDM_BACKEND_CPU};
  g_strlcpy(info.id, "cpu", sizeof info.id);
  return info;
}

/* The choice for `devices` (as --devices names them) on a machine of `known`. */
static TdmPrecisionChoice
choose(TdmPrecision asked, const char *devices, const TdmDeviceInfo *known, guint count)
{
  TdmDeviceId ids[TDM_MAX_REPLICAS];
  int n = 0;
  g_autoptr(GError) error = NULL;
  if (devices[0] != '\0')
    g_assert_true(tdm_device_list_parse(devices, ids, TDM_MAX_REPLICAS, &n, &error));
  g_assert_no_error(error);
  return tdm_precision_choose(asked, ids, n, known, count);
}

static void
assert_reason(const TdmPrecisionChoice *c, const char *expected)
{
  g_autofree char *reason = tdm_precision_choice_reason(c);
  g_assert_cmpstr(reason, ==, expected);
}

static void
test_rule(void)
{
  /* A machine with one of each: a T4-like 7.5, an A100-like 8.0, an H100-like 9.0. */
  const TdmDeviceInfo machine[] = {gpu(0, 7, 5), gpu(1, 8, 0), gpu(2, 9, 0), cpu()};
  guint n = G_N_ELEMENTS(machine);

  TdmPrecisionChoice c = choose(TDM_PRECISION_AUTO, "cpu", machine, n);
  g_assert_cmpint(c.precision, ==, TDM_PRECISION_FP32);
  g_assert_cmpint(c.cause, ==, TDM_PRECISION_CPU);
  assert_reason(&c, "cpu has no bfloat16 tensor cores");

  c = choose(TDM_PRECISION_AUTO, "cpu:4", machine, n);
  g_assert_cmpint(c.precision, ==, TDM_PRECISION_FP32);

  c = choose(TDM_PRECISION_AUTO, "cuda:0", machine, n);
  g_assert_cmpint(c.precision, ==, TDM_PRECISION_FP32);
  g_assert_cmpint(c.cause, ==, TDM_PRECISION_OLDER_GPU);
  assert_reason(&c, "cuda:0 (compute capability 7.5) has no bfloat16 tensor cores");

  c = choose(TDM_PRECISION_AUTO, "cuda:2", machine, n);
  g_assert_cmpint(c.precision, ==, TDM_PRECISION_BF16);
  g_assert_cmpint(c.cause, ==, TDM_PRECISION_TENSOR_CORES);
  assert_reason(&c, "every device has bfloat16 tensor cores");

  /* Two GPUs with bfloat16 tensor cores, and one of them twice. */
  c = choose(TDM_PRECISION_AUTO, "cuda:1,cuda:2,cuda:2", machine, n);
  g_assert_cmpint(c.precision, ==, TDM_PRECISION_BF16);

  /* One CPU worker or one older GPU makes the whole run fp32, wherever it is listed,
   * and is the device named. */
  c = choose(TDM_PRECISION_AUTO, "cuda:2,cpu", machine, n);
  g_assert_cmpint(c.precision, ==, TDM_PRECISION_FP32);
  assert_reason(&c, "cpu has no bfloat16 tensor cores");
  c = choose(TDM_PRECISION_AUTO, "cuda:1,cuda:2,cuda:0", machine, n);
  g_assert_cmpint(c.precision, ==, TDM_PRECISION_FP32);
  g_assert_true(tdm_device_id_equal(c.device, TDM_DEVICE_GPU(0)));

  /* A GPU the machine does not have: fp32, and said so. */
  c = choose(TDM_PRECISION_AUTO, "cuda:2,cuda:7", machine, n);
  g_assert_cmpint(c.precision, ==, TDM_PRECISION_FP32);
  g_assert_cmpint(c.cause, ==, TDM_PRECISION_UNKNOWN_DEVICE);
  assert_reason(&c, "cuda:7 is not a device of this machine");
  c = choose(TDM_PRECISION_AUTO, "cuda:0", NULL, 0);
  g_assert_cmpint(c.cause, ==, TDM_PRECISION_UNKNOWN_DEVICE);

  /* No device at all. */
  c = choose(TDM_PRECISION_AUTO, "", machine, n);
  g_assert_cmpint(c.precision, ==, TDM_PRECISION_FP32);
  g_assert_cmpint(c.cause, ==, TDM_PRECISION_NO_DEVICE);

  /* Any other precision passes through, whatever the devices. */
  const TdmPrecision others[] = {TDM_PRECISION_FP32, TDM_PRECISION_TF32, TDM_PRECISION_BF16};
  for (gsize i = 0; i < G_N_ELEMENTS(others); i++)
    for (gsize d = 0; d < 3; d++) {
      const char *devices[] = {"cpu", "cuda:0", "cuda:2"};
      c = choose(others[i], devices[d], machine, n);
      g_assert_cmpint(c.precision, ==, others[i]);
      g_assert_cmpint(c.cause, ==, TDM_PRECISION_ASKED);
      g_autofree char *none = tdm_precision_choice_reason(&c);
      g_assert_null(none);
    }

  /* Under mpirun, the rank that made it fp32 (tdm-trainer-setup.c's resolve_precision()). */
  c = (TdmPrecisionChoice){.precision = TDM_PRECISION_FP32, .asked = TDM_PRECISION_AUTO,
                           .cause = TDM_PRECISION_OTHER_RANK, .rank = 3};
  g_assert_true(tdm_device_id_parse("cuda:1", &c.device));
  g_autofree char *other = tdm_precision_choice_reason(&c);
  g_assert_cmpstr(other, ==, "rank 3's cuda:1 has no bfloat16 tensor cores");

  /* This machine (no GPU in a CPU build): the CPU decides. */
  TdmDeviceId here = TDM_DEVICE_CPU;
  g_assert_cmpint(tdm_precision_resolve_here(TDM_PRECISION_AUTO, &here, 1), ==,
                  TDM_PRECISION_FP32);
}

static void
test_backend_refuses_auto(void)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_AUTO, &error);
  g_assert_null(b);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION);
  g_assert_nonnull(strstr(error->message, "“auto”"));
  g_test_message("%s", error->message);
}

typedef struct {
  gboolean seen;
  TdmStartedEvent started;
} Started;

static void
on_event(const TdmEvent *event, gpointer data)
{
  Started *s = data;
  if (event->kind == TDM_EVENT_STARTED) {
    s->seen = TRUE;
    s->started = event->started;
  }
}

/* A few steps of a small CNN on two CPU workers; the parameters, and what the started
 * event said. */
static float *
train(TdmPrecision precision, const char *save, size_t *count, Started *started)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(dataset);
  g_free(cfg->network);
  cfg->network = g_strdup("conv8k3p1,bn,relu,pool2,conv16k3p1,relu,pool2,fc10");
  g_assert_true(tdm_config_set_devices(cfg, "cpu:2", &error));
  cfg->precision = precision;
  cfg->optimizer = TDM_OPTIMIZER_MOMENTUM;
  cfg->lr = 0.05;
  cfg->batch = 64;
  cfg->max_steps = 3;
  cfg->seed = 11;
  cfg->save_path = g_strdup(save);
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, on_event, started);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  const float *params = tdm_trainer_get_parameters(trainer, count);
  g_assert_nonnull(params);
  return g_memdup2(params, *count * sizeof(float));
}

static void
test_cpu_run(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-precision-auto-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "auto.safetensors", NULL);
  Started fp32 = {0}, automatic = {0};
  size_t n32 = 0, n = 0;
  g_autofree float *p32 = train(TDM_PRECISION_FP32, NULL, &n32, &fp32);
  g_autofree float *p = train(TDM_PRECISION_AUTO, path, &n, &automatic);

  /* The same bits: on CPU workers auto is fp32. */
  g_assert_cmpuint(n, ==, n32);
  g_assert_true(memcmp(p, p32, n * sizeof(float)) == 0);

  /* What each run reports: the precision it computed in, and for auto why. */
  g_assert_true(fp32.seen && automatic.seen);
  g_assert_cmpint(fp32.started.precision, ==, TDM_PRECISION_FP32);
  g_assert_false(fp32.started.precision_auto);
  g_assert_cmpstr(fp32.started.precision_why, ==, "");
  g_assert_cmpint(automatic.started.precision, ==, TDM_PRECISION_FP32);
  g_assert_true(automatic.started.precision_auto);
  g_assert_cmpstr(automatic.started.precision_why, ==, "cpu has no bfloat16 tensor cores");

  /* The checkpoint keeps what was asked, so a resumed run resolves it for its own
   * devices. */
  g_autoptr(GError) error = NULL;
  TdmCheckpoint *ckpt = tdm_checkpoint_load(path, &error);
  g_assert_no_error(error);
  g_autoptr(TdmConfig) back =
      tdm_config_from_json(tdm_checkpoint_get_metadata(ckpt, "config"), &error);
  g_assert_no_error(error);
  g_assert_cmpint(back->precision, ==, TDM_PRECISION_AUTO);
  tdm_checkpoint_free(ckpt);
  g_unlink(path);
  g_rmdir(dir);
}

int
main(int argc, char **argv)
{
  g_setenv("LC_ALL", "C.UTF-8", TRUE);
  g_unsetenv("LANGUAGE");
  g_test_init(&argc, &argv, NULL);
  dataset = test_synthetic_idx_new(0, 1000, 200);
  g_test_add_func("/precision-auto/rule", test_rule);
  g_test_add_func("/precision-auto/backend-refuses-auto", test_backend_refuses_auto);
  g_test_add_func("/precision-auto/cpu-run", test_cpu_run);
  int status = g_test_run();
  test_remove_synthetic_idx(dataset);
  return status;
}
