/* SPDX-License-Identifier: GPL-3.0-or-later */
/* fuzz-history.c — libFuzzer harness for run history files through the window's
 * reader: the input is written as the one run file of a history folder, which is
 * listed (tdm_history_list, as the History page's loading thread does), loaded by id
 * and exported to CSV. Errors are expected (the file is then a listed problem);
 * crashes, leaks, hangs and undefined behaviour are findings. */
#include "fuzz-common.h"
#include "tdm-history.h"

#include <stdlib.h>

static char *folder;
static char *run_path;
static char *csv_path;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  folder = g_build_filename(fuzz_temp_folder(), "runs", NULL);
  g_mkdir_with_parents(folder, 0700);
  run_path = g_build_filename(folder, "fuzz.jsonl", NULL);
  csv_path = g_build_filename(fuzz_temp_folder(), "run.csv", NULL);
  return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (!g_file_set_contents(run_path, (const char *)data, (gssize)size, NULL))
    abort();
  TdmHistory *history = tdm_history_new(folder);
  GPtrArray *problems = g_ptr_array_new_with_free_func(g_free);
  GPtrArray *runs = tdm_history_list(history, problems);
  /* One file: a run or a problem naming it, never both nor neither. */
  if (runs->len + problems->len != 1)
    __builtin_trap();
  for (guint i = 0; i < problems->len; i++)
    if (((char *)g_ptr_array_index(problems, i))[0] == '\0')
      __builtin_trap();
  if (runs->len == 1) {
    TdmRunRecord *r = g_ptr_array_index(runs, 0);
    double ms[3];
    (void)tdm_run_record_samples_per_second(r);
    (void)tdm_run_record_device_means(r, -1, ms);
    GError *error = NULL;
    if (!tdm_history_export_csv(history, "fuzz", csv_path, &error) &&
        (error == NULL || error->message[0] == '\0'))
      __builtin_trap();
    g_clear_error(&error);
  }
  g_ptr_array_unref(runs);
  g_ptr_array_unref(problems);
  tdm_history_free(history);
  return 0;
}
