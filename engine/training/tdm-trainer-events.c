/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-trainer-events.c — the events a run sends that follow from the trainer's state
 * alone: the start (what runs where), the set-up and evaluation phases, a sampled
 * step's phases and batch split, and the test set's predictions after an evaluation.
 * Where and when they are sent is the loop's (tdm-trainer.c); the step summaries and
 * device figures, made from the loop's running figures, stay there.
 */
#include "tdm-trainer-private.h"
#include "tdm-distributed.h"
#include "tdm-iterator.h"

#include <string.h>

void
tdm_trainer_emit(TdmTrainer *t, const TdmEvent *event)
{
  if (t->sink != NULL && t->main_local >= 0)
    t->sink(event, t->sink_data);
}

void
tdm_trainer_emit_phase(TdmTrainer *t, TdmSetupPhase phase, gboolean done, long count,
                       long total, double seconds)
{
  /* Before the replicas exist main_local is not known yet: under mpirun only the
   * main device's rank speaks, as it does later. */
  if (tdm_distributed_active() && tdm_distributed_rank() != t->config->main_replica)
    return;
  TdmEvent e = {.kind = TDM_EVENT_SETUP};
  e.setup.phase = phase;
  e.setup.done = done;
  e.setup.count = count;
  e.setup.total = total;
  e.setup.seconds = seconds;
  tdm_trainer_emit(t, &e);
}

void
tdm_trainer_emit_setup(TdmTrainer *t, TdmSetupPhase phase, gboolean done, long count,
                       long total, double since)
{
  tdm_trainer_emit_phase(t, phase, done, count, total, tdm_trainer_now_seconds() - since);
}

/* Text into a fixed field of the events, cut where it must at a whole character: a
 * class or dataset named in a script of many-byte characters would otherwise end
 * inside one, which the window's text and JSON readers refuse. */
static void
copy_text(char *out, size_t size, const char *text)
{
  const char *end;
  if (g_strlcpy(out, text, size) >= size && !g_utf8_validate(out, -1, &end))
    out[end - out] = '\0';
}

/* A long network spec cut after its last whole item that fits, with "…" after it. */
static void
copy_spec(char *out, size_t size, const char *spec)
{
  static const char ellipsis[] = "\u2026";
  if (strlen(spec) < size) {
    g_strlcpy(out, spec, size);
    return;
  }
  size_t room = size - sizeof ellipsis;
  size_t cut = room;
  while (cut > 0 && spec[cut] != ',')
    cut--;
  if (cut == 0)
    cut = room;
  memcpy(out, spec, cut);
  memcpy(out + cut, ellipsis, sizeof ellipsis);
}

void
tdm_trainer_emit_started(TdmTrainer *t)
{
  const TdmConfig *cfg = t->config;
  TdmEvent e = {.kind = TDM_EVENT_STARTED};
  TdmStartedEvent *s = &e.started;
  tdm_started_event_set_devices(s, cfg->devices, t->world);
  s->main_replica = cfg->main_replica;
  for (int r = 0; r < t->world && r < TDM_MAX_REPLICAS; r++) {
    int offset;
    tdm_trainer_shard(t, cfg->batch, r, &offset, &s->shard[r]);
  }
  s->batch = cfg->batch;
  s->accumulate = cfg->accumulate;
  s->cpu_threads = t->cpu_threads;
  s->epochs = cfg->epochs;
  s->steps_per_epoch = tdm_iterator_batches_per_epoch(t->it);
  s->total_steps = (long)s->steps_per_epoch * cfg->epochs;
  s->end_step = cfg->max_steps > 0 ? MIN(cfg->max_steps, s->total_steps) : s->total_steps;
  s->start_step = t->step;
  s->parameters = t->net->parameter_count;
  copy_spec(s->network, sizeof s->network, t->net->spec);
  s->height = t->data->train->height;
  s->width = t->data->train->width;
  s->channels = t->data->train->channels;
  s->batch_asked = t->batch_asked;
  copy_text(s->dataset, sizeof s->dataset, t->data->name);
  s->train_count = t->data->train->count;
  s->test_count = t->data->test->count;
  copy_text(s->notice, sizeof s->notice, t->data->notice != NULL ? t->data->notice : "");
  copy_text(s->init_report, sizeof s->init_report,
            t->init_report != NULL ? t->init_report : "");
  s->prewarm_steps = t->prewarm_steps;
  s->prewarm_seconds = t->prewarm_seconds;
  s->precision = t->precision.precision;
  s->precision_auto = t->precision.asked == TDM_PRECISION_AUTO;
  g_autofree char *why = tdm_precision_choice_reason(&t->precision);
  copy_text(s->precision_why, sizeof s->precision_why, why != NULL ? why : "");
  for (int r = 0; r < t->replicas; r++) {
    TdmBackend *b = t->backends[r];
    TdmConvChoices c;
    tdm_backend_conv_choices(b, &c);
    s->conv_cudnn += c.cudnn;
    s->conv_own += c.own;
    s->conv_im2col += c.im2col;
    s->conv_cudnn_fused += c.cudnn_fused;
  }
  if (s->conv_cudnn_fused + s->conv_cudnn + s->conv_own + s->conv_im2col > 0)
    g_info("conv choices: %d cudnn-fused, %d cudnn, %d own, %d im2col", s->conv_cudnn_fused,
           s->conv_cudnn, s->conv_own, s->conv_im2col);
  tdm_trainer_emit(t, &e);
}

