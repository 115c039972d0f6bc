/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cublas.c — cuBLAS opened with dlopen, once a process, when the first CUDA backend
 * is made (tdm-cublas.h says why). A library that is missing or lacks a function is
 * reported once; a CUDA backend then cannot be made, and says so. */
#define _GNU_SOURCE /* dladdr */
#include "tdm-cublas.h"
#include "tdm-i18n.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <string.h>

static TdmCublas *loaded;
static char *loaded_why_not;

void
tdm_cublas_close(TdmCublas *cublas)
{
  if (cublas == NULL)
    return;
  if (cublas->library != NULL)
    dlclose(cublas->library);
  g_free(cublas->path);
  g_free(cublas);
}

/* Where the dynamic linker does not look (a CUDA toolkit outside ld.so.conf, found
 * through the executable's run path), cuBLAS sits beside the CUDA runtime. */
static void *
open_beside_cudart(const char *library)
{
  Dl_info info;
  if (strchr(library, '/') != NULL || dladdr((void *)cudaGetDeviceCount, &info) == 0 ||
      info.dli_fname == NULL)
    return NULL;
  g_autofree char *dir = g_path_get_dirname(info.dli_fname);
  g_autofree char *path = g_build_filename(dir, library, NULL);
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

TdmCublas *
tdm_cublas_open(const char *library, char **why_not)
{
  g_return_val_if_fail(library != NULL && why_not != NULL, NULL);
  *why_not = NULL;
  TdmCublas *c = g_new0(TdmCublas, 1);
  c->library = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (c->library == NULL) {
    g_autofree char *why = g_strdup(dlerror());
    c->library = open_beside_cudart(library);
    if (c->library == NULL) {
      *why_not = g_strdup_printf(_("cuBLAS (%s) could not be loaded: %s; the CUDA backend "
                                   "needs it (the CUDA toolkit's libcublas)"),
                                 library, why != NULL ? why : "not found");
      tdm_cublas_close(c);
      return NULL;
    }
  }
  c->path = g_strdup(library);
  /* cublas_v2.h's names: its macros map the first ones to their _v2 exports. */
  struct {
    void **field;
    const char *name;
  } wanted[] = {
    {(void **)&c->create, "cublasCreate_v2"},
    {(void **)&c->destroy, "cublasDestroy_v2"},
    {(void **)&c->set_stream, "cublasSetStream_v2"},
    {(void **)&c->set_math_mode, "cublasSetMathMode"},
    {(void **)&c->set_workspace, "cublasSetWorkspace_v2"},
    {(void **)&c->sgemm, "cublasSgemm_v2"},
    {(void **)&c->gemm_ex, "cublasGemmEx"},
    {(void **)&c->gemm_strided_batched_ex, "cublasGemmStridedBatchedEx"},
    {(void **)&c->get_status_name, "cublasGetStatusName"},
    {(void **)&c->get_status_string, "cublasGetStatusString"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(wanted); i++) {
    *wanted[i].field = dlsym(c->library, wanted[i].name);
    if (*wanted[i].field == NULL) {
      *why_not = g_strdup_printf(_("cuBLAS (%s) lacks %s, which the CUDA backend calls"),
                                 library, wanted[i].name);
      tdm_cublas_close(c);
      return NULL;
    }
  }
  return c;
}

gboolean
tdm_cublas_is_loaded(const char *library)
{
  void *handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
  if (handle == NULL)
    return FALSE;
  dlclose(handle);
  return TRUE;
}

static gpointer
load_once(gpointer data)
{
  const char *library = g_getenv("TANDEM_CUBLAS_LIBRARY");
  if (library == NULL || library[0] == '\0')
    library = TDM_CUBLAS_DEFAULT;
  loaded = tdm_cublas_open(library, &loaded_why_not);
  if (loaded != NULL)
    g_info("cuBLAS loaded from %s", loaded->path);
  return GINT_TO_POINTER(1);
}

const TdmCublas *
tdm_cublas_get(void)
{
  static GOnce once = G_ONCE_INIT;
  g_once(&once, load_once, NULL);
  return loaded;
}

const char *
tdm_cublas_why_not(void)
{
  return loaded_why_not;
}
