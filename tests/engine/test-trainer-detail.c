/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-trainer-detail.c — what the trainer tells about a step's inside, on CPU
 * workers: each device's phases under both strategies, how a batch splits, the test
 * set's predictions; and the pace control (a step limit and single steps), counted
 * against an injected clock. Timing values are never compared with wall-clock time:
 * only their order and presence. */
#include "synthetic-idx.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-communicator.h"
#include "tdm-trainer.h"
#include "ticking-clock.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

typedef struct {
  GArray *phases;               /* TdmPhasesEvent */
  GArray *batches;              /* TdmBatchEvent */
  GArray *predictions;          /* TdmPredictionsEvent */
  TdmStartedEvent started;
  TdmEpochEvent epoch;
  TdmFinishedEvent finished;
  size_t parameters;
  int steps_run, paused;
  long summaries[8];
  int n_summaries;
  TdmTrainer *trainer;
  GCancellable *cancel_at_rest; /* cancelled at the `rest_limit`-th PAUSED event */
  int rest_limit;
} Detail;

static void
detail_init(Detail *d)
{
  memset(d, 0, sizeof *d);
  d->phases = g_array_new(FALSE, FALSE, sizeof(TdmPhasesEvent));
  d->batches = g_array_new(FALSE, FALSE, sizeof(TdmBatchEvent));
  d->predictions = g_array_new(FALSE, FALSE, sizeof(TdmPredictionsEvent));
}

static void
detail_clear(Detail *d)
{
  g_array_unref(d->phases);
  g_array_unref(d->batches);
  g_array_unref(d->predictions);
}

static void
record(const TdmEvent *e, gpointer data)
{
  Detail *d = data;
  switch (e->kind) {
  case TDM_EVENT_PHASES:
    g_array_append_val(d->phases, e->phases);
    break;
  case TDM_EVENT_BATCH:
    g_array_append_val(d->batches, e->batch);
    d->steps_run = (int)e->batch.step;
    break;
  case TDM_EVENT_PREDICTIONS:
    g_array_append_val(d->predictions, e->predictions);
    break;
  case TDM_EVENT_STEP:
    if (d->n_summaries < (int)G_N_ELEMENTS(d->summaries))
      d->summaries[d->n_summaries++] = e->step.step;
    break;
  case TDM_EVENT_EPOCH:
    d->epoch = e->epoch;
    break;
  case TDM_EVENT_STARTED:
    d->parameters = e->started.parameters;
    d->started = e->started;
    break;
  case TDM_EVENT_FINISHED:
    d->finished = e->finished;
    break;
  case TDM_EVENT_PAUSED:
    d->paused++;
    /* Each rest lets one more step through, until the last rest stops the run. */
    if (d->cancel_at_rest != NULL && d->paused == d->rest_limit)
      g_cancellable_cancel(d->cancel_at_rest);
    else if (d->cancel_at_rest != NULL)
      tdm_trainer_single_step(d->trainer);
    break;
  default:
    break;
  }
}

/* The runs' dataset folder: the synthetic set's images, 2,000 to train on and 500 to
 * test, as IDX files; "synthetic" by name would generate 70,000 in every run. */
static char *dataset;

static TdmConfig *
config(const char *devices, TdmStrategy strategy, long max_steps)
{
  TdmConfig *cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(dataset);
  g_free(cfg->network);
  cfg->network = g_strdup("fc16,relu,fc10");
  cfg->epochs = 1;
  cfg->max_steps = max_steps;
  cfg->strategy = strategy;
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_config_set_devices(cfg, devices, &error));
  return cfg;
}

static void
run(const TdmConfig *cfg, Detail *d)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, record, d);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
}

/* Index of the first span of `phase` on a device, or −1. */
static int
find_phase(const TdmDevicePhases *p, TdmPhase phase, int from)
{
  for (int i = from; i < p->spans; i++)
    if (p->span[i].phase == (int)phase)
      return i;
  return -1;
}

static void
check_spans_ordered(const TdmDevicePhases *p)
{
  g_assert_cmpint(p->spans, >, 0);
  for (int i = 0; i < p->spans; i++) {
    g_assert_cmpfloat(p->span[i].start_ms, <=, p->span[i].end_ms);
    if (i > 0)
      g_assert_cmpfloat(p->span[i - 1].end_ms, <=, p->span[i].start_ms);
  }
}

