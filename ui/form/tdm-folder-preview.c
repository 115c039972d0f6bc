/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-folder-preview.c: an image folder's classes, thumbnails and decoding.
 *
 * Two GTasks per folder, both on worker threads and both found again through a weak
 * reference, so a closed window is not kept alive by them: the scan (classes, counts,
 * thumbnails decoded by the engine's own decoder at 48 × 48) and the decode of the
 * whole set, whose progress comes back through g_main_context_invoke. Each task
 * carries the generation it was started for; a result for an older folder or older
 * options is dropped. Changing the size or colour decodes again.
 */

#include <glib/gi18n.h>

#include "tdm-dataset-folder.h"
#include "tdm-error.h"
#include "tdm-folder-preview.h"
#include "tdm-image.h"

#define THUMB_SIZE 48

static const int size_choices[] = { 0, 16, 24, 28, 32, 48, 64, 96, 128 };
static const int colour_choices[] = { 0, 1, 3 };

struct _TdmFolderPreview
{
  GtkWidget      parent_instance;

  GtkDropDown   *size_dropdown;
  GtkDropDown   *colour_dropdown;
  GtkProgressBar *progress;
  GtkButton     *action_button;   /* Cancel while decoding, Decode after a cancel */
  GtkListBox    *classes_list;

  char          *folder;
  guint          generation;       /* of the decode */
  guint          scan_generation;
  GCancellable  *scan_cancellable;
  GCancellable  *decode_cancellable;
  gboolean       loaded;
  int            default_size;     /* what "Automatic" decodes at (0: the engine's choice) */
  int            facts[6];
  char          *notice;
};

G_DEFINE_FINAL_TYPE (TdmFolderPreview, tdm_folder_preview, GTK_TYPE_WIDGET)

enum { SIGNAL_STARTED, SIGNAL_LOADED, SIGNAL_FAILED, N_SIGNALS };
static guint signals[N_SIGNALS];

typedef struct
{
  GWeakRef  self;
  guint     generation;
  char     *folder;
  int       size, channels;
} Job;

static void
job_free (gpointer data)
{
  Job *job = data;

  g_weak_ref_clear (&job->self);
  g_free (job->folder);
  g_free (job);
}

static Job *
job_new (TdmFolderPreview *self,
         guint             generation)
{
  Job *job = g_new0 (Job, 1);

  g_weak_ref_init (&job->self, self);
  job->generation = generation;
  job->folder = g_strdup (self->folder);
  tdm_folder_preview_get_options (self, &job->size, &job->channels);
  return job;
}

/* Scan ---------------------------------------------------------------------- */

typedef struct
{
  TdmFolderSummary *summary;
  GPtrArray        *thumbs;  /* per class: GPtrArray of GBytes (NULL where undecodable) */
} ScanResult;

static void
scan_result_free (gpointer data)
{
  ScanResult *r = data;

  tdm_folder_summary_free (r->summary);
  g_ptr_array_unref (r->thumbs);
  g_free (r);
}

static void
scan_thread (GTask        *task,
             gpointer      source_object,
             gpointer      task_data,
             GCancellable *cancellable)
{
  Job *job = task_data;
  GError *error = NULL;
  ScanResult *r;

  r = g_new0 (ScanResult, 1);
  r->summary = tdm_image_folder_scan (job->folder, &error);
  r->thumbs = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  if (r->summary == NULL)
    {
      scan_result_free (r);
      g_task_return_error (task, error);
      return;
    }

  for (int k = 0; k < r->summary->class_count; k++)
    {
      GPtrArray *row = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
      char **examples = r->summary->classes[k].examples;

      for (int i = 0; examples[i] != NULL && !g_cancellable_is_cancelled (cancellable); i++)
        {
          guint8 *pixels = g_malloc (THUMB_SIZE * THUMB_SIZE * 3);

          if (tdm_image_load (examples[i], THUMB_SIZE, 3, pixels, NULL))
            g_ptr_array_add (row, g_bytes_new_take (pixels, THUMB_SIZE * THUMB_SIZE * 3));
          else
            g_free (pixels);
        }
      g_ptr_array_add (r->thumbs, row);
    }
  g_task_return_pointer (task, r, scan_result_free);
}

static GtkWidget *
class_row (const TdmFolderClass *c,
           GPtrArray            *thumbs)
{
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  GtkWidget *label;
  g_autofree char *text = NULL;

  /* Translators: a class of images and how many files it holds */
  text = g_strdup_printf (ngettext ("%s · %d image", "%s · %d images", c->count),
                          c->name, c->count);
  label = gtk_label_new (text);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_ellipsize (GTK_LABEL (label), PANGO_ELLIPSIZE_END);
  gtk_widget_set_hexpand (label, TRUE);
  gtk_widget_set_size_request (label, 90, -1);
  gtk_box_append (GTK_BOX (box), label);

  for (guint i = 0; i < thumbs->len; i++)
    {
      g_autoptr(GdkTexture) texture =
        gdk_memory_texture_new (THUMB_SIZE, THUMB_SIZE, GDK_MEMORY_R8G8B8,
                                g_ptr_array_index (thumbs, i), THUMB_SIZE * 3);
      GtkWidget *picture = gtk_picture_new_for_paintable (GDK_PAINTABLE (texture));

      gtk_widget_set_size_request (picture, 32, 32);
      gtk_picture_set_can_shrink (GTK_PICTURE (picture), TRUE);
      gtk_box_append (GTK_BOX (box), picture);
    }
  if (c->count == 0)
    gtk_widget_add_css_class (label, "dim-label");
  return box;
}

static void
scanned (GObject      *source_object,
         GAsyncResult *result,
         gpointer      user_data)
{
  Job *job = g_task_get_task_data (G_TASK (result));
  g_autoptr(TdmFolderPreview) self = g_weak_ref_get (&job->self);
  g_autoptr(GError) error = NULL;
  ScanResult *r;
  GtkWidget *child;

  r = g_task_propagate_pointer (G_TASK (result), &error);
  if (self == NULL || job->generation != self->scan_generation)
    {
      if (r != NULL)
        scan_result_free (r);
      return;
    }
  if (r == NULL)
    return;   /* the decode says why, with the same message */

  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->classes_list))) != NULL)
    gtk_list_box_remove (self->classes_list, child);
  for (int k = 0; k < r->summary->class_count; k++)
    gtk_list_box_append (self->classes_list,
                         class_row (&r->summary->classes[k], g_ptr_array_index (r->thumbs, k)));
  scan_result_free (r);
}

