/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-classify-view.c: classifying dropped or opened images with a trained network.
 *
 * The engine's classifier is not thread-safe, so it sits in a reference-counted box
 * with a mutex: a task on a worker thread takes a reference and the lock for each
 * image, and a newer checkpoint replaces the box without waiting for the old tasks.
 * Results come back to the main loop through GTask callbacks that find the view
 * through a weak reference and drop what belongs to an older checkpoint.
 */

#include <glib/gi18n.h>
#include <string.h>

#include "tdm-classifier.h"
#include "tdm-classify-view.h"
#include "tdm-image.h"

#define THUMB_SIZE 64
#define TOP_CLASSES 3

typedef struct
{
  GMutex         lock;
  TdmClassifier *classifier;
} Net;

typedef struct
{
  char      *path;
  char      *text;        /* the result, or NULL while waiting */
  GtkLabel  *label;
  GtkPicture *picture;
} Item;

struct _TdmClassifyView
{
  GtkWidget   parent_instance;

  GtkLabel   *status_label;
  GtkListBox *list;
  GtkFileChooserNative *chooser;

  char       *checkpoint;
  Net        *net;          /* NULL until loaded */
  guint       generation;
  GPtrArray  *items;        /* Item * */
};

enum { PROP_0, PROP_READY, N_PROPS };
static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (TdmClassifyView, tdm_classify_view, GTK_TYPE_WIDGET)

static void
net_clear (gpointer data)
{
  Net *net = data;

  tdm_classifier_free (net->classifier);
  g_mutex_clear (&net->lock);
}

static void
net_release (gpointer data)
{
  g_atomic_rc_box_release_full (data, net_clear);
}

static void
item_free (gpointer data)
{
  Item *item = data;

  g_free (item->path);
  g_free (item->text);
  g_free (item);
}

typedef struct
{
  GWeakRef  self;
  guint     generation;
  Net      *net;          /* a reference, or NULL for the load task */
  char     *path;         /* image or checkpoint */
  Item     *item;         /* only compared, never touched off the main thread */
} Job;

static void
job_free (gpointer data)
{
  Job *job = data;

  g_weak_ref_clear (&job->self);
  if (job->net != NULL)
    net_release (job->net);
  g_free (job->path);
  g_free (job);
}

static Job *
job_new (TdmClassifyView *self,
         const char      *path)
{
  Job *job = g_new0 (Job, 1);

  g_weak_ref_init (&job->self, self);
  job->generation = self->generation;
  job->path = g_strdup (path);
  if (self->net != NULL)
    job->net = g_atomic_rc_box_acquire (self->net);
  return job;
}

/* Classifying ---------------------------------------------------------------- */

typedef struct
{
  char   *text;
  GBytes *thumb;
} Outcome;

static void
outcome_free (gpointer data)
{
  Outcome *o = data;

  g_free (o->text);
  if (o->thumb != NULL)
    g_bytes_unref (o->thumb);
  g_free (o);
}

static void
classify_thread (GTask        *task,
                 gpointer      source_object,
                 gpointer      task_data,
                 GCancellable *cancellable)
{
  Job *job = task_data;
  Outcome *o = g_new0 (Outcome, 1);
  guint8 *pixels = g_malloc (THUMB_SIZE * THUMB_SIZE * 3);
  g_autoptr(GError) error = NULL;
  int classes = tdm_classifier_classes (job->net->classifier);
  g_autofree float *probs = g_new (float, classes);
  int order[TOP_CLASSES];
  gboolean ok;

  if (tdm_image_load (job->path, THUMB_SIZE, 3, pixels, NULL))
    o->thumb = g_bytes_new_take (pixels, THUMB_SIZE * THUMB_SIZE * 3);
  else
    g_free (pixels);

  g_mutex_lock (&job->net->lock);
  ok = tdm_classifier_run_file (job->net->classifier, job->path, probs, &error);
  g_mutex_unlock (&job->net->lock);

  if (!ok)
    {
      /* The row is titled with the file's name already. */
      const char *message = error->message;
      size_t n = strlen (job->path);

      if (strncmp (message, job->path, n) == 0 && strncmp (message + n, ": ", 2) == 0)
        message += n + 2;
      o->text = g_strdup (message);
    }
  else
    {
      GString *text = g_string_new (NULL);
      int top = MIN (TOP_CLASSES, classes);

      tdm_classifier_rank (probs, classes, top, order);
      for (int r = 0; r < top; r++)
        g_string_append_printf (text, "%s%s %.1f %%", r > 0 ? " · " : "",
                                tdm_classifier_class_name (job->net->classifier, order[r]),
                                100.0 * probs[order[r]]);
      o->text = g_string_free (text, FALSE);
    }
  g_task_return_pointer (task, o, outcome_free);
}

