/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-export-info.c: which run an exported file comes from.
 *
 * Only pairs: which pairs a run has is tdm-run-export-info.c's (the engine's
 * tdm_config_describe(), never re-derived), so a CSV, an SVG and a PNG of one run,
 * and `tandem-train`'s own names for the same choices, agree.
 */

#include "tdm-export-info.h"

#include "tdm-build-config.h"

struct _TdmExportInfo
{
  GPtrArray *keys;
  GPtrArray *values;
};

/* A dataset folder's name may hold anything; a file's header line may not break. */
static char *
one_line (const char *text)
{
  char *line = g_strdup (text ? text : "");

  g_strdelimit (line, "\r\n", ' ');

  return line;
}

TdmExportInfo *
tdm_export_info_new (void)
{
  TdmExportInfo *info = g_new0 (TdmExportInfo, 1);

  info->keys = g_ptr_array_new_with_free_func (g_free);
  info->values = g_ptr_array_new_with_free_func (g_free);

  return info;
}

void
tdm_export_info_add (TdmExportInfo *info,
                     const char    *key,
                     const char    *value)
{
  g_return_if_fail (info != NULL);
  g_return_if_fail (key != NULL);

  g_ptr_array_add (info->keys, one_line (key));
  g_ptr_array_add (info->values, one_line (value));
}

void
tdm_export_info_set (TdmExportInfo *info,
                     const char    *key,
                     const char    *value)
{
  g_return_if_fail (info != NULL);
  g_return_if_fail (key != NULL);

  for (guint i = 0; i < info->keys->len; i++)
    if (g_str_equal (g_ptr_array_index (info->keys, i), key))
      {
        g_free (info->values->pdata[i]);
        info->values->pdata[i] = one_line (value);
        return;
      }
  tdm_export_info_add (info, key, value);
}

void
tdm_export_info_add_origin (TdmExportInfo *info,
                            GDateTime     *started)
{
  g_autoptr(GDateTime) now = NULL;
  g_autoptr(GDateTime) utc = NULL;
  g_autofree char *date = NULL;

  g_return_if_fail (info != NULL);

  if (started == NULL)
    started = now = g_date_time_new_now_utc ();
  utc = g_date_time_to_utc (started);
  date = g_date_time_format (utc, "%Y-%m-%dT%H:%M:%SZ");
  tdm_export_info_add (info, "tandem", TDM_VERSION);
  tdm_export_info_add (info, "date", date);
}

void
tdm_export_info_free (TdmExportInfo *info)
{
  if (info == NULL)
    return;

  g_ptr_array_unref (info->keys);
  g_ptr_array_unref (info->values);
  g_free (info);
}

guint
tdm_export_info_get_n_items (const TdmExportInfo *info)
{
  g_return_val_if_fail (info != NULL, 0);

  return info->keys->len;
}

const char *
tdm_export_info_get_key (const TdmExportInfo *info,
                         guint                i)
{
  g_return_val_if_fail (info != NULL, NULL);
  g_return_val_if_fail (i < info->keys->len, NULL);

  return g_ptr_array_index (info->keys, i);
}

const char *
tdm_export_info_get_value (const TdmExportInfo *info,
                           guint                i)
{
  g_return_val_if_fail (info != NULL, NULL);
  g_return_val_if_fail (i < info->values->len, NULL);

  return g_ptr_array_index (info->values, i);
}

const char *
tdm_export_info_lookup (const TdmExportInfo *info,
                        const char          *key)
{
  g_return_val_if_fail (info != NULL, NULL);
  g_return_val_if_fail (key != NULL, NULL);

  for (guint i = 0; i < info->keys->len; i++)
    if (g_str_equal (g_ptr_array_index (info->keys, i), key))
      return g_ptr_array_index (info->values, i);

  return NULL;
}

char *
tdm_export_info_to_comment (const TdmExportInfo *info)
{
  GString *text;

  g_return_val_if_fail (info != NULL, NULL);

  text = g_string_new (NULL);
  for (guint i = 0; i < info->keys->len; i++)
    g_string_append_printf (text, "# %s: %s\n", (char *) g_ptr_array_index (info->keys, i),
                            (char *) g_ptr_array_index (info->values, i));

  return g_string_free (text, FALSE);
}

char *
tdm_export_info_to_caption (const TdmExportInfo *info)
{
  /* What tells two figures apart; the file's metadata has the rest. */
  static const char *const shown[] = {
    "dataset", "network", "devices", "strategy", "batch", "epochs", "optimizer", "lr",
    "schedule", "precision", "seed",
  };
  GString *text;

  g_return_val_if_fail (info != NULL, NULL);

  text = g_string_new (NULL);
  g_string_append_printf (text, "Tandem %s, %s", tdm_export_info_lookup (info, "tandem"),
                          tdm_export_info_lookup (info, "date"));
  for (guint i = 0; i < G_N_ELEMENTS (shown); i++)
    {
      const char *value = tdm_export_info_lookup (info, shown[i]);

      if (value != NULL)
        g_string_append_printf (text, " · %s %s", shown[i], value);
    }

  return g_string_free (text, FALSE);
}
