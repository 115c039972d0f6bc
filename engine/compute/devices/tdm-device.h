/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-device.h — the devices Tandem can train on, as a person would pick them.
 *
 * The list has every CUDA GPU found at run time (none in a build without CUDA or on
 * a machine without one) and the CPU, which can host several workers. Not telemetry
 * (tdm-telemetry.h) and not a backend (tdm-backend.h).
 */
#pragma once

#include <glib.h>
#include "tdm-backend.h"

G_BEGIN_DECLS

typedef struct {
  TdmBackendKind kind;
  int index;                  /* CUDA ordinal; 0 for the CPU */
  char id[32];                /* "cuda:0", "cpu" — what --devices takes */
  char name[256];             /* "NVIDIA H200", the CPU model */
  gint64 memory_bytes;        /* device memory, or the machine's RAM for the CPU */
  int compute_major, compute_minor;   /* CUDA only */
  char pci_bus_id[32];        /* CUDA only */
  int cores;                  /* CPU: logical cores; GPU: multiprocessors */
} TdmDeviceInfo;

/* The device a row of the list is, as a run names it. */
TdmDeviceId tdm_device_info_id (const TdmDeviceInfo *info);

/* Every device, GPUs first in ordinal order, then the CPU. Free with g_array_unref. */
GArray *tdm_device_list (void);

/* One line per device, as `tandem-train --list-devices` prints it. */
char *tdm_device_describe (const TdmDeviceInfo *info);

G_END_DECLS
