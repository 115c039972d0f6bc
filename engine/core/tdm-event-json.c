/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-event-json.c — every engine event as JSON (tdm-event-json.h). Not the
 * phases', batches' and predictions' members, which tdm_event_detail_to_json() in
 * tdm-events.c writes for this file.
 */
#include "tdm-event-json.h"
#include "tdm-choice.h"
#include "tdm-config.h"
#include "tdm-error.h"
#include "tdm-json.h"

#include <math.h>

/* Telemetry marks what it does not know with a negative value. */
static void
json_known(JsonBuilder *b, const char *name, double v, gboolean integer)
{
  json_builder_set_member_name(b, name);
  if (v < 0 || !isfinite(v))
    json_builder_add_null_value(b);
  else if (integer)
    json_builder_add_int_value(b, (gint64)v);
  else
    json_builder_add_double_value(b, v);
}

/* The code's name, its GEnum's nick ("invalid-option", "export"); "other" for an error
 * of another domain. */
static const char *
error_code_name(const GError *e)
{
  const char *name = e->domain == TDM_ENGINE_ERROR
                         ? tdm_choice_name(TDM_TYPE_ENGINE_ERROR, e->code)
                         : NULL;
  return name != NULL ? name : "other";
}

JsonNode *
tdm_event_to_json(const TdmEvent *ev)
{
  g_return_val_if_fail(ev != NULL, NULL);
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  switch (ev->kind) {
  case TDM_EVENT_MEMORY: {
    const TdmMemoryEvent *m = &ev->memory;
    tdm_json_set_string(b, "type", "memory");
    tdm_json_set_int(b, "batch", m->batch);
    tdm_json_set_int(b, "capacity", m->capacity);
    tdm_json_set_int(b, "eval_capacity", m->eval_capacity);
    json_builder_set_member_name(b, "devices");
    json_builder_begin_array(b);
    for (int i = 0; i < m->replicas && i < TDM_MAX_REPLICAS; i++) {
      const TdmMemoryDevice *d = &m->device[i];
      json_builder_begin_object(b);
      tdm_json_set_string(b, "device", d->device);
      tdm_json_set_int(b, "shard", d->shard);
      json_builder_set_member_name(b, "host");
      json_builder_add_boolean_value(b, d->host);
      tdm_json_set_int(b, "parameters", (gint64)d->parameters);
      tdm_json_set_int(b, "gradients", (gint64)d->gradients);
      tdm_json_set_int(b, "optimizer", (gint64)d->optimizer);
      tdm_json_set_int(b, "activations", (gint64)d->activations);
      tdm_json_set_int(b, "workspace", (gint64)d->workspace);
      tdm_json_set_int(b, "dataset", (gint64)d->dataset);
      tdm_json_set_int(b, "communication", (gint64)d->communication);
      tdm_json_set_int(b, "total", (gint64)d->total);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    tdm_json_set_int(b, "host_dataset", (gint64)m->host_dataset);
    tdm_json_set_int(b, "host_copies", (gint64)m->host_copies);
    tdm_json_set_int(b, "host_devices", (gint64)m->host_devices);
    tdm_json_set_int(b, "host_total", (gint64)m->host_total);
    tdm_json_set_int(b, "gpu_total", (gint64)m->gpu_total);
    json_known(b, "host_available",
               m->host_available == G_MAXUINT64 ? -1 : (double)m->host_available, TRUE);
    json_known(b, "largest_batch", m->largest_batch, TRUE);
    tdm_json_set_string(b, "workspace_basis", tdm_workspace_basis_name(m->workspace_basis));
    break;
  }
  case TDM_EVENT_STARTED: {
    const TdmStartedEvent *s = &ev->started;
    tdm_json_set_string(b, "type", "started");
    tdm_json_set_int(b, "replicas", s->replicas);
    tdm_json_set_int(b, "main_replica", s->main_replica);
    json_builder_set_member_name(b, "devices");
    json_builder_begin_array(b);
    for (int i = 0; i < s->replicas && i < TDM_MAX_REPLICAS; i++)
      json_builder_add_string_value(b, s->device[i]);
    json_builder_end_array(b);
    /* Each replica's GPU (null on the CPU): replicas with the same number share it. */
    json_builder_set_member_name(b, "gpus");
    json_builder_begin_array(b);
    for (int i = 0; i < s->replicas && i < TDM_MAX_REPLICAS; i++) {
      if (s->gpu_replicas[i] > 0)
        json_builder_add_int_value(b, s->gpu[i]);
      else
        json_builder_add_null_value(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "shards");
    json_builder_begin_array(b);
    for (int i = 0; i < s->replicas && i < TDM_MAX_REPLICAS; i++)
      json_builder_add_int_value(b, s->shard[i]);
    json_builder_end_array(b);
    tdm_json_set_int(b, "batch", s->batch);
    if (s->accumulate > 1)
      tdm_json_set_int(b, "accumulate", s->accumulate);
    tdm_json_set_int(b, "epochs", s->epochs);
    tdm_json_set_int(b, "steps_per_epoch", s->steps_per_epoch);
    tdm_json_set_int(b, "total_steps", s->total_steps);
    tdm_json_set_int(b, "start_step", s->start_step);
    tdm_json_set_int(b, "parameters", (gint64)s->parameters);
    tdm_json_set_string(b, "network", s->network);
    tdm_json_set_string(b, "dataset", s->dataset);
    tdm_json_set_int(b, "train_count", s->train_count);
    tdm_json_set_int(b, "test_count", s->test_count);
    json_builder_set_member_name(b, "sample");
    json_builder_begin_array(b);
    json_builder_add_int_value(b, s->height);
    json_builder_add_int_value(b, s->width);
    json_builder_add_int_value(b, s->channels);
    json_builder_end_array(b);
    if (s->batch_asked > 0)
      tdm_json_set_int(b, "batch_asked", s->batch_asked);
    if (s->notice[0] != '\0')
      tdm_json_set_string(b, "notice", s->notice);
    if (s->init_report[0] != '\0')
      tdm_json_set_string(b, "init", s->init_report);
    tdm_json_set_int(b, "prewarm_steps", s->prewarm_steps);
    tdm_json_set_double(b, "prewarm_seconds", s->prewarm_seconds);
    /* What the run computed in; "precision_asked" only where that was auto. */
    tdm_json_set_string(b, "precision", tdm_precision_name(s->precision));
    if (s->precision_auto) {
      tdm_json_set_string(b, "precision_asked", tdm_precision_name(TDM_PRECISION_AUTO));
      tdm_json_set_string(b, "precision_why", s->precision_why);
    }
    if (s->conv_cudnn_fused + s->conv_cudnn + s->conv_own + s->conv_im2col > 0) {
      json_builder_set_member_name(b, "conv_choices");
      json_builder_begin_object(b);
      tdm_json_set_int(b, "cudnn_fused", s->conv_cudnn_fused);
      tdm_json_set_int(b, "cudnn", s->conv_cudnn);
      tdm_json_set_int(b, "own", s->conv_own);
      tdm_json_set_int(b, "im2col", s->conv_im2col);
      json_builder_end_object(b);
    }
    break;
  }
  case TDM_EVENT_STEP: {
    const TdmStepEvent *s = &ev->step;
    tdm_json_set_string(b, "type", "step");
    tdm_json_set_int(b, "step", s->step);
    tdm_json_set_int(b, "epoch", s->epoch);
    tdm_json_set_double(b, "fraction", s->fraction);
    tdm_json_set_double(b, "epoch_float", s->epoch_float);
    tdm_json_set_double(b, "train_loss", s->train_loss);
    tdm_json_set_double(b, "train_accuracy", s->train_accuracy);
    tdm_json_set_double(b, "epoch_loss", s->epoch_loss);
    tdm_json_set_double(b, "epoch_accuracy", s->epoch_accuracy);
    tdm_json_set_double(b, "samples_per_second", s->samples_per_second);
    tdm_json_set_double(b, "lr", s->lr);
    tdm_json_set_double(b, "elapsed", s->elapsed);
    tdm_json_set_double(b, "eta", s->eta);
    if (isfinite(s->grad_norm))
      tdm_json_set_double(b, "grad_norm", s->grad_norm);
    break;
  }
  case TDM_EVENT_DEVICES: {
    const TdmDevicesEvent *d = &ev->devices;
    tdm_json_set_string(b, "type", "devices");
    tdm_json_set_int(b, "step", d->step);
    tdm_json_set_double(b, "elapsed", d->elapsed);
    tdm_json_set_int(b, "replicas", d->replicas);
    json_builder_set_member_name(b, "devices");
    json_builder_begin_array(b);
    for (int i = 0; i < d->replicas && i < TDM_MAX_REPLICAS; i++) {
      json_builder_begin_object(b);
      tdm_json_set_double(b, "compute_ms", d->device[i].compute_ms);
      tdm_json_set_double(b, "comm_ms", d->device[i].comm_ms);
      tdm_json_set_double(b, "wait_ms", d->device[i].wait_ms);
      tdm_json_set_int(b, "tandem_bytes", d->device[i].tandem_bytes);
      tdm_json_set_int(b, "peak_bytes", d->device[i].peak_bytes);
      json_known(b, "used_bytes", (double)d->device[i].used_bytes, TRUE);
      json_known(b, "total_bytes", (double)d->device[i].total_bytes, TRUE);
      json_known(b, "utilization", d->device[i].utilization, FALSE);
      json_known(b, "temperature", d->device[i].temperature, FALSE);
      json_known(b, "power", d->device[i].power, FALSE);
      tdm_json_set_int(b, "operations_per_step", d->device[i].operations_per_step);
      tdm_json_set_double(b, "host_operations", d->device[i].host_operations);
      tdm_json_set_double(b, "graph_operations", d->device[i].graph_operations);
      if (isfinite(d->device[i].issue_ms))
        tdm_json_set_double(b, "issue_ms", d->device[i].issue_ms);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    break;
  }
  case TDM_EVENT_EPOCH: {
    const TdmEpochEvent *e = &ev->epoch;
    tdm_json_set_string(b, "type", "epoch");
    tdm_json_set_int(b, "epoch", e->epoch);
    tdm_json_set_int(b, "step", e->step);
    tdm_json_set_double(b, "train_loss", e->train_loss);
    tdm_json_set_double(b, "train_accuracy", e->train_accuracy);
    tdm_json_set_double(b, "test_loss", e->test_loss);
    tdm_json_set_double(b, "test_accuracy", e->test_accuracy);
    tdm_json_set_double(b, "elapsed", e->elapsed);
    if (isfinite(e->val_accuracy)) {
      tdm_json_set_double(b, "val_loss", e->val_loss);
      tdm_json_set_double(b, "val_accuracy", e->val_accuracy);
    }
    break;
  }
  case TDM_EVENT_PAUSED:
    tdm_json_set_string(b, "type", "paused");
    break;
  case TDM_EVENT_RESUMED:
    tdm_json_set_string(b, "type", "resumed");
    break;
  case TDM_EVENT_FINISHED: {
    const TdmFinishedEvent *f = &ev->finished;
    tdm_json_set_string(b, "type", "finished");
    tdm_json_set_int(b, "steps", f->steps);
    tdm_json_set_double(b, "elapsed", f->elapsed);
    tdm_json_set_double(b, "test_loss", f->test_loss);
    tdm_json_set_double(b, "test_accuracy", f->test_accuracy);
    json_builder_set_member_name(b, "stopped");
    json_builder_add_boolean_value(b, f->stopped);
    json_builder_set_member_name(b, "early_stopped");
    json_builder_add_boolean_value(b, f->early_stopped);
    tdm_json_set_int(b, "epochs_done", f->epochs_done);
    if (f->best_epoch > 0) {
      tdm_json_set_int(b, "best_epoch", f->best_epoch);
      tdm_json_set_string(b, "monitor", tdm_monitor_name((TdmMonitor)f->monitor));
      tdm_json_set_double(b, "best_value", f->best_value);
      if (isfinite(f->best_accuracy)) {
        tdm_json_set_double(b, "best_val_loss", f->best_val_loss);
        tdm_json_set_double(b, "best_val_accuracy", f->best_accuracy);
      }
      tdm_json_set_double(b, "best_test_loss", f->best_test_loss);
      tdm_json_set_double(b, "best_test_accuracy", f->best_test_accuracy);
    }
    break;
  }
  case TDM_EVENT_PHASES:
  case TDM_EVENT_BATCH:
  case TDM_EVENT_PREDICTIONS:
    tdm_event_detail_to_json(b, ev);
    break;
  case TDM_EVENT_SAVED: {
    const TdmSavedEvent *v = &ev->saved;
    tdm_json_set_string(b, "type", "saved");
    g_autofree char *display = g_filename_display_name(v->path);
    tdm_json_set_string(b, "file", display);
    tdm_json_set_int(b, "step", v->step);
    tdm_json_set_int(b, "epoch", v->epoch);
    json_builder_set_member_name(b, "best");
    json_builder_add_boolean_value(b, v->best);
    if (v->best) {
      tdm_json_set_string(b, "monitor", tdm_monitor_name((TdmMonitor)v->monitor));
      tdm_json_set_double(b, "value", v->value);
    }
    break;
  }
  case TDM_EVENT_SETUP: {
    const TdmSetupEvent *u = &ev->setup;
    tdm_json_set_string(b, "type", "setup");
    tdm_json_set_string(b, "phase", tdm_setup_phase_name(u->phase));
    json_builder_set_member_name(b, "done");
    json_builder_add_boolean_value(b, u->done);
    if (u->total > 0) {
      tdm_json_set_int(b, "count", u->count);
      tdm_json_set_int(b, "total", u->total);
    }
    tdm_json_set_double(b, "seconds", u->seconds);
    break;
  }
  case TDM_EVENT_FAILED:
    tdm_json_set_string(b, "type", "failed");
    tdm_json_set_string(b, "error", ev->failed ? error_code_name(ev->failed) : "other");
    tdm_json_set_string(b, "message", ev->failed ? ev->failed->message : "unknown error");
    break;
  }
  json_builder_end_object(b);

  return json_builder_get_root(b);
}

char *
tdm_event_to_json_line(const TdmEvent *ev)
{
  g_autoptr(JsonNode) root = tdm_event_to_json(ev);
  return root != NULL ? tdm_json_to_string(root) : NULL;
}
