/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-device-id.h — which device a replica runs on, as a value: a kind and, for a GPU,
 * its CUDA ordinal.
 *
 * Text ("cpu:4", "cuda:0,cuda:1") is read here and nowhere else: --devices, the JSON of
 * a configuration, the window's settings. From then on the backend factory, the memory
 * estimate, the trainer's set-up, the distributed layer and the events compare and
 * switch on these values; a name is written back only for people and files. Here in
 * core, not in compute/, so that the configuration holds them. Not the device list of
 * what this machine has (tdm-device.h) nor a backend (tdm-backend.h).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  TDM_BACKEND_CPU,
  TDM_BACKEND_CUDA,
} TdmBackendKind;

/* Replicas a run may have: one device list's longest. */
#define TDM_MAX_REPLICAS 64

/* The largest CUDA ordinal a name may carry ("cuda:1023"): far past any machine, and
 * small enough that no reader has to think about overflow. */
#define TDM_DEVICE_ORDINAL_MAX 1023

typedef struct {
  TdmBackendKind kind;
  int ordinal;             /* the CUDA ordinal; 0 for the CPU */
} TdmDeviceId;

/* A name's longest form, with its NUL: "cuda:1023". */
#define TDM_DEVICE_NAME_MAX 16

#define TDM_DEVICE_CPU ((TdmDeviceId){TDM_BACKEND_CPU, 0})
#define TDM_DEVICE_GPU(n) ((TdmDeviceId){TDM_BACKEND_CUDA, (n)})

/* One replica's device as a name gives it: exactly "cpu", "cuda:N" (no sign, no
 * spaces, N up to TDM_DEVICE_ORDINAL_MAX; "cuda:01" is cuda:1) or "cuda" (cuda:0).
 * FALSE for anything else, *id untouched. */
gboolean tdm_device_id_parse (const char *name, TdmDeviceId *id);

/* A list as --devices takes it ("cpu:4", "cuda:0,cuda:1", "cpu,cuda:0": cpu:N is N CPU
 * workers, a GPU named twice runs two replicas) into one entry per replica, at most
 * `max` of them; *count gets how many. Errors (TDM_ENGINE_ERROR_DEVICE, or
 * INVALID_OPTION for a count out of range) start with "--devices" and name the item;
 * on failure `out` may be partly written. */
gboolean tdm_device_list_parse (const char *list, TdmDeviceId *out, int max, int *count,
                                GError **error);

/* "cpu" or "cuda:N" into `buf` (at least TDM_DEVICE_NAME_MAX bytes); returns buf. */
const char *tdm_device_id_name (TdmDeviceId id, char *buf);
/* The same, allocated. */
char *tdm_device_id_dup_name (TdmDeviceId id);
/* The names of `count` entries joined by commas: "cpu,cpu,cuda:1". */
char *tdm_device_list_join (const TdmDeviceId *ids, int count);

gboolean tdm_device_id_equal (TdmDeviceId a, TdmDeviceId b);
static inline gboolean
tdm_device_id_is_gpu (TdmDeviceId id)
{
  return id.kind == TDM_BACKEND_CUDA;
}

G_END_DECLS