/* Decode -------------------------------------------------------------------- */

/* The decode's task (its Job finds the preview) and how far it is. The worker takes
 * no reference on the preview: its last one dropped there would finalize a widget off
 * the main thread. */
typedef struct
{
  GTask *task;
  int    done, total;
} Progress;

static void
progress_free (gpointer data)
{
  Progress *p = data;

  g_object_unref (p->task);
  g_free (p);
}

static gboolean
progress_show (gpointer data)
{
  Progress *p = data;
  Job *job = g_task_get_task_data (p->task);
  g_autoptr(TdmFolderPreview) self = g_weak_ref_get (&job->self);

  if (self != NULL && job->generation == self->generation && !self->loaded && p->total > 0)
    gtk_progress_bar_set_fraction (self->progress, (double) p->done / p->total);
  return G_SOURCE_REMOVE;
}

static void
decode_progress (int      done,
                 int      total,
                 gpointer user_data)
{
  GTask *task = user_data;
  Progress *p;

  /* A decode given up (the preview gone, or another folder) has no one to show. */
  if (g_cancellable_is_cancelled (g_task_get_cancellable (task)))
    return;
  p = g_new0 (Progress, 1);
  p->task = g_object_ref (task);
  p->done = done;
  p->total = total;
  g_main_context_invoke_full (NULL, G_PRIORITY_DEFAULT, progress_show, p, progress_free);
}

