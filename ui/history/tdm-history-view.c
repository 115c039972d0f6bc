/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history-view.c: the History page of the window.
 *
 * Three boxed groups in a clamp that scrolls: the runs (a GtkListBox bound to the
 * store, one AdwActionRow a run), "compare with one device", and the comparison
 * table, which scrolls sideways on a narrow window. Each row carries its own small
 * action group ("run.rename", "run.export", "run.delete", "run.baseline", and for a
 * scaling sweep "run.open") so its menu acts on its run. A sweep's row is marked with
 * the Scaling page's icon instead of the overlay tick (it has no curves to draw) and
 * opens the sweep's chart and table in a window (TdmHistorySweep) when activated. Renaming asks in an AdwMessageDialog; exporting asks for a
 * file; deleting is undone from the toast (see tdm_history_store_delete). Failures
 * are toasts naming the file: the page stays usable.
 */

#include <glib/gi18n.h>

#include "tdm-build-config.h"
#include "tdm-exact.h"
#include "tdm-experiment.h"
#include "tdm-format.h"
#include "tdm-history-sweep.h"
#include "tdm-history-view.h"
#include "tdm-lr-find-view.h"
#include "tdm-run-table.h"


struct _TdmHistoryView
{
  GtkWidget           parent_instance;

  TdmHistoryStore    *store;
  AdwToastOverlay    *toasts;
  GtkListBox         *list;
  GtkLabel           *problems_label;
  GtkSpinButton      *steps_spin;
  AdwActionRow       *result_row;
  AdwPreferencesGroup *table_group;
  char               *result;
  AdwActionRow       *strategy_row;
  char               *strategy_result;
  AdwActionRow       *kept_row;
  GSettings          *settings;
  GtkNativeDialog    *chooser;
};

G_DEFINE_FINAL_TYPE (TdmHistoryView, tdm_history_view, GTK_TYPE_WIDGET)

/* A notice on the page (a failure to rename or export, a file saved). */
static void
tdm_history_view_toast (TdmHistoryView *self,
                        const char     *text)
{
  AdwToast *toast;

  g_return_if_fail (TDM_IS_HISTORY_VIEW (self));

  toast = adw_toast_new (text);
  adw_toast_set_timeout (toast, 8);
  adw_toast_overlay_add_toast (self->toasts, toast);
}

static void
tdm_history_view_show_error (TdmHistoryView *self,
                             const GError   *error)
{
  g_autofree char *text = tdm_format_sentence (error->message);

  tdm_history_view_toast (self, text);
}

/* Deleting ------------------------------------------------------------------- */

static void
tdm_history_view_toast_dismissed (TdmHistoryView *self,
                                  AdwToast       *toast)
{
  g_autoptr(GError) error = NULL;

  /* The undo is gone with the toast: so is the file (unless undone already). */
  if (self->store != NULL && !tdm_history_store_commit_deletes (self->store, &error))
    tdm_history_view_show_error (self, error);
}

/* Takes the run off the list and offers to undo it in a toast (the action
 * "history.undo-delete" with the run's id); the file goes when the toast does. */
static void
tdm_history_view_delete (TdmHistoryView *self,
                         TdmRunItem     *item)
{
  g_autofree char *title = NULL;
  AdwToast *toast;

  g_return_if_fail (TDM_IS_HISTORY_VIEW (self));
  g_return_if_fail (TDM_IS_RUN_ITEM (item));

  /* Translators: a toast after a run was deleted; %s is its name */
  title = g_strdup_printf (_("“%s” deleted"), tdm_run_item_get_name (item));
  toast = adw_toast_new (title);
  adw_toast_set_button_label (toast, _("_Undo"));
  adw_toast_set_action_name (toast, "history.undo-delete");
  adw_toast_set_action_target_value (toast, g_variant_new_string (tdm_run_item_get_id (item)));
  g_signal_connect_object (toast, "dismissed",
                           G_CALLBACK (tdm_history_view_toast_dismissed), self,
                           G_CONNECT_SWAPPED);
  tdm_history_store_delete (self->store, item);
  adw_toast_overlay_add_toast (self->toasts, toast);
}