static void
test_phases_allreduce(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2", TDM_STRATEGY_ALLREDUCE, 6);
  Detail d;
  detail_init(&d);
  run(cfg, &d);
  /* The first step is always sampled. */
  g_assert_cmpuint(d.phases->len, >=, 1);
  for (guint i = 0; i < d.phases->len; i++) {
    const TdmPhasesEvent *e = &g_array_index(d.phases, TdmPhasesEvent, i);
    g_assert_cmpint(e->replicas, ==, 2);
    for (int r = 0; r < 2; r++) {
      const TdmDevicePhases *p = &e->device[r];
      check_spans_ordered(p);
      /* The gradients are one bucket, all-reduced on the lanes once backward is
       * done: what is left of it after backward is the only communication. */
      g_assert_cmpint(find_phase(p, TDM_PHASE_FORWARD, 0), ==, 0);
      g_assert_cmpint(find_phase(p, TDM_PHASE_BACKWARD, 0), ==, 1);
      g_assert_cmpint(find_phase(p, TDM_PHASE_ALLREDUCE, 0), ==, 2);
      g_assert_cmpint(find_phase(p, TDM_PHASE_UPDATE, 0), ==, 3);
      g_assert_cmpint(find_phase(p, TDM_PHASE_REDUCE, 0), ==, -1);
      g_assert_cmpint(find_phase(p, TDM_PHASE_BROADCAST, 0), ==, -1);
      /* The last bucket starts after backward: it hides nothing (the share is 0, or
       * no figure where its wait was too short to measure). */
      g_assert_cmpfloat(p->hidden_ms, ==, 0);
      g_assert_false(tdm_device_phases_overlap(p) > 0);
    }
  }
  detail_clear(&d);
}

static float *
run_parameters(const TdmConfig *cfg, Detail *d, size_t *count)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, record, d);
  gint ticks = 0;
  tdm_trainer_set_span_clock(trainer, test_ticking_clock, &ticks);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  const float *params = tdm_trainer_get_parameters(trainer, count);
  return g_memdup2(params, *count * sizeof(float));
}

/* CPU workers all-reduce gradient buckets on their communication threads while
 * backward goes on: with buckets of a layer's head, every sampled step shows time
 * hidden under backward on every device, and the parameters come out with the same
 * bits as in one bucket or with `main` (sums in replica order, cut anywhere). */
static void
test_overlap_cpu_workers(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2", TDM_STRATEGY_ALLREDUCE, 6);
  g_free(cfg->network);
  /* Backward reaches fc256's large weight gradient after both smaller buckets. */
  cfg->network = g_strdup("fc256,relu,fc64,relu,fc10");
  cfg->bucket_bytes = 1024;
  Detail d;
  detail_init(&d);
  size_t n_bucketed = 0, n_whole = 0;
  g_autofree float *bucketed = run_parameters(cfg, &d, &n_bucketed);
  g_assert_cmpuint(d.phases->len, >=, 1);
  for (guint i = 0; i < d.phases->len; i++) {
    const TdmPhasesEvent *e = &g_array_index(d.phases, TdmPhasesEvent, i);
    for (int r = 0; r < 2; r++) {
      const TdmDevicePhases *p = &e->device[r];
      check_spans_ordered(p);
      int bwd = find_phase(p, TDM_PHASE_BACKWARD, 0);
      g_assert_cmpint(bwd, ==, 1);
      g_assert_cmpfloat(p->hidden_ms, >, 0);
      g_assert_cmpfloat(p->hidden_ms, <=, p->span[bwd].end_ms - p->span[bwd].start_ms);
      g_assert_cmpfloat(tdm_device_phases_overlap(p), >, 0);
    }
  }
  detail_clear(&d);

  /* One bucket, started once backward is done. */
  cfg->bucket_bytes = (size_t)1 << 30;
  detail_init(&d);
  g_autofree float *whole = run_parameters(cfg, &d, &n_whole);
  for (guint i = 0; i < d.phases->len; i++)
    for (int r = 0; r < 2; r++)
      g_assert_cmpfloat(g_array_index(d.phases, TdmPhasesEvent, i).device[r].hidden_ms, ==, 0);
  detail_clear(&d);
  g_assert_cmpuint(n_bucketed, ==, n_whole);
  g_assert_cmpmem(bucketed, n_bucketed * sizeof(float), whole, n_whole * sizeof(float));

  /* And as `main` computes them, on the replicas' own threads without lanes. */
  cfg->strategy = TDM_STRATEGY_MAIN;
  detail_init(&d);
  size_t n_main = 0;
  g_autofree float *on_main = run_parameters(cfg, &d, &n_main);
  detail_clear(&d);
  g_assert_cmpmem(bucketed, n_bucketed * sizeof(float), on_main, n_main * sizeof(float));
}

