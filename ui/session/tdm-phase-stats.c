/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-phase-stats.c: the live run's phases per device (tdm-phase-stats.h): a ring of
 * the last TDM_PHASE_STATS_WINDOW sampled steps' times. */

#include "tdm-phase-stats.h"

#include <math.h>
#include <string.h>

struct _TdmPhaseStats
{
  int     replicas;
  /* Time in each phase per device in each of the window's steps (a ring, oldest
   * overwritten), and the communication hidden under backward beside it;
   * window_steps counts the steps put in since the reset (or the start-up's). */
  double  step_ms[TDM_PHASE_STATS_WINDOW][TDM_MAX_REPLICAS][TDM_PHASE_COUNT];
  double  hidden_ms[TDM_PHASE_STATS_WINDOW][TDM_MAX_REPLICAS];
  int     window_steps;
  int     timed_steps;
  int     spans[TDM_MAX_REPLICAS][TDM_PHASE_COUNT];
  double  last_overlap[TDM_MAX_REPLICAS];
  guint64 bytes[TDM_MAX_REPLICAS][2];
};

TdmPhaseStats *
tdm_phase_stats_new (void)
{
  TdmPhaseStats *stats = g_new0 (TdmPhaseStats, 1);

  tdm_phase_stats_reset (stats, 0);
  return stats;
}

void
tdm_phase_stats_free (TdmPhaseStats *stats)
{
  g_free (stats);
}

void
tdm_phase_stats_reset (TdmPhaseStats *stats,
                       int            replicas)
{
  g_return_if_fail (stats != NULL);

  memset (stats, 0, sizeof *stats);
  stats->replicas = CLAMP (replicas, 0, TDM_MAX_REPLICAS);
  for (int r = 0; r < TDM_MAX_REPLICAS; r++)
    stats->last_overlap[r] = NAN;
}

void
tdm_phase_stats_add (TdmPhaseStats        *stats,
                     const TdmPhasesEvent *phases)
{
  int slot;

  g_return_if_fail (stats != NULL && phases != NULL);

  /* The second sampled step overwrites the first (the start-up's). */
  if (stats->timed_steps == 1)
    stats->window_steps = 0;
  slot = stats->window_steps % TDM_PHASE_STATS_WINDOW;
  memset (stats->step_ms[slot], 0, sizeof stats->step_ms[slot]);
  memset (stats->hidden_ms[slot], 0, sizeof stats->hidden_ms[slot]);
  for (int r = 0; r < MIN (phases->replicas, stats->replicas); r++)
    {
      const TdmDevicePhases *d = &phases->device[r];

      for (int i = 0; i < MIN (d->spans, TDM_MAX_PHASE_SPANS); i++)
        if (d->span[i].phase >= 0 && d->span[i].phase < TDM_PHASE_COUNT)
          {
            stats->step_ms[slot][r][d->span[i].phase] += d->span[i].end_ms - d->span[i].start_ms;
            stats->spans[r][d->span[i].phase]++;
          }
      stats->bytes[r][0] = d->bytes_sent;
      stats->bytes[r][1] = d->bytes_received;
      stats->hidden_ms[slot][r] = d->hidden_ms;
      stats->last_overlap[r] = tdm_device_phases_overlap (d);
    }
  stats->window_steps++;
  stats->timed_steps++;
}

int
tdm_phase_stats_get_timed_steps (const TdmPhaseStats *stats)
{
  g_return_val_if_fail (stats != NULL, 0);

  return stats->timed_steps;
}

int
tdm_phase_stats_get_spans (const TdmPhaseStats *stats,
                           int                  device,
                           TdmPhase             phase)
{
  g_return_val_if_fail (stats != NULL, 0);
  g_return_val_if_fail (phase >= 0 && phase < TDM_PHASE_COUNT, 0);

  if (device < 0 || device >= stats->replicas)
    return 0;
  return stats->spans[device][phase];
}

double
tdm_phase_stats_get_mean_ms (const TdmPhaseStats *stats,
                             int                  device,
                             TdmPhase             phase)
{
  int steps;
  double sum = 0;

  g_return_val_if_fail (stats != NULL, 0);
  g_return_val_if_fail (phase >= 0 && phase < TDM_PHASE_COUNT, 0);

  if (device < 0 || device >= stats->replicas)
    return 0;
  steps = MIN (stats->window_steps, TDM_PHASE_STATS_WINDOW);
  for (int i = 0; i < steps; i++)
    sum += stats->step_ms[i][device][phase];
  return steps > 0 ? sum / steps : 0;
}

double
tdm_phase_stats_get_overlap (const TdmPhaseStats *stats,
                             int                  device,
                             gboolean             last)
{
  int steps;
  double exposed = 0, hidden = 0;

  g_return_val_if_fail (stats != NULL, NAN);

  if (device < 0 || device >= stats->replicas)
    return NAN;
  if (last)
    return stats->last_overlap[device];
  steps = MIN (stats->window_steps, TDM_PHASE_STATS_WINDOW);
  for (int i = 0; i < steps; i++)
    {
      exposed += stats->step_ms[i][device][TDM_PHASE_REDUCE]
                 + stats->step_ms[i][device][TDM_PHASE_ALLREDUCE]
                 + stats->step_ms[i][device][TDM_PHASE_BROADCAST];
      hidden += stats->hidden_ms[i][device];
    }
  return tdm_overlap_percent (exposed, hidden);
}

void
tdm_phase_stats_get_bytes (const TdmPhaseStats *stats,
                           int                  device,
                           guint64             *sent,
                           guint64             *received)
{
  g_return_if_fail (stats != NULL);

  *sent = *received = 0;
  if (device < 0 || device >= stats->replicas)
    return;
  *sent = stats->bytes[device][0];
  *received = stats->bytes[device][1];
}