/* Runs recorded meanwhile by tandem-train --record, or by another window. */
static void
tdm_history_view_reload (GtkWidget  *widget,
                         const char *action_name,
                         GVariant   *parameter)
{
  TdmHistoryView *self = TDM_HISTORY_VIEW (widget);

  /* On a thread: hundreds of runs take a while to read. */
  tdm_history_store_reload_async (self->store);
}

static void
tdm_history_view_undo_delete (GtkWidget  *widget,
                              const char *action_name,
                              GVariant   *parameter)
{
  TdmHistoryView *self = TDM_HISTORY_VIEW (widget);

  tdm_history_store_undo_delete (self->store, g_variant_get_string (parameter, NULL));
}

/* Renaming ------------------------------------------------------------------- */

static void
tdm_history_view_rename_response (AdwMessageDialog *dialog,
                                  const char       *response,
                                  TdmHistoryView   *self)
{
  TdmRunItem *item = g_object_get_data (G_OBJECT (dialog), "item");
  GtkEditable *entry = g_object_get_data (G_OBJECT (dialog), "entry");
  g_autoptr(GError) error = NULL;

  if (g_strcmp0 (response, "rename") != 0)
    return;
  if (!tdm_history_store_rename (self->store, item, gtk_editable_get_text (entry), &error))
    tdm_history_view_show_error (self, error);
}

static void
tdm_history_view_ask_rename (TdmHistoryView *self,
                             TdmRunItem     *item)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));
  GtkWidget *dialog;
  GtkWidget *entry = gtk_entry_new ();

  dialog = adw_message_dialog_new (GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                   _("Rename Run"), NULL);
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog),
                                    "cancel", _("_Cancel"),
                                    "rename", _("_Rename"),
                                    NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "rename",
                                              ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "rename");
  adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  gtk_editable_set_text (GTK_EDITABLE (entry), tdm_run_item_get_name (item));
  gtk_entry_set_activates_default (GTK_ENTRY (entry), TRUE);
  gtk_accessible_update_property (GTK_ACCESSIBLE (entry), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Name of the run"), -1);
  adw_message_dialog_set_extra_child (ADW_MESSAGE_DIALOG (dialog), entry);
  g_object_set_data_full (G_OBJECT (dialog), "item", g_object_ref (item), g_object_unref);
  g_object_set_data (G_OBJECT (dialog), "entry", entry);
  g_signal_connect_object (dialog, "response",
                           G_CALLBACK (tdm_history_view_rename_response), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

/* Exporting ------------------------------------------------------------------ */

static void
tdm_history_view_chooser_done (TdmHistoryView *self)
{
  if (self->chooser == NULL)
    return;
  gtk_native_dialog_destroy (self->chooser);
  g_clear_object (&self->chooser);
}

static void
tdm_history_view_export_chosen (TdmHistoryView  *self,
                                int              response,
                                GtkNativeDialog *dialog)
{
  g_autoptr(TdmRunItem) item = g_object_ref (g_object_get_data (G_OBJECT (dialog), "item"));
  g_autoptr(GFile) file = NULL;
  g_autofree char *path = NULL;
  g_autoptr(GError) error = NULL;

  if (response == GTK_RESPONSE_ACCEPT)
    file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
  tdm_history_view_chooser_done (self);
  if (file == NULL)
    return;

  path = g_file_get_path (file);
  if (path == NULL)
    {
      tdm_history_view_toast (self, _("Only folders on this computer can be written to."));
      return;
    }
  if (!tdm_history_store_export_csv (self->store, item, path, &error))
    tdm_history_view_show_error (self, error);
  else
    {
      g_autofree char *name = g_file_get_basename (file);
      /* Translators: a notice after an export; %s is the file's name */
      g_autofree char *text = g_strdup_printf (_("Saved “%s”"), name);

      tdm_history_view_toast (self, text);
    }
}

static void
tdm_history_view_ask_export (TdmHistoryView *self,
                             TdmRunItem     *item)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));
  GtkFileChooserNative *native;
  g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();
  g_autofree char *name = g_strdup_printf (tdm_run_item_is_sweep (item) ? "tandem-scaling-%s.csv"
                                           : tdm_run_item_is_experiment (item) ? "tandem-experiment-%s.csv"
                                                                               : "tandem-run-%s.csv",
                                           tdm_run_item_get_id (item));

  tdm_history_view_chooser_done (self);
  native = gtk_file_chooser_native_new (_("Export Run"),
                                        GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                        GTK_FILE_CHOOSER_ACTION_SAVE, _("_Save"), _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (native), TRUE);
  gtk_file_chooser_set_current_name (GTK_FILE_CHOOSER (native), name);
  gtk_file_filter_set_name (filter, _("CSV files"));
  gtk_file_filter_add_mime_type (filter, "text/csv");
  gtk_file_filter_add_pattern (filter, "*.csv");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (native), filter);
  g_object_set_data_full (G_OBJECT (native), "item", g_object_ref (item), g_object_unref);
  self->chooser = GTK_NATIVE_DIALOG (native);
  g_signal_connect_object (native, "response", G_CALLBACK (tdm_history_view_export_chosen),
                           self, G_CONNECT_SWAPPED);
  gtk_native_dialog_show (self->chooser);
}

