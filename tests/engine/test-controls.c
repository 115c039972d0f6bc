/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-controls.c — the training controls on CPU workers: "did you mean" for names,
 * the batch that fits a small set, the epoch's running figures and the evaluation's
 * progress (on an injected clock), the monitored metric (early stopping, the best
 * epoch, the plateau schedule), gradient accumulation against the larger batch
 * (bit-identical in exact mode), clipping, the one-cycle schedule and the
 * learning-rate range test. Photo augmentation is test-augment.c's. */
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-json.h"
#include "tdm-lr-find.h"
#include "tdm-network.h"
#include "tdm-suggest.h"
#include "tdm-trainer.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

/* ---- names ------------------------------------------------------------------- */

static void
test_suggest(void)
{
  static const char *const options[] = {"epochs", "batch", "network", "val-split", "early-stop",
                                        "export-onnx", NULL};
  static const char *const schedules[] = {"step", "cosine", "constant", NULL};
  g_assert_cmpstr(tdm_suggest("epoch", options, -1), ==, "epochs");
  /* Two swaps in six characters: two edits, as near as a six-letter slip may be. */
  g_assert_cmpstr(tdm_suggest("ecpohs", options, -1), ==, "epochs");
  /* A swap is one edit, not two: a four-letter word is allowed only one. */
  g_assert_cmpstr(tdm_suggest("setp", schedules, -1), ==, "step");
  g_assert_null(tdm_suggest("sept", schedules, -1));
  g_assert_null(tdm_suggest("", options, -1));
  g_assert_cmpstr(tdm_suggest("btach", options, -1), ==, "batch");
  g_assert_cmpstr(tdm_suggest("netwrok", options, -1), ==, "network");
  /* The only name a word begins. */
  g_assert_cmpstr(tdm_suggest("val", options, -1), ==, "val-split");
  g_assert_cmpstr(tdm_suggest("export", options, -1), ==, "export-onnx");
  /* Nothing near: no guess. */
  g_assert_null(tdm_suggest("colour", options, -1));
  g_assert_null(tdm_suggest("x", options, -1));
}

static void
assert_spec_error(const char *spec, const char *expected)
{
  g_autoptr(GError) error = NULL;
  TdmNetwork *net = tdm_network_new(spec, 28, 28, 1, 10, &error);
  g_assert_null(net);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC);
  if (strstr(error->message, expected) == NULL)
    g_error("spec “%s”: “%s” lacks “%s”", spec, error->message, expected);
}

static void
test_network_mistakes(void)
{
  /* A mistyped built-in: the nearest, and every built-in by name. */
  assert_spec_error("cnnn", "did you mean cnn?");
  assert_spec_error("cnnn", "resnet18");
  assert_spec_error("resnet19", "did you mean resnet18?");
  /* A word that is near none still lists them rather than the layers. */
  assert_spec_error("vgg", "the built-in networks are mlp, cnn");
  /* Spec items: the nearest layer, its numbers kept. */
  assert_spec_error("fc32,rellu,fc10", "did you mean relu?");
  assert_spec_error("cnv32k3,relu,fc10", "did you mean conv32k3?");
  /* Unknown and near nothing: the list of layers, as before. */
  assert_spec_error("fc32,zzzz,fc10", "layers are fcN");
}

static void
test_batch_fitting(void)
{
  /* Four steps an epoch at least, a power of two, one sample a replica. */
  g_assert_cmpint(tdm_config_batch_fitting(40, 1), ==, 8);
  g_assert_cmpint(tdm_config_batch_fitting(20, 1), ==, 4);
  g_assert_cmpint(tdm_config_batch_fitting(3, 1), ==, 1);
  g_assert_cmpint(tdm_config_batch_fitting(3, 2), ==, 2);
  g_assert_cmpint(tdm_config_batch_fitting(1000, 1), ==, 128);
}

/* ---- runs on a small lent dataset -------------------------------------------- */

