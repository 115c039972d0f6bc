/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-window-tensorboard.c — the TensorBoard preference: with it on, a run the window
 * starts writes an event file in a folder of its own under the chosen folder, whose
 * scalars are the run's own (each step's loss and learning rate, each epoch's train
 * and test figures, each device's memory and times, as the run's events gave them,
 * to float32); with it off, none is written. A folder that cannot be made keeps no
 * run from training, and says why. The preferences window shows the folder the files
 * really go in and writes the settings the run reads. The files are decoded by
 * tests/tensorboard-records.h, which checks their framing and CRCs.
 */
#include <locale.h>
#include <string.h>
#include <glib/gstdio.h>
#include <adwaita.h>
#include "tdm-build-config.h"
#include "tdm-dataset-chooser.h"
#include "tdm-preferences-window.h"
#include "tdm-run.h"
#include "tdm-spec-entry.h"
#include "tdm-window.h"
#include "synthetic-idx.h"
#include "tensorboard-records.h"
#include "window-test-util.h"

static char *tmp_dir;
static char *dataset;

/* What the run's events said, as the window received them. */
typedef struct {
  GArray *steps;       /* TdmStepEvent */
  GArray *epochs;      /* TdmEpochEvent */
  GArray *devices;     /* TdmDevicesEvent */
  char label[48];      /* replica 0's tag suffix: "0 cpu" */
  char *folder;        /* the run's TensorBoard folder, or NULL */
  gboolean error;      /* the run said it could not make the file */
  gboolean failed;
} Seen;

static Seen seen;

static void
seen_clear(void)
{
  g_clear_pointer(&seen.steps, g_array_unref);
  g_clear_pointer(&seen.epochs, g_array_unref);
  g_clear_pointer(&seen.devices, g_array_unref);
  g_clear_pointer(&seen.folder, g_free);
  memset(&seen, 0, sizeof seen);
  seen.steps = g_array_new(FALSE, FALSE, sizeof(TdmStepEvent));
  seen.epochs = g_array_new(FALSE, FALSE, sizeof(TdmEpochEvent));
  seen.devices = g_array_new(FALSE, FALSE, sizeof(TdmDevicesEvent));
}

static gboolean
note_event(GSignalInvocationHint *hint, guint n_values, const GValue *values, gpointer data)
{
  TdmRun *run = g_value_get_object(&values[0]);
  const TdmEvent *event = g_value_get_pointer(&values[1]);

  if (event->kind == TDM_EVENT_STARTED) {
    g_snprintf(seen.label, sizeof seen.label, "0 %s", event->started.device[0]);
    g_free(seen.folder);
    seen.folder = g_strdup(tdm_run_get_tensorboard_folder(run));
    seen.error = tdm_run_get_tensorboard_error(run) != NULL;
  } else if (event->kind == TDM_EVENT_STEP) {
    g_array_append_val(seen.steps, event->step);
  } else if (event->kind == TDM_EVENT_EPOCH) {
    g_array_append_val(seen.epochs, event->epoch);
  } else if (event->kind == TDM_EVENT_DEVICES) {
    g_array_append_val(seen.devices, event->devices);
  } else if (event->kind == TDM_EVENT_FAILED) {
    seen.failed = TRUE;
  }
  return TRUE;
}

static void
set_tensorboard(gboolean on, const char *folder)
{
  g_autoptr(GSettings) settings = g_settings_new(TDM_APP_ID);

  g_settings_set_boolean(settings, "tensorboard", on);
  g_settings_set_string(settings, "tensorboard-folder", folder != NULL ? folder : "");
}

/* A window set for a short run: one CPU worker, the small IDX set, a small network,
 * two epochs. */
static TdmWindow *
window_for_run(void)
{
  g_autoptr(GArray) devices = cpu_devices();
  TdmWindow *window = g_object_ref(tdm_window_new(NULL));

  gtk_window_present(GTK_WINDOW(window));
  tdm_window_set_devices(window, devices);
  choose_small_run(window, 1, dataset, 50, 2);
  return window;
}

/* Starts a run in a new window and waits until it is over. */
static void
run_once(void)
{
  TdmWindow *window = window_for_run();
  guint signal_id = g_signal_lookup("event", TDM_TYPE_RUN);
  gulong hook = g_signal_add_emission_hook(signal_id, 0, note_event, NULL, NULL);

  seen_clear();
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL));
  g_assert_true(tdm_window_get_running(window));
  g_assert_true(wait_for(not_running, window, 120));
  g_signal_remove_emission_hook(signal_id, hook);
  g_assert_false(seen.failed);
  /* 400 training images in batches of 50, two epochs. */
  g_assert_cmpuint(seen.epochs->len, ==, 2);
  drop_window(window);
}

