/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-onnx-export.c — ONNX files from networks and checkpoints (tdm-onnx-export.h):
 * the checks on the path, the checkpoint's network, the atomic write. The graph is
 * tdm-onnx-model.c's, built only where protobuf-c was found; without it every export
 * fails with one message that says what to install.
 */
#include "tdm-onnx-export.h"
#include "tdm-build-config.h"
#include "tdm-classifier.h"
#include "tdm-error.h"
#include "tdm-file.h"
#if TDM_HAVE_ONNX
#include "tdm-onnx-model.h"
#endif

#include <errno.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

gboolean
tdm_onnx_export_available(void)
{
  return TDM_HAVE_ONNX;
}

static gboolean
export_error(GError **error, const char *path, const char *format, ...) G_GNUC_PRINTF(3, 4);

static gboolean
export_error(GError **error, const char *path, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *why = g_strdup_vprintf(format, args);
  va_end(args);
  g_autofree char *display = g_filename_display_name(path);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_EXPORT, "%s: %s", display, why);
  return FALSE;
}

/* What can be known about path before any work: refused here, a mistake costs no
 * loading and never replaces what should stay (a folder, a device, the checkpoint). */
static gboolean
check_path(const char *path, const char *checkpoint, GError **error)
{
  if (!tdm_onnx_export_available())
    return export_error(error, path, "this Tandem was built without ONNX export (protobuf-c "
                                     "was missing: install libprotobuf-c-dev and "
                                     "protobuf-c-compiler, then build again)");
  if (*path == '\0')
    return export_error(error, path, "an empty file name");
  if (!tdm_file_check_not_dangling(path, "", TDM_ENGINE_ERROR_EXPORT, error))
    return FALSE;
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return export_error(error, path, "is a folder; name the .onnx file to write");
    if (!S_ISREG(st.st_mode))
      return export_error(error, path, "exists and is not a regular file; an export would "
                                       "replace it");
  }
  if (checkpoint != NULL && tdm_file_same(path, checkpoint))
    return export_error(error, path, "is the checkpoint being exported; the model would "
                                     "replace it");
  g_autofree char *dir = g_path_get_dirname(path);
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return export_error(error, path, "cannot write there: the folder %s does not exist", dir);
  if (access(dir, W_OK | X_OK) != 0)
    return export_error(error, path, "cannot write in the folder %s: %s", dir,
                        g_strerror(errno));
  return TRUE;
}

gboolean
tdm_onnx_export(const TdmNetwork *net, const float *params, const float *state,
                const TdmOnnxOptions *options, const char *path, GError **error)
{
  g_return_val_if_fail(net != NULL && params != NULL && path != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  if (!check_path(path, NULL, error))
    return FALSE;
#if TDM_HAVE_ONNX
  g_autofree char *display = g_filename_display_name(path);
  g_autoptr(GBytes) bytes = tdm_onnx_model_build(net, params, state, options, display, error);
  if (bytes == NULL)
    return FALSE;
  /* A temporary beside path, flushed and renamed over it: a reader sees the old file
   * or the new one, never half of one. */
  gsize size = 0;
  const char *data = g_bytes_get_data(bytes, &size);
  g_autoptr(GError) local = NULL;
  if (!g_file_set_contents_full(path, data, (gssize)size,
                                G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
                                0666, &local))
    return export_error(error, path, "cannot write it: %s", local->message);
  return TRUE;
#else
  g_assert_not_reached();
#endif
}

/* The classifier's network as the run evaluated it: its class names, and the
 * (x − mean) / std it applied after scaling the bytes by 1/255. */
static gboolean
export_classifier(TdmClassifier *cl, const char *path, GError **error)
{
  const TdmNetwork *net = tdm_classifier_network(cl);
  g_autofree float *params = g_new(float, MAX(1, net->parameter_count));
  g_autofree float *state = g_new(float, MAX(1, net->state_count));
  tdm_classifier_read_parameters(cl, params, state);
  g_autofree const char **names = g_new0(const char *, net->classes + 1);
  for (int k = 0; k < net->classes; k++)
    names[k] = tdm_classifier_class_name(cl, k);
  TdmOnnxOptions options = {.class_names = names};
  tdm_classifier_normalization(cl, &options.mean, &options.std);
  return tdm_onnx_export(net, params, state, &options, path, error);
}

gboolean
tdm_onnx_export_checkpoint(const char *checkpoint, const char *path, GError **error)
{
  g_return_val_if_fail(checkpoint != NULL && path != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  if (!check_path(path, checkpoint, error))
    return FALSE;
  g_autoptr(TdmClassifier) cl = tdm_classifier_load(checkpoint, error);
  return cl != NULL && export_classifier(cl, path, error);
}

gboolean
tdm_onnx_export_weights(const char *network, const char *weights, int size, int channels,
                        const char *normalize, const char *path, GError **error)
{
  g_return_val_if_fail(network != NULL && weights != NULL && path != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  if (!check_path(path, weights, error))
    return FALSE;
  g_autoptr(TdmClassifier) cl =
      tdm_classifier_load_weights(network, weights, size, channels, normalize, error);
  return cl != NULL && export_classifier(cl, path, error);
}