/* The overlap rule: hidden over hidden plus exposed; nothing moved, no figure. */
static void
test_overlap_rule(void)
{
  g_assert_cmpfloat(tdm_overlap_percent(30, 10), ==, 25);
  g_assert_cmpfloat(tdm_overlap_percent(0, 10), ==, 100);
  g_assert_cmpfloat(tdm_overlap_percent(10, 0), ==, 0);
  g_assert_true(isnan(tdm_overlap_percent(0, 0)));

  TdmDevicePhases d = {0};
  g_assert_true(isnan(tdm_device_phases_overlap(&d)));
  d.spans = 3;
  d.span[0].phase = TDM_PHASE_BACKWARD, d.span[0].start_ms = 0, d.span[0].end_ms = 8;
  d.span[1].phase = TDM_PHASE_ALLREDUCE, d.span[1].start_ms = 8, d.span[1].end_ms = 9;
  d.span[2].phase = TDM_PHASE_UPDATE, d.span[2].start_ms = 9, d.span[2].end_ms = 12;
  d.hidden_ms = 3;
  g_assert_cmpfloat(tdm_device_phases_overlap(&d), ==, 75);

  /* --json carries it per device, beside the spans. */
  TdmEvent e = {.kind = TDM_EVENT_PHASES};
  e.phases.step = 4;
  e.phases.replicas = 1;
  e.phases.device[0] = d;
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  g_assert_true(tdm_event_detail_to_json(b, &e));
  json_builder_end_object(b);
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  g_autofree char *text = json_to_string(root, FALSE);
  g_assert_nonnull(strstr(text, "\"overlap\":[{\"hidden_ms\":3.0,\"percent\":75.0}]"));
}

/* With `main`: reduce, the update on the main device alone, then the broadcast. The
 * other device waits through the update: its broadcast cannot start before the main
 * device's update ended. */
static void
test_phases_main(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2", TDM_STRATEGY_MAIN, 6);
  cfg->main_replica = 1;
  Detail d;
  detail_init(&d);
  run(cfg, &d);
  g_assert_cmpuint(d.phases->len, >=, 1);
  for (guint i = 0; i < d.phases->len; i++) {
    const TdmPhasesEvent *e = &g_array_index(d.phases, TdmPhasesEvent, i);
    const TdmDevicePhases *primary = &e->device[1], *other = &e->device[0];
    check_spans_ordered(primary);
    check_spans_ordered(other);
    int reduce = find_phase(primary, TDM_PHASE_REDUCE, 0);
    int update = find_phase(primary, TDM_PHASE_UPDATE, 0);
    int broadcast = find_phase(primary, TDM_PHASE_BROADCAST, 0);
    g_assert_cmpint(reduce, >=, 0);
    g_assert_cmpint(update, >, reduce);
    g_assert_cmpint(broadcast, >, update);
    g_assert_cmpint(find_phase(primary, TDM_PHASE_ALLREDUCE, 0), ==, -1);

    g_assert_cmpint(find_phase(other, TDM_PHASE_UPDATE, 0), ==, -1);
    int other_reduce = find_phase(other, TDM_PHASE_REDUCE, 0);
    int other_broadcast = find_phase(other, TDM_PHASE_BROADCAST, 0);
    g_assert_cmpint(other_reduce, >=, 0);
    g_assert_cmpint(other_broadcast, >, other_reduce);
    /* Between them the other device waits (for the main device's update). */
    int other_wait = find_phase(other, TDM_PHASE_WAIT, other_reduce);
    g_assert_cmpint(other_wait, >, other_reduce);
    g_assert_cmpint(other_wait, <, other_broadcast);
    g_assert_cmpfloat(other->span[other_broadcast].start_ms, >=,
                      primary->span[update].end_ms - 0.001f);
  }
  detail_clear(&d);
}

