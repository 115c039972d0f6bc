/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-augment.c — photo augmentation (tdm-augment.h) on the CPU backend, the
 * reference the CUDA kernel is held to (tests/gpu): each part against its own
 * definition (a crop of the whole image is the image, a mirror is the gather's
 * mirror, brightness is a product, erasing a rectangle of the fill), the draws as
 * functions of (seed, epoch, sample) alone whatever the batch, torchvision's ranges
 * for the boxes, the options' checks, the input normalization in the gather's pass
 * (channel_affine's bits), and a short training run with all of it. */
#include "tdm-backend.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-trainer.h"

#include <math.h>
#include <string.h>

enum { H = 12, W = 10, C = 3, SAMPLES = 6 };

typedef struct {
  TdmBackend *b;
  uint8_t images[SAMPLES * H * W * C];
  uint8_t labels[SAMPLES];
} Fixture;

static void
fixture_set_up(Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  f->b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_FP32, &error);
  g_assert_no_error(error);
  GRand *rand = g_rand_new_with_seed(5);
  for (size_t i = 0; i < sizeof f->images; i++)
    f->images[i] = (uint8_t)g_rand_int_range(rand, 0, 256);
  for (int i = 0; i < SAMPLES; i++)
    f->labels[i] = (uint8_t)i;
  g_rand_free(rand);
}

static void
fixture_tear_down(Fixture *f, gconstpointer data)
{
  tdm_backend_free(f->b);
}

static TdmPhotoAugment
off(void)
{
  TdmPhotoAugment a = {0};
  a.ratio_min = 0.75f;
  a.ratio_max = 4.0f / 3.0f;
  return a;
}

static void
gather(Fixture *f, const TdmPhotoAugment *a, const int32_t *indices, int count, float *x,
       int32_t *y, uint32_t epoch)
{
  tdm_backend_gather_photo(f->b, x, y, f->images, f->labels, indices, count, H, W, C, a,
                          tdm_crng_key(11, TDM_RNG_AUGMENT), epoch);
  g_assert_false(tdm_backend_failed(f->b));
}

/* Everything off is the plain gather; a flip always is gather_augment's mirror. */
static void
test_identity_and_mirror(Fixture *f, gconstpointer data)
{
  const int32_t indices[] = {4, 1, 3};
  float x[3 * H * W * C], ref[3 * H * W * C];
  int32_t y[3];
  TdmPhotoAugment a = off();
  gather(f, &a, indices, 3, x, y, 0);
  tdm_backend_gather(f->b, ref, NULL, f->images, f->labels, indices, 3, H * W * C, 1.0f / 255);
  g_assert_cmpmem(x, sizeof x, ref, sizeof ref);
  g_assert_cmpint(y[0], ==, 4);
  g_assert_cmpint(y[2], ==, 3);
  /* A crop of the whole area at the image's own ratio is the image itself. */
  a.scale_min = a.scale_max = 1.0f;
  a.ratio_min = a.ratio_max = (float)W / H;
  gather(f, &a, indices, 3, x, y, 0);
  g_assert_cmpmem(x, sizeof x, ref, sizeof ref);
  a = off();
  a.flip = TDM_FLIP_ALWAYS;
  gather(f, &a, indices, 3, x, y, 0);
  tdm_backend_gather_augment(f->b, ref, NULL, f->images, f->labels, indices, 3, H, W, C,
                            1.0f / 255, 0, TDM_FLIP_ALWAYS, 0, 0);
  g_assert_cmpmem(x, sizeof x, ref, sizeof ref);
}

/* The draws follow the sample, not its place in a batch or the other samples. */
static void
test_split_independent(Fixture *f, gconstpointer data)
{
  TdmPhotoAugment a = off();
  a.scale_min = 0.2f;
  a.scale_max = 1.0f;
  a.jitter[0] = a.jitter[1] = a.jitter[2] = 0.4f;
  a.erase = 0.5f;
  a.flip = TDM_FLIP_RANDOM;
  const int32_t all[] = {0, 1, 2, 3, 4, 5};
  float x[SAMPLES * H * W * C];
  gather(f, &a, all, SAMPLES, x, NULL, 3);
  for (int i = 0; i < SAMPLES; i++) {
    const int32_t one[] = {i};
    float single[H * W * C];
    gather(f, &a, one, 1, single, NULL, 3);
    g_assert_cmpmem(single, sizeof single, x + (size_t)i * H * W * C, sizeof single);
  }
  /* Another epoch draws anew. */
  float later[SAMPLES * H * W * C];
  gather(f, &a, all, SAMPLES, later, NULL, 4);
  g_assert_true(memcmp(later, x, sizeof x) != 0);
  for (size_t i = 0; i < G_N_ELEMENTS(x); i++)
    g_assert_true(x[i] >= 0.0f && x[i] <= 1.0f);
}

