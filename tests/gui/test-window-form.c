/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-window-form.c — the form's number fields as a person types into them: text
 * that is not a number, or a number out of range, stays as typed with a message
 * under it, the value keeps what it was, and Start waits; a good number puts it all
 * back. Batch, epochs, learning rate and the CPU's workers. The precision's row: the
 * engine's default (Automatic, listed first: float32 with a CPU worker, its estimate
 * fp32's; bfloat16 on made-up GPUs with bfloat16 tensor cores), each choice said under
 * it, into the run's configuration, and kept for the next window. */
#include <string.h>
#include <adwaita.h>
#include "tdm-application.h"
#include "tdm-build-config.h"
#include "tdm-choice.h"
#include "tdm-dataset-chooser.h"
#include "tdm-device.h"
#include "tdm-device-picker.h"
#include "tdm-device-row.h"
#include "tdm-form-choices.h"
#include "tdm-run-form.h"
#include "tdm-devices-page.h"
#include "tdm-window.h"
#include "window-test-util.h"

static TdmWindow *
new_window(void)
{
  TdmWindow *window = g_object_ref(tdm_window_new(NULL));

  gtk_window_present(GTK_WINDOW(window));
  tdm_dataset_chooser_set_source(window_child(window, "dataset_chooser"), "synthetic");
  gtk_check_button_set_active(
      GTK_CHECK_BUTTON(gtk_widget_get_template_child(GTK_WIDGET(cpu_row(window)),
                                                     TDM_TYPE_DEVICE_ROW, "use_check")),
      TRUE);
  g_assert_true(wait_for(can_start, window, 60));
  return window;
}

/* Types `text` into spin and leaves the field, as Tab or Enter would. */
static void
type_into(GtkSpinButton *spin, const char *text)
{
  gtk_editable_set_text(GTK_EDITABLE(spin), text);
  gtk_spin_button_update(spin);
  drain();
}

/* Where the form says it: a row's subtitle or a label. */
static const char *
said_in(gpointer where)
{
  return ADW_IS_ACTION_ROW(where) ? adw_action_row_get_subtitle(where)
                                  : gtk_label_get_label(where);
}

static void
assert_refused(TdmWindow *window, GtkSpinButton *spin, const char *typed, double value,
               gpointer where, const char *said)
{
  g_autofree char *problem = NULL;
  const char *shown;

  type_into(spin, typed);
  shown = said_in(where);
  g_assert_cmpstr(gtk_editable_get_text(GTK_EDITABLE(spin)), ==, typed);
  g_assert_cmpfloat(gtk_spin_button_get_value(spin), ==, value);
  g_assert_false(tdm_run_form_get_ready(window_child(window, "sidebar")));
  g_assert_false(tdm_window_get_can_start(window));
  problem = tdm_run_form_dup_problem(window_child(window, "sidebar"));
  g_test_message("%s → %s", typed, problem);
  g_assert_nonnull(strstr(problem, said));
  g_assert_nonnull(strstr(shown, said));
}

static const char *
subtitle(TdmWindow *window, const char *row)
{
  return adw_action_row_get_subtitle(window_child(window, row));
}