typedef struct {
  GArray *steps;                /* TdmStepEvent */
  GArray *epochs;               /* TdmEpochEvent */
  GArray *setups;               /* TdmSetupEvent */
  GArray *phases;               /* TdmPhasesEvent (the first replica's spans only) */
  TdmStartedEvent started;
  TdmFinishedEvent finished;
  gboolean is_finished;
  gint64 clock_us;              /* the injected clock, 0.25 s a reading */
} Run;

static void
on_event(const TdmEvent *e, gpointer data)
{
  Run *run = data;
  switch (e->kind) {
  case TDM_EVENT_STARTED:
    run->started = e->started;
    break;
  case TDM_EVENT_STEP:
    g_array_append_val(run->steps, e->step);
    break;
  case TDM_EVENT_EPOCH:
    g_array_append_val(run->epochs, e->epoch);
    break;
  case TDM_EVENT_SETUP:
    g_array_append_val(run->setups, e->setup);
    break;
  case TDM_EVENT_FINISHED:
    run->finished = e->finished;
    run->is_finished = TRUE;
    break;
  default:
    break;
  }
}

static gint64
tick(gpointer data)
{
  Run *run = data;
  run->clock_us += G_USEC_PER_SEC / 4;
  return run->clock_us;
}

static void
run_init(Run *run)
{
  memset(run, 0, sizeof *run);
  run->steps = g_array_new(FALSE, FALSE, sizeof(TdmStepEvent));
  run->epochs = g_array_new(FALSE, FALSE, sizeof(TdmEpochEvent));
  run->setups = g_array_new(FALSE, FALSE, sizeof(TdmSetupEvent));
}

static void
run_clear(Run *run)
{
  g_array_unref(run->steps);
  g_array_unref(run->epochs);
  g_array_unref(run->setups);
}

static TdmConfig *
small_config(const char *network, int batch, int epochs, const char *devices)
{
  TdmConfig *c = tdm_config_new();
  g_free(c->dataset);
  c->dataset = g_strdup("synthetic");
  g_free(c->network);
  c->network = g_strdup(network);
  c->batch = batch;
  c->epochs = epochs;
  c->optimizer = TDM_OPTIMIZER_SGD;
  c->lr = 0.05;
  c->seed = 7;
  c->eval_batch = 64;
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_config_set_devices(c, devices, &error));
  return c;
}

/* Trains `config` on a synthetic set of train × test samples; returns the final
 * parameters (g_free) and their count. */
static float *
train(const TdmConfig *config, int train_count, int test_count, Run *run, gboolean clock,
      gboolean batch_fits, size_t *count)
{
  g_autoptr(GError) error = NULL;
  TdmDatasetPair *data = tdm_dataset_synthetic(3, train_count, test_count);
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(config, on_event, run);
  tdm_trainer_set_dataset(trainer, data);
  tdm_trainer_options(trainer)->batch_fits = batch_fits;
  if (clock)
    tdm_trainer_set_clock(trainer, tick, run);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  const float *params = tdm_trainer_get_parameters(trainer, count);
  float *copy = g_memdup2(params, *count * sizeof(float));
  tdm_dataset_pair_free(data);
  return copy;
}

