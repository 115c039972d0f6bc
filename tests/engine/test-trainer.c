/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-trainer.c — the trainer end to end on CPU workers: accuracy after one epoch,
 * events, pause, stop, bit-exact resume, divergence, checkpoints, bad input. */
#include "tdm-checkpoint.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-trainer.h"

#include <glib/gstdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

typedef struct {
  int started, steps, devices, epochs, finished, failed, paused, resumed;
  double last_test_accuracy;
  TdmFinishedEvent finished_event;
  TdmStartedEvent started_event;
  GCancellable *cancel_after_steps;
  int cancel_at;
  long cancel_step;          /* the step whose summary cancelled the run */
  TdmTrainer *pause_trainer;
  /* When set, `paused` is counted under the lock and the condition told: another
   * thread can wait for the PAUSED event. */
  GMutex *paused_lock;
  GCond *paused_cond;
  int memory;
} Recorder;

static void
record(const TdmEvent *e, gpointer data)
{
  Recorder *r = data;
  switch (e->kind) {
  case TDM_EVENT_MEMORY:
    r->memory++;
    break;
  case TDM_EVENT_STARTED:
    r->started++;
    r->started_event = e->started;
    break;
  case TDM_EVENT_STEP: {
    r->steps++;
    g_assert_cmpfloat(e->step.fraction, >=, 0);
    g_assert_cmpfloat(e->step.fraction, <=, 1);
    g_assert_true(isfinite(e->step.train_loss));
    if (r->cancel_after_steps != NULL && r->steps == r->cancel_at) {
      r->cancel_step = e->step.step;
      g_cancellable_cancel(r->cancel_after_steps);
    }
    if (r->pause_trainer != NULL && r->steps == 2)
      tdm_trainer_set_paused(r->pause_trainer, TRUE);
    break;
  }
  case TDM_EVENT_DEVICES:
    r->devices++;
    g_assert_cmpint(e->devices.replicas, >=, 1);
    g_assert_cmpint(e->devices.device[0].tandem_bytes, >, 0);
    break;
  case TDM_EVENT_EPOCH:
    r->epochs++;
    r->last_test_accuracy = e->epoch.test_accuracy;
    break;
  case TDM_EVENT_PAUSED:
    if (r->paused_lock != NULL)
      g_mutex_lock(r->paused_lock);
    r->paused++;
    if (r->paused_lock != NULL) {
      g_cond_broadcast(r->paused_cond);
      g_mutex_unlock(r->paused_lock);
    }
    break;
  case TDM_EVENT_RESUMED:
    r->resumed++;
    break;
  case TDM_EVENT_FINISHED:
    r->finished++;
    r->finished_event = e->finished;
    break;
  case TDM_EVENT_FAILED:
    r->failed++;
    g_assert_nonnull(e->failed);
    break;
  case TDM_EVENT_PHASES:
  case TDM_EVENT_BATCH:
  case TDM_EVENT_PREDICTIONS:
  case TDM_EVENT_SAVED:
  case TDM_EVENT_SETUP:
    break;
  }
}

/* What "synthetic" means here: its generator's images, 16,000 to train on (an epoch of
 * 160 steps at the default batch of 100) and 1,000 to test, made once. By name every
 * run would generate 70,000 images and a short run evaluate 10,000. */
static TdmDatasetPair *synthetic;

/* A trainer for cfg, on the test's synthetic set where cfg names "synthetic". */
static TdmTrainer *
new_trainer(const TdmConfig *cfg, TdmEventSink sink, gpointer user_data)
{
  TdmTrainer *trainer = tdm_trainer_new(cfg, sink, user_data);
  if (g_str_equal(cfg->dataset, "synthetic"))
    tdm_trainer_set_dataset(trainer, synthetic);
  return trainer;
}

static TdmConfig *
small_config(const char *dataset, const char *network)
{
  TdmConfig *cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(dataset);
  g_free(cfg->network);
  cfg->network = g_strdup(network);
  cfg->epochs = 1;
  return cfg;
}