/* Shards are contiguous and near-equal, and the samples shown are the batch's own. */
/* Bytes moved per device per sampled step, on three CPU workers (the host
 * communicator): all-reduce moves 2(N−1)/N of the gradient through every device; `main`
 * is a star around the main device, which takes in N−1 gradients and gives out N−1
 * copies of the parameters while every other device sends one and receives one. */
static void
test_bytes_moved(void)
{
  for (int strategy = 0; strategy < 2; strategy++) {
    Detail d;
    detail_init(&d);
    g_autoptr(TdmConfig) cfg =
      config("cpu,cpu,cpu", strategy ? TDM_STRATEGY_MAIN : TDM_STRATEGY_ALLREDUCE, 12);
    cfg->batch = 60;
    run(cfg, &d);
    g_assert_cmpuint(d.phases->len, >, 0);
    g_assert_cmpuint(d.parameters, >, 0);
    guint64 gradient = d.parameters * sizeof(float);
    for (guint i = 0; i < d.phases->len; i++) {
      const TdmPhasesEvent *p = &g_array_index(d.phases, TdmPhasesEvent, i);
      g_assert_cmpint(p->replicas, ==, 3);
      for (int r = 0; r < 3; r++) {
        const TdmDevicePhases *dev = &p->device[r];
        if (strategy == 0) {
          g_assert_cmpuint(dev->bytes_sent, ==, 2 * 2 * gradient / 3);
          g_assert_cmpuint(dev->bytes_received, ==, 2 * 2 * gradient / 3);
        } else if (r == cfg->main_replica) {
          g_assert_cmpuint(dev->bytes_received, ==, 2 * gradient);
          g_assert_cmpuint(dev->bytes_sent, ==, 2 * gradient);
        } else {
          g_assert_cmpuint(dev->bytes_received, ==, gradient);
          g_assert_cmpuint(dev->bytes_sent, ==, gradient);
        }
      }
    }
    detail_clear(&d);
  }
}

/* The same counts as they come out of the communicator itself, for a kind that
 * chains reduce and broadcast through every device (NCCL, MPI): a fake with no data
 * to move, since only the bookkeeping is under test. */
static gboolean
fake_allreduce(TdmCommunicator *c, int replica, float *buffer, size_t offset, size_t count,
               GError **error)
{
  return TRUE;
}

static gboolean
fake_rooted(TdmCommunicator *c, int replica, float *buffer, size_t count, int root,
            GError **error)
{
  return TRUE;
}

static void
test_bytes_chain(void)
{
  static const TdmCommunicatorOps ops = {.allreduce = fake_allreduce,
                                         .reduce = fake_rooted,
                                         .broadcast = fake_rooted};
  guint64 sent[4] = {0}, received[4] = {0};
  TdmCommunicator c = {.ops = &ops, .kind = "nccl", .replicas = 4, .world_size = 4,
                       .bytes_sent = sent, .bytes_received = received};
  /* Reduce to device 1: the chain runs 2 → 3 → 0 → 1. */
  for (int r = 0; r < 4; r++)
    g_assert_true(tdm_communicator_reduce(&c, r, NULL, 100, 1, NULL));
  guint64 s[4], v[4];
  for (int r = 0; r < 4; r++)
    tdm_communicator_take_bytes(&c, r, &s[r], &v[r]);
  g_assert_cmpuint(s[2], ==, 400);
  g_assert_cmpuint(v[2], ==, 0);
  g_assert_cmpuint(s[1], ==, 0);
  g_assert_cmpuint(v[1], ==, 400);
  g_assert_cmpuint(s[0], ==, 400);
  g_assert_cmpuint(v[0], ==, 400);
  /* Broadcast from device 1: 1 → 2 → 3 → 0. */
  for (int r = 0; r < 4; r++)
    g_assert_true(tdm_communicator_broadcast(&c, r, NULL, 100, 1, NULL));
  for (int r = 0; r < 4; r++)
    tdm_communicator_take_bytes(&c, r, &s[r], &v[r]);
  g_assert_cmpuint(s[1], ==, 400);
  g_assert_cmpuint(v[1], ==, 0);
  g_assert_cmpuint(s[0], ==, 0);
  g_assert_cmpuint(v[0], ==, 400);
  g_assert_cmpuint(s[3], ==, 400);
  g_assert_cmpuint(v[3], ==, 400);
  /* Taking clears; one replica (no communicator) moved nothing. */
  tdm_communicator_take_bytes(&c, 0, &s[0], &v[0]);
  g_assert_cmpuint(s[0] + v[0], ==, 0);
  tdm_communicator_take_bytes(NULL, 0, &s[0], &v[0]);
  g_assert_cmpuint(s[0] + v[0], ==, 0);
}

