/* SPDX-License-Identifier: GPL-3.0-or-later */
/* synthetic-helper.c — writes the built-in synthetic dataset at a chosen size as raw
 * IDX files, for the CLI tests:
 *
 *   synthetic-helper FOLDER TRAIN TEST   TRAIN training and TEST test images of
 *                                        tdm_dataset_synthetic(0, …) in FOLDER
 *
 * "--dataset synthetic" generates 60,000 and 10,000 images in every run and a short
 * run evaluates all 10,000; a test run on a few thousand says the same. Not part of
 * Tandem.
 */
#include "synthetic-idx.h"

#include <stdio.h>
#include <stdlib.h>

int
main(int argc, char **argv)
{
  int train = argc == 4 ? atoi(argv[2]) : 0, test = argc == 4 ? atoi(argv[3]) : 0;
  if (train <= 0 || test <= 0) {
    fprintf(stderr, "usage: synthetic-helper FOLDER TRAIN TEST\n");
    return 2;
  }
  g_autoptr(GError) error = NULL;
  if (!test_write_synthetic_idx(argv[1], 0, train, test, &error)) {
    fprintf(stderr, "synthetic-helper: %s\n", error->message);
    return 1;
  }
  return 0;
}
