/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-zoo.c — networks from the model zoo against PyTorch itself: padded and strided
 * pools against torch's, torchvision's ResNet-18 and ResNet-50 (seeded weights, BN
 * statistics of real activations) loaded with --init's loader giving torch's
 * eval-mode logits (from safetensors, from the .pth torch.save wrote, and through
 * --init torchvision from torch.hub's folder), one SGD step from the same weights
 * within a multiple of PyTorch's own float32 distance from its float64 step,
 * Tandem's cnn and resnet checkpoints read by the module tools/torch_module.py builds
 * (and resnet18's by torchvision's own) predicting what Tandem predicts, and
 * fine-tuning with a frozen backbone leaving it bit for bit. The numbers come from
 * tests/engine/zoo-reference.py (Debian's python3-torch and python3-torchvision); without
 * them these tests skip and say so. Bad inputs to --init and --freeze are in
 * test-cli-zoo.sh.
 */
#include "tdm-backend.h"
#include "tdm-checkpoint.h"
#include "tdm-classifier.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-finetune.h"
#include "tdm-network.h"
#include "tdm-trainer.h"
#include "remove-tree.h"

#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PYTHON "/usr/bin/python3"

static char *ref_dir;          /* torchvision's references, or NULL */
static char *skip_reason;

static char *
script_path(void)
{
  return g_test_build_filename(G_TEST_DIST, "zoo-reference.py", NULL);
}

/* Runs zoo-reference.py with args; FALSE (and skip_reason) when torch is missing. */
static gboolean
reference(const char *const *args)
{
  g_autofree char *script = script_path();
  GStrvBuilder *b = g_strv_builder_new();
  g_strv_builder_add(b, PYTHON);
  g_strv_builder_add(b, script);
  g_strv_builder_addv(b, (const char **)args);
  g_auto(GStrv) argv = g_strv_builder_end(b);
  g_strv_builder_unref(b);
  g_autofree char *out = NULL, *err = NULL;
  int status = 0;
  g_autoptr(GError) error = NULL;
  if (!g_file_test(PYTHON, G_FILE_TEST_IS_EXECUTABLE)) {
    skip_reason = g_strdup("no " PYTHON);
    return FALSE;
  }
  g_assert_true(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                             &status, &error));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    skip_reason = g_strdup(g_strstrip(out));
    return FALSE;
  }
  if (!g_spawn_check_wait_status(status, NULL))
    g_error("zoo-reference.py %s failed:\n%s%s", args[0], out, err);
  return TRUE;
}

static gboolean
need_references(void)
{
  if (ref_dir != NULL)
    return TRUE;
  if (skip_reason != NULL) {
    g_test_skip(skip_reason);
    return FALSE;
  }
  char *dir = g_dir_make_tmp("tandem-zoo-XXXXXX", NULL);
  const char *args[] = {"torchvision", dir, NULL};
  if (!reference(args)) {
    g_test_skip(skip_reason);
    return FALSE;
  }
  ref_dir = dir;
  return TRUE;
}

static float *
read_floats(const char *name, size_t *count)
{
  g_autofree char *path = g_build_filename(ref_dir, name, NULL);
  char *data = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(path, &data, &len, NULL));
  *count = len / sizeof(float);
  return (float *)data;
}

/* Largest |a − b| over the largest |b|: the error relative to the values' scale. */
static double
relative_error(const float *a, const float *b, size_t n)
{
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < n; i++) {
    diff = MAX(diff, fabs((double)a[i] - b[i]));
    scale = MAX(scale, fabs((double)b[i]));
  }
  return diff / scale;
}

/* The comparisons with PyTorch are against its results in float64, within a multiple
 * of how far its own float32 results are from them on the same inputs: Tandem's
 * rounding against PyTorch's. Its Winograd F(4×4, 3×3) convolutions round more than
 * direct ones (an order of magnitude in the literature; up to 3× measured here). */
#define ROUNDING_MARGIN 16.0
/* Float32's resolution, where the distance measured is float32's rounding alone. */
#define FLOAT_FLOOR 0x1p-22

/* The float32 distance zoo-reference.py wrote beside a float64 result. */
static double
read_gap(const char *name)
{
  g_autofree char *path = g_strdup_printf("%s/%s.gap", ref_dir, name);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  double gap = g_ascii_strtod(text, NULL);
  g_assert_cmpfloat(gap, >=, 0);
  return gap;
}

