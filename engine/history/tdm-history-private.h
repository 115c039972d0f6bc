/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history-private.h — what the parts of the run history share: the history and
 * recorder structs, the one-line writer and the JSON member helpers. tdm-history.c
 * writes training runs and manages the files, tdm-history-read.c reads them,
 * tdm-experiment-record.c experiments, tdm-history-export.c turns either into CSV.
 * Nothing outside engine/history includes it.
 */
#pragma once

#include "tdm-history.h"
#include "tdm-json.h"

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

struct _TdmHistory {
  char *folder;
};

/* Larger files are refused on reading: a run file stays a few MB (the recorder thins
 * it past TDM_HISTORY_BUDGET), and reading one costs about a second per 5 MB of JSON
 * (json-glib's tree), so a hostile 1 GB file would keep a listing busy for minutes. */
#define TDM_HISTORY_MAX_FILE (64 * 1000 * 1000)
/* The most samples a loaded series keeps (steps, device figures, phases); past it the
 * reader thins the series, as the recorder thins a long run's file, so a record's
 * memory stays bounded whatever the file holds. Epochs stop there too. */
#define TDM_HISTORY_MAX_POINTS (1u << 19)

struct _TdmRunRecorder {
  char *id;
  char *path;
  char *folder;
  int fd;
  /* A long run's file is thinned as it grows (tdm-history-compact.c). */
  gint64 next_compaction;       /* thinned when `written` passes this */
  gint64 budget;                /* bytes a file may reach before its first thinning */
  double recent;                /* seconds at the end of the run kept whole */
  GError *error;                /* the first write error */
  TdmRunKind kind;
  TdmConfig *config;            /* what the record was made for */
  int kept;                     /* an experiment's points and runs written so far */
  gboolean discarded;           /* its file was removed */
};

/* Creates the file with its settings line: `kind`, and for an experiment its own
 * settings as the "experiment" member (`experiment` is taken; NULL for training
 * runs). */
TdmRunRecorder *tdm_history_recorder_open (TdmHistory *history, const TdmConfig *config,
                                           const char *name, TdmRunKind kind,
                                           JsonNode *experiment, GError **error);

/* Appends the line to the recorder's file and thins the file when it has grown past
 * its budget. Errors go to the recorder's first write error. */
void tdm_history_recorder_write (TdmRunRecorder *recorder, JsonBuilder *builder);

gboolean tdm_history_valid_id (const char *id, GError **error);
char *tdm_history_run_path (TdmHistory *history, const char *id);

/* The builder's object as one line, in one write() (see tdm-history.c). */
gboolean tdm_history_append_line (int fd, const char *path, JsonBuilder *builder,
                                  GError **error);
/* A member as a number: NaN (double) or 0 (int) when missing or null. */
double tdm_history_get_double (JsonObject *object, const char *name);
gint64 tdm_history_get_int (JsonObject *object, const char *name);
/* The member's text, or fallback where it is missing or not a string (null, a number,
 * an object: a damaged or hostile file). */
const char *tdm_history_get_string (JsonObject *object, const char *name, const char *fallback);
/* ",value" in C notation, or a lone "," when not finite. */
void tdm_history_csv_value (GString *text, double value);

/* tdm-experiment-record.c: an experiment's settings member (or an older sweep's
 * "scaling" one, `old_sweep`); FALSE with the error when its kind is not one this
 * version knows. */
gboolean tdm_history_read_experiment_settings (TdmRunRecord *record, JsonObject *settings,
                                               gboolean old_sweep, const char *path,
                                               GError **error);
/* TRUE when the line was the experiment's own (a point, a run); its result is taken
 * from the "finished" line, which the caller reads as well. */
gboolean tdm_history_read_experiment_line (TdmRunRecord *record, const char *type,
                                           JsonObject *object);

G_END_DECLS
