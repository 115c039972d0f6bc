/* SPDX-License-Identifier: GPL-3.0-or-later */
/* fuzz-config.c — libFuzzer harness for --config files through the command line's own
 * loader (tdm_cli_config_load of src/tdm-cli-runs.c, compiled in): the input is
 * written as the file, which the loader takes for a configuration, a run file (its
 * settings line) or a checkpoint (its metadata), and checks. Errors are expected and
 * must be one line; a configuration that loads must write out and read back. Crashes,
 * leaks, hangs and undefined behaviour are findings. */
#include "fuzz-common.h"
#include "tdm-cli-runs.h"
#include "tdm-config.h"

#include <stdlib.h>
#include <string.h>

static char *config_path;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  config_path = g_build_filename(fuzz_temp_folder(), "config.json", NULL);
  return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (!g_file_set_contents(config_path, (const char *)data, (gssize)size, NULL))
    abort();
  GError *error = NULL;
  TdmConfig *c = tdm_cli_config_load(config_path, &error);
  if (c == NULL) {
    if (error == NULL || error->message[0] == '\0' || strchr(error->message, '\n') != NULL)
      __builtin_trap();
    g_error_free(error);
    return 0;
  }
  char *json = tdm_config_to_json(c);
  TdmConfig *again = tdm_config_from_json(json, &error);
  if (again == NULL)
    __builtin_trap();
  tdm_config_free(again);
  g_free(json);
  tdm_config_free(c);
  return 0;
}