/* Opening a sweep or a learning-rate test --------------------------------------- */

/* Opens a scaling sweep's chart and table in a window of their own (TdmHistorySweep),
 * or a learning-rate test's curve (TdmLrFindView's window); does nothing for a
 * training run or a comparison. */
static void
tdm_history_view_open (TdmHistoryView *self,
                       TdmRunItem     *item)
{
  GtkRoot *root;
  GtkWidget *window;

  root = gtk_widget_get_root (GTK_WIDGET (self));
  if (tdm_run_item_is_sweep (item))
    window = tdm_history_sweep_new (GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                    self->store, item);
  else if (tdm_run_item_is_lr_find (item))
    {
      TdmLrFindView *view;

      /* Its curve and suggestion as the test left them; "Use This Rate" is the
       * window's, which the test's own window has: here it only shows. */
      window = GTK_WIDGET (tdm_lr_find_view_window_new (GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                                        &view));
      gtk_window_set_title (GTK_WINDOW (window), tdm_run_item_get_name (item));
      tdm_lr_find_view_show_record (view, tdm_run_item_get_record (item));
    }
  else
    return;
  gtk_window_present (GTK_WINDOW (window));
}

static void
tdm_history_view_row_activated (AdwActionRow *row)
{
  TdmRunItem *item = g_object_get_data (G_OBJECT (row), "item");
  GtkWidget *self = gtk_widget_get_ancestor (GTK_WIDGET (row), TDM_TYPE_HISTORY_VIEW);

  if (self != NULL && item != NULL)
    tdm_history_view_open (TDM_HISTORY_VIEW (self), item);
}

/* Rows ----------------------------------------------------------------------- */

static void
row_action (GSimpleAction *action,
            GVariant      *parameter,
            gpointer       user_data)
{
  GtkWidget *row = user_data;
  TdmRunItem *item = g_object_get_data (G_OBJECT (row), "item");
  TdmHistoryView *self = TDM_HISTORY_VIEW (gtk_widget_get_ancestor (row, TDM_TYPE_HISTORY_VIEW));
  const char *name = g_action_get_name (G_ACTION (action));

  if (self == NULL || item == NULL)
    return;
  if (g_str_equal (name, "rename"))
    tdm_history_view_ask_rename (self, item);
  else if (g_str_equal (name, "export"))
    tdm_history_view_ask_export (self, item);
  else if (g_str_equal (name, "delete"))
    tdm_history_view_delete (self, item);
  else if (g_str_equal (name, "baseline"))
    tdm_history_store_set_baseline (self->store, item);
  else if (g_str_equal (name, "open"))
    tdm_history_view_open (self, item);
}

static void
update_subtitle (GtkWidget *row)
{
  TdmRunItem *item = g_object_get_data (G_OBJECT (row), "item");
  g_autofree char *date = tdm_run_item_format_date (item);
  g_autofree char *what = tdm_run_item_describe (item);
  g_autofree char *subtitle = g_strjoin (" · ", date, what, NULL);

  if (tdm_run_item_get_baseline (item))
    {
      g_autofree char *plain = g_steal_pointer (&subtitle);

      /* Translators: appended to the run that speed-ups are measured against */
      subtitle = g_strjoin (" · ", plain, _("baseline"), NULL);
    }
  adw_action_row_set_subtitle (ADW_ACTION_ROW (row), subtitle);
}

