/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-pacer.h: spreads costly updates of the screen over time, one at a time.
 *
 * A TdmPacer has a few numbered slots (a chart, the status line…). Marking a slot says
 * it has news; every `interval_ms` the pacer calls back for the next marked slot,
 * round robin, one slot per call, and never for the same slot again within
 * `min_period_ms`. So however fast news comes, each slot updates at a bounded rate
 * and no two updates land in the same frame. The pacer owns no data and draws
 * nothing: the callback does the update. Main thread only; its timeout runs only
 * while some slot is marked.
 */

#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define TDM_PACER_MAX_SLOTS 32

typedef struct _TdmPacer TdmPacer;

typedef void (*TdmPacerFunc) (guint    slot,
                              gpointer user_data);

TdmPacer *tdm_pacer_new      (guint         interval_ms,
                              guint         min_period_ms,
                              TdmPacerFunc  func,
                              gpointer      user_data);
void      tdm_pacer_free     (TdmPacer     *pacer);

/* For tests: the clock (monotonic microseconds) the pacer reads instead of
 * g_get_monotonic_time(), so its rate can be checked on the clock's readings. */
typedef gint64 (*TdmPacerClock) (gpointer user_data);
void      tdm_pacer_set_clock (TdmPacer     *pacer,
                               TdmPacerClock clock,
                               gpointer      user_data);

/* The slot has news; the callback comes for it soon. */
void      tdm_pacer_mark     (TdmPacer     *pacer,
                              guint         slot);
/* The news was handled some other way (or dropped): no callback for it. */
void      tdm_pacer_unmark   (TdmPacer     *pacer,
                              guint         slot);
gboolean  tdm_pacer_is_marked (TdmPacer    *pacer,
                               guint        slot);
/* No slot is marked. */
gboolean  tdm_pacer_is_idle  (TdmPacer     *pacer);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmPacer, tdm_pacer_free)

G_END_DECLS
