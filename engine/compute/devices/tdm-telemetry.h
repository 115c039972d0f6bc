/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-telemetry.h — utilization, memory, temperature and power of each GPU.
 *
 * NVML is loaded with dlopen("libnvidia-ml.so.1") (no header, no link-time
 * dependency) and sampled on a thread of its own. Where NVML or a field is missing
 * the sample says so (valid bits), and the UI shows "—": nothing is ever faked.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  gboolean valid_utilization, valid_memory, valid_temperature, valid_power;
  double utilization;         /* percent, 0..100 */
  gint64 memory_used, memory_total;   /* bytes */
  double temperature;         /* °C */
  double power;               /* W */
} TdmTelemetrySample;

typedef struct _TdmTelemetry TdmTelemetry;

/* Starts sampling every interval_ms on a thread; works (with nothing valid) when
 * NVML is absent. */
TdmTelemetry *tdm_telemetry_new (guint interval_ms);
void tdm_telemetry_free (TdmTelemetry *t);

/* TRUE when NVML was loaded; the reason it was not otherwise. */
gboolean tdm_telemetry_available (TdmTelemetry *t, const char **why_not);
/* The latest sample for CUDA ordinal `gpu`; all-invalid when unknown. */
TdmTelemetrySample tdm_telemetry_get (TdmTelemetry *t, int gpu);

G_END_DECLS
