/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-printer.h — what tandem-train prints while it trains: a live progress line
 * on a terminal, a line per epoch and a summary at the end (or, with --json, the
 * events as JSON lines), and the run recorded into the history with --record.
 *
 * tandem-train fills in the options, hands tdm_cli_printer_on_event to the trainer
 * with the printer as its data, and reads stepped afterwards for the exit status.
 */
#pragma once

#include "tdm-config.h"
#include "tdm-events.h"
#include "tdm-history.h"
#include "tdm-tensorboard-run.h"

#include <gio/gio.h>

G_BEGIN_DECLS

typedef struct {
  gboolean json;          /* JSON lines on stdout, nothing else there */
  gboolean quiet;
  gboolean bar;           /* stderr is a terminal: draw the live line */
  gboolean log;           /* stdout is a log: plain progress lines there instead */
  const TdmConfig *config;  /* the run's settings, for the header */
  /* Log lines: the last one's epoch, tenth of that epoch and training time, and the
   * set-up phase and time of the last set-up line. */
  int log_epoch, log_tenth;
  double log_elapsed;
  int setup_phase;
  double setup_said;
  gboolean bar_shown;     /* something is on the live line now */
  gboolean stop_told;
  gboolean started;
  gboolean stepped;       /* a training step has been reported */
  TdmStartedEvent start;
  double trained;         /* seconds of training in this process, as the engine counts */
  gint64 t_start;         /* monotonic µs when the run began: the logs' elapsed time */
  gint64 t_epoch, t_draw;   /* monotonic µs */
  GCancellable *cancellable;
  TdmRunRecorder *recorder; /* --record */
  TdmTensorboardRun *tensorboard; /* --tensorboard */
} TdmCliPrinter;

/* A plain progress line goes to a log at each tenth of an epoch and after this
 * much training time without one. */
#define TDM_CLI_LOG_INTERVAL_S 10.0

/* A TdmEventFunc: prints ev as the printer's options say. */
void tdm_cli_printer_on_event (const TdmEvent *ev, gpointer printer);

/* Clears the live progress line, if one is shown, before something else is printed. */
void tdm_cli_printer_clear_bar (TdmCliPrinter *p);

/* Closes a record of an experiment's (or of one of its trainings) and says where it
 * went when `say` and it was kept; 1 after a line naming --record's write error, else
 * 0. */
int tdm_cli_record_close (TdmRunRecorder *recorder, TdmHistory *history, gboolean say);

G_END_DECLS
