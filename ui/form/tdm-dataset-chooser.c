/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dataset-chooser.c: picks the dataset and says what it holds.
 *
 * Each choice starts a GTask on a worker thread that opens the dataset, reads its
 * figures and frees it again. The task has no source object and its callback finds
 * the chooser through a weak reference, so a window that closes while a large set
 * is still being read is not kept alive by it; a newer choice cancels the older
 * load, and a result that arrives for a superseded choice is dropped.
 *
 * While held (tdm_dataset_chooser_hold()) a choice is shown but not read: the window
 * holds the chooser until its first frame is on the screen, so reading a large set
 * does not take the CPU from the window's start. Releasing reads the choice of then.
 *
 * Only the built-in sets this machine has are offered (the engine says which,
 * tdm_dataset_is_installed()); a remembered choice that is gone falls back to the
 * first one offered. Errors are shown as sentences, for a person, not a terminal.
 */

#include <glib/gi18n.h>

#include "tdm-dataset.h"
#include "tdm-format.h"
#include "tdm-dataset-chooser.h"
#include "tdm-dataset-folder.h"
#include "tdm-folder-preview.h"

/* The built-in sets in the order offered, with their names in the list. */
static const char *builtin_ids[] = { "fashion-mnist", "mnist", "synthetic" };
static const char *builtin_names[] = { N_("Fashion-MNIST"), N_("MNIST"), N_("Synthetic") };

typedef struct
{
  int count, test_count;
  int height, width, channels, classes;
} DatasetFacts;

struct _TdmDatasetChooser
{
  GtkWidget             parent_instance;

  GtkDropDown          *dropdown;
  GtkStringList        *model;
  GtkSpinner           *spinner;
  GtkLabel             *info_label;

  const char           *offered[G_N_ELEMENTS (builtin_ids)];  /* ids by position */
  guint                 n_offered;     /* the folder entry, if any, comes after */
  char                 *folder;        /* the folder entry's path, or NULL */
  gboolean              folder_failed; /* it holds no dataset: gone once left */
  GCancellable         *cancellable;   /* of the load under way */
  DatasetFacts          facts;
  char                 *error;
  gboolean              ready;
  gboolean              held;          /* a choice is shown, not read */
  TdmDatasetLoader      loader;        /* on the worker thread */
  gpointer              loader_data;
  GtkFileChooserNative *chooser;
  TdmFolderPreview     *preview;       /* shown for folders of class folders */
};

enum {
  PROP_0,
  PROP_SOURCE,
  PROP_READY,
  PROP_ERROR,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (TdmDatasetChooser, tdm_dataset_chooser, GTK_TYPE_WIDGET)

static void
set_info (TdmDatasetChooser *self,
          const char        *text,
          gboolean           is_error)
{
  gtk_label_set_label (self->info_label, text);
  if (is_error)
    {
      gtk_widget_add_css_class (GTK_WIDGET (self->info_label), "error");
      gtk_widget_remove_css_class (GTK_WIDGET (self->info_label), "dim-label");
    }
  else
    {
      gtk_widget_remove_css_class (GTK_WIDGET (self->info_label), "error");
      gtk_widget_add_css_class (GTK_WIDGET (self->info_label), "dim-label");
    }
}

static void
set_ready (TdmDatasetChooser *self,
           gboolean           ready)
{
  if (self->ready == ready)
    return;

  self->ready = ready;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_READY]);
}

static void
set_error (TdmDatasetChooser *self,
           char              *error)
{
  if (self->error == NULL && error == NULL)
    return;

  g_free (self->error);
  self->error = error;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ERROR]);
}

typedef struct
{
  char            *source;
  TdmDatasetLoader loader;
  gpointer         loader_data;
} LoadJob;

static void
load_job_free (gpointer data)
{
  LoadJob *job = data;

  g_free (job->source);
  g_free (job);
}

