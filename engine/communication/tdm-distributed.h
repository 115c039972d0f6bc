/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-distributed.h — this process as one rank of an MPI job (mpirun -np N).
 *
 * Under mpirun each process holds one replica; the trainer asks here how many ranks
 * there are, which one this is, and which device it takes. MPI is called only from
 * the thread that initialized it (MPI_THREAD_FUNNELED). A failed rank must end the
 * whole job with tdm_distributed_abort() once it has said why: the others are
 * blocked in collectives that nothing else interrupts. Not a communicator
 * (tdm_communicator_mpi_new() in tdm-communicator.h) and not a cluster layer:
 * mpirun starts, places and kills the processes. Builds without MPI get stubs that
 * say so.
 */
#pragma once

#include <glib.h>
#include <stdlib.h>

#include "tdm-build-config.h"
#include "tdm-config.h"
#include "tdm-error.h"

G_BEGIN_DECLS

#if TDM_HAVE_MPI

/* Initializes MPI once (a process started without mpirun is a job of one rank). */
gboolean tdm_distributed_init (int *argc, char ***argv, GError **error);
/* TRUE between a successful init and finalize. */
gboolean tdm_distributed_active (void);
int tdm_distributed_rank (void);
int tdm_distributed_size (void);
/* Number of ranks on this machine: how many cores each may use. */
int tdm_distributed_local_size (void);

/* Makes config->devices list one device per rank: kept when it already does; one
 * device for all is "cpu" on every rank, or for cuda:N the GPU N + local rank of
 * each rank. Fails when the list has another length or mixes CPUs and GPUs. Does
 * nothing outside an MPI job. */
gboolean tdm_distributed_resolve_devices (TdmConfig *config, GError **error);

/* Whether every rank `has` something, asked of all ranks at once (each must call it):
 * *first is the lowest rank that has not, or -1 where every rank has (always -1 outside
 * an MPI job). FALSE, with the error, where MPI fails. */
gboolean tdm_distributed_first_without (gboolean has, int *first, GError **error);

/* After a run that ended normally on every rank (it waits for the others). */
void tdm_distributed_finalize (void);
/* Ends every rank of the job now, with `code` as mpirun's exit status. */
G_GNUC_NORETURN void tdm_distributed_abort (int code);

#else /* !TDM_HAVE_MPI */

static inline gboolean
tdm_distributed_init (int *argc, char ***argv, GError **error)
{
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
              "this build of Tandem has no MPI support (install libopenmpi-dev and "
              "openmpi-bin, then rebuild)");
  return FALSE;
}

static inline gboolean
tdm_distributed_active (void)
{
  return FALSE;
}

static inline int
tdm_distributed_rank (void)
{
  return 0;
}

static inline int
tdm_distributed_size (void)
{
  return 1;
}

static inline int
tdm_distributed_local_size (void)
{
  return 1;
}

static inline gboolean
tdm_distributed_resolve_devices (TdmConfig *config, GError **error)
{
  return TRUE;
}

static inline gboolean
tdm_distributed_first_without (gboolean has, int *first, GError **error)
{
  *first = -1;
  return TRUE;
}

static inline void
tdm_distributed_finalize (void)
{
}

static inline G_GNUC_NORETURN void
tdm_distributed_abort (int code)
{
  exit(code);
}

#endif

G_END_DECLS
