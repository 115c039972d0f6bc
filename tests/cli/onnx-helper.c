/* SPDX-License-Identifier: GPL-3.0-or-later */
/* onnx-helper.c — what test-onnx.sh needs from the engine besides tandem-train:
 *
 *   onnx-helper folders DIR
 *       DIR/grey10 (train/ and test/ of ten classes, 28 × 28 grey PNGs: the presets'
 *       shape) and DIR/rgb3 (three classes of 12 × 12 RGB PNGs), seeded noise over a
 *       pattern per class, so a run learns something and BN statistics move.
 *   onnx-helper logits CHECKPOINT SAMPLES LOGITS IMAGE…
 *       the images decoded as --classify decodes them (HWC bytes, to SAMPLES) and the
 *       network's logits for them (float32, to LOGITS), from the engine's own forward
 *       pass on the CPU: the reference an exported model must match. Plain logits, no
 *       test-time flips or shifts, whatever the run evaluated with.
 *   onnx-helper normalized CHECKPOINT MODEL
 *       the checkpoint's network exported with a per-channel normalization (mean
 *       0.25·(k+1), std 0.5/(k+1) for channel k) through tdm_onnx_export().
 */
#include "image-writer.h"
#include "tdm-backend.h"
#include "tdm-classifier.h"
#include "tdm-finetune.h"
#include "tdm-dataset.h"
#include "tdm-image.h"
#include "tdm-onnx-export.h"
#include "tdm-replica.h"

#include <stdio.h>

static void
write_class(const char *dir, int cls, int count, int side, int channels, GRand *rand)
{
  g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
  g_autofree uint8_t *px = g_malloc((size_t)side * side * channels);
  for (int i = 0; i < count; i++) {
    for (int y = 0; y < side; y++)
      for (int x = 0; x < side; x++)
        for (int ch = 0; ch < channels; ch++) {
          /* A stripe per class (its angle and channel), plus noise. */
          int stripe = ((x * (cls % 3 + 1) + y * (cls / 3 + 1)) / 3 + ch) % 2;
          int v = 40 + 150 * stripe + g_rand_int_range(rand, -40, 41);
          px[((size_t)y * side + x) * channels + ch] = (uint8_t)CLAMP(v, 0, 255);
        }
    g_autofree char *path = g_strdup_printf("%s/%03d.png", dir, i);
    test_write_png(path, side, side, channels, px);
  }
}

static int
folders(const char *root)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(7);
  for (int cls = 0; cls < 10; cls++) {
    g_autofree char *train = g_strdup_printf("%s/grey10/train/c%d", root, cls);
    g_autofree char *test = g_strdup_printf("%s/grey10/test/c%d", root, cls);
    write_class(train, cls, 4, 28, 1, rand);
    write_class(test, cls, 1, 28, 1, rand);
  }
  const char *names[] = {"ant", "bee", "cat"};
  for (int cls = 0; cls < 3; cls++) {
    g_autofree char *dir = g_strdup_printf("%s/rgb3/%s", root, names[cls]);
    write_class(dir, cls, 10, 12, 3, rand);
  }
  return 0;
}

static gboolean
write_file(const char *path, const void *data, size_t bytes)
{
  GError *error = NULL;
  if (!g_file_set_contents(path, data, (gssize)bytes, &error)) {
    g_printerr("onnx-helper: %s\n", error->message);
    g_error_free(error);
    return FALSE;
  }
  return TRUE;
}

static int
logits(const char *checkpoint, const char *samples_path, const char *logits_path,
       char **images, int count)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmClassifier) cl = tdm_classifier_load(checkpoint, &error);
  if (cl == NULL) {
    g_printerr("onnx-helper: %s\n", error->message);
    return 1;
  }
  const TdmNetwork *net = tdm_classifier_network(cl);
  size_t sample = (size_t)net->in_h * net->in_w * net->in_c;
  g_autofree uint8_t *pixels = g_malloc(sample * count);
  for (int i = 0; i < count; i++)
    if (!tdm_image_load(images[i], net->in_h, net->in_c, pixels + sample * i, &error)) {
      g_printerr("onnx-helper: %s: %s\n", images[i], error->message);
      return 1;
    }
  g_autofree float *params = g_new(float, MAX(1, net->parameter_count));
  g_autofree float *state = g_new(float, MAX(1, net->state_count));
  tdm_classifier_read_parameters(cl, params, state);

  /* A replica of its own over the images: the classifier's evaluates as the run did,
   * with its test-time views, which are no part of the network. */
  TdmDataset *set = tdm_dataset_new("onnx", count, net->in_h, net->in_w, net->in_c,
                                    net->classes);
  memcpy(set->images, pixels, sample * count);
  TdmBackend *b = tdm_backend_cpu_new(&error);
  g_assert_nonnull(b);
  TdmReplica *r = tdm_replica_new(b, net, count, set, set, &error);
  g_assert_nonnull(r);
  /* A run with --normalize: its inputs go through (x − mean) / std, as the
   * classifier's do (the checkpoint's "normalize"). */
  const float *mean, *std;
  if (tdm_classifier_normalization(cl, &mean, &std)) {
    r->normalize = TRUE;
    r->input_affine = tdm_normalize_affine(net->in_c, mean, std);
  }
  tdm_backend_upload(b, r->params, params, net->parameter_count * sizeof(float));
  if (net->state_count > 0)
    tdm_backend_upload(b, r->state, state, net->state_count * sizeof(float));
  g_autofree float *out = g_new(float, (size_t)count * net->classes);
  tdm_replica_predict(r, 0, count, out);
  g_assert_true(tdm_backend_check(b, NULL));
  tdm_replica_free(r);
  tdm_backend_free(b);
  tdm_dataset_free(set);
  return write_file(samples_path, pixels, sample * count) &&
             write_file(logits_path, out, sizeof(float) * count * net->classes)
           ? 0
           : 1;
}

static int
normalized(const char *checkpoint, const char *model)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmClassifier) cl = tdm_classifier_load(checkpoint, &error);
  if (cl == NULL) {
    g_printerr("onnx-helper: %s\n", error->message);
    return 1;
  }
  const TdmNetwork *net = tdm_classifier_network(cl);
  g_autofree float *params = g_new(float, MAX(1, net->parameter_count));
  g_autofree float *state = g_new(float, MAX(1, net->state_count));
  tdm_classifier_read_parameters(cl, params, state);
  float mean[3], std[3];
  for (int k = 0; k < 3; k++) {
    mean[k] = 0.25f * (k + 1);
    std[k] = 0.5f / (k + 1);
  }
  TdmOnnxOptions options = {.mean = mean, .std = std};
  if (!tdm_onnx_export(net, params, state, &options, model, &error)) {
    g_printerr("onnx-helper: %s\n", error->message);
    return 1;
  }
  return 0;
}

int
main(int argc, char **argv)
{
  if (argc == 3 && g_str_equal(argv[1], "folders"))
    return folders(argv[2]);
  if (argc >= 6 && g_str_equal(argv[1], "logits"))
    return logits(argv[2], argv[3], argv[4], argv + 5, argc - 5);
  if (argc == 4 && g_str_equal(argv[1], "normalized"))
    return normalized(argv[2], argv[3]);
  g_printerr("usage: onnx-helper folders DIR | logits CHECKPOINT SAMPLES LOGITS IMAGE… | "
             "normalized CHECKPOINT MODEL\n");
  return 2;
}
