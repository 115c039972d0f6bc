/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-devices-page-private.h: TdmDevicesPage's fields, for its source files.
 *
 * tdm-devices-page.c holds the page, its events and what it answers; the phase and
 * memory tables' cells are built in tdm-devices-page-tables.c. Nothing outside
 * ui/pages/tdm-devices-page*.c includes this.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-devices-page.h"
#include "tdm-phase-stats.h"

G_BEGIN_DECLS

struct _TdmDevicesPage
{
  GtkWidget       parent_instance;

  TdmSession     *session;
  gulong          session_event;
  TdmPhaseStats  *no_stats;            /* what the table shows without a session */

  GtkWidget      *scroller;
  GtkWidget      *timeline;
  GtkWidget      *batch_strip;
  GtkWidget      *memory_grid;
  GtkWidget      *warning_label;
  GtkWidget      *memory_note;
  GtkWidget      *phase_grid;
  GtkWidget      *reference_caption;   /* under the timeline, while it compares */
  char           *reference_text;      /* the reference's caption (NULL: none) */
  gboolean        comparing;           /* two runs side by side on the timeline */

  /* The run's devices in the phase table (0 once cleared: the table goes until the
   * next run starts); its figures are the session's (TdmPhaseStats). */
  int             phase_replicas;
  int             main_replica;
  char            device_name[TDM_MAX_REPLICAS][48];
  gboolean        presentation;
  GtkWidget      *overlap_cell[TDM_MAX_REPLICAS][2];
  /* The phase table as built: which phases have columns, and their number cells, so
   * that a new step changes texts instead of rebuilding the table. */
  guint           phase_mask;
  gboolean        phases_stale;   /* figures arrived while the page was not shown */
  GtkWidget      *phase_cell[TDM_MAX_REPLICAS][TDM_PHASE_COUNT];
  /* The cells of the bytes the last timed step's collectives moved out of and into
   * each device (the engine counts them: tdm-communicator.h). */
  GtkWidget      *bytes_cell[TDM_MAX_REPLICAS][2];

  TdmMemoryEvent  estimate;
  gboolean        has_estimate;
  gint64          peak[TDM_MAX_REPLICAS];
  /* The driver's figure for the whole GPU (context, libraries, every process and
   * every replica on it), highest seen; −1 when the device gives none (CPU). */
  gint64          device_peak[TDM_MAX_REPLICAS];
  int             replicas;
  char           *warning;
};

/* The run's phases as the session took them in. */
const TdmPhaseStats *tdm_devices_page_stats        (TdmDevicesPage *self);
/* The phase table: its cells' texts, rebuilt when the devices or phases change. */
void                 tdm_devices_page_fill_phases  (TdmDevicesPage *self);
/* The memory table, rebuilt whole. */
void                 tdm_devices_page_fill_memory  (TdmDevicesPage *self);

G_END_DECLS
