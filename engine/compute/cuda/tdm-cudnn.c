/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cudnn.c — cuDNN opened with dlopen, once a process, and its functions looked up
 * (tdm-cudnn.h says which and why). A library that is missing, of another major
 * version, or without the graph API's entry points is reported once in the log and
 * left alone: the convolution engine then chooses among Tandem's own candidates. */
#include "tdm-cudnn.h"
#include "tdm-library.h"

#include <dlfcn.h>

#define TDM_CUDNN_DEFAULT "libcudnn.so.9"

static TdmCudnn *loaded;
static char *loaded_why_not;

#define SYMBOL(t, field, ...)                                                          \
  (*(void **)&(t)->field =                                                             \
       tdm_library_symbol((t)->library, (const char *const[]){__VA_ARGS__, NULL}))

void
tdm_cudnn_close(TdmCudnn *cudnn)
{
  if (cudnn == NULL)
    return;
  if (cudnn->library != NULL)
    dlclose(cudnn->library);
  g_free(cudnn->path);
  g_free(cudnn);
}

static gboolean
hidden(void)
{
  const char *value = g_getenv("TANDEM_CUDNN");
  return value != NULL && (g_str_equal(value, "0") || g_ascii_strcasecmp(value, "off") == 0);
}

TdmCudnn *
tdm_cudnn_open(const char *library, char **why_not)
{
  g_return_val_if_fail(library != NULL && why_not != NULL, NULL);
  *why_not = NULL;
  if (hidden()) {
    *why_not = g_strdup("cuDNN is hidden by TANDEM_CUDNN=0");
    return NULL;
  }
  TdmCudnn *c = g_new0(TdmCudnn, 1);
  c->library = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (c->library == NULL) {
    const char *why = dlerror();
    *why_not = g_strdup_printf("cuDNN (%s) could not be loaded: %s", library,
                               why != NULL ? why : "not found");
    tdm_cudnn_close(c);
    return NULL;
  }
  c->path = g_strdup(library);
  SYMBOL(c, get_version, "cudnnGetVersion");
  SYMBOL(c, get_error_string, "cudnnGetErrorString");
  SYMBOL(c, get_last_error_string, "cudnnGetLastErrorString");
  SYMBOL(c, create, "cudnnCreate");
  SYMBOL(c, destroy, "cudnnDestroy");
  SYMBOL(c, set_stream, "cudnnSetStream");
  SYMBOL(c, create_descriptor, "cudnnBackendCreateDescriptor");
  SYMBOL(c, destroy_descriptor, "cudnnBackendDestroyDescriptor");
  SYMBOL(c, finalize, "cudnnBackendFinalize");
  SYMBOL(c, set_attribute, "cudnnBackendSetAttribute");
  SYMBOL(c, get_attribute, "cudnnBackendGetAttribute");
  SYMBOL(c, execute, "cudnnBackendExecute");
  SYMBOL(c, graph_version_check, "cudnnGraphVersionCheck");
  if (c->get_version == NULL || c->get_error_string == NULL || c->create == NULL ||
      c->destroy == NULL || c->set_stream == NULL || c->create_descriptor == NULL ||
      c->destroy_descriptor == NULL || c->finalize == NULL || c->set_attribute == NULL ||
      c->get_attribute == NULL || c->execute == NULL) {
    *why_not = g_strdup_printf("cuDNN (%s) lacks the graph API's functions "
                               "(cudnnBackendCreateDescriptor and the rest)", library);
    tdm_cudnn_close(c);
    return NULL;
  }
  /* cuDNN 9 numbers its versions major·10000 + minor·100 + patch; the attributes used
   * here are those of 9.x (8.x numbered differently and lacked some). */
  c->version = c->get_version();
  if (c->version / 10000 != 9) {
    *why_not = g_strdup_printf("cuDNN (%s) is version %zu.%zu.%zu; Tandem uses cuDNN 9",
                               library, c->version / 10000, c->version / 100 % 100,
                               c->version % 100);
    tdm_cudnn_close(c);
    return NULL;
  }
  if (c->graph_version_check != NULL) {
    cudnnStatus_t status = c->graph_version_check();
    if (status != CUDNN_STATUS_SUCCESS) {
      g_autofree char *text = tdm_cudnn_describe(c, status);
      *why_not = g_strdup_printf("cuDNN (%s): its sublibraries do not match: %s", library,
                                 text);
      tdm_cudnn_close(c);
      return NULL;
    }
  }
  return c;
}

static gpointer
load_once(gpointer data)
{
  const char *library = g_getenv("TANDEM_CUDNN_LIBRARY");
  if (library == NULL || library[0] == '\0')
    library = TDM_CUDNN_DEFAULT;
  loaded = tdm_cudnn_open(library, &loaded_why_not);
  if (loaded != NULL)
    g_info("cuDNN %zu.%zu.%zu loaded from %s", loaded->version / 10000,
           loaded->version / 100 % 100, loaded->version % 100, loaded->path);
  else
    g_message("%s; convolutions use Tandem's own kernels and im2col with cuBLAS",
              loaded_why_not);
  return GINT_TO_POINTER(1);
}

const TdmCudnn *
tdm_cudnn_get(void)
{
  static GOnce once = G_ONCE_INIT;
  g_once(&once, load_once, NULL);
  return hidden() ? NULL : loaded;
}

const char *
tdm_cudnn_why_not(void)
{
  if (loaded != NULL && hidden())
    return "cuDNN is hidden by TANDEM_CUDNN=0";
  return loaded_why_not;
}

char *
tdm_cudnn_describe(const TdmCudnn *cudnn, cudnnStatus_t status)
{
  const char *name = cudnn->get_error_string != NULL ? cudnn->get_error_string(status) : NULL;
  char last[256] = "";
  if (cudnn->get_last_error_string != NULL)
    cudnn->get_last_error_string(last, sizeof last);
  last[sizeof last - 1] = '\0';
  if (last[0] != '\0')
    return g_strdup_printf("%s (%d): %s", name != NULL ? name : "cuDNN error", status, last);
  return g_strdup_printf("%s (%d)", name != NULL ? name : "cuDNN error", status);
}