/* A run of the mlp preset on dataset, one epoch of `steps` steps, cut short after
 * `max_steps` when that is positive: it must reach `expected` test accuracy. */
static void
check_one_epoch(const char *dataset, const char *devices, int steps, long max_steps,
                double expected)
{
  g_autoptr(TdmConfig) cfg = small_config(dataset, "mlp");
  g_autoptr(GError) error = NULL;
  cfg->max_steps = max_steps;
  g_assert_true(tdm_config_set_devices(cfg, devices, &error));
  Recorder rec = {0};
  g_autoptr(TdmTrainer) trainer = new_trainer(cfg, record, &rec);
  gint64 start = g_get_monotonic_time();
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  double seconds = (g_get_monotonic_time() - start) / 1e6;
  /* A run cut short ends with an evaluation but no epoch. */
  gboolean whole = max_steps <= 0;
  g_test_message("%s on %s: test accuracy %.4f after %ld steps, %.1f s, %d summaries",
                 dataset, devices, rec.finished_event.test_accuracy,
                 whole ? (long)steps : max_steps, seconds, rec.steps);
  g_assert_cmpint(rec.started, ==, 1);
  g_assert_cmpint(rec.epochs, ==, whole ? 1 : 0);
  g_assert_cmpint(rec.finished, ==, 1);
  g_assert_cmpint(rec.failed, ==, 0);
  g_assert_false(rec.finished_event.stopped);
  g_assert_cmpint(rec.finished_event.steps, ==, whole ? steps : max_steps);
  g_assert_cmpint(rec.started_event.steps_per_epoch, ==, steps);
  g_assert_cmpuint(rec.started_event.parameters, ==, 1796010);
  g_assert_cmpfloat(rec.finished_event.test_accuracy, >=, expected);
  if (whole)
    g_assert_cmpfloat(rec.finished_event.test_accuracy, ==, rec.last_test_accuracy);
  g_assert_cmpint(rec.devices, >=, 1);
}

/* A test clock: each reading moves it on by `step_us`. */
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

static Recorder
run_with_clock(gint64 step_us, long steps)
{
  g_autoptr(TdmConfig) cfg = small_config("synthetic", "fc16,relu,fc10");
  g_autoptr(GError) error = NULL;
  cfg->max_steps = steps;
  FakeClock clock = {.now_us = 1, .step_us = step_us};
  Recorder rec = {0};
  g_autoptr(TdmTrainer) trainer = new_trainer(cfg, record, &rec);
  tdm_trainer_set_clock(trainer, fake_clock_read, &clock);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  g_assert_cmpint(rec.finished_event.steps, ==, steps);
  return rec;
}

/* Summaries and device figures are throttled by the clock, not by the step count:
 * counted under a clock that stands still and one that races. */
static void
test_summary_throttle(void)
{
  /* Time stands still: no summary falls due, only the run's last one. */
  Recorder frozen = run_with_clock(0, 40);
  g_assert_cmpint(frozen.steps, ==, 1);
  g_assert_cmpint(frozen.devices, ==, 1);

  /* A second passes at every reading: every step is due, and so are device figures. */
  Recorder racing = run_with_clock(G_USEC_PER_SEC, 40);
  g_assert_cmpint(racing.steps, ==, 40);
  g_assert_cmpint(racing.devices, ==, 40 + 1);
  g_assert_cmpfloat(racing.finished_event.elapsed, >, 40);
}

/* A clock that moves 20 ms at each reading and stalls 100 ms more at every 50th,
 * as a step does when a window's drawing or another process takes its core. */
typedef struct {
  gint64 now_us;
  long readings;
} StallClock;

static gint64
stall_clock_read(gpointer data)
{
  StallClock *c = data;
  c->readings++;
  c->now_us += 20000 + (c->readings % 50 == 0 ? 100000 : 0);
  return c->now_us;
}

typedef struct {
  GArray *steps;   /* of TdmStepEvent */
  int batch, steps_per_epoch;
} StepLog;