static void
test_batch_fits_small_set(void)
{
  g_autoptr(TdmConfig) c = small_config("fc16,relu,fc10", 100, 1, "cpu");
  Run run;
  run_init(&run);
  size_t n;
  g_autofree float *p = train(c, 40, 20, &run, FALSE, TRUE, &n);
  g_assert_cmpint(run.started.batch, ==, 8);
  g_assert_cmpint(run.started.batch_asked, ==, 100);
  g_assert_cmpint(run.started.steps_per_epoch, ==, 5);
  run_clear(&run);

  /* A batch the person chose is refused, with the one that would fit named. */
  g_autoptr(GError) error = NULL;
  TdmDatasetPair *data = tdm_dataset_synthetic(3, 40, 20);
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(c, NULL, NULL);
  tdm_trainer_set_dataset(trainer, data);
  g_assert_false(tdm_trainer_run(trainer, NULL, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION);
  g_assert_nonnull(strstr(error->message, "try --batch 8"));
  tdm_dataset_pair_free(data);
}

/* The step events' running figures are the epoch's so far: the last one of an epoch
 * agrees with the epoch's own, and the sample shape is in STARTED. */
static void
test_running_mean(void)
{
  g_autoptr(TdmConfig) c = small_config("fc16,relu,fc10", 16, 1, "cpu:2");
  Run run;
  run_init(&run);
  size_t n;
  g_autofree float *p = train(c, 320, 64, &run, TRUE, FALSE, &n);
  g_assert_cmpint(run.started.height, ==, 28);
  g_assert_cmpint(run.started.width, ==, 28);
  g_assert_cmpint(run.started.channels, ==, 1);
  g_assert_cmpuint(run.steps->len, >=, 2);
  g_assert_cmpuint(run.epochs->len, ==, 1);
  const TdmStepEvent *last = &g_array_index(run.steps, TdmStepEvent, run.steps->len - 1);
  const TdmEpochEvent *epoch = &g_array_index(run.epochs, TdmEpochEvent, 0);
  g_assert_cmpfloat_with_epsilon(last->epoch_loss, epoch->train_loss,
                                 1e-9 * MAX(1.0, epoch->train_loss));
  g_assert_cmpfloat_with_epsilon(last->epoch_accuracy, epoch->train_accuracy, 1e-12);
  /* A running mean of a falling loss lies above the latest step's near the end. */
  for (guint i = 0; i < run.steps->len; i++) {
    const TdmStepEvent *s = &g_array_index(run.steps, TdmStepEvent, i);
    g_assert_true(isfinite(s->epoch_loss) && s->epoch_accuracy >= 0 && s->epoch_accuracy <= 1);
  }
  run_clear(&run);
}

/* Evaluation reports its progress once slow on the trainer's clock: a quarter of a
 * second a reading makes every evaluation of this run "slow". */
static void
test_evaluation_progress(void)
{
  g_autoptr(TdmConfig) c = small_config("fc16,relu,fc10", 8, 1, "cpu");
  c->eval_batch = 4;
  c->val_split = 0.25;
  Run run;
  run_init(&run);
  size_t n;
  g_autofree float *p = train(c, 800, 200, &run, TRUE, FALSE, &n);
  int test_progress = 0, test_done = 0, val_done = 0;
  long last_count = -1;
  for (guint i = 0; i < run.setups->len; i++) {
    const TdmSetupEvent *u = &g_array_index(run.setups, TdmSetupEvent, i);
    if (u->phase == TDM_SETUP_EVALUATION && !u->done) {
      test_progress++;
      g_assert_cmpint(u->total, ==, 200);
      g_assert_cmpint(u->count, >, last_count);
      g_assert_cmpint(u->count, <=, 200);
      g_assert_cmpfloat(u->seconds, >=, TDM_EVALUATION_QUIET_S);
      last_count = u->count;
    }
    if (u->phase == TDM_SETUP_EVALUATION && u->done) {
      test_done++;
      g_assert_cmpint(u->count, ==, 200);
    }
    if (u->phase == TDM_SETUP_VALIDATION && u->done)
      val_done++;
  }
  g_assert_cmpint(test_progress, >=, 2);
  g_assert_cmpint(test_done, ==, 1);
  g_assert_cmpint(val_done, ==, 1);
  run_clear(&run);
}

/* ---- the monitored metric ------------------------------------------------------ */

static void
test_monitor_rule(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  c->monitor = TDM_MONITOR_VAL_LOSS;
  g_assert_true(tdm_config_monitor_improves(c, 0.5, NAN));
  g_assert_true(tdm_config_monitor_improves(c, 0.5, 0.6));
  g_assert_false(tdm_config_monitor_improves(c, 0.6, 0.5));
  g_assert_false(tdm_config_monitor_improves(c, 0.5, 0.5));
  c->min_delta = 0.05;
  g_assert_false(tdm_config_monitor_improves(c, 0.56, 0.6));
  g_assert_true(tdm_config_monitor_improves(c, 0.54, 0.6));
  c->monitor = TDM_MONITOR_TEST_ACCURACY;
  c->min_delta = 0;
  g_assert_true(tdm_config_monitor_improves(c, 0.9, 0.8));
  g_assert_false(tdm_config_monitor_improves(c, 0.8, 0.9));
  c->monitor_mode = TDM_MONITOR_MODE_MIN;
  g_assert_true(tdm_config_monitor_improves(c, 0.8, 0.9));
  g_assert_false(tdm_config_monitor_improves(c, NAN, 0.9));

  /* Watching validation needs a split; the test set's does not. */
  g_autoptr(GError) error = NULL;
  c->early_stop = 2;
  c->monitor = TDM_MONITOR_VAL_LOSS;
  g_assert_false(tdm_config_validate(c, &error));
  g_assert_nonnull(strstr(error->message, "--val-split"));
  g_clear_error(&error);
  c->monitor = TDM_MONITOR_TEST_LOSS;
  g_assert_true(tdm_config_validate(c, &error));

  /* The JSON round trip, and what a run from before the monitor meant. */
  c->min_delta = 0.01;
  g_autofree char *json = tdm_config_to_json(c);
  g_autoptr(TdmConfig) back = tdm_config_from_json(json, &error);
  g_assert_no_error(error);
  g_assert_cmpint(back->monitor, ==, TDM_MONITOR_TEST_LOSS);
  g_assert_cmpint(back->monitor_mode, ==, TDM_MONITOR_MODE_MIN);
  g_assert_cmpfloat(back->min_delta, ==, 0.01);
  g_autoptr(TdmConfig) plain = tdm_config_new();
  plain->early_stop = 3;
  plain->val_split = 0.1;
  plain->monitor = TDM_MONITOR_VAL_LOSS;
  g_autofree char *old = tdm_config_to_json(plain);
  /* Without the monitor, as an older writer wrote it. */
  g_autoptr(JsonNode) root = json_from_string(old, &error);
  g_assert_no_error(error);
  const char *const added[] = {"monitor", "monitor_mode", "min_delta"};
  for (guint i = 0; i < G_N_ELEMENTS(added); i++) {
    g_assert_true(json_object_has_member(json_node_get_object(root), added[i]));
    json_object_remove_member(json_node_get_object(root), added[i]);
  }
  g_autofree char *older = tdm_json_to_string(root);
  g_autoptr(TdmConfig) legacy = tdm_config_from_json(older, &error);
  g_assert_no_error(error);
  g_assert_cmpint(legacy->monitor, ==, TDM_MONITOR_VAL_ACCURACY);
}

/* No epoch after the first counts as better (a change of 10⁹ is asked for): the run
 * stops early after `early_stop` more, its best the first. */
static void
test_early_stop(void)
{
  g_autoptr(TdmConfig) c = small_config("fc16,relu,fc10", 32, 6, "cpu");
  c->val_split = 0.2;
  c->early_stop = 2;
  c->min_delta = 1e9;
  Run run;
  run_init(&run);
  size_t n;
  g_autofree float *p = train(c, 320, 64, &run, FALSE, FALSE, &n);
  g_assert_true(run.is_finished);
  g_assert_true(run.finished.early_stopped);
  g_assert_cmpint(run.finished.epochs_done, ==, 3);
  g_assert_cmpint(run.finished.best_epoch, ==, 1);
  g_assert_cmpint(run.finished.monitor, ==, TDM_MONITOR_VAL_LOSS);
  const TdmEpochEvent *first = &g_array_index(run.epochs, TdmEpochEvent, 0);
  g_assert_cmpfloat(run.finished.best_value, ==, first->val_loss);
  g_assert_cmpfloat(run.finished.best_accuracy, ==, first->val_accuracy);
  g_assert_cmpfloat(run.finished.best_test_loss, ==, first->test_loss);
  g_autofree char *text = tdm_finished_early_stop_text(&run.finished, FALSE);
  g_assert_cmpstr(text, ==, "stopped early at epoch 3 (best 1)");
  run_clear(&run);
}

/* The plateau schedule: with nothing counted as better after the first epoch and a
 * patience of 0, the rate drops by gamma after epoch 2, again after epoch 3. */
static void
test_plateau(void)
{
  g_autoptr(TdmConfig) c = small_config("fc16,relu,fc10", 32, 4, "cpu");
  c->schedule = TDM_SCHEDULE_PLATEAU;
  c->monitor = TDM_MONITOR_TEST_LOSS;
  c->plateau_patience = 0;
  c->min_delta = 1e9;
  c->gamma = 0.5;
  Run run;
  run_init(&run);
  size_t n;
  g_autofree float *p = train(c, 128, 32, &run, FALSE, FALSE, &n);
  double expected[4] = {0.05, 0.05, 0.025, 0.0125};
  int steps_per_epoch = run.started.steps_per_epoch;
  for (guint i = 0; i < run.steps->len; i++) {
    const TdmStepEvent *s = &g_array_index(run.steps, TdmStepEvent, i);
    int epoch = (int)((s->step - 1) / steps_per_epoch);
    g_assert_cmpfloat_with_epsilon(s->lr, expected[epoch], 1e-12);
  }
  run_clear(&run);
}

static void
test_onecycle(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  c->schedule = TDM_SCHEDULE_ONECYCLE;
  c->epochs = 10;
  c->lr = 1.0;
  c->optimizer = TDM_OPTIMIZER_MOMENTUM;
  /* PyTorch's OneCycleLR: lr/25 up to lr over 30 %, down to lr/25e4 (cosine). */
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 0), 1.0 / 25, 1e-12);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 3), 1.0, 1e-12);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 1.5), (1.0 + 1.0 / 25) / 2, 1e-12);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 10), 1.0 / 25e4, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 6.5), (1.0 + 1.0 / 25e4) / 2, 1e-12);
  g_assert_cmpfloat_with_epsilon(tdm_config_momentum_at(c, 0), 0.95, 1e-12);
  g_assert_cmpfloat_with_epsilon(tdm_config_momentum_at(c, 3), 0.85, 1e-12);
  g_assert_cmpfloat_with_epsilon(tdm_config_momentum_at(c, 10), 0.95, 1e-12);
  c->optimizer = TDM_OPTIMIZER_SGD;
  g_assert_true(isnan(tdm_config_momentum_at(c, 3)));
  c->schedule = TDM_SCHEDULE_COSINE;
  g_assert_true(isnan(tdm_config_momentum_at(c, 3)));
  /* Its own warm-up: --warmup is refused with it. */
  c->schedule = TDM_SCHEDULE_ONECYCLE;
  c->warmup_epochs = 1;
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_config_validate(c, &error));
  g_assert_nonnull(strstr(error->message, "--warmup"));
}