/* Brightness alone multiplies (clamped); contrast alone blends with the box's grey
 * mean; saturation alone with the pixel's grey. Each factor within its range. */
static void
test_jitter(Fixture *f, gconstpointer data)
{
  const int32_t indices[] = {2};
  float x[H * W * C], ref[H * W * C];
  tdm_backend_gather(f->b, ref, NULL, f->images, f->labels, indices, 1, H * W * C, 1.0f / 255);
  uint64_t key = tdm_crng_key(11, TDM_RNG_AUGMENT);
  for (int part = 0; part < 3; part++) {
    TdmPhotoAugment a = off();
    a.jitter[part] = 0.5f;
    gather(f, &a, indices, 1, x, NULL, 1);
    TdmPhotoDraw d;
    tdm_photo_draw(&a, H, W, key, 1, 2, &d);
    float factor = d.factor[part];
    g_assert_cmpfloat(factor, >=, 0.5f);
    g_assert_cmpfloat(factor, <=, 1.5f);
    for (int k = 0; k < 3; k++)
      if (k != part)
        g_assert_cmpfloat(d.factor[k], ==, 1.0f);
    double mean = 0;
    for (int p = 0; p < H * W; p++)
      mean += (0.299 * ref[p * 3] + 0.587 * ref[p * 3 + 1] + 0.114 * ref[p * 3 + 2]) / (H * W);
    for (int p = 0; p < H * W; p++) {
      double grey = 0.299 * ref[p * 3] + 0.587 * ref[p * 3 + 1] + 0.114 * ref[p * 3 + 2];
      for (int ch = 0; ch < 3; ch++) {
        double v = ref[p * 3 + ch], expected;
        if (part == 0)
          expected = CLAMP(v * factor, 0, 1);
        else if (part == 1)
          expected = CLAMP(v * factor + mean * (1 - factor), 0, 1);
        else
          expected = CLAMP(v * factor + grey * (1 - factor), 0, 1);
        g_assert_cmpfloat_with_epsilon(x[p * 3 + ch], expected, 1e-5);
      }
    }
  }
}

/* The input normalization in the gather's pass (what a training step asks for) is
 * channel_affine after the gather: the same bits, every part of the augmentation on. */
static void
test_normalized(Fixture *f, gconstpointer data)
{
  const int32_t indices[] = {5, 0, 2, 2};
  enum { COUNT = G_N_ELEMENTS(indices) };
  float x[COUNT * H * W * C], ref[COUNT * H * W * C];
  int32_t y[COUNT], y_ref[COUNT];
  TdmPhotoAugment a = off();
  a.scale_min = 0.3f;
  a.scale_max = 1.0f;
  a.jitter[0] = a.jitter[1] = a.jitter[2] = 0.4f;
  a.erase = 1.0f;
  a.flip = TDM_FLIP_RANDOM;
  TdmChannelAffine affine = {.channels = C};
  for (int ch = 0; ch < C; ch++) {
    a.fill[ch] = 0.45f;
    affine.mul[ch] = 1.0f / (0.22f + 0.01f * ch);
    affine.add[ch] = -(0.4f + 0.05f * ch) * affine.mul[ch];
  }
  gather(f, &a, indices, COUNT, ref, y_ref, 2);
  tdm_backend_channel_affine(f->b, ref, (size_t)COUNT * H * W, affine);
  g_assert_false(tdm_backend_failed(f->b));
  a.normalize = 1;
  memcpy(a.mul, affine.mul, sizeof a.mul);
  memcpy(a.add, affine.add, sizeof a.add);
  gather(f, &a, indices, COUNT, x, y, 2);
  g_assert_cmpmem(x, sizeof x, ref, sizeof ref);
  g_assert_cmpmem(y, sizeof y, y_ref, sizeof y_ref);
  /* Normalized indeed: the erased boxes hold the fill normalized. */
  float fill[C] = {0.45f, 0.45f, 0.45f};
  tdm_backend_channel_affine(f->b, fill, 1, affine);
  int erased = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(x); i++)
    erased += x[i] == fill[i % C];
  g_assert_cmpint(erased, >, 0);
}

/* Erasing with probability 1 sets one rectangle of 2–33 % of the area at a ratio of
 * 0.3–3.3 to the fill, and leaves the rest alone. */