static void
log_steps(const TdmEvent *e, gpointer data)
{
  StepLog *log = data;
  if (e->kind == TDM_EVENT_STEP)
    g_array_append_val(log->steps, e->step);
  else if (e->kind == TDM_EVENT_STARTED)
    log->steps_per_epoch = e->started.steps_per_epoch;
}

/* Throughput is samples over the last second of training time, not over the last
 * summary (one slow step in a 50 ms summary swung the figure 2× and more,
 * a regular sawtooth). Every STEP event's figure equals the windowed rate the test
 * computes from the events' own steps and elapsed times, and it stays steady where
 * the per-summary rate jumps at each stall. */
static void
test_throughput_window(void)
{
  g_autoptr(TdmConfig) cfg = small_config("synthetic", "fc16,relu,fc10");
  g_autoptr(GError) error = NULL;
  StallClock clock = {.now_us = 1};
  StepLog log = {.steps = g_array_new(FALSE, FALSE, sizeof(TdmStepEvent))};

  cfg->batch = 20;
  cfg->max_steps = 150;
  g_autoptr(TdmTrainer) trainer = new_trainer(cfg, log_steps, &log);
  tdm_trainer_set_clock(trainer, stall_clock_read, &clock);
  tdm_trainer_options(trainer)->summary_steps = 1;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  /* Whole batches only, so step × batch counts the samples. */
  g_assert_cmpint(log.steps_per_epoch, >, cfg->max_steps);
  g_assert_cmpuint(log.steps->len, ==, cfg->max_steps);

  const TdmStepEvent *ev = (const TdmStepEvent *)log.steps->data;
  double instant_lo = INFINITY, instant_hi = 0, window_lo = INFINITY, window_hi = 0;
  for (guint i = 0; i < log.steps->len; i++) {
    /* The newest earlier summary a second or more before, else the run's start. */
    double base_elapsed = 0;
    long base_step = 0;
    for (guint k = i; k-- > 0;) {
      if (ev[i].elapsed - ev[k].elapsed >= 1.0) {
        base_elapsed = ev[k].elapsed;
        base_step = ev[k].step;
        break;
      }
    }
    double expected = (ev[i].step - base_step) * cfg->batch / (ev[i].elapsed - base_elapsed);
    g_assert_cmpfloat_with_epsilon(ev[i].samples_per_second, expected, 1e-9 * expected);

    if (i > 0 && ev[i].elapsed >= 2.0) {
      double instant = (ev[i].step - ev[i - 1].step) * cfg->batch /
                       (ev[i].elapsed - ev[i - 1].elapsed);
      instant_lo = MIN(instant_lo, instant);
      instant_hi = MAX(instant_hi, instant);
      window_lo = MIN(window_lo, ev[i].samples_per_second);
      window_hi = MAX(window_hi, ev[i].samples_per_second);
    }
  }
  g_test_message("per summary %.0f..%.0f samples/s, over a second %.0f..%.0f",
                 instant_lo, instant_hi, window_lo, window_hi);
  g_assert_cmpfloat(instant_hi / instant_lo, >, 2);
  g_assert_cmpfloat(window_hi / window_lo, <, 1.25);
  g_array_unref(log.steps);
}

static void
test_synthetic_one_epoch(void)
{
  check_one_epoch("synthetic", "cpu:2", 160, 0, 0.95);
}

