/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-events.c — names and JSON for the events that describe a step's inside: its
 * phases per device, how its batch split, and the test set's predictions.
 *
 * tandem-train --json prints these through tdm_event_detail_to_json(); the window
 * reads the same structs. The older kinds (started, step, …) are still written by
 * the CLI itself. Not a sink: nothing here keeps an event.
 */
#include "tdm-events.h"
#include "tdm-config.h"
#include "tdm-i18n.h"
#include "tdm-json.h"

#include <json-glib/json-glib.h>
#include <math.h>

static const char *const phase_names[TDM_PHASE_COUNT] = {
  [TDM_PHASE_FORWARD] = "forward",
  [TDM_PHASE_BACKWARD] = "backward",
  [TDM_PHASE_REDUCE] = "reduce",
  [TDM_PHASE_ALLREDUCE] = "all-reduce",
  [TDM_PHASE_BROADCAST] = "broadcast",
  [TDM_PHASE_UPDATE] = "update",
  [TDM_PHASE_WAIT] = "wait",
  [TDM_PHASE_ACCUMULATE] = "accumulate",
};

const char *
tdm_phase_name(TdmPhase phase)
{
  return phase >= 0 && phase < TDM_PHASE_COUNT ? phase_names[phase] : "unknown";
}

char *
tdm_finished_early_stop_text(const TdmFinishedEvent *f, gboolean translated)
{
  g_return_val_if_fail(f != NULL, NULL);
  if (!f->early_stopped)
    return NULL;
  const char *format = N_("stopped early at epoch %d (best %d)");
  return g_strdup_printf(translated ? _(format) : format, f->epochs_done, f->best_epoch);
}

const char *
tdm_workspace_basis_name(TdmWorkspaceBasis basis)
{
  switch (basis) {
  case TDM_WORKSPACE_COLUMNS:
    return "columns";
  case TDM_WORKSPACE_UPPER_BOUND:
    return "upper-bound";
  case TDM_WORKSPACE_CHOSEN:
    return "chosen";
  }
  return "unknown";
}

const char *
tdm_setup_phase_name(TdmSetupPhase phase)
{
  switch (phase) {
  case TDM_SETUP_DATASET:
    return "dataset";
  case TDM_SETUP_NETWORK:
    return "network";
  case TDM_SETUP_PREWARM:
    return "prewarm";
  case TDM_SETUP_EVALUATION:
    return "evaluation";
  case TDM_SETUP_VALIDATION:
    return "validation";
  }
  return "unknown";
}

static void
member_double(JsonBuilder *b, const char *name, double v)
{
  json_builder_set_member_name(b, name);
  /* Microseconds are all a timeline can show; fewer digits, shorter lines. */
  json_builder_add_double_value(b, isfinite(v) ? round(v * 1e3) / 1e3 : 0);
}

double
tdm_overlap_percent(double exposed_ms, double hidden_ms)
{
  exposed_ms = isfinite(exposed_ms) ? MAX(0.0, exposed_ms) : 0;
  hidden_ms = isfinite(hidden_ms) ? MAX(0.0, hidden_ms) : 0;
  if (exposed_ms + hidden_ms <= 0)
    return NAN;
  return 100.0 * hidden_ms / (exposed_ms + hidden_ms);
}

double
tdm_device_phases_overlap(const TdmDevicePhases *d)
{
  g_return_val_if_fail(d != NULL, NAN);
  double exposed = 0;
  for (int i = 0; i < d->spans && i < TDM_MAX_PHASE_SPANS; i++)
    if (d->span[i].phase == TDM_PHASE_REDUCE || d->span[i].phase == TDM_PHASE_ALLREDUCE ||
        d->span[i].phase == TDM_PHASE_BROADCAST)
      exposed += d->span[i].end_ms - d->span[i].start_ms;
  return tdm_overlap_percent(exposed, d->hidden_ms);
}