static void
classified (GObject      *source_object,
            GAsyncResult *result,
            gpointer      user_data)
{
  Job *job = g_task_get_task_data (G_TASK (result));
  g_autoptr(TdmClassifyView) self = g_weak_ref_get (&job->self);
  Outcome *o = g_task_propagate_pointer (G_TASK (result), NULL);

  if (self != NULL && o != NULL && job->generation == self->generation &&
      g_ptr_array_find (self->items, job->item, NULL))
    {
      Item *item = job->item;

      g_free (item->text);
      item->text = g_strdup (o->text);
      gtk_label_set_label (item->label, item->text);
      if (o->thumb != NULL)
        {
          g_autoptr(GdkTexture) texture =
            gdk_memory_texture_new (THUMB_SIZE, THUMB_SIZE, GDK_MEMORY_R8G8B8, o->thumb,
                                    THUMB_SIZE * 3);
          gtk_picture_set_paintable (item->picture, GDK_PAINTABLE (texture));
        }
    }
  if (o != NULL)
    outcome_free (o);
}

static void
classify_item (TdmClassifyView *self,
               Item            *item)
{
  g_autoptr(GTask) task = NULL;
  Job *job;

  if (self->net == NULL)
    return;
  job = job_new (self, item->path);
  job->item = item;
  task = g_task_new (NULL, NULL, classified, NULL);
  g_task_set_source_tag (task, classify_item);
  g_task_set_task_data (task, job, job_free);
  g_task_run_in_thread (task, classify_thread);
}

/* Loading -------------------------------------------------------------------- */

static void
load_thread (GTask        *task,
             gpointer      source_object,
             gpointer      task_data,
             GCancellable *cancellable)
{
  Job *job = task_data;
  GError *error = NULL;
  TdmClassifier *classifier = tdm_classifier_load (job->path, &error);
  Net *net;

  if (classifier == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  net = g_atomic_rc_box_new0 (Net);
  g_mutex_init (&net->lock);
  net->classifier = classifier;
  g_task_return_pointer (task, net, net_release);
}

static void
set_status (TdmClassifyView *self,
            const char      *text,
            gboolean         is_error)
{
  gtk_label_set_label (self->status_label, text);
  if (is_error)
    gtk_widget_add_css_class (GTK_WIDGET (self->status_label), "error");
  else
    gtk_widget_remove_css_class (GTK_WIDGET (self->status_label), "error");
}

static void
loaded (GObject      *source_object,
        GAsyncResult *result,
        gpointer      user_data)
{
  Job *job = g_task_get_task_data (G_TASK (result));
  g_autoptr(TdmClassifyView) self = g_weak_ref_get (&job->self);
  g_autoptr(GError) error = NULL;
  Net *net = g_task_propagate_pointer (G_TASK (result), &error);
  g_autofree char *name = NULL;
  g_autofree char *text = NULL;

  if (self == NULL || job->generation != self->generation)
    {
      if (net != NULL)
        net_release (net);
      return;
    }
  if (net == NULL)
    {
      set_status (self, error->message, TRUE);
      return;
    }
  self->net = net;
  name = g_path_get_basename (job->path);
  /* Translators: %s is a checkpoint's file name */
  text = g_strdup_printf (_("Classifying with %s. Drop images here or open them."), name);
  set_status (self, text, FALSE);
  for (guint i = 0; i < self->items->len; i++)
    classify_item (self, g_ptr_array_index (self->items, i));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_READY]);
}

