/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-precision-auto.h — what `--precision auto` (the default) means for a run's
 * devices: bf16 where the run has a device and every one of them is a CUDA GPU with
 * bfloat16 tensor cores (compute capability 8.0 or later), fp32 otherwise; any other
 * precision stays as asked. One rule for the trainer, the memory estimate and the
 * window. Here, beside the device list, because it reads the devices' compute
 * capabilities, which core/ (where TdmPrecision is) cannot see. Not how a backend
 * computes in a precision.
 */
#pragma once

#include <glib.h>
#include "tdm-device.h"
#include "tdm-precision.h"

G_BEGIN_DECLS

/* Why a run computes in the precision it does. */
typedef enum {
  TDM_PRECISION_ASKED,          /* the run named it: not auto */
  TDM_PRECISION_TENSOR_CORES,   /* auto: every device has bfloat16 tensor cores */
  TDM_PRECISION_NO_DEVICE,      /* auto: the run has no device */
  TDM_PRECISION_CPU,            /* auto: `device` is the CPU */
  TDM_PRECISION_OLDER_GPU,      /* auto: `device` is a GPU before compute capability 8.0 */
  TDM_PRECISION_UNKNOWN_DEVICE, /* auto: `device` is not in the device list */
  TDM_PRECISION_OTHER_RANK,     /* auto under mpirun: rank `rank`'s `device` made it fp32
                                 * there, and every rank computes alike */
} TdmPrecisionCause;

typedef struct {
  TdmPrecision precision;       /* what the run computes in: never TDM_PRECISION_AUTO */
  TdmPrecision asked;           /* what it asked for */
  TdmPrecisionCause cause;
  TdmDeviceId device;           /* the first device that made auto fp32, for the causes
                                 * that name one */
  int compute_major, compute_minor; /* that GPU's, for TDM_PRECISION_OLDER_GPU */
  int rank;                     /* the rank, for TDM_PRECISION_OTHER_RANK */
} TdmPrecisionChoice;

/* The choice for a run on `devices` (`count` of them) asking for `asked`, where
 * `known` (`known_count` rows, as tdm_device_list() gives them) is what the machine
 * has. Pure: tests give it made-up lists. */
TdmPrecisionChoice tdm_precision_choose (TdmPrecision asked, const TdmDeviceId *devices,
                                         int count, const TdmDeviceInfo *known,
                                         guint known_count);
/* The same against this machine's devices (tdm_device_list(), read once a process, and
 * only for auto). */
TdmPrecisionChoice tdm_precision_choose_here (TdmPrecision asked, const TdmDeviceId *devices,
                                              int count);
/* tdm_precision_choose_here()'s precision alone. */
TdmPrecision tdm_precision_resolve_here (TdmPrecision asked, const TdmDeviceId *devices,
                                         int count);

/* Why, in words, for people ("every device has bfloat16 tensor cores", "cpu has no
 * bfloat16 tensor cores"); NULL for TDM_PRECISION_ASKED. Free it. The run's start
 * carries it (TdmStartedEvent.precision_why). */
char *tdm_precision_choice_reason (const TdmPrecisionChoice *choice);

G_END_DECLS