static TdmDatasetPair *
open_dataset (const char   *source,
              GCancellable *cancellable,
              gpointer      data,
              GError      **error)
{
  return tdm_dataset_open (source, error);
}

static void
load_thread (GTask        *task,
             gpointer      source_object,
             gpointer      task_data,
             GCancellable *cancellable)
{
  LoadJob *job = task_data;
  g_autoptr(TdmDatasetPair) pair = NULL;
  GError *error = NULL;
  DatasetFacts *facts;

  pair = job->loader (job->source, cancellable, job->loader_data, &error);
  if (pair == NULL)
    {
      g_task_return_error (task, error);
      return;
    }

  facts = g_new0 (DatasetFacts, 1);
  facts->count = pair->train->count;
  facts->test_count = pair->test ? pair->test->count : 0;
  facts->height = pair->train->height;
  facts->width = pair->train->width;
  facts->channels = pair->train->channels;
  facts->classes = pair->train->classes;
  g_task_return_pointer (task, facts, g_free);
}

static void
weak_ref_free (gpointer data)
{
  g_weak_ref_clear (data);
  g_free (data);
}

static void
loaded (GObject      *source_object,
        GAsyncResult *result,
        gpointer      user_data)
{
  g_autoptr(TdmDatasetChooser) self = g_weak_ref_get (user_data);
  g_autoptr(GError) error = NULL;
  g_autofree DatasetFacts *facts = NULL;
  g_autofree char *train = NULL;
  g_autofree char *test = NULL;
  g_autofree char *text = NULL;

  facts = g_task_propagate_pointer (G_TASK (result), &error);

  /* Gone, or superseded by another choice. */
  if (self == NULL || g_task_get_cancellable (G_TASK (result)) != self->cancellable)
    return;
  g_clear_object (&self->cancellable);

  gtk_spinner_stop (self->spinner);
  gtk_widget_set_visible (GTK_WIDGET (self->spinner), FALSE);

  if (facts == NULL)
    {
      if (gtk_drop_down_get_selected (self->dropdown) == self->n_offered)
        self->folder_failed = TRUE;
      set_error (self, tdm_format_sentence (error->message));
      set_info (self, self->error, TRUE);
      return;
    }

  self->facts = *facts;
  train = tdm_format_count (facts->count);
  test = tdm_format_count (facts->test_count);
  /* Translators: the dataset's figures: training images, test images, classes,
   * then height × width × channels of each image */
  text = g_strdup_printf (_("%s training and %s test images\n%d classes · %d × %d × %d"),
                          train, test, facts->classes,
                          facts->height, facts->width, facts->channels);
  set_info (self, text, FALSE);
  set_ready (self, TRUE);
}

static void
tdm_dataset_chooser_load (TdmDatasetChooser *self)
{
  g_autoptr(GTask) task = NULL;
  GWeakRef *weak;
  LoadJob *job;

  if (self->cancellable != NULL)
    g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  set_error (self, NULL);
  set_ready (self, FALSE);

  gtk_widget_set_visible (GTK_WIDGET (self->spinner), TRUE);
  gtk_spinner_start (self->spinner);
  set_info (self, _("Reading the dataset…"), FALSE);
  if (self->held)
    return;
  self->cancellable = g_cancellable_new ();

  /* Image folders decode with progress, a Cancel and their own options. */
  if (self->folder != NULL &&
      g_strcmp0 (tdm_dataset_chooser_get_source (self), self->folder) == 0 &&
      tdm_dataset_is_image_folder (self->folder))
    {
      g_clear_object (&self->cancellable);
      gtk_widget_set_visible (GTK_WIDGET (self->preview), TRUE);
      tdm_folder_preview_set_folder (self->preview, self->folder);
      return;
    }
  gtk_widget_set_visible (GTK_WIDGET (self->preview), FALSE);
  tdm_folder_preview_set_folder (self->preview, NULL);

  weak = g_new0 (GWeakRef, 1);
  g_weak_ref_init (weak, self);
  job = g_new0 (LoadJob, 1);
  job->source = g_strdup (tdm_dataset_chooser_get_source (self));
  job->loader = self->loader != NULL ? self->loader : open_dataset;
  job->loader_data = self->loader_data;
  task = g_task_new (NULL, self->cancellable, loaded, weak);
  g_task_set_source_tag (task, tdm_dataset_chooser_load);
  g_task_set_task_data (task, job, load_job_free);
  g_object_set_data_full (G_OBJECT (task), "weak-ref", weak, weak_ref_free);
  g_task_run_in_thread (task, load_thread);
}