void
tdm_classify_view_set_checkpoint (TdmClassifyView *self,
                                  const char      *path)
{
  g_autoptr(GTask) task = NULL;

  g_return_if_fail (TDM_IS_CLASSIFY_VIEW (self));
  g_return_if_fail (path != NULL);

  self->generation++;
  g_clear_pointer (&self->net, net_release);
  g_free (self->checkpoint);
  self->checkpoint = g_strdup (path);
  set_status (self, _("Loading the network…"), FALSE);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_READY]);

  task = g_task_new (NULL, NULL, loaded, NULL);
  g_task_set_source_tag (task, tdm_classify_view_set_checkpoint);
  g_task_set_task_data (task, job_new (self, path), job_free);
  g_task_run_in_thread (task, load_thread);
}

/* Images ---------------------------------------------------------------------- */

static void
add_path (TdmClassifyView *self,
          const char      *path)
{
  Item *item = g_new0 (Item, 1);
  GtkWidget *row = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 12);
  GtkWidget *texts = gtk_box_new (GTK_ORIENTATION_VERTICAL, 2);
  g_autofree char *name = g_filename_display_basename (path);
  GtkWidget *title = gtk_label_new (name);

  item->path = g_strdup (path);
  item->picture = GTK_PICTURE (gtk_picture_new ());
  gtk_widget_set_size_request (GTK_WIDGET (item->picture), THUMB_SIZE, THUMB_SIZE);
  gtk_box_append (GTK_BOX (row), GTK_WIDGET (item->picture));
  gtk_label_set_xalign (GTK_LABEL (title), 0);
  gtk_widget_add_css_class (title, "heading");
  gtk_box_append (GTK_BOX (texts), title);
  item->label = GTK_LABEL (gtk_label_new (self->net != NULL ? _("Classifying…")
                                          : _("Waiting for a trained network")));
  gtk_label_set_xalign (item->label, 0);
  gtk_label_set_wrap (item->label, TRUE);
  gtk_label_set_selectable (item->label, TRUE);
  gtk_box_append (GTK_BOX (texts), GTK_WIDGET (item->label));
  gtk_widget_set_valign (texts, GTK_ALIGN_CENTER);
  gtk_widget_set_hexpand (texts, TRUE);
  gtk_box_append (GTK_BOX (row), texts);
  gtk_list_box_prepend (self->list, row);

  g_ptr_array_add (self->items, item);
  classify_item (self, item);
}

void
tdm_classify_view_add_files (TdmClassifyView *self,
                             GSList          *files)
{
  g_return_if_fail (TDM_IS_CLASSIFY_VIEW (self));

  for (GSList *l = files; l != NULL; l = l->next)
    {
      g_autofree char *path = g_file_get_path (l->data);

      if (path != NULL)
        add_path (self, path);
      else
        set_status (self, _("Only files on this computer can be classified."), TRUE);
    }
}

static gboolean
on_drop (GtkDropTarget   *target,
         const GValue    *value,
         double           x,
         double           y,
         TdmClassifyView *self)
{
  if (!G_VALUE_HOLDS (value, GDK_TYPE_FILE_LIST))
    return FALSE;
  tdm_classify_view_add_files (self, g_value_get_boxed (value));
  return TRUE;
}

static void
images_chosen (TdmClassifyView      *self,
               int                   response,
               GtkFileChooserNative *chooser)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GListModel) files = gtk_file_chooser_get_files (GTK_FILE_CHOOSER (chooser));
      GSList *list = NULL;

      for (guint i = 0; i < g_list_model_get_n_items (files); i++)
        list = g_slist_append (list, g_list_model_get_item (files, i));
      tdm_classify_view_add_files (self, list);
      g_slist_free_full (list, g_object_unref);
    }
  gtk_native_dialog_destroy (GTK_NATIVE_DIALOG (chooser));
  g_clear_object (&self->chooser);
}

static void
checkpoint_chosen (TdmClassifyView      *self,
                   int                   response,
                   GtkFileChooserNative *chooser)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (chooser));
      g_autofree char *path = g_file_get_path (file);

      if (path != NULL)
        tdm_classify_view_set_checkpoint (self, path);
    }
  gtk_native_dialog_destroy (GTK_NATIVE_DIALOG (chooser));
  g_clear_object (&self->chooser);
}

