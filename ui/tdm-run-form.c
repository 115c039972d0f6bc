/* tdm-run-form.c: the choices that make a training run, on the window's left.
 *
 * The dataset chooser, the spec entry and the device picker are widgets of their
 * own; this form lays them out with the training options, keeps the batch split
 * label in step, and works out whether the whole makes a run that can start.
 *
 * Choices are saved to GSettings as they change and restored at start-up. While
 * restoring, and while the form itself puts a built-in network's spec in the entry,
 * nothing is written back: a setting is only ever what the user chose. The spin
 * buttons and drop-downs are bound to their keys; the rest is saved by hand.
 */

#include <glib/gi18n.h>

#include "tdm-build-config.h"

#include "tdm-classify-view.h"
#include "tdm-dataset-chooser.h"
#include "tdm-device-picker.h"
#include "tdm-device.h"
#include "tdm-network.h"
#include "tdm-run-form.h"
#include "tdm-spec-entry.h"

enum {
  NETWORK_MLP,
  NETWORK_CNN,
  NETWORK_RESNET,
  NETWORK_CUSTOM,
};

static const char *network_ids[] = { "mlp", "cnn", "resnet", "custom", NULL };

/* In the order of TdmOptimizerKind, TdmStrategy and TdmBatchNorm, as the drop-downs
 * list them. */
static const char *optimizer_ids[] = { "sgd", "momentum", "adam", "nesterov", NULL };
static const double optimizer_default_lr[] = { 0.01, 0.01, 0.001, 0.1 };
static const char *strategy_ids[] = { "main", "allreduce", NULL };
static const char *batchnorm_ids[] = { "per-replica", "sync", NULL };

struct _TdmRunForm
{
  GtkWidget          parent_instance;

  /* Template children. */
  GtkLabel          *dataset_heading;
  TdmDatasetChooser *dataset_chooser;
  GtkDropDown       *network_dropdown;
  TdmSpecEntry      *spec_entry;
  TdmDevicePicker   *device_picker;
  GtkSpinButton     *batch_spin;
  GtkLabel          *batch_split_label;
  GtkSpinButton     *epochs_spin;
  GtkDropDown       *optimizer_dropdown;
  GtkSpinButton     *lr_spin;
  GtkDropDown       *strategy_dropdown;
  GtkDropDown       *batchnorm_dropdown;
  GtkLabel          *batchnorm_label;

  GSettings         *settings;
  char              *custom_spec;

  gboolean           ready;
  gboolean           restoring;   /* applying settings: do not write them back */
};

enum {
  PROP_0,
  PROP_READY,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (TdmRunForm, tdm_run_form, GTK_TYPE_WIDGET)

/* Batch split ------------------------------------------------------------- */

/* How the engine shards a global batch: near-equal, the first ones one larger. */
static char *
describe_split (int batch,
                int replicas)
{
  int q, r;

  if (replicas <= 0)
    return g_strdup (_("Pick at least one device"));

  q = batch / replicas;
  r = batch % replicas;

  if (q == 0)
    /* Translators: the batch split when the batch is too small for the devices */
    return g_strdup_printf (ngettext ("A batch of %d is too small for %d replica",
                                      "A batch of %d is too small for %d replicas",
                                      replicas),
                            batch, replicas);

  if (r == 0)
    return g_strdup_printf ("%d = %d × %d", batch, q, replicas);

  if (replicas <= 4)
    {
      GString *text = g_string_new (NULL);

      g_string_append_printf (text, "%d = ", batch);
      for (int i = 0; i < replicas; i++)
        g_string_append_printf (text, i == 0 ? "%d" : " + %d", q + (i < r ? 1 : 0));
      return g_string_free (text, FALSE);
    }

  return g_strdup_printf ("%d = %d × %d + %d × %d", batch, q + 1, r, q, replicas - r);
}

/* The split label, and whether the choices make a run. */
static void
tdm_run_form_update (TdmRunForm *self)
{
  int batch = gtk_spin_button_get_value_as_int (self->batch_spin);
  int replicas = tdm_device_picker_count_replicas (self->device_picker);
  g_autofree char *text = describe_split (batch, replicas);
  gboolean split_ok = replicas > 0 && batch >= replicas;
  gboolean ready;

  gtk_label_set_label (self->batch_split_label, text);
  if (split_ok)
    {
      gtk_widget_remove_css_class (GTK_WIDGET (self->batch_split_label), "error");
      gtk_widget_add_css_class (GTK_WIDGET (self->batch_split_label), "dim-label");
    }
  else
    {
      gtk_widget_add_css_class (GTK_WIDGET (self->batch_split_label), "error");
      gtk_widget_remove_css_class (GTK_WIDGET (self->batch_split_label), "dim-label");
    }

  ready = split_ok &&
          tdm_dataset_chooser_get_ready (self->dataset_chooser) &&
          tdm_spec_entry_get_valid (self->spec_entry);
  if (ready != self->ready)
    {
      self->ready = ready;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_READY]);
    }
}

