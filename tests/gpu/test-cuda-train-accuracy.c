/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-train-accuracy.c — part of test-cuda-train: whole runs on Fashion-MNIST
 * on a GPU reach their accuracy: the resnet preset in bf16 with cuDNN hidden as with
 * it, the mlp and the cnn. Skips where the data set is not installed. */
#include "tdm-config.h"
#include "tdm-events.h"
#include "tdm-network-catalogue.h"
#include "tdm-trainer.h"
#include "test-cuda-train.h"

#include <math.h>
#include <string.h>

typedef struct {
  double accuracy;
} Last;

static void
remember(const TdmEvent *e, gpointer data)
{
  if (e->kind == TDM_EVENT_EPOCH)
    ((Last *)data)->accuracy = e->epoch.test_accuracy;
}

static void
check_accuracy(const char *network, int epochs, double expected)
{
  if (!have_gpu())
    return;
  if (!g_file_test(TDM_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", G_FILE_TEST_EXISTS)) {
    g_test_skip("Fashion-MNIST is not installed");
    return;
  }
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_free(cfg->network);
  cfg->network = g_strdup(network);
  g_assert_true(tdm_config_set_devices(cfg, "cuda:0", NULL));
  cfg->epochs = epochs;
  /* Pinned: the accuracies expected were measured in float32, the default before auto. */
  cfg->precision = TDM_PRECISION_FP32;
  Last last = {0};
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, remember, &last);
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_test_message("%s on cuda:0: test accuracy %.4f after %d epochs", network, last.accuracy,
                 epochs);
  g_assert_cmpfloat(last.accuracy, >=, expected);
}

static void
test_mlp_accuracy(void)
{
  check_accuracy("mlp", 1, 0.84);
}

static void
test_cnn_accuracy(void)
{
  check_accuracy("cnn", 2, 0.88);
}

/* The resnet preset's first two epochs in bf16, as a person would run them: its test accuracy and the
 * convolution engine's choices (the STARTED event's counts). */
typedef struct {
  double accuracy;
  int cudnn, own, im2col, cudnn_fused;
} PresetRun;

static void
remember_preset(const TdmEvent *e, gpointer data)
{
  PresetRun *run = data;
  if (e->kind == TDM_EVENT_EPOCH)
    run->accuracy = e->epoch.test_accuracy;
  if (e->kind == TDM_EVENT_STARTED) {
    run->cudnn = e->started.conv_cudnn;
    run->own = e->started.conv_own;
    run->im2col = e->started.conv_im2col;
    run->cudnn_fused = e->started.conv_cudnn_fused;
  }
}

static PresetRun
train_preset(void)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_free(cfg->network);
  cfg->network = g_strdup("resnet");
  g_assert_true(tdm_config_apply_preset(cfg, "resnet"));
  g_assert_true(tdm_config_set_devices(cfg, "cuda:0", NULL));
  cfg->precision = TDM_PRECISION_BF16;
  /* The recipe's warm-up epoch and one of decay. */
  cfg->epochs = 2;
  PresetRun run = {0};
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, remember_preset, &run);
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  g_test_message("resnet preset, two epochs: accuracy %.4f; conv choices %d cudnn-fused, "
                 "%d cudnn, %d own, %d im2col", run.accuracy, run.cudnn_fused, run.cudnn,
                 run.own, run.im2col);
  return run;
}

/* With cuDNN hidden (TANDEM_CUDNN=0) the engine chooses among the rest and training
 * reaches the same accuracy: a test accuracy on 10,000 images has a standard error of
 * ~0.3 % from the data alone, and the two runs' rounding differs, so they agree within
 * 2 %. */
static void
test_cudnn_hidden_same_accuracy(void)
{
  if (!have_gpu())
    return;
  if (!g_file_test(TDM_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", G_FILE_TEST_EXISTS)) {
    g_test_skip("Fashion-MNIST is not installed");
    return;
  }
  PresetRun with = train_preset();
  g_setenv("TANDEM_CUDNN", "0", TRUE);
  PresetRun without = train_preset();
  g_unsetenv("TANDEM_CUDNN");
  g_assert_cmpint(with.cudnn_fused + with.cudnn + with.own + with.im2col, >, 0);
  g_assert_cmpint(without.cudnn + without.cudnn_fused, ==, 0);
  g_assert_cmpint(without.own + without.im2col, >, 0);
  g_assert_cmpfloat(fabs(with.accuracy - without.accuracy), <=, 0.02);
  g_assert_cmpfloat(MIN(with.accuracy, without.accuracy), >=, 0.85);
}

void
test_cuda_train_add_accuracy(void)
{
  g_test_add_func("/cuda-train/cudnn-hidden-same-accuracy", test_cudnn_hidden_same_accuracy);
  g_test_add_func("/cuda-train/mlp-accuracy", test_mlp_accuracy);
  g_test_add_func("/cuda-train/cnn-accuracy", test_cnn_accuracy);
}