static void
preview_started (TdmDatasetChooser *self)
{
  set_error (self, NULL);
  set_ready (self, FALSE);
  gtk_widget_set_visible (GTK_WIDGET (self->spinner), TRUE);
  gtk_spinner_start (self->spinner);
  set_info (self, _("Decoding the images…"), FALSE);
}

static void
preview_loaded (TdmDatasetChooser *self)
{
  DatasetFacts *f = &self->facts;
  g_autofree char *train = NULL;
  g_autofree char *test = NULL;
  g_autofree char *text = NULL;
  const char *notice;

  gtk_spinner_stop (self->spinner);
  gtk_widget_set_visible (GTK_WIDGET (self->spinner), FALSE);
  tdm_folder_preview_get_facts (self->preview, &f->count, &f->test_count, &f->height,
                                &f->width, &f->channels, &f->classes);
  train = g_strdup_printf ("%'d", f->count);
  test = g_strdup_printf ("%'d", f->test_count);
  text = g_strdup_printf (_("%s training and %s test images\n%d classes · %d × %d × %d"),
                          train, test, f->classes, f->height, f->width, f->channels);
  notice = tdm_folder_preview_get_notice (self->preview);
  if (notice != NULL)
    {
      char *with = g_strconcat (text, "\n", notice, NULL);
      g_free (text);
      text = with;
    }
  set_info (self, text, FALSE);
  set_ready (self, TRUE);
}

static void
preview_failed (TdmDatasetChooser *self,
                const char        *message)
{
  gtk_spinner_stop (self->spinner);
  gtk_widget_set_visible (GTK_WIDGET (self->spinner), FALSE);
  set_ready (self, FALSE);
  set_error (self, g_strdup (message));
  set_info (self, message, TRUE);
}

void
tdm_dataset_chooser_get_image_options (TdmDatasetChooser *self,
                                       int               *size,
                                       int               *channels)
{
  g_return_if_fail (TDM_IS_DATASET_CHOOSER (self));

  tdm_folder_preview_get_options (self->preview, size, channels);
}

void
tdm_dataset_chooser_set_default_image_size (TdmDatasetChooser *self,
                                            int                size)
{
  g_return_if_fail (TDM_IS_DATASET_CHOOSER (self));

  tdm_folder_preview_set_default_size (self->preview, size);
}

static void
tdm_dataset_chooser_selected_changed (TdmDatasetChooser *self)
{
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->model));

  /* A folder that held no dataset is not offered again once another is chosen. */
  if (self->folder_failed && gtk_drop_down_get_selected (self->dropdown) < self->n_offered &&
      n > self->n_offered)
    {
      g_signal_handlers_block_by_func (self->dropdown, tdm_dataset_chooser_selected_changed, self);
      gtk_string_list_splice (self->model, self->n_offered, n - self->n_offered, NULL);
      g_signal_handlers_unblock_by_func (self->dropdown, tdm_dataset_chooser_selected_changed, self);
      g_clear_pointer (&self->folder, g_free);
    }
  self->folder_failed = FALSE;
  tdm_dataset_chooser_load (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_SOURCE]);
}

