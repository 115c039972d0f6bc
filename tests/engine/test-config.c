/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-config.c — TdmConfig: defaults, --devices parsing, validation messages, the
 * name tables, the JSON round trip and the learning-rate schedules. */
#include "tdm-config.h"
#include "tdm-base-recipe.h"
#include "tdm-network-catalogue.h"
#include "tdm-error.h"
#include "tdm-events.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

/* A replica's device as its name, for comparing with what a person typed. */
static const char *
device(const TdmConfig *c, int i)
{
  static char names[8][TDM_DEVICE_NAME_MAX];
  static int next;
  char *name = names[next++ % 8];
  return tdm_device_id_name(c->devices[i], name);
}

static void
test_defaults(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_assert_cmpstr(c->dataset, ==, "fashion-mnist");
  g_assert_cmpstr(c->network, ==, "mlp");
  g_assert_cmpint(tdm_config_replica_count(c), ==, 1);
  g_assert_cmpstr(device(c, 0), ==, "cpu");
  g_assert_cmpint(c->main_replica, ==, 0);
  g_assert_cmpint(c->batch, ==, 100);
  g_assert_cmpint(c->epochs, ==, 20);
  g_assert_cmpint(c->optimizer, ==, TDM_OPTIMIZER_ADAM);
  g_assert_cmpfloat(c->lr, ==, 1e-3);
  g_assert_cmpint(c->strategy, ==, TDM_STRATEGY_ALLREDUCE);
  g_assert_cmpint(c->batchnorm, ==, TDM_BATCHNORM_PER_REPLICA);
  /* One rate per optimizer, from the base recipe the CLI and the window share. */
  g_assert_cmpfloat(c->lr, ==, tdm_base_recipe_lr(c->optimizer));
  g_assert_cmpfloat(tdm_base_recipe_lr(TDM_OPTIMIZER_SGD), ==, 0.01);
  g_assert_cmpfloat(tdm_base_recipe_lr(TDM_OPTIMIZER_MOMENTUM), ==, 0.01);
  g_assert_cmpfloat(tdm_base_recipe_lr(TDM_OPTIMIZER_NESTEROV), ==, 0.1);
  g_assert_cmpfloat(c->beta1, ==, 0.9);
  g_assert_cmpfloat(c->beta2, ==, 0.999);
  g_assert_cmpfloat(c->eps, ==, 1e-8);
  g_assert_cmpfloat(c->momentum, ==, 0.9);
  g_assert_cmpfloat(c->weight_decay, ==, 0.0);
  g_assert_cmpint(c->schedule, ==, TDM_SCHEDULE_CONSTANT);
  g_assert_cmpint(c->step_epochs, ==, 10);
  g_assert_cmpfloat(c->gamma, ==, 0.1);
  g_assert_cmpint(c->strategy, ==, TDM_STRATEGY_ALLREDUCE);
  /* Auto: bf16 where every device is a GPU with bfloat16 tensor cores, else fp32. */
  g_assert_cmpint(c->precision, ==, TDM_PRECISION_AUTO);
  g_assert_cmpuint(c->seed, ==, 0);
  g_assert_null(c->save_path);
  g_assert_cmpint(c->eval_batch, ==, 1000);
  g_assert_cmpuint(c->bucket_bytes, ==, 4 << 20);
  g_assert_cmpint(c->max_steps, ==, 0);

  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_config_validate(c, &error));
  g_assert_no_error(error);
}

static void
test_copy(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_assert_true(tdm_config_set_devices(c, "cuda:0,cuda:1", NULL));
  c->save_path = g_strdup("/tmp/x.safetensors");
  g_autoptr(TdmConfig) d = tdm_config_copy(c);
  g_assert_true(d->dataset != c->dataset);
  g_assert_cmpstr(device(d, 1), ==, "cuda:1");
  g_assert_cmpstr(d->save_path, ==, c->save_path);
  g_assert_true(d->save_path != c->save_path);
}

static void
assert_devices(const char *list, const char *const *expected)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_config_set_devices(c, list, &error));
  g_assert_no_error(error);
  g_assert_cmpint(tdm_config_replica_count(c), ==, g_strv_length((char **)expected));
  for (int i = 0; expected[i]; i++)
    g_assert_cmpstr(device(c, i), ==, expected[i]);
}

