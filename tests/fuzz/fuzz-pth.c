/* SPDX-License-Identifier: GPL-3.0-or-later */
/* fuzz-pth.c — libFuzzer harness for PyTorch .pth files through --init's path: the
 * input is written as a file, read by tdm_checkpoint_load (the zip archive, the
 * restricted unpickler, the storages' views) and, when it loads, matched against a
 * small network's names and shapes as a run with --init does
 * (tdm_checkpoint_read_matching: conv2k3p1,bn,relu,fc3 on 4×4 grey inputs, whose
 * state_dict is conv1.weight, bn1.*, fc.weight, fc.bias). Errors are expected;
 * crashes, leaks, hangs, undefined behaviour and allocations beyond what the file
 * holds are findings.
 *
 * An input whose first byte is 0 (which no zip archive's is) is a pickle instead,
 * given to the unpickler alone (tdm_pickle_read_state_dict): inside an archive the
 * pickle's CRC-32 turns away nearly every mutation of it before it is read. The seeds
 * (make-corpus.py) are archives built by hand (float32, float16 and deflated
 * storages, pickle protocols 2 and 4, a global that is refused, deep nesting) and
 * their pickles. */
#include "fuzz-common.h"
#include "tdm-checkpoint.h"
#include "tdm-network.h"
#include "tdm-pickle.h"

#include <stdlib.h>

static char *path;
static TdmNetwork *net;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  path = g_build_filename(fuzz_temp_folder(), "weights.pth", NULL);
  net = tdm_network_new("conv2k3p1,bn,relu,fc3", 4, 4, 1, 3, NULL);
  if (net == NULL)
    abort();
  return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  GError *error = NULL;
  if (size > 0 && data[0] == 0) {
    GPtrArray *tensors = tdm_pickle_read_state_dict(data + 1, size - 1, &error);
    if (tensors == NULL && (error == NULL || error->message[0] == '\0'))
      __builtin_trap();
    if (tensors != NULL)
      g_ptr_array_unref(tensors);
    g_clear_error(&error);
    return 0;
  }
  if (!g_file_set_contents(path, (const char *)data, (gssize)size, NULL))
    abort();
  TdmCheckpoint *ckpt = tdm_checkpoint_load(path, &error);
  if (ckpt == NULL && (error == NULL || error->message[0] == '\0'))
    __builtin_trap();
  if (ckpt != NULL) {
    float *params = g_new0(float, net->parameter_count);
    float *state = g_new0(float, net->state_count);
    char *report = NULL;
    if (!tdm_checkpoint_read_matching(ckpt, net, path, FALSE, params, state, &report, &error) &&
        (error == NULL || error->message[0] == '\0'))
      __builtin_trap();
    g_free(report);
    g_free(params);
    g_free(state);
    tdm_checkpoint_free(ckpt);
  }
  g_clear_error(&error);
  return 0;
}