static void
test_fashion_mnist_one_epoch(void)
{
  if (!g_file_test(TDM_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", G_FILE_TEST_EXISTS)) {
    g_test_skip("Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)");
    return;
  }
  /* The real files through their loader, and learning on them: 100 of the epoch's 600
   * steps reach 82 % (84 % the whole epoch); a wrong gradient, optimizer step or
   * label order stays near the 10 % of chance, far below 75 %. */
  check_one_epoch("fashion-mnist", "cpu", 600, 100, 0.75);
}

/* Runs `steps` steps in all, resuming from `resume` when given; returns parameters. */
static float *
run_steps(TdmConfig *cfg, long steps, const char *resume, const char *save,
          GCancellable *cancel_at_summary, size_t *count, gboolean *stopped)
{
  g_autoptr(GError) error = NULL;
  cfg->max_steps = steps;
  g_free(cfg->save_path);
  cfg->save_path = g_strdup(save);
  Recorder rec = {0};
  rec.cancel_after_steps = cancel_at_summary;
  rec.cancel_at = 100;
  g_autoptr(TdmTrainer) trainer = new_trainer(cfg, record, &rec);
  /* A summary a step, so the stop comes at step 100 on any machine. */
  tdm_trainer_options(trainer)->summary_steps = 1;
  if (resume != NULL)
    tdm_trainer_set_resume_path(trainer, resume);
  g_assert_true(tdm_trainer_run(trainer, cancel_at_summary, &error));
  g_assert_no_error(error);
  if (stopped != NULL)
    *stopped = rec.finished_event.stopped;
  const float *params = tdm_trainer_get_parameters(trainer, count);
  return g_memdup2(params, *count * sizeof(float));
}

static void
check_resume(const char *devices, TdmStrategy strategy)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-resume-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "run.safetensors", NULL);
  g_autoptr(TdmConfig) cfg = small_config("synthetic", "fc32,relu,fc10");
  g_assert_true(tdm_config_set_devices(cfg, devices, NULL));
  cfg->strategy = strategy;
  cfg->batch = 100;
  cfg->epochs = 2;
  /* 200 steps cross the epoch boundary at 160, where the shuffle changes. */
  const long total = 200;
  size_t n_full = 0, n_resumed = 0;
  g_autofree float *full = run_steps(cfg, total, NULL, NULL, NULL, &n_full, NULL);

  /* Stop mid-run through the cancellable, then resume to the same total. */
  g_autoptr(GCancellable) cancel = g_cancellable_new();
  gboolean stopped = FALSE;
  size_t n_stopped = 0;
  g_autofree float *partial = run_steps(cfg, total, NULL, path, cancel, &n_stopped, &stopped);
  g_assert_true(stopped);
  g_assert_true(g_file_test(path, G_FILE_TEST_EXISTS));
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, NULL);
  g_assert_nonnull(ckpt);
  long at = atol(tdm_checkpoint_get_metadata(ckpt, "step"));
  g_test_message("%s %s: stopped after step %ld of %ld", devices, tdm_strategy_name(strategy),
                 at, total);
  g_assert_cmpint(at, >, 0);
  g_assert_cmpint(at, <, total);

  g_autofree float *resumed = run_steps(cfg, total, path, NULL, NULL, &n_resumed, NULL);
  g_assert_cmpuint(n_resumed, ==, n_full);
  g_assert_cmpmem(resumed, n_resumed * sizeof(float), full, n_full * sizeof(float));

  /* And a resume from a clean epoch-1 checkpoint crosses the boundary the same way. */
  g_autofree float *first = run_steps(cfg, 160, NULL, path, NULL, &n_stopped, NULL);
  g_autofree float *second = run_steps(cfg, total, path, NULL, NULL, &n_resumed, NULL);
  g_assert_cmpmem(second, n_resumed * sizeof(float), full, n_full * sizeof(float));

  g_unlink(path);
  g_rmdir(dir);
}

static void
test_stop_resume_bit_exact(void)
{
  check_resume("cpu", TDM_STRATEGY_ALLREDUCE);
  check_resume("cpu:2", TDM_STRATEGY_MAIN);
}

static gboolean
unpause_later(gpointer data)
{
  tdm_trainer_set_paused(data, FALSE);
  return G_SOURCE_REMOVE;
}

/* The trainer's clock, moved on by a pause far longer than the run. */
typedef struct {
  FakeClock clock;
  TdmTrainer *trainer;
  Recorder *rec;
  GMutex lock;
  GCond cond;
} PausedClock;

