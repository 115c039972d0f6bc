/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cublas.h — cuBLAS, loaded at run time by the first CUDA backend:
 * dlopen("libcublas.so.<the major version built against>") and the ten functions the
 * backend calls, typed from cublas_v2.h itself. Linked instead, cuBLAS (and the
 * cuBLASLt it loads) cost every process about half a CPU second of start-up before
 * main, GPU or not: --help, CPU runs and every test paid it.
 *
 * TANDEM_CUBLAS_LIBRARY names another file to open. Only the loader: the calls are
 * tdm-backend-cuda.c's and -gemm.c's. Not NCCL or the CUDA runtime, which are linked:
 * they cost a process start nothing measurable.
 */
#pragma once

#include <cublas_v2.h>
#include <glib.h>

G_BEGIN_DECLS

typedef struct _TdmCublas {
  char *path;                  /* the file that was opened, for the log */

  __typeof__(cublasCreate) *create;
  __typeof__(cublasDestroy) *destroy;
  __typeof__(cublasSetStream) *set_stream;
  __typeof__(cublasSetMathMode) *set_math_mode;
  __typeof__(cublasSetWorkspace) *set_workspace;
  __typeof__(cublasSgemm) *sgemm;
  __typeof__(cublasGemmEx) *gemm_ex;
  __typeof__(cublasGemmStridedBatchedEx) *gemm_strided_batched_ex;
  __typeof__(cublasGetStatusName) *get_status_name;
  __typeof__(cublasGetStatusString) *get_status_string;

  void *library;
} TdmCublas;

/* The process's cuBLAS, loaded on first use (thread-safe), or NULL when it is missing
 * or lacks a function; then tdm_cublas_why_not() says so in words naming the file. */
const TdmCublas *tdm_cublas_get (void);
const char *tdm_cublas_why_not (void);

/* Opens `library` (a file name or path) as tdm_cublas_get() does: the loaded table, or
 * NULL with *why_not set (free it). For tests; tdm_cublas_close() releases the result. */
TdmCublas *tdm_cublas_open (const char *library, char **why_not);
void tdm_cublas_close (TdmCublas *cublas);

/* Whether `library` is in the process already, without loading it. */
gboolean tdm_cublas_is_loaded (const char *library);

/* The file name tdm_cublas_get() opens by default: "libcublas.so.13" for CUDA 13. */
#define TDM_CUBLAS_DEFAULT "libcublas.so." G_STRINGIFY (CUBLAS_VER_MAJOR)

G_END_DECLS
