/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-memory.h — what a run will allocate, per device and on the host, before it does.
 *
 * The estimate follows the code that allocates: a replica's buffers layer by layer
 * (tdm_replica_layer_buffers(), the rule tdm-replica.c allocates by), the optimizer's
 * state where the strategy keeps it, communicators' staging buffers, the trainer's host
 * copies (exact mode's sums among them) and the dataset. The trainer refuses a run whose host needs exceed what the
 * machine and the process's limits leave (tdm_memory_check_host()), and reports the
 * estimate as an event; the window shows it before Start. Not a measurement: the
 * backends' byte counters and telemetry measure.
 */
#pragma once

#include <glib.h>
#include "tdm-config.h"
#include "tdm-events.h"
#include "tdm-network.h"
#include "tdm-replica.h"

G_BEGIN_DECLS

/* One replica's bytes on its device, by kind; total is their sum. */
typedef struct {
  guint64 parameters, gradients, activations, workspace, inference, dataset, total;
  guint64 columns;   /* of workspace: the column workspace (TdmReplicaPlan.columns) */
} TdmReplicaBytes;

/* A replica of net on a backend of this kind and precision for `capacity` samples a
 * step and `eval_capacity` an evaluation chunk, with datasets of these sizes (samples
 * of the network's input size, one label byte each): tdm_replica_plan()'s figures.
 * The kind matters: a backend that runs a convolution whole keeps a scratch instead of
 * columns; so does the precision: a GPU under bf16 keeps a bf16 copy of the
 * parameters. */
TdmReplicaBytes tdm_memory_replica (const TdmNetwork *net, TdmBackendKind kind,
                                    TdmPrecision precision, int capacity, int eval_capacity,
                                    int train_count, int test_count);

/* Bytes a replica of `net` for `capacity` samples a step and `eval_capacity` an
 * evaluation chunk needs on its device, datasets included: checked against free
 * memory before anything is allocated. The figure is tdm_memory_replica()'s total,
 * which sums tdm_replica_plan(). */
size_t tdm_replica_bytes_needed (const TdmNetwork *net, TdmBackendKind kind,
                                 TdmPrecision precision, int capacity, int eval_capacity,
                                 const TdmDataset *train, const TdmDataset *test);

/* The samples a replica trains at most in a step: a full shard. */
int tdm_memory_capacity (const TdmConfig *config, int world, int test_count);

/* The evaluation chunk of a replica on a backend of this kind:
 * tdm_replica_eval_capacity() for the configured --eval-batch (or the test set when
 * smaller). The trainer allocates by it and the estimate counts it. */
int tdm_memory_eval_capacity (const TdmConfig *config, const TdmNetwork *net,
                              TdmBackendKind kind, int world, int test_count);

/* Fills *estimate for config (its devices, batch, strategy, optimizer, precision — auto
 * resolved for its devices, tdm-precision-auto.h — and save path) with net and datasets
 * of these sizes. Host bytes count CPU workers' memory too (a CPU
 * device's memory is the host's). GPU replicas' column workspaces are what an earlier
 * run of the same configuration settled on after its convolutions were chosen, where
 * every GPU replica's is remembered (tdm_memory_recall_workspaces(): basis "chosen"),
 * else the plan's upper bound ("upper-bound"). */
void tdm_memory_estimate (const TdmConfig *config, const TdmNetwork *net, int train_count,
                          int test_count, TdmMemoryEvent *estimate);
/* The same with each replica's column workspace given: columns[r] bytes for GPU
 * replica r, or the upper bound where 0 (CPU replicas: always their own); the basis
 * is reported as given. */
void tdm_memory_estimate_with (const TdmConfig *config, const TdmNetwork *net,
                               int train_count, int test_count, const guint64 *columns,
                               TdmWorkspaceBasis basis, TdmMemoryEvent *estimate);
/* Fills columns[r] (one for each of the configuration's replicas) with the column
 * workspace remembered for GPU replica r's configuration
 * (tdm_backend_conv_workspace_recall()), and returns TDM_WORKSPACE_CHOSEN, when every
 * GPU replica's is (and the run is not --exact, whose rule chooses among what fits);
 * else zeros and TDM_WORKSPACE_UPPER_BOUND; TDM_WORKSPACE_COLUMNS with zeros when no
 * replica is a GPU. */
TdmWorkspaceBasis tdm_memory_recall_workspaces (const TdmConfig *config,
                                                const TdmNetwork *net, int train_count,
                                                int test_count, guint64 *columns);
/* What names replica r's configuration for its remembered workspace: the network and
 * its input, the precision, exact mode, the batch and its shards, the capacities, the
 * datasets' sizes, the frozen layers, and the environment's switches of the
 * convolution engine; free it. */
char *tdm_memory_workspace_plan (const TdmConfig *config, const TdmNetwork *net, int replica,
                                 int train_count, int test_count);

/* Whether an estimate fits: its host bytes within host_budget and every GPU
 * replica's bytes within gpu_budget (0: no limit on that side; a CPU worker's bytes are
 * the host's). The one fit rule: the window's verdict before Start and
 * tdm_memory_largest_batch() both ask it. */
gboolean tdm_memory_fits (const TdmMemoryEvent *estimate, guint64 host_budget,
                          guint64 gpu_budget);

/* The largest global batch (at most train_count) whose estimate fits
 * (tdm_memory_fits()). 0 when not even a batch of one fits. */
int tdm_memory_largest_batch (const TdmConfig *config, const TdmNetwork *net, int train_count,
                              int test_count, guint64 host_budget, guint64 gpu_budget);

/* Bytes this process can still allocate on the host: MemAvailable from /proc/meminfo,
 * lowered by RLIMIT_AS (less the address space in use) and RLIMIT_DATA (less the data
 * in use) when they are set. G_MAXUINT64 when nothing can be read. `why` (may be NULL)
 * receives which limit it was: "available memory", "the address-space limit (ulimit
 * -v)" or "the data-size limit (ulimit -d)". */
guint64 tdm_memory_host_available (const char **why);

/* FALSE with TDM_ENGINE_ERROR_OUT_OF_MEMORY and the figures ("not enough host memory:
 * the run needs 22.4 GiB, 18.1 GiB available …") when the estimate's host bytes, less
 * `allocated` of them already in use (the loaded dataset), exceed `available`. */
gboolean tdm_memory_check_host (const TdmMemoryEvent *estimate, guint64 available,
                                guint64 allocated, const char *why, GError **error);

G_END_DECLS