/* Devices ----------------------------------------------------------------- */

static void
tdm_run_form_devices_changed (TdmRunForm *self)
{
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

/* Dataset ----------------------------------------------------------------- */

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

  tdm_run_form_update (self);
}

void
tdm_run_form_open_folder (TdmRunForm *self)
{
  g_return_if_fail (TDM_IS_RUN_FORM (self));

  tdm_dataset_chooser_open_folder (self->dataset_chooser);
}

/* Network ----------------------------------------------------------------- */

static void
tdm_run_form_network_changed (TdmRunForm *self)
{
  guint selected = gtk_drop_down_get_selected (self->network_dropdown);
  gboolean custom = selected == NETWORK_CUSTOM;
  gboolean restoring;

  if (selected > NETWORK_CUSTOM)
    return;

  if (!self->restoring)
    {
      g_autoptr(TdmConfig) recipe = tdm_config_new ();

      g_settings_set_string (self->settings, "network", network_ids[selected]);
      /* A built-in network with a recipe of its own (the engine says which) brings
       * its batch, epochs, optimizer and BN mode; each stays editable. */
      if (tdm_config_apply_preset (recipe, network_ids[selected]))
        {
          gtk_spin_button_set_value (self->batch_spin, recipe->batch);
          gtk_spin_button_set_value (self->epochs_spin, recipe->epochs);
          gtk_drop_down_set_selected (self->optimizer_dropdown, recipe->optimizer);
          gtk_spin_button_set_value (self->lr_spin, recipe->lr);
          gtk_drop_down_set_selected (self->batchnorm_dropdown, recipe->batchnorm);
        }
    }

  /* Showing a built-in network's spec is not the user typing a custom one. */
  tdm_spec_entry_set_editable (self->spec_entry, custom);
  restoring = self->restoring;
  self->restoring = TRUE;
  tdm_spec_entry_set_text (self->spec_entry,
                           custom ? self->custom_spec : tdm_network_expand (network_ids[selected]));
  self->restoring = restoring;

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
  gboolean sync = gtk_drop_down_get_selected (self->batchnorm_dropdown) == TDM_BATCHNORM_SYNC;

  gtk_label_set_label (self->batchnorm_label,
                       sync ? _("Statistics over the whole batch: N devices train as one")
                            : _("Each device normalizes its own share of the batch"));
}

static void
tdm_run_form_optimizer_changed (TdmRunForm *self)
{
  guint selected = gtk_drop_down_get_selected (self->optimizer_dropdown);

  /* Each optimizer starts from its usual learning rate; the user can change it after. */
  if (!self->restoring && selected < G_N_ELEMENTS (optimizer_default_lr))
    gtk_spin_button_set_value (self->lr_spin, optimizer_default_lr[selected]);
}

/* Settings ---------------------------------------------------------------- */

static gboolean
map_id_to_position (GValue   *value,
                    GVariant *variant,
                    gpointer  user_data)
{
  const char * const *ids = user_data;
  const char *id = g_variant_get_string (variant, NULL);

  for (guint i = 0; ids[i] != NULL; i++)
    if (g_str_equal (ids[i], id))
      {
        g_value_set_uint (value, i);
        return TRUE;
      }

  return FALSE;
}

static GVariant *
map_position_to_id (const GValue       *value,
                    const GVariantType *expected_type,
                    gpointer            user_data)
{
  const char * const *ids = user_data;
  guint position = g_value_get_uint (value);

  if (position >= g_strv_length ((char **) ids))
    return NULL;

  return g_variant_new_string (ids[position]);
}

static void
bind_choice (TdmRunForm         *self,
             const char         *key,
             GtkDropDown        *dropdown,
             const char * const *ids)
{
  g_settings_bind_with_mapping (self->settings, key, dropdown, "selected",
                                G_SETTINGS_BIND_DEFAULT,
                                map_id_to_position, map_position_to_id,
                                (gpointer) ids, NULL);
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
  bind_choice (self, "optimizer", self->optimizer_dropdown, optimizer_ids);
  bind_choice (self, "strategy", self->strategy_dropdown, strategy_ids);
  bind_choice (self, "batchnorm", self->batchnorm_dropdown, batchnorm_ids);

  self->custom_spec = g_settings_get_string (self->settings, "spec");
  network = g_settings_get_string (self->settings, "network");
  for (guint i = 0; network_ids[i] != NULL; i++)
    if (g_str_equal (network, network_ids[i]))
      gtk_drop_down_set_selected (self->network_dropdown, i);

  dataset = g_settings_get_string (self->settings, "dataset");
  tdm_dataset_chooser_set_source (self->dataset_chooser, dataset);

  self->restoring = FALSE;
}

/* Config ------------------------------------------------------------------ */