static gpointer
unpause_thread(gpointer data)
{
  PausedClock *pc = data;

  /* The PAUSED event comes after the trainer's last reading of the clock before the
   * pause, and it reads none until it is unpaused: the clock moves in between. */
  g_mutex_lock(&pc->lock);
  while (pc->rec->paused == 0)
    g_cond_wait(&pc->cond, &pc->lock);
  g_mutex_unlock(&pc->lock);
  pc->clock.now_us += 1000 * G_USEC_PER_SEC;
  unpause_later(pc->trainer);
  return NULL;
}

static void
test_pause_resume(void)
{
  g_autoptr(TdmConfig) cfg = small_config("synthetic", "fc64,relu,fc10");
  cfg->max_steps = 150;
  Recorder rec = {0};
  g_autoptr(TdmTrainer) trainer = new_trainer(cfg, record, &rec);
  /* Every reading 60 ms on: each step is due for a summary, so the pause at the
   * second STEP comes. */
  PausedClock pc = {.clock = {.now_us = 1, .step_us = 60 * 1000}, .trainer = trainer,
                    .rec = &rec};
  g_mutex_init(&pc.lock);
  g_cond_init(&pc.cond);
  rec.paused_lock = &pc.lock;
  rec.paused_cond = &pc.cond;
  rec.pause_trainer = trainer;
  tdm_trainer_set_clock(trainer, fake_clock_read, &pc.clock);
  GThread *helper = g_thread_new("unpause", unpause_thread, &pc);
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_thread_join(helper);
  g_mutex_clear(&pc.lock);
  g_cond_clear(&pc.cond);
  g_assert_cmpint(rec.paused, ==, 1);
  g_assert_cmpint(rec.resumed, ==, 1);
  g_assert_cmpint(rec.finished_event.steps, ==, 150);
  g_assert_false(rec.finished_event.stopped);
  /* The pause (1000 s on this clock) is left out of the finished run's
   * time, as it is of every STEP's. */
  g_assert_cmpfloat(rec.finished_event.elapsed, <, 1000);
  g_assert_cmpfloat(rec.finished_event.elapsed, >, 0);
}

/* Each STEP event's figures, and a pause asked for from the sampled step after a
 * summary, so that the pause comes with a step trained and not yet summarized. */
typedef struct {
  TdmTrainer *trainer;
  long pause_after;             /* the step whose PHASES event asks for a pause; 0: none */
  long cancel_after;            /* the step whose PHASES event stops the run; 0: none */
  GCancellable *cancel;
  GMutex lock;
  GCond cond;
  gboolean paused;
  long step[64];
  double loss[64], accuracy[64], elapsed[64];
  int summaries;
  TdmFinishedEvent finished;
} SummaryLog;

static void
log_summaries(const TdmEvent *e, gpointer data)
{
  SummaryLog *log = data;
  if (e->kind == TDM_EVENT_PHASES && e->phases.step == log->pause_after)
    tdm_trainer_set_paused(log->trainer, TRUE);
  if (e->kind == TDM_EVENT_PHASES && e->phases.step == log->cancel_after)
    g_cancellable_cancel(log->cancel);
  if (e->kind == TDM_EVENT_PAUSED) {
    g_mutex_lock(&log->lock);
    log->paused = TRUE;
    g_cond_broadcast(&log->cond);
    g_mutex_unlock(&log->lock);
  }
  if (e->kind == TDM_EVENT_STEP && log->summaries < (int)G_N_ELEMENTS(log->step)) {
    log->step[log->summaries] = e->step.step;
    log->loss[log->summaries] = e->step.train_loss;
    log->accuracy[log->summaries] = e->step.train_accuracy;
    log->elapsed[log->summaries] = e->step.elapsed;
    log->summaries++;
  }
  if (e->kind == TDM_EVENT_FINISHED)
    log->finished = e->finished;
}

static gpointer
unpause_when_paused(gpointer data)
{
  SummaryLog *log = data;
  g_mutex_lock(&log->lock);
  while (!log->paused)
    g_cond_wait(&log->cond, &log->lock);
  g_mutex_unlock(&log->lock);
  tdm_trainer_set_paused(log->trainer, FALSE);
  return NULL;
}

