/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run-export-info.c: the export info of a run, from its configuration.
 *
 * The settings are the engine's (tdm_config_describe()), never re-derived here, so
 * a CSV, an SVG and a PNG of one run, and `tandem-train`'s own names for the same
 * choices, agree. Only the version and the date are added, and the precision as
 * computed where auto chose it.
 */

#include "tdm-run-export-info.h"

TdmExportInfo *
tdm_run_export_info_new (const TdmConfig *config,
                         GDateTime       *started)
{
  TdmExportInfo *info;
  g_auto(GStrv) pairs = NULL;

  g_return_val_if_fail (config != NULL, NULL);

  info = tdm_export_info_new ();
  pairs = tdm_config_describe (config);
  for (guint i = 0; pairs[i] != NULL && pairs[i + 1] != NULL; i += 2)
    tdm_export_info_add (info, pairs[i], pairs[i + 1]);
  tdm_export_info_add_origin (info, started);

  return info;
}

void
tdm_run_export_info_set_precision (TdmExportInfo *info,
                                   TdmPrecision   asked,
                                   TdmPrecision   used)
{
  g_autofree char *value = NULL;

  g_return_if_fail (info != NULL);

  value = tdm_precision_describe_used (asked, used);
  tdm_export_info_set (info, "precision", value);
}