static void
test_devices(void)
{
  assert_devices("cpu", (const char *[]){"cpu", NULL});
  assert_devices("cpu:1", (const char *[]){"cpu", NULL});
  assert_devices("cpu:4", (const char *[]){"cpu", "cpu", "cpu", "cpu", NULL});
  assert_devices("cuda:0,cuda:1", (const char *[]){"cuda:0", "cuda:1", NULL});
  assert_devices("cuda:0,cuda:0", (const char *[]){"cuda:0", "cuda:0", NULL});
  assert_devices("cpu,cuda:0", (const char *[]){"cpu", "cuda:0", NULL});
  assert_devices(" cuda:2 , cpu:2 ", (const char *[]){"cuda:2", "cpu", "cpu", NULL});
  assert_devices("cpu:64", (const char *[]){
    "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu",
    "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu",
    "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu",
    "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu",
    "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "cpu", NULL});
}

static void
assert_device_error(const char *list, int code, const char *needle)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_config_set_devices(c, "cpu:2", NULL));
  g_assert_false(tdm_config_set_devices(c, list, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, code);
  g_test_message("%s → %s", list, error->message);
  g_assert_nonnull(strstr(error->message, "--devices"));
  g_assert_nonnull(strstr(error->message, needle));
  /* A failed parse leaves the old list alone. */
  g_assert_cmpint(tdm_config_replica_count(c), ==, 2);
}

static void
test_devices_errors(void)
{
  assert_device_error("cpu:0", TDM_ENGINE_ERROR_INVALID_OPTION, "cpu:0");
  assert_device_error("cpu:x", TDM_ENGINE_ERROR_INVALID_OPTION, "cpu:x");
  assert_device_error("cpu:-1", TDM_ENGINE_ERROR_INVALID_OPTION, "cpu:-1");
  assert_device_error("cpu:", TDM_ENGINE_ERROR_INVALID_OPTION, "cpu:");
  assert_device_error("cpu:65", TDM_ENGINE_ERROR_INVALID_OPTION, "cpu:65");
  assert_device_error("gpu:1", TDM_ENGINE_ERROR_DEVICE, "gpu:1");
  assert_device_error("cuda:x", TDM_ENGINE_ERROR_DEVICE, "cuda:x");
  assert_device_error("cuda:", TDM_ENGINE_ERROR_DEVICE, "cuda:");
  assert_device_error("cuda:-1", TDM_ENGINE_ERROR_DEVICE, "cuda:-1");
  assert_device_error("CPU", TDM_ENGINE_ERROR_DEVICE, "CPU");
  assert_device_error("", TDM_ENGINE_ERROR_DEVICE, "no device");
  assert_device_error("cpu,,cuda:0", TDM_ENGINE_ERROR_DEVICE, "empty");
  assert_device_error("cpu,", TDM_ENGINE_ERROR_DEVICE, "empty");
  assert_device_error("cpu:40,cpu:25", TDM_ENGINE_ERROR_INVALID_OPTION, "more than 64");
  assert_device_error("cpu:64,cuda:0", TDM_ENGINE_ERROR_INVALID_OPTION, "more than 64");
}

/* Applies `change` to a valid config and checks the error names `option`. */
typedef void (*Change)(TdmConfig *c);

static void
assert_invalid(Change change, int code, const char *option)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autoptr(GError) error = NULL;
  change(c);
  g_assert_false(tdm_config_validate(c, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, code);
  g_test_message("%s", error->message);
  g_assert_true(g_str_has_prefix(error->message, option));
}

static void batch_zero(TdmConfig *c) { c->batch = 0; }
static void batch_negative(TdmConfig *c) { c->batch = -5; }
static void batch_small(TdmConfig *c)
{
  tdm_config_set_devices(c, "cpu:4", NULL);
  c->batch = 3;
}
static void epochs_zero(TdmConfig *c) { c->epochs = 0; }
static void lr_zero(TdmConfig *c) { c->lr = 0; }
static void lr_negative(TdmConfig *c) { c->lr = -0.1; }
static void lr_nan(TdmConfig *c) { c->lr = NAN; }
static void lr_inf(TdmConfig *c) { c->lr = INFINITY; }
static void momentum_one(TdmConfig *c) { c->momentum = 1.0; }
static void momentum_negative(TdmConfig *c) { c->momentum = -0.5; }
static void beta1_one(TdmConfig *c) { c->beta1 = 1.0; }
static void beta2_negative(TdmConfig *c) { c->beta2 = -0.1; }
static void eps_zero(TdmConfig *c) { c->eps = 0; }
static void main_out(TdmConfig *c)
{
  tdm_config_set_devices(c, "cpu:2", NULL);
  c->main_replica = 2;
}
static void main_negative(TdmConfig *c) { c->main_replica = -1; }
static void weight_decay_negative(TdmConfig *c) { c->weight_decay = -1e-4; }
static void eval_batch_zero(TdmConfig *c) { c->eval_batch = 0; }
static void step_epochs_zero(TdmConfig *c) { c->step_epochs = 0; }
static void gamma_zero(TdmConfig *c) { c->gamma = 0; }
static void dataset_empty(TdmConfig *c)
{
  g_free(c->dataset);
  c->dataset = g_strdup("");
}
static void network_empty(TdmConfig *c)
{
  g_free(c->network);
  c->network = g_strdup("");
}
static void devices_none(TdmConfig *c)
{
  c->replicas = 0;
}
static void devices_bogus(TdmConfig *c)
{
  /* A kind no name gives: set by code, not parsed. */
  c->devices[1] = (TdmDeviceId){(TdmBackendKind)7, 0};
  c->replicas = 2;
}
static void optimizer_bogus(TdmConfig *c) { c->optimizer = (TdmOptimizerKind)7; }
static void strategy_bogus(TdmConfig *c) { c->strategy = (TdmStrategy)7; }
static void schedule_bogus(TdmConfig *c) { c->schedule = (TdmSchedule)-1; }
static void precision_bogus(TdmConfig *c) { c->precision = (TdmPrecision)9; }
static void save_empty(TdmConfig *c) { c->save_path = g_strdup(""); }
static void max_steps_negative(TdmConfig *c) { c->max_steps = -1; }
static void exact_chunk_zero(TdmConfig *c) { c->exact = TRUE; c->exact_chunk = 0; }

static void
test_validate(void)
{
  const int opt = TDM_ENGINE_ERROR_INVALID_OPTION;
  assert_invalid(batch_zero, opt, "--batch");
  assert_invalid(batch_negative, opt, "--batch");
  assert_invalid(epochs_zero, opt, "--epochs");
  assert_invalid(lr_zero, opt, "--lr");
  assert_invalid(lr_negative, opt, "--lr");
  assert_invalid(lr_nan, opt, "--lr");
  assert_invalid(lr_inf, opt, "--lr");
  assert_invalid(momentum_one, opt, "--momentum");
  assert_invalid(momentum_negative, opt, "--momentum");
  assert_invalid(beta1_one, opt, "--beta1");
  assert_invalid(beta2_negative, opt, "--beta2");
  assert_invalid(eps_zero, opt, "--eps");
  assert_invalid(main_out, opt, "--main");
  assert_invalid(main_negative, opt, "--main");
  assert_invalid(weight_decay_negative, opt, "--weight-decay");
  assert_invalid(eval_batch_zero, opt, "--eval-batch");
  assert_invalid(step_epochs_zero, opt, "--step-epochs");
  assert_invalid(gamma_zero, opt, "--gamma");
  assert_invalid(dataset_empty, opt, "--dataset");
  assert_invalid(network_empty, opt, "--network");
  assert_invalid(devices_none, opt, "--devices");
  assert_invalid(devices_bogus, TDM_ENGINE_ERROR_DEVICE, "--devices");
  assert_invalid(optimizer_bogus, opt, "--optimizer");
  assert_invalid(strategy_bogus, opt, "--strategy");
  assert_invalid(schedule_bogus, opt, "--schedule");
  assert_invalid(precision_bogus, opt, "--precision");
  assert_invalid(save_empty, opt, "--save");
  assert_invalid(max_steps_negative, opt, "--max-steps");
  assert_invalid(exact_chunk_zero, opt, "--exact-chunk");

  /* The message the CLI shows for the classic mistake, word for word. */
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autoptr(GError) error = NULL;
  batch_small(c);
  g_assert_false(tdm_config_validate(c, &error));
  g_assert_cmpstr(error->message, ==,
                  "--batch 3 is smaller than the 4 devices: each device needs at least "
                  "one sample");

  /* Edges that are fine. */
  g_autoptr(TdmConfig) ok = tdm_config_new();
  tdm_config_set_devices(ok, "cpu:4", NULL);
  ok->batch = 4;
  ok->main_replica = 3;
  ok->momentum = 0;
  ok->beta1 = 0;
  ok->epochs = 1;
  g_assert_true(tdm_config_validate(ok, NULL));
}

/* `name` as a person types it for the row `key` (the flag, the GSettings choice, the
 * JSON field) sets the row, which reads back as `name`. */
static TdmConfig *
parsed(const char *key, const char *name)
{
  const TdmField *field = tdm_config_field(key);
  TdmConfig *c = tdm_config_new();
  g_autoptr(GError) error = NULL;

  g_assert_nonnull(field);
  g_assert_true(tdm_field_parse(field, c, name, &error));
  g_assert_no_error(error);
  g_autofree char *text = tdm_field_text(field, c);
  g_assert_cmpstr(text, ==, name);
  return c;
}

/* An unknown `name` for the row `key` is refused and leaves the row as it was. */
static void
refused(const char *key, const char *name)
{
  const TdmField *field = tdm_config_field(key);
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autofree char *before = tdm_field_text(field, c);
  g_autoptr(GError) error = NULL;

  g_assert_false(tdm_field_parse(field, c, name, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION);
  g_autofree char *after = tdm_field_text(field, c);
  g_assert_cmpstr(after, ==, before);
}

static void
test_names(void)
{
  struct {
    const char *name;
    int value;
  } optimizers[] = {{"sgd", TDM_OPTIMIZER_SGD}, {"momentum", TDM_OPTIMIZER_MOMENTUM},
                    {"adam", TDM_OPTIMIZER_ADAM}, {"nesterov", TDM_OPTIMIZER_NESTEROV}},
    strategies[] = {{"main", TDM_STRATEGY_MAIN}, {"allreduce", TDM_STRATEGY_ALLREDUCE}},
    schedules[] = {{"constant", TDM_SCHEDULE_CONSTANT}, {"step", TDM_SCHEDULE_STEP},
                   {"cosine", TDM_SCHEDULE_COSINE}, {"linear", TDM_SCHEDULE_LINEAR}},
    precisions[] = {{"fp32", TDM_PRECISION_FP32}, {"tf32", TDM_PRECISION_TF32},
                   {"bf16", TDM_PRECISION_BF16}, {"auto", TDM_PRECISION_AUTO}};

  for (gsize i = 0; i < G_N_ELEMENTS(optimizers); i++) {
    g_autoptr(TdmConfig) c = parsed("optimizer", optimizers[i].name);
    g_assert_cmpint(c->optimizer, ==, optimizers[i].value);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(strategies); i++) {
    TdmStrategy s = 99;
    g_assert_cmpstr(tdm_strategy_name(strategies[i].value), ==, strategies[i].name);
    g_assert_true(tdm_strategy_from_name(strategies[i].name, &s));
    g_assert_cmpint(s, ==, strategies[i].value);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(schedules); i++) {
    g_autoptr(TdmConfig) c = parsed("schedule", schedules[i].name);
    g_assert_cmpint(c->schedule, ==, schedules[i].value);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(precisions); i++) {
    TdmPrecision p = 99;
    g_assert_cmpstr(tdm_precision_name(precisions[i].value), ==, precisions[i].name);
    g_assert_true(tdm_precision_from_name(precisions[i].name, &p));
    g_assert_cmpint(p, ==, precisions[i].value);
  }

  refused("optimizer", "Adam");
  refused("optimizer", "");
  TdmStrategy s;
  g_assert_false(tdm_strategy_from_name("ring", &s));
  refused("schedule", "exponential");
  {
    g_autoptr(TdmConfig) c = parsed("batchnorm", "sync");
    g_assert_cmpint(c->batchnorm, ==, TDM_BATCHNORM_SYNC);
    c->batchnorm = TDM_BATCHNORM_PER_REPLICA;
    g_autofree char *text = tdm_field_text(tdm_config_field("batchnorm"), c);
    g_assert_cmpstr(text, ==, "per-replica");
  }
  refused("batchnorm", "global");
  {
    g_autoptr(TdmConfig) c = parsed("weight_decay_on", "weights");
    g_assert_cmpint(c->decay_scope, ==, TDM_DECAY_WEIGHTS);
  }
  {
    g_autoptr(TdmConfig) c = parsed("flip", "auto");
    g_assert_cmpint(c->flip, ==, TDM_FLIP_AUTO);
  }
  refused("flip", "yes");
  TdmPrecision p;
  g_assert_false(tdm_precision_from_name("fp16", &p));
}

static TdmConfig *
unusual_config(void)
{
  TdmConfig *c = tdm_config_new();
  g_free(c->dataset);
  c->dataset = g_strdup("/data/my “set”\n\\ é");
  g_free(c->network);
  c->network = g_strdup("conv32k3p1,relu,pool2,fc10");
  tdm_config_set_devices(c, "cuda:1,cuda:0,cpu", NULL);
  c->main_replica = 2;
  c->batch = 4096;
  c->epochs = 123;
  c->optimizer = TDM_OPTIMIZER_MOMENTUM;
  c->lr = 0.1 / 3.0;             /* needs all 17 digits to survive */
  c->momentum = 0.95;
  c->beta1 = 0.8;
  c->beta2 = 0.9999;
  c->eps = 1e-7;
  c->weight_decay = 5e-4;
  c->schedule = TDM_SCHEDULE_STEP;
  c->step_epochs = 7;
  c->gamma = 0.5;
  c->strategy = TDM_STRATEGY_MAIN;
  c->precision = TDM_PRECISION_TF32;
  c->seed = G_MAXUINT64 - 5;     /* past int64: must not wrap */
  c->save_path = g_strdup("/tmp/run.safetensors");
  c->eval_batch = 333;
  c->bucket_bytes = (size_t)1 << 33;
  c->max_steps = 1234567;
  c->batchnorm = TDM_BATCHNORM_SYNC;
  c->decay_scope = TDM_DECAY_WEIGHTS;
  c->warmup_epochs = 1.0 / 7.0;
  c->label_smoothing = 0.1;
  c->crop_pad = 3;
  c->flip = TDM_FLIP_AUTO;
  c->test_flip = TRUE;
  c->test_shift = 2;
  c->exact = TRUE;
  c->exact_chunk = 24;
  return c;
}

static void
assert_config_equal(const TdmConfig *a, const TdmConfig *b)
{
  g_assert_cmpstr(a->dataset, ==, b->dataset);
  g_assert_cmpstr(a->network, ==, b->network);
  g_assert_cmpint(a->replicas, ==, b->replicas);
  for (int i = 0; i < a->replicas; i++)
    g_assert_true(tdm_device_id_equal(a->devices[i], b->devices[i]));
  g_assert_cmpint(a->main_replica, ==, b->main_replica);
  g_assert_cmpint(a->batch, ==, b->batch);
  g_assert_cmpint(a->epochs, ==, b->epochs);
  g_assert_cmpint(a->optimizer, ==, b->optimizer);
  g_assert_cmpmem(&a->lr, sizeof(double), &b->lr, sizeof(double));
  g_assert_cmpmem(&a->momentum, sizeof(double), &b->momentum, sizeof(double));
  g_assert_cmpmem(&a->beta1, sizeof(double), &b->beta1, sizeof(double));
  g_assert_cmpmem(&a->beta2, sizeof(double), &b->beta2, sizeof(double));
  g_assert_cmpmem(&a->eps, sizeof(double), &b->eps, sizeof(double));
  g_assert_cmpmem(&a->weight_decay, sizeof(double), &b->weight_decay, sizeof(double));
  g_assert_cmpint(a->schedule, ==, b->schedule);
  g_assert_cmpint(a->step_epochs, ==, b->step_epochs);
  g_assert_cmpmem(&a->gamma, sizeof(double), &b->gamma, sizeof(double));
  g_assert_cmpint(a->strategy, ==, b->strategy);
  g_assert_cmpint(a->precision, ==, b->precision);
  g_assert_cmpuint(a->seed, ==, b->seed);
  g_assert_cmpstr(a->save_path, ==, b->save_path);
  g_assert_cmpint(a->eval_batch, ==, b->eval_batch);
  g_assert_cmpuint(a->bucket_bytes, ==, b->bucket_bytes);
  g_assert_cmpint(a->max_steps, ==, b->max_steps);
  g_assert_cmpint(a->batchnorm, ==, b->batchnorm);
  g_assert_cmpint(a->decay_scope, ==, b->decay_scope);
  g_assert_cmpmem(&a->warmup_epochs, sizeof(double), &b->warmup_epochs, sizeof(double));
  g_assert_cmpmem(&a->label_smoothing, sizeof(double), &b->label_smoothing, sizeof(double));
  g_assert_cmpint(a->crop_pad, ==, b->crop_pad);
  g_assert_cmpint(a->flip, ==, b->flip);
  g_assert_cmpint(a->test_flip, ==, b->test_flip);
  g_assert_cmpint(a->test_shift, ==, b->test_shift);
  g_assert_cmpint(a->exact, ==, b->exact);
  g_assert_cmpint(a->exact_chunk, ==, b->exact_chunk);
}

/* A checkpoint written before the recipe's fields reads with their defaults. */
static void
test_json_without_recipe(void)
{
  g_autoptr(TdmConfig) c = unusual_config();
  g_autofree char *json = tdm_config_to_json(c);
  g_autoptr(JsonNode) root = json_from_string(json, NULL);
  JsonObject *o = json_node_get_object(root);
  const char *recipe[] = {"batchnorm", "weight_decay_on", "warmup_epochs", "label_smoothing",
                          "crop_pad", "flip", "test_flip", "test_shift"};
  for (gsize i = 0; i < G_N_ELEMENTS(recipe); i++)
    json_object_remove_member(o, recipe[i]);
  g_autofree char *old = json_to_string(root, FALSE);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmConfig) back = tdm_config_from_json(old, &error);
  g_assert_no_error(error);
  g_autoptr(TdmConfig) defaults = tdm_config_new();
  g_assert_cmpint(back->batchnorm, ==, defaults->batchnorm);
  g_assert_cmpint(back->decay_scope, ==, defaults->decay_scope);
  g_assert_cmpfloat(back->label_smoothing, ==, 0.0);
  g_assert_cmpint(back->crop_pad, ==, 0);
  g_assert_false(back->test_flip);
  g_assert_cmpint(back->test_shift, ==, 0);
  g_assert_cmpint(back->epochs, ==, c->epochs);
}

/* "resnet" brings its recipe; other networks change nothing. */
static void
test_preset(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autoptr(TdmConfig) before = tdm_config_copy(c);
  g_assert_false(tdm_config_apply_preset(c, "cnn"));
  assert_config_equal(c, before);
  g_assert_true(tdm_config_apply_preset(c, "resnet"));
  g_assert_cmpint(c->optimizer, ==, TDM_OPTIMIZER_NESTEROV);
  g_assert_cmpint(c->batch, ==, 512);
  g_assert_cmpint(c->decay_scope, ==, TDM_DECAY_WEIGHTS);
  g_assert_cmpint(c->schedule, ==, TDM_SCHEDULE_LINEAR);
  g_assert_cmpfloat(c->warmup_epochs, >, 0);
  g_assert_cmpfloat(c->label_smoothing, >, 0);
  g_assert_cmpint(c->crop_pad, ==, 0);
  g_assert_cmpint(c->flip, ==, TDM_FLIP_AUTO);
  g_assert_cmpint(c->epochs, ==, 5);
  g_assert_cmpfloat(c->lr, ==, 0.6);
  g_assert_true(c->test_flip);
  g_assert_true(tdm_config_validate(c, NULL));
  /* Flips: auto means on, except for digits. */
  g_assert_true(tdm_config_flips(c, "fashion-mnist"));
  g_assert_true(tdm_config_flips(c, "cifar10"));
  g_assert_false(tdm_config_flips(c, "mnist"));
  c->flip = TDM_FLIP_ON;
  g_assert_true(tdm_config_flips(c, "mnist"));
  c->flip = TDM_FLIP_OFF;
  g_assert_false(tdm_config_flips(c, "cifar10"));
}

static void
test_recipe_validation(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autoptr(GError) error = NULL;
  c->label_smoothing = 1.0;
  g_assert_false(tdm_config_validate(c, &error));
  g_assert_nonnull(strstr(error->message, "--label-smoothing"));
  g_clear_error(&error);
  c->label_smoothing = 0.1;
  c->warmup_epochs = c->epochs + 1;
  g_assert_false(tdm_config_validate(c, &error));
  g_assert_nonnull(strstr(error->message, "--warmup"));
  g_clear_error(&error);
  c->warmup_epochs = 1;
  c->crop_pad = -1;
  g_assert_false(tdm_config_validate(c, &error));
  g_assert_nonnull(strstr(error->message, "--crop"));
  g_clear_error(&error);
  c->crop_pad = 0;
  const int bad_shifts[] = {-1, TDM_TEST_SHIFT_MAX + 1};
  for (gsize i = 0; i < G_N_ELEMENTS(bad_shifts); i++) {
    c->test_shift = bad_shifts[i];
    g_assert_false(tdm_config_validate(c, &error));
    g_assert_nonnull(strstr(error->message, "--test-shift"));
    g_clear_error(&error);
  }
  c->test_shift = TDM_TEST_SHIFT_MAX;
  g_assert_true(tdm_config_validate(c, NULL));
}

static void
test_json_round_trip(void)
{
  g_autoptr(TdmConfig) defaults = tdm_config_new();
  g_autofree char *json1 = tdm_config_to_json(defaults);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmConfig) back1 = tdm_config_from_json(json1, &error);
  g_assert_no_error(error);
  assert_config_equal(defaults, back1);

  g_autoptr(TdmConfig) c = unusual_config();
  g_autofree char *json2 = tdm_config_to_json(c);
  g_test_message("%s", json2);
  g_autoptr(TdmConfig) back2 = tdm_config_from_json(json2, &error);
  g_assert_no_error(error);
  assert_config_equal(c, back2);

  /* And once more, so writing what was read gives the same text. */
  g_autofree char *json3 = tdm_config_to_json(back2);
  g_assert_cmpstr(json2, ==, json3);

  /* A small seed is a plain JSON integer, readable by anything. */
  g_assert_nonnull(strstr(json1, "\"seed\":0"));
  /* Auto is kept as asked, never as what it resolved to on this machine. */
  g_assert_nonnull(strstr(json1, "\"precision\":\"auto\""));
  g_assert_cmpint(back1->precision, ==, TDM_PRECISION_AUTO);
}

