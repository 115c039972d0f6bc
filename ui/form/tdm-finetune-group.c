/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-finetune-group.c: "Start from weights…", frozen parts and input normalization,
 * a group of rows under the network (tdm-finetune-group.h).
 *
 * The load report is the engine's own (tdm_finetune_init_report(): what a run with
 * --init would say when it starts), worked out in a thread whenever the file or the
 * network changes: reading a ResNet-50's 100 MB must not stall the window. Each
 * request has a generation; a result that arrives after a newer request, or after
 * the group is gone, is dropped. Choices are saved to GSettings as they change.
 */

#include <glib/gi18n.h>

#include "tdm-build-config.h"
#include "tdm-choice.h"

#include "tdm-finetune.h"
#include "tdm-finetune-group.h"
#include "tdm-network.h"

struct _TdmFinetuneGroup
{
  AdwPreferencesGroup parent_instance;

  AdwActionRow *weights_row;
  GtkButton    *clear_button;
  AdwActionRow *report_row;
  AdwComboRow  *freeze_row;
  AdwEntryRow  *prefixes_row;
  AdwComboRow  *normalize_row;

  GSettings    *settings;
  GtkFileChooserNative *chooser;
  GCancellable *cancellable;

  char         *weights;
  char         *network;
  int           height, width, channels, classes;
  guint         generation;
  char         *report;
  char         *error;
  gboolean      restoring;
};

enum {
  PROP_0,
  PROP_REPORT,
  PROP_ERROR,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (TdmFinetuneGroup, tdm_finetune_group, ADW_TYPE_PREFERENCES_GROUP)

/* Report ------------------------------------------------------------------ */

typedef struct
{
  char *weights;
  char *network;
  int   height, width, channels, classes;
  guint generation;
} Request;

typedef struct
{
  char *report;
  char *error;
} Answer;

static void
request_free (gpointer data)
{
  Request *request = data;

  g_free (request->weights);
  g_free (request->network);
  g_free (request);
}

static void
answer_free (gpointer data)
{
  Answer *answer = data;

  g_free (answer->report);
  g_free (answer->error);
  g_free (answer);
}

static void
report_thread (GTask        *task,
               gpointer      source_object,
               gpointer      task_data,
               GCancellable *cancellable)
{
  Request *request = task_data;
  Answer *answer = g_new0 (Answer, 1);
  g_autoptr(GError) error = NULL;
  TdmNetwork *net;

  net = tdm_network_new (request->network, request->height, request->width,
                         request->channels, request->classes, &error);
  if (net != NULL)
    {
      answer->report = tdm_finetune_init_report (net, request->weights, &error);
      tdm_network_free (net);
    }
  if (answer->report == NULL)
    answer->error = g_strdup (error != NULL ? error->message : "");
  g_task_return_pointer (task, answer, answer_free);
}

static void
show_report (TdmFinetuneGroup *self)
{
  GtkWidget *row = GTK_WIDGET (self->report_row);

  gtk_widget_set_visible (row, self->weights != NULL);
  if (self->error != NULL)
    {
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row),
                                     _("These weights do not fit the network"));
      adw_action_row_set_subtitle (self->report_row, self->error);
      gtk_widget_add_css_class (row, "error");
    }
  else
    {
      /* Without a network (an invalid spec, the dataset still loading) nothing is
       * being read: saying so would stay on screen until the spec is mended. */
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row),
                                     self->report != NULL ? _("What loads")
                                     : self->network != NULL ? _("Reading the weights…")
                                     : _("The weights are read once the network and the dataset are ready"));
      /* The engine's report, as the run will say it when it starts. */
      adw_action_row_set_subtitle (self->report_row, self->report != NULL ? self->report : "");
      gtk_widget_remove_css_class (row, "error");
    }
}

static void
report_done (GObject      *source,
             GAsyncResult *result,
             gpointer      user_data)
{
  TdmFinetuneGroup *self = TDM_FINETUNE_GROUP (source);
  guint generation = GPOINTER_TO_UINT (user_data);
  Answer *answer = g_task_propagate_pointer (G_TASK (result), NULL);

  if (answer == NULL)
    return;
  /* The group was disposed meanwhile: its rows are gone. */
  if (!g_cancellable_is_cancelled (self->cancellable) && generation == self->generation)
    {
      g_free (self->report);
      g_free (self->error);
      self->report = g_steal_pointer (&answer->report);
      self->error = g_steal_pointer (&answer->error);
      show_report (self);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_REPORT]);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ERROR]);
    }
  answer_free (answer);
}

