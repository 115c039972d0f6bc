/* SPDX-License-Identifier: GPL-3.0-or-later */
/* fuzz-image-folder.c — libFuzzer harness for folders of class folders of PNG and
 * JPEG (tdm-dataset-folder.h) through the real dataset path: the input becomes up to
 * six image files in two class folders (fuzz-common.h) and the folder is opened with
 * tdm_dataset_open, which decodes them (libpng, libjpeg-turbo) and writes and reads
 * the decoded-set cache, kept in the harness's own temporary folder. Files that
 * cannot be decoded are skipped by design; errors are expected; crashes, leaks and
 * undefined behaviour are findings. Not a test of which error. */
#include "fuzz-common.h"
#include "tdm-dataset.h"

static const char *const names[] = {
    "set/cat/1.png", "set/cat/2.jpg", "set/cat/3.png",
    "set/dog/1.png", "set/dog/2.jpg", "set/dog/3.jpeg",
};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  /* The decoded-set cache goes under $XDG_CACHE_HOME: not the user's. */
  g_autofree char *cache = g_build_filename(fuzz_temp_folder(), "cache", NULL);
  g_setenv("XDG_CACHE_HOME", cache, TRUE);
  return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  g_autofree char *top = g_build_filename(fuzz_temp_folder(), "images", NULL);
  g_mkdir_with_parents(top, 0755);
  fuzz_write_files(top, names, 6, data, size);
  g_autofree char *folder = g_build_filename(top, "set", NULL);
  g_mkdir_with_parents(folder, 0755);

  GError *error = NULL;
  TdmDatasetPair *pair = tdm_dataset_open(folder, &error);
  if (pair != NULL) {
    /* What a loaded set promises the rest of the engine. */
    if (pair->train->classes < 2 || pair->train->count < 0)
      __builtin_trap();
    for (int i = 0; i < pair->train->count; i++)
      if (pair->train->labels[i] >= pair->train->classes)
        __builtin_trap();
  } else if (error == NULL || error->message[0] == '\0') {
    __builtin_trap();
  }
  tdm_dataset_pair_free(pair);
  g_clear_error(&error);
  return 0;
}