/* Puts a folder in the drop-down (as its fourth entry) and selects it. */
static void
tdm_dataset_chooser_set_folder (TdmDatasetChooser *self,
                                const char        *folder)
{
  g_autofree char *name = g_path_get_basename (folder);
  const char *items[] = { name, NULL };
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->model));

  g_free (self->folder);
  self->folder = g_strdup (folder);

  /* Replacing the selected entry must not load twice. */
  g_signal_handlers_block_by_func (self->dropdown, tdm_dataset_chooser_selected_changed, self);
  gtk_string_list_splice (self->model, self->n_offered, n - self->n_offered, items);
  gtk_drop_down_set_selected (self->dropdown, self->n_offered);
  g_signal_handlers_unblock_by_func (self->dropdown, tdm_dataset_chooser_selected_changed, self);

  tdm_dataset_chooser_selected_changed (self);
}

static void
tdm_dataset_chooser_folder_chosen (TdmDatasetChooser    *self,
                                   int                   response,
                                   GtkFileChooserNative *chooser)
{
  g_autoptr(GFile) file = NULL;
  g_autofree char *path = NULL;

  if (response == GTK_RESPONSE_ACCEPT)
    file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (chooser));
  gtk_native_dialog_destroy (GTK_NATIVE_DIALOG (chooser));
  g_clear_object (&self->chooser);

  if (file == NULL)
    return;

  path = g_file_get_path (file);
  if (path == NULL)
    {
      set_info (self, _("Only folders on this computer can be opened."), TRUE);
      return;
    }

  tdm_dataset_chooser_set_folder (self, path);
}

void
tdm_dataset_chooser_open_folder (TdmDatasetChooser *self)
{
  GtkRoot *root;

  g_return_if_fail (TDM_IS_DATASET_CHOOSER (self));

  if (self->chooser != NULL)
    {
      gtk_native_dialog_show (GTK_NATIVE_DIALOG (self->chooser));
      return;
    }

  root = gtk_widget_get_root (GTK_WIDGET (self));
  self->chooser = gtk_file_chooser_native_new (_("Open Dataset Folder"),
                                               GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                               GTK_FILE_CHOOSER_ACTION_SELECT_FOLDER,
                                               _("_Open"), _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (self->chooser), TRUE);
  if (self->folder != NULL)
    {
      g_autoptr(GFile) folder = g_file_new_for_path (self->folder);
      g_autoptr(GFile) parent = g_file_get_parent (folder);

      if (parent != NULL)
        gtk_file_chooser_set_current_folder (GTK_FILE_CHOOSER (self->chooser), parent, NULL);
    }
  g_signal_connect_object (self->chooser, "response",
                           G_CALLBACK (tdm_dataset_chooser_folder_chosen), self,
                           G_CONNECT_SWAPPED);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (self->chooser));
}

static void
tdm_dataset_chooser_dispose (GObject *object)
{
  TdmDatasetChooser *self = (TdmDatasetChooser *)object;

  if (self->cancellable != NULL)
    g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);

  if (self->chooser != NULL)
    gtk_native_dialog_destroy (GTK_NATIVE_DIALOG (self->chooser));
  g_clear_object (&self->chooser);

  gtk_widget_dispose_template (GTK_WIDGET (self), TDM_TYPE_DATASET_CHOOSER);
  for (GtkWidget *child; (child = gtk_widget_get_first_child (GTK_WIDGET (self))); )
    gtk_widget_unparent (child);

  G_OBJECT_CLASS (tdm_dataset_chooser_parent_class)->dispose (object);
}

static void
tdm_dataset_chooser_finalize (GObject *object)
{
  TdmDatasetChooser *self = (TdmDatasetChooser *)object;

  g_free (self->folder);
  g_free (self->error);

  G_OBJECT_CLASS (tdm_dataset_chooser_parent_class)->finalize (object);
}

