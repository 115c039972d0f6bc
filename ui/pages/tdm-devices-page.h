/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-devices-page.h: the window's "Devices" page.
 *
 * What each device does in a step (a TdmTimeline of the last sampled steps, and a
 * table of the mean time per step in each phase over the last timed steps), which
 * samples of the batch went to which device (a TdmBatchStrip), and each device's
 * memory: the engine's estimate before Start, beside the peak Tandem measured once a
 * run has reported it. It shows engine events and estimates; it computes no engine
 * rule and runs nothing.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-dataset.h"
#include "tdm-events.h"
#include "tdm-session.h"
#include "tdm-timeline.h"

G_BEGIN_DECLS

#define TDM_TYPE_DEVICES_PAGE (tdm_devices_page_get_type ())

G_DECLARE_FINAL_TYPE (TdmDevicesPage, tdm_devices_page, TDM, DEVICES_PAGE, GtkWidget)

GtkWidget *tdm_devices_page_new              (void);

/* The estimate for the choices as they stand (before Start, from the run form) or
 * as the run reported it; NULL says why there is none in `reason` (may be NULL).
 * `fits` FALSE shows a warning with `largest_batch` (≤ 0: none fits). */
void       tdm_devices_page_set_estimate     (TdmDevicesPage       *self,
                                              const TdmMemoryEvent *estimate,
                                              const char           *reason,
                                              gboolean              fits,
                                              int                   largest_batch);

/* A run's event: STARTED clears the peaks and the views, PHASES feeds the timeline,
 * BATCH the strip (thumbnails from `data`'s training set, may be NULL), DEVICES
 * the measured peaks, MEMORY the estimate. Others are ignored. */
/* Shows the session's run: each of its events (and its dataset) as below. */
/* Another run's step under this run's on the timeline, on one ms scale (NULL: none):
 * `title` names the run, `config` its devices. A caption says which is which. */
void       tdm_devices_page_set_reference    (TdmDevicesPage       *self,
                                              const TdmPhasesEvent *step,
                                              const char           *title,
                                              const TdmConfig      *config);
/* Two runs' steps one above the other on the timeline, on one ms scale (a strategy
 * comparison: tdm_timeline_set_comparison), `caption` under it; NULL: none, the
 * reference (if any) again. The next run's start and tdm_devices_page_clear() end it. */
void       tdm_devices_page_set_comparison   (TdmDevicesPage       *self,
                                              const TdmTimelineRun *above,
                                              const TdmTimelineRun *below,
                                              const char           *caption);
/* Forgets the last run: its timeline, batch split, phase table and measured peaks
 * (the estimate stays: it is about the choices, not the run). */
void       tdm_devices_page_clear            (TdmDevicesPage       *self);
void       tdm_devices_page_set_session      (TdmDevicesPage       *self,
                                              TdmSession           *session);
void       tdm_devices_page_handle_event     (TdmDevicesPage       *self,
                                              const TdmEvent       *event,
                                              const TdmDatasetPair *data);

/* Presentation mode: high-contrast phase colours. */
void       tdm_devices_page_set_presentation (TdmDevicesPage       *self,
                                              gboolean              presentation);

/* How many spans of the phase the device's timed steps had (its column shows their
 * mean milliseconds per step). */
int        tdm_devices_page_get_phase_spans  (TdmDevicesPage       *self,
                                              int                   device,
                                              TdmPhase              phase);
/* The mean milliseconds per step the device's cell of the phase shows (over the
 * last 16 timed steps, the run's first left out once a second came); −1 when the
 * table has no such cell yet. */
double     tdm_devices_page_get_phase_ms     (TdmDevicesPage       *self,
                                              int                   device,
                                              TdmPhase              phase);
/* The texts of the device's "sent" and "received" cells (bytes per step). */
gboolean   tdm_devices_page_get_bytes_shown  (TdmDevicesPage       *self,
                                              int                   device,
                                              const char          **sent,
                                              const char          **received);
/* Devices in the memory table; the estimate's and the measured peak's bytes for one
 * (−1 when not known yet). */
int        tdm_devices_page_get_n_memory_rows (TdmDevicesPage      *self);
gint64     tdm_devices_page_get_estimate_bytes (TdmDevicesPage     *self,
                                                int                 device);
gint64     tdm_devices_page_get_peak_bytes   (TdmDevicesPage       *self,
                                              int                   device);
/* The warning shown, or NULL when the run fits. */
const char *tdm_devices_page_get_warning     (TdmDevicesPage       *self);

G_END_DECLS
