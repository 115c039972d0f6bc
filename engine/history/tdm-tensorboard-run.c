/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-tensorboard-run.c — which scalars a run has in TensorBoard, from live events or
 * from a kept run (tdm-tensorboard-run.h). Each kind of figure has one function that
 * both ways call, so the tags and their meaning cannot drift apart.
 */
#include "tdm-tensorboard-run.h"
#include "tdm-error.h"
#include "tdm-tensorboard.h"

#include <math.h>
#include <string.h>

struct _TdmTensorboardRun {
  TdmTensorboard *file;
  char *folder;
  int replicas;
  char label[TDM_MAX_REPLICAS][48];   /* "0 cpu", "1 cuda:0" */
};

/* ---- the scalars of each kind of figure ------------------------------------------ */

static void
step_scalars(TdmTensorboard *tb, gint64 step, double wall, double epoch, double loss,
             double accuracy, double lr, double samples_per_second)
{
  const char *tags[] = {"loss/train", "accuracy/train", "learning_rate", "epoch",
                        "samples_per_s"};
  const double values[] = {loss, accuracy, lr, epoch, samples_per_second};
  tdm_tensorboard_add(tb, step, wall, G_N_ELEMENTS(tags), tags, values);
}

static void
epoch_scalars(TdmTensorboard *tb, double wall, const TdmEpochEvent *e)
{
  const char *tags[] = {"loss/train_epoch", "accuracy/train_epoch", "loss/val", "accuracy/val",
                        "loss/test", "accuracy/test"};
  const double values[] = {e->train_loss, e->train_accuracy, e->val_loss, e->val_accuracy,
                           e->test_loss, e->test_accuracy};
  tdm_tensorboard_add(tb, e->step, wall, G_N_ELEMENTS(tags), tags, values);
}

/* One device's figures of a step; NaN for what is not known. */
typedef struct {
  double compute_ms, comm_ms, wait_ms;
  double tandem_bytes, used_bytes, load_percent;
} DeviceFigures;

static void
device_scalars(TdmTensorboard *tb, gint64 step, double wall, const char *label,
               const DeviceFigures *f)
{
  static const char *const names[] = {"compute_ms", "communication_ms", "wait_ms",
                                       "memory_bytes", "memory_used_bytes", "load_percent"};
  /* No step was timed since the last figures (the run's last ones, right after a
   * sampled step): its times are all 0, which means not known, not that a step took
   * no time. */
  gboolean timed = f->compute_ms > 0;
  const double values[] = {timed ? f->compute_ms : NAN, timed ? f->comm_ms : NAN,
                           timed ? f->wait_ms : NAN, f->tandem_bytes, f->used_bytes,
                           f->load_percent};
  char tags[G_N_ELEMENTS(names)][96];
  const char *pointers[G_N_ELEMENTS(names)];
  for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
    g_snprintf(tags[i], sizeof tags[i], "%s/%s", names[i], label);
    pointers[i] = tags[i];
  }
  tdm_tensorboard_add(tb, step, wall, G_N_ELEMENTS(names), pointers, values);
}

static void
overlap_scalar(TdmTensorboard *tb, gint64 step, double wall, const char *label, double percent)
{
  char tag[96];
  g_snprintf(tag, sizeof tag, "overlap_percent/%s", label);
  const char *tags[] = {tag};
  tdm_tensorboard_add(tb, step, wall, 1, tags, &percent);
}

static void
set_labels(TdmTensorboardRun *run, int replicas, const char *const *devices)
{
  run->replicas = MIN(replicas, TDM_MAX_REPLICAS);
  for (int r = 0; r < run->replicas; r++)
    g_snprintf(run->label[r], sizeof run->label[r], "%d %s", r,
               devices != NULL && devices[r] != NULL ? devices[r] : "device");
}

/* ---- live ------------------------------------------------------------------------ */

char *
tdm_tensorboard_run_folder(const char *root, const char *name)
{
  g_return_val_if_fail(root != NULL && name != NULL, NULL);
  g_autofree char *safe = g_strdup(*name != '\0' ? name : "run");
  for (char *p = safe; *p != '\0'; p++)
    if (*p == G_DIR_SEPARATOR || (guchar)*p < 0x20)
      *p = '_';
  if (g_str_equal(safe, ".") || g_str_equal(safe, ".."))
    safe[0] = '_';
  return g_build_filename(root, safe, NULL);
}

static double
now_seconds(void)
{
  return g_get_real_time() / 1e6;
}

TdmTensorboardRun *
tdm_tensorboard_run_new(const char *root, const char *name, GError **error)
{
  g_return_val_if_fail(root != NULL, NULL);
  g_autoptr(GDateTime) now = g_date_time_new_now_local();
  g_autofree char *date = g_date_time_format(now, "%Y-%m-%d %H-%M-%S");
  g_autoptr(TdmTensorboardRun) run = g_new0(TdmTensorboardRun, 1);
  run->folder = tdm_tensorboard_run_folder(root, name != NULL ? name : date);
  run->file = tdm_tensorboard_new(run->folder, NULL, now_seconds(), error);
  if (run->file == NULL)
    return NULL;
  return g_steal_pointer(&run);
}

const char *
tdm_tensorboard_run_get_folder(TdmTensorboardRun *run)
{
  g_return_val_if_fail(run != NULL, NULL);
  return run->folder;
}

/* The engine's unknowns (negative telemetry) as NaN, which is left out. */
static double
known(double v)
{
  return v >= 0 ? v : NAN;
}

