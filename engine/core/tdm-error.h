/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-error.h — the engine's error domain.
 *
 * Every public engine function that can fail takes `GError **error` last and sets an
 * error in TDM_ENGINE_ERROR with one of these codes. Messages name the file, option
 * or device and say what is wrong, in words a person can act on.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define TDM_ENGINE_ERROR (tdm_engine_error_quark ())
GQuark tdm_engine_error_quark (void);

typedef enum {
  TDM_ENGINE_ERROR_INVALID_OPTION,   /* a configuration value that cannot work */
  TDM_ENGINE_ERROR_INVALID_SPEC,     /* a network spec that does not parse or fit */
  TDM_ENGINE_ERROR_DATASET,          /* a dataset file that is missing or malformed */
  TDM_ENGINE_ERROR_DEVICE,           /* an unknown or unusable device */
  TDM_ENGINE_ERROR_OUT_OF_MEMORY,    /* a device allocation that did not fit */
  TDM_ENGINE_ERROR_BACKEND,          /* a CUDA, cuBLAS or BLAS failure */
  TDM_ENGINE_ERROR_COMMUNICATION,    /* an NCCL or MPI failure */
  TDM_ENGINE_ERROR_CHECKPOINT,       /* a checkpoint that cannot be written or read */
  TDM_ENGINE_ERROR_DIVERGED,         /* the loss became NaN or infinite */
  TDM_ENGINE_ERROR_CANCELLED,        /* the run was stopped */
  TDM_ENGINE_ERROR_HISTORY,          /* a run history file that cannot be written or read */
  TDM_ENGINE_ERROR_EXPORT,           /* an exported model (ONNX) that cannot be written */
} TdmEngineError;

/* Sets `code` of TDM_ENGINE_ERROR with the formatted message; returns FALSE, so that a
 * check reads `return tdm_error_set (error, …);`. */
gboolean tdm_error_set (GError **error, int code, const char *format, ...) G_GNUC_PRINTF (3, 4);

G_END_DECLS