static GtkWidget *
create_row (gpointer item_ptr,
            gpointer user_data)
{
  static const GActionEntry entries[] = {
    { .name = "rename", .activate = row_action },
    { .name = "export", .activate = row_action },
    { .name = "delete", .activate = row_action },
    { .name = "baseline", .activate = row_action },
    { .name = "open", .activate = row_action },
  };
  TdmRunItem *item = item_ptr;
  GtkWidget *row = adw_action_row_new ();
  GtkWidget *check;
  GtkWidget *menu_button = gtk_menu_button_new ();
  g_autoptr(GMenu) menu = g_menu_new ();
  g_autoptr(GSimpleActionGroup) group = g_simple_action_group_new ();
  g_autofree char *tooltip = NULL;

  g_object_set_data_full (G_OBJECT (row), "item", g_object_ref (item), g_object_unref);
  g_object_bind_property (item, "name", row, "title", G_BINDING_SYNC_CREATE);
  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  update_subtitle (row);
  g_signal_connect_object (item, "notify::baseline", G_CALLBACK (update_subtitle), row,
                           G_CONNECT_SWAPPED);

  g_action_map_add_action_entries (G_ACTION_MAP (group), entries, G_N_ELEMENTS (entries), row);
  gtk_widget_insert_action_group (row, "run", G_ACTION_GROUP (group));
  if (tdm_run_item_is_experiment (item))
    {
      gboolean sweep = tdm_run_item_is_sweep (item);
      gboolean lr_find = tdm_run_item_is_lr_find (item);
      GtkWidget *icon = gtk_image_new_from_icon_name (sweep ? "go-up-symbolic"
                                                      : lr_find ? "find-location-symbolic"
                                                                : "view-dual-symbolic");

      /* Not ticked: a sweep is marked as the Scaling page is in the view switcher and
       * opens on its chart, a learning-rate test on its curve; a comparison says its
       * result, its runs are rows of their own. */
      gtk_widget_set_tooltip_text (icon, sweep ? _("A scaling run: activate it to see its chart")
                                       : lr_find ? _("A learning-rate test: activate it to see its curve")
                                                 : _("A comparison: its runs are listed as runs of their own"));
      gtk_accessible_update_property (GTK_ACCESSIBLE (icon), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                      sweep ? _("Scaling run")
                                      : lr_find ? _("Learning-rate test")
                                                : _("Comparison"), -1);
      adw_action_row_add_prefix (ADW_ACTION_ROW (row), icon);
      g_simple_action_set_enabled (G_SIMPLE_ACTION (g_action_map_lookup_action (G_ACTION_MAP (group),
                                                                                 "baseline")),
                                   FALSE);
      if (sweep || lr_find)
        {
          gtk_widget_add_css_class (row, sweep ? "sweep" : "lr-find");
          gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (row), TRUE);
          g_signal_connect (row, "activated", G_CALLBACK (tdm_history_view_row_activated), NULL);
          g_menu_append (menu, _("_Open"), "run.open");
        }
      g_menu_append (menu, _("_Rename…"), "run.rename");
      g_menu_append (menu, _("_Export as CSV…"), "run.export");
      g_menu_append (menu, _("_Delete"), "run.delete");
    }
  else
    {
      check = gtk_check_button_new ();
      g_object_bind_property (item, "overlay", check, "active",
                              G_BINDING_BIDIRECTIONAL | G_BINDING_SYNC_CREATE);
      gtk_widget_set_valign (check, GTK_ALIGN_CENTER);
      /* Translators: tooltip of the tick beside a run in the history */
      tooltip = g_strdup_printf (_("Draw “%s” on the charts"), tdm_run_item_get_name (item));
      gtk_widget_set_tooltip_text (check, tooltip);
      gtk_accessible_update_property (GTK_ACCESSIBLE (check), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                      tooltip, -1);
      adw_action_row_add_prefix (ADW_ACTION_ROW (row), check);
      adw_action_row_set_activatable_widget (ADW_ACTION_ROW (row), check);
      /* Its trained network, kept beside it: the window goes on with it, classifies
       * with it or exports it (and says so where it is no longer kept). */
      g_autoptr(GMenu) network = g_menu_new ();
      g_autoptr(GMenuItem) resume = g_menu_item_new (_("Re_sume…"), NULL);
      g_autoptr(GMenuItem) classify = g_menu_item_new (_("_Classify Images…"), NULL);
      g_autoptr(GMenuItem) onnx = g_menu_item_new (_("Export Network as _ONNX…"), NULL);
      g_autoptr(GMenuItem) reference = g_menu_item_new (_("Show under the _Timeline"), NULL);
      GVariant *id = g_variant_new_string (tdm_run_item_get_id (item));

      g_variant_ref_sink (id);
      g_menu_item_set_action_and_target_value (resume, "win.resume-run", id);
      g_menu_item_set_action_and_target_value (classify, "win.classify-run", id);
      g_menu_item_set_action_and_target_value (onnx, "win.export-run-onnx", id);
      g_menu_item_set_action_and_target_value (reference, "win.timeline-reference", id);
      g_variant_unref (id);
      g_menu_append_item (network, resume);
      g_menu_append_item (network, classify);
      g_menu_append_item (network, onnx);
      g_menu_append (menu, _("_Rename…"), "run.rename");
      g_menu_append (menu, _("Use as _Baseline"), "run.baseline");
      g_menu_append_item (menu, reference);
      g_menu_append (menu, _("_Export as CSV…"), "run.export");
      g_menu_append (menu, _("_Delete"), "run.delete");
      g_menu_prepend_section (menu, NULL, G_MENU_MODEL (network));
    }
  gtk_menu_button_set_menu_model (GTK_MENU_BUTTON (menu_button), G_MENU_MODEL (menu));
  gtk_menu_button_set_icon_name (GTK_MENU_BUTTON (menu_button), "view-more-symbolic");
  gtk_menu_button_set_has_frame (GTK_MENU_BUTTON (menu_button), FALSE);
  gtk_widget_set_valign (menu_button, GTK_ALIGN_CENTER);
  gtk_widget_set_tooltip_text (menu_button, _("Run options"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (menu_button), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Run options"), -1);
  adw_action_row_add_suffix (ADW_ACTION_ROW (row), menu_button);

  return row;
}

/* The page ------------------------------------------------------------------- */

static void
tdm_history_view_update_problems (TdmHistoryView *self)
{
  g_auto(GStrv) problems = tdm_history_store_get_problems (self->store);
  g_autofree char *text = NULL;

  if (problems[0] != NULL)
    {
      g_autofree char *joined = g_strjoinv ("\n", problems);

      /* Translators: above the list of runs when some files could not be read */
      text = g_strdup_printf (_("Some runs could not be read:\n%s"), joined);
    }
  gtk_label_set_label (self->problems_label, text != NULL ? text : "");
  gtk_widget_set_visible (GTK_WIDGET (self->problems_label), text != NULL);
}

static void
tdm_history_view_update_baseline (TdmHistoryView *self)
{
  TdmRunItem *baseline = tdm_history_store_get_baseline (self->store);
  g_autofree char *text = NULL;

  if (baseline != NULL)
    /* Translators: under the comparison table; %s is a run's name */
    text = g_strdup_printf (_("Speed-up is against “%s” (%s), for runs of the same network and data; choose another baseline in a run’s menu."),
                            tdm_run_item_get_name (baseline),
                            tdm_run_item_get_record (baseline)->config->network);
  adw_preferences_group_set_description (self->table_group, text);
  tdm_history_view_update_problems (self);
}

void
tdm_history_view_update_kept (TdmHistoryView *self)
{
  TdmHistory *history;
  g_autofree char *size = NULL;
  g_autofree char *text = NULL;

  g_return_if_fail (TDM_IS_HISTORY_VIEW (self));

  history = tdm_history_store_get_history (self->store);
  size = tdm_format_size ((gint64) tdm_history_weights_bytes (history), G_FORMAT_SIZE_DEFAULT);
  /* Translators: under "Trained networks kept"; %s a size, "12.5 MB" */
  text = g_strdup_printf (_("Each run keeps its network, to resume, classify or export: %s now. Past the limit the oldest runs’ networks go first; their entries stay."),
                          size);
  adw_action_row_set_subtitle (self->kept_row, text);
}

static GtkWidget *
tdm_history_view_build_kept (TdmHistoryView *self)
{
  GtkWidget *spin = gtk_spin_button_new_with_range (0, 1048576, 256);
  GtkWidget *unit = gtk_label_new (_("MiB"));

  self->kept_row = ADW_ACTION_ROW (adw_action_row_new ());
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->kept_row), _("Trained networks _kept"));
  adw_preferences_row_set_use_underline (ADW_PREFERENCES_ROW (self->kept_row), TRUE);
  adw_action_row_set_subtitle_lines (self->kept_row, 0);
  gtk_widget_set_valign (spin, GTK_ALIGN_CENTER);
  gtk_spin_button_set_numeric (GTK_SPIN_BUTTON (spin), TRUE);
  gtk_widget_set_tooltip_text (spin, _("The most disk space the runs’ trained networks take together"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (spin), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Trained networks kept, in MiB"), -1);
  g_settings_bind (self->settings, "kept-networks-limit", spin, "value", G_SETTINGS_BIND_DEFAULT);
  adw_action_row_add_suffix (self->kept_row, spin);
  adw_action_row_add_suffix (self->kept_row, unit);
  adw_action_row_set_activatable_widget (self->kept_row, spin);
  tdm_history_view_update_kept (self);
  return GTK_WIDGET (self->kept_row);
}

static void
tdm_history_view_dispose (GObject *object)
{
  TdmHistoryView *self = TDM_HISTORY_VIEW (object);
  GtkWidget *child;

  tdm_history_view_chooser_done (self);
  g_clear_object (&self->settings);
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self))))
    gtk_widget_unparent (child);
  g_clear_object (&self->store);

  G_OBJECT_CLASS (tdm_history_view_parent_class)->dispose (object);
}