/* ---- gradients ---------------------------------------------------------------- */

static double
relative_difference(const float *a, const float *b, size_t n)
{
  double diff = 0, size = 0;
  for (size_t i = 0; i < n; i++) {
    diff = MAX(diff, fabs((double)a[i] - b[i]));
    size = MAX(size, fabs((double)b[i]));
  }
  return size > 0 ? diff / size : diff;
}

/* Four micro-batches of 8 an optimizer step train as the batch of 32 does, within
 * float rounding: the gradient is the same mean over the same 32 samples, summed in
 * another order. One device or two. */
static void
test_accumulate_equals_larger_batch(void)
{
  for (int workers = 1; workers <= 2; workers++) {
    const char *devices = workers == 1 ? "cpu" : "cpu:2";
    g_autoptr(TdmConfig) big = small_config("fc32,relu,fc10", 32, 1, devices);
    big->max_steps = 6;
    g_autoptr(TdmConfig) micro = tdm_config_copy(big);
    micro->batch = 8;
    micro->accumulate = 4;
    Run a, b;
    run_init(&a);
    run_init(&b);
    size_t na, nb;
    g_autofree float *pa = train(big, 512, 32, &a, FALSE, FALSE, &na);
    g_autofree float *pb = train(micro, 512, 32, &b, FALSE, FALSE, &nb);
    g_assert_cmpuint(na, ==, nb);
    g_assert_cmpint(b.started.accumulate, ==, 4);
    g_assert_cmpint(b.started.steps_per_epoch, ==, a.started.steps_per_epoch);
    double d = relative_difference(pb, pa, na);
    g_test_message("%s: accumulate 4×8 against batch 32: relative difference %.3g", devices, d);
    /* Six SGD steps of float sums in another order: a few ulps of the largest value. */
    g_assert_cmpfloat(d, <, 1e-5);
    g_assert_cmpfloat(d, >=, 0);
    run_clear(&a);
    run_clear(&b);
  }
}