static void
test_batch_split(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:3", TDM_STRATEGY_ALLREDUCE, 4);
  cfg->batch = 100;
  Detail d;
  detail_init(&d);
  run(cfg, &d);
  g_autoptr(TdmDatasetPair) data = tdm_dataset_open(dataset, NULL);
  g_assert_cmpuint(d.batches->len, >=, 1);
  const TdmBatchEvent *b = &g_array_index(d.batches, TdmBatchEvent, 0);
  g_assert_cmpint(b->step, ==, 1);
  g_assert_cmpint(b->batch, ==, 100);
  g_assert_cmpint(b->replicas, ==, 3);
  int next = 0;
  for (int r = 0; r < 3; r++) {
    g_assert_cmpint(b->device[r].offset, ==, next);
    g_assert_cmpint(b->device[r].size, >=, 33);
    g_assert_cmpint(b->device[r].size, <=, 34);
    next += b->device[r].size;
    g_assert_cmpint(b->device[r].shown, ==, TDM_BATCH_SAMPLES_SHOWN);
    for (int i = 0; i < b->device[r].shown; i++) {
      int32_t index = b->device[r].index[i];
      g_assert_cmpint(index, >=, 0);
      g_assert_cmpint(index, <, data->train->count);
      g_assert_cmpint(b->device[r].label[i], ==, data->train->labels[index]);
    }
  }
  g_assert_cmpint(next, ==, 100);
  detail_clear(&d);
}

/* One epoch: the matrix sums to the test set and its diagonal is the accuracy. */
static void
test_predictions(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2", TDM_STRATEGY_ALLREDUCE, 0);
  Detail d;
  detail_init(&d);
  run(cfg, &d);
  g_assert_cmpuint(d.predictions->len, ==, 1);
  const TdmPredictionsEvent *p = &g_array_index(d.predictions, TdmPredictionsEvent, 0);
  g_assert_cmpint(p->epoch, ==, 1);
  g_assert_cmpint(p->classes, ==, 10);
  g_assert_true(p->has_matrix);
  g_assert_cmpint(p->test_count, ==, 500);
  long sum = 0, diagonal = 0;
  for (int i = 0; i < p->classes; i++)
    for (int j = 0; j < p->classes; j++) {
      sum += p->matrix[i][j];
      if (i == j)
        diagonal += p->matrix[i][j];
    }
  g_assert_cmpint(sum, ==, p->test_count);
  g_assert_cmpint(diagonal, ==, p->correct);
  g_assert_cmpint(p->correct, ==, (int)lround(d.epoch.test_accuracy * p->test_count));
  g_assert_cmpstr(p->class_name[0], !=, "");

  /* Mistakes first, each sample's truth as the dataset has it. */
  g_autoptr(TdmDatasetPair) data = tdm_dataset_open(dataset, NULL);
  int mistakes = p->test_count - p->correct;
  g_assert_cmpint(p->samples, ==, TDM_PREDICTION_SAMPLES);
  for (int i = 0; i < p->samples; i++) {
    g_assert_cmpint(p->sample[i].truth, ==, data->test->labels[p->sample[i].index]);
    gboolean wrong = p->sample[i].truth != p->sample[i].predicted;
    g_assert_true(wrong == (i < mistakes));
  }
  detail_clear(&d);
}

/* ---- pace ----------------------------------------------------------------------- */

typedef struct {
  gint64 now_us, step_us;
} FakeClock;

static gint64
fake_clock_read(gpointer data)
{
  FakeClock *c = data;
  c->now_us += c->step_us;
  return c->now_us;
}

/* Simulated microseconds a run of `steps` steps takes at `pace` (0: none). */
static gint64
simulated_run(double pace, long steps)
{
  g_autoptr(TdmConfig) cfg = config("cpu", TDM_STRATEGY_ALLREDUCE, steps);
  /* The final evaluation in one pass: each pass reads the clock (its progress). */
  cfg->eval_batch = 10000;
  Detail d;
  detail_init(&d);
  FakeClock clock = {.now_us = 1, .step_us = 5000};
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, record, &d);
  tdm_trainer_set_clock(trainer, fake_clock_read, &clock);
  tdm_trainer_set_pace(trainer, pace);
  g_assert_cmpfloat(tdm_trainer_get_pace(trainer), ==, pace);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  g_assert_cmpint(d.finished.steps, ==, steps);
  detail_clear(&d);
  return clock.now_us - 1;
}

