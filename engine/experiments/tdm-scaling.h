/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-scaling.h — how training throughput scales over 1 … N devices.
 *
 * Two layers. The meter reads one run's events (as a TdmEventSink) and turns them
 * into samples per second over the window between its first and last step summary,
 * with each device's compute / communication / wait per step: bench/bench-scaling.c
 * and the window's scaling run measure the same way. The sweep (the scaling
 * experiment, tdm-experiment.h) runs a configuration on its first 1, 2, … N devices,
 * strong scaling (the same global batch) or weak (the same batch per device), and
 * reports each point as it is measured; it is cancellable. Measures wall-clock
 * throughput: for benchmarks and teaching, never for
 * asserting speeds in tests.
 */
#pragma once

#include <gio/gio.h>
#include "tdm-config.h"
#include "tdm-events.h"

G_BEGIN_DECLS

/* One run as its events tell it; zero it (or use tdm_scaling_measure_once) first. */
typedef struct {
  int batch;                   /* global, as configured */
  int replicas;
  int train_count, steps_per_epoch;
  size_t parameters;
  gint64 started_us;
  gint64 first_step_us, last_step_us;
  long first_step, last_step;
  int step_events;
  gint64 excluded_us;          /* epoch-end evaluations after the first summary */
  /* DEVICES figures: per replica sums of the per-step means, over the events that
   * timed any step; `late` leaves out the first such event, which holds step 1. */
  int all_events, late_events;
  double all[TDM_MAX_REPLICAS][3], late[TDM_MAX_REPLICAS][3];
  gint64 peak_bytes[TDM_MAX_REPLICAS];   /* the most each replica's device held */
  int cpu_threads;             /* BLAS threads each CPU worker ran, as STARTED said */
} TdmScalingMeter;

typedef struct {
  long steps;                  /* the run's max_steps */
  double seconds;              /* of the timed window */
  double samples_per_second;
  double compute_ms, comm_ms, wait_ms;   /* per step, mean over replicas */
  double comm_least_ms;        /* per step, the replica that communicated least */
  size_t parameters;
  gboolean from_start;         /* one summary only: timed from STARTED */
  int replicas;
  gint64 peak_bytes[TDM_MAX_REPLICAS];   /* the most each device held, of `replicas` */
  int cpu_threads;             /* BLAS threads each CPU worker ran (0: none) */
} TdmScalingResult;

/* A TdmEventSink; `meter` is a TdmScalingMeter. */
void tdm_scaling_meter_event (const TdmEvent *event, gpointer meter);
/* FALSE when the run gave no timed window. */
gboolean tdm_scaling_meter_result (const TdmScalingMeter *meter, long steps,
                                   TdmScalingResult *result);
/* Seconds per step, for sizing the next run: from the window when there is one, else
 * an upper bound (the first steps' costs included). */
double tdm_scaling_meter_seconds_per_step (const TdmScalingMeter *meter);
/* Trains `config` for `steps` steps (it sets config->max_steps) into a fresh meter. */
gboolean tdm_scaling_measure_once (TdmConfig *config, long steps, TdmScalingMeter *meter,
                                   GCancellable *cancellable, GError **error);

typedef enum {
  TDM_SCALING_STRONG,          /* the configured global batch at every n */
  TDM_SCALING_WEAK,            /* the configured batch per device, times n */
} TdmScalingMode;

/* "strong", "weak", as files and exports write them. */
const char *tdm_scaling_mode_name (TdmScalingMode mode);
/* FALSE for any other word. */
gboolean tdm_scaling_mode_from_name (const char *name, TdmScalingMode *mode);

typedef struct {
  int index, count;            /* this point, of how many */
  int devices;                 /* n */
  int batch;                   /* global batch at n */
  long steps;
  double samples_per_second;
  double speedup;              /* over n = 1 */
  double efficiency;           /* speedup / n; 1 is the ideal line */
  double compute_ms, comm_ms, wait_ms;   /* per step, mean over the devices */
  /* The most Tandem held on each of the n devices during the timed run (its
   * allocator's bytes: a CPU worker's host memory, a GPU's device memory). */
  gint64 memory_bytes[TDM_MAX_REPLICAS];
  /* The spread: each point is timed TDM_SCALING_RUNS times at least (more, up to
   * TDM_SCALING_RUNS_MAX, while the fastest and slowest are more than
   * TDM_SCALING_SPREAD of the median apart); samples_per_second is the median, these
   * the slowest and fastest run, and the speed-ups they give. */
  double samples_per_second_min, samples_per_second_max;
  double speedup_min, speedup_max;
  int runs;
  /* BLAS threads each CPU worker ran, as the engine reported it: every point runs its
   * devices alike (one thread a worker, the one-device point too); 0 for GPUs. */
  int cpu_threads;
} TdmScalingPoint;

#define TDM_SCALING_RUNS 3
#define TDM_SCALING_RUNS_MAX 5
#define TDM_SCALING_SPREAD 0.10

typedef void (*TdmScalingSink) (const TdmScalingPoint *point, gpointer user_data);

/* Cores a sweep of `workers` CPU workers needs for its last point to run faster than
 * its first: one a worker (each runs one BLAS thread in a sweep) and one for what
 * runs beside them (the window's drawing, the workers' communication threads).
 * With fewer, the workers take turns on the cores and N of them run no faster than
 * one. */
int tdm_scaling_cores_needed (int workers);
/* The cores this process may use (logical cores, as g_get_num_processors()). */
int tdm_scaling_cores_available (void);

G_END_DECLS