/* Exact mode sums its chunks exactly: micro-batches of whole chunks are the larger
 * batch bit for bit, on one device or three. */
static void
test_accumulate_exact(void)
{
  g_autoptr(TdmConfig) big = small_config("fc32,relu,fc10", 32, 1, "cpu");
  big->max_steps = 5;
  big->exact = TRUE;
  big->exact_chunk = 8;
  g_autoptr(TdmConfig) micro = tdm_config_copy(big);
  micro->batch = 8;
  micro->accumulate = 4;
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_config_set_devices(micro, "cpu:3", &error));
  Run a, b;
  run_init(&a);
  run_init(&b);
  size_t na, nb;
  g_autofree float *pa = train(big, 512, 32, &a, FALSE, FALSE, &na);
  g_autofree float *pb = train(micro, 512, 32, &b, FALSE, FALSE, &nb);
  g_assert_cmpuint(na, ==, nb);
  g_assert_cmpmem(pa, na * sizeof(float), pb, nb * sizeof(float));
  run_clear(&a);
  run_clear(&b);
}

/* A sampled step of micro-batches shows its local sums where no communication runs,
 * and one all-reduce at its end. */
static void
on_phases(const TdmEvent *e, gpointer data)
{
  int *seen = data;
  if (e->kind != TDM_EVENT_PHASES)
    return;
  const TdmDevicePhases *d = &e->phases.device[0];
  int accumulate = 0, allreduce = 0, last_accumulate = -1, first_allreduce = -1;
  for (int i = 0; i < d->spans; i++) {
    if (d->span[i].phase == TDM_PHASE_ACCUMULATE) {
      accumulate++;
      last_accumulate = i;
    }
    if (d->span[i].phase == TDM_PHASE_ALLREDUCE) {
      allreduce++;
      if (first_allreduce < 0)
        first_allreduce = i;
    }
  }
  g_assert_cmpint(accumulate, ==, 2);
  g_assert_cmpint(allreduce, ==, 1);
  g_assert_cmpint(last_accumulate, <, first_allreduce);
  (*seen)++;
}

