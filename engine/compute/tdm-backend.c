/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend.c — what every backend shares: construction for a device and the
 * sticky error. The operations' front door is tdm-backend-calls*.c; the operations
 * themselves live in cpu/ and cuda/. */
#include "tdm-backend-ops.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-build-config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

gboolean
tdm_backend_check_gpus(const TdmDeviceId *devices, int count, gboolean per_process,
                       GError **error)
{
  g_return_val_if_fail(devices != NULL || count == 0, FALSE);
  int gpu = -1;
  for (int i = 0; i < count && gpu < 0; i++)
    if (tdm_device_id_is_gpu(devices[i]))
      gpu = i;
  if (gpu < 0)
    return TRUE;
#if TDM_HAVE_CUDA
  if (tdm_backend_cuda_available())
    return TRUE;
  const char *why = _("this machine has no CUDA GPU (no GPU or no driver)");
#else
  const char *why = _("this build of Tandem has no CUDA backend");
#endif
  char name[TDM_DEVICE_NAME_MAX];
  g_autofree char *instead = per_process ? g_strdup("cpu") : g_strdup_printf("cpu:%d", count);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
              _("device “%s”: %s; to train on the CPU instead, use --devices %s (a CPU "
                "worker for each replica)"), tdm_device_id_name(devices[gpu], name), why, instead);
  return FALSE;
}

static TdmBackend *
backend_new(TdmDeviceId device, TdmPrecision precision, GError **error)
{
  if (device.kind == TDM_BACKEND_CPU) {
    /* tf32 on a CPU is float32 (what a GPU without tensor cores does too); bf16 runs
     * the convolutions' products on bfloat16 operands, as a GPU does. */
    TdmBackend *b = tdm_backend_cpu_new(error);
    if (b != NULL && precision == TDM_PRECISION_BF16)
      b->precision = TDM_PRECISION_BF16;
    return b;
  }
#if TDM_HAVE_CUDA
  return tdm_backend_cuda_new(device.ordinal, precision, error);
#else
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
              _("device “cuda:%d”: this build of Tandem has no CUDA backend"), device.ordinal);
  return NULL;
#endif
}

TdmBackend *
tdm_backend_new(TdmDeviceId device, TdmPrecision precision, GError **error)
{
  g_return_val_if_fail(device.kind == TDM_BACKEND_CPU || device.kind == TDM_BACKEND_CUDA, NULL);
  if (precision == TDM_PRECISION_AUTO) {
    /* Auto depends on every device of the run, which one backend cannot see: the
     * trainer resolves it (tdm-precision-auto.h). */
    char name[TDM_DEVICE_NAME_MAX];
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("device “%s”: a backend needs a precision, not “auto”: resolve it for the "
                  "run's devices first (tdm_precision_choose())"),
                tdm_device_id_name(device, name));
    return NULL;
  }
  TdmBackend *b = backend_new(device, precision, error);
  /* A slot left NULL would crash at its first call, far from here. */
  g_assert(b == NULL || tdm_backend_ops_missing(b->ops) == NULL);
  return b;
}

#if !TDM_HAVE_CUDA
gboolean
tdm_backend_cuda_available(void)
{
  return FALSE;
}
#endif

size_t
tdm_backend_own_bytes(TdmDeviceId device)
{
#if TDM_HAVE_CUDA
  if (device.kind == TDM_BACKEND_CUDA)
    return tdm_backend_cuda_own_bytes(device.ordinal);
#else
  (void)device;
#endif
  return 0;
}

gboolean
tdm_backend_conv_workspace_recall(TdmDeviceId device, const char *plan, guint64 *bytes)
{
#if TDM_HAVE_CUDA
  if (device.kind == TDM_BACKEND_CUDA)
    return tdm_backend_cuda_conv_workspace_recall(device.ordinal, plan, bytes);
#else
  (void)device;
  (void)plan;
  (void)bytes;
#endif
  return FALSE;
}

void
tdm_backend_conv_workspace_remember(TdmBackend *b, const char *plan, guint64 bytes)
{
#if TDM_HAVE_CUDA
  if (b->kind == TDM_BACKEND_CUDA)
    tdm_backend_cuda_conv_workspace_remember(b, plan, bytes);
#else
  (void)b;
  (void)plan;
  (void)bytes;
#endif
}

gboolean
tdm_backend_kind_has_bn_bf16_input(TdmBackendKind kind)
{
  /* Both backends read it: the CPU's bn loops widen a block of rows at a time,
   * kernels/bn-*.cu and conv-im2col.cu load bf16 as they load float32. A build without
   * CUDA still estimates a GPU's replica as a CUDA build allocates it. */
  return kind == TDM_BACKEND_CPU || kind == TDM_BACKEND_CUDA;
}

gboolean
tdm_backend_kind_has_bf16_blocks(TdmBackendKind kind)
{
  /* The CPU's elementwise and bn files and kernels/ have all five. */
  return kind == TDM_BACKEND_CPU || kind == TDM_BACKEND_CUDA;
}

void
tdm_backend_free(TdmBackend *b)
{
  if (b == NULL)
    return;
  b->ops->destroy(b);
}

void
tdm_backend_fail(TdmBackend *b, int code, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  char *message = g_strdup_vprintf(format, args);
  va_end(args);

  g_mutex_lock(&b->error_lock);
  if (b->error == NULL) {
    b->error = g_error_new(TDM_ENGINE_ERROR, code, "%s: %s", b->name, message);
    /* Where a replica's failure reaches the caller as its peers' ("has failed"). */
    g_debug("%s: failed: %s", b->name, message);
  }
  g_mutex_unlock(&b->error_lock);
  g_free(message);
}

gboolean
tdm_backend_failed(TdmBackend *b)
{
  g_mutex_lock(&b->error_lock);
  gboolean failed = b->error != NULL;
  g_mutex_unlock(&b->error_lock);
  return failed;
}

gboolean
tdm_backend_check(TdmBackend *b, GError **error)
{
  tdm_backend_synchronize(b);
  return tdm_backend_check_queued(b, error);
}

gboolean
tdm_backend_check_queued(TdmBackend *b, GError **error)
{
  g_mutex_lock(&b->error_lock);
  gboolean ok = b->error == NULL;
  if (!ok && error != NULL)
    *error = g_error_copy(b->error);
  g_mutex_unlock(&b->error_lock);
  return ok;
}
