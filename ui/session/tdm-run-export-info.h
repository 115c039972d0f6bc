/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run-export-info.h: the export info of a run, from its configuration.
 *
 * The chart library's TdmExportInfo holds key/value pairs and knows no engine; this
 * fills one with a run's settings as the engine names them (tdm_config_describe()),
 * the Tandem version and the date. Nothing else.
 */

#pragma once

#include <glib.h>

#include "tdm-config.h"
#include "tdm-export-info.h"

G_BEGIN_DECLS

/* @started: (nullable): when the run started; now if NULL */
TdmExportInfo *tdm_run_export_info_new (const TdmConfig *config,
                                        GDateTime       *started);

/* The precision as the run computed in it where it asked for auto ("bf16 (auto)"),
 * `used` as its start reported it (or as tdm_precision_resolve_here() gives it before
 * it starts); as asked otherwise. */
void tdm_run_export_info_set_precision (TdmExportInfo *info,
                                        TdmPrecision   asked,
                                        TdmPrecision   used);

G_END_DECLS
