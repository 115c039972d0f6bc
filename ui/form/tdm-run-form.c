/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run-form.c: the choices that make a training run, on the window's left.
 *
 * The dataset chooser, the spec entry and the device picker are widgets of their
 * own; this form lays them out with the training options, keeps the batch split
 * label in step, and works out whether the whole makes a run that can start.
 *
 * The form is GNOME's boxed lists: a group per concern, a row per option (combo
 * rows for choices, action rows with a spin button for numbers); the batch row's
 * subtitle shows how the batch splits, and a missing device is said under the
 * devices, where it is fixed.
 *
 * Choices are saved to GSettings as they change and restored at start-up. While
 * restoring, and while the form itself puts a built-in network's spec in the entry,
 * nothing is written back: a setting is only ever what the user chose. The spin
 * buttons and drop-downs are bound to their keys; the rest is saved by hand.
 *
 * Reading the dataset and listing the devices wait for the window's first frame
 * (the dataset on the chooser's worker thread, the devices in an idle): the
 * window shows its structure and the saved choices first, on a busy machine too,
 * and the form says "loading" until both are in.
 */

#include <adwaita.h>
#include <glib/gi18n.h>

#include "tdm-format.h"
#include "tdm-build-config.h"

#include "tdm-base-recipe.h"
#include "tdm-choice.h"
#include "tdm-dataset-chooser.h"
#include "tdm-device-picker.h"
#include "tdm-device.h"
#include "tdm-device-row.h"
#include "tdm-finetune-group.h"
#include "tdm-form-choices.h"
#include "tdm-iterator.h"
#include "tdm-network.h"
#include "tdm-network-catalogue.h"
#include "tdm-number-check.h"
#include "tdm-precision-auto.h"
#include "tdm-run.h"
#include "tdm-run-form.h"
#include "tdm-run-form-private.h"
#include "tdm-spec-entry.h"


enum {
  PROP_0,
  PROP_READY,
  PROP_LOADING,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

enum {
  CHANGED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (TdmRunForm, tdm_run_form, GTK_TYPE_WIDGET)

/* Batch split ------------------------------------------------------------- */

/* The split as the engine makes it (tdm_shard_of()), written as a sum: equal shards
 * as "200 = 100 × 2", a few unequal ones one by one, many as two products. */
static char *
describe_split (int batch,
                int replicas)
{
  g_autofree int *sizes = NULL;
  int offset, n_distinct = 1;

  if (replicas <= 0)
    return g_strdup ("");

  if (!tdm_config_batch_splits (batch, replicas))
    /* Translators: the batch split when the batch is too small for the devices */
    return g_strdup_printf (ngettext ("A batch of %d is too small for %d replica",
                                      "A batch of %d is too small for %d replicas",
                                      replicas),
                            batch, replicas);

  sizes = g_new (int, replicas);
  for (int i = 0; i < replicas; i++)
    {
      tdm_shard_of (batch, replicas, i, &offset, &sizes[i]);
      if (i > 0 && sizes[i] != sizes[i - 1])
        n_distinct++;
    }

  if (n_distinct == 1)
    return g_strdup_printf ("%d = %d × %d", batch, sizes[0], replicas);

  if (replicas <= 4 || n_distinct > 2)
    {
      GString *text = g_string_new (NULL);

      g_string_append_printf (text, "%d = ", batch);
      for (int i = 0; i < replicas; i++)
        g_string_append_printf (text, i == 0 ? "%d" : " + %d", sizes[i]);
      return g_string_free (text, FALSE);
    }

  {
    int first = 1;

    while (first < replicas && sizes[first] == sizes[0])
      first++;
    return g_strdup_printf ("%d = %d × %d + %d × %d", batch, sizes[0], first,
                            sizes[replicas - 1], replicas - first);
  }
}

/* The network the weights would go into, for the fine-tuning group's load report:
 * the one chosen, made for the dataset loaded (none until both are known). */
static void
tdm_run_form_update_finetune (TdmRunForm *self)
{
  guint selected = adw_combo_row_get_selected (self->network_dropdown);
  int height, width, channels, classes;
  const char *network;

  if (!tdm_dataset_chooser_get_ready (self->dataset_chooser) ||
      !tdm_spec_entry_get_valid (self->spec_entry) ||
      !tdm_dataset_chooser_get_shape (self->dataset_chooser, &height, &width, &channels, &classes))
    {
      tdm_finetune_group_set_network (self->finetune_group, NULL, 0, 0, 0, 0);
      return;
    }
  network = selected >= tdm_form_network_custom_index () ? tdm_spec_entry_get_text (self->spec_entry)
                                                : tdm_form_network_id (selected);
  tdm_finetune_group_set_network (self->finetune_group, network, height, width, channels,
                                  classes);
}

static const char *
number_problem (GtkSpinButton *spin)
{
  return tdm_number_check_get_message (tdm_number_check_get (spin));
}

/* A number row's subtitle: what is wrong with its text as typed, if anything. */
static void
show_number_problem (AdwActionRow  *row,
                     GtkSpinButton *spin)
{
  const char *problem = number_problem (spin);

  adw_action_row_set_subtitle (row, problem != NULL ? problem : "");
  if (problem != NULL)
    gtk_widget_add_css_class (GTK_WIDGET (row), "error");
  else
    gtk_widget_remove_css_class (GTK_WIDGET (row), "error");
}

/* The split label, and whether the choices make a run. */
static void
tdm_run_form_update (TdmRunForm *self)
{
  int batch = gtk_spin_button_get_value_as_int (self->batch_spin);
  int replicas = tdm_device_picker_count_replicas (self->device_picker);
  g_autofree char *text = describe_split (batch, replicas);
  g_autofree char *devices_problem = tdm_device_picker_dup_problem (self->device_picker);
  gboolean split_ok = replicas > 0 && tdm_config_batch_splits (batch, replicas);
  int train_count = 0;
  gboolean ready;

  /* A number typed wrong is said where it was typed; the split waits for it. */
  if (number_problem (self->batch_spin) != NULL)
    {
      g_free (text);
      text = g_strdup (number_problem (self->batch_spin));
      split_ok = FALSE;
    }
  show_number_problem (self->epochs_row, self->epochs_spin);
  show_number_problem (self->lr_row, self->lr_spin);
  gtk_label_set_label (self->devices_hint_label,
                       devices_problem != NULL ? devices_problem
                       : self->devices_listed ? _("Pick at least one device")
                                              : _("Looking for devices…"));

  /* A batch the training set cannot fill is refused here, in the form's words,
   * before Start rather than by the engine after it. */
  if (split_ok && tdm_dataset_chooser_get_counts (self->dataset_chooser, &train_count, NULL)
      && batch > train_count)
    {
      g_free (text);
      /* Translators: under the batch size; %d the batch, %d the dataset's training samples */
      text = g_strdup_printf (ngettext ("A batch of %d is larger than the %d training sample of this dataset: lower the batch size",
                                        "A batch of %d is larger than the %d training samples of this dataset: lower the batch size",
                                        train_count),
                              batch, train_count);
      split_ok = FALSE;
    }

  /* The split under the batch size; a missing device is said under the devices. */
  adw_action_row_set_subtitle (self->batch_row, text);
  gtk_widget_set_visible (GTK_WIDGET (self->devices_hint_label),
                          replicas <= 0 || devices_problem != NULL);
  if (split_ok || (replicas <= 0 && number_problem (self->batch_spin) == NULL))
    gtk_widget_remove_css_class (GTK_WIDGET (self->batch_row), "error");
  else
    gtk_widget_add_css_class (GTK_WIDGET (self->batch_row), "error");

  tdm_run_form_update_finetune (self);
  ready = split_ok && devices_problem == NULL &&
          number_problem (self->epochs_spin) == NULL && number_problem (self->lr_spin) == NULL &&
          tdm_dataset_chooser_get_ready (self->dataset_chooser) &&
          tdm_spec_entry_get_valid (self->spec_entry) &&
          tdm_finetune_group_get_error (self->finetune_group) == NULL;
  if (ready != self->ready)
    {
      self->ready = ready;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_READY]);
    }
  if (self->loading != (!self->devices_listed || tdm_dataset_chooser_get_loading (self->dataset_chooser)))
    {
      self->loading = !self->loading;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_LOADING]);
    }
  g_signal_emit (self, signals[CHANGED], 0);
}