static void
test_erase(Fixture *f, gconstpointer data)
{
  TdmPhotoAugment a = off();
  a.erase = 1.0f;
  a.fill[0] = 0.25f;
  a.fill[1] = 0.5f;
  a.fill[2] = 0.75f;
  uint64_t key = tdm_crng_key(11, TDM_RNG_AUGMENT);
  int erased = 0;
  for (int s = 0; s < SAMPLES; s++) {
    const int32_t indices[] = {s};
    float x[H * W * C], ref[H * W * C];
    gather(f, &a, indices, 1, x, NULL, 0);
    tdm_backend_gather(f->b, ref, NULL, f->images, f->labels, indices, 1, H * W * C, 1.0f / 255);
    TdmPhotoDraw d;
    tdm_photo_draw(&a, H, W, key, 0, (uint32_t)s, &d);
    if (d.eh == 0)
      continue;
    erased++;
    double area = (double)d.eh * d.ew / (H * W), ratio = (double)d.ew / d.eh;
    g_assert_cmpfloat(area, >=, 0.02 - 1.0 / (H * W));
    g_assert_cmpfloat(area, <=, 0.33 + 2.0 * (H + W) / (H * W));
    g_assert_cmpfloat(ratio, >=, 0.25);
    g_assert_cmpfloat(ratio, <=, 4.0);
    for (int r = 0; r < H; r++)
      for (int q = 0; q < W; q++)
        for (int ch = 0; ch < C; ch++) {
          gboolean inside = r >= d.ey && r < d.ey + d.eh && q >= d.ex && q < d.ex + d.ew;
          float v = x[(r * W + q) * C + ch];
          g_assert_cmpfloat(v, ==, inside ? a.fill[ch] : ref[(r * W + q) * C + ch]);
        }
  }
  g_assert_cmpint(erased, >=, SAMPLES / 2);
}

/* The crop boxes: inside the image, their area and ratio within the ranges asked
 * (up to the rounding to whole pixels), and the output the bilinear resize of the
 * box (checked at the box's corners, where it is the corner pixel). */
static void
test_resized_crop(Fixture *f, gconstpointer data)
{
  TdmPhotoAugment a = off();
  a.scale_min = 0.3f;
  a.scale_max = 0.6f;
  uint64_t key = tdm_crng_key(11, TDM_RNG_AUGMENT);
  for (uint32_t epoch = 0; epoch < 20; epoch++)
    for (int s = 0; s < SAMPLES; s++) {
      TdmPhotoDraw d;
      tdm_photo_draw(&a, H, W, key, epoch, (uint32_t)s, &d);
      g_assert_cmpint(d.by, >=, 0);
      g_assert_cmpint(d.bx, >=, 0);
      g_assert_cmpint(d.by + d.bh, <=, H);
      g_assert_cmpint(d.bx + d.bw, <=, W);
      double area = (double)d.bh * d.bw / (H * W);
      g_assert_cmpfloat(area, >=, 0.3 * 0.5);
      g_assert_cmpfloat(area, <=, 0.6 * 1.6);
      const int32_t indices[] = {s};
      float x[H * W * C];
      gather(f, &a, indices, 1, x, NULL, epoch);
      /* The first output pixel reads the box's first source pixel with weight 0 when
       * the box is at least as large as the output, else blends toward its neighbour. */
      const uint8_t *src = f->images + (size_t)s * H * W * C;
      for (int ch = 0; ch < C; ch++) {
        float corner = src[((size_t)d.by * W + d.bx) * C + ch] / 255.0f;
        if (d.bh == H && d.bw == W)
          g_assert_cmpfloat(x[ch], ==, corner);
        g_assert_cmpfloat(x[ch], >=, 0.0f);
        g_assert_cmpfloat(x[ch], <=, 1.0f);
      }
    }
}

static void
test_options(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autoptr(GError) error = NULL;
  c->crop_scale[0] = 0.5;
  c->crop_scale[1] = 0.4;
  g_assert_false(tdm_config_validate(c, &error));
  g_assert_nonnull(strstr(error->message, "--resized-crop"));
  g_clear_error(&error);
  c->crop_scale[1] = 1.0;
  c->crop_pad = 2;
  g_assert_false(tdm_config_validate(c, &error));
  g_assert_nonnull(strstr(error->message, "--crop 2"));
  g_clear_error(&error);
  c->crop_pad = 0;
  c->jitter[1] = 1.5;
  g_assert_false(tdm_config_validate(c, &error));
  g_assert_nonnull(strstr(error->message, "--jitter"));
  g_clear_error(&error);
  c->jitter[1] = 0.3;
  c->erase = 0.25;
  g_assert_true(tdm_config_validate(c, &error));
  g_autofree char *json = tdm_config_to_json(c);
  g_autoptr(TdmConfig) back = tdm_config_from_json(json, &error);
  g_assert_no_error(error);
  g_assert_cmpfloat(back->crop_scale[0], ==, 0.5);
  g_assert_cmpfloat(back->jitter[1], ==, 0.3);
  g_assert_cmpfloat(back->erase, ==, 0.25);
  g_assert_cmpfloat(back->crop_ratio[1], ==, c->crop_ratio[1]);
}

