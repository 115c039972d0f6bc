/* SPDX-License-Identifier: GPL-3.0-or-later */
/* stem-bn-run.h — a training run of the stem's two passes against the four steps they
 * replace (TANDEM_STEM_BN): colour images of a CIFAR ResNet's stem made in memory, and a
 * run of a configuration on them that hands back its parameters and how many walks back
 * took the passes (every replica's, TdmTrainer's stem_bn_runs). test-stem-bn (CPU) and
 * test-cuda-train (GPU) share it. Header-only, so every test program can. */
#pragma once

#include <glib.h>

#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-trainer-private.h"
#include "tdm-trainer.h"

/* `count` colour images of side × side pixels, bytes drawn from `seed`, labels 0…9 in
 * turn; the same set to train on and to test. */
static inline TdmDatasetPair *
stem_colour_images(int count, int side, guint32 seed)
{
  size_t bytes = (size_t)count * side * side * 3;
  uint8_t *images = g_new(uint8_t, bytes), *labels = g_new(uint8_t, count);
  GRand *rand = g_rand_new_with_seed(seed);
  for (size_t i = 0; i < bytes; i++)
    images[i] = (uint8_t)g_rand_int_range(rand, 0, 256);
  for (int i = 0; i < count; i++)
    labels[i] = (uint8_t)(i % 10);
  g_rand_free(rand);
  TdmDatasetPair *pair = g_new0(TdmDatasetPair, 1);
  pair->name = g_strdup("stem");
  pair->train = tdm_dataset_new_take("stem (train)", count, side, side, 3, 10,
                                     g_memdup2(images, bytes), g_memdup2(labels, count));
  pair->test = tdm_dataset_new_take("stem (test)", count, side, side, 3, 10, images, labels);
  return pair;
}

/* The parameters after a run of cfg on data to its end (asserted to succeed), with
 * TANDEM_STEM_BN set to `stem_bn` while the trainer makes its replicas (NULL: unset);
 * *count their number, *runs the walks back that took the two passes. */
static inline float *
stem_bn_train(TdmConfig *cfg, const TdmDatasetPair *data, const char *stem_bn, size_t *count,
              guint64 *runs)
{
  g_autoptr(GError) error = NULL;
  if (stem_bn != NULL)
    g_assert_true(g_setenv("TANDEM_STEM_BN", stem_bn, TRUE));
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, NULL, NULL);
  tdm_trainer_set_dataset(trainer, data);
  gboolean ran = tdm_trainer_run(trainer, NULL, &error);
  g_unsetenv("TANDEM_STEM_BN");
  g_assert_no_error(error);
  g_assert_true(ran);
  *runs = trainer->stem_bn_runs;
  const float *params = tdm_trainer_get_parameters(trainer, count);
  g_assert_nonnull(params);
  return g_memdup2(params, *count * sizeof(float));
}