static void
run_summarized(SummaryLog *log, long pause_after)
{
  g_autoptr(TdmConfig) cfg = small_config("synthetic", "fc16,relu,fc10");
  cfg->max_steps = 40;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, log_summaries, log);
  tdm_trainer_options(trainer)->summary_steps = 10;
  log->trainer = trainer;
  log->pause_after = pause_after;
  g_mutex_init(&log->lock);
  g_cond_init(&log->cond);
  GThread *helper = pause_after > 0 ? g_thread_new("unpause", unpause_when_paused, log) : NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  if (helper != NULL)
    g_thread_join(helper);
  g_mutex_clear(&log->lock);
  g_cond_clear(&log->cond);
  log->trainer = NULL;
}

/* A pause between two summaries changes none of them: the summary after it divides
 * the loss and correct answers of every step since the last one by their samples. */
static void
test_pause_keeps_summaries(void)
{
  SummaryLog plain = {0}, paused = {0};
  run_summarized(&plain, 0);
  run_summarized(&paused, 11);
  g_assert_true(paused.paused);
  g_assert_cmpint(plain.summaries, ==, 4);
  g_assert_cmpint(paused.summaries, ==, plain.summaries);
  for (int i = 0; i < plain.summaries; i++) {
    g_assert_cmpint(paused.step[i], ==, plain.step[i]);
    g_assert_cmpfloat(paused.accuracy[i], >=, 0);
    g_assert_cmpfloat(paused.accuracy[i], <=, 1);
    g_assert_cmpfloat(paused.loss[i], ==, plain.loss[i]);
    g_assert_cmpfloat(paused.accuracy[i], ==, plain.accuracy[i]);
  }
}

/* A stop that lands while the trainer gathers a summary still leaves the run its
 * training time (the clock moves 1 ms a reading). */
static void
test_stop_keeps_elapsed(void)
{
  g_autoptr(TdmConfig) cfg = small_config("synthetic", "fc16,relu,fc10");
  cfg->max_steps = 40;
  g_autoptr(GCancellable) cancel = g_cancellable_new();
  SummaryLog log = {.cancel_after = 3, .cancel = cancel};
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, log_summaries, &log);
  tdm_trainer_options(trainer)->summary_steps = 1;
  FakeClock clock = {.now_us = 1, .step_us = 1000};
  tdm_trainer_set_clock(trainer, fake_clock_read, &clock);
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_trainer_run(trainer, cancel, &error));
  g_assert_no_error(error);
  g_assert_true(log.finished.stopped);
  g_assert_cmpint(log.finished.steps, ==, 3);
  /* Two summaries came before the stop; the run lasted at least as long as they say. */
  g_assert_cmpint(log.summaries, ==, 2);
  g_assert_cmpfloat(log.elapsed[1], >, 0);
  g_assert_cmpfloat(log.finished.elapsed, >=, log.elapsed[1]);
}

static void
test_stop_is_prompt(void)
{
  /* A summary after every step; the recorder stops the run from the third one's
   * event. The run must end there, not at the epoch's end: counted in steps, not
   * timed (the latency itself is a benchmark's business: bench-train --stop-latency). */
  g_autoptr(TdmConfig) cfg = small_config("synthetic", "cnn");
  cfg->batch = 64;
  Recorder rec = {0};
  g_autoptr(TdmTrainer) trainer = new_trainer(cfg, record, &rec);
  tdm_trainer_options(trainer)->summary_steps = 1;
  g_autoptr(GCancellable) cancellable = g_cancellable_new();
  rec.cancel_after_steps = cancellable;
  rec.cancel_at = 3;
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_trainer_run(trainer, cancellable, &error));
  g_assert_no_error(error);
  g_assert_true(g_cancellable_is_cancelled(cancellable));
  g_assert_cmpint(rec.finished, ==, 1);
  g_assert_true(rec.finished_event.stopped);
  g_assert_cmpint(rec.cancel_step, >, 0);
  g_test_message("stop requested at step %ld, run ended at step %ld", rec.cancel_step,
                 rec.finished_event.steps);
  /* At most the step already under way when the stop came finishes. */
  g_assert_cmpint(rec.finished_event.steps, >=, rec.cancel_step);
  g_assert_cmpint(rec.finished_event.steps, <=, rec.cancel_step + 1);
}