/* The one file in folder whose name starts with prefix. */
static char *
only_file(const char *folder, const char *prefix)
{
  g_autoptr(GDir) dir = g_dir_open(folder, 0, NULL);
  const char *name;
  char *found = NULL;

  g_assert_nonnull(dir);
  while ((name = g_dir_read_name(dir)) != NULL) {
    g_assert_null(found);
    g_assert_true(g_str_has_prefix(name, prefix));
    found = g_build_filename(folder, name, NULL);
  }
  g_assert_nonnull(found);
  return found;
}

static void
assert_scalar(GArray *scalars, const char *tag, long step, double value)
{
  const TestTensorboardScalar *s = test_tensorboard_find(scalars, tag, step);

  if (s == NULL)
    g_error("no %s at step %ld in the event file", tag, step);
  if (s->value != (float)value)
    g_error("%s at step %ld: %.9g in the event file, %.9g in the run's event", tag, step,
            s->value, (float)value);
}

static void
test_writes_the_runs_values(void)
{
  g_autofree char *root = g_build_filename(tmp_dir, "tb", NULL);
  g_autofree char *version = NULL;
  g_autofree char *file = NULL;
  g_autofree char *parent = NULL;
  g_autoptr(GArray) scalars = NULL;
  char tag[96];
  guint timed = 0;

  reset_settings();
  set_tensorboard(TRUE, root);
  run_once();

  /* A folder of its own under the chosen one, holding one event file. */
  g_assert_false(seen.error);
  g_assert_nonnull(seen.folder);
  parent = g_path_get_dirname(seen.folder);
  g_assert_cmpstr(parent, ==, root);
  file = only_file(seen.folder, "events.out.tfevents.");
  scalars = test_tensorboard_scalars(file, &version);
  g_assert_cmpstr(version, ==, "brain.Event:2");

  /* Every figure the window was told, at its step, as float32. */
  g_assert_cmpuint(seen.steps->len, >, 0);
  g_assert_cmpuint(test_tensorboard_count(scalars, "loss/train"), ==, seen.steps->len);
  for (guint i = 0; i < seen.steps->len; i++) {
    const TdmStepEvent *e = &g_array_index(seen.steps, TdmStepEvent, i);

    assert_scalar(scalars, "loss/train", e->step, e->train_loss);
    assert_scalar(scalars, "accuracy/train", e->step, e->train_accuracy);
    assert_scalar(scalars, "learning_rate", e->step, e->lr);
    assert_scalar(scalars, "epoch", e->step, e->epoch_float);
  }
  g_assert_cmpuint(test_tensorboard_count(scalars, "loss/test"), ==, 2);
  for (guint i = 0; i < seen.epochs->len; i++) {
    const TdmEpochEvent *e = &g_array_index(seen.epochs, TdmEpochEvent, i);

    assert_scalar(scalars, "loss/train_epoch", e->step, e->train_loss);
    assert_scalar(scalars, "accuracy/train_epoch", e->step, e->train_accuracy);
    assert_scalar(scalars, "loss/test", e->step, e->test_loss);
    assert_scalar(scalars, "accuracy/test", e->step, e->test_accuracy);
  }
  /* No validation split: no validation figures, rather than made-up ones. */
  g_assert_cmpuint(test_tensorboard_count(scalars, "loss/val"), ==, 0);
  g_assert_cmpuint(seen.devices->len, >, 0);
  for (guint i = 0; i < seen.devices->len; i++) {
    const TdmDevicesEvent *e = &g_array_index(seen.devices, TdmDevicesEvent, i);

    g_snprintf(tag, sizeof tag, "memory_bytes/%s", seen.label);
    assert_scalar(scalars, tag, e->step, (double)e->device[0].tandem_bytes);
    /* The run's last figures follow a sampled step's, and time no step: their times
     * (0) are not known, and left out. */
    if (e->device[0].compute_ms == 0)
      continue;
    timed++;
    g_snprintf(tag, sizeof tag, "compute_ms/%s", seen.label);
    assert_scalar(scalars, tag, e->step, e->device[0].compute_ms);
    g_snprintf(tag, sizeof tag, "wait_ms/%s", seen.label);
    assert_scalar(scalars, tag, e->step, e->device[0].wait_ms);
  }
  g_snprintf(tag, sizeof tag, "compute_ms/%s", seen.label);
  g_assert_cmpuint(test_tensorboard_count(scalars, tag), ==, timed);
  g_assert_cmpuint(timed, >, 0);
  remove_folder(root);
}

static void
test_off_writes_nothing(void)
{
  g_autofree char *root = g_build_filename(tmp_dir, "tb-off", NULL);

  reset_settings();
  set_tensorboard(FALSE, root);
  run_once();
  g_assert_null(seen.folder);
  g_assert_false(seen.error);
  g_assert_false(g_file_test(root, G_FILE_TEST_EXISTS));
}

