/* SPDX-License-Identifier: GPL-3.0-or-later */
/* fuzz-network.c — libFuzzer harness for network specs through tdm_network_new, the
 * parser --network and the window's spec field use. The first four bytes choose the
 * input's height, width, channels and classes; the rest is the spec. Errors are
 * expected; crashes, leaks and undefined behaviour are findings. Not a test of
 * which error. */
#include "tdm-network.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 4)
    return 0;
  int h = 1 + data[0] % 64, w = 1 + data[1] % 64, c = 1 + data[2] % 4;
  int classes = 1 + data[3] % 256;
  g_autofree char *spec = g_strndup((const char *)data + 4, size - 4);

  GError *error = NULL;
  TdmNetwork *net = tdm_network_new(spec, h, w, c, classes, &error);
  if (net != NULL) {
    /* What a parsed network promises the rest of the engine. */
    if (net->layer_count < 1 || net->classes != classes || net->parameter_count == 0)
      __builtin_trap();
    const TdmLayer *last = &net->layers[net->layer_count - 1];
    if (last->out_c != classes)
      __builtin_trap();
    tdm_network_free(net);
  } else if (error == NULL || error->message[0] == '\0') {
    __builtin_trap();
  }
  g_clear_error(&error);
  return 0;
}