/* At 50 steps a second, 10 steps take at least 9 intervals of 20 ms on the clock;
 * unpaced, the same clock sees them done far sooner. */
static void
test_pace_limit(void)
{
  const long steps = 10;
  gint64 interval = G_USEC_PER_SEC / 50;
  gint64 paced = simulated_run(50, steps);
  gint64 free_running = simulated_run(0, steps);
  g_assert_cmpint(paced, >=, (steps - 1) * interval);
  g_assert_cmpint(free_running, <, (steps - 1) * interval);
}

/* Paused from the start, the run rests (a PAUSED event); each rest asks for one single
 * step, which runs exactly one step before the next rest; a stop at the fourth rest
 * finds three steps done. Steps asked for before the run add up. */
static void
test_single_step(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2", TDM_STRATEGY_MAIN, 50);
  Detail d;
  detail_init(&d);
  g_autoptr(GCancellable) cancel = g_cancellable_new();
  d.cancel_at_rest = cancel;
  d.rest_limit = 4;
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, record, &d);
  d.trainer = trainer;
  tdm_trainer_single_step(trainer);   /* not paused: ignored */
  tdm_trainer_set_paused(trainer, TRUE);
  g_assert_true(tdm_trainer_run(trainer, cancel, &error));
  g_assert_no_error(error);
  g_assert_cmpint(d.paused, ==, 4);
  g_assert_cmpint(d.finished.steps, ==, 3);
  g_assert_true(d.finished.stopped);
  /* Every single step is sampled, so each shows its phases. */
  g_assert_cmpuint(d.phases->len, ==, 3);
  /* …and summarized at once, so the status line and charts move with each one. */
  g_assert_cmpint(d.n_summaries, ==, 3);
  for (int i = 0; i < 3; i++)
    g_assert_cmpint(d.summaries[i], ==, i + 1);
  detail_clear(&d);

  /* Two steps asked for before the run go through in one go: one rest after them. */
  Detail queued;
  detail_init(&queued);
  g_autoptr(GCancellable) cancel2 = g_cancellable_new();
  queued.cancel_at_rest = cancel2;
  queued.rest_limit = 1;
  g_autoptr(TdmTrainer) trainer2 = tdm_trainer_new(cfg, record, &queued);
  queued.trainer = trainer2;
  tdm_trainer_set_paused(trainer2, TRUE);
  tdm_trainer_single_step(trainer2);
  tdm_trainer_single_step(trainer2);
  g_assert_true(tdm_trainer_run(trainer2, cancel2, &error));
  g_assert_no_error(error);
  g_assert_cmpint(queued.paused, ==, 1);
  g_assert_cmpint(queued.finished.steps, ==, 2);
  detail_clear(&queued);
}

/* A lent dataset: the run trains on it exactly as on one it opened itself (the same
 * parameters after the same steps), and it is the caller's again afterwards. */
static void
test_lent_dataset(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2", TDM_STRATEGY_ALLREDUCE, 12);
  g_autoptr(TdmDatasetPair) data = tdm_dataset_open(dataset, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree float *own = NULL;
  size_t own_count = 0, lent_count = 0;
  Detail d;

  g_assert_nonnull(data);
  {
    g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, NULL, NULL);
    const float *p;

    g_assert_true(tdm_trainer_run(trainer, NULL, &error));
    g_assert_no_error(error);
    p = tdm_trainer_get_parameters(trainer, &own_count);
    own = g_memdup2(p, own_count * sizeof *p);
  }
  detail_init(&d);
  {
    g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, record, &d);
    const float *p;

    tdm_trainer_set_dataset(trainer, data);
    g_assert_true(tdm_trainer_run(trainer, NULL, &error));
    g_assert_no_error(error);
    p = tdm_trainer_get_parameters(trainer, &lent_count);
    g_assert_cmpuint(lent_count, ==, own_count);
    g_assert_cmpmem(p, lent_count * sizeof *p, own, own_count * sizeof *own);
  }
  /* The batch events name samples of the lent set, with its labels. */
  g_assert_cmpuint(d.batches->len, >, 0);
  for (guint i = 0; i < d.batches->len; i++) {
    const TdmBatchEvent *b = &g_array_index(d.batches, TdmBatchEvent, i);

    for (int r = 0; r < b->replicas; r++)
      for (int k = 0; k < b->device[r].shown; k++)
        g_assert_cmpint(b->device[r].label[k], ==, data->train->labels[b->device[r].index[k]]);
  }
  detail_clear(&d);
  /* Freed trainers left it alone. */
  g_assert_cmpint(data->train->count, ==, 2000);
  g_assert_nonnull(data->train->images);
}

