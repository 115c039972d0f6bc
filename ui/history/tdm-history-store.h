/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history-store.h: the run history as a list model for the window.
 *
 * A TdmHistoryStore lists the runs of a TdmHistory folder as TdmRunItems, oldest
 * first, and does to them what the History page offers: rename, delete (undoably:
 * the file goes only once the undo is no longer offered), export as CSV, tick for
 * overlay, choose the baseline of comparisons. It also opens the recorder of each
 * run the window starts. All on the main thread; reading the folder is quick (a few
 * kilobytes a run). Not a widget.
 */

#pragma once

#include <gio/gio.h>

#include "tdm-history.h"
#include "tdm-run-item.h"

G_BEGIN_DECLS

#define TDM_TYPE_HISTORY_STORE (tdm_history_store_get_type ())

G_DECLARE_FINAL_TYPE (TdmHistoryStore, tdm_history_store, TDM, HISTORY_STORE, GObject)

/* `folder` NULL: the user's data folder (tdm_history_new). Empty until a reload. */
TdmHistoryStore *tdm_history_store_new            (const char       *folder);
TdmHistory      *tdm_history_store_get_history    (TdmHistoryStore  *self);

/* Reads the folder again, keeping what was ticked. The files that could not be read
 * are left out; their messages (each naming its file) until the next reload: */
void             tdm_history_store_reload         (TdmHistoryStore  *self);
/* The same on a worker thread, for a window that must not wait for a large history.
 * Either way "loaded" follows once the list is new (on the main loop, unless the
 * store went first or a newer reload replaced this one). */
void             tdm_history_store_reload_async   (TdmHistoryStore  *self);
gboolean         tdm_history_store_get_loading    (TdmHistoryStore  *self);
GStrv            tdm_history_store_get_problems   (TdmHistoryStore  *self);
/* Reads one run (a run that just ended) into the list, or again if listed: cheaper
 * than a reload once the history holds many long runs, and placed where a reload
 * lists it (by when it began). FALSE with why it could not. */
gboolean         tdm_history_store_add_run        (TdmHistoryStore  *self,
                                                   const char       *id,
                                                   GError          **error);

TdmRunItem      *tdm_history_store_find           (TdmHistoryStore  *self,
                                                   const char       *id);

/* A new run's recorder; `name` NULL: named by its date. */
TdmRunRecorder  *tdm_history_store_record         (TdmHistoryStore  *self,
                                                   const TdmConfig  *config,
                                                   const char       *name,
                                                   GError          **error);

gboolean         tdm_history_store_rename         (TdmHistoryStore  *self,
                                                   TdmRunItem       *item,
                                                   const char       *name,
                                                   GError          **error);
/* Takes the run off the list; its file stays until tdm_history_store_commit_deletes
 * (or the store's end), so tdm_history_store_undo_delete can bring it back. */
void             tdm_history_store_delete         (TdmHistoryStore  *self,
                                                   TdmRunItem       *item);
gboolean         tdm_history_store_undo_delete    (TdmHistoryStore  *self,
                                                   const char       *id);
/* Deletes the files of the runs taken off; FALSE with the first failure. */
gboolean         tdm_history_store_commit_deletes (TdmHistoryStore  *self,
                                                   GError          **error);
gboolean         tdm_history_store_export_csv     (TdmHistoryStore  *self,
                                                   TdmRunItem       *item,
                                                   const char       *path,
                                                   GError          **error);

/* The ticked runs' records, oldest first (borrowed from the items). "overlays-changed"
 * tells when the set changes. */
GPtrArray       *tdm_history_store_get_overlays   (TdmHistoryStore  *self);
/* The baseline of comparisons: the chosen run, else the oldest training run (NULL
 * when there is none: sweeps are never the baseline). */
TdmRunItem      *tdm_history_store_get_baseline   (TdmHistoryStore  *self);
void             tdm_history_store_set_baseline   (TdmHistoryStore  *self,
                                                   TdmRunItem       *item);

G_END_DECLS