static void
update_report (TdmFinetuneGroup *self)
{
  g_autoptr(GTask) task = NULL;
  Request *request;

  self->generation++;
  g_clear_pointer (&self->report, g_free);
  g_clear_pointer (&self->error, g_free);
  show_report (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_REPORT]);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ERROR]);
  if (self->weights == NULL || self->network == NULL)
    return;

  request = g_new0 (Request, 1);
  request->weights = g_strdup (self->weights);
  request->network = g_strdup (self->network);
  request->height = self->height;
  request->width = self->width;
  request->channels = self->channels;
  request->classes = self->classes;
  task = g_task_new (self, self->cancellable, report_done, GUINT_TO_POINTER (self->generation));
  g_task_set_task_data (task, request, request_free);
  g_task_run_in_thread (task, report_thread);
}

/* Weights ----------------------------------------------------------------- */

void
tdm_finetune_group_set_weights (TdmFinetuneGroup *self,
                                const char       *path)
{
  g_autofree char *name = NULL;

  g_return_if_fail (TDM_IS_FINETUNE_GROUP (self));

  if (path != NULL && *path == '\0')
    path = NULL;
  if (g_strcmp0 (path, self->weights) != 0)
    {
      g_free (self->weights);
      self->weights = g_strdup (path);
      if (!self->restoring)
        g_settings_set_string (self->settings, "init-weights", path != NULL ? path : "");
    }
  if (path != NULL)
    {
      g_autofree char *base = g_filename_display_basename (path);

      /* The subtitle is markup: a file's name is text, and broken across lines
       * without a hyphen that is not in it. */
      name = g_markup_printf_escaped ("<span insert_hyphens=\"false\">%s</span>", base);
    }
  adw_action_row_set_subtitle (self->weights_row,
                               name != NULL ? name : _("None: the network starts from random values"));
  gtk_widget_set_visible (GTK_WIDGET (self->clear_button), path != NULL);
  update_report (self);
}

const char *
tdm_finetune_group_get_weights (TdmFinetuneGroup *self)
{
  g_return_val_if_fail (TDM_IS_FINETUNE_GROUP (self), NULL);

  return self->weights;
}

static void
chooser_response (TdmFinetuneGroup *self,
                  int               response,
                  GtkNativeDialog  *dialog)
{
  g_autoptr(GFile) file = NULL;
  g_autofree char *path = NULL;

  if (response == GTK_RESPONSE_ACCEPT)
    file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
  gtk_native_dialog_destroy (dialog);
  g_clear_object (&self->chooser);
  if (file == NULL)
    return;
  path = g_file_get_path (file);
  if (path == NULL)
    {
      g_free (self->error);
      self->error = g_strdup (_("Only files on this computer can be read."));
      show_report (self);
      return;
    }
  tdm_finetune_group_set_weights (self, path);
}

/* Shows a file chooser for a .safetensors file. */
static void
tdm_finetune_group_choose_weights (TdmFinetuneGroup *self)
{
  g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();
  g_autofree char *folder = NULL;
  GtkRoot *root;

  g_return_if_fail (TDM_IS_FINETUNE_GROUP (self));

  if (self->chooser != NULL)
    {
      gtk_native_dialog_destroy (GTK_NATIVE_DIALOG (self->chooser));
      g_clear_object (&self->chooser);
    }
  root = gtk_widget_get_root (GTK_WIDGET (self));
  self->chooser = gtk_file_chooser_native_new (_("Start from Weights"),
                                               GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                               GTK_FILE_CHOOSER_ACTION_OPEN,
                                               _("_Open"), _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (self->chooser), TRUE);
  gtk_file_filter_set_name (filter, _("Weights (PyTorch .pth, safetensors)"));
  gtk_file_filter_add_pattern (filter, "*.pth");
  gtk_file_filter_add_pattern (filter, "*.pt");
  gtk_file_filter_add_pattern (filter, "*.safetensors");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (self->chooser), filter);
  /* Where torchvision keeps what it downloaded, when there is such a folder. */
  folder = tdm_finetune_torch_checkpoints_folder ();
  if (g_file_test (folder, G_FILE_TEST_IS_DIR))
    {
      g_autoptr(GFile) start = g_file_new_for_path (folder);
      gtk_file_chooser_set_current_folder (GTK_FILE_CHOOSER (self->chooser), start, NULL);
    }
  g_signal_connect_object (self->chooser, "response", G_CALLBACK (chooser_response), self,
                           G_CONNECT_SWAPPED);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (self->chooser));
}