/* Rewrites one member of the default config's JSON; NULL removes it. */
static char *
json_with(const char *field, JsonNode *value)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  /* json_to_string() below is json-glib's generator, which before 1.8 writes 1e-08
   * as the invalid "1e-08.0"; a mantissa with a point keeps it out of trouble. */
  c->eps = 2.5e-8;
  g_autofree char *json = tdm_config_to_json(c);
  g_autoptr(JsonNode) root = json_from_string(json, NULL);
  JsonObject *o = json_node_get_object(root);
  if (value)
    json_object_set_member(o, field, value);
  else
    json_object_remove_member(o, field);
  return json_to_string(root, FALSE);
}

static void
assert_json_rejected(const char *json, const char *needle)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmConfig) c = tdm_config_from_json(json, &error);
  g_assert_null(c);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION);
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, needle));
}

static JsonNode *
string_node(const char *s)
{
  JsonNode *n = json_node_new(JSON_NODE_VALUE);
  json_node_set_string(n, s);
  return n;
}

static JsonNode *
int_node(gint64 v)
{
  JsonNode *n = json_node_new(JSON_NODE_VALUE);
  json_node_set_int(n, v);
  return n;
}

static JsonNode *
double_node(double v)
{
  JsonNode *n = json_node_new(JSON_NODE_VALUE);
  json_node_set_double(n, v);
  return n;
}

