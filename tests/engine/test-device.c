/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-device.c — the device list and GPU telemetry, on any machine.
 *
 * Without a GPU (CI, laptops) the list is the CPU alone and telemetry reports that
 * NVML is not there, with a reason, and every field invalid; with a GPU and its
 * driver the GPUs come first and telemetry's fields are valid and plausible. Not the
 * backends: test-backend-cpu.c and test-cuda-kernels.c test those.
 */
#include "tdm-backend.h"
#include "tdm-device.h"
#include "tdm-telemetry.h"

#include <string.h>

static void
test_list(void)
{
  GArray *list = tdm_device_list();
  g_assert_nonnull(list);
  g_assert_cmpuint(list->len, >=, 1);

  const TdmDeviceInfo *last = &g_array_index(list, TdmDeviceInfo, list->len - 1);
  g_assert_cmpint(last->kind, ==, TDM_BACKEND_CPU);
  g_assert_cmpstr(last->id, ==, "cpu");
  g_assert_cmpint(last->cores, >=, 1);
  g_assert_cmpint(last->memory_bytes, >, 0);
  g_assert_cmpuint(strlen(last->name), >, 0);

  int gpus = 0;
  for (guint i = 0; i < list->len; i++) {
    const TdmDeviceInfo *info = &g_array_index(list, TdmDeviceInfo, i);
    /* Ids are unique and parse the way --devices reads them. */
    for (guint j = 0; j < i; j++)
      g_assert_cmpstr(g_array_index(list, TdmDeviceInfo, j).id, !=, info->id);
    if (info->kind == TDM_BACKEND_CUDA) {
      g_assert_cmpuint(i, <, list->len - 1);
      g_assert_cmpint(info->index, ==, gpus);
      g_autofree char *want = g_strdup_printf("cuda:%d", info->index);
      g_assert_cmpstr(info->id, ==, want);
      guint64 ordinal = 0;
      g_assert_true(g_ascii_string_to_unsigned(info->id + 5, 10, 0, 1024, &ordinal, NULL));
      g_assert_cmpuint(strlen(info->name), >, 0);
      g_assert_cmpint(info->memory_bytes, >, 0);
      g_assert_cmpint(info->compute_major, >=, 3);
      g_assert_cmpint(info->cores, >=, 1);
      g_assert_cmpuint(strlen(info->pci_bus_id), >, 0);
      gpus++;
    } else {
      g_assert_cmpuint(i, ==, list->len - 1);
    }

    g_autofree char *line = tdm_device_describe(info);
    g_assert_nonnull(line);
    g_assert_cmpuint(strlen(line), >, strlen(info->id));
    g_assert_null(strchr(line, '\n'));
    g_assert_true(g_str_has_prefix(line, info->id));
    g_test_message("%s", line);
  }
  g_assert_cmpint(gpus > 0, ==, tdm_backend_cuda_available());
  g_array_unref(list);
}

static void
assert_invalid(TdmTelemetrySample s)
{
  g_assert_false(s.valid_utilization);
  g_assert_false(s.valid_memory);
  g_assert_false(s.valid_temperature);
  g_assert_false(s.valid_power);
}

static void
test_telemetry(void)
{
  TdmTelemetry *t = tdm_telemetry_new(20);
  g_assert_nonnull(t);
  const char *why_not = NULL;
  gboolean available = tdm_telemetry_available(t, &why_not);

  /* Unknown GPUs are all-invalid whatever the machine. */
  assert_invalid(tdm_telemetry_get(t, -1));
  assert_invalid(tdm_telemetry_get(t, 4096));

  if (!available) {
    g_assert_nonnull(why_not);
    g_assert_cmpuint(strlen(why_not), >, 0);
    g_test_message("telemetry not available: %s", why_not);
    assert_invalid(tdm_telemetry_get(t, 0));
  } else if (tdm_backend_cuda_available()) {
    g_assert_null(why_not);
    /* tdm_telemetry_new samples once before it returns: figures at once, without
     * waiting for the sampling thread. */
    TdmTelemetrySample s = tdm_telemetry_get(t, 0);
    g_test_message("cuda:0: %.0f%% busy, %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT
                   " bytes, %.0f °C, %.1f W",
                   s.utilization, s.memory_used, s.memory_total, s.temperature, s.power);
    g_assert_true(s.valid_utilization);
    g_assert_cmpfloat(s.utilization, >=, 0);
    g_assert_cmpfloat(s.utilization, <=, 100);
    g_assert_true(s.valid_memory);
    g_assert_cmpint(s.memory_total, >, 0);
    g_assert_cmpint(s.memory_used, <=, s.memory_total);
    g_assert_true(s.valid_temperature);
    g_assert_cmpfloat(s.temperature, >, 0);
    g_assert_cmpfloat(s.temperature, <, 150);
    /* Power is optional on some boards; where it is there it must be plausible. */
    if (s.valid_power)
      g_assert_cmpfloat(s.power, >, 0);
  }

  tdm_telemetry_free(t);

  /* Stopping wakes the sampler at once rather than after its interval: with a day
   * between samples, a free that waited would hang until meson's timeout fails the
   * test (no clock is read here: the suite runs on loaded machines). */
  t = tdm_telemetry_new(24 * 60 * 60 * 1000);
  tdm_telemetry_free(t);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/device/list", test_list);
  g_test_add_func("/device/telemetry", test_telemetry);
  return g_test_run();
}