static void
open_dialog (TdmClassifyView *self,
             gboolean         images)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));
  GtkFileFilter *filter = gtk_file_filter_new ();

  if (self->chooser != NULL)
    return;
  self->chooser = gtk_file_chooser_native_new (images ? _("Open Images") : _("Open Checkpoint"),
                                               GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                               GTK_FILE_CHOOSER_ACTION_OPEN,
                                               _("_Open"), _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (self->chooser), TRUE);
  if (images)
    {
      gtk_file_filter_set_name (filter, _("PNG and JPEG images"));
      gtk_file_filter_add_mime_type (filter, "image/png");
      gtk_file_filter_add_mime_type (filter, "image/jpeg");
      gtk_file_chooser_set_select_multiple (GTK_FILE_CHOOSER (self->chooser), TRUE);
    }
  else
    {
      gtk_file_filter_set_name (filter, _("Tandem checkpoints"));
      gtk_file_filter_add_pattern (filter, "*.safetensors");
    }
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (self->chooser), filter);
  g_object_unref (filter);
  g_signal_connect_object (self->chooser, "response",
                           images ? G_CALLBACK (images_chosen) : G_CALLBACK (checkpoint_chosen),
                           self, G_CONNECT_SWAPPED);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (self->chooser));
}

static void
open_images_clicked (TdmClassifyView *self)
{
  open_dialog (self, TRUE);
}

static void
open_checkpoint_clicked (TdmClassifyView *self)
{
  open_dialog (self, FALSE);
}

/* GObject --------------------------------------------------------------------- */

static void
tdm_classify_view_dispose (GObject *object)
{
  TdmClassifyView *self = TDM_CLASSIFY_VIEW (object);
  GtkWidget *child;

  if (self->chooser != NULL)
    gtk_native_dialog_destroy (GTK_NATIVE_DIALOG (self->chooser));
  g_clear_object (&self->chooser);
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self))) != NULL)
    gtk_widget_unparent (child);

  G_OBJECT_CLASS (tdm_classify_view_parent_class)->dispose (object);
}

static void
tdm_classify_view_finalize (GObject *object)
{
  TdmClassifyView *self = TDM_CLASSIFY_VIEW (object);

  g_clear_pointer (&self->net, net_release);
  g_ptr_array_unref (self->items);
  g_free (self->checkpoint);

  G_OBJECT_CLASS (tdm_classify_view_parent_class)->finalize (object);
}

static void
tdm_classify_view_get_property (GObject    *object,
                                guint       prop_id,
                                GValue     *value,
                                GParamSpec *pspec)
{
  TdmClassifyView *self = TDM_CLASSIFY_VIEW (object);

  switch (prop_id)
    {
    case PROP_READY:
      g_value_set_boolean (value, self->net != NULL);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_classify_view_class_init (TdmClassifyViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_classify_view_dispose;
  object_class->finalize = tdm_classify_view_finalize;
  object_class->get_property = tdm_classify_view_get_property;

  properties[PROP_READY] =
    g_param_spec_boolean ("ready", NULL, NULL, FALSE,
                          G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BOX_LAYOUT);
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_GROUP);
}

static void
tdm_classify_view_init (TdmClassifyView *self)
{
  GtkLayoutManager *layout = gtk_widget_get_layout_manager (GTK_WIDGET (self));
  GtkWidget *buttons, *open_images, *open_checkpoint, *scroller;
  GtkDropTarget *target;

  gtk_orientable_set_orientation (GTK_ORIENTABLE (layout), GTK_ORIENTATION_VERTICAL);
  gtk_box_layout_set_spacing (GTK_BOX_LAYOUT (layout), 12);
  self->items = g_ptr_array_new_with_free_func (item_free);

  buttons = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  open_images = gtk_button_new_with_mnemonic (_("Open _Images…"));
  open_checkpoint = gtk_button_new_with_mnemonic (_("Open _Checkpoint…"));
  gtk_box_append (GTK_BOX (buttons), open_images);
  gtk_box_append (GTK_BOX (buttons), open_checkpoint);
  gtk_widget_set_parent (buttons, GTK_WIDGET (self));

  self->status_label = GTK_LABEL (gtk_label_new (_("No trained network yet: train one, or open a checkpoint.")));
  gtk_label_set_xalign (self->status_label, 0);
  gtk_label_set_wrap (self->status_label, TRUE);
  gtk_widget_set_parent (GTK_WIDGET (self->status_label), GTK_WIDGET (self));

  scroller = gtk_scrolled_window_new ();
  gtk_widget_set_vexpand (scroller, TRUE);
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (scroller), GTK_POLICY_NEVER,
                                  GTK_POLICY_AUTOMATIC);
  self->list = GTK_LIST_BOX (gtk_list_box_new ());
  gtk_list_box_set_selection_mode (self->list, GTK_SELECTION_NONE);
  gtk_widget_add_css_class (GTK_WIDGET (self->list), "boxed-list");
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->list), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Classified images"), -1);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (scroller), GTK_WIDGET (self->list));
  gtk_widget_set_parent (scroller, GTK_WIDGET (self));

  target = gtk_drop_target_new (GDK_TYPE_FILE_LIST, GDK_ACTION_COPY);
  g_signal_connect_object (target, "drop", G_CALLBACK (on_drop), self, 0);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (target));

  g_signal_connect_object (open_images, "clicked", G_CALLBACK (open_images_clicked), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (open_checkpoint, "clicked", G_CALLBACK (open_checkpoint_clicked),
                           self, G_CONNECT_SWAPPED);
}