static void
tdm_dataset_chooser_get_property (GObject    *object,
                                  guint       prop_id,
                                  GValue     *value,
                                  GParamSpec *pspec)
{
  TdmDatasetChooser *self = TDM_DATASET_CHOOSER (object);

  switch (prop_id)
    {
    case PROP_SOURCE:
      g_value_set_string (value, tdm_dataset_chooser_get_source (self));
      break;

    case PROP_READY:
      g_value_set_boolean (value, self->ready);
      break;

    case PROP_ERROR:
      g_value_set_string (value, self->error);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_dataset_chooser_set_property (GObject      *object,
                                  guint         prop_id,
                                  const GValue *value,
                                  GParamSpec   *pspec)
{
  TdmDatasetChooser *self = TDM_DATASET_CHOOSER (object);

  switch (prop_id)
    {
    case PROP_SOURCE:
      tdm_dataset_chooser_set_source (self, g_value_get_string (value));
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_dataset_chooser_class_init (TdmDatasetChooserClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_dataset_chooser_dispose;
  object_class->finalize = tdm_dataset_chooser_finalize;
  object_class->get_property = tdm_dataset_chooser_get_property;
  object_class->set_property = tdm_dataset_chooser_set_property;

  properties[PROP_SOURCE] =
    g_param_spec_string ("source", NULL, NULL, "fashion-mnist",
                         G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_READY] =
    g_param_spec_boolean ("ready", NULL, NULL, FALSE,
                          G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_ERROR] =
    g_param_spec_string ("error", NULL, NULL, NULL,
                         G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tandem/Tandem/ui/tdm-dataset-chooser.ui");
  gtk_widget_class_bind_template_child (widget_class, TdmDatasetChooser, dropdown);
  gtk_widget_class_bind_template_child (widget_class, TdmDatasetChooser, model);
  gtk_widget_class_bind_template_child (widget_class, TdmDatasetChooser, spinner);
  gtk_widget_class_bind_template_child (widget_class, TdmDatasetChooser, info_label);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BOX_LAYOUT);
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_GROUP);
}

static void
tdm_dataset_chooser_init (TdmDatasetChooser *self)
{
  GtkLayoutManager *layout;

  gtk_widget_init_template (GTK_WIDGET (self));

  layout = gtk_widget_get_layout_manager (GTK_WIDGET (self));
  gtk_orientable_set_orientation (GTK_ORIENTABLE (layout), GTK_ORIENTATION_VERTICAL);
  gtk_box_layout_set_spacing (GTK_BOX_LAYOUT (layout), 6);

  /* Synthetic is always there, so the list is never empty. */
  for (guint i = 0; i < G_N_ELEMENTS (builtin_ids); i++)
    if (tdm_dataset_is_installed (builtin_ids[i]))
      {
        self->offered[self->n_offered++] = builtin_ids[i];
        gtk_string_list_append (self->model, _(builtin_names[i]));
      }

  self->preview = TDM_FOLDER_PREVIEW (tdm_folder_preview_new ());
  gtk_widget_set_visible (GTK_WIDGET (self->preview), FALSE);
  gtk_widget_set_parent (GTK_WIDGET (self->preview), GTK_WIDGET (self));
  g_signal_connect_object (self->preview, "started", G_CALLBACK (preview_started), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->preview, "loaded", G_CALLBACK (preview_loaded), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->preview, "failed", G_CALLBACK (preview_failed), self,
                           G_CONNECT_SWAPPED);

  /* Nothing loads until a source is set (or picked): the owner chooses the first. */
  g_signal_connect_object (self->dropdown, "notify::selected",
                           G_CALLBACK (tdm_dataset_chooser_selected_changed), self,
                           G_CONNECT_SWAPPED);
}

const char *
tdm_dataset_chooser_get_source (TdmDatasetChooser *self)
{
  guint selected;

  g_return_val_if_fail (TDM_IS_DATASET_CHOOSER (self), NULL);

  selected = gtk_drop_down_get_selected (self->dropdown);
  if (selected < self->n_offered)
    return self->offered[selected];
  if (selected == self->n_offered && self->folder != NULL)
    return self->folder;

  return self->offered[0];
}

void
tdm_dataset_chooser_set_source (TdmDatasetChooser *self,
                                const char        *source)
{
  g_return_if_fail (TDM_IS_DATASET_CHOOSER (self));

  if (source == NULL || source[0] == '\0')
    source = self->offered[0];
  /* A built-in set that is not (or no longer) on this machine. */
  for (guint i = 0; i < G_N_ELEMENTS (builtin_ids); i++)
    if (g_str_equal (source, builtin_ids[i]) && !tdm_dataset_is_installed (source))
      source = self->offered[0];

  for (guint i = 0; i < self->n_offered; i++)
    if (g_str_equal (source, self->offered[i]))
      {
        if (gtk_drop_down_get_selected (self->dropdown) == i && self->cancellable == NULL &&
            (self->ready || self->error != NULL))
          return;

        g_signal_handlers_block_by_func (self->dropdown, tdm_dataset_chooser_selected_changed, self);
        gtk_drop_down_set_selected (self->dropdown, i);
        g_signal_handlers_unblock_by_func (self->dropdown, tdm_dataset_chooser_selected_changed, self);
        tdm_dataset_chooser_selected_changed (self);
        return;
      }

  tdm_dataset_chooser_set_folder (self, source);
}

gboolean
tdm_dataset_chooser_get_ready (TdmDatasetChooser *self)
{
  g_return_val_if_fail (TDM_IS_DATASET_CHOOSER (self), FALSE);

  return self->ready;
}

gboolean
tdm_dataset_chooser_get_counts (TdmDatasetChooser *self,
                                int               *train_count,
                                int               *test_count)
{
  g_return_val_if_fail (TDM_IS_DATASET_CHOOSER (self), FALSE);

  if (!self->ready || self->facts.count <= 0)
    return FALSE;

  if (train_count != NULL)
    *train_count = self->facts.count;
  if (test_count != NULL)
    *test_count = self->facts.test_count;

  return TRUE;
}

gboolean
tdm_dataset_chooser_get_shape (TdmDatasetChooser *self,
                               int               *height,
                               int               *width,
                               int               *channels,
                               int               *classes)
{
  g_return_val_if_fail (TDM_IS_DATASET_CHOOSER (self), FALSE);

  if (!self->ready)
    return FALSE;

  if (height != NULL)
    *height = self->facts.height;
  if (width != NULL)
    *width = self->facts.width;
  if (channels != NULL)
    *channels = self->facts.channels;
  if (classes != NULL)
    *classes = self->facts.classes;

  return TRUE;
}

const char *
tdm_dataset_chooser_get_error (TdmDatasetChooser *self)
{
  g_return_val_if_fail (TDM_IS_DATASET_CHOOSER (self), NULL);

  return self->error;
}

gboolean
tdm_dataset_chooser_get_loading (TdmDatasetChooser *self)
{
  g_return_val_if_fail (TDM_IS_DATASET_CHOOSER (self), FALSE);

  return !self->ready && self->error == NULL;
}

void
tdm_dataset_chooser_hold (TdmDatasetChooser *self,
                          gboolean           hold)
{
  g_return_if_fail (TDM_IS_DATASET_CHOOSER (self));

  if (self->held == hold)
    return;

  self->held = hold;
  /* What was chosen meanwhile (nothing read it) is read now. */
  if (!hold && !self->ready && self->error == NULL)
    tdm_dataset_chooser_load (self);
}

void
tdm_dataset_chooser_set_loader (TdmDatasetChooser *self,
                                TdmDatasetLoader   loader,
                                gpointer           data)
{
  g_return_if_fail (TDM_IS_DATASET_CHOOSER (self));

  self->loader = loader;
  self->loader_data = data;
}