static void
test_number_fields(void)
{
  TdmWindow *window;
  GtkSpinButton *lr, *batch, *epochs, *workers;
  double lr_value, batch_value, epochs_value, workers_value;

  reset_settings();
  window = new_window();
  lr = window_child(window, "lr_spin");
  batch = window_child(window, "batch_spin");
  epochs = window_child(window, "epochs_spin");
  workers = GTK_SPIN_BUTTON(gtk_widget_get_template_child(GTK_WIDGET(cpu_row(window)),
                                                          TDM_TYPE_DEVICE_ROW, "workers_spin"));
  lr_value = gtk_spin_button_get_value(lr);
  batch_value = gtk_spin_button_get_value(batch);
  epochs_value = gtk_spin_button_get_value(epochs);
  workers_value = gtk_spin_button_get_value(workers);

  /* Nothing, then a number below the range: neither becomes the field's minimum. */
  assert_refused(window, lr, "", lr_value, window_child(window, "lr_row"), "Type a number from 0.00001 to 10");
  g_assert_cmpstr(subtitle(window, "lr_row"), ==, "Type a number from 0.00001 to 10");
  assert_refused(window, lr, "0", lr_value, window_child(window, "lr_row"), "0 is out of range");
  type_into(lr, "0.02");
  g_assert_cmpfloat_with_epsilon(gtk_spin_button_get_value(lr), 0.02, 1e-12);
  g_assert_cmpstr(subtitle(window, "lr_row"), ==, "");
  g_assert_true(wait_for(can_start, window, 10));

  /* The batch row says it where the split was; Start comes back with a number. */
  assert_refused(window, batch, "70000", batch_value, window_child(window, "batch_row"),
                 "70000 is out of range: type a number from 1 to 65536");
  type_into(batch, "64");
  g_assert_cmpfloat(gtk_spin_button_get_value(batch), ==, 64);
  g_assert_nonnull(strstr(subtitle(window, "batch_row"), "64 ="));
  g_assert_true(wait_for(can_start, window, 10));

  assert_refused(window, epochs, "0", epochs_value, window_child(window, "epochs_row"),
                 "0 is out of range: type a number from 1 to 10000");
  type_into(epochs, "2");
  g_assert_true(wait_for(can_start, window, 10));

  /* More workers than the field takes: said under the devices, naming the CPU. */
  assert_refused(window, workers, "999", workers_value,
                 window_child(window, "devices_hint_label"), "999 is out of range");
  g_assert_true(gtk_widget_get_visible(window_child(window, "devices_hint_label")));
  g_assert_nonnull(strstr(gtk_label_get_label(window_child(window, "devices_hint_label")), "cpu"));
  type_into(workers, "2");
  g_assert_false(gtk_widget_get_visible(window_child(window, "devices_hint_label")));
  g_assert_true(wait_for(can_start, window, 10));

  /* A batch the devices cannot share: the Devices page says it in the settings'
   * words, as the batch row does, not in the command line's ("--batch 1"). */
  type_into(batch, "1");
  g_assert_false(tdm_window_get_can_start(window));
  {
    TdmDevicesPage *devices = window_child(window, "devices_page");
    const char *note = gtk_label_get_label(template_child(devices, "memory_note"));

    g_test_message("%s", note);
    g_assert_null(strstr(note, "--"));
    g_assert_nonnull(strstr(note, "A batch of 1 is too small for 2 replicas"));
  }
  type_into(batch, "64");
  g_assert_true(wait_for(can_start, window, 10));

  /* A value set by the program (a recipe, the settings) writes its own text. */
  type_into(lr, "abc");
  g_assert_false(tdm_window_get_can_start(window));
  gtk_spin_button_set_value(lr, 0.05);
  g_assert_cmpfloat_with_epsilon(g_ascii_strtod(gtk_editable_get_text(GTK_EDITABLE(lr)), NULL),
                                 0.05, 1e-12);
  g_assert_true(wait_for(can_start, window, 10));

  destroy_window(window);
  reset_settings();
}

/* Picks a precision in its row, by value. */
static void
select_precision(AdwComboRow *row, TdmPrecision precision)
{
  adw_combo_row_set_selected(row, tdm_form_choice_position(TDM_TYPE_PRECISION, precision));
  drain();
}

static const char *
row_subtitle(AdwComboRow *row)
{
  return adw_action_row_get_subtitle(ADW_ACTION_ROW(row));
}

/* The picker's devices: made-up GPUs of these compute capabilities (major·10 + minor),
 * every one of them picked. */