static JsonNode *
array_node(JsonArray *array)
{
  JsonNode *n = json_node_new(JSON_NODE_ARRAY);
  json_node_take_array(n, array);
  return n;
}

static void
test_json_rejects(void)
{
  assert_json_rejected("", "JSON object");
  assert_json_rejected("{\"dataset\": ", "not valid JSON");
  /* The parser quotes the token it choked on; a raw newline or escape in the file
   * must not split or colour the one-line message. */
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(TdmConfig) c =
        tdm_config_from_json("{\"schedule\":\"\n{\"type\":\"phases\"}", &error);
    g_assert_null(c);
    g_assert_nonnull(error);
    g_assert_null(strchr(error->message, '\n'));
    g_assert_null(strchr(error->message, '\x1b'));
  }
  assert_json_rejected("[1, 2]", "JSON object");
  assert_json_rejected("42", "JSON object");
  assert_json_rejected("{}", "“dataset” is missing");

  const char *fields[] = {
    "dataset", "network", "devices", "main_replica", "batch", "epochs", "optimizer", "lr",
    "momentum", "beta1", "beta2", "eps", "weight_decay", "schedule", "step_epochs", "gamma",
    "strategy", "precision", "seed", "save_path", "eval_batch", "bucket_bytes", "max_steps",
  };
  for (gsize i = 0; i < G_N_ELEMENTS(fields); i++) {
    g_autofree char *json = json_with(fields[i], NULL);
    g_autofree char *needle = g_strdup_printf("“%s” is missing", fields[i]);
    assert_json_rejected(json, needle);
  }

  struct {
    const char *field;
    JsonNode *value;
    const char *needle;
  } bad[] = {
    {"dataset", int_node(3), "“dataset” must be a string"},
    {"network", json_node_new(JSON_NODE_NULL), "“network” must be a string"},
    {"devices", string_node("cpu"), "“devices” must be an array"},
    {"devices", array_node(json_array_new()), "“devices” must list"},
    {"batch", string_node("100"), "“batch” must be a whole number"},
    {"batch", double_node(100.5), "“batch” must be a whole number"},
    {"batch", int_node((gint64)1 << 40), "“batch” is out of range"},
    {"epochs", json_node_init_boolean(json_node_alloc(), TRUE), "“epochs” must be a whole"},
    {"lr", string_node("0.001"), "“lr” must be a number"},
    {"optimizer", string_node("rmsprop"), "“optimizer” has the unknown value “rmsprop”"},
    {"optimizer", int_node(2), "“optimizer” must be a string"},
    {"schedule", string_node("exponential"), "“schedule” has the unknown value"},
    {"batchnorm", string_node("global"), "“batchnorm” has the unknown value"},
    {"flip", int_node(1), "“flip” must be a string"},
    {"crop_pad", double_node(2.5), "“crop_pad” must be a whole number"},
    {"test_flip", int_node(1), "“test_flip” must be true or false"},
    {"test_shift", string_node("1"), "“test_shift” must be a whole number"},
    {"strategy", string_node("ring"), "“strategy” has the unknown value"},
    {"precision", string_node("fp16"), "“precision” has the unknown value"},
    {"seed", int_node(-1), "“seed” must be a non-negative"},
    {"seed", string_node("twelve"), "“seed” must be a non-negative"},
    {"save_path", int_node(1), "“save_path” must be a string or null"},
    {"bucket_bytes", int_node(-1), "“bucket_bytes” is out of range"},
    {"max_steps", double_node(1.5), "“max_steps” must be a whole number"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *json = json_with(bad[i].field, bad[i].value);
    assert_json_rejected(json, bad[i].needle);
  }

  /* A device list with a non-string entry. */
  JsonArray *mixed = json_array_new();
  json_array_add_string_element(mixed, "cpu");
  json_array_add_int_element(mixed, 0);
  g_autofree char *json = json_with("devices", array_node(mixed));
  assert_json_rejected(json, "“devices” must be an array of strings");

  /* Integers are fine where reals are expected. */
  g_autofree char *lr_int = json_with("lr", int_node(1));
  g_autoptr(TdmConfig) c = tdm_config_from_json(lr_int, NULL);
  g_assert_nonnull(c);
  g_assert_cmpfloat(c->lr, ==, 1.0);
}

