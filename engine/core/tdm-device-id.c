/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-device-id.c — device names read once into values, and written back for people
 * (tdm-device-id.h). The one place a device name is parsed, with one bound.
 */
#include "tdm-device-id.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

#include <string.h>

/* Strict decimal: digits only, no sign, no spaces, nothing past `max`. */
static gboolean
parse_count(const char *text, gint64 max, gint64 *out)
{
  if (*text == '\0')
    return FALSE;
  gint64 value = 0;
  for (const char *p = text; *p; p++) {
    if (!g_ascii_isdigit(*p))
      return FALSE;
    value = value * 10 + (*p - '0');
    if (value > max)
      return FALSE;
  }
  *out = value;
  return TRUE;
}

/* "cuda" alone is GPU 0 (under mpirun: each rank's first GPU plus its local rank). */
static gboolean
parse_gpu(const char *name, int *ordinal)
{
  gint64 n = 0;
  if (g_str_equal(name, "cuda")) {
    *ordinal = 0;
    return TRUE;
  }
  if (!g_str_has_prefix(name, "cuda:") || !parse_count(name + 5, TDM_DEVICE_ORDINAL_MAX, &n))
    return FALSE;
  *ordinal = (int)n;
  return TRUE;
}

gboolean
tdm_device_id_parse(const char *name, TdmDeviceId *id)
{
  g_return_val_if_fail(name != NULL && id != NULL, FALSE);
  int ordinal;
  if (g_str_equal(name, "cpu")) {
    *id = TDM_DEVICE_CPU;
    return TRUE;
  }
  if (!parse_gpu(name, &ordinal))
    return FALSE;
  *id = TDM_DEVICE_GPU(ordinal);
  return TRUE;
}

static gboolean
add(TdmDeviceId id, gint64 times, const char *list, TdmDeviceId *out, int max, int *count,
    GError **error)
{
  if (times > max - *count) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("--devices: “%s” makes more than %d replicas"), list, max);
    return FALSE;
  }
  for (gint64 i = 0; i < times; i++)
    out[(*count)++] = id;
  return TRUE;
}

/* One item of the list, appended as one entry per replica. */
static gboolean
parse_item(const char *item, const char *list, TdmDeviceId *out, int max, int *count,
           GError **error)
{
  TdmDeviceId id;
  gint64 n;

  if (*item == '\0') {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                _("--devices: empty device name in the list (use e.g. “cpu:4” or "
                  "“cuda:0,cuda:1”)"));
    return FALSE;
  }
  if (g_str_has_prefix(item, "cpu:")) {
    if (!parse_count(item + 4, max + 1, &n) || n < 1) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                  _("--devices: “%s”: the number of CPU workers must be a whole number "
                    "from 1 to %d"), item, max);
      return FALSE;
    }
    return add(TDM_DEVICE_CPU, n, list, out, max, count, error);
  }
  if (tdm_device_id_parse(item, &id))
    return add(id, 1, list, out, max, count, error);
  if (g_str_has_prefix(item, "cuda:")) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                _("--devices: “%s”: a GPU is named cuda:N with N its ordinal, 0 to %d "
                  "(see --list-devices)"), item, TDM_DEVICE_ORDINAL_MAX);
    return FALSE;
  }
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
              _("--devices: unknown device “%s” (use cpu, cpu:N for N CPU workers, or "
                "cuda:N; see --list-devices)"), item);
  return FALSE;
}

gboolean
tdm_device_list_parse(const char *list, TdmDeviceId *out, int max, int *count,
                      GError **error)
{
  g_return_val_if_fail(list != NULL && out != NULL && count != NULL, FALSE);
  g_return_val_if_fail(max > 0, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  g_auto(GStrv) items = g_strsplit(list, ",", -1);
  if (items[0] == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                _("--devices: no device given (use e.g. “cpu:4” or “cuda:0,cuda:1”)"));
    return FALSE;
  }
  int n = 0;
  for (int i = 0; items[i] != NULL; i++)
    if (!parse_item(g_strstrip(items[i]), list, out, max, &n, error))
      return FALSE;
  *count = n;
  return TRUE;
}

const char *
tdm_device_id_name(TdmDeviceId id, char *buf)
{
  if (id.kind == TDM_BACKEND_CUDA)
    g_snprintf(buf, TDM_DEVICE_NAME_MAX, "cuda:%d", id.ordinal);
  else
    g_strlcpy(buf, "cpu", TDM_DEVICE_NAME_MAX);
  return buf;
}

char *
tdm_device_id_dup_name(TdmDeviceId id)
{
  char buf[TDM_DEVICE_NAME_MAX];
  return g_strdup(tdm_device_id_name(id, buf));
}

char *
tdm_device_list_join(const TdmDeviceId *ids, int count)
{
  GString *s = g_string_new(NULL);
  char buf[TDM_DEVICE_NAME_MAX];
  for (int i = 0; i < count; i++)
    g_string_append_printf(s, "%s%s", i ? "," : "", tdm_device_id_name(ids[i], buf));
  return g_string_free(s, FALSE);
}

gboolean
tdm_device_id_equal(TdmDeviceId a, TdmDeviceId b)
{
  return a.kind == b.kind && (a.kind == TDM_BACKEND_CPU || a.ordinal == b.ordinal);
}