static void
add_phases(JsonBuilder *b, const TdmPhasesEvent *p)
{
  tdm_json_set_int(b, "step", p->step);
  json_builder_set_member_name(b, "devices");
  json_builder_begin_array(b);
  for (int r = 0; r < p->replicas && r < TDM_MAX_REPLICAS; r++) {
    json_builder_begin_array(b);
    for (int i = 0; i < p->device[r].spans && i < TDM_MAX_PHASE_SPANS; i++) {
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "phase");
      json_builder_add_string_value(b, tdm_phase_name(p->device[r].span[i].phase));
      member_double(b, "start_ms", p->device[r].span[i].start_ms);
      member_double(b, "end_ms", p->device[r].span[i].end_ms);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
  }
  json_builder_end_array(b);
  /* Beside "devices", not inside it, so readers of the spans are unchanged. */
  json_builder_set_member_name(b, "bytes");
  json_builder_begin_array(b);
  for (int r = 0; r < p->replicas && r < TDM_MAX_REPLICAS; r++) {
    json_builder_begin_object(b);
    tdm_json_set_int(b, "sent", (gint64)p->device[r].bytes_sent);
    tdm_json_set_int(b, "received", (gint64)p->device[r].bytes_received);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  /* Per device: communication hidden under backward, in ms and as a share of all its
   * communication (null where it had none). */
  json_builder_set_member_name(b, "overlap");
  json_builder_begin_array(b);
  for (int r = 0; r < p->replicas && r < TDM_MAX_REPLICAS; r++) {
    double percent = tdm_device_phases_overlap(&p->device[r]);
    json_builder_begin_object(b);
    member_double(b, "hidden_ms", p->device[r].hidden_ms);
    json_builder_set_member_name(b, "percent");
    if (isfinite(percent))
      json_builder_add_double_value(b, round(percent * 10) / 10);
    else
      json_builder_add_null_value(b);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

static void
add_batch(JsonBuilder *b, const TdmBatchEvent *bt)
{
  tdm_json_set_int(b, "step", bt->step);
  tdm_json_set_int(b, "batch", bt->batch);
  json_builder_set_member_name(b, "devices");
  json_builder_begin_array(b);
  for (int r = 0; r < bt->replicas && r < TDM_MAX_REPLICAS; r++) {
    json_builder_begin_object(b);
    tdm_json_set_int(b, "offset", bt->device[r].offset);
    tdm_json_set_int(b, "size", bt->device[r].size);
    json_builder_set_member_name(b, "samples");
    json_builder_begin_array(b);
    for (int i = 0; i < bt->device[r].shown && i < TDM_BATCH_SAMPLES_SHOWN; i++) {
      json_builder_begin_object(b);
      tdm_json_set_int(b, "index", bt->device[r].index[i]);
      tdm_json_set_int(b, "label", bt->device[r].label[i]);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

static void
add_predictions(JsonBuilder *b, const TdmPredictionsEvent *p)
{
  tdm_json_set_int(b, "epoch", p->epoch);
  tdm_json_set_int(b, "step", p->step);
  tdm_json_set_int(b, "classes", p->classes);
  tdm_json_set_int(b, "test_count", p->test_count);
  tdm_json_set_int(b, "correct", p->correct);
  int shown = MIN(p->classes, TDM_MAX_CONFUSION_CLASSES);
  json_builder_set_member_name(b, "class_names");
  json_builder_begin_array(b);
  for (int c = 0; c < shown; c++)
    json_builder_add_string_value(b, p->class_name[c]);
  json_builder_end_array(b);
  json_builder_set_member_name(b, "confusion");
  if (p->has_matrix) {
    json_builder_begin_array(b);
    for (int i = 0; i < shown; i++) {
      json_builder_begin_array(b);
      for (int j = 0; j < shown; j++)
        json_builder_add_int_value(b, p->matrix[i][j]);
      json_builder_end_array(b);
    }
    json_builder_end_array(b);
  } else {
    json_builder_add_null_value(b);
  }
  json_builder_set_member_name(b, "samples");
  json_builder_begin_array(b);
  for (int i = 0; i < p->samples && i < TDM_PREDICTION_SAMPLES; i++) {
    json_builder_begin_object(b);
    tdm_json_set_int(b, "index", p->sample[i].index);
    tdm_json_set_int(b, "truth", p->sample[i].truth);
    tdm_json_set_int(b, "predicted", p->sample[i].predicted);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

gboolean
tdm_event_detail_to_json(JsonBuilder *b, const TdmEvent *event)
{
  switch (event->kind) {
  case TDM_EVENT_PHASES:
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "phases");
    add_phases(b, &event->phases);
    return TRUE;
  case TDM_EVENT_BATCH:
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "batch");
    add_batch(b, &event->batch);
    return TRUE;
  case TDM_EVENT_PREDICTIONS:
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "predictions");
    add_predictions(b, &event->predictions);
    return TRUE;
  default:
    return FALSE;
  }
}

void
tdm_started_event_set_devices(TdmStartedEvent *s, const TdmDeviceId *devices, int count)
{
  int n = MIN(count, TDM_MAX_REPLICAS);
  s->replicas = count;
  for (int r = 0; r < n; r++) {
    tdm_device_id_name(devices[r], s->device[r]);
    s->gpu[r] = tdm_device_id_is_gpu(devices[r]) ? devices[r].ordinal : -1;
  }
  for (int r = 0; r < n; r++) {
    s->gpu_replicas[r] = 0;
    for (int q = 0; s->gpu[r] >= 0 && q < n; q++)
      s->gpu_replicas[r] += s->gpu[q] == s->gpu[r];
  }
}