TdmConfig *
tdm_run_form_build_config (TdmRunForm  *self,
                           GError     **error)
{
  g_autoptr(TdmConfig) config = NULL;
  guint network, optimizer, strategy;

  g_return_val_if_fail (TDM_IS_RUN_FORM (self), NULL);

  config = tdm_config_new ();
  network = gtk_drop_down_get_selected (self->network_dropdown);
  optimizer = gtk_drop_down_get_selected (self->optimizer_dropdown);
  strategy = gtk_drop_down_get_selected (self->strategy_dropdown);

  g_free (config->dataset);
  config->dataset = g_strdup (tdm_dataset_chooser_get_source (self->dataset_chooser));
  tdm_dataset_chooser_get_image_options (self->dataset_chooser, &config->image_size,
                                         &config->image_channels);
  /* Every run keeps its network, so images can be classified with it afterwards. */
  config->save_path = tdm_classify_view_last_run_path ();
  {
    g_autofree char *dir = g_path_get_dirname (config->save_path);
    g_mkdir_with_parents (dir, 0700);
  }

  g_free (config->network);
  if (network == NETWORK_CUSTOM)
    config->network = g_strstrip (g_strdup (tdm_spec_entry_get_text (self->spec_entry)));
  else
    config->network = g_strdup (network_ids[MIN (network, NETWORK_RESNET)]);
  /* The recipe's parts the form has no control for (decay, warm-up, smoothing,
   * augmentation); what the form shows is set below. */
  tdm_config_apply_preset (config, config->network);

  g_strfreev (config->devices);
  config->devices = tdm_device_picker_get_replicas (self->device_picker, &config->main_replica);

  config->batch = gtk_spin_button_get_value_as_int (self->batch_spin);
  config->epochs = gtk_spin_button_get_value_as_int (self->epochs_spin);
  config->optimizer = optimizer == 0 ? TDM_OPTIMIZER_SGD
                    : optimizer == 1 ? TDM_OPTIMIZER_MOMENTUM
                    : optimizer == 2 ? TDM_OPTIMIZER_ADAM
                    : TDM_OPTIMIZER_NESTEROV;
  config->lr = gtk_spin_button_get_value (self->lr_spin);
  config->strategy = strategy == 0 ? TDM_STRATEGY_MAIN : TDM_STRATEGY_ALLREDUCE;
  config->batchnorm = gtk_drop_down_get_selected (self->batchnorm_dropdown) == 1
                        ? TDM_BATCHNORM_SYNC : TDM_BATCHNORM_PER_REPLICA;

  if (!tdm_config_validate (config, error))
    return NULL;

  return g_steal_pointer (&config);
}

gboolean
tdm_run_form_get_ready (TdmRunForm *self)
{
  g_return_val_if_fail (TDM_IS_RUN_FORM (self), FALSE);

  return self->ready;
}

/* GObject ----------------------------------------------------------------- */

static void
tdm_run_form_dispose (GObject *object)
{
  TdmRunForm *self = (TdmRunForm *)object;
  GtkWidget *child;

  gtk_widget_dispose_template (GTK_WIDGET (self), TDM_TYPE_RUN_FORM);
  /* Headings and the options grid are not bound, so the template leaves them. */
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

  properties[PROP_READY] =
    g_param_spec_boolean ("ready", NULL, NULL, FALSE,
                          G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  g_type_ensure (TDM_TYPE_DATASET_CHOOSER);
  g_type_ensure (TDM_TYPE_DEVICE_PICKER);
  g_type_ensure (TDM_TYPE_SPEC_ENTRY);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tandem/Tandem/ui/tdm-run-form.ui");
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, dataset_heading);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, dataset_chooser);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, network_dropdown);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, spec_entry);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, device_picker);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, batch_spin);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, batch_split_label);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, epochs_spin);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, optimizer_dropdown);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, lr_spin);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, strategy_dropdown);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, batchnorm_dropdown);
  gtk_widget_class_bind_template_child (widget_class, TdmRunForm, batchnorm_label);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BOX_LAYOUT);
}

static void
tdm_run_form_init (TdmRunForm *self)
{
  GtkLayoutManager *layout;
  g_autoptr(GArray) devices = NULL;

  gtk_widget_init_template (GTK_WIDGET (self));

  layout = gtk_widget_get_layout_manager (GTK_WIDGET (self));
  gtk_orientable_set_orientation (GTK_ORIENTABLE (layout), GTK_ORIENTATION_VERTICAL);
  gtk_box_layout_set_spacing (GTK_BOX_LAYOUT (layout), 6);

  self->settings = g_settings_new (TDM_APP_ID);

  g_signal_connect_object (self->dataset_chooser, "notify::source",
                           G_CALLBACK (tdm_run_form_dataset_changed), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->dataset_chooser, "notify::ready",
                           G_CALLBACK (tdm_run_form_dataset_ready), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->device_picker, "changed",
                           G_CALLBACK (tdm_run_form_devices_changed), self,
                           G_CONNECT_SWAPPED);

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

  devices = tdm_device_list ();
  tdm_run_form_set_devices (self, devices);

  tdm_run_form_network_changed (self);
  tdm_run_form_batchnorm_changed (self);
}

GtkWidget *
tdm_run_form_new (void)
{
  return g_object_new (TDM_TYPE_RUN_FORM, NULL);
}