static void
pick_gpus(TdmWindow *window, const int *capabilities, int count)
{
  g_autoptr(GArray) devices = g_array_new(FALSE, TRUE, sizeof(TdmDeviceInfo));
  g_auto(GStrv) chosen = g_new0(char *, count + 1);

  for (int i = 0; i < count; i++) {
    TdmDeviceInfo gpu = {.kind = TDM_BACKEND_CUDA, .index = i};

    g_snprintf(gpu.id, sizeof gpu.id, "cuda:%d", i);
    g_snprintf(gpu.name, sizeof gpu.name, "Made-up GPU %d", i);
    gpu.memory_bytes = (gint64)16 << 30;
    gpu.compute_major = capabilities[i] / 10;
    gpu.compute_minor = capabilities[i] % 10;
    gpu.cores = 40;
    g_array_append_val(devices, gpu);
    chosen[i] = g_strdup(gpu.id);
  }
  tdm_device_picker_set_devices(window_child(window, "device_picker"), devices,
                                (const char *const *)chosen, "cuda:0", 1);
  drain();
}

/* Automatic, the default: what it is for the devices picked, said under the row, and
 * the estimate of what it resolves to. */
static void
test_precision_auto(void)
{
  TdmWindow *window;
  AdwComboRow *row;

  reset_settings();
  window = new_window();
  row = window_child(window, "precision_dropdown");
  {
    /* The engine's default, tandem-train's too, listed first. */
    g_autoptr(TdmConfig) defaults = tdm_config_new();
    g_autoptr(TdmConfig) config = window_config(window);

    g_assert_cmpint(defaults->precision, ==, TDM_PRECISION_AUTO);
    g_assert_cmpuint(adw_combo_row_get_selected(row), ==, 0);
    g_assert_cmpstr(gtk_string_object_get_string(adw_combo_row_get_selected_item(row)), ==,
                    "Automatic");
    g_assert_cmpint(config->precision, ==, TDM_PRECISION_AUTO);
    /* A CPU worker is picked: float32. */
    g_assert_cmpstr(row_subtitle(row), ==, "Automatic: float32, since the CPU is picked");
  }
  {
    /* The estimate is fp32's on a CPU worker. */
    AdwComboRow *network = window_child(window, "network_dropdown");
    TdmMemoryEvent automatic = {0}, fp32 = {0};
    gboolean fits;
    int largest;

    for (guint i = 0; i < tdm_form_network_custom_index(); i++)
      if (g_str_equal(tdm_form_network_id(i), "resnet"))
        adw_combo_row_set_selected(network, i);
    g_assert_true(wait_for(can_start, window, 60));
    g_assert_true(tdm_run_form_estimate_memory(window_child(window, "sidebar"), &automatic,
                                               &fits, &largest, NULL));
    select_precision(row, TDM_PRECISION_FP32);
    g_assert_true(tdm_run_form_estimate_memory(window_child(window, "sidebar"), &fp32, &fits,
                                               &largest, NULL));
    g_assert_cmpuint(automatic.device[0].total, ==, fp32.device[0].total);
    g_assert_cmpuint(automatic.device[0].activations, ==, fp32.device[0].activations);
    g_assert_cmpuint(automatic.host_total, ==, fp32.host_total);
    select_precision(row, TDM_PRECISION_AUTO);
  }
  {
    /* GPUs with bfloat16 tensor cores, then one without among them. */
    const int fast[] = {90, 80}, mixed[] = {90, 75};

    pick_gpus(window, fast, G_N_ELEMENTS(fast));
    g_assert_cmpstr(row_subtitle(row), ==,
                    "Automatic: bfloat16, since every GPU picked has bfloat16 tensor cores");
    pick_gpus(window, mixed, G_N_ELEMENTS(mixed));
    g_assert_cmpstr(row_subtitle(row), ==,
                    "Automatic: float32, since cuda:1 (compute capability 7.5) has no bfloat16 tensor cores");
  }
  destroy_window(window);
  reset_settings();
}