static void
decode_thread (GTask        *task,
               gpointer      source_object,
               gpointer      task_data,
               GCancellable *cancellable)
{
  Job *job = task_data;
  TdmImageOptions options = { .size = job->size, .channels = job->channels, .seed = 0 };
  GError *error = NULL;
  TdmDatasetPair *pair;

  pair = tdm_dataset_load_image_folder (job->folder, &options, decode_progress, task,
                                        cancellable, &error);
  if (pair == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, pair, (GDestroyNotify) tdm_dataset_pair_free);
}

static void
set_decoding (TdmFolderPreview *self,
              gboolean          decoding)
{
  gtk_widget_set_visible (GTK_WIDGET (self->progress), decoding);
  gtk_button_set_label (self->action_button, decoding ? _("Cancel") : _("Decode"));
  gtk_widget_set_visible (GTK_WIDGET (self->action_button), decoding || !self->loaded);
}

static void
decoded (GObject      *source_object,
         GAsyncResult *result,
         gpointer      user_data)
{
  Job *job = g_task_get_task_data (G_TASK (result));
  g_autoptr(TdmFolderPreview) self = g_weak_ref_get (&job->self);
  g_autoptr(GError) error = NULL;
  TdmDatasetPair *pair;

  pair = g_task_propagate_pointer (G_TASK (result), &error);
  if (self == NULL || job->generation != self->generation)
    {
      tdm_dataset_pair_free (pair);
      return;
    }
  g_clear_object (&self->decode_cancellable);

  if (pair == NULL)
    {
      set_decoding (self, FALSE);
      if (g_error_matches (error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED))
        g_signal_emit (self, signals[SIGNAL_FAILED], 0,
                       _("Decoding was cancelled. Press Decode to start again."));
      else
        g_signal_emit (self, signals[SIGNAL_FAILED], 0, error->message);
      return;
    }

  self->loaded = TRUE;
  self->facts[0] = pair->train->count;
  self->facts[1] = pair->test->count;
  self->facts[2] = pair->train->height;
  self->facts[3] = pair->train->width;
  self->facts[4] = pair->train->channels;
  self->facts[5] = pair->train->classes;
  g_free (self->notice);
  self->notice = g_strdup (pair->notice);
  tdm_dataset_pair_free (pair);
  set_decoding (self, FALSE);
  g_signal_emit (self, signals[SIGNAL_LOADED], 0);
}

static void
start_decode (TdmFolderPreview *self)
{
  g_autoptr(GTask) task = NULL;

  if (self->decode_cancellable != NULL)
    g_cancellable_cancel (self->decode_cancellable);
  g_clear_object (&self->decode_cancellable);
  self->generation++;
  self->loaded = FALSE;
  g_clear_pointer (&self->notice, g_free);
  if (self->folder == NULL)
    {
      set_decoding (self, FALSE);
      return;
    }

  self->decode_cancellable = g_cancellable_new ();
  gtk_progress_bar_set_fraction (self->progress, 0);
  set_decoding (self, TRUE);
  g_signal_emit (self, signals[SIGNAL_STARTED], 0);

  task = g_task_new (NULL, self->decode_cancellable, decoded, NULL);
  g_task_set_source_tag (task, start_decode);
  g_task_set_task_data (task, job_new (self, self->generation), job_free);
  g_task_run_in_thread (task, decode_thread);
}

static void
start_scan (TdmFolderPreview *self)
{
  g_autoptr(GTask) task = NULL;

  if (self->scan_cancellable != NULL)
    g_cancellable_cancel (self->scan_cancellable);
  g_clear_object (&self->scan_cancellable);
  self->scan_generation++;
  if (self->folder == NULL)
    return;

  self->scan_cancellable = g_cancellable_new ();
  task = g_task_new (NULL, self->scan_cancellable, scanned, NULL);
  g_task_set_source_tag (task, start_scan);
  g_task_set_task_data (task, job_new (self, self->scan_generation), job_free);
  g_task_run_in_thread (task, scan_thread);
}

/* Cancel stops a decode under way; Decode, after a cancel, starts it again. */
static void
action_clicked (TdmFolderPreview *self)
{
  if (self->decode_cancellable != NULL)
    g_cancellable_cancel (self->decode_cancellable);
  else
    start_decode (self);
}