static void
test_divergence_is_reported(void)
{
  g_autoptr(TdmConfig) cfg = small_config("synthetic", "fc64,relu,fc10");
  cfg->optimizer = TDM_OPTIMIZER_SGD;
  cfg->lr = 1e30;
  Recorder rec = {0};
  g_autoptr(TdmTrainer) trainer = new_trainer(cfg, record, &rec);
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_trainer_run(trainer, NULL, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DIVERGED);
  g_assert_nonnull(strstr(error->message, "--lr"));
  g_assert_cmpint(rec.failed, ==, 1);
  g_assert_cmpint(rec.finished, ==, 0);
}

static void
test_bad_dataset_fails_cleanly(void)
{
  g_autoptr(TdmConfig) cfg = small_config("/nonexistent/folder", "mlp");
  Recorder rec = {0};
  g_autoptr(TdmTrainer) trainer = new_trainer(cfg, record, &rec);
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_trainer_run(trainer, NULL, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET);
  g_assert_nonnull(strstr(error->message, "/nonexistent/folder"));
  g_assert_cmpint(rec.failed, ==, 1);
  g_assert_cmpint(rec.started, ==, 0);

  /* The same trainer object can run again after a failure. */
  g_clear_error(&error);
  g_assert_false(tdm_trainer_run(trainer, NULL, &error));
  g_assert_cmpint(rec.failed, ==, 2);
}

static void
test_checkpoint_contents(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-ckpt-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "cnn.safetensors", NULL);
  g_autoptr(TdmConfig) cfg = small_config("synthetic", "conv4k3p1,relu,pool2,fc16,relu,fc10");
  cfg->max_steps = 5;
  cfg->save_path = g_strdup(path);
  /* max_steps ends the run before an epoch's end: the end of a run is saved too. */
  Recorder rec = {0};
  g_autoptr(TdmTrainer) trainer = new_trainer(cfg, record, &rec);
  g_assert_true(tdm_trainer_run(trainer, NULL, NULL));
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, &error);
  g_assert_no_error(error);
  const TdmTensor *w = tdm_checkpoint_get(ckpt, "conv1.weight");
  g_assert_nonnull(w);
  g_assert_cmpint(w->rank, ==, 4);
  g_assert_cmpint(w->shape[0], ==, 4);
  g_assert_cmpint(w->shape[1], ==, 1);
  g_assert_cmpint(w->shape[2], ==, 3);
  const TdmTensor *fc = tdm_checkpoint_get(ckpt, "fc1.weight");
  g_assert_cmpint(fc->shape[0], ==, 16);
  g_assert_cmpint(fc->shape[1], ==, 14 * 14 * 4);
  g_assert_nonnull(tdm_checkpoint_get(ckpt, "fc2.bias"));
  g_assert_nonnull(tdm_checkpoint_get(ckpt, "optimizer.adam.m"));
  g_assert_nonnull(tdm_checkpoint_get(ckpt, "optimizer.adam.v"));
  g_assert_cmpstr(tdm_checkpoint_get_metadata(ckpt, "step"), ==, "5");
  g_autoptr(TdmConfig) back = tdm_config_from_json(tdm_checkpoint_get_metadata(ckpt, "config"),
                                                   &error);
  g_assert_no_error(error);
  g_assert_cmpstr(back->network, ==, cfg->network);
  /* The weights in the file are the trainer's parameters. */
  size_t n = 0;
  const float *params = tdm_trainer_get_parameters(trainer, &n);
  g_assert_cmpmem(w->data, 36 * sizeof(float), params, 36 * sizeof(float));
  g_unlink(path);
  g_rmdir(dir);
}