/* Devices ----------------------------------------------------------------- */

/* The mouse wheel over the settings scrolls the sidebar: a spin button under the
 * pointer would take the wheel for itself (batch 100 → 90 while scrolling past).
 * Its value still moves with the keys, its buttons and typing. */
static void
tdm_run_form_tame_wheel (GtkWidget *widget)
{
  if (GTK_IS_SPIN_BUTTON (widget))
    {
      g_autoptr(GListModel) controllers = gtk_widget_observe_controllers (widget);

      for (guint i = 0; i < g_list_model_get_n_items (controllers); i++)
        {
          g_autoptr(GtkEventController) c = g_list_model_get_item (controllers, i);

          if (GTK_IS_EVENT_CONTROLLER_SCROLL (c))
            gtk_event_controller_set_propagation_phase (c, GTK_PHASE_NONE);
        }
    }
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    tdm_run_form_tame_wheel (c);
}

static void tdm_run_form_precision_changed (TdmRunForm *self);

static void
tdm_run_form_devices_changed (TdmRunForm *self)
{
  /* Device rows come and go with the devices: theirs too. */
  tdm_run_form_tame_wheel (GTK_WIDGET (self));
  g_auto(GStrv) chosen = NULL;
  const char *main_id;
  int workers;

  if (!self->restoring)
    {
      chosen = tdm_device_picker_get_chosen (self->device_picker);
      main_id = tdm_device_picker_get_main_id (self->device_picker);
      workers = tdm_device_picker_get_cpu_workers (self->device_picker);

      g_settings_set_strv (self->settings, "devices", (const char * const *) chosen);
      g_settings_set_string (self->settings, "main-device", main_id ? main_id : "");
      if (workers > 0)
        g_settings_set_int (self->settings, "cpu-workers", workers);
    }

  tdm_run_form_precision_changed (self);
  tdm_run_form_update (self);
}

