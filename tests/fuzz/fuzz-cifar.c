/* SPDX-License-Identifier: GPL-3.0-or-later */
/* fuzz-cifar.c — libFuzzer harness for the CIFAR-10 reader through the real dataset
 * path: the input becomes the six batch files of a folder (fuzz-common.h) and the
 * folder is opened with tdm_dataset_open. Errors are expected; crashes, leaks and
 * undefined behaviour are findings. Not a test of which error. */
#include "fuzz-common.h"
#include "tdm-dataset.h"

static const char *const names[] = {
    "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
    "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *folder = fuzz_temp_folder();
  fuzz_write_files(folder, names, 6, data, size);

  GError *error = NULL;
  TdmDatasetPair *pair = tdm_dataset_open(folder, &error);
  if (pair != NULL) {
    for (int i = 0; i < pair->train->count; i++)
      if (pair->train->labels[i] >= 10)
        __builtin_trap();
  } else if (error == NULL || error->message[0] == '\0') {
    __builtin_trap();
  }
  tdm_dataset_pair_free(pair);
  g_clear_error(&error);
  return 0;
}
