/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-classroom.c: the window's classroom pages, fed by real runs.
 *
 * Whole runs on two CPU workers and the synthetic set go through the window's
 * actions, and the Devices, Predictions and Scaling pages are checked on what they
 * hold (the events they kept, their widgets' state), never on pixels or time: the
 * timeline shows every phase of both strategies, the batch strip's shards add up to
 * the batch, the confusion matrix sums to the test set and its diagonal gives the
 * accuracy the run reported, the memory estimate made before Start is within 10 %
 * of the peak the run measured, a scaling run over 1 and 2 workers gives two points
 * and is kept, and presentation mode's chart text is at least 14 px at 1024×768.
 * Runs under the Xvfb that xvfb-run-test.sh starts.
 *
 * This file holds what the parts share (the devices, a window set for a run) and
 * main(); the Devices page and the memory estimate are in test-classroom-devices.c,
 * the Scaling page in test-classroom-scaling.c, presentation mode and the run
 * controls in test-classroom-controls.c (their helpers declared in test-classroom.h).
 */

#include <adwaita.h>

#include "tdm-dataset-chooser.h"
#include "tdm-device-picker.h"
#include "tdm-device-row.h"
#include "tdm-device.h"
#include "tdm-spec-entry.h"
#include "tdm-window.h"
#include "test-classroom.h"
#include "window-test-util.h"

/* ---- helpers ---------------------------------------------------------------- */

/* The real CPU, and a made-up GPU of `gpu_bytes` when that is > 0. */
GArray *
devices_with(gint64 gpu_bytes)
{
  g_autoptr(GArray) real = tdm_device_list();
  GArray *devices = g_array_new(FALSE, TRUE, sizeof(TdmDeviceInfo));

  if (gpu_bytes > 0) {
    TdmDeviceInfo gpu = {0};

    gpu.kind = TDM_BACKEND_CUDA;
    g_snprintf(gpu.id, sizeof gpu.id, "cuda:0");
    g_snprintf(gpu.name, sizeof gpu.name, "Made-up small GPU");
    gpu.memory_bytes = gpu_bytes;
    gpu.compute_major = 9;
    g_snprintf(gpu.pci_bus_id, sizeof gpu.pci_bus_id, "0000:10:00.0");
    gpu.cores = 132;
    g_array_append_val(devices, gpu);
  }
  for (guint i = 0; i < real->len; i++) {
    const TdmDeviceInfo *info = &g_array_index(real, TdmDeviceInfo, i);

    if (info->kind == TDM_BACKEND_CPU)
      g_array_append_val(devices, *info);
  }
  return devices;
}

TdmDeviceRow *
row_where(TdmWindow *window, gboolean cpu)
{
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows(window_child(window, "device_picker"));

  for (guint i = 0; i < rows->len; i++)
    if (tdm_device_row_is_cpu(rows->pdata[i]) == cpu)
      return rows->pdata[i];
  g_assert_not_reached();
}

/* A window set for a run on two CPU workers and the synthetic set. */
TdmWindow *
window_for_run(const char *spec, int batch, guint strategy)
{
  g_autoptr(GArray) devices = devices_with(0);
  TdmWindow *window;

  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_present(GTK_WINDOW(window));
  tdm_window_set_devices(window, devices);
  tdm_device_row_set_active(row_where(window, TRUE), TRUE);
  tdm_device_row_set_workers(row_where(window, TRUE), 2);
  tdm_dataset_chooser_set_source(window_child(window, "dataset_chooser"), "synthetic");
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), window_custom_network());
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), spec);
  gtk_spin_button_set_value(window_child(window, "batch_spin"), batch);
  gtk_spin_button_set_value(window_child(window, "epochs_spin"), 1);
  adw_combo_row_set_selected(window_child(window, "strategy_dropdown"), strategy);

  g_assert_true(wait_for(can_start, window, 60));
  return window;
}

int
main(int argc, char *argv[])
{
  /* The checks read English text, whatever language the caller speaks. */
  g_setenv("LC_ALL", "C.UTF-8", TRUE);
  g_unsetenv("LANGUAGE");
  window_test_init(&argc, &argv);

  test_classroom_add_devices();
  test_classroom_add_scaling();
  test_classroom_add_controls();

  return g_test_run();
}