void
tdm_run_form_set_devices (TdmRunForm *self,
                          GArray     *devices)
{
  g_auto(GStrv) chosen = NULL;
  g_autofree char *main_id = NULL;
  gboolean restoring;

  g_return_if_fail (TDM_IS_RUN_FORM (self));
  g_return_if_fail (devices != NULL);

  /* Given before the first frame (a test's made-up GPUs): this machine's would
   * replace them. */
  self->devices_listed = TRUE;
  g_clear_handle_id (&self->devices_idle, g_source_remove);
  chosen = g_settings_get_strv (self->settings, "devices");
  main_id = g_settings_get_string (self->settings, "main-device");

  restoring = self->restoring;
  self->restoring = TRUE;
  tdm_device_picker_set_devices (self->device_picker, devices,
                                 (const char * const *) chosen, main_id,
                                 g_settings_get_int (self->settings, "cpu-workers"));
  self->restoring = restoring;

  tdm_run_form_update (self);
}

static void
tdm_run_form_list_devices (gpointer data)
{
  TdmRunForm *self = data;
  g_autoptr(GArray) devices = NULL;

  self->devices_idle = 0;
  devices = tdm_device_list ();
  tdm_run_form_set_devices (self, devices);
}

/* Waking ------------------------------------------------------------------ */

static void tdm_run_form_first_frame (TdmRunForm *self);
static void tdm_run_form_root_mapped (TdmRunForm *self);

/* By function, not by id: a window being destroyed may have dropped its handlers
 * before its children are unrooted. */
static void
tdm_run_form_stop_waiting (TdmRunForm *self)
{
  if (self->waiting_clock != NULL)
    g_signal_handlers_disconnect_by_func (self->waiting_clock, tdm_run_form_first_frame, self);
  g_clear_object (&self->waiting_clock);
  if (self->waiting_root != NULL)
    g_signal_handlers_disconnect_by_func (self->waiting_root, tdm_run_form_root_mapped, self);
  self->waiting_root = NULL;
}

static void
tdm_run_form_first_frame (TdmRunForm *self)
{
  tdm_run_form_stop_waiting (self);
  tdm_dataset_chooser_hold (self->dataset_chooser, FALSE);
  if (!self->devices_listed && self->devices_idle == 0)
    self->devices_idle = g_idle_add_once (tdm_run_form_list_devices, self);
}

static void
tdm_run_form_root_mapped (TdmRunForm *self)
{
  if (self->waiting_clock != NULL)
    return;

  self->waiting_clock = g_object_ref (gtk_widget_get_frame_clock (self->waiting_root));
  g_signal_connect_swapped (self->waiting_clock, "after-paint",
                            G_CALLBACK (tdm_run_form_first_frame), self);
}

