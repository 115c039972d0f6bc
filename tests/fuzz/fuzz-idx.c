/* SPDX-License-Identifier: GPL-3.0-or-later */
/* fuzz-idx.c — libFuzzer harness for the IDX reader, raw and gzip, through the real
 * dataset path: the input becomes the four files of an IDX folder (fuzz-common.h;
 * mask bits 4 to 7 give each file a ".gz" name, whatever its content) and the folder
 * is opened with tdm_dataset_open, as --dataset FOLDER does. Any crash, leak,
 * undefined behaviour or oversized allocation is a finding; errors are the
 * expected outcome. Not a test of which error. */
#include "fuzz-common.h"
#include "tdm-dataset.h"

static const char *const bases[] = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",  "t10k-labels-idx1-ubyte",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *folder = fuzz_temp_folder();
  unsigned mask = size > 0 ? data[0] : 0;
  char *names[4];
  for (int i = 0; i < 4; i++)
    names[i] = g_strconcat(bases[i], mask & (16u << i) ? ".gz" : "", NULL);
  fuzz_write_files(folder, (const char *const *)names, 4, data, size);
  for (int i = 0; i < 4; i++)
    g_free(names[i]);

  GError *error = NULL;
  TdmDatasetPair *pair = tdm_dataset_open(folder, &error);
  if (pair != NULL) {
    /* What a loaded set promises the rest of the engine. */
    if (pair->train->count < 1 || pair->train->classes < 1 ||
        pair->test->height != pair->train->height)
      __builtin_trap();
    for (int i = 0; i < pair->test->count; i++)
      if (pair->test->labels[i] >= pair->train->classes)
        __builtin_trap();
  } else if (error == NULL || error->message == NULL || error->message[0] == '\0') {
    __builtin_trap();
  }
  tdm_dataset_pair_free(pair);
  g_clear_error(&error);
  return 0;
}
