/* tdm-communicator.c — chooses a communicator for a set of local replicas, and what
 * every communicator shares. The kinds live in tdm-communicator-*.c. */
#include "tdm-communicator.h"
#include "tdm-error.h"
#include "tdm-build-config.h"

TdmCommunicator *
tdm_communicator_new(TdmBackend **backends, int replicas, GError **error)
{
  g_return_val_if_fail(replicas >= 1, NULL);

  gboolean all_cpu = TRUE, any_cpu = FALSE, distinct_gpus = TRUE;
  for (int i = 0; i < replicas; i++) {
    gboolean cpu = backends[i]->kind == TDM_BACKEND_CPU;
    all_cpu &= cpu;
    any_cpu |= cpu;
    for (int j = 0; j < i; j++)
      if (!cpu && backends[j]->kind == TDM_BACKEND_CUDA &&
          backends[j]->device_index == backends[i]->device_index)
        distinct_gpus = FALSE;
  }
  if (all_cpu)
    return tdm_communicator_host_new(backends, replicas);
  if (any_cpu) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                "--devices mixes CPU workers and GPUs in one run; choose one kind");
    return NULL;
  }
#if TDM_HAVE_CUDA
#if TDM_HAVE_NCCL
  if (distinct_gpus && replicas > 1)
    return tdm_communicator_nccl_new(backends, replicas, error);
#endif
  return tdm_communicator_peer_new(backends, replicas, error);
#else
  (void)distinct_gpus;
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
              "this build of Tandem has no CUDA backend");
  return NULL;
#endif
}

void
tdm_communicator_free(TdmCommunicator *c)
{
  if (c != NULL)
    c->ops->destroy(c);
}

double
tdm_communicator_take_seconds(TdmCommunicator *c, int replica)
{
  double seconds = c->comm_seconds[replica];
  c->comm_seconds[replica] = 0;
  return seconds;
}

void
tdm_communicator_abort(TdmCommunicator *c)
{
  if (c != NULL && c->ops->abort != NULL)
    c->ops->abort(c);
}
