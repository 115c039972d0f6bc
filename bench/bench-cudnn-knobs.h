/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-cudnn-knobs.h — what bench-cudnn-knobs.c (the sweep) and
 * bench-cudnn-knobs-report.c (its table and JSON) share: a knob choice, a knob's range,
 * a timed plan, an engine's sweep, a shape's. A benchmark's own header; not an API.
 */
#pragma once

#include "tdm-backend.h"
#include "tdm-cudnn.h"

#include <glib.h>
#include <stdint.h>

/* A plan's output further from the reference's than this (relative, 2^-6) is flagged
 * and never the best found. */
#define ERROR_FLAG (1.0 / 64)

/* One knob choice, and one knob's range (an engine's knob info). */
typedef struct {
  int type;
  int64_t value;
} Knob;

typedef struct {
  int type;
  int64_t min, max, stride;
} Range;

/* One timed plan. */
typedef struct {
  int64_t engine;
  char *origin;                /* "A:r0" (heuristics' mode A, rank 0), "knob", "product" */
  GArray *knobs;               /* Knob, by type */
  char *spelt;                 /* the knobs in words, "*" on those unlike the heuristics' */
  double ms, error;
  int64_t workspace;
} Timed;

/* What an engine's sweep learned. */
typedef struct {
  int64_t engine;
  GArray *ranges;              /* Range */
  GArray *base;                /* Knob: its heuristics' configuration */
  double base_ms;
  int tried;                   /* configurations finalized or refused */
} Engine;

/* One shape and direction, and what its sweep found. */
typedef struct {
  TdmConvDirection dir;
  TdmConvShape s;
  char *key;
  GPtrArray *timed;            /* Timed */
  GPtrArray *engines;          /* Engine */
  int refused;                 /* configurations cuDNN would not finalize */
  int failed;                  /* plans that finalized but did not run */
  int by_notes;                /* heuristics' configurations the notes leave out */
  int by_workspace;            /* plans needing more than 1 GiB (or what is free) */
  gboolean cut;                /* the budget ran out */
  char *why_not;               /* the graph or heuristics refused, or NULL */
} Sweep;

/* How the sweep was run, for the report. */
typedef struct {
  const char *device;          /* the GPU's name */
  size_t cudnn_version;
  const char *output;          /* "bf16" or "float32" */
  double budget;
  int engines, max_plans;
  gboolean runtime;
} Setup;

/* cudnnBackendKnobType_t's name for type ("TILE_SIZE"), "?" past the known ones. */
const char *knob_name (int type);
/* A shape's table on stdout: its engines' knobs, its timed plans fastest first (sorts
 * sw->timed; the first `lines` and every heuristics' configuration, or all where lines
 * is 0), the summary line. */
void sweep_print (const Sweep *sw, const char *output, int lines);
/* The summary line alone: the heuristics' best against the best found. */
void sweep_summary (const Sweep *sw);
/* Everything as JSON at path; FALSE (said on stderr) when it cannot be written. */
gboolean sweeps_write_json (const char *path, const Sweep *sweeps, int count,
                            const Setup *setup);
