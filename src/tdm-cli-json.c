/* tdm-cli-json.c — tandem-train --json: each engine event as one JSON line on
 * stdout (see tdm-cli-json.h). Not the human-readable output (tandem-train.c). */
#include "tdm-cli-json.h"
#include "tdm-error.h"
#include "tdm-json.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>

/* Non-finite numbers (a diverged loss) become null: JSON has no NaN. */

static void
json_double(JsonBuilder *b, const char *name, double v)
{
  json_builder_set_member_name(b, name);
  if (isfinite(v))
    json_builder_add_double_value(b, v);
  else
    json_builder_add_null_value(b);
}

static void
json_int(JsonBuilder *b, const char *name, gint64 v)
{
  json_builder_set_member_name(b, name);
  json_builder_add_int_value(b, v);
}

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

static void
json_string(JsonBuilder *b, const char *name, const char *v)
{
  json_builder_set_member_name(b, name);
  json_builder_add_string_value(b, v);
}

static const char *
error_code_name(const GError *e)
{
  static const char *const names[] = {
    "invalid-option", "invalid-spec", "dataset", "device", "out-of-memory", "backend",
    "communication", "checkpoint", "diverged", "cancelled", "history",
  };
  if (e->domain == TDM_ENGINE_ERROR && e->code >= 0 && e->code < (int)G_N_ELEMENTS(names))
    return names[e->code];
  return "other";
}