static void
test_pools(void)
{
  if (!need_references())
    return;
  g_autofree char *path = g_build_filename(ref_dir, "pool-cases.txt", NULL);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(g_strstrip(text), "\n", -1);
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  for (int i = 0; lines[i] != NULL; i++) {
    char kind[8];
    TdmPool2d g = {0};
    int unused;
    g_assert_cmpint(sscanf(lines[i], "%7s %d %d %d %d %d %d %d %d", kind, &g.n, &g.h, &g.w,
                           &g.c, &g.k, &g.s, &g.p, &unused), ==, 9);
    g.oh = (g.h + 2 * g.p - g.k) / g.s + 1;
    g.ow = (g.w + 2 * g.p - g.k) / g.s + 1;
    g_assert_true(tdm_pool2d_valid(g));
    size_t nx, ny, ndy, ndx;
    g_autofree char *fx = g_strdup_printf("pool%d-x.bin", i);
    g_autofree char *fy = g_strdup_printf("pool%d-y.bin", i);
    g_autofree char *fdy = g_strdup_printf("pool%d-dy.bin", i);
    g_autofree char *fdx = g_strdup_printf("pool%d-dx.bin", i);
    g_autofree float *x = read_floats(fx, &nx), *y = read_floats(fy, &ny);
    g_autofree float *dy = read_floats(fdy, &ndy), *dx = read_floats(fdx, &ndx);
    g_assert_cmpuint(ny, ==, (size_t)g.n * g.oh * g.ow * g.c);
    g_autofree float *my = g_new(float, ny), *mdx = g_new(float, nx);
    g_autofree int32_t *argmax = g_new(int32_t, ny);
    if (g_str_equal(kind, "max")) {
      tdm_backend_maxpool2d_forward(b, my, TDM_DTYPE_F32, argmax, x, TDM_DTYPE_F32, g);
      tdm_backend_maxpool2d_backward(b, mdx, TDM_DTYPE_F32, dy, TDM_DTYPE_F32, argmax, g);
    } else {
      tdm_backend_avgpool2d_forward(b, my, x, g);
      tdm_backend_avgpool2d_backward(b, mdx, dy, g);
    }
    g_assert_true(tdm_backend_check(b, &error));
    g_assert_cmpfloat(relative_error(my, y, ny), <, 1e-6);
    g_assert_cmpfloat(relative_error(mdx, dx, nx), <, 1e-6);
  }
  tdm_backend_free(b);
}

static uint8_t *
read_images(const char *name, size_t *bytes)
{
  g_autofree char *path = g_build_filename(ref_dir, name, NULL);
  char *data = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(path, &data, &len, NULL));
  *bytes = len;
  return (uint8_t *)data;
}

static void
check_logits_of(const char *network, const char *weights, int classes)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmClassifier) cl = tdm_classifier_load_weights(network, weights, 0, 0, NULL,
                                                            &error);
  g_assert_no_error(error);
  g_assert_cmpint(tdm_classifier_classes(cl), ==, classes);
  size_t bytes, count;
  g_autofree uint8_t *images = read_images("images.bin", &bytes);
  g_autofree char *name = g_strdup_printf("%s-logits.bin", network);
  g_autofree float *expected = read_floats(name, &count);
  const size_t sample = 224 * 224 * 3;
  g_assert_cmpuint(count, ==, 2 * (size_t)classes);
  g_autofree float *probs = g_new(float, classes);
  double bound = ROUNDING_MARGIN * read_gap(name) + FLOAT_FLOOR;
  for (int i = 0; i < 2; i++) {
    g_assert_true(tdm_classifier_run(cl, images + i * sample, probs, &error));
    double err = relative_error(tdm_classifier_logits(cl), expected + i * classes, classes);
    g_test_message("%s from %s, image %d: logits within %.2g of PyTorch's in float64 "
                   "(bound %.2g)", network, weights, i, err, bound);
    g_assert_cmpfloat(err, <=, bound);
  }
}

/* The same weights as safetensors, as the .pth file torch.save wrote, and as
 * torchvision's download in torch.hub's folder (--init torchvision): PyTorch's logits
 * from each. */
static void
check_logits(const char *network, int classes, const char *torchvision_file)
{
  if (!need_references())
    return;
  g_autofree char *safetensors = g_strdup_printf("%s/%s.safetensors", ref_dir, network);
  g_autofree char *pth = g_strdup_printf("%s/%s.pth", ref_dir, network);
  check_logits_of(network, safetensors, classes);
  check_logits_of(network, pth, classes);

  g_autofree char *home = g_build_filename(ref_dir, "torch-home", NULL);
  g_autofree char *folder = g_build_filename(home, "hub", "checkpoints", NULL);
  g_autofree char *cached = g_build_filename(folder, torchvision_file, NULL);
  g_assert_cmpint(g_mkdir_with_parents(folder, 0755), ==, 0);
  g_assert_cmpint(symlink(pth, cached), ==, 0);
  g_setenv("TORCH_HOME", home, TRUE);
  check_logits_of(network, "torchvision", classes);
  g_unsetenv("TORCH_HOME");
  g_unlink(cached);
}