static void
test_accumulate_timeline(void)
{
  g_autoptr(TdmConfig) c = small_config("fc16,relu,fc10", 8, 1, "cpu:2");
  c->accumulate = 3;
  c->max_steps = 3;
  g_autoptr(GError) error = NULL;
  TdmDatasetPair *data = tdm_dataset_synthetic(3, 240, 16);
  int seen = 0;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(c, on_phases, &seen);
  tdm_trainer_set_dataset(trainer, data);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  g_assert_cmpint(seen, >=, 1);
  tdm_dataset_pair_free(data);
}

/* One SGD step with the norm clipped to c (below the gradient's) moves the parameters by lr · c in all, in
 * the direction the unclipped step takes; the step event reports the norm before. */
static void
test_clip(void)
{
  const double clip = 0.1;
  g_autoptr(TdmConfig) plain = small_config("fc16,relu,fc10", 32, 1, "cpu:2");
  plain->max_steps = 1;
  plain->lr = 0.5;
  g_autoptr(TdmConfig) clipped = tdm_config_copy(plain);
  clipped->clip_grad_norm = clip;
  g_autoptr(TdmConfig) start = tdm_config_copy(plain);
  start->lr = 1e-30;     /* a step that changes nothing: the initial parameters */
  Run r0, r1, r2;
  run_init(&r0);
  run_init(&r1);
  run_init(&r2);
  size_t n;
  g_autofree float *p0 = train(start, 128, 16, &r0, FALSE, FALSE, &n);
  g_autofree float *p1 = train(plain, 128, 16, &r1, FALSE, FALSE, &n);
  g_autofree float *p2 = train(clipped, 128, 16, &r2, FALSE, FALSE, &n);
  double moved = 0, unclipped = 0, dot = 0;
  for (size_t i = 0; i < n; i++) {
    double a = (double)p2[i] - p0[i], b = (double)p1[i] - p0[i];
    moved += a * a;
    unclipped += b * b;
    dot += a * b;
  }
  moved = sqrt(moved);
  unclipped = sqrt(unclipped);
  double norm = g_array_index(r2.steps, TdmStepEvent, r2.steps->len - 1).grad_norm;
  g_test_message("gradient norm %.4g; moved %.4g (lr · clip %.4g)", norm, moved,
                 plain->lr * clip);
  g_assert_true(isfinite(norm));
  g_assert_cmpfloat(norm, >, 2 * clip);
  g_assert_cmpfloat_with_epsilon(unclipped, plain->lr * norm, 1e-3 * plain->lr * norm);
  g_assert_cmpfloat_with_epsilon(moved, plain->lr * clip, 1e-3 * plain->lr * clip);
  g_assert_cmpfloat(dot / (moved * unclipped), >, 0.9999);
  g_assert_true(isnan(g_array_index(r1.steps, TdmStepEvent, 0).grad_norm));
  run_clear(&r0);
  run_clear(&r1);
  run_clear(&r2);
}