static void
test_precision(void)
{
  TdmWindow *window;
  AdwComboRow *row;

  reset_settings();
  window = new_window();
  row = window_child(window, "precision_dropdown");
  select_precision(row, TDM_PRECISION_FP32);
  g_assert_nonnull(strstr(row_subtitle(row), "reference"));
  {
    g_autoptr(TdmConfig) config = window_config(window);

    g_assert_cmpint(config->precision, ==, TDM_PRECISION_FP32);
  }

  select_precision(row, TDM_PRECISION_BF16);
  drain();
  /* The window's device is a CPU worker: bf16 is its reference there, not its fast path. */
  g_assert_nonnull(strstr(adw_action_row_get_subtitle(ADW_ACTION_ROW(row)), "CPU workers"));
  g_assert_true(tdm_window_get_can_start(window));
  {
    g_autoptr(TdmConfig) config = window_config(window);
    g_autoptr(GSettings) settings = g_settings_new(TDM_APP_ID);
    g_autofree char *kept = g_settings_get_string(settings, "precision");

    g_assert_cmpint(config->precision, ==, TDM_PRECISION_BF16);
    g_assert_cmpstr(kept, ==, "bf16");
  }
  {
    /* The estimate follows: a BN ResNet's activations stored as bf16 take less. */
    AdwComboRow *network = window_child(window, "network_dropdown");
    TdmMemoryEvent bf16 = {0}, fp32 = {0};
    gboolean fits;
    int largest;

    for (guint i = 0; i < tdm_form_network_custom_index(); i++)
      if (g_str_equal(tdm_form_network_id(i), "resnet"))
        adw_combo_row_set_selected(network, i);
    g_assert_true(wait_for(can_start, window, 60));
    g_assert_true(tdm_run_form_estimate_memory(window_child(window, "sidebar"), &bf16, &fits,
                                               &largest, NULL));
    select_precision(row, TDM_PRECISION_FP32);
    g_assert_true(tdm_run_form_estimate_memory(window_child(window, "sidebar"), &fp32, &fits,
                                               &largest, NULL));
    g_test_message("resnet activations: bf16 %" G_GUINT64_FORMAT ", fp32 %" G_GUINT64_FORMAT,
                   bf16.device[0].activations, fp32.device[0].activations);
    g_assert_cmpuint(bf16.device[0].activations, <, fp32.device[0].activations);
  }
  select_precision(row, TDM_PRECISION_TF32);
  g_assert_nonnull(strstr(adw_action_row_get_subtitle(ADW_ACTION_ROW(row)), "TensorFloat-32"));
  select_precision(row, TDM_PRECISION_BF16);
  destroy_window(window);

  /* The next window starts from the choice. */
  window = new_window();
  row = window_child(window, "precision_dropdown");
  g_assert_cmpuint(adw_combo_row_get_selected(row), ==,
                   tdm_form_choice_position(TDM_TYPE_PRECISION, TDM_PRECISION_BF16));
  g_assert_nonnull(strstr(adw_action_row_get_subtitle(ADW_ACTION_ROW(row)), "Bfloat16"));
  {
    /* Without the CPU worker (no device at all here), the GPUs' text. */
    GtkCheckButton *use = GTK_CHECK_BUTTON(
        gtk_widget_get_template_child(GTK_WIDGET(cpu_row(window)), TDM_TYPE_DEVICE_ROW, "use_check"));

    gtk_check_button_set_active(use, FALSE);
    drain();
    g_assert_nonnull(strstr(adw_action_row_get_subtitle(ADW_ACTION_ROW(row)), "tensor cores"));
    gtk_check_button_set_active(use, TRUE);
    drain();
    g_assert_nonnull(strstr(adw_action_row_get_subtitle(ADW_ACTION_ROW(row)), "CPU workers"));
  }
  {
    g_autoptr(TdmConfig) config = window_config(window);

    g_assert_cmpint(config->precision, ==, TDM_PRECISION_BF16);
  }
  destroy_window(window);
  reset_settings();
}

int
main(int argc, char **argv)
{
  g_setenv("LC_ALL", "C.UTF-8", TRUE);
  g_unsetenv("LANGUAGE");
  window_test_init(&argc, &argv);

  g_test_add_func("/window-form/number-fields", test_number_fields);
  g_test_add_func("/window-form/precision", test_precision);
  g_test_add_func("/window-form/precision-auto", test_precision_auto);
  return g_test_run();
}