void
tdm_cli_print_json_event(const TdmEvent *ev)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  switch (ev->kind) {
  case TDM_EVENT_MEMORY: {
    const TdmMemoryEvent *m = &ev->memory;
    json_string(b, "type", "memory");
    json_int(b, "batch", m->batch);
    json_int(b, "capacity", m->capacity);
    json_builder_set_member_name(b, "devices");
    json_builder_begin_array(b);
    for (int i = 0; i < m->replicas && i < TDM_MAX_REPLICAS; i++) {
      const TdmMemoryDevice *d = &m->device[i];
      json_builder_begin_object(b);
      json_string(b, "device", d->device);
      json_int(b, "shard", d->shard);
      json_builder_set_member_name(b, "host");
      json_builder_add_boolean_value(b, d->host);
      json_int(b, "parameters", (gint64)d->parameters);
      json_int(b, "gradients", (gint64)d->gradients);
      json_int(b, "optimizer", (gint64)d->optimizer);
      json_int(b, "activations", (gint64)d->activations);
      json_int(b, "workspace", (gint64)d->workspace);
      json_int(b, "dataset", (gint64)d->dataset);
      json_int(b, "communication", (gint64)d->communication);
      json_int(b, "total", (gint64)d->total);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_int(b, "host_dataset", (gint64)m->host_dataset);
    json_int(b, "host_copies", (gint64)m->host_copies);
    json_int(b, "host_devices", (gint64)m->host_devices);
    json_int(b, "host_total", (gint64)m->host_total);
    json_int(b, "gpu_total", (gint64)m->gpu_total);
    json_known(b, "host_available",
               m->host_available == G_MAXUINT64 ? -1 : (double)m->host_available, TRUE);
    json_known(b, "largest_batch", m->largest_batch, TRUE);
    break;
  }
  case TDM_EVENT_STARTED: {
    const TdmStartedEvent *s = &ev->started;
    json_string(b, "type", "started");
    json_int(b, "replicas", s->replicas);
    json_int(b, "main_replica", s->main_replica);
    json_builder_set_member_name(b, "devices");
    json_builder_begin_array(b);
    for (int i = 0; i < s->replicas && i < TDM_MAX_REPLICAS; i++)
      json_builder_add_string_value(b, s->device[i]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "shards");
    json_builder_begin_array(b);
    for (int i = 0; i < s->replicas && i < TDM_MAX_REPLICAS; i++)
      json_builder_add_int_value(b, s->shard[i]);
    json_builder_end_array(b);
    json_int(b, "batch", s->batch);
    json_int(b, "epochs", s->epochs);
    json_int(b, "steps_per_epoch", s->steps_per_epoch);
    json_int(b, "total_steps", s->total_steps);
    json_int(b, "start_step", s->start_step);
    json_int(b, "parameters", (gint64)s->parameters);
    json_string(b, "network", s->network);
    json_string(b, "dataset", s->dataset);
    json_int(b, "train_count", s->train_count);
    json_int(b, "test_count", s->test_count);
    if (s->notice[0] != '\0')
      json_string(b, "notice", s->notice);
    break;
  }
  case TDM_EVENT_STEP: {
    const TdmStepEvent *s = &ev->step;
    json_string(b, "type", "step");
    json_int(b, "step", s->step);
    json_int(b, "epoch", s->epoch);
    json_double(b, "fraction", s->fraction);
    json_double(b, "epoch_float", s->epoch_float);
    json_double(b, "train_loss", s->train_loss);
    json_double(b, "train_accuracy", s->train_accuracy);
    json_double(b, "samples_per_second", s->samples_per_second);
    json_double(b, "lr", s->lr);
    json_double(b, "elapsed", s->elapsed);
    json_double(b, "eta", s->eta);
    break;
  }
  case TDM_EVENT_DEVICES: {
    const TdmDevicesEvent *d = &ev->devices;
    json_string(b, "type", "devices");
    json_int(b, "step", d->step);
    json_double(b, "elapsed", d->elapsed);
    json_int(b, "replicas", d->replicas);
    json_builder_set_member_name(b, "devices");
    json_builder_begin_array(b);
    for (int i = 0; i < d->replicas && i < TDM_MAX_REPLICAS; i++) {
      json_builder_begin_object(b);
      json_double(b, "compute_ms", d->device[i].compute_ms);
      json_double(b, "comm_ms", d->device[i].comm_ms);
      json_double(b, "wait_ms", d->device[i].wait_ms);
      json_int(b, "tandem_bytes", d->device[i].tandem_bytes);
      json_known(b, "used_bytes", (double)d->device[i].used_bytes, TRUE);
      json_known(b, "total_bytes", (double)d->device[i].total_bytes, TRUE);
      json_known(b, "utilization", d->device[i].utilization, FALSE);
      json_known(b, "temperature", d->device[i].temperature, FALSE);
      json_known(b, "power", d->device[i].power, FALSE);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    break;
  }
  case TDM_EVENT_EPOCH: {
    const TdmEpochEvent *e = &ev->epoch;
    json_string(b, "type", "epoch");
    json_int(b, "epoch", e->epoch);
    json_int(b, "step", e->step);
    json_double(b, "train_loss", e->train_loss);
    json_double(b, "train_accuracy", e->train_accuracy);
    json_double(b, "test_loss", e->test_loss);
    json_double(b, "test_accuracy", e->test_accuracy);
    json_double(b, "elapsed", e->elapsed);
    break;
  }
  case TDM_EVENT_PAUSED:
    json_string(b, "type", "paused");
    break;
  case TDM_EVENT_RESUMED:
    json_string(b, "type", "resumed");
    break;
  case TDM_EVENT_FINISHED: {
    const TdmFinishedEvent *f = &ev->finished;
    json_string(b, "type", "finished");
    json_int(b, "steps", f->steps);
    json_double(b, "elapsed", f->elapsed);
    json_double(b, "test_loss", f->test_loss);
    json_double(b, "test_accuracy", f->test_accuracy);
    json_builder_set_member_name(b, "stopped");
    json_builder_add_boolean_value(b, f->stopped);
    break;
  }
  case TDM_EVENT_PHASES:
  case TDM_EVENT_BATCH:
  case TDM_EVENT_PREDICTIONS:
    tdm_event_detail_to_json(b, ev);
    break;
  case TDM_EVENT_FAILED:
    json_string(b, "type", "failed");
    json_string(b, "error", ev->failed ? error_code_name(ev->failed) : "other");
    json_string(b, "message", ev->failed ? ev->failed->message : "unknown error");
    break;
  }
  json_builder_end_object(b);

  g_autoptr(JsonNode) root = json_builder_get_root(b);
  g_autofree char *line = tdm_json_to_string(root);
  /* One write per line, flushed, so a reader piped to us sees whole lines live. */
  printf("%s\n", line);
  fflush(stdout);
}