/* The sampled step just run: each local replica's phases, then how its batch split. */
void
tdm_trainer_emit_step_detail(TdmTrainer *t)
{
  TdmEvent e = {.kind = TDM_EVENT_PHASES};
  TdmPhasesEvent *p = &e.phases;
  p->step = t->step;
  p->replicas = MIN(t->replicas, TDM_MAX_REPLICAS);
  for (int r = 0; r < p->replicas; r++) {
    p->device[r] = t->timing[r].phases;
    tdm_communicator_take_bytes(t->comm, r, &p->device[r].bytes_sent,
                                &p->device[r].bytes_received);
  }
  tdm_trainer_emit(t, &e);

  memset(&e, 0, sizeof e);
  e.kind = TDM_EVENT_BATCH;
  TdmBatchEvent *bt = &e.batch;
  const TdmDataset *train = t->data->train;
  bt->step = t->step;
  /* With --accumulate, the step's first micro-batch: the split each one has. */
  bt->batch = t->grad_acc != NULL ? MIN(t->job.count, t->config->batch) : t->job.count;
  bt->replicas = MIN(t->world, TDM_MAX_REPLICAS);
  for (int r = 0; r < bt->replicas; r++) {
    tdm_trainer_shard(t, bt->batch, r, &bt->device[r].offset, &bt->device[r].size);
    bt->device[r].shown = MIN(bt->device[r].size, TDM_BATCH_SAMPLES_SHOWN);
    for (int i = 0; i < bt->device[r].shown; i++) {
      int32_t index = t->job.indices[bt->device[r].offset + i];
      bt->device[r].index[i] = index;
      bt->device[r].label[i] = train->labels[index];
    }
  }
  tdm_trainer_emit(t, &e);
}

/* After an evaluation: the confusion matrix and the sample list from t->predicted. */
void
tdm_trainer_emit_predictions(TdmTrainer *t, int epoch)
{
  if (t->predicted == NULL)
    return;
  const TdmDataset *test = t->data->test;
  TdmEvent *e = g_new0(TdmEvent, 1);
  e->kind = TDM_EVENT_PREDICTIONS;
  TdmPredictionsEvent *p = &e->predictions;
  p->epoch = epoch;
  p->step = t->step;
  p->classes = test->classes;
  p->has_matrix = test->classes <= TDM_MAX_CONFUSION_CLASSES;
  p->test_count = test->count;
  for (int c = 0; c < MIN(test->classes, TDM_MAX_CONFUSION_CLASSES); c++)
    if (test->class_names != NULL && test->class_names[c] != NULL)
      copy_text(p->class_name[c], TDM_CLASS_NAME_SIZE, test->class_names[c]);
  for (int i = 0; i < test->count; i++) {
    int truth = test->labels[i], predicted = t->predicted[i];
    if (truth == predicted)
      p->correct++;
    if (p->has_matrix)
      p->matrix[truth][predicted]++;
  }
  /* Mistakes first, then right answers, each in test-set order. */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < test->count && p->samples < TDM_PREDICTION_SAMPLES; i++) {
      gboolean right = test->labels[i] == t->predicted[i];
      if (right != (pass == 1))
        continue;
      p->sample[p->samples].index = i;
      p->sample[p->samples].truth = test->labels[i];
      p->sample[p->samples].predicted = (uint8_t)t->predicted[i];
      p->samples++;
    }
  tdm_trainer_emit(t, e);
  g_free(e);
}
