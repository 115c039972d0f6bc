/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-phase-stats.h: what the live run's sampled steps say of its phases, per device.
 *
 * The mean time a step in each phase over the last TDM_PHASE_STATS_WINDOW sampled
 * steps (so it follows the run as it is now: a new pace, a strategy's steady state),
 * how many spans of each phase came, the bytes the last step's collectives moved, and
 * how much communication ran hidden under backward. A run's first sampled step is
 * left out once a second one has come: it carries the start-up (a GPU's context and
 * cuBLAS handles, first touch of every buffer), 135 ms of forward on an H200 against
 * 0.26 ms in the steps after, and would dominate the means for long. TdmSession keeps
 * one for the run shown (tdm_session_get_phase_stats); the Devices page shows it. Plain
 * data, no GObject, no GTK.
 */

#pragma once

#include <glib.h>

#include "tdm-events.h"

G_BEGIN_DECLS

#define TDM_PHASE_STATS_WINDOW 16

typedef struct _TdmPhaseStats TdmPhaseStats;

TdmPhaseStats *tdm_phase_stats_new             (void);
void           tdm_phase_stats_free            (TdmPhaseStats        *stats);
/* A new run of `replicas` devices: nothing sampled yet. */
void           tdm_phase_stats_reset           (TdmPhaseStats        *stats,
                                                int                   replicas);
void           tdm_phase_stats_add             (TdmPhaseStats        *stats,
                                                const TdmPhasesEvent *phases);

/* Sampled steps taken in since the reset. */
int            tdm_phase_stats_get_timed_steps (const TdmPhaseStats  *stats);
/* Spans of `phase` seen on `device` since the reset (0 outside the run's devices). */
int            tdm_phase_stats_get_spans       (const TdmPhaseStats  *stats,
                                                int                   device,
                                                TdmPhase              phase);
/* The device's mean milliseconds a step in the phase over the window; 0 before any. */
double         tdm_phase_stats_get_mean_ms     (const TdmPhaseStats  *stats,
                                                int                   device,
                                                TdmPhase              phase);
/* The share of the device's communication hidden under backward, percent, over the
 * window (`last` FALSE) or in the last sampled step; NaN when there was none. */
double         tdm_phase_stats_get_overlap     (const TdmPhaseStats  *stats,
                                                int                   device,
                                                gboolean              last);
/* What the last sampled step's collectives moved out of and into the device. */
void           tdm_phase_stats_get_bytes       (const TdmPhaseStats  *stats,
                                                int                   device,
                                                guint64              *sent,
                                                guint64              *received);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmPhaseStats, tdm_phase_stats_free)

G_END_DECLS
