/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-history-compare.c — part of test-history: "compare with one device" as the
 * window runs it. 2 CPU workers and the one-device configuration made from them end
 * within rounding of each other, bit-identical in exact mode; the words that describe a
 * difference, rounding told from more. */
#include "tdm-compare.h"
#include "tdm-network.h"
#include "tdm-trainer.h"
#include "test-history.h"

#include <math.h>

/* A trainer of cfg, run to its end. */
static TdmTrainer *
trained(TdmConfig *cfg)
{
  g_autoptr(GError) error = NULL;
  TdmTrainer *t = tdm_trainer_new(cfg, NULL, NULL);
  g_assert_true(tdm_trainer_run(t, NULL, &error));
  g_assert_no_error(error);
  return t;
}

/* The N = 1 equivalence, as the window shows it: 2 CPU workers and the one-device
 * configuration made from them end within rounding of each other. */
static void
test_compare_one_device(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2", 0);
  cfg->network = (g_free(cfg->network), g_strdup("conv4k3p1,relu,pool2,fc16,relu,fc10"));
  cfg->batch = 50;
  cfg->main_replica = 1;
  cfg->save_path = g_strdup("/nonexistent/never-written.safetensors");
  g_autoptr(TdmConfig) one = tdm_compare_one_device_config(cfg, 25);
  g_assert_cmpint(tdm_config_replica_count(one), ==, 1);
  g_assert_cmpint(one->batch, ==, 50);
  g_assert_cmpint(one->seed, ==, cfg->seed);
  g_assert_cmpint(one->max_steps, ==, 25);
  g_assert_null(one->save_path);
  /* Auto resolved for the run's devices (CPU workers: fp32), not left to the twin's. */
  g_assert_cmpint(cfg->precision, ==, TDM_PRECISION_AUTO);
  g_assert_cmpint(one->precision, ==, TDM_PRECISION_FP32);
  g_clear_pointer(&cfg->save_path, g_free);
  cfg->max_steps = 25;

  g_autoptr(TdmTrainer) many = trained(cfg);
  g_autoptr(TdmTrainer) single = trained(one);
  size_t n = 0, m = 0;
  const float *a = tdm_trainer_get_parameters(many, &n);
  const float *b = tdm_trainer_get_parameters(single, &m);
  g_assert_cmpuint(n, ==, m);
  double difference = tdm_compare_parameters(a, b, n);
  g_test_message("2 workers vs one device: %g", difference);
  g_assert_cmpfloat(difference, <=, 1e-5);
  g_autofree char *text = tdm_compare_describe_values(a, b, n);
  g_assert_true(g_str_has_suffix(text, "the same up to rounding") ||
                g_str_has_prefix(text, "identical: "));

  /* The measure sees a real difference: the trained parameters against the start. */
  g_autoptr(TdmNetwork) net = tdm_network_new(cfg->network, 28, 28, 1, 10, NULL);
  g_autofree float *initial = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, cfg->seed, initial);
  g_assert_cmpfloat(tdm_compare_parameters(initial, b, n), >, 1e-3);
}

/* Compare as the window runs it: exact mode, so 2 CPU workers with Adam end
 * bit-identical to their one-device twin, and the words say so. */
static void
test_compare_exact(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2", 0);
  cfg->network = (g_free(cfg->network), g_strdup("conv4k3p1,relu,pool2,fc16,relu,fc10"));
  cfg->batch = 50;
  cfg->optimizer = TDM_OPTIMIZER_ADAM;
  tdm_compare_prepare(cfg, 25);
  g_assert_true(cfg->exact);
  g_assert_cmpint(cfg->max_steps, ==, 25);
  g_autoptr(TdmConfig) one = tdm_compare_one_device_config(cfg, cfg->max_steps);
  g_assert_true(one->exact);

  g_autoptr(TdmTrainer) many = trained(cfg);
  g_autoptr(TdmTrainer) single = trained(one);
  size_t n = 0, m = 0;
  const float *a = tdm_trainer_get_parameters(many, &n);
  const float *b = tdm_trainer_get_parameters(single, &m);
  g_assert_cmpuint(n, ==, m);
  g_autofree char *text = tdm_compare_describe_values(a, b, n);
  g_autofree char *expected = g_strdup_printf("identical: 0 of %zu values differ", n);
  g_assert_cmpstr(text, ==, expected);
  /* And a difference is counted and described. */
  g_autofree float *changed = g_memdup2(b, n * sizeof(float));
  changed[0] += 1.0f;
  g_autofree char *other = tdm_compare_describe_values(changed, b, n);
  g_assert_true(g_str_has_prefix(other, "1 of "));
}

static void
test_compare_describe(void)
{
  float a[3] = {1.0f, -2.0f, 4.0f}, b[3] = {1.0f, -2.0f, 4.0f};
  g_assert_cmpfloat(tdm_compare_parameters(a, b, 3), ==, 0);
  a[1] = -2.5f;   /* 0.5 off, largest magnitude 4 */
  g_assert_cmpfloat(fabs(tdm_compare_parameters(a, b, 3) - 0.125), <, 1e-12);
  g_autofree char *large = tdm_compare_describe_values(a, b, 3);
  g_assert_cmpstr(large, ==, "1 of 3 values differ; largest difference 1.2 × 10⁻¹: more than "
                  "rounding at once; rounding grows over many steps (most with Adam): compare "
                  "fewer steps");
  /* 1805 units in the last place of 2⁻¹⁰ (each 2⁻³³, exact in float) against a largest
   * magnitude of 1: a difference of 2.1013 × 10⁻⁷. */
  const float near[2] = {1.0f, 0x1p-10f + 1805 * 0x1p-33f}, reference[2] = {1.0f, 0x1p-10f};
  g_autofree char *small = tdm_compare_describe_values(near, reference, 2);
  g_assert_cmpstr(small, ==, "1 of 2 values differ; largest difference 2.1 × 10⁻⁷: the same up to "
                  "rounding");
}

/* Registers this part's tests (test-history.c's main, in its order). */
void
test_history_add_compare(void)
{
  g_test_add_func("/compare/one-device", test_compare_one_device);
  g_test_add_func("/compare/exact", test_compare_exact);
  g_test_add_func("/compare/describe", test_compare_describe);
}