static void
tdm_history_view_finalize (GObject *object)
{
  TdmHistoryView *self = TDM_HISTORY_VIEW (object);

  g_clear_pointer (&self->result, g_free);
  g_clear_pointer (&self->strategy_result, g_free);

  G_OBJECT_CLASS (tdm_history_view_parent_class)->finalize (object);
}

static void
tdm_history_view_class_init (TdmHistoryViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_history_view_dispose;
  object_class->finalize = tdm_history_view_finalize;

  gtk_widget_class_install_action (widget_class, "history.undo-delete", "s",
                                   tdm_history_view_undo_delete);
  gtk_widget_class_install_action (widget_class, "history.reload", NULL,
                                   tdm_history_view_reload);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "historyview");
}

static void
tdm_history_view_init (TdmHistoryView *self)
{
}

static GtkWidget *
tdm_history_view_build_compare (TdmHistoryView *self)
{
  GtkWidget *group = adw_preferences_group_new ();
  GtkWidget *steps_row = adw_action_row_new ();
  GtkWidget *button = gtk_button_new_with_mnemonic (_("_Compare"));

  adw_preferences_group_set_title (ADW_PREFERENCES_GROUP (group), _("Compare with One Device"));
  /* What exact mode guarantees, in the engine's words (tandem-train --help shows
   * them too); Compare keeps the engine's chunk. */
  g_autoptr (TdmConfig) defaults = tdm_config_new ();
  g_autofree char *exact = tdm_exact_describe (defaults->exact_chunk);
  g_autofree char *description
      = g_strdup_printf ("%s\n%s",
                         _("Trains the current settings on their devices, then on the main device alone with the same global batch and seed, draws both loss curves and compares their parameters. Both runs train in exact mode."),
                         exact);
  adw_preferences_group_set_description (ADW_PREFERENCES_GROUP (group), description);
  gtk_actionable_set_action_name (GTK_ACTIONABLE (button), "win.compare-one-device");
  gtk_widget_add_css_class (button, "suggested-action");
  gtk_widget_set_valign (button, GTK_ALIGN_CENTER);
  adw_preferences_group_set_header_suffix (ADW_PREFERENCES_GROUP (group), button);

  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (steps_row), _("Steps of each run"));
  self->steps_spin = GTK_SPIN_BUTTON (gtk_spin_button_new_with_range (1, 100000, 10));
  gtk_spin_button_set_value (self->steps_spin, TDM_COMPARE_STEPS);
  gtk_widget_set_valign (GTK_WIDGET (self->steps_spin), GTK_ALIGN_CENTER);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->steps_spin),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, _("Steps of each run"), -1);
  adw_action_row_add_suffix (ADW_ACTION_ROW (steps_row), GTK_WIDGET (self->steps_spin));
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (group), steps_row);

  self->result_row = ADW_ACTION_ROW (adw_action_row_new ());
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->result_row), _("Result"));
  adw_action_row_set_subtitle (ADW_ACTION_ROW (self->result_row), _("Not compared yet"));
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (group), GTK_WIDGET (self->result_row));

  return group;
}