/* The window's first frame, not the form's: a folded-away form is not mapped. */
static void
tdm_run_form_root (GtkWidget *widget)
{
  TdmRunForm *self = TDM_RUN_FORM (widget);

  GTK_WIDGET_CLASS (tdm_run_form_parent_class)->root (widget);

  if (!tdm_run_form_get_loading (self) || self->devices_idle != 0 || self->waiting_root != NULL)
    return;
  self->waiting_root = GTK_WIDGET (gtk_widget_get_root (widget));
  g_signal_connect_swapped (self->waiting_root, "map",
                            G_CALLBACK (tdm_run_form_root_mapped), self);
  if (gtk_widget_get_mapped (self->waiting_root))
    tdm_run_form_root_mapped (self);
}

static void
tdm_run_form_unroot (GtkWidget *widget)
{
  tdm_run_form_stop_waiting (TDM_RUN_FORM (widget));

  GTK_WIDGET_CLASS (tdm_run_form_parent_class)->unroot (widget);
}

/* Dataset ----------------------------------------------------------------- */

static void tdm_run_form_show_network (TdmRunForm *self);

static void
tdm_run_form_dataset_changed (TdmRunForm *self)
{
  if (!self->restoring)
    g_settings_set_string (self->settings, "dataset",
                           tdm_dataset_chooser_get_source (self->dataset_chooser));

  tdm_run_form_update (self);
}

static void
tdm_run_form_dataset_ready (TdmRunForm *self)
{
  int height, width, channels, classes;

  if (tdm_dataset_chooser_get_shape (self->dataset_chooser, &height, &width, &channels, &classes))
    tdm_spec_entry_set_shape (self->spec_entry, height, width, channels, classes);
  tdm_run_form_show_network (self);

  tdm_run_form_update (self);
}

void
tdm_run_form_open_folder (TdmRunForm *self)
{
  g_return_if_fail (TDM_IS_RUN_FORM (self));

  tdm_dataset_chooser_open_folder (self->dataset_chooser);
}

/* Network ----------------------------------------------------------------- */

/* What the entry shows: the custom spec, or a built-in network as the engine builds
 * it for the dataset loaded, its head following the dataset's class count
 * (tdm_network_preset_spec(), the rule tdm_network_new() and the CLI follow). */
static void
tdm_run_form_show_network (TdmRunForm *self)
{
  guint selected = adw_combo_row_get_selected (self->network_dropdown);
  const TdmNetworkPreset *preset = tdm_network_preset_find (tdm_form_network_id (selected));
  int height, width, channels, classes = 10;
  g_autofree char *text = NULL;
  gboolean restoring;

  if (selected > tdm_form_network_custom_index ())
    return;
  if (preset == NULL)
    text = g_strdup (self->custom_spec);
  else if (tdm_dataset_chooser_get_ready (self->dataset_chooser) &&
           tdm_dataset_chooser_get_shape (self->dataset_chooser, &height, &width, &channels,
                                          &classes))
    text = tdm_network_preset_spec (preset, classes);
  else
    text = g_strdup (tdm_network_expand (preset->name));

  /* Showing a built-in network's spec is not the user typing a custom one. */
  restoring = self->restoring;
  self->restoring = TRUE;
  tdm_spec_entry_set_text (self->spec_entry, text);
  self->restoring = restoring;
}

static void
tdm_run_form_network_changed (TdmRunForm *self)
{
  guint selected = adw_combo_row_get_selected (self->network_dropdown);
  gboolean custom = selected == tdm_form_network_custom_index ();

  if (selected > tdm_form_network_custom_index ())
    return;

  if (!self->restoring)
    {
      g_autoptr(TdmConfig) recipe = tdm_config_new ();

      g_settings_set_string (self->settings, "network", tdm_form_network_id (selected));
      /* A built-in network with a recipe of its own (the engine says which) brings
       * its batch, epochs, optimizer and BN mode; each stays editable. */
      if (tdm_config_apply_preset (recipe, tdm_form_network_id (selected)))
        {
          gtk_spin_button_set_value (self->batch_spin, recipe->batch);
          gtk_spin_button_set_value (self->epochs_spin, recipe->epochs);
          adw_combo_row_set_selected (self->optimizer_dropdown, recipe->optimizer);
          gtk_spin_button_set_value (self->lr_spin, recipe->lr);
          adw_combo_row_set_selected (self->batchnorm_dropdown, recipe->batchnorm);
        }
    }

  /* Image folders are decoded at the size a built-in network is made for (224 for
   * torchvision's), unless another size is chosen for them. */
  {
    int count = 0;
    const TdmNetworkPreset *presets = tdm_network_presets (&count);

    tdm_dataset_chooser_set_default_image_size (self->dataset_chooser,
                                                selected < (guint) count ? presets[selected].input_size : 0);
  }

  tdm_spec_entry_set_editable (self->spec_entry, custom);
  tdm_run_form_show_network (self);
  tdm_run_form_update (self);
}