static void
test_resnet18_logits(void)
{
  check_logits("resnet18", 10, "resnet18-f37072fd.pth");
}

static void
test_resnet50_logits(void)
{
  check_logits("resnet50", 1000, "resnet50-11ad3fa6.pth");
}

static void
on_event(const TdmEvent *e, gpointer data)
{
  char **report = data;
  if (e->kind == TDM_EVENT_STARTED && report != NULL) {
    g_free(*report);
    *report = g_strdup(e->started.init_report);
  }
}

/* A dataset pair of `count` samples (train and test the same) from bytes. */
static TdmDatasetPair *
pair_of(const uint8_t *images, const uint8_t *labels, int count, int size, int c,
        int classes)
{
  TdmDatasetPair *pair = g_new0(TdmDatasetPair, 1);
  pair->name = g_strdup("zoo");
  size_t bytes = (size_t)count * size * size * c;
  pair->train = tdm_dataset_new_take("zoo (train)", count, size, size, c, classes,
                                     g_memdup2(images, bytes), g_memdup2(labels, count));
  pair->test = tdm_dataset_new_take("zoo (test)", count, size, size, c, classes,
                                    g_memdup2(images, bytes), g_memdup2(labels, count));
  return pair;
}

static TdmConfig *
zoo_config(const char *network, const char *init, int batch, const char *save)
{
  TdmConfig *cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup("zoo");
  g_free(cfg->network);
  cfg->network = g_strdup(network);
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_config_set_devices(cfg, "cpu", &error));
  cfg->optimizer = TDM_OPTIMIZER_SGD;
  cfg->lr = 0.1;
  cfg->weight_decay = 0;
  cfg->batch = batch;
  cfg->epochs = 1;
  cfg->init_path = g_strdup(init);
  cfg->save_path = g_strdup(save);
  return cfg;
}

static TdmCheckpoint *
run_and_load(TdmConfig *cfg, const TdmDatasetPair *pair, char **report)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, on_event, report);
  tdm_trainer_set_dataset(trainer, pair);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  TdmCheckpoint *ckpt = tdm_checkpoint_load(cfg->save_path, &error);
  g_assert_no_error(error);
  return ckpt;
}

/* One SGD step of torchvision's ResNet-18 (lr 0.01, train-mode BN, batch 2 at 112 px)
 * against PyTorch's step in float64, tensor by tensor (BN running statistics too), the
 * weights after it and the update itself (‖ours − theirs‖ / ‖theirs‖). Float32 cannot
 * give this step to a fixed precision: a ReLU or max-pool decision within rounding of a
 * tie goes either way with the summation order, and moves the update of every layer
 * below it by 1e-3 to 1e-2. So each tensor is held to a multiple of how far a float32
 * step may land on this batch, which zoo-reference.py measures: PyTorch's own float32
 * steps, and a float64 step with the decisions near a tie flipped. An implementation
 * as accurate as PyTorch's lands within it whatever its summation order; the bounds
 * stay under 1e-1 of an update (the layers below the most decisions) and 1e-4 of the
 * running statistics, so a gradient with a term missing or mis-scaled lands outside. */
/* Its flipped decisions against all those near a tie flipped at once. */
#define STEP_TIES_MARGIN 2.0