/* Conv weights of several input channels: [out, in, kh, kw] in the file, as PyTorch
 * has them, [out, kh, kw, in] in the trainer; a resumed run reads them back. */
static void
test_checkpoint_conv_layout(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-ckpt-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "cnn.safetensors", NULL);
  g_autoptr(TdmConfig) cfg =
      small_config("synthetic", "conv4k3p1,relu,pool2,conv3k3p1,relu,pool2,fc10");
  cfg->max_steps = 3;
  cfg->save_path = g_strdup(path);
  Recorder rec = {0};
  g_autoptr(TdmTrainer) trainer = new_trainer(cfg, record, &rec);
  g_assert_true(tdm_trainer_run(trainer, NULL, NULL));
  size_t n = 0;
  const float *trained = tdm_trainer_get_parameters(trainer, &n);
  g_autofree float *params = g_memdup2(trained, n * sizeof(float));

  g_autoptr(GError) error = NULL;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, &error);
  g_assert_no_error(error);
  const TdmTensor *w = tdm_checkpoint_get(ckpt, "conv2.weight");
  g_assert_nonnull(w);
  g_assert_cmpint(w->shape[0], ==, 3);
  g_assert_cmpint(w->shape[1], ==, 4);
  const size_t offset = 4 * 9 + 4;  /* after conv1's weights and bias */
  for (int o = 0; o < 3; o++)
    for (int i = 0; i < 4; i++)
      for (int t = 0; t < 9; t++)
        g_assert_cmpfloat(w->data[(o * 4 + i) * 9 + t], ==, params[offset + (o * 9 + t) * 4 + i]);

  /* Resumed at its last step, a run takes no step: it holds what was saved. */
  g_autoptr(TdmConfig) again =
      small_config("synthetic", "conv4k3p1,relu,pool2,conv3k3p1,relu,pool2,fc10");
  again->max_steps = 3;
  Recorder rec2 = {0};
  g_autoptr(TdmTrainer) resumed = new_trainer(again, record, &rec2);
  tdm_trainer_set_resume_path(resumed, path);
  g_assert_true(tdm_trainer_run(resumed, NULL, &error));
  g_assert_no_error(error);
  size_t n2 = 0;
  const float *back = tdm_trainer_get_parameters(resumed, &n2);
  g_assert_cmpuint(n2, ==, n);
  g_assert_cmpmem(back, n * sizeof(float), params, n * sizeof(float));
  g_unlink(path);
  g_rmdir(dir);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/trainer/synthetic-one-epoch", test_synthetic_one_epoch);
  g_test_add_func("/trainer/fashion-mnist-one-epoch", test_fashion_mnist_one_epoch);
  g_test_add_func("/trainer/summary-throttle", test_summary_throttle);
  g_test_add_func("/trainer/throughput-window", test_throughput_window);
  g_test_add_func("/trainer/stop-resume-bit-exact", test_stop_resume_bit_exact);
  g_test_add_func("/trainer/pause-resume", test_pause_resume);
  g_test_add_func("/trainer/pause-keeps-summaries", test_pause_keeps_summaries);
  g_test_add_func("/trainer/stop-keeps-elapsed", test_stop_keeps_elapsed);
  g_test_add_func("/trainer/stop-is-prompt", test_stop_is_prompt);
  g_test_add_func("/trainer/divergence", test_divergence_is_reported);
  g_test_add_func("/trainer/bad-dataset", test_bad_dataset_fails_cleanly);
  g_test_add_func("/trainer/checkpoint-contents", test_checkpoint_contents);
  g_test_add_func("/trainer/checkpoint-conv-layout", test_checkpoint_conv_layout);
  synthetic = tdm_dataset_synthetic(0, 16000, 1000);
  int status = g_test_run();
  tdm_dataset_pair_free(synthetic);
  return status;
}