static void
test_lr_schedules(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  c->lr = 0.1;
  c->epochs = 20;

  c->schedule = TDM_SCHEDULE_CONSTANT;
  g_assert_cmpfloat(tdm_config_lr_at(c, 0), ==, 0.1);
  g_assert_cmpfloat(tdm_config_lr_at(c, 7.5), ==, 0.1);
  g_assert_cmpfloat(tdm_config_lr_at(c, 25), ==, 0.1);

  c->schedule = TDM_SCHEDULE_STEP;
  c->step_epochs = 5;
  c->gamma = 0.5;
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 0), 0.1, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 4.999), 0.1, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 5), 0.05, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 9.5), 0.05, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 10), 0.025, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 19.99), 0.0125, 1e-15);

  c->schedule = TDM_SCHEDULE_COSINE;
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 0), 0.1, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 10), 0.05, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 5), 0.1 * 0.5 * (1 + cos(G_PI / 4)),
                                 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 20), 0.0, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 30), 0.0, 1e-15);
  /* Decreasing all the way. */
  double last = INFINITY;
  for (double e = 0; e <= 20; e += 0.25) {
    double lr = tdm_config_lr_at(c, e);
    g_assert_cmpfloat(lr, <=, last);
    last = lr;
  }
}

/* Warm-up from lr/10 to lr, then the linear or cosine decay over what is left. */
static void
test_lr_warmup_linear(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  c->lr = 0.2;
  c->epochs = 10;
  c->warmup_epochs = 2;
  c->schedule = TDM_SCHEDULE_LINEAR;
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 0), 0.02, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 1), 0.2 * 0.55, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 2), 0.2, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 6), 0.1, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 10), 0.0, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 12), 0.0, 1e-15);
  c->schedule = TDM_SCHEDULE_COSINE;
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 6), 0.1, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 4), 0.1 * (1 + cos(G_PI / 4)), 1e-15);
  /* Without warm-up the linear decay spans the run. */
  c->warmup_epochs = 0;
  c->schedule = TDM_SCHEDULE_LINEAR;
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 0), 0.2, 1e-15);
  g_assert_cmpfloat_with_epsilon(tdm_config_lr_at(c, 2.5), 0.15, 1e-15);
}

