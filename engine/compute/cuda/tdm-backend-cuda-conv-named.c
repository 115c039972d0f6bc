/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-named.c — the convolution engine's candidates by name, for tests
 * and benchmarks (tdm-backend-cuda.h): the names a call has, a named candidate's run, its
 * workspace and cuDNN's share of it. A named candidate runs as the caller asks, never
 * mended (tdm_conv_engine_run_given()); the engine's own choice is
 * tdm-backend-cuda-conv-engine.c's. */
#include "tdm-backend-cuda-conv-engine.h"

static int
named(GPtrArray *list, const char *name)
{
  for (guint i = 0; i < list->len; i++)
    if (g_str_equal(((TdmConvCandidate *)g_ptr_array_index(list, i))->name, name))
      return (int)i;
  return -1;
}

GPtrArray *
tdm_cuda_conv_candidate_names(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir)
{
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  TdmConvLayout l;
  if (!tdm_cuda_begin(b) || !tdm_conv_layout(b, a, dir, &l))
    return names;
  g_autoptr(GPtrArray) list = tdm_conv_candidates_for(b, &l, NULL);
  for (guint i = 0; i < list->len; i++)
    g_ptr_array_add(names, g_strdup(((TdmConvCandidate *)g_ptr_array_index(list, i))->name));
  return names;
}

/* The candidate called name for a's call in direction dir, *l its layout; it lives in
 * *list, the caller's to free (NULL where there is none). NULL where the backend has
 * failed, the call has no layout or no candidate is so called. */
static const TdmConvCandidate *
candidate_named(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir, const char *name,
                TdmConvLayout *l, GPtrArray **list)
{
  *list = NULL;
  if (!tdm_cuda_begin(b) || !tdm_conv_layout(b, a, dir, l))
    return NULL;
  *list = tdm_conv_candidates_for(b, l, name);
  int i = named(*list, name);
  return i < 0 ? NULL : g_ptr_array_index(*list, i);
}

gboolean
tdm_cuda_conv_run_named(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir,
                        const char *name)
{
  TdmConvLayout l;
  g_autoptr(GPtrArray) list = NULL;
  const TdmConvCandidate *c = candidate_named(b, a, dir, name, &l, &list);
  if (c == NULL || tdm_conv_candidate_need(b, &l, c) > a->work_bytes)
    return FALSE;
  tdm_conv_engine_run_given(b, a, &l, c);
  return TRUE;
}

size_t
tdm_cuda_conv_need_named(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir,
                         const char *name)
{
  TdmConvLayout l;
  g_autoptr(GPtrArray) list = NULL;
  const TdmConvCandidate *c = candidate_named(b, a, dir, name, &l, &list);
  return c == NULL ? 0 : tdm_conv_candidate_need(b, &l, c);
}

size_t
tdm_cuda_conv_cudnn_workspace_named(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir,
                                    const char *name)
{
  TdmConvLayout l;
  g_autoptr(GPtrArray) list = NULL;
  const TdmConvCandidate *c = candidate_named(b, a, dir, name, &l, &list);
  if (c == NULL || c->plan == NULL)
    return 0;
  return (size_t)MAX(c->plan->workspace, c->rest_plan != NULL ? c->rest_plan->workspace : 0);
}