/* The scan stays valid: only the decode depends on the size and colour. */
static void
options_changed (TdmFolderPreview *self)
{
  start_decode (self);
}

/* GObject ------------------------------------------------------------------- */

static void
tdm_folder_preview_dispose (GObject *object)
{
  TdmFolderPreview *self = TDM_FOLDER_PREVIEW (object);
  GtkWidget *child;

  if (self->scan_cancellable != NULL)
    g_cancellable_cancel (self->scan_cancellable);
  if (self->decode_cancellable != NULL)
    g_cancellable_cancel (self->decode_cancellable);
  g_clear_object (&self->scan_cancellable);
  g_clear_object (&self->decode_cancellable);
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self))) != NULL)
    gtk_widget_unparent (child);

  G_OBJECT_CLASS (tdm_folder_preview_parent_class)->dispose (object);
}

static void
tdm_folder_preview_finalize (GObject *object)
{
  TdmFolderPreview *self = TDM_FOLDER_PREVIEW (object);

  g_free (self->folder);
  g_free (self->notice);

  G_OBJECT_CLASS (tdm_folder_preview_parent_class)->finalize (object);
}

static void
tdm_folder_preview_class_init (TdmFolderPreviewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_folder_preview_dispose;
  object_class->finalize = tdm_folder_preview_finalize;

  signals[SIGNAL_STARTED] = g_signal_new ("started", G_TYPE_FROM_CLASS (klass),
                                          G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                          G_TYPE_NONE, 0);
  signals[SIGNAL_LOADED] = g_signal_new ("loaded", G_TYPE_FROM_CLASS (klass),
                                         G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                         G_TYPE_NONE, 0);
  signals[SIGNAL_FAILED] = g_signal_new ("failed", G_TYPE_FROM_CLASS (klass),
                                         G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                         G_TYPE_NONE, 1, G_TYPE_STRING);

  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BOX_LAYOUT);
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_GROUP);
}

static GtkDropDown *
choice (GtkWidget         *box,
        const char        *title,
        const char *const *items)
{
  GtkWidget *label = gtk_label_new (title);
  GtkWidget *dropdown = gtk_drop_down_new_from_strings (items);

  gtk_widget_add_css_class (label, "dim-label");
  gtk_box_append (GTK_BOX (box), label);
  gtk_widget_set_hexpand (dropdown, TRUE);
  gtk_accessible_update_property (GTK_ACCESSIBLE (dropdown),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, title, -1);
  gtk_box_append (GTK_BOX (box), dropdown);
  return GTK_DROP_DOWN (dropdown);
}