/* Photo augmentation works on grey and colour samples only: a run on 5-channel
 * samples is refused before its first step, naming the device. */
static void
test_refused_channels(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_free(c->network);
  c->network = g_strdup("fc10");
  c->batch = 8;
  c->max_steps = 1;
  c->jitter[0] = 0.2;
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_config_set_devices(c, "cpu", &error));
  TdmDatasetPair *data = g_new0(TdmDatasetPair, 1);
  data->name = g_strdup("five-channel");
  data->train = tdm_dataset_new("train", 16, 4, 4, 5, 10);
  data->test = tdm_dataset_new("test", 8, 4, 4, 5, 10);
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(c, NULL, NULL);
  tdm_trainer_set_dataset(trainer, data);
  g_assert_false(tdm_trainer_run(trainer, NULL, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE);
  g_assert_true(g_str_has_prefix(error->message, "cpu: "));
  g_assert_nonnull(strstr(error->message, "5-channel"));
  tdm_dataset_pair_free(data);
}

/* Training with every part on, one device and two: the same parameters within
 * rounding (each sample's augmentation is its own, wherever it trains). */
static void
test_training(void)
{
  float *params[2];
  size_t count[2];
  for (int k = 0; k < 2; k++) {
    g_autoptr(TdmConfig) c = tdm_config_new();
    g_free(c->network);
    c->network = g_strdup("conv8k3p1,relu,pool2,fc10");
    c->batch = 16;
    c->max_steps = 4;
    c->optimizer = TDM_OPTIMIZER_SGD;
    c->lr = 0.05;
    c->crop_scale[0] = 0.35;
    c->crop_scale[1] = 1;
    c->jitter[0] = c->jitter[1] = c->jitter[2] = 0.2;
    c->erase = 0.5;
    /* The normalization goes into the gather's pass (the erased boxes' fill from it). */
    c->normalize = g_strdup("dataset");
    g_autoptr(GError) error = NULL;
    g_assert_true(tdm_config_set_devices(c, k == 0 ? "cpu" : "cpu:2", &error));
    TdmDatasetPair *data = tdm_dataset_synthetic(3, 256, 32);
    g_autoptr(TdmTrainer) trainer = tdm_trainer_new(c, NULL, NULL);
    tdm_trainer_set_dataset(trainer, data);
    g_assert_true(tdm_trainer_run(trainer, NULL, &error));
    g_assert_no_error(error);
    const float *trained = tdm_trainer_get_parameters(trainer, &count[k]);
    params[k] = g_memdup2(trained, count[k] * sizeof(float));
    tdm_dataset_pair_free(data);
  }
  g_assert_cmpuint(count[0], ==, count[1]);
  double diff = 0, size = 0;
  for (size_t i = 0; i < count[0]; i++) {
    diff = MAX(diff, fabs((double)params[0][i] - params[1][i]));
    size = MAX(size, fabs((double)params[0][i]));
  }
  g_test_message("cpu:2 against cpu after 4 augmented steps: relative difference %.3g",
                 diff / size);
  g_assert_cmpfloat(diff / size, <, 1e-5);
  g_free(params[0]);
  g_free(params[1]);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add("/augment/identity-and-mirror", Fixture, NULL, fixture_set_up,
             test_identity_and_mirror, fixture_tear_down);
  g_test_add("/augment/split-independent", Fixture, NULL, fixture_set_up,
             test_split_independent, fixture_tear_down);
  g_test_add("/augment/jitter", Fixture, NULL, fixture_set_up, test_jitter, fixture_tear_down);
  g_test_add("/augment/erase", Fixture, NULL, fixture_set_up, test_erase, fixture_tear_down);
  g_test_add("/augment/normalized", Fixture, NULL, fixture_set_up, test_normalized,
             fixture_tear_down);
  g_test_add("/augment/resized-crop", Fixture, NULL, fixture_set_up, test_resized_crop,
             fixture_tear_down);
  g_test_add_func("/augment/options", test_options);
  g_test_add_func("/augment/training", test_training);
  g_test_add_func("/augment/refused-channels", test_refused_channels);
  return g_test_run();
}
