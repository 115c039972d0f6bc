/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-distributed.c — MPI set-up for a process under mpirun: initialization at the
 * thread level the trainer needs, this rank's place in the job and on its machine,
 * the device each rank takes, and the two ways out (finalize when every rank is done,
 * abort when one has failed). Built only when MPI is found; the header has stubs. */
#include "tdm-distributed.h"
#include "tdm-i18n.h"

#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

static struct {
  gboolean active;
  int rank, size;
  int local_rank, local_size;
  int *local_ranks;            /* [size]: each rank's local rank, to name its GPU */
} dist;

static gboolean
mpi_failed(GError **error, const char *call, int code)
{
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    g_snprintf(text, sizeof text, "error %d", code);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION, _("%s failed: %s"), call,
              text);
  return FALSE;
}

gboolean
tdm_distributed_init(int *argc, char ***argv, GError **error)
{
  if (dist.active)
    return TRUE;
  int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE, code;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
                _("MPI was already finalized in this process; it cannot be started again"));
    return FALSE;
  }
  if (initialized)
    code = MPI_Query_thread(&provided);
  else
    code = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (code != MPI_SUCCESS)
    return mpi_failed(error, "MPI_Init_thread", code);
  if (provided < MPI_THREAD_FUNNELED) {
    /* Other threads exist (OpenBLAS's, telemetry, the Ctrl-C watcher), so MPI must
     * allow them, though only this thread calls it. */
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
                _("this MPI library offers thread level %d; Tandem needs "
                "MPI_THREAD_FUNNELED (%d) or better"), provided, MPI_THREAD_FUNNELED);
    return FALSE;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &dist.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &dist.size);

  /* The ranks sharing this machine's memory are the ones sharing its GPUs; MPI says
   * which they are whatever launched us (OMPI_COMM_WORLD_LOCAL_RANK is Open MPI's). */
  MPI_Comm node;
  code = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, dist.rank, MPI_INFO_NULL,
                             &node);
  if (code != MPI_SUCCESS)
    return mpi_failed(error, "MPI_Comm_split_type", code);
  MPI_Comm_rank(node, &dist.local_rank);
  MPI_Comm_size(node, &dist.local_size);
  MPI_Comm_free(&node);

  dist.local_ranks = g_new0(int, dist.size);
  code = MPI_Allgather(&dist.local_rank, 1, MPI_INT, dist.local_ranks, 1, MPI_INT,
                       MPI_COMM_WORLD);
  if (code != MPI_SUCCESS)
    return mpi_failed(error, "MPI_Allgather", code);
  dist.active = TRUE;
  return TRUE;
}

gboolean
tdm_distributed_active(void)
{
  return dist.active;
}

int
tdm_distributed_rank(void)
{
  return dist.active ? dist.rank : 0;
}

int
tdm_distributed_size(void)
{
  return dist.active ? dist.size : 1;
}

int
tdm_distributed_local_size(void)
{
  return dist.active ? dist.local_size : 1;
}

gboolean
tdm_distributed_resolve_devices(TdmConfig *config, GError **error)
{
  g_return_val_if_fail(config != NULL, FALSE);
  if (!dist.active)
    return TRUE;
  int size = dist.size;
  int given = tdm_config_replica_count(config);

  if (given != size && given != 1) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                _("--devices lists %d devices but mpirun started %d ranks: name one device "
                "per rank, or one for all (cpu, or cuda:N for GPU N plus each rank's local "
                "rank)"), given, size);
    return FALSE;
  }
  if (given == 1 && size > 1) {
    if (size > TDM_MAX_REPLICAS) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                  _("mpirun started %d ranks, more than the %d replicas Tandem supports"),
                  size, TDM_MAX_REPLICAS);
      return FALSE;
    }
    TdmDeviceId one = config->devices[0];
    for (int r = 0; r < size; r++) {
      config->devices[r] = one;
      if (tdm_device_id_is_gpu(one))
        config->devices[r].ordinal = one.ordinal + dist.local_ranks[r];
    }
    config->replicas = size;
  }

  /* One collective algorithm for the whole job: MPI's on host memory, or NCCL's. */
  gboolean any_cpu = FALSE, any_gpu = FALSE;
  for (int r = 0; r < config->replicas; r++) {
    gboolean gpu = tdm_device_id_is_gpu(config->devices[r]);
    any_cpu |= !gpu;
    any_gpu |= gpu;
  }
  if (any_cpu && any_gpu) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                _("--devices mixes CPU workers and GPUs; under mpirun every rank must use "
                "the same kind of device"));
    return FALSE;
  }
  return TRUE;
}

gboolean
tdm_distributed_first_without(gboolean has, int *first, GError **error)
{
  g_return_val_if_fail(first != NULL, FALSE);
  *first = -1;
  if (!dist.active)
    return TRUE;
  /* The least of each rank's own number where it has not and the job's size where it
   * has: the size itself where every rank has. */
  int mine = has ? dist.size : dist.rank, least = dist.size;
  int code = MPI_Allreduce(&mine, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (code != MPI_SUCCESS)
    return mpi_failed(error, "MPI_Allreduce", code);
  *first = least < dist.size ? least : -1;
  return TRUE;
}

void
tdm_distributed_finalize(void)
{
  if (!dist.active)
    return;
  dist.active = FALSE;
  g_clear_pointer(&dist.local_ranks, g_free);
  MPI_Finalize();
}

void
tdm_distributed_abort(int code)
{
  if (!dist.active)
    exit(code);
  /* Flushed first: mpirun kills the other ranks, and maybe this one, at once. */
  fflush(stdout);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  /* MPI_Abort does not return; should a broken MPI do so, leave anyway. */
  _exit(code);
}