void
tdm_tensorboard_run_add(const TdmEvent *e, gpointer data)
{
  TdmTensorboardRun *run = data;
  double wall = now_seconds();
  switch (e->kind) {
  case TDM_EVENT_STARTED: {
    const char *devices[TDM_MAX_REPLICAS];
    for (int r = 0; r < e->started.replicas && r < TDM_MAX_REPLICAS; r++)
      devices[r] = e->started.device[r];
    set_labels(run, e->started.replicas, devices);
    break;
  }
  case TDM_EVENT_STEP:
    step_scalars(run->file, e->step.step, wall, e->step.epoch_float, e->step.train_loss,
                 e->step.train_accuracy, e->step.lr, e->step.samples_per_second);
    break;
  case TDM_EVENT_EPOCH:
    epoch_scalars(run->file, wall, &e->epoch);
    break;
  case TDM_EVENT_DEVICES:
    for (int r = 0; r < e->devices.replicas && r < run->replicas; r++) {
      DeviceFigures f = {
        .compute_ms = e->devices.device[r].compute_ms,
        .comm_ms = e->devices.device[r].comm_ms,
        .wait_ms = e->devices.device[r].wait_ms,
        .tandem_bytes = (double)e->devices.device[r].tandem_bytes,
        .used_bytes = known((double)e->devices.device[r].used_bytes),
        .load_percent = known(e->devices.device[r].utilization),
      };
      device_scalars(run->file, e->devices.step, wall, run->label[r], &f);
    }
    break;
  case TDM_EVENT_PHASES:
    for (int r = 0; r < e->phases.replicas && r < run->replicas; r++)
      overlap_scalar(run->file, e->phases.step, wall, run->label[r],
                     tdm_device_phases_overlap(&e->phases.device[r]));
    break;
  default:
    break;
  }
}

gboolean
tdm_tensorboard_run_finish(TdmTensorboardRun *run, GError **error)
{
  g_return_val_if_fail(run != NULL, FALSE);
  return tdm_tensorboard_close(run->file, error);
}

void
tdm_tensorboard_run_free(TdmTensorboardRun *run)
{
  if (run == NULL)
    return;
  tdm_tensorboard_free(run->file);
  g_free(run->folder);
  g_free(run);
}

/* ---- kept runs -------------------------------------------------------------------- */

/* The training seconds at `step`: the last summary's at or before it. */
static double
elapsed_at(const TdmRunRecord *r, long step)
{
  double elapsed = 0;
  for (guint i = 0; i < r->points->len; i++) {
    const TdmHistoryPoint *p = &g_array_index(r->points, TdmHistoryPoint, i);
    if (p->step > step)
      break;
    if (isfinite(p->elapsed))
      elapsed = p->elapsed;
  }
  return elapsed;
}

gboolean
tdm_tensorboard_export_record(const TdmRunRecord *r, const char *folder, GError **error)
{
  g_return_val_if_fail(r != NULL && folder != NULL, FALSE);
  double start = (double)r->created;
  /* One name per run, so a second conversion replaces the first. */
  g_autofree char *name = g_strdup_printf("events.out.tfevents.%" G_GINT64_FORMAT ".tandem",
                                          r->created);
  g_autoptr(TdmTensorboardRun) run = g_new0(TdmTensorboardRun, 1);
  run->folder = g_strdup(folder);
  run->file = tdm_tensorboard_new(folder, name, start, error);
  if (run->file == NULL)
    return FALSE;
  char names[TDM_MAX_REPLICAS][TDM_DEVICE_NAME_MAX];
  const char *devices[TDM_MAX_REPLICAS] = {NULL};
  for (int d = 0; d < MIN(r->config->replicas, TDM_MAX_REPLICAS); d++)
    devices[d] = tdm_device_id_name(r->config->devices[d], names[d]);
  set_labels(run, r->replicas, devices);
  for (guint i = 0; i < r->points->len; i++) {
    const TdmHistoryPoint *p = &g_array_index(r->points, TdmHistoryPoint, i);
    step_scalars(run->file, p->step, start + p->elapsed, p->epoch, p->train_loss,
                 p->train_accuracy, p->lr, p->samples_per_second);
  }
  for (guint i = 0; i < r->epochs->len; i++) {
    const TdmEpochEvent *e = &g_array_index(r->epochs, TdmEpochEvent, i);
    epoch_scalars(run->file, start + e->elapsed, e);
  }
  for (guint i = 0; i < r->device_points->len; i++) {
    const TdmHistoryDevicePoint *d = &g_array_index(r->device_points, TdmHistoryDevicePoint, i);
    if (d->device < 0 || d->device >= run->replicas)
      continue;
    DeviceFigures f = {
      .compute_ms = d->compute_ms,
      .comm_ms = d->comm_ms,
      .wait_ms = d->wait_ms,
      .tandem_bytes = (double)d->tandem_bytes,
      .used_bytes = NAN,
      .load_percent = NAN,
    };
    device_scalars(run->file, d->step, start + elapsed_at(r, d->step), run->label[d->device], &f);
  }
  for (guint i = 0; i < r->phases->len; i++) {
    const TdmHistoryPhases *p = &g_array_index(r->phases, TdmHistoryPhases, i);
    if (p->device < 0 || p->device >= run->replicas)
      continue;
    overlap_scalar(run->file, p->step, start + elapsed_at(r, p->step), run->label[p->device],
                   tdm_history_phases_overlap(p));
  }
  return tdm_tensorboard_close(run->file, error);
}