static void
test_sgd_step(void)
{
  if (!need_references())
    return;
  size_t bytes;
  g_autofree uint8_t *images = read_images("step-images.bin", &bytes);
  g_assert_cmpuint(bytes, ==, 2 * 112 * 112 * 3);
  g_autofree char *labels_path = g_build_filename(ref_dir, "labels.bin", NULL);
  g_autofree char *labels = NULL;
  g_assert_true(g_file_get_contents(labels_path, &labels, NULL, NULL));
  g_autoptr(TdmDatasetPair) pair = pair_of(images, (uint8_t *)labels, 2, 112, 3, 10);
  g_autofree char *init = g_build_filename(ref_dir, "resnet18.safetensors", NULL);
  g_autofree char *save = g_build_filename(ref_dir, "step.safetensors", NULL);
  g_autoptr(TdmConfig) cfg = zoo_config("resnet18", init, 2, save);
  cfg->max_steps = 1;
  cfg->lr = 0.01;
  g_free(cfg->normalize);
  cfg->normalize = g_strdup("imagenet");
  g_autofree char *report = NULL;
  g_autoptr(TdmCheckpoint) ours = run_and_load(cfg, pair, &report);
  g_assert_cmpstr(report, ==, "loaded 102 of the network's 102 tensors");
  g_autofree char *update_path = g_build_filename(ref_dir, "resnet18-update.safetensors", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmCheckpoint) update = tdm_checkpoint_load(update_path, &error);
  g_assert_no_error(error);
  g_autoptr(TdmCheckpoint) before = tdm_checkpoint_load(init, &error);
  g_assert_no_error(error);
  g_autofree char *gaps_path = g_build_filename(ref_dir, "resnet18-step-gaps.txt", NULL);
  g_autofree char *gaps_text = NULL;
  g_assert_true(g_file_get_contents(gaps_path, &gaps_text, NULL, NULL));
  g_auto(GStrv) gaps = g_strsplit(g_strstrip(gaps_text), "\n", -1);
  g_assert_cmpuint(g_strv_length(gaps), ==, 102);
  double worst = 0, worst_update = 0, largest_gap = 0;
  for (int i = 0; gaps[i] != NULL; i++) {
    char name[128];
    double rounding, rounding_update, ties, ties_update;
    g_assert_cmpint(sscanf(gaps[i], "%127s %lf %lf %lf %lf", name, &rounding, &rounding_update,
                           &ties, &ties_update), ==, 5);
    double gap = MAX(ROUNDING_MARGIN * rounding, STEP_TIES_MARGIN * ties);
    double gap_update = MAX(ROUNDING_MARGIN * rounding_update,
                            STEP_TIES_MARGIN * ties_update);
    const TdmTensor *o = tdm_checkpoint_get(ours, name);
    const TdmTensor *b = tdm_checkpoint_get(before, name);
    const TdmTensor *u = tdm_checkpoint_get(update, name);
    g_assert_nonnull(o);
    g_assert_nonnull(b);
    g_assert_nonnull(u);
    size_t n = 1;
    for (int d = 0; d < u->rank; d++)
      n *= u->shape[d];
    double dw = 0, w = 0, du = 0, uu = 0;
    for (size_t k = 0; k < n; k++) {
      double exact = (double)b->data[k] + u->data[k];
      double ours_update = (double)o->data[k] - b->data[k];
      dw += (o->data[k] - exact) * (o->data[k] - exact);
      w += exact * exact;
      du += (ours_update - u->data[k]) * (ours_update - u->data[k]);
      uu += (double)u->data[k] * u->data[k];
    }
    double err = sqrt(dw / MAX(w, 1e-300)), err_update = sqrt(du / MAX(uu, 1e-300));
    double bound = gap + FLOAT_FLOOR, bound_update = gap_update + FLOAT_FLOOR;
    if (err > bound / 4 || err_update > bound_update / 4)
      g_test_message("%s: weights %.2g (bound %.2g), update %.2g (bound %.2g)", name, err,
                     bound, err_update, bound_update);
    g_assert_cmpfloat(err, <=, bound);
    g_assert_cmpfloat(err_update, <=, bound_update);
    worst = MAX(worst, err / bound);
    worst_update = MAX(worst_update, err_update / bound_update);
    largest_gap = MAX(largest_gap, rounding_update);
  }
  g_test_message("one SGD step against PyTorch's in float64: 102 tensors, at most %.2g of the "
                 "bound in weights and %.2g in updates (PyTorch's float32 updates up to %.2g "
                 "off)", worst, worst_update, largest_gap);
}

/* A network trained briefly on a small dataset and saved, with its test images. */
typedef struct {
  const char *network;
  int size, c, classes;
  uint8_t *images;
  char *save, *images_path, *logits_path, *count;
} Trained;

static void
train_briefly(Trained *t)
{
  const int count = 8;
  size_t sample = (size_t)t->size * t->size * t->c;
  t->images = g_new(uint8_t, count * sample);
  uint8_t labels[8];
  GRand *rand = g_rand_new_with_seed(4);
  for (size_t i = 0; i < count * sample; i++)
    t->images[i] = (uint8_t)g_rand_int_range(rand, 0, 256);
  for (int i = 0; i < count; i++)
    labels[i] = (uint8_t)(i % t->classes);
  g_rand_free(rand);
  g_autoptr(TdmDatasetPair) pair = pair_of(t->images, labels, count, t->size, t->c, t->classes);
  t->save = g_strdup_printf("%s/%s-ckpt.safetensors", ref_dir, t->network);
  g_autoptr(TdmConfig) cfg = zoo_config(t->network, NULL, 4, t->save);
  cfg->lr = 0.01;
  cfg->max_steps = 2;
  g_autoptr(TdmCheckpoint) ckpt = run_and_load(cfg, pair, NULL);
  t->images_path = g_strdup_printf("%s/%s-ckpt-images.bin", ref_dir, t->network);
  g_assert_true(g_file_set_contents(t->images_path, (char *)t->images, count * sample, NULL));
  t->logits_path = g_strdup_printf("%s-ckpt-logits.bin", t->network);
  t->count = g_strdup_printf("%d", count);
}