static void
tdm_run_form_spec_changed (TdmRunForm *self)
{
  if (!self->restoring && tdm_spec_entry_get_editable (self->spec_entry))
    {
      g_free (self->custom_spec);
      self->custom_spec = g_strdup (tdm_spec_entry_get_text (self->spec_entry));
      g_settings_set_string (self->settings, "spec", self->custom_spec);
    }

  tdm_run_form_update (self);
}

static void
tdm_run_form_batchnorm_changed (TdmRunForm *self)
{
  gboolean sync = adw_combo_row_get_selected (self->batchnorm_dropdown) == TDM_BATCHNORM_SYNC;

  adw_action_row_set_subtitle (ADW_ACTION_ROW (self->batchnorm_dropdown),
                       sync ? _("Statistics over the whole batch: N devices train as one")
                            : _("Each device normalizes its own share of the batch"));
}

/* Whether a CPU worker is among the devices picked. */
static gboolean
tdm_run_form_uses_cpu (TdmRunForm *self)
{
  TdmDeviceId devices[TDM_MAX_REPLICAS];
  int main_replica;
  int count = tdm_device_picker_get_replicas (self->device_picker, devices, TDM_MAX_REPLICAS,
                                              &main_replica);

  for (int i = 0; i < count; i++)
    if (!tdm_device_id_is_gpu (devices[i]))
      return TRUE;
  return FALSE;
}

/* What "Automatic" is for the devices picked now: the engine's rule over the picker's
 * rows (what tdm_device_list() reported, or a test's made-up devices). */
static TdmPrecisionChoice
tdm_run_form_auto_precision (TdmRunForm *self)
{
  TdmDeviceId devices[TDM_MAX_REPLICAS];
  int main_replica;
  int count = tdm_device_picker_get_replicas (self->device_picker, devices, TDM_MAX_REPLICAS,
                                              &main_replica);
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows (self->device_picker);
  g_autoptr(GArray) known = g_array_new (FALSE, TRUE, sizeof (TdmDeviceInfo));

  for (guint i = 0; i < rows->len; i++)
    g_array_append_vals (known, tdm_device_row_get_info (rows->pdata[i]), 1);
  return tdm_precision_choose (TDM_PRECISION_AUTO, devices, MIN (count, TDM_MAX_REPLICAS),
                               (const TdmDeviceInfo *) known->data, known->len);
}

/* What the precision does, under its row; for bfloat16 on CPU workers, that they run it
 * as the GPUs' reference, without the float32 Winograd convolutions (about four times
 * slower there for the resnet preset); for "Automatic", what it is on the devices
 * picked now. */
static void
tdm_run_form_precision_changed (TdmRunForm *self)
{
  const char *what = NULL;
  g_autofree char *owned = NULL;
  guint position = adw_combo_row_get_selected (self->precision_dropdown);

  switch ((TdmPrecision) tdm_form_choice_value (TDM_TYPE_PRECISION, position))
    {
    case TDM_PRECISION_AUTO:
      {
        TdmPrecisionChoice choice = tdm_run_form_auto_precision (self);
        g_autofree char *reason = tdm_precision_choice_reason (&choice);

        if (choice.precision == TDM_PRECISION_BF16)
          what = _("Automatic: bfloat16, since every GPU picked has bfloat16 tensor cores");
        else if (choice.cause == TDM_PRECISION_CPU)
          what = _("Automatic: float32, since the CPU is picked");
        else
          what = owned = g_strdup_printf (_("Automatic: float32, since %s"), reason);
      }
      break;
    case TDM_PRECISION_FP32:
      what = _("Every product in float32: the reference");
      break;
    case TDM_PRECISION_TF32:
      what = _("Matrix products on TensorFloat-32 tensor cores where the GPU has them");
      break;
    case TDM_PRECISION_BF16:
      what = tdm_run_form_uses_cpu (self)
               ? _("Bfloat16 on CPU workers is the GPUs' reference: several times slower than float32 there")
               : _("Bfloat16 activations, float32 weights: the fastest on GPUs with bfloat16 tensor cores");
      break;
    }
  adw_action_row_set_subtitle (ADW_ACTION_ROW (self->precision_dropdown), what != NULL ? what : "");
}

