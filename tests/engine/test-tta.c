/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-tta.c — test-time augmentation: with test_flip and test_shift, the
 * logits a replica's evaluation scores are the mean of the logits of each view of
 * the test set (the image, its mirror, its four shifted copies and their mirrors),
 * each evaluated separately as a plain test set built here on the host, on the CPU
 * backend; the accuracy it counts is that of the averaged logits; and the trainer
 * hands test_shift to its replicas. Not the GPU (test-cuda-train.c compares the
 * CUDA backend's views with these). */
#include "tdm-backend.h"
#include "tdm-dataset.h"
#include "tdm-network.h"
#include "tdm-replica.h"
#include "tdm-trainer.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

/* A BN network (running statistics in evaluation), a residual block and a pool: a
 * shifted image gives other logits than the image all the way through. */
#define SPEC "conv6k3p1,bn,relu,res(conv6k3p1,bn,relu),pool2,fc10"
#define H 7
#define W 9
#define C 2
#define COUNT 12
/* Chunks of 5, 5 and 2: views must be built from each chunk's own samples. */
#define CAPACITY 5

static TdmDataset *
random_dataset(GRand *rng)
{
  TdmDataset *d = tdm_dataset_new("tta", COUNT, H, W, C, 10);
  for (int i = 0; i < COUNT * H * W * C; i++)
    d->images[i] = (uint8_t)g_rand_int_range(rng, 0, 256);
  for (int i = 0; i < COUNT; i++)
    d->labels[i] = (uint8_t)g_rand_int_range(rng, 0, 10);
  return d;
}

/* The view (dy, dx, mirrored) of every image, as gather_augment lays it out:
 * v[r, q] = x[r + dy, q' + dx], q' = W − 1 − q when mirrored; 0 outside. */
static TdmDataset *
view_of(const TdmDataset *d, int dy, int dx, gboolean mirrored)
{
  TdmDataset *v = tdm_dataset_new("tta-view", COUNT, H, W, C, 10);
  memcpy(v->labels, d->labels, COUNT);
  for (int i = 0; i < COUNT; i++)
    for (int r = 0; r < H; r++)
      for (int q = 0; q < W; q++)
        for (int ch = 0; ch < C; ch++) {
          int iy = r + dy, ix = (mirrored ? W - 1 - q : q) + dx;
          uint8_t value = 0;
          if (iy >= 0 && iy < H && ix >= 0 && ix < W)
            value = d->images[(((size_t)i * H + iy) * W + ix) * C + ch];
          v->images[(((size_t)i * H + r) * W + q) * C + ch] = value;
        }
  return v;
}

typedef struct {
  TdmNetwork *net;
  float *params, *state;
} Model;

/* A replica of the model over `data` (as training and test set) with the given
 * test-time views. */
static TdmReplica *
replica_of(TdmBackend *b, const Model *m, const TdmDataset *data, gboolean flip, int shift)
{
  g_autoptr(GError) error = NULL;
  TdmReplica *rep = tdm_replica_new(b, m->net, CAPACITY, data, data, &error);
  g_assert_no_error(error);
  tdm_backend_upload(b, rep->params, m->params, m->net->parameter_count * sizeof(float));
  tdm_backend_upload(b, rep->state, m->state, m->net->state_count * sizeof(float));
  rep->test_flip = flip;
  rep->test_shift = shift;
  return rep;
}

/* Logits of every test sample, chunk by chunk as the trainer evaluates. */
static float *
predict_all(TdmReplica *rep)
{
  float *logits = g_new(float, COUNT * 10);
  for (int first = 0; first < COUNT; first += CAPACITY)
    tdm_replica_predict(rep, first, MIN(CAPACITY, COUNT - first), logits + first * 10);
  return logits;
}

static void
check_views(gboolean flip, int shift)
{
  g_autoptr(GRand) rng = g_rand_new_with_seed(41 + 2 * shift + flip);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmDataset) data = random_dataset(rng);
  Model m = {tdm_network_new(SPEC, H, W, C, 10, &error), NULL, NULL};
  g_assert_no_error(error);
  m.params = g_new(float, m.net->parameter_count);
  tdm_network_init_parameters(m.net, 7, m.params);
  /* Running statistics away from (0, 1), so evaluation's normalization matters. */
  m.state = g_new(float, m.net->state_count);
  for (size_t i = 0; i < m.net->state_count; i++)
    m.state[i] = (float)g_rand_double_range(rng, 0.2, 1.5);
  TdmBackend *b = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);

  TdmReplica *rep = replica_of(b, &m, data, flip, shift);
  int views = tdm_replica_test_views(rep);
  g_assert_cmpint(views, ==, (shift > 0 ? 5 : 1) * (flip ? 2 : 1));
  g_autofree float *got = predict_all(rep);

  /* The mean of each view evaluated alone, in double. */
  const int shifts[5][2] = {{0, 0}, {-shift, 0}, {shift, 0}, {0, -shift}, {0, shift}};
  double want[COUNT * 10] = {0};
  g_autofree float *plain = NULL;
  for (int k = 0; k < (shift > 0 ? 5 : 1); k++)
    for (int mirrored = 0; mirrored < (flip ? 2 : 1); mirrored++) {
      g_autoptr(TdmDataset) v = view_of(data, shifts[k][0], shifts[k][1], mirrored);
      TdmReplica *alone = replica_of(b, &m, v, FALSE, 0);
      g_autofree float *logits = predict_all(alone);
      for (int i = 0; i < COUNT * 10; i++)
        want[i] += logits[i] / views;
      if (k == 0 && !mirrored)
        plain = g_steal_pointer(&logits);
      tdm_replica_free(alone);
    }
  double worst = 0, moved = 0;
  for (int i = 0; i < COUNT * 10; i++) {
    worst = MAX(worst, fabs(got[i] - want[i]) / (1.0 + fabs(want[i])));
    moved = MAX(moved, fabs(got[i] - plain[i]));
  }
  g_test_message("flip %d shift %d: %d views, worst difference from the mean of the views "
                 "%.2e; largest change from the image alone %.3f", flip, shift, views, worst,
                 moved);
  g_assert_cmpfloat(worst, <=, 1e-6);
  if (views > 1)
    g_assert_cmpfloat(moved, >, 1e-3);

  /* The evaluation scores the averaged logits: its correct count is theirs, and its
   * outputs are the last chunk's. */
  int correct = 0;
  for (int i = 0; i < COUNT; i++) {
    int best = 0;
    for (int j = 1; j < 10; j++)
      if (want[i * 10 + j] > want[i * 10 + best])
        best = j;
    correct += best == data->labels[i];
  }
  tdm_replica_take_metrics(rep);
  for (int first = 0; first < COUNT; first += CAPACITY)
    tdm_replica_evaluate(rep, first, MIN(CAPACITY, COUNT - first));
  TdmMetrics metrics = tdm_replica_take_metrics(rep);
  g_assert_cmpint((int)metrics.correct, ==, correct);
  float last[2 * 10];
  tdm_backend_download(b, last, tdm_replica_outputs(rep), sizeof last);
  for (int i = 0; i < 2 * 10; i++)
    g_assert_cmpfloat(fabs(last[i] - got[10 * 10 + i]), <=, 1e-6 * (1 + fabs(got[100 + i])));

  tdm_replica_free(rep);
  tdm_backend_free(b);
  tdm_network_free(m.net);
  g_free(m.params);
  g_free(m.state);
}