/* Tandem's cnn, resnet and resnet18, trained briefly and saved: PyTorch's module
 * (tools/torch_module.py) built from each checkpoint gives Tandem's logits for its
 * test images. One Python for all three (importing torch is most of its time). */
static void
test_checkpoints_in_torch(void)
{
  if (!need_references())
    return;
  Trained nets[] = {{"cnn", 28, 1, 10}, {"resnet", 28, 1, 4}, {"resnet18", 40, 3, 4}};
  GStrvBuilder *b = g_strv_builder_new();
  g_strv_builder_add(b, "logits");
  for (guint k = 0; k < G_N_ELEMENTS(nets); k++) {
    train_briefly(&nets[k]);
    g_autofree char *out = g_build_filename(ref_dir, nets[k].logits_path, NULL);
    g_strv_builder_add_many(b, nets[k].save, nets[k].images_path, nets[k].count, out, NULL);
  }
  g_auto(GStrv) args = g_strv_builder_end(b);
  g_strv_builder_unref(b);
  g_assert_true(reference((const char *const *)args));
  for (guint k = 0; k < G_N_ELEMENTS(nets); k++) {
    Trained *t = &nets[k];
    size_t got, sample = (size_t)t->size * t->size * t->c;
    int count = atoi(t->count);
    g_autofree float *theirs = read_floats(t->logits_path, &got);
    g_assert_cmpuint(got, ==, (size_t)count * t->classes);
    g_autoptr(GError) error = NULL;
    g_autoptr(TdmClassifier) cl = tdm_classifier_load(t->save, &error);
    g_assert_no_error(error);
    g_autofree float *probs = g_new(float, t->classes);
    double worst = 0;
    for (int i = 0; i < count; i++) {
      g_assert_true(tdm_classifier_run(cl, t->images + i * sample, probs, &error));
      double err = relative_error(tdm_classifier_logits(cl), theirs + i * t->classes,
                                  t->classes);
      worst = MAX(worst, err);
    }
    double bound = ROUNDING_MARGIN * read_gap(t->logits_path) + FLOAT_FLOOR;
    g_test_message("%s read by PyTorch: Tandem's logits within %.2g of its float64 ones "
                   "(bound %.2g)", t->network, worst, bound);
    g_assert_cmpfloat(worst, <=, bound);
    g_free(t->images);
    g_free(t->save);
    g_free(t->images_path);
    g_free(t->logits_path);
    g_free(t->count);
  }
}

/* A 4-class set fine-tuned from torchvision's ResNet-18 with everything but the head
 * frozen: every frozen tensor, BN statistics included, is the file's bit for bit, the
 * head moved, and the report says the 10-class head was re-initialized. */