static void
tdm_run_form_optimizer_changed (TdmRunForm *self)
{
  guint selected = adw_combo_row_get_selected (self->optimizer_dropdown);

  /* Each optimizer starts from its usual learning rate; the user can change it after. */
  if (!self->restoring && selected < tdm_choice_count (TDM_TYPE_OPTIMIZER_KIND))
    gtk_spin_button_set_value (self->lr_spin, tdm_base_recipe_lr ((TdmOptimizerKind) selected));
}

/* Settings ---------------------------------------------------------------- */

static gboolean
map_id_to_position (GValue   *value,
                    GVariant *variant,
                    gpointer  user_data)
{
  int position;

  GType type = (GType) GPOINTER_TO_SIZE (user_data);

  if (!tdm_choice_from_name (type, g_variant_get_string (variant, NULL), &position))
    return FALSE;
  g_value_set_uint (value, tdm_form_choice_position (type, position));
  return TRUE;
}

static GVariant *
map_position_to_id (const GValue       *value,
                    const GVariantType *expected_type,
                    gpointer            user_data)
{
  GType type = (GType) GPOINTER_TO_SIZE (user_data);
  int choice = tdm_form_choice_value (type, g_value_get_uint (value));
  const char *id = tdm_choice_name (type, choice);

  return id != NULL ? g_variant_new_string (id) : NULL;
}

static void
bind_choice (TdmRunForm  *self,
             const char  *key,
             AdwComboRow *dropdown,
             GType        type)
{
  g_settings_bind_with_mapping (self->settings, key, dropdown, "selected",
                                G_SETTINGS_BIND_DEFAULT,
                                map_id_to_position, map_position_to_id,
                                GSIZE_TO_POINTER (type), NULL);
}

static void
tdm_run_form_restore (TdmRunForm *self)
{
  g_autofree char *dataset = NULL;
  g_autofree char *network = NULL;

  self->restoring = TRUE;

  g_settings_bind (self->settings, "batch", self->batch_spin, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "epochs", self->epochs_spin, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "learning-rate", self->lr_spin, "value", G_SETTINGS_BIND_DEFAULT);
  bind_choice (self, "optimizer", self->optimizer_dropdown, TDM_TYPE_OPTIMIZER_KIND);
  bind_choice (self, "strategy", self->strategy_dropdown, TDM_TYPE_STRATEGY);
  bind_choice (self, "batchnorm", self->batchnorm_dropdown, TDM_TYPE_BATCH_NORM);
  bind_choice (self, "precision", self->precision_dropdown, TDM_TYPE_PRECISION);

  self->custom_spec = g_settings_get_string (self->settings, "spec");
  network = g_settings_get_string (self->settings, "network");
  for (guint i = 0; i <= tdm_form_network_custom_index (); i++)
    if (g_str_equal (network, tdm_form_network_id (i)))
      adw_combo_row_set_selected (self->network_dropdown, i);

  dataset = g_settings_get_string (self->settings, "dataset");
  tdm_dataset_chooser_set_source (self->dataset_chooser, dataset);

  self->restoring = FALSE;
}

char *
tdm_run_form_dup_problem (TdmRunForm *self)
{
  int replicas;

  g_return_val_if_fail (TDM_IS_RUN_FORM (self), NULL);

  if (self->ready)
    return NULL;
  {
    g_autofree char *devices_problem = tdm_device_picker_dup_problem (self->device_picker);
    const char *problem = number_problem (self->batch_spin);

    if (problem == NULL)
      problem = number_problem (self->epochs_spin);
    if (problem == NULL)
      problem = number_problem (self->lr_spin);
    if (problem == NULL)
      problem = devices_problem;
    if (problem != NULL)
      return tdm_format_sentence (problem);
  }
  if (!self->devices_listed)
    return g_strdup (_("Looking for devices…"));
  if (tdm_dataset_chooser_get_error (self->dataset_chooser) != NULL)
    return g_strdup (tdm_dataset_chooser_get_error (self->dataset_chooser));
  if (!tdm_dataset_chooser_get_ready (self->dataset_chooser))
    return g_strdup (_("Reading the dataset…"));
  replicas = tdm_device_picker_count_replicas (self->device_picker);
  if (replicas <= 0)
    return g_strdup (_("Tick at least one device (or CPU workers) in the settings."));
  if (!tdm_spec_entry_get_valid (self->spec_entry))
    return g_strdup (_("The network in the settings is not valid: the message under it says why."));
  if (tdm_finetune_group_get_error (self->finetune_group) != NULL)
    return g_strdup (_("The weights to start from do not fit the network: the settings say why."));
  /* What the batch row says under it, as a sentence. */
  return tdm_format_sentence (adw_action_row_get_subtitle (self->batch_row));
}

