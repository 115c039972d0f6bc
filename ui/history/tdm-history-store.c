/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history-store.c: the run history as a list model for the window.
 *
 * The items live in a GPtrArray in the order the history lists them; GListModel is
 * implemented on it directly. A reload builds new items and carries the ticks over by
 * id, so the page keeps its state when a run ends and the list is read again.
 * Deleting is two steps (the GNOME way with an undo toast): the item leaves the list
 * at once and waits in `deleted`; only commit (the toast's dismissal, or the store's
 * disposal) removes the file, so an undo is exact and costs no rewrite. Scaling
 * sweeps are listed, renamed, deleted and exported the same way; they are never
 * overlays nor the baseline (TdmRunItem refuses both).
 */

#include <glib/gi18n.h>

#include "tdm-history-store.h"

struct _TdmHistoryStore
{
  GObject     parent_instance;

  TdmHistory *history;
  GPtrArray  *items;      /* of TdmRunItem, oldest first */
  GPtrArray  *deleted;    /* of TdmRunItem: off the list, file still there */
  GPtrArray  *problems;   /* of char *, from the last reload */
  GCancellable *loading;  /* while a reload runs on a thread */
};

enum {
  OVERLAYS_CHANGED,
  BASELINE_CHANGED,
  LOADED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void tdm_history_store_list_model_init (GListModelInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (TdmHistoryStore, tdm_history_store, G_TYPE_OBJECT,
                               G_IMPLEMENT_INTERFACE (G_TYPE_LIST_MODEL,
                                                      tdm_history_store_list_model_init))

static GType
tdm_history_store_get_item_type (GListModel *model)
{
  return TDM_TYPE_RUN_ITEM;
}

static guint
tdm_history_store_get_n_items (GListModel *model)
{
  return TDM_HISTORY_STORE (model)->items->len;
}

static gpointer
tdm_history_store_get_item (GListModel *model,
                            guint       position)
{
  TdmHistoryStore *self = TDM_HISTORY_STORE (model);

  if (position >= self->items->len)
    return NULL;
  return g_object_ref (g_ptr_array_index (self->items, position));
}

static void
tdm_history_store_list_model_init (GListModelInterface *iface)
{
  iface->get_item_type = tdm_history_store_get_item_type;
  iface->get_n_items = tdm_history_store_get_n_items;
  iface->get_item = tdm_history_store_get_item;
}

static void
tdm_history_store_overlay_toggled (TdmHistoryStore *self)
{
  g_signal_emit (self, signals[OVERLAYS_CHANGED], 0);
}

static void
tdm_history_store_dispose (GObject *object)
{
  TdmHistoryStore *self = TDM_HISTORY_STORE (object);
  g_autoptr(GError) error = NULL;

  if (self->loading != NULL)
    g_cancellable_cancel (self->loading);
  g_clear_object (&self->loading);
  /* The undo is no longer on offer: what was deleted goes now. */
  if (self->history != NULL && !tdm_history_store_commit_deletes (self, &error))
    g_warning ("%s", error->message);

  G_OBJECT_CLASS (tdm_history_store_parent_class)->dispose (object);
}

static void
tdm_history_store_finalize (GObject *object)
{
  TdmHistoryStore *self = TDM_HISTORY_STORE (object);

  for (guint i = 0; i < self->items->len; i++)
    g_signal_handlers_disconnect_by_data (g_ptr_array_index (self->items, i), self);
  g_clear_pointer (&self->items, g_ptr_array_unref);
  g_clear_pointer (&self->deleted, g_ptr_array_unref);
  g_clear_pointer (&self->problems, g_ptr_array_unref);
  g_clear_pointer (&self->history, tdm_history_free);

  G_OBJECT_CLASS (tdm_history_store_parent_class)->finalize (object);
}

static void
tdm_history_store_class_init (TdmHistoryStoreClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = tdm_history_store_dispose;
  object_class->finalize = tdm_history_store_finalize;

  /**
   * TdmHistoryStore::overlays-changed:
   *
   * A run was ticked or unticked for overlay, or a ticked run left the list.
   */
  signals[OVERLAYS_CHANGED] =
    g_signal_new ("overlays-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  /**
   * TdmHistoryStore::baseline-changed:
   *
   * Comparisons are now against another run.
   */
  signals[BASELINE_CHANGED] =
    g_signal_new ("baseline-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  /**
   * TdmHistoryStore::loaded:
   *
   * The folder has been listed (by tdm_history_store_reload() or
   * tdm_history_store_reload_async()).
   */
  signals[LOADED] =
    g_signal_new ("loaded", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void
tdm_history_store_init (TdmHistoryStore *self)
{
  self->items = g_ptr_array_new_with_free_func (g_object_unref);
  self->deleted = g_ptr_array_new_with_free_func (g_object_unref);
  self->problems = g_ptr_array_new_with_free_func (g_free);
}

TdmHistoryStore *
tdm_history_store_new (const char *folder)
{
  TdmHistoryStore *self = g_object_new (TDM_TYPE_HISTORY_STORE, NULL);

  self->history = tdm_history_new (folder);

  return self;
}

TdmHistory *
tdm_history_store_get_history (TdmHistoryStore *self)
{
  g_return_val_if_fail (TDM_IS_HISTORY_STORE (self), NULL);

  return self->history;
}

static TdmRunItem *
find_in (GPtrArray  *items,
         const char *id,
         guint      *index)
{
  for (guint i = 0; i < items->len; i++)
    {
      TdmRunItem *item = g_ptr_array_index (items, i);

      if (g_strcmp0 (tdm_run_item_get_id (item), id) == 0)
        {
          if (index != NULL)
            *index = i;
          return item;
        }
    }
  return NULL;
}

static void
tdm_history_store_watch (TdmHistoryStore *self,
                         TdmRunItem      *item)
{
  g_signal_connect_object (item, "notify::overlay",
                           G_CALLBACK (tdm_history_store_overlay_toggled), self,
                           G_CONNECT_SWAPPED);
}

/* Where the history lists `record` among the items: by the time it began, then by
 * id (tdm_history_list), so that a record added live sits where a reload puts it. */
static guint
listed_at (TdmHistoryStore    *self,
           const TdmRunRecord *record)
{
  guint at = 0;

  while (at < self->items->len)
    {
      const TdmRunRecord *r = tdm_run_item_get_record (g_ptr_array_index (self->items, at));

      if (r->created > record->created
          || (r->created == record->created && g_strcmp0 (r->id, record->id) > 0))
        break;
      at++;
    }
  return at;
}

/* The list becomes `records` (taken), keeping the ticks of the runs that stay. */
static void
tdm_history_store_apply (TdmHistoryStore *self,
                         GPtrArray       *records)
{
  g_autoptr(GPtrArray) old = NULL;
  guint n_old;
  gboolean overlays_changed = FALSE;

  old = g_steal_pointer (&self->items);
  n_old = old->len;
  self->items = g_ptr_array_new_with_free_func (g_object_unref);

  for (guint i = 0; i < records->len; i++)
    {
      TdmRunRecord *record = g_ptr_array_steal_index (records, i--);
      TdmRunItem *before;
      TdmRunItem *item;

      /* A run taken off the list stays off it until the undo or the commit. */
      if (find_in (self->deleted, record->id, NULL) != NULL)
        {
          tdm_run_record_free (record);
          continue;
        }
      before = find_in (old, record->id, NULL);
      item = tdm_run_item_new (record);
      if (before != NULL)
        {
          tdm_run_item_set_overlay (item, tdm_run_item_get_overlay (before));
          tdm_run_item_set_baseline (item, tdm_run_item_get_baseline (before));
        }
      tdm_history_store_watch (self, item);
      g_ptr_array_add (self->items, item);
    }

  /* A ticked run that is gone, or whose curve may have grown, redraws. */
  for (guint i = 0; i < old->len; i++)
    {
      TdmRunItem *item = g_ptr_array_index (old, i);

      overlays_changed |= tdm_run_item_get_overlay (item);
      g_signal_handlers_disconnect_by_data (item, self);
    }

  g_list_model_items_changed (G_LIST_MODEL (self), 0, n_old, self->items->len);
  if (overlays_changed)
    g_signal_emit (self, signals[OVERLAYS_CHANGED], 0);
  g_signal_emit (self, signals[BASELINE_CHANGED], 0);
}

void
tdm_history_store_reload (TdmHistoryStore *self)
{
  g_autoptr(GPtrArray) records = NULL;

  g_return_if_fail (TDM_IS_HISTORY_STORE (self));

  /* A listing still on its way is older than this one. */
  if (self->loading != NULL)
    {
      g_cancellable_cancel (self->loading);
      g_clear_object (&self->loading);
    }
  g_ptr_array_set_size (self->problems, 0);
  records = tdm_history_list (self->history, self->problems);
  tdm_history_store_apply (self, records);
  g_signal_emit (self, signals[LOADED], 0);
}

typedef struct
{
  GPtrArray *records;
  GPtrArray *problems;
} Listing;

static void
listing_free (gpointer data)
{
  Listing *listing = data;

  g_clear_pointer (&listing->records, g_ptr_array_unref);
  g_clear_pointer (&listing->problems, g_ptr_array_unref);
  g_free (listing);
}

/* Worker thread: a history of its own on the same folder (it is only a path). */
static void
tdm_history_store_list_thread (GTask        *task,
                               gpointer      source,
                               gpointer      task_data,
                               GCancellable *cancellable)
{
  g_autoptr(TdmHistory) history = tdm_history_new (task_data);
  Listing *listing = g_new0 (Listing, 1);

  listing->problems = g_ptr_array_new_with_free_func (g_free);
  /* With hundreds of runs a listing takes a while: a newer one cancels this one. */
  listing->records = tdm_history_list_cancellable (history, listing->problems, cancellable);
  g_task_return_pointer (task, listing, listing_free);
}

static void
tdm_history_store_listed (GObject      *source,
                          GAsyncResult *result,
                          gpointer      user_data)
{
  TdmHistoryStore *self = TDM_HISTORY_STORE (source);
  GCancellable *cancellable = g_task_get_cancellable (G_TASK (result));
  Listing *listing = g_task_propagate_pointer (G_TASK (result), NULL);

  if (listing == NULL || g_cancellable_is_cancelled (cancellable))
    {
      g_clear_pointer (&listing, listing_free);
      return;
    }
  if (self->loading == cancellable)
    g_clear_object (&self->loading);
  g_ptr_array_unref (self->problems);
  self->problems = g_steal_pointer (&listing->problems);
  tdm_history_store_apply (self, listing->records);
  listing_free (listing);
  g_signal_emit (self, signals[LOADED], 0);
}

void
tdm_history_store_reload_async (TdmHistoryStore *self)
{
  g_autoptr(GTask) task = NULL;

  g_return_if_fail (TDM_IS_HISTORY_STORE (self));

  if (self->loading != NULL)
    g_cancellable_cancel (self->loading);
  g_clear_object (&self->loading);
  self->loading = g_cancellable_new ();
  task = g_task_new (self, self->loading, tdm_history_store_listed, NULL);
  g_task_set_task_data (task, g_strdup (tdm_history_get_folder (self->history)), g_free);
  g_task_set_check_cancellable (task, FALSE);
  g_task_run_in_thread (task, tdm_history_store_list_thread);
}

gboolean
tdm_history_store_get_loading (TdmHistoryStore *self)
{
  g_return_val_if_fail (TDM_IS_HISTORY_STORE (self), FALSE);

  return self->loading != NULL;
}

gboolean
tdm_history_store_add_run (TdmHistoryStore  *self,
                           const char       *id,
                           GError          **error)
{
  TdmRunRecord *record;
  TdmRunItem *before, *item;
  guint index = 0;

  g_return_val_if_fail (TDM_IS_HISTORY_STORE (self), FALSE);

  /* A listing begun before this run ended would bring back its unfinished file:
   * list again, from now. */
  if (self->loading != NULL)
    {
      tdm_history_store_reload_async (self);
      return TRUE;
    }
  record = tdm_history_load (self->history, id, error);
  if (record == NULL)
    return FALSE;
  item = tdm_run_item_new (record);
  tdm_history_store_watch (self, item);
  before = find_in (self->items, id, &index);
  if (before != NULL)
    {
      tdm_run_item_set_overlay (item, tdm_run_item_get_overlay (before));
      tdm_run_item_set_baseline (item, tdm_run_item_get_baseline (before));
      g_signal_handlers_disconnect_by_data (before, self);
      g_ptr_array_index (self->items, index) = item;
      g_object_unref (before);
      g_list_model_items_changed (G_LIST_MODEL (self), index, 1, 1);
      if (tdm_run_item_get_overlay (item))
        g_signal_emit (self, signals[OVERLAYS_CHANGED], 0);
    }
  else
    {
      /* Where a reload would list it: an experiment's record began before its runs,
       * and goes before them here too. */
      index = listed_at (self, tdm_run_item_get_record (item));
      g_ptr_array_insert (self->items, index, item);
      g_list_model_items_changed (G_LIST_MODEL (self), index, 0, 1);
    }
  g_signal_emit (self, signals[BASELINE_CHANGED], 0);
  return TRUE;
}

GStrv
tdm_history_store_get_problems (TdmHistoryStore *self)
{
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  g_return_val_if_fail (TDM_IS_HISTORY_STORE (self), NULL);

  for (guint i = 0; i < self->problems->len; i++)
    g_strv_builder_add (builder, g_ptr_array_index (self->problems, i));
  return g_strv_builder_end (builder);
}

TdmRunItem *
tdm_history_store_find (TdmHistoryStore *self,
                        const char      *id)
{
  g_return_val_if_fail (TDM_IS_HISTORY_STORE (self), NULL);

  return find_in (self->items, id, NULL);
}

TdmRunRecorder *
tdm_history_store_record (TdmHistoryStore  *self,
                          const TdmConfig  *config,
                          const char       *name,
                          GError          **error)
{
  g_return_val_if_fail (TDM_IS_HISTORY_STORE (self), NULL);

  return tdm_run_recorder_new (self->history, config, name, error);
}

gboolean
tdm_history_store_rename (TdmHistoryStore  *self,
                          TdmRunItem       *item,
                          const char       *name,
                          GError          **error)
{
  g_autofree char *stripped = NULL;

  g_return_val_if_fail (TDM_IS_HISTORY_STORE (self), FALSE);
  g_return_val_if_fail (TDM_IS_RUN_ITEM (item), FALSE);
  g_return_val_if_fail (name != NULL, FALSE);

  stripped = g_strstrip (g_strdup (name));
  if (stripped[0] == '\0')
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                   _("A run needs a name: the one given is empty."));
      return FALSE;
    }
  if (!tdm_history_rename (self->history, tdm_run_item_get_id (item), stripped, error))
    return FALSE;
  tdm_run_item_set_name (item, stripped);
  if (tdm_run_item_get_overlay (item))
    g_signal_emit (self, signals[OVERLAYS_CHANGED], 0);
  return TRUE;
}

void
tdm_history_store_delete (TdmHistoryStore *self,
                          TdmRunItem      *item)
{
  guint index;

  g_return_if_fail (TDM_IS_HISTORY_STORE (self));
  g_return_if_fail (TDM_IS_RUN_ITEM (item));

  if (find_in (self->items, tdm_run_item_get_id (item), &index) == NULL)
    return;

  g_signal_handlers_disconnect_by_data (item, self);
  g_ptr_array_add (self->deleted, g_ptr_array_steal_index (self->items, index));
  g_list_model_items_changed (G_LIST_MODEL (self), index, 1, 0);
  if (tdm_run_item_get_overlay (item))
    g_signal_emit (self, signals[OVERLAYS_CHANGED], 0);
  if (tdm_run_item_get_baseline (item))
    {
      tdm_run_item_set_baseline (item, FALSE);
      g_signal_emit (self, signals[BASELINE_CHANGED], 0);
    }
}

gboolean
tdm_history_store_undo_delete (TdmHistoryStore *self,
                               const char      *id)
{
  TdmRunItem *item;
  guint index, at;

  g_return_val_if_fail (TDM_IS_HISTORY_STORE (self), FALSE);

  item = find_in (self->deleted, id, &index);
  if (item == NULL)
    return FALSE;

  item = g_ptr_array_steal_index (self->deleted, index);
  at = listed_at (self, tdm_run_item_get_record (item));
  g_ptr_array_insert (self->items, at, item);
  tdm_history_store_watch (self, item);
  g_list_model_items_changed (G_LIST_MODEL (self), at, 0, 1);
  if (tdm_run_item_get_overlay (item))
    g_signal_emit (self, signals[OVERLAYS_CHANGED], 0);
  return TRUE;
}

gboolean
tdm_history_store_commit_deletes (TdmHistoryStore  *self,
                                  GError          **error)
{
  gboolean ok = TRUE;

  g_return_val_if_fail (TDM_IS_HISTORY_STORE (self), FALSE);

  while (self->deleted->len > 0)
    {
      g_autoptr(TdmRunItem) item = g_ptr_array_steal_index (self->deleted, 0);
      g_autoptr(GError) local = NULL;

      if (!tdm_history_delete (self->history, tdm_run_item_get_id (item), &local) && ok)
        {
          ok = FALSE;
          g_propagate_error (error, g_steal_pointer (&local));
        }
    }
  return ok;
}

gboolean
tdm_history_store_export_csv (TdmHistoryStore  *self,
                              TdmRunItem       *item,
                              const char       *path,
                              GError          **error)
{
  g_return_val_if_fail (TDM_IS_HISTORY_STORE (self), FALSE);
  g_return_val_if_fail (TDM_IS_RUN_ITEM (item), FALSE);

  return tdm_history_export_csv (self->history, tdm_run_item_get_id (item), path, error);
}

GPtrArray *
tdm_history_store_get_overlays (TdmHistoryStore *self)
{
  GPtrArray *records = g_ptr_array_new ();

  g_return_val_if_fail (TDM_IS_HISTORY_STORE (self), records);

  for (guint i = 0; i < self->items->len; i++)
    {
      TdmRunItem *item = g_ptr_array_index (self->items, i);

      if (tdm_run_item_get_overlay (item))
        g_ptr_array_add (records, (gpointer) tdm_run_item_get_record (item));
    }
  return records;
}

TdmRunItem *
tdm_history_store_get_baseline (TdmHistoryStore *self)
{
  g_return_val_if_fail (TDM_IS_HISTORY_STORE (self), NULL);

  for (guint i = 0; i < self->items->len; i++)
    if (tdm_run_item_get_baseline (g_ptr_array_index (self->items, i)))
      return g_ptr_array_index (self->items, i);
  /* Experiments have no speed of their own to be measured against. */
  for (guint i = 0; i < self->items->len; i++)
    if (!tdm_run_item_is_experiment (g_ptr_array_index (self->items, i)))
      return g_ptr_array_index (self->items, i);
  return NULL;
}

void
tdm_history_store_set_baseline (TdmHistoryStore *self,
                                TdmRunItem      *baseline)
{
  g_return_if_fail (TDM_IS_HISTORY_STORE (self));

  for (guint i = 0; i < self->items->len; i++)
    {
      TdmRunItem *item = g_ptr_array_index (self->items, i);

      tdm_run_item_set_baseline (item, item == baseline);
    }
  g_signal_emit (self, signals[BASELINE_CHANGED], 0);
}