/* The pairs exports print: every setting the brief of an export names, as the engine
 * spells it, the optimizer's own parameters only, numbers in the C locale. */
static const char *
describe_value(char **pairs, const char *key)
{
  for (int i = 0; pairs[i] && pairs[i + 1]; i += 2)
    if (g_str_equal(pairs[i], key))
      return pairs[i + 1];
  return NULL;
}

static void
test_describe(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autoptr(GError) error = NULL;

  g_assert_true(tdm_config_set_devices(c, "cpu:2,cuda:1", &error));
  c->main_replica = 2;
  c->optimizer = TDM_OPTIMIZER_MOMENTUM;
  c->lr = 0.05;
  c->batch = 256;
  c->epochs = 3;
  c->seed = 18446744073709551615ull;
  c->precision = TDM_PRECISION_BF16;

  g_auto(GStrv) pairs = tdm_config_describe(c);
  g_assert_nonnull(pairs);
  g_assert_cmpuint(g_strv_length(pairs) % 2, ==, 0);
  g_assert_cmpstr(pairs[0], ==, "dataset");
  g_assert_cmpstr(describe_value(pairs, "dataset"), ==, "fashion-mnist");
  g_assert_cmpstr(describe_value(pairs, "network"), ==, "mlp");
  g_assert_cmpstr(describe_value(pairs, "devices"), ==, "cpu,cpu,cuda:1");
  g_assert_cmpstr(describe_value(pairs, "main"), ==, "cuda:1 (replica 2)");
  g_assert_cmpstr(describe_value(pairs, "strategy"), ==, "allreduce");
  g_assert_cmpstr(describe_value(pairs, "batch"), ==, "256");
  g_assert_cmpstr(describe_value(pairs, "epochs"), ==, "3");
  g_assert_cmpstr(describe_value(pairs, "optimizer"), ==, "momentum");
  g_assert_cmpstr(describe_value(pairs, "lr"), ==, "0.05");
  g_assert_cmpstr(describe_value(pairs, "momentum"), ==, "0.9");
  g_assert_null(describe_value(pairs, "beta1"));
  g_assert_null(describe_value(pairs, "max_steps"));
  g_assert_cmpstr(describe_value(pairs, "precision"), ==, "bf16");
  g_assert_cmpstr(describe_value(pairs, "seed"), ==, "18446744073709551615");
  g_assert_cmpstr(describe_value(pairs, "schedule"), ==, "constant");

  /* Adam's parameters instead of the momentum, and a test run's step limit. */
  c->optimizer = TDM_OPTIMIZER_ADAM;
  c->max_steps = 40;
  g_auto(GStrv) adam = tdm_config_describe(c);
  g_assert_null(describe_value(adam, "momentum"));
  g_assert_cmpstr(describe_value(adam, "beta2"), ==, "0.999");
  g_assert_cmpstr(describe_value(adam, "max_steps"), ==, "40");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/config/defaults", test_defaults);
  g_test_add_func("/config/copy", test_copy);
  g_test_add_func("/config/devices", test_devices);
  g_test_add_func("/config/devices-errors", test_devices_errors);
  g_test_add_func("/config/validate", test_validate);
  g_test_add_func("/config/names", test_names);
  g_test_add_func("/config/json-round-trip", test_json_round_trip);
  g_test_add_func("/config/json-rejects", test_json_rejects);
  g_test_add_func("/config/lr-schedules", test_lr_schedules);
  g_test_add_func("/config/lr-warmup-linear", test_lr_warmup_linear);
  g_test_add_func("/config/json-without-recipe", test_json_without_recipe);
  g_test_add_func("/config/preset", test_preset);
  g_test_add_func("/config/recipe-validation", test_recipe_validation);
  g_test_add_func("/config/describe", test_describe);
  return g_test_run();
}