static void
clear_clicked (TdmFinetuneGroup *self)
{
  tdm_finetune_group_set_weights (self, NULL);
}

void
tdm_finetune_group_set_network (TdmFinetuneGroup *self,
                                const char       *network,
                                int               height,
                                int               width,
                                int               channels,
                                int               classes)
{
  g_return_if_fail (TDM_IS_FINETUNE_GROUP (self));

  if (g_strcmp0 (network, self->network) == 0 && height == self->height &&
      width == self->width && channels == self->channels && classes == self->classes)
    return;
  g_free (self->network);
  self->network = g_strdup (network);
  self->height = height;
  self->width = width;
  self->channels = channels;
  self->classes = classes;
  update_report (self);
}

const char *
tdm_finetune_group_get_status (TdmFinetuneGroup *self)
{
  g_return_val_if_fail (TDM_IS_FINETUNE_GROUP (self), NULL);

  return gtk_widget_get_visible (GTK_WIDGET (self->report_row))
           ? adw_preferences_row_get_title (ADW_PREFERENCES_ROW (self->report_row)) : NULL;
}

const char *
tdm_finetune_group_get_report (TdmFinetuneGroup *self)
{
  g_return_val_if_fail (TDM_IS_FINETUNE_GROUP (self), NULL);

  return self->report;
}

const char *
tdm_finetune_group_get_error (TdmFinetuneGroup *self)
{
  g_return_val_if_fail (TDM_IS_FINETUNE_GROUP (self), NULL);

  return self->error;
}

/* Freezing and normalization ---------------------------------------------- */

static void
freeze_changed (TdmFinetuneGroup *self)
{
  guint choice = adw_combo_row_get_selected (self->freeze_row);
  const char *name = tdm_choice_name (TDM_TYPE_FREEZE_CHOICE, (int) choice);

  gtk_widget_set_visible (GTK_WIDGET (self->prefixes_row), choice == TDM_FREEZE_CHOICE_CUSTOM);
  if (!self->restoring && name != NULL)
    g_settings_set_string (self->settings, "freeze", name);
}

static void
prefixes_changed (TdmFinetuneGroup *self)
{
  if (!self->restoring)
    g_settings_set_string (self->settings, "freeze-prefixes",
                           gtk_editable_get_text (GTK_EDITABLE (self->prefixes_row)));
}

static void
normalize_changed (TdmFinetuneGroup *self)
{
  guint choice = adw_combo_row_get_selected (self->normalize_row);
  const char *name = tdm_choice_name (TDM_TYPE_NORMALIZE_CHOICE, (int) choice);

  if (!self->restoring && name != NULL)
    g_settings_set_string (self->settings, "normalize", name);
}

void
tdm_finetune_group_set_freeze (TdmFinetuneGroup *self,
                               TdmFreezeChoice   choice,
                               const char       *prefixes)
{
  g_return_if_fail (TDM_IS_FINETUNE_GROUP (self));

  if (prefixes != NULL)
    gtk_editable_set_text (GTK_EDITABLE (self->prefixes_row), prefixes);
  adw_combo_row_set_selected (self->freeze_row, choice);
}

void
tdm_finetune_group_set_normalize (TdmFinetuneGroup  *self,
                                  TdmNormalizeChoice choice)
{
  g_return_if_fail (TDM_IS_FINETUNE_GROUP (self));

  adw_combo_row_set_selected (self->normalize_row, choice);
}

