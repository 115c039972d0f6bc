/* SPDX-License-Identifier: GPL-3.0-or-later */
/* window-test-util.c — see window-test-util.h. */
#include "window-test-util.h"
#include "tdm-network-catalogue.h"

#include "tdm-application.h"
#include "tdm-build-config.h"
#include "tdm-run-form.h"
#include "tdm-dataset-chooser.h"
#include "tdm-device-picker.h"
#include "tdm-history-store.h"
#include "tdm-spec-entry.h"
#include "remove-tree.h"

#include <glib/gstdio.h>

void
window_test_init(int *argc, char ***argv)
{
  gtk_test_init(argc, argv, NULL);
  adw_init();
  /* After GTK's own start-up: GLib decides once, at the first translated string,
   * whether to translate at all, and must not decide it for the "tandem" domain in
   * the C locale. */
  tdm_application_init_i18n();
  tdm_application_init_uninstalled();
}

static gboolean
tick(gpointer data)
{
  return G_SOURCE_CONTINUE;
}

gboolean
wait_for(gboolean (*cond)(gpointer), gpointer data, double seconds)
{
  gint64 end = g_get_monotonic_time() + (gint64)(seconds * G_USEC_PER_SEC);
  /* A timer keeps the loop from blocking when nothing else is due; below GTK's redraw
   * in priority, so that a turn never runs it in a frame's place. */
  guint source = g_timeout_add_full(G_PRIORITY_LOW, 5, tick, NULL, NULL);
  gboolean ok;

  while (!(ok = cond(data)) && g_get_monotonic_time() < end)
    g_main_context_iteration(NULL, TRUE);
  g_source_remove(source);
  return ok;
}

void
drain(void)
{
  while (g_main_context_iteration(NULL, FALSE))
    ;
}

void
settle(guint iterations)
{
  guint source = g_timeout_add_full(G_PRIORITY_LOW, 5, tick, NULL, NULL);

  for (guint i = 0; i < iterations; i++)
    g_main_context_iteration(NULL, TRUE);
  g_source_remove(source);
}

TdmWindow *
present_window(void)
{
  TdmWindow *window = g_object_ref(tdm_window_new(NULL));

  gtk_window_present(GTK_WINDOW(window));
  wait_for_form(window);
  return window;
}

void
wait_for_form(TdmWindow *window)
{
  TdmRunForm *form = window_child(window, "sidebar");
  /* A frame, the devices' idle, the dataset's result and what each sets off: far
   * fewer events than this; a hung load ends the test here rather than in meson's
   * timeout. */
  guint events = 0;

  g_assert_true(gtk_widget_get_visible(GTK_WIDGET(window)));
  while (tdm_run_form_get_loading(form)) {
    g_assert_cmpuint(++events, <, 100000);
    g_main_context_iteration(NULL, TRUE);
  }
}

void
destroy_window(TdmWindow *window)
{
  gtk_window_destroy(GTK_WINDOW(window));
  drain();
  g_assert_finalize_object(window);
}

void
drop_window(TdmWindow *window)
{
  gtk_window_destroy(GTK_WINDOW(window));
  drain();
  g_object_unref(window);
}

gpointer
window_child(TdmWindow *window, const char *name)
{
  GObject *object = gtk_widget_get_template_child(GTK_WIDGET(window), TDM_TYPE_WINDOW, name);

  if (object == NULL) {
    GObject *form = gtk_widget_get_template_child(GTK_WIDGET(window), TDM_TYPE_WINDOW, "sidebar");

    object = gtk_widget_get_template_child(GTK_WIDGET(form), TDM_TYPE_RUN_FORM, name);
  }
  g_assert_nonnull(object);
  return object;
}

gpointer
template_child(gpointer widget, const char *name)
{
  GObject *object = gtk_widget_get_template_child(GTK_WIDGET(widget), G_OBJECT_TYPE(widget), name);

  g_assert_nonnull(object);
  return object;
}

/* The text of every label under widget, each followed by a newline. */
static void
collect_labels(GtkWidget *widget, GString *out)
{
  if (GTK_IS_LABEL(widget))
    g_string_append_printf(out, "%s\n", gtk_label_get_text(GTK_LABEL(widget)));
  for (GtkWidget *child = gtk_widget_get_first_child(widget); child != NULL;
       child = gtk_widget_get_next_sibling(child))
    collect_labels(child, out);
}

char *
toast_text(TdmWindow *window)
{
  GtkWidget *overlay = window_child(window, "toast_overlay");
  GtkWidget *content = adw_toast_overlay_get_child(ADW_TOAST_OVERLAY(overlay));
  GString *out = g_string_new(NULL);

  /* The overlay's children but the window's content are its toasts. */
  for (GtkWidget *child = gtk_widget_get_first_child(overlay); child != NULL;
       child = gtk_widget_get_next_sibling(child))
    if (child != content)
      collect_labels(child, out);
  return g_string_free(out, FALSE);
}