gboolean
tdm_run_form_get_ready (TdmRunForm *self)
{
  g_return_val_if_fail (TDM_IS_RUN_FORM (self), FALSE);

  return self->ready;
}

gboolean
tdm_run_form_get_loading (TdmRunForm *self)
{
  g_return_val_if_fail (TDM_IS_RUN_FORM (self), FALSE);

  return self->loading;
}

/* GObject ----------------------------------------------------------------- */

static void
tdm_run_form_dispose (GObject *object)
{
  TdmRunForm *self = (TdmRunForm *)object;
  GtkWidget *child;

  tdm_run_form_stop_waiting (self);
  g_clear_handle_id (&self->devices_idle, g_source_remove);
  gtk_widget_dispose_template (GTK_WIDGET (self), TDM_TYPE_RUN_FORM);
  /* Whatever the template left behind. */
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self))))
    gtk_widget_unparent (child);

  G_OBJECT_CLASS (tdm_run_form_parent_class)->dispose (object);
}

static void
tdm_run_form_finalize (GObject *object)
{
  TdmRunForm *self = (TdmRunForm *)object;

  g_clear_object (&self->settings);
  g_free (self->custom_spec);

  G_OBJECT_CLASS (tdm_run_form_parent_class)->finalize (object);
}

static void
tdm_run_form_get_property (GObject    *object,
                           guint       prop_id,
                           GValue     *value,
                           GParamSpec *pspec)
{
  TdmRunForm *self = TDM_RUN_FORM (object);

  switch (prop_id)
    {
    case PROP_READY:
      g_value_set_boolean (value, self->ready);
      break;

    case PROP_LOADING:
      g_value_set_boolean (value, self->loading);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_run_form_class_init (TdmRunFormClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_run_form_dispose;
  object_class->finalize = tdm_run_form_finalize;
  object_class->get_property = tdm_run_form_get_property;
  widget_class->root = tdm_run_form_root;
  widget_class->unroot = tdm_run_form_unroot;

  properties[PROP_READY] =
    g_param_spec_boolean ("ready", NULL, NULL, FALSE,
                          G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_LOADING] =
    g_param_spec_boolean ("loading", NULL, NULL, TRUE,
                          G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  /**
   * TdmRunForm::changed:
   *
   * A choice changed (or the dataset finished loading): what the run would be, and
   * so its memory estimate, may differ.
   */
  signals[CHANGED] =
    g_signal_new ("changed",
                  G_TYPE_FROM_CLASS (klass),
                  G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);

  g_type_ensure (TDM_TYPE_DATASET_CHOOSER);
  g_type_ensure (TDM_TYPE_DEVICE_PICKER);
  g_type_ensure (TDM_TYPE_SPEC_ENTRY);
  g_type_ensure (TDM_TYPE_FINETUNE_GROUP);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tandem/Tandem/ui/tdm-run-form.ui");
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, dataset_group);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, dataset_chooser);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, network_dropdown);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, spec_entry);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, finetune_group);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, device_picker);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, batch_spin);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, devices_hint_label);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, batch_row);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, epochs_row);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, epochs_spin);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, optimizer_dropdown);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, lr_row);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, lr_spin);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, strategy_dropdown);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, batchnorm_dropdown);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, precision_dropdown);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BOX_LAYOUT);
}