static void
test_mean_of_views(void)
{
  check_views(TRUE, 0);
  check_views(FALSE, 1);
  check_views(TRUE, 1);
  check_views(TRUE, 2);
  /* Larger than half the image: most of it is zeros, still a mean of views. */
  check_views(FALSE, 5);
}

/* The trainer gives its replicas the configured translations: the same training
 * (parameters bit for bit) is scored otherwise with them, and the same on 1 and 3
 * workers. On a small IDX set written here, so that an epoch ends and is evaluated. */
static void
put_be32(GByteArray *a, guint32 v)
{
  guint8 b[4] = {v >> 24, v >> 16, v >> 8, v};
  g_byte_array_append(a, b, 4);
}

static void
write_idx(const char *folder, const char *base, guint32 magic, int count, int side,
          GRand *rng, int range)
{
  g_autoptr(GByteArray) a = g_byte_array_new();
  put_be32(a, magic);
  put_be32(a, (guint32)count);
  int bytes = count;
  if (side > 0) {
    put_be32(a, (guint32)side);
    put_be32(a, (guint32)side);
    bytes *= side * side;
  }
  for (int i = 0; i < bytes; i++) {
    guint8 v = (guint8)g_rand_int_range(rng, 0, range);
    g_byte_array_append(a, &v, 1);
  }
  g_autofree char *path = g_build_filename(folder, base, NULL);
  g_autoptr(GError) error = NULL;
  g_assert_true(g_file_set_contents(path, (const char *)a->data, a->len, &error));
}