void
tdm_finetune_group_apply (TdmFinetuneGroup *self,
                          TdmConfig        *config)
{
  guint freeze, normalize;
  const char *name;

  g_return_if_fail (TDM_IS_FINETUNE_GROUP (self));
  g_return_if_fail (config != NULL);

  g_free (config->init_path);
  config->init_path = g_strdup (self->weights);

  freeze = adw_combo_row_get_selected (self->freeze_row);
  g_clear_pointer (&config->freeze, g_strfreev);
  config->train_head = freeze == TDM_FREEZE_CHOICE_BACKBONE;
  if (freeze == TDM_FREEZE_CHOICE_CUSTOM)
    {
      /* Prefixes as --freeze takes them, separated by commas or spaces. */
      g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
      g_auto(GStrv) parts = g_regex_split_simple ("[,\\s]+",
                                                  gtk_editable_get_text (GTK_EDITABLE (self->prefixes_row)),
                                                  0, 0);

      for (guint i = 0; parts[i] != NULL; i++)
        if (*parts[i] != '\0')
          g_strv_builder_add (builder, parts[i]);
      config->freeze = g_strv_builder_end (builder);
      if (config->freeze[0] == NULL)
        g_clear_pointer (&config->freeze, g_strfreev);
    }

  normalize = adw_combo_row_get_selected (self->normalize_row);
  name = tdm_choice_name (TDM_TYPE_NORMALIZE_CHOICE, (int) normalize);
  if (normalize != TDM_NORMALIZE_CHOICE_AUTO && name != NULL)
    {
      g_free (config->normalize);
      config->normalize = g_strdup (name);
    }
}

/* GObject ----------------------------------------------------------------- */

/* The value the settings name `name` in the enum `type`; the first for a name it
 * does not have. */
static int
setting_choice (GType       type,
                const char *name)
{
  int value = 0;

  tdm_choice_from_name (type, name, &value);
  return value;
}

static void
tdm_finetune_group_restore (TdmFinetuneGroup *self)
{
  g_autofree char *weights = g_settings_get_string (self->settings, "init-weights");
  g_autofree char *freeze = g_settings_get_string (self->settings, "freeze");
  g_autofree char *prefixes = g_settings_get_string (self->settings, "freeze-prefixes");
  g_autofree char *normalize = g_settings_get_string (self->settings, "normalize");

  self->restoring = TRUE;
  tdm_finetune_group_set_weights (self, weights);
  tdm_finetune_group_set_freeze (self, setting_choice (TDM_TYPE_FREEZE_CHOICE, freeze), prefixes);
  tdm_finetune_group_set_normalize (self, setting_choice (TDM_TYPE_NORMALIZE_CHOICE, normalize));
  self->restoring = FALSE;
}

static AdwComboRow *
combo_row (const char  *title,
           const char  *tooltip,
           const char **items)
{
  AdwComboRow *row = ADW_COMBO_ROW (adw_combo_row_new ());
  g_autoptr(GtkStringList) list = gtk_string_list_new (items);

  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
  adw_preferences_row_set_use_underline (ADW_PREFERENCES_ROW (row), TRUE);
  gtk_widget_set_tooltip_text (GTK_WIDGET (row), tooltip);
  adw_combo_row_set_model (row, G_LIST_MODEL (list));
  /* The choice under the title, whole, rather than cut beside it in a narrow
   * column. */
  adw_combo_row_set_use_subtitle (row, TRUE);
  return row;
}

static void
tdm_finetune_group_dispose (GObject *object)
{
  TdmFinetuneGroup *self = TDM_FINETUNE_GROUP (object);

  g_cancellable_cancel (self->cancellable);
  if (self->chooser != NULL)
    gtk_native_dialog_destroy (GTK_NATIVE_DIALOG (self->chooser));
  g_clear_object (&self->chooser);
  g_clear_object (&self->settings);

  G_OBJECT_CLASS (tdm_finetune_group_parent_class)->dispose (object);
}

static void
tdm_finetune_group_finalize (GObject *object)
{
  TdmFinetuneGroup *self = TDM_FINETUNE_GROUP (object);

  g_clear_object (&self->cancellable);
  g_free (self->weights);
  g_free (self->network);
  g_free (self->report);
  g_free (self->error);

  G_OBJECT_CLASS (tdm_finetune_group_parent_class)->finalize (object);
}