GtkWidget *
history_row(gpointer widget, TdmRunItem *item)
{
  for (GtkWidget *c = gtk_widget_get_first_child(GTK_WIDGET(widget)); c != NULL;
       c = gtk_widget_get_next_sibling(c)) {
    GtkWidget *found;

    if (GTK_IS_LIST_BOX_ROW(c) && g_object_get_data(G_OBJECT(c), "item") == item)
      return c;
    if ((found = history_row(c, item)) != NULL)
      return found;
  }
  return NULL;
}

void
reset_settings(void)
{
  g_autoptr(GSettings) settings = g_settings_new(TDM_APP_ID);
  g_autoptr(GSettingsSchema) schema = NULL;
  g_auto(GStrv) keys = NULL;

  g_object_get(settings, "settings-schema", &schema, NULL);
  keys = g_settings_schema_list_keys(schema);
  for (guint i = 0; keys[i] != NULL; i++)
    g_settings_reset(settings, keys[i]);
  g_settings_sync();
}

guint
window_custom_network(void)
{
  int count = 0;
  tdm_network_presets(&count);
  return (guint)count;
}

TdmConfig *
window_config(TdmWindow *window)
{
  g_autoptr(GError) error = NULL;
  TdmConfig *config = tdm_run_form_build_config(window_child(window, "sidebar"), &error);

  g_assert_no_error(error);
  return config;
}

void
remove_folder(const char *dir)
{
  test_remove_tree(dir);
}

GArray *
cpu_devices(void)
{
  g_autoptr(GArray) real = tdm_device_list();
  GArray *devices = g_array_new(FALSE, TRUE, sizeof(TdmDeviceInfo));

  for (guint i = 0; i < real->len; i++)
    if (g_array_index(real, TdmDeviceInfo, i).kind == TDM_BACKEND_CPU)
      g_array_append_val(devices, g_array_index(real, TdmDeviceInfo, i));
  return devices;
}

TdmDeviceRow *
cpu_row(TdmWindow *window)
{
  g_autoptr(GPtrArray) rows = NULL;

  wait_for_form(window);
  rows = tdm_device_picker_get_rows(window_child(window, "device_picker"));

  for (guint i = 0; i < rows->len; i++)
    if (tdm_device_row_is_cpu(rows->pdata[i]))
      return rows->pdata[i];
  g_assert_not_reached();
}

void
choose_small_run(TdmWindow *window, int workers, const char *dataset, int batch, int epochs)
{
  tdm_device_row_set_active(cpu_row(window), TRUE);
  tdm_device_row_set_workers(cpu_row(window), workers);
  tdm_dataset_chooser_set_source(window_child(window, "dataset_chooser"), dataset);
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), window_custom_network());
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), "fc16,relu,fc10");
  gtk_spin_button_set_value(window_child(window, "batch_spin"), batch);
  gtk_spin_button_set_value(window_child(window, "epochs_spin"), epochs);
  g_assert_true(wait_for(can_start, window, 60));
}

gboolean
can_start(gpointer window)
{
  return tdm_window_get_can_start(window);
}

gboolean
not_running(gpointer window)
{
  return !tdm_window_get_running(window);
}

void
choose_sweep(TdmWindow *window, TdmScalingMode mode, int steps)
{
  GtkWidget *page = window_child(window, "scaling_page");

  /* The drop-down lists strong, then weak. */
  gtk_drop_down_set_selected(template_child(page, "mode_dropdown"),
                             mode == TDM_SCALING_WEAK ? 1 : 0);
  gtk_spin_button_set_value(template_child(page, "steps_spin"), steps);
}

gboolean
sweep_running(gpointer window)
{
  GtkWidget *page = window_child(window, "scaling_page");

  return gtk_widget_get_sensitive(template_child(page, "cancel_button"));
}

gboolean
sweep_over(gpointer window)
{
  return !sweep_running(window);
}

gboolean
not_loading(gpointer store)
{
  return !tdm_history_store_get_loading(store);
}

/* The ids the store lists, in its order. */
static GPtrArray *
listed_ids(TdmHistoryStore *store)
{
  GPtrArray *ids = g_ptr_array_new_with_free_func(g_free);

  for (guint i = 0; i < g_list_model_get_n_items(G_LIST_MODEL(store)); i++) {
    g_autoptr(TdmRunItem) item = g_list_model_get_item(G_LIST_MODEL(store), i);

    g_ptr_array_add(ids, g_strdup(tdm_run_item_get_id(item)));
  }
  return ids;
}

void
assert_reload_keeps_order(TdmWindow *window)
{
  TdmHistoryStore *store = tdm_window_get_history(window);
  g_autoptr(GPtrArray) live = listed_ids(store);
  g_autoptr(GPtrArray) again = NULL;

  g_assert_true(gtk_widget_activate_action(tdm_window_get_history_view(window),
                                           "history.reload", NULL));
  g_assert_true(wait_for(not_loading, store, 30));
  again = listed_ids(store);
  g_assert_cmpuint(again->len, ==, live->len);
  for (guint i = 0; i < live->len; i++)
    g_assert_cmpstr(g_ptr_array_index(again, i), ==, g_ptr_array_index(live, i));
}