/* ---- the range test -------------------------------------------------------------- */

static void
test_lr_find_rule(void)
{
  /* A loss that falls along a logistic in log(lr), steepest at lr 1e-3, then rises. */
  TdmLrFindPoint p[80];
  for (int i = 0; i < 80; i++) {
    double lr = 1e-6 * pow(10.0, 6.0 * i / 79);
    double x = log10(lr) + 3;
    p[i] = (TdmLrFindPoint){i + 1, lr, 0, 2.0 - 1.0 / (1 + exp(-4 * x)) + (x > 1.5 ? x - 1.5 : 0)};
    p[i].loss = p[i].smoothed;
  }
  double suggested = tdm_lr_find_suggest(p, 80);
  g_assert_cmpfloat(suggested, >, 0.7e-3);
  g_assert_cmpfloat(suggested, <, 1.4e-3);
  /* A loss that only rises: no suggestion. */
  for (int i = 0; i < 80; i++)
    p[i].smoothed = 1.0 + i;
  g_assert_true(isnan(tdm_lr_find_suggest(p, 80)));
  g_autofree char *csv = tdm_lr_find_to_csv(p, 2);
  g_assert_true(g_str_has_prefix(csv, "step,lr,loss,smoothed_loss\n1,1e-06,"));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/controls/suggest", test_suggest);
  g_test_add_func("/controls/network-mistakes", test_network_mistakes);
  g_test_add_func("/controls/batch-fitting", test_batch_fitting);
  g_test_add_func("/controls/batch-fits-small-set", test_batch_fits_small_set);
  g_test_add_func("/controls/running-mean", test_running_mean);
  g_test_add_func("/controls/evaluation-progress", test_evaluation_progress);
  g_test_add_func("/controls/monitor-rule", test_monitor_rule);
  g_test_add_func("/controls/early-stop", test_early_stop);
  g_test_add_func("/controls/plateau", test_plateau);
  g_test_add_func("/controls/onecycle", test_onecycle);
  g_test_add_func("/controls/accumulate", test_accumulate_equals_larger_batch);
  g_test_add_func("/controls/accumulate-exact", test_accumulate_exact);
  g_test_add_func("/controls/accumulate-timeline", test_accumulate_timeline);
  g_test_add_func("/controls/clip", test_clip);
  g_test_add_func("/controls/lr-find-rule", test_lr_find_rule);
  return g_test_run();
}