/* "Compare strategies": the same steps with `main`, then with `allreduce`. */
static GtkWidget *
tdm_history_view_build_strategies (TdmHistoryView *self)
{
  GtkWidget *group = adw_preferences_group_new ();
  GtkWidget *button = gtk_button_new_with_mnemonic (_("Compare _Strategies"));

  adw_preferences_group_set_title (ADW_PREFERENCES_GROUP (group), _("Compare Strategies"));
  adw_preferences_group_set_description (ADW_PREFERENCES_GROUP (group),
                                         _("Trains the current settings for the steps above with “main”, then with “allreduce”, keeps both runs in the history and shows their steps one above the other on the Devices page, on the same time axis."));
  gtk_actionable_set_action_name (GTK_ACTIONABLE (button), "win.compare-strategies");
  gtk_widget_set_valign (button, GTK_ALIGN_CENTER);
  adw_preferences_group_set_header_suffix (ADW_PREFERENCES_GROUP (group), button);

  self->strategy_row = ADW_ACTION_ROW (adw_action_row_new ());
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->strategy_row), _("Result"));
  adw_action_row_set_subtitle (self->strategy_row, _("Not compared yet"));
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (group), GTK_WIDGET (self->strategy_row));
  return group;
}

GtkWidget *
tdm_history_view_new (TdmHistoryStore *store)
{
  TdmHistoryView *self;
  GtkWidget *scrolled, *clamp, *box, *runs, *placeholder, *table_scroll;

  g_return_val_if_fail (TDM_IS_HISTORY_STORE (store), NULL);

  self = g_object_new (TDM_TYPE_HISTORY_VIEW, NULL);
  self->store = g_object_ref (store);
  self->settings = g_settings_new (TDM_APP_ID);

  self->toasts = ADW_TOAST_OVERLAY (adw_toast_overlay_new ());
  gtk_widget_set_parent (GTK_WIDGET (self->toasts), GTK_WIDGET (self));
  scrolled = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (scrolled), GTK_POLICY_NEVER,
                                  GTK_POLICY_AUTOMATIC);
  adw_toast_overlay_set_child (self->toasts, scrolled);
  clamp = adw_clamp_new ();
  adw_clamp_set_maximum_size (ADW_CLAMP (clamp), 1400);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (scrolled), clamp);
  box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 24);
  gtk_widget_set_margin_top (box, 18);
  gtk_widget_set_margin_bottom (box, 18);
  gtk_widget_set_margin_start (box, 12);
  gtk_widget_set_margin_end (box, 12);
  adw_clamp_set_child (ADW_CLAMP (clamp), box);

  runs = adw_preferences_group_new ();
  adw_preferences_group_set_title (ADW_PREFERENCES_GROUP (runs), _("Runs"));
  adw_preferences_group_set_description (ADW_PREFERENCES_GROUP (runs),
                                         _("Every run is kept. Tick runs to draw them as faint curves under the current one; scaling runs open their chart."));
  {
    GtkWidget *reload = gtk_button_new_from_icon_name ("view-refresh-symbolic");

    gtk_actionable_set_action_name (GTK_ACTIONABLE (reload), "history.reload");
    gtk_widget_add_css_class (reload, "flat");
    gtk_widget_set_valign (reload, GTK_ALIGN_CENTER);
    gtk_widget_set_tooltip_text (reload, _("Read the history folder again"));
    gtk_accessible_update_property (GTK_ACCESSIBLE (reload), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                    _("Read the history folder again"), -1);
    adw_preferences_group_set_header_suffix (ADW_PREFERENCES_GROUP (runs), reload);
  }
  self->problems_label = GTK_LABEL (gtk_label_new (NULL));
  gtk_label_set_wrap (self->problems_label, TRUE);
  gtk_label_set_xalign (self->problems_label, 0);
  gtk_widget_add_css_class (GTK_WIDGET (self->problems_label), "error");
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (runs), GTK_WIDGET (self->problems_label));
  self->list = GTK_LIST_BOX (gtk_list_box_new ());
  gtk_list_box_set_selection_mode (self->list, GTK_SELECTION_NONE);
  gtk_widget_add_css_class (GTK_WIDGET (self->list), "boxed-list");
  placeholder = gtk_label_new (_("No runs yet: each run you start is kept here."));
  gtk_widget_add_css_class (placeholder, "dim-label");
  gtk_widget_set_margin_top (placeholder, 12);
  gtk_widget_set_margin_bottom (placeholder, 12);
  gtk_label_set_wrap (GTK_LABEL (placeholder), TRUE);
  gtk_list_box_set_placeholder (self->list, placeholder);
  gtk_list_box_bind_model (self->list, G_LIST_MODEL (store), create_row, self, NULL);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->list), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Runs"), -1);
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (runs), GTK_WIDGET (self->list));
  gtk_box_append (GTK_BOX (box), runs);
  {
    GtkWidget *kept = adw_preferences_group_new ();

    adw_preferences_group_add (ADW_PREFERENCES_GROUP (kept), tdm_history_view_build_kept (self));
    gtk_box_append (GTK_BOX (box), kept);
  }
  g_signal_connect_object (store, "items-changed", G_CALLBACK (tdm_history_view_update_kept),
                           self, G_CONNECT_SWAPPED);

  gtk_box_append (GTK_BOX (box), tdm_history_view_build_compare (self));
  gtk_box_append (GTK_BOX (box), tdm_history_view_build_strategies (self));

  self->table_group = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  adw_preferences_group_set_title (self->table_group, _("Comparison"));
  table_scroll = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (table_scroll), GTK_POLICY_AUTOMATIC,
                                  GTK_POLICY_NEVER);
  gtk_scrolled_window_set_propagate_natural_height (GTK_SCROLLED_WINDOW (table_scroll), TRUE);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (table_scroll), tdm_run_table_new (store));
  gtk_widget_add_css_class (table_scroll, "card");
  adw_preferences_group_add (self->table_group, table_scroll);
  gtk_box_append (GTK_BOX (box), GTK_WIDGET (self->table_group));

  g_signal_connect_object (store, "baseline-changed",
                           G_CALLBACK (tdm_history_view_update_baseline), self,
                           G_CONNECT_SWAPPED);
  tdm_history_view_update_baseline (self);

  return GTK_WIDGET (self);
}