static void
tdm_folder_preview_init (TdmFolderPreview *self)
{
  const char *sizes[] = { _("Automatic"), "16", "24", "28", "32", "48", "64", "96", "128", NULL };
  const char *colours[] = { _("Automatic"), _("Grey"), _("Colour"), NULL };
  GtkLayoutManager *layout = gtk_widget_get_layout_manager (GTK_WIDGET (self));
  GtkWidget *options, *progress_row, *scroller;

  gtk_orientable_set_orientation (GTK_ORIENTABLE (layout), GTK_ORIENTATION_VERTICAL);
  gtk_box_layout_set_spacing (GTK_BOX_LAYOUT (layout), 6);

  options = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  self->size_dropdown = choice (options, _("Size"), sizes);
  self->colour_dropdown = choice (options, _("Colour"), colours);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->size_dropdown),
                               _("Side of the square the images are cropped and scaled to"));
  gtk_widget_set_parent (options, GTK_WIDGET (self));

  progress_row = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  self->progress = GTK_PROGRESS_BAR (gtk_progress_bar_new ());
  gtk_widget_set_hexpand (GTK_WIDGET (self->progress), TRUE);
  gtk_widget_set_valign (GTK_WIDGET (self->progress), GTK_ALIGN_CENTER);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->progress),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, _("Decoding the images"), -1);
  gtk_box_append (GTK_BOX (progress_row), GTK_WIDGET (self->progress));
  self->action_button = GTK_BUTTON (gtk_button_new_with_label (_("Cancel")));
  gtk_box_append (GTK_BOX (progress_row), GTK_WIDGET (self->action_button));
  gtk_widget_set_parent (progress_row, GTK_WIDGET (self));

  scroller = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (scroller), GTK_POLICY_NEVER,
                                  GTK_POLICY_AUTOMATIC);
  /* Three or four classes in view, the rest a scroll away: the form goes on below. */
  gtk_scrolled_window_set_min_content_height (GTK_SCROLLED_WINDOW (scroller), 120);
  gtk_scrolled_window_set_max_content_height (GTK_SCROLLED_WINDOW (scroller), 220);
  gtk_scrolled_window_set_propagate_natural_height (GTK_SCROLLED_WINDOW (scroller), TRUE);
  self->classes_list = GTK_LIST_BOX (gtk_list_box_new ());
  gtk_list_box_set_selection_mode (self->classes_list, GTK_SELECTION_NONE);
  gtk_widget_add_css_class (GTK_WIDGET (self->classes_list), "boxed-list");
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->classes_list),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, _("Classes"), -1);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (scroller), GTK_WIDGET (self->classes_list));
  gtk_widget_set_parent (scroller, GTK_WIDGET (self));

  set_decoding (self, FALSE);
  g_signal_connect_object (self->action_button, "clicked",
                           G_CALLBACK (action_clicked), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->size_dropdown, "notify::selected",
                           G_CALLBACK (options_changed), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->colour_dropdown, "notify::selected",
                           G_CALLBACK (options_changed), self, G_CONNECT_SWAPPED);
}

GtkWidget *
tdm_folder_preview_new (void)
{
  return g_object_new (TDM_TYPE_FOLDER_PREVIEW, NULL);
}

void
tdm_folder_preview_set_folder (TdmFolderPreview *self,
                               const char       *folder)
{
  GtkWidget *child;

  g_return_if_fail (TDM_IS_FOLDER_PREVIEW (self));

  g_free (self->folder);
  self->folder = g_strdup (folder);
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->classes_list))) != NULL)
    gtk_list_box_remove (self->classes_list, child);
  start_decode (self);
  start_scan (self);
}

void
tdm_folder_preview_get_options (TdmFolderPreview *self,
                                int              *size,
                                int              *channels)
{
  guint s, c;

  g_return_if_fail (TDM_IS_FOLDER_PREVIEW (self));

  s = gtk_drop_down_get_selected (self->size_dropdown);
  c = gtk_drop_down_get_selected (self->colour_dropdown);
  if (size != NULL)
    *size = size_choices[MIN (s, G_N_ELEMENTS (size_choices) - 1)];
  if (size != NULL && *size == 0)
    *size = self->default_size;
  if (channels != NULL)
    *channels = colour_choices[MIN (c, G_N_ELEMENTS (colour_choices) - 1)];
}

void
tdm_folder_preview_set_default_size (TdmFolderPreview *self,
                                     int               size)
{
  g_return_if_fail (TDM_IS_FOLDER_PREVIEW (self));

  if (size == self->default_size)
    return;
  self->default_size = size;
  /* Only "Automatic" decodes at the default. */
  if (self->folder != NULL && gtk_drop_down_get_selected (self->size_dropdown) == 0)
    start_decode (self);
}

gboolean
tdm_folder_preview_get_facts (TdmFolderPreview *self,
                              int              *train_count,
                              int              *test_count,
                              int              *height,
                              int              *width,
                              int              *channels,
                              int              *classes)
{
  int *out[6] = { train_count, test_count, height, width, channels, classes };

  g_return_val_if_fail (TDM_IS_FOLDER_PREVIEW (self), FALSE);

  if (!self->loaded)
    return FALSE;
  for (int i = 0; i < 6; i++)
    if (out[i] != NULL)
      *out[i] = self->facts[i];
  return TRUE;
}

const char *
tdm_folder_preview_get_notice (TdmFolderPreview *self)
{
  g_return_val_if_fail (TDM_IS_FOLDER_PREVIEW (self), NULL);

  return self->notice;
}