/* A name of `count` copies of a three-byte character after one ASCII letter: longer
 * than the events' fixed fields, it cannot end on a character's edge by chance. */
static char *
long_name(int count)
{
  GString *s = g_string_new("x");
  for (int i = 0; i < count; i++)
    g_string_append(s, "\u732b"); /* 猫 */
  return g_string_free(s, FALSE);
}

/* Class and dataset names in a script of many-byte characters, longer than the
 * events' fields hold (an image folder's classes named in Japanese): each field is cut
 * at a whole character, so the confusion matrix's labels, the window and --json get
 * UTF-8 (a field cut inside a character is refused by Pango and by JSON readers). */
static void
test_long_names(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu", TDM_STRATEGY_ALLREDUCE, 0);
  g_autoptr(TdmDatasetPair) data = tdm_dataset_open(dataset, NULL);
  g_autoptr(GError) error = NULL;
  Detail d;

  g_assert_nonnull(data);
  g_assert_nonnull(data->test->class_names);
  for (int c = 0; c < data->test->classes; c++) {
    g_free(data->test->class_names[c]);
    data->test->class_names[c] = long_name(TDM_CLASS_NAME_SIZE / 3 + 1 + c);
  }
  g_autofree char *name = long_name(60);
  g_free(data->name);
  /* Two ASCII letters: the field's 127 bytes end inside a character. */
  data->name = g_strconcat("y", name, NULL);
  detail_init(&d);
  {
    g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, record, &d);

    tdm_trainer_set_dataset(trainer, data);
    g_assert_true(tdm_trainer_run(trainer, NULL, &error));
    g_assert_no_error(error);
  }
  g_assert_true(g_utf8_validate(d.started.dataset, -1, NULL));
  g_assert_true(g_str_has_prefix(data->name, d.started.dataset));
  g_assert_cmpuint(strlen(d.started.dataset), >, sizeof d.started.dataset - 4);
  g_assert_cmpuint(d.predictions->len, ==, 1);
  const TdmPredictionsEvent *p = &g_array_index(d.predictions, TdmPredictionsEvent, 0);
  for (int c = 0; c < p->classes; c++) {
    g_assert_true(g_utf8_validate(p->class_name[c], -1, NULL));
    /* As much of the name as fits: less only by the part of a character. */
    g_assert_true(g_str_has_prefix(data->test->class_names[c], p->class_name[c]));
    g_assert_cmpuint(strlen(p->class_name[c]), >, TDM_CLASS_NAME_SIZE - 4);
  }
  detail_clear(&d);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/trainer-detail/phases-allreduce", test_phases_allreduce);
  g_test_add_func("/trainer-detail/phases-main", test_phases_main);
  g_test_add_func("/trainer-detail/overlap-cpu-workers", test_overlap_cpu_workers);
  g_test_add_func("/trainer-detail/overlap-rule", test_overlap_rule);
  g_test_add_func("/trainer-detail/bytes-moved", test_bytes_moved);
  g_test_add_func("/trainer-detail/bytes-chain", test_bytes_chain);
  g_test_add_func("/trainer-detail/batch-split", test_batch_split);
  g_test_add_func("/trainer-detail/predictions", test_predictions);
  g_test_add_func("/trainer-detail/pace-limit", test_pace_limit);
  g_test_add_func("/trainer-detail/single-step", test_single_step);
  g_test_add_func("/trainer-detail/lent-dataset", test_lent_dataset);
  g_test_add_func("/trainer-detail/long-names", test_long_names);
  dataset = test_synthetic_idx_new(0, 2000, 500);
  int status = g_test_run();
  test_remove_synthetic_idx(dataset);
  return status;
}