int
tdm_history_view_get_compare_steps (TdmHistoryView *self)
{
  g_return_val_if_fail (TDM_IS_HISTORY_VIEW (self), 0);

  return gtk_spin_button_get_value_as_int (self->steps_spin);
}

void
tdm_history_view_set_compare_steps (TdmHistoryView *self,
                                    int             steps)
{
  g_return_if_fail (TDM_IS_HISTORY_VIEW (self));

  gtk_spin_button_set_value (self->steps_spin, steps);
}

void
tdm_history_view_set_compare_result (TdmHistoryView *self,
                                     const char     *text)
{
  g_return_if_fail (TDM_IS_HISTORY_VIEW (self));

  g_free (self->result);
  self->result = g_strdup (text);
  adw_action_row_set_subtitle (self->result_row, text != NULL ? text : _("Not compared yet"));
}

const char *
tdm_history_view_get_compare_result (TdmHistoryView *self)
{
  g_return_val_if_fail (TDM_IS_HISTORY_VIEW (self), NULL);

  return self->result;
}

void
tdm_history_view_set_strategy_result (TdmHistoryView *self,
                                      const char     *text)
{
  g_return_if_fail (TDM_IS_HISTORY_VIEW (self));

  g_free (self->strategy_result);
  self->strategy_result = g_strdup (text);
  adw_action_row_set_subtitle (self->strategy_row, text != NULL ? text : _("Not compared yet"));
}

const char *
tdm_history_view_get_strategy_result (TdmHistoryView *self)
{
  g_return_val_if_fail (TDM_IS_HISTORY_VIEW (self), NULL);

  return self->strategy_result;
}