static void
collect_loss(const TdmEvent *event, gpointer data)
{
  if (event->kind == TDM_EVENT_EPOCH)
    *(double *)data = event->epoch.test_loss;
}

static double
train_and_score(const char *folder, const char *devices, int shift, float **params,
                size_t *n)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(folder);
  g_free(cfg->network);
  cfg->network = g_strdup("conv4k3p1,bn,relu,pool2,fc10");
  g_assert_true(tdm_config_set_devices(cfg, devices, &error));
  cfg->batch = 30;
  cfg->epochs = 1;
  cfg->batchnorm = TDM_BATCHNORM_SYNC;
  cfg->test_flip = TRUE;
  cfg->test_shift = shift;
  double loss = -1;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, collect_loss, &loss);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  const float *p = tdm_trainer_get_parameters(trainer, n);
  *params = g_memdup2(p, *n * sizeof(float));
  return loss;
}

static void
test_trainer_uses_shift(void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *folder = g_dir_make_tmp("tandem-tta-XXXXXX", &error);
  g_assert_no_error(error);
  g_autoptr(GRand) rng = g_rand_new_with_seed(3);
  write_idx(folder, "train-images-idx3-ubyte", 0x803, 180, 10, rng, 256);
  write_idx(folder, "train-labels-idx1-ubyte", 0x801, 180, 0, rng, 10);
  write_idx(folder, "t10k-images-idx3-ubyte", 0x803, 60, 10, rng, 256);
  write_idx(folder, "t10k-labels-idx1-ubyte", 0x801, 60, 0, rng, 10);

  size_t n0, n1, n3;
  g_autofree float *p0 = NULL, *p1 = NULL, *p3 = NULL;
  double plain = train_and_score(folder, "cpu", 0, &p0, &n0);
  double shifted = train_and_score(folder, "cpu", 2, &p1, &n1);
  double shifted3 = train_and_score(folder, "cpu:3", 2, &p3, &n3);
  g_test_message("one epoch of 180 samples: test loss %.6f with flips, %.6f with 2-pixel "
                 "shifts too (%.6f on 3 workers)", plain, shifted, shifted3);
  g_assert_cmpuint(n0, ==, n1);
  g_assert_cmpmem(p0, n0 * sizeof(float), p1, n1 * sizeof(float));
  g_assert_cmpfloat(plain, >, 0);
  g_assert_cmpfloat(fabs(plain - shifted), >, 1e-4);
  /* Three workers train as one to ~1e-7 (synchronized BN), not bit for bit. */
  g_assert_cmpfloat(fabs(shifted3 - shifted), <=, 1e-5 * shifted);

  const char *names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
  for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autofree char *path = g_build_filename(folder, names[i], NULL);
    g_unlink(path);
  }
  g_rmdir(folder);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/tta/mean-of-views", test_mean_of_views);
  g_test_add_func("/tta/trainer-uses-shift", test_trainer_uses_shift);
  return g_test_run();
}