/* A folder that cannot be made (under a file): the run trains all the same. */
static void
test_unwritable_folder(void)
{
  g_autofree char *blocker = g_build_filename(tmp_dir, "a-file", NULL);
  g_autofree char *root = g_build_filename(blocker, "tb", NULL);

  g_assert_true(g_file_set_contents(blocker, "", 0, NULL));
  reset_settings();
  set_tensorboard(TRUE, root);
  run_once();
  g_assert_null(seen.folder);
  g_assert_true(seen.error);
  g_unlink(blocker);
}

static void
test_preferences_window(void)
{
  g_autoptr(GSettings) settings = g_settings_new(TDM_APP_ID);
  g_autofree char *standard = g_build_filename(g_get_user_data_dir(), "tandem", "tensorboard", NULL);
  g_autofree char *chosen = g_build_filename(tmp_dir, "chosen", NULL);
  TdmWindow *window;
  TdmPreferencesWindow *prefs = NULL;
  GtkSwitch *toggle;
  AdwActionRow *folder_row;
  GtkWidget *default_button;

  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_present(GTK_WINDOW(window));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.preferences", NULL));
  for (GList *l = gtk_window_list_toplevels(); l != NULL; l = g_list_delete_link(l, l))
    if (TDM_IS_PREFERENCES_WINDOW(l->data))
      prefs = l->data;
  g_assert_nonnull(prefs);
  g_assert_true(gtk_window_get_transient_for(GTK_WINDOW(prefs)) == GTK_WINDOW(window));
  toggle = GTK_SWITCH(gtk_widget_get_template_child(GTK_WIDGET(prefs), TDM_TYPE_PREFERENCES_WINDOW,
                                                    "tensorboard_switch"));
  folder_row = ADW_ACTION_ROW(gtk_widget_get_template_child(GTK_WIDGET(prefs),
                                                            TDM_TYPE_PREFERENCES_WINDOW, "folder_row"));
  default_button = GTK_WIDGET(gtk_widget_get_template_child(GTK_WIDGET(prefs),
                                                            TDM_TYPE_PREFERENCES_WINDOW,
                                                            "default_button"));

  /* Off by default; the folder shown is where the files would go, spelled out. */
  g_assert_false(gtk_switch_get_active(toggle));
  g_assert_false(gtk_widget_get_sensitive(GTK_WIDGET(folder_row)));
  g_assert_cmpstr(adw_action_row_get_subtitle(folder_row), ==, standard);
  g_assert_false(gtk_widget_get_visible(default_button));

  gtk_switch_set_active(toggle, TRUE);
  g_assert_true(g_settings_get_boolean(settings, "tensorboard"));
  g_assert_true(gtk_widget_get_sensitive(GTK_WIDGET(folder_row)));

  /* A folder chosen (as the chooser sets it): shown, and the way back offered. */
  g_settings_set_string(settings, "tensorboard-folder", chosen);
  g_assert_cmpstr(adw_action_row_get_subtitle(folder_row), ==, chosen);
  g_assert_true(gtk_widget_get_visible(default_button));
  g_signal_emit_by_name(default_button, "clicked");
  g_assert_cmpstr(g_settings_get_string(settings, "tensorboard-folder"), ==, "");
  g_assert_cmpstr(adw_action_row_get_subtitle(folder_row), ==, standard);
  g_assert_false(gtk_widget_get_visible(default_button));

  gtk_window_destroy(GTK_WINDOW(prefs));
  drop_window(window);
}

int
main(int argc, char **argv)
{
  int status;

  /* Before GLib reads it: the window's history, and the default TensorBoard folder,
   * in a folder of this test. */
  tmp_dir = g_dir_make_tmp("tandem-tb-window-XXXXXX", NULL);
  g_setenv("XDG_DATA_HOME", tmp_dir, TRUE);
  g_setenv("LANGUAGE", "C", TRUE);
  setlocale(LC_ALL, "");
  gtk_test_init(&argc, &argv, NULL);
  adw_init();
  dataset = test_synthetic_idx_new(7, 400, 100);
  g_type_class_unref(g_type_class_ref(TDM_TYPE_RUN));

  g_test_add_func("/window-tensorboard/writes-the-runs-values", test_writes_the_runs_values);
  g_test_add_func("/window-tensorboard/off-writes-nothing", test_off_writes_nothing);
  g_test_add_func("/window-tensorboard/unwritable-folder", test_unwritable_folder);
  g_test_add_func("/window-tensorboard/preferences-window", test_preferences_window);
  status = g_test_run();

  test_remove_synthetic_idx(dataset);
  remove_folder(tmp_dir);
  g_free(tmp_dir);
  return status;
}