static void
tdm_finetune_group_get_property (GObject    *object,
                                 guint       prop_id,
                                 GValue     *value,
                                 GParamSpec *pspec)
{
  TdmFinetuneGroup *self = TDM_FINETUNE_GROUP (object);

  switch (prop_id)
    {
    case PROP_REPORT:
      g_value_set_string (value, self->report);
      break;
    case PROP_ERROR:
      g_value_set_string (value, self->error);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_finetune_group_class_init (TdmFinetuneGroupClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = tdm_finetune_group_dispose;
  object_class->finalize = tdm_finetune_group_finalize;
  object_class->get_property = tdm_finetune_group_get_property;

  properties[PROP_REPORT] =
    g_param_spec_string ("report", NULL, NULL, NULL,
                         G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_ERROR] =
    g_param_spec_string ("error", NULL, NULL, NULL,
                         G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
tdm_finetune_group_init (TdmFinetuneGroup *self)
{
  const char *freezes[] = { _("Nothing: everything trains"),
                            _("The backbone: only the head trains"),
                            _("Layers named below"), NULL };
  const char *normalizations[] = { _("The network’s own (ImageNet’s for torchvision’s)"),
                                   _("None"), _("The dataset’s mean and deviation"),
                                   _("ImageNet’s"), NULL };
  GtkWidget *choose;

  self->cancellable = g_cancellable_new ();
  self->settings = g_settings_new (TDM_APP_ID);

  adw_preferences_group_set_title (ADW_PREFERENCES_GROUP (self), _("Fine-Tuning"));

  self->weights_row = ADW_ACTION_ROW (adw_action_row_new ());
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->weights_row), _("Start from weights"));
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->weights_row),
                               _("A state_dict saved by torch.save (.pth, such as torchvision’s downloads) or as safetensors: every tensor whose name and shape match is loaded"));
  /* No mnemonic: one would click it (opening the chooser), where the form's
   * mnemonics move the focus. */
  choose = gtk_button_new_with_label (_("Choose…"));
  gtk_widget_set_valign (choose, GTK_ALIGN_CENTER);
  g_signal_connect_object (choose, "clicked", G_CALLBACK (tdm_finetune_group_choose_weights),
                           self, G_CONNECT_SWAPPED);
  self->clear_button = GTK_BUTTON (gtk_button_new_from_icon_name ("edit-clear-symbolic"));
  gtk_widget_set_valign (GTK_WIDGET (self->clear_button), GTK_ALIGN_CENTER);
  gtk_widget_add_css_class (GTK_WIDGET (self->clear_button), "flat");
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->clear_button), _("Start from random values"));
  g_signal_connect_object (self->clear_button, "clicked", G_CALLBACK (clear_clicked), self,
                           G_CONNECT_SWAPPED);
  adw_action_row_add_suffix (self->weights_row, GTK_WIDGET (self->clear_button));
  adw_action_row_add_suffix (self->weights_row, choose);
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (self->weights_row));

  self->report_row = ADW_ACTION_ROW (adw_action_row_new ());
  adw_action_row_set_subtitle_lines (self->report_row, 0);
  gtk_widget_set_visible (GTK_WIDGET (self->report_row), FALSE);
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (self->report_row));

  self->freeze_row = combo_row (_("_Frozen"),
                                _("Parts that keep their weights while the rest trains (their batch normalization in inference mode)"),
                                freezes);
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (self->freeze_row));
  self->prefixes_row = ADW_ENTRY_ROW (adw_entry_row_new ());
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->prefixes_row),
                                 _("Frozen layers (names or prefixes: conv1, layer1)"));
  gtk_widget_set_visible (GTK_WIDGET (self->prefixes_row), FALSE);
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (self->prefixes_row));

  self->normalize_row = combo_row (_("Input _normalization"),
                                   _("Each channel’s mean subtracted and divided by its deviation, as the weights were trained with"),
                                   normalizations);
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (self->normalize_row));

  tdm_finetune_group_restore (self);
  g_signal_connect_object (self->freeze_row, "notify::selected", G_CALLBACK (freeze_changed),
                           self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->prefixes_row, "changed", G_CALLBACK (prefixes_changed),
                           self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->normalize_row, "notify::selected",
                           G_CALLBACK (normalize_changed), self, G_CONNECT_SWAPPED);
  self->restoring = TRUE;
  freeze_changed (self);
  self->restoring = FALSE;
}