static void
tdm_run_form_init (TdmRunForm *self)
{
  GtkLayoutManager *layout;

  gtk_widget_init_template (GTK_WIDGET (self));

  layout = gtk_widget_get_layout_manager (GTK_WIDGET (self));
  gtk_orientable_set_orientation (GTK_ORIENTABLE (layout), GTK_ORIENTATION_VERTICAL);
  gtk_box_layout_set_spacing (GTK_BOX_LAYOUT (layout), 18);

  self->settings = g_settings_new (TDM_APP_ID);
  self->loading = TRUE;
  tdm_dataset_chooser_hold (self->dataset_chooser, TRUE);
  tdm_run_form_tame_wheel (GTK_WIDGET (self));
  /* Numbers typed wrong are said, and hold Start back, instead of becoming the
   * nearest value that works. */
  {
    GtkSpinButton *spins[] = {self->batch_spin, self->epochs_spin, self->lr_spin};

    for (guint i = 0; i < G_N_ELEMENTS (spins); i++)
      g_signal_connect_object (tdm_number_check_attach (spins[i]), "notify::message",
                               G_CALLBACK (tdm_run_form_update), self, G_CONNECT_SWAPPED);
  }

  g_signal_connect_object (self->dataset_chooser, "notify::source",
                           G_CALLBACK (tdm_run_form_dataset_changed), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->dataset_chooser, "notify::ready",
                           G_CALLBACK (tdm_run_form_dataset_ready), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->dataset_chooser, "notify::error",
                           G_CALLBACK (tdm_run_form_update), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->device_picker, "changed",
                           G_CALLBACK (tdm_run_form_devices_changed), self,
                           G_CONNECT_SWAPPED);
  /* Weights that do not fit the network keep Start greyed out. */
  g_signal_connect_object (self->finetune_group, "notify::error",
                           G_CALLBACK (tdm_run_form_update), self,
                           G_CONNECT_SWAPPED);

  {
    g_autoptr(GListModel) networks = tdm_form_network_model ();

    adw_combo_row_set_model (self->network_dropdown, networks);
  }
  {
    g_autoptr(GListModel) optimizers = tdm_form_choice_model (TDM_TYPE_OPTIMIZER_KIND);
    g_autoptr(GListModel) strategies = tdm_form_choice_model (TDM_TYPE_STRATEGY);
    g_autoptr(GListModel) batchnorms = tdm_form_choice_model (TDM_TYPE_BATCH_NORM);
    g_autoptr(GListModel) precisions = tdm_form_choice_model (TDM_TYPE_PRECISION);

    adw_combo_row_set_model (self->optimizer_dropdown, optimizers);
    adw_combo_row_set_model (self->strategy_dropdown, strategies);
    adw_combo_row_set_model (self->batchnorm_dropdown, batchnorms);
    adw_combo_row_set_model (self->precision_dropdown, precisions);
  }
  {
    /* The engine's default batch until the settings (whose default is the same,
     * test-choice checks) say otherwise. */
    g_autoptr(TdmConfig) defaults = tdm_config_new ();

    gtk_spin_button_set_value (self->batch_spin, defaults->batch);
  }
  tdm_run_form_restore (self);

  g_signal_connect_object (self->network_dropdown, "notify::selected",
                           G_CALLBACK (tdm_run_form_network_changed), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->spec_entry, "notify::text",
                           G_CALLBACK (tdm_run_form_spec_changed), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->spec_entry, "notify::valid",
                           G_CALLBACK (tdm_run_form_update), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->batch_spin, "value-changed",
                           G_CALLBACK (tdm_run_form_update), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->optimizer_dropdown, "notify::selected",
                           G_CALLBACK (tdm_run_form_optimizer_changed), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->batchnorm_dropdown, "notify::selected",
                           G_CALLBACK (tdm_run_form_batchnorm_changed), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->precision_dropdown, "notify::selected",
                           G_CALLBACK (tdm_run_form_precision_changed), self,
                           G_CONNECT_SWAPPED);
  /* The precision changes what a replica needs: the memory estimate follows. */
  g_signal_connect_object (self->precision_dropdown, "notify::selected",
                           G_CALLBACK (tdm_run_form_update), self,
                           G_CONNECT_SWAPPED);
  /* The strategy decides where the optimizer's state lives. */
  g_signal_connect_object (self->strategy_dropdown, "notify::selected",
                           G_CALLBACK (tdm_run_form_update), self,
                           G_CONNECT_SWAPPED);

  tdm_run_form_update (self);
  tdm_run_form_network_changed (self);
  tdm_run_form_batchnorm_changed (self);
  tdm_run_form_precision_changed (self);
}

int
tdm_run_form_get_replicas (TdmRunForm  *self,
                           TdmDeviceId *devices,
                           int          max,
                           int         *main_replica)
{
  g_return_val_if_fail (TDM_IS_RUN_FORM (self), 0);

  return tdm_device_picker_get_replicas (self->device_picker, devices, max, main_replica);
}