static void
check_frozen(gboolean train_head)
{
  if (!need_references())
    return;
  const int count = 8, size = 48;
  size_t sample = (size_t)size * size * 3;
  g_autofree uint8_t *images = g_new(uint8_t, count * sample);
  uint8_t labels[8];
  GRand *rand = g_rand_new_with_seed(9);
  for (size_t i = 0; i < count * sample; i++)
    images[i] = (uint8_t)g_rand_int_range(rand, 0, 256);
  for (int i = 0; i < count; i++)
    labels[i] = (uint8_t)(i % 4);
  g_rand_free(rand);
  g_autoptr(TdmDatasetPair) pair = pair_of(images, labels, count, size, 3, 4);
  g_autofree char *init = g_build_filename(ref_dir, "resnet18.safetensors", NULL);
  g_autofree char *save = g_build_filename(ref_dir, "frozen.safetensors", NULL);
  g_autoptr(TdmConfig) cfg = zoo_config("resnet18", init, 4, save);
  cfg->optimizer = TDM_OPTIMIZER_MOMENTUM;
  cfg->weight_decay = 1e-3;
  cfg->epochs = 1;
  if (train_head) {
    cfg->train_head = TRUE;
  } else {
    const char *frozen[] = {"conv1", "bn1", "layer1", "layer2", "layer3", "layer4", NULL};
    cfg->freeze = g_strdupv((char **)frozen);
  }
  g_autofree char *report = NULL;
  g_autoptr(TdmCheckpoint) ours = run_and_load(cfg, pair, &report);
  g_assert_nonnull(strstr(report, "loaded 100 of the network's 102 tensors"));
  g_assert_nonnull(strstr(report, "fc.weight (head re-initialized: 10 classes in the file, "
                                  "4 here)"));
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmCheckpoint) start = tdm_checkpoint_load(init, &error);
  g_assert_no_error(error);
  int identical = 0;
  for (int i = 0; i < tdm_checkpoint_count(start); i++) {
    const TdmTensor *t = tdm_checkpoint_nth(start, i);
    if (g_str_has_prefix(t->name, "fc.") || g_str_has_suffix(t->name, "num_batches_tracked"))
      continue;
    const TdmTensor *o = tdm_checkpoint_get(ours, t->name);
    size_t n = 1;
    for (int d = 0; d < t->rank; d++)
      n *= t->shape[d];
    if (memcmp(o->data, t->data, n * sizeof(float)) != 0)
      g_error("%s changed although frozen", t->name);
    identical++;
  }
  g_assert_cmpint(identical, ==, 100);
  const TdmTensor *head = tdm_checkpoint_get(ours, "fc.weight");
  g_assert_nonnull(head);
  g_assert_cmpint(head->shape[0], ==, 4);
  /* The head trained: not its seeded start. */
  g_autoptr(TdmNetwork) net = tdm_network_new("resnet18", size, size, 3, 4, &error);
  g_autofree float *seeded = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, cfg->seed, seeded);
  const TdmLayer *fc = &net->layers[net->layer_count - 1];
  g_assert_cmpint(fc->kind, ==, TDM_LAYER_LINEAR);
  g_assert_true(memcmp(seeded + fc->weight_offset, head->data,
                       fc->weight_count * sizeof(float)) != 0);
  /* What the window shows before a run: the report the run gave when it started,
   * without training; and a file that fits nothing is the run's error. */
  g_autofree char *dry = tdm_finetune_init_report(net, init, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(dry, ==, report);
  g_autoptr(TdmNetwork) mlp = tdm_network_new("mlp", size, size, 3, 4, &error);
  g_assert_no_error(error);
  g_assert_null(tdm_finetune_init_report(mlp, init, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT);
  g_assert_nonnull(strstr(error->message, init));
}

static void
test_frozen_backbone(void)
{
  check_frozen(FALSE);
}

static void
test_train_head(void)
{
  check_frozen(TRUE);
}

/* torchvision's ResNets: its parameter counts (1000 classes), its names, the head
 * following the class count, and every preset taking a 4-class dataset. */
static void
test_presets(void)
{
  static const struct {
    const char *name;
    size_t parameters, state;
  } resnets[] = {
    {"resnet18", 11689512, 9600}, {"resnet34", 21797672, 17024}, {"resnet50", 25557032, 53120}};
  g_autoptr(GError) error = NULL;
  for (guint i = 0; i < G_N_ELEMENTS(resnets); i++) {
    g_autoptr(TdmNetwork) net = tdm_network_new(resnets[i].name, 224, 224, 3, 1000, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(net->parameter_count, ==, resnets[i].parameters);
    g_assert_cmpuint(net->state_count, ==, resnets[i].state);
    g_assert_cmpstr(net->layers[0].name, ==, "conv1");
    g_assert_cmpint(net->layers[2].kind, ==, TDM_LAYER_POOL);
    g_assert_cmpint(net->layers[2].out_h, ==, 56);
    g_assert_cmpstr(net->layers[net->layer_count - 1].name, ==, "fc");
    /* The canonical spec parses to the same network. */
    g_autoptr(TdmNetwork) again = tdm_network_new(net->spec, 224, 224, 3, 1000, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(again->spec, ==, net->spec);
    gboolean downsample = FALSE;
    for (int l = 0; l < net->layer_count; l++)
      downsample |= g_str_equal(net->layers[l].name, "layer2.0.downsample");
    g_assert_true(downsample);
  }
  const char *presets[] = {"mlp", "cnn", "resnet", "resnet18", "resnet34", "resnet50"};
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++) {
    g_autoptr(TdmNetwork) net = tdm_network_new(presets[i], 28, 28, 1, 4, &error);
    g_assert_no_error(error);
    g_assert_cmpint(net->classes, ==, 4);
  }
  /* Pools with stride and padding: PyTorch's floor-mode sizes. */
  g_autoptr(TdmNetwork) pools = tdm_network_new("pool3s2p1,avg3s1p1,fc10", 9, 8, 2, 10, &error);
  g_assert_no_error(error);
  g_assert_cmpint(pools->layers[0].out_h, ==, 5);
  g_assert_cmpint(pools->layers[0].out_w, ==, 4);
  g_assert_cmpint(pools->layers[1].out_h, ==, 5);
  g_assert_cmpstr(pools->spec, ==, "pool3s2p1,avg3s1p1,fc10");
  g_assert_null(tdm_network_new("pool3s2p2,fc10", 9, 9, 1, 10, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC);
  g_assert_nonnull(strstr(error->message, "more than half the window"));
}

/* A checkpoint as Tandem wrote it before fc weights took PyTorch's flatten order (and
 * before a network's only fc was "fc"): made from a new one by putting the fc after
 * the convolutions back in (row, column, channel) order, renaming fc to fc1 and
 * saying NHWC in its metadata. Both read back to the same parameters. */
static void
check_legacy(const char *network, int classes)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-legacy-XXXXXX", NULL);
  const int count = 8;
  g_autofree uint8_t *images = g_new0(uint8_t, count * 28 * 28);
  uint8_t labels[8];
  for (int i = 0; i < count * 28 * 28; i++)
    images[i] = (uint8_t)((i * 37) % 251);
  for (int i = 0; i < count; i++)
    labels[i] = (uint8_t)(i % classes);
  g_autoptr(TdmDatasetPair) pair = pair_of(images, labels, count, 28, 1, classes);
  g_autofree char *path = g_build_filename(dir, "new.st", NULL);
  g_autoptr(TdmConfig) cfg = zoo_config(network, NULL, 4, path);
  cfg->max_steps = 2;
  g_autoptr(TdmCheckpoint) fresh = run_and_load(cfg, pair, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(network, 28, 28, 1, classes, &error);
  g_assert_no_error(error);

  g_autoptr(TdmCheckpoint) old = tdm_checkpoint_new();
  int permuted = 0;
  for (int i = 0; i < tdm_checkpoint_count(fresh); i++) {
    const TdmTensor *t = tdm_checkpoint_nth(fresh, i);
    const char *name = t->name;
    g_autofree char *renamed = g_str_has_prefix(name, "fc.") ? g_strdup_printf("fc1.%s", name + 3)
                                                            : g_strdup(name);
    size_t n = 1;
    for (int d = 0; d < t->rank; d++)
      n *= t->shape[d];
    g_autofree float *data = g_memdup2(t->data, MAX(1, n) * sizeof(float));
    for (int l = 0; l < net->layer_count; l++) {
      const TdmLayer *layer = &net->layers[l];
      g_autofree char *weight = g_strdup_printf("%s.weight", layer->name);
      if (layer->kind == TDM_LAYER_LINEAR && g_str_equal(weight, name) &&
          tdm_layer_weight_permuted(layer)) {
        tdm_layer_weight_from_torch(layer, t->data, data);
        permuted++;
      }
    }
    tdm_checkpoint_add(old, renamed, t->rank, t->shape, data);
  }
  static const char *keys[] = {"format", "config", "network", "dataset", "epoch", "position",
                               "step", "optimizer_t", "parameters", "input_shape"};
  for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
    tdm_checkpoint_set_metadata(old, keys[i], tdm_checkpoint_get_metadata(fresh, keys[i]));
  tdm_checkpoint_set_metadata(old, "activation_layout",
                              "NHWC: an fc layer after a conv reads features in (row, column, "
                              "channel) order");
  g_autofree char *old_path = g_build_filename(dir, "old.st", NULL);
  g_assert_true(tdm_checkpoint_save(old, old_path, &error));
  g_assert_cmpint(permuted, ==, g_str_equal(network, "cnn") ? 1 : 0);

  g_autoptr(TdmCheckpoint) reread = tdm_checkpoint_load(old_path, &error);
  g_assert_no_error(error);
  g_autofree float *a = g_new(float, net->parameter_count), *b = g_new(float, net->parameter_count);
  g_autofree float *sa = g_new(float, MAX(1, net->state_count));
  g_autofree float *sb = g_new(float, MAX(1, net->state_count));
  g_assert_true(tdm_checkpoint_read_parameters(fresh, net, path, a, sa, &error));
  g_assert_true(tdm_checkpoint_read_parameters(reread, net, old_path, b, sb, &error));
  g_assert_no_error(error);
  g_assert_cmpmem(a, net->parameter_count * sizeof(float), b,
                  net->parameter_count * sizeof(float));
  /* And the old one classifies as the new one does. */
  g_autoptr(TdmClassifier) cn = tdm_classifier_load(path, &error);
  g_autoptr(TdmClassifier) co = tdm_classifier_load(old_path, &error);
  g_assert_no_error(error);
  g_autofree float *probs = g_new(float, classes);
  g_assert_true(tdm_classifier_run(cn, images, probs, &error));
  g_autofree float *ln = g_memdup2(tdm_classifier_logits(cn), classes * sizeof(float));
  g_assert_true(tdm_classifier_run(co, images, probs, &error));
  g_assert_cmpmem(ln, classes * sizeof(float), tdm_classifier_logits(co),
                  classes * sizeof(float));
  g_unlink(path);
  g_unlink(old_path);
  g_rmdir(dir);
}

static void
test_legacy_cnn(void)
{
  check_legacy("cnn", 10);
}

static void
test_legacy_resnet(void)
{
  check_legacy("resnet", 4);
}

/* --lr-scale: one SGD step moves a scaled module by that fraction of the plain step,
 * and the others by the plain step. */
static void
test_lr_scale(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-lr-XXXXXX", NULL);
  const int count = 8;
  g_autofree uint8_t *images = g_new(uint8_t, count * 28 * 28);
  uint8_t labels[8];
  for (int i = 0; i < count * 28 * 28; i++)
    images[i] = (uint8_t)((i * 91) % 253);
  for (int i = 0; i < count; i++)
    labels[i] = (uint8_t)(i % 10);
  g_autoptr(TdmDatasetPair) pair = pair_of(images, labels, count, 28, 1, 10);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new("cnn", 28, 28, 1, 10, &error);
  g_autofree float *start = g_new(float, net->parameter_count);
  float *moved[2] = {NULL, NULL};
  for (int scaled = 0; scaled < 2; scaled++) {
    g_autofree char *path = g_strdup_printf("%s/run%d.st", dir, scaled);
    g_autoptr(TdmConfig) cfg = zoo_config("cnn", NULL, count, path);
    cfg->max_steps = 1;
    if (scaled) {
      const char *scales[] = {"conv2=0.25", NULL};
      cfg->lr_scale = g_strdupv((char **)scales);
    }
    tdm_network_init_parameters(net, cfg->seed, start);
    g_autoptr(TdmCheckpoint) ckpt = run_and_load(cfg, pair, NULL);
    moved[scaled] = g_new(float, net->parameter_count);
    g_autofree float *state = g_new(float, MAX(1, net->state_count));
    g_assert_true(tdm_checkpoint_read_parameters(ckpt, net, path, moved[scaled], state, &error));
    g_unlink(path);
  }
  g_rmdir(dir);
  for (int l = 0; l < net->layer_count; l++) {
    const TdmLayer *layer = &net->layers[l];
    if (layer->param_count == 0)
      continue;
    double factor = g_str_equal(layer->name, "conv2") ? 0.25 : 1.0;
    double num = 0, den = 0;
    for (size_t k = layer->param_offset; k < layer->param_offset + layer->param_count; k++) {
      double plain = (double)moved[0][k] - start[k], step = (double)moved[1][k] - start[k];
      num += (step - factor * plain) * (step - factor * plain);
      den += factor * plain * factor * plain;
    }
    g_assert_cmpfloat(den, >, 0);
    g_assert_cmpfloat(sqrt(num / den), <, 1e-3);
  }
  g_free(moved[0]);
  g_free(moved[1]);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/zoo/presets", test_presets);
  g_test_add_func("/zoo/lr-scale", test_lr_scale);
  g_test_add_func("/zoo/legacy-cnn", test_legacy_cnn);
  g_test_add_func("/zoo/legacy-resnet", test_legacy_resnet);
  g_test_add_func("/zoo/pools", test_pools);
  g_test_add_func("/zoo/resnet18-logits", test_resnet18_logits);
  g_test_add_func("/zoo/resnet50-logits", test_resnet50_logits);
  g_test_add_func("/zoo/sgd-step", test_sgd_step);
  g_test_add_func("/zoo/checkpoints-in-torch", test_checkpoints_in_torch);
  g_test_add_func("/zoo/frozen-backbone", test_frozen_backbone);
  g_test_add_func("/zoo/train-head", test_train_head);
  int status = g_test_run();
  if (ref_dir != NULL)
    test_remove_tree(ref_dir);
  g_free(ref_dir);
  g_free(skip_reason);
  return status;
}
