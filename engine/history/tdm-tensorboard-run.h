/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-tensorboard-run.h — a training run's scalars in TensorBoard: live, from the
 * trainer's events (tandem-train --tensorboard DIR, the window's preference), or
 * converted from a run kept in the history (tandem-train runs --export-tensorboard).
 *
 * One run is one folder under the chosen root, named after the run. Tags group as
 * TensorBoard shows them: loss/train, loss/train_epoch, loss/val, loss/test (and
 * accuracy/… likewise, a fraction), learning_rate, epoch, samples_per_s, and per device
 * ("0 cpu", "1 cuda:0": the replica's index and device) memory_bytes/…,
 * memory_used_bytes/…, load_percent/…, compute_ms/…, communication_ms/…, wait_ms/…
 * and overlap_percent/…; steps are the run's global steps. A figure the engine does
 * not know (a CPU's load) is left out, never written as 0. Both ways go through the
 * same rules, so a converted run reads as it did live, less what the history does not
 * keep (memory in use in total, load). The file format is tdm-tensorboard.h's.
 */
#pragma once

#include <glib.h>

#include "tdm-events.h"
#include "tdm-history.h"

G_BEGIN_DECLS

typedef struct _TdmTensorboardRun TdmTensorboardRun;

/* root/NAME, NAME the run's name with what a folder name cannot hold replaced. */
char *tdm_tensorboard_run_folder (const char *root, const char *name);

/* A live run's event file in root/name (name NULL: the date and time of now). */
TdmTensorboardRun *tdm_tensorboard_run_new (const char *root, const char *name,
                                            GError **error);
const char *tdm_tensorboard_run_get_folder (TdmTensorboardRun *run);
/* A TdmEventSink: writes what the event says that a run plots, as it comes. */
void tdm_tensorboard_run_add (const TdmEvent *event, gpointer run);
/* Closes the file; FALSE with the first write error, if any. */
gboolean tdm_tensorboard_run_finish (TdmTensorboardRun *run, GError **error);
void tdm_tensorboard_run_free (TdmTensorboardRun *run);

/* A training run of the history as one event file in `folder` (made if needed),
 * replacing what an earlier conversion of it wrote there. Wall times are the run's
 * start plus its training seconds. */
gboolean tdm_tensorboard_export_record (const TdmRunRecord *record, const char *folder,
                                        GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmTensorboardRun, tdm_tensorboard_run_free)

G_END_DECLS
