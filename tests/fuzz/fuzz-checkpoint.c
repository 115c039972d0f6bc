/* SPDX-License-Identifier: GPL-3.0-or-later */
/* fuzz-checkpoint.c — libFuzzer harness for safetensors checkpoints through the real
 * resume path: the input is written as a checkpoint file and a CPU run is resumed
 * from it with tdm_trainer_set_resume_path and tdm_trainer_run, as `tandem-train
 * --resume` does, over a tiny IDX set the harness writes once (folder "fuzzset",
 * 8 training images of 2×2, 3 classes; network fc3). The saved configuration goes
 * through what the command line does with it too (tdm_checkpoint_load,
 * tdm_config_from_json, tdm_config_validate_saved). Errors are expected; crashes,
 * leaks, hangs and undefined behaviour are findings.
 *
 * With FUZZ_CHECKPOINT_SEED=FILE set it instead trains that run for one epoch, saves
 * the checkpoint to FILE and exits: the seed corpus is made so (make-corpus.sh). */
#include "fuzz-common.h"
#include "tdm-checkpoint.h"
#include "tdm-config.h"
#include "tdm-trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dataset_folder;
static char *checkpoint_path;

static void
write_idx(const char *name, const guint8 *header, gsize header_len, const guint8 *body,
          gsize body_len)
{
  g_autofree char *path = g_build_filename(dataset_folder, name, NULL);
  g_autofree guint8 *all = g_malloc(header_len + body_len);
  memcpy(all, header, header_len);
  memcpy(all + header_len, body, body_len);
  if (!g_file_set_contents(path, (const char *)all, (gssize)(header_len + body_len), NULL))
    abort();
}

static void
write_dataset(void)
{
  dataset_folder = g_build_filename(fuzz_temp_folder(), "fuzzset", NULL);
  g_mkdir_with_parents(dataset_folder, 0755);
  static const guint8 images_header[16] = {0, 0, 8, 3, 0, 0, 0, 8, 0, 0, 0, 2, 0, 0, 0, 2};
  static const guint8 labels_header[8] = {0, 0, 8, 1, 0, 0, 0, 8};
  guint8 pixels[32], labels[8];
  for (int i = 0; i < 32; i++)
    pixels[i] = (guint8)(i * 37);
  for (int i = 0; i < 8; i++)
    labels[i] = (guint8)(i % 3);
  write_idx("train-images-idx3-ubyte", images_header, 16, pixels, 32);
  write_idx("train-labels-idx1-ubyte", labels_header, 8, labels, 8);
  write_idx("t10k-images-idx3-ubyte", images_header, 16, pixels, 32);
  write_idx("t10k-labels-idx1-ubyte", labels_header, 8, labels, 8);
}

static TdmConfig *
run_config(const char *save_path)
{
  TdmConfig *c = tdm_config_new();
  g_free(c->dataset);
  c->dataset = g_strdup(dataset_folder);
  g_free(c->network);
  c->network = g_strdup("fc3");
  if (!tdm_config_set_devices(c, "cpu", NULL))
    abort();
  c->batch = 4;
  c->epochs = 1;
  c->eval_batch = 8;
  c->save_path = g_strdup(save_path);
  return c;
}

static void
ignore(const TdmEvent *event, gpointer user_data)
{
}

/* Everything freed before exit, so the leak checker has nothing to say. */
static int
make_seed(const char *path)
{
  g_autoptr(TdmConfig) c = run_config(path);
  g_autoptr(TdmTrainer) t = tdm_trainer_new(c, ignore, NULL);
  g_autoptr(GError) error = NULL;
  if (!tdm_trainer_run(t, NULL, &error)) {
    fprintf(stderr, "fuzz-checkpoint: cannot make the seed: %s\n", error->message);
    return 1;
  }
  return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  /* One BLAS thread: the runs are tiny and the machine is shared. */
  g_setenv("OPENBLAS_NUM_THREADS", "1", TRUE);
  write_dataset();
  checkpoint_path = g_build_filename(fuzz_temp_folder(), "run.safetensors", NULL);

  const char *seed = g_getenv("FUZZ_CHECKPOINT_SEED");
  if (seed != NULL)
    exit(make_seed(seed));
  return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (!g_file_set_contents(checkpoint_path, (const char *)data, (gssize)size, NULL))
    abort();

  /* What the command line reads before the run: the saved configuration. */
  GError *error = NULL;
  TdmCheckpoint *ckpt = tdm_checkpoint_load(checkpoint_path, &error);
  if (ckpt != NULL) {
    const char *json = tdm_checkpoint_get_metadata(ckpt, "config");
    TdmConfig *saved = json ? tdm_config_from_json(json, &error) : NULL;
    if (saved != NULL)
      (void)tdm_config_validate_saved(saved, "checkpoint", &error);
    tdm_config_free(saved);
    tdm_checkpoint_free(ckpt);
  }
  g_clear_error(&error);

  /* The resume itself. max_steps 1: a checkpoint that restores trains one step at
   * most, so the harness stays fast. */
  TdmConfig *c = run_config(NULL);
  c->max_steps = 1;
  TdmTrainer *t = tdm_trainer_new(c, ignore, NULL);
  tdm_trainer_set_resume_path(t, checkpoint_path);
  gboolean ok = tdm_trainer_run(t, NULL, &error);
  if (!ok && (error == NULL || error->message[0] == '\0'))
    __builtin_trap();
  g_clear_error(&error);
  tdm_trainer_free(t);
  tdm_config_free(c);
  return 0;
}