static GtkWidget *
tdm_classify_view_new (void)
{
  return g_object_new (TDM_TYPE_CLASSIFY_VIEW, NULL);
}

const char *
tdm_classify_view_get_checkpoint (TdmClassifyView *self)
{
  g_return_val_if_fail (TDM_IS_CLASSIFY_VIEW (self), NULL);

  return self->checkpoint;
}

gboolean
tdm_classify_view_get_ready (TdmClassifyView *self)
{
  g_return_val_if_fail (TDM_IS_CLASSIFY_VIEW (self), FALSE);

  return self->net != NULL;
}

guint
tdm_classify_view_get_n_results (TdmClassifyView *self)
{
  guint n = 0;

  g_return_val_if_fail (TDM_IS_CLASSIFY_VIEW (self), 0);

  for (guint i = 0; i < self->items->len; i++)
    n += ((Item *) g_ptr_array_index (self->items, i))->text != NULL;
  return n;
}

const char *
tdm_classify_view_get_result (TdmClassifyView *self,
                              guint            i)
{
  g_return_val_if_fail (TDM_IS_CLASSIFY_VIEW (self), NULL);
  g_return_val_if_fail (i < self->items->len, NULL);

  return ((Item *) g_ptr_array_index (self->items, i))->text;
}

GtkWindow *
tdm_classify_view_window_new (GtkWindow        *parent,
                              TdmClassifyView **view)
{
  GtkWidget *window = gtk_window_new ();
  GtkWidget *child = tdm_classify_view_new ();

  gtk_window_set_title (GTK_WINDOW (window), _("Classify Images"));
  gtk_window_set_default_size (GTK_WINDOW (window), 520, 560);
  gtk_window_set_transient_for (GTK_WINDOW (window), parent);
  gtk_window_set_hide_on_close (GTK_WINDOW (window), TRUE);
  gtk_widget_set_margin_start (child, 12);
  gtk_widget_set_margin_end (child, 12);
  gtk_widget_set_margin_top (child, 12);
  gtk_widget_set_margin_bottom (child, 12);
  gtk_window_set_child (GTK_WINDOW (window), child);
  /* Closed as a dialog is: Escape, or Ctrl+W as every GNOME window. */
  {
    GtkEventController *keys = gtk_shortcut_controller_new ();
    GtkShortcutAction *close = gtk_named_action_new ("window.close");

    gtk_shortcut_controller_add_shortcut (GTK_SHORTCUT_CONTROLLER (keys),
                                          gtk_shortcut_new (gtk_keyval_trigger_new (GDK_KEY_Escape, 0),
                                                            g_object_ref (close)));
    gtk_shortcut_controller_add_shortcut (GTK_SHORTCUT_CONTROLLER (keys),
                                          gtk_shortcut_new (gtk_keyval_trigger_new (GDK_KEY_w, GDK_CONTROL_MASK),
                                                            close));
    gtk_widget_add_controller (window, keys);
  }
  if (view != NULL)
    *view = TDM_CLASSIFY_VIEW (child);
  return GTK_WINDOW (window);
}
