/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend.c — what every backend shares: construction for a device, the
 * byte-counting allocation wrappers and the sticky error. The operations themselves
 * live in tdm-backend-cpu.c and tdm-backend-cuda.c. */
#include "tdm-backend.h"
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

TdmBackend *
tdm_backend_new(TdmDeviceId device, TdmPrecision precision, GError **error)
{
  if (device.kind == TDM_BACKEND_CPU) {
    /* tf32 on a CPU is float32 (what a GPU without tensor cores does too); bf16 would
     * change the numbers, and the CPU has no bf16 GEMM worth it. */
    if (precision == TDM_PRECISION_BF16) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                  _("device “cpu”: --precision bf16 needs a GPU; use fp32 on the CPU"));
      return NULL;
    }
    return tdm_backend_cpu_new(error);
  }
  g_return_val_if_fail(device.kind == TDM_BACKEND_CUDA, NULL);
#if TDM_HAVE_CUDA
  return tdm_backend_cuda_new(device.ordinal, precision, error);
#else
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
              _("device “cuda:%d”: this build of Tandem has no CUDA backend"), device.ordinal);
  return NULL;
#endif
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

void
tdm_backend_free(TdmBackend *b)
{
  if (b == NULL)
    return;
  b->ops->destroy(b);
}

void *
tdm_backend_alloc(TdmBackend *b, size_t bytes, GError **error)
{
  return b->ops->alloc(b, bytes, error);
}

void
tdm_backend_release(TdmBackend *b, void *ptr)
{
  if (ptr != NULL)
    b->ops->free(b, ptr);
}

void
tdm_backend_fail(TdmBackend *b, int code, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  char *message = g_strdup_vprintf(format, args);
  va_end(args);

  g_mutex_lock(&b->error_lock);
  if (b->error == NULL)
    b->error = g_error_new(TDM_ENGINE_ERROR, code, "%s: %s", b->name, message);
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
  b->ops->synchronize(b);
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

gboolean
tdm_backend_check_conv(TdmBackend *b, const char *op, int n, int h, int w, int c, int kh,
                       int kw, int pad, int stride)
{
  if (n < 0 || h < 1 || w < 1 || c < 1 || kh < 1 || kw < 1 || pad < 0 || stride < 1 ||
      h + 2 * pad - kh + 1 < 1 || w + 2 * pad - kw + 1 < 1) {
    tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND,
                     _("%s: bad shape n=%d h=%d w=%d c=%d kernel %d×%d pad %d stride %d"), op,
                     n, h, w, c, kh, kw, pad, stride);
    return FALSE;
  }
  return TRUE;
}

gboolean
tdm_backend_check_conv_pool(TdmBackend *b, const char *op, int n, int h, int w, int c,
                            int out, int kh, int kw, int pad, int pk)
{
  if (!tdm_backend_check_conv(b, op, n, h, w, c, kh, kw, pad, 1))
    return FALSE;
  if (out < 1 || out > TDM_CONV_POOL_OUT || kh * kw * c > TDM_CONV_POOL_TAPS || pk < 1 ||
      (guint64)n * (h + 2 * pad - kh + 1) * (w + 2 * pad - kw + 1) * out > G_MAXINT32) {
    tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND,
                     _("%s: %d outputs of %d×%d×%d taps, pool %d, batch %d: outside what it "
                     "takes (at most %d outputs, %d taps, int32 indices)"),
                     op, out, kh, kw, c, pk, n, TDM_CONV_POOL_OUT, TDM_CONV_POOL_TAPS);
    return FALSE;
  }
  return TRUE;
}

gboolean
tdm_backend_check_gemm(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                       int lda, int ldb, int ldc)
{
  const char *why = NULL;
  if (m < 0 || n < 0 || k < 0)
    why = "negative size";
  else if (lda < MAX(1, trans_a ? m : k))
    why = "lda too small";
  else if (ldb < MAX(1, trans_b ? k : n))
    why = "ldb too small";
  else if (ldc < MAX(1, n))
    why = "ldc too small";
  if (why == NULL)
    return TRUE;
  tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, _("gemm %d×%d×%d (lda %d, ldb %d, ldc %d): %s"),
                   m, n, k, lda, ldb, ldc, why);
  return FALSE;
}
