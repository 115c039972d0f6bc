/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-replica-infer.c — the inference pass's buffers: evaluation and prediction keep
 * no activations for a backward pass, so each layer's output goes into one of a few
 * buffers of the widest activation's size that rotate layer to layer (ping-pong), with
 * one more held for each residual block whose input waits for the block's end. The
 * forward walk itself is tdm-replica-forward.c's, the same for training and inference:
 * here only the pointers it reads and writes are laid out, and swapped in while an
 * evaluation runs. The buffers lie in the activation arena, over the training's
 * activations, which no evaluation needs (tdm-replica-private.h). Not the column
 * workspace or the convolution scratch (one each, shared with training: tdm-replica.c). */
#include "tdm-replica-private.h"
#include "tdm-replica-windows.h"
#include "tdm-error.h"

size_t
tdm_replica_infer_floats(const TdmNetwork *net)
{
  size_t most = (size_t)net->in_h * net->in_w * net->in_c;
  for (int i = 0; i < net->layer_count; i++)
    most = MAX(most, layer_out_floats(&net->layers[i]));
  return most;
}

size_t
tdm_replica_infer_bytes(const TdmNetwork *net, gboolean stores16)
{
  size_t most = (size_t)net->in_h * net->in_w * net->in_c * sizeof(float);
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    /* A projection's conv and bn outputs go to these buffers as float32, whatever its
     * block's end stores. */
    gboolean half = owns_output(net, i) && infer_output_bf16(net, i, stores16) &&
                    !(l->kind == TDM_LAYER_RES_END && l->projection);
    most = MAX(most, layer_out_floats(l) * (half ? sizeof(uint16_t) : sizeof(float)));
  }
  return most;
}

int
tdm_replica_infer_count(const TdmNetwork *net)
{
  int depth = 0, deepest = 0;
  for (int i = 0; i < net->layer_count; i++) {
    if (net->layers[i].kind == TDM_LAYER_RES_BEGIN) {
      depth++;
      deepest = MAX(deepest, depth);
    } else if (net->layers[i].kind == TDM_LAYER_RES_END)
      depth--;
  }
  return 2 + deepest;
}

size_t
tdm_replica_infer_argmax_bytes(const TdmNetwork *net)
{
  size_t most = 0;
  for (int i = 0; i < net->layer_count; i++)
    if (has_argmax(&net->layers[i]))
      most = MAX(most, layer_out_floats(&net->layers[i]) * argmax_size(&net->layers[i]));
  return most;
}

/* The lowest buffer that holds neither the layer's input (a), nor a block's input
 * still needed (b, or held). */
static int
free_buffer(const gboolean *held, int count, int a, int b)
{
  for (int k = 0; k < count; k++)
    if (k != a && k != b && !held[k])
      return k;
  g_assert_not_reached();
  return -1;
}

/* Which buffer each layer writes. A block's start keeps its input where it is and
 * marks it held; its end adds that input (or its projection, computed into a free
 * buffer and normalized into the input's, now spent) to the block's output. */
static void
lay_out(TdmReplica *r)
{
  const TdmNetwork *net = r->net;
  int count = r->infer_count;
  g_autofree gboolean *held = g_new0(gboolean, count);
  g_autofree int *stack = g_new0(int, count);
  int depth = 0, cur = 0;
  r->infer_acts[0] = r->infer[0];
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (has_argmax(l))
      r->infer_argmax[i] = r->infer_pool;
    if (l->kind == TDM_LAYER_RES_BEGIN) {
      held[cur] = TRUE;
      stack[depth++] = cur;
      r->infer_acts[i + 1] = r->infer_acts[i];
      continue;
    }
    if (l->kind == TDM_LAYER_FLATTEN) {
      r->infer_acts[i + 1] = r->infer_acts[i];
      continue;
    }
    if (!owns_output(net, i)) {
      /* A first conv run with its pool: the pool reads the input. */
      r->infer_acts[i + 1] = NULL;
      continue;
    }
    int kept = -1;
    if (l->kind == TDM_LAYER_RES_END) {
      g_assert(depth > 0);
      kept = stack[--depth];
      held[kept] = FALSE;
    }
    int y = free_buffer(held, count, cur, kept);
    if (l->kind == TDM_LAYER_RES_END && l->projection) {
      r->infer_proj_conv[i] = r->infer[y];
      r->infer_proj_bn[i] = r->infer[kept];
    }
    r->infer_acts[i + 1] = r->infer[y];
    cur = y;
  }
}

size_t
tdm_replica_infer_arena_bytes(const TdmNetwork *net, gboolean stores16, size_t eval_capacity)
{
  size_t argmax = tdm_replica_infer_argmax_bytes(net);
  return (size_t)tdm_replica_infer_count(net) *
             arena_piece(eval_capacity * tdm_replica_infer_bytes(net, stores16)) +
         (argmax > 0 ? arena_piece(eval_capacity * argmax) : 0) +
         arena_piece(eval_capacity * net->classes * sizeof(float));
}

/* The next piece of `bytes` of the arena from *at. */
static void *
take_piece(TdmReplica *r, size_t *at, size_t bytes)
{
  void *p = (char *)r->arena + *at;
  *at += arena_piece(bytes);
  return p;
}

void
tdm_replica_infer_alloc(TdmReplica *r)
{
  const TdmNetwork *net = r->net;
  size_t ecap = (size_t)r->eval_capacity, at = 0;
  int n = net->layer_count;
  r->infer_count = tdm_replica_infer_count(net);
  r->infer = g_new0(float *, r->infer_count);
  r->infer_acts = g_new0(float *, n + 1);
  r->infer_argmax = g_new0(void *, n);
  r->infer_proj_conv = g_new0(float *, n);
  r->infer_proj_bn = g_new0(float *, n);
  /* In the arena from its start, as tdm_replica_infer_arena_bytes() counts them. */
  size_t bytes = tdm_replica_infer_bytes(net, r->stores_bf16);
  for (int k = 0; k < r->infer_count; k++)
    r->infer[k] = take_piece(r, &at, ecap * bytes);
  size_t argmax = tdm_replica_infer_argmax_bytes(net);
  if (argmax > 0)
    r->infer_pool = take_piece(r, &at, ecap * argmax);
  r->tta_logits = take_piece(r, &at, ecap * net->classes * sizeof(float));
  g_assert(at == tdm_replica_infer_arena_bytes(net, r->stores_bf16, ecap) &&
           at <= r->arena_bytes);
  lay_out(r);
}

void
tdm_replica_infer_free(TdmReplica *r)
{
  g_assert(!r->inferring);
  /* The buffers are the arena's (tdm_replica_free() releases it). */
  g_free(r->infer);
  g_free(r->infer_acts);
  g_free(r->infer_argmax);
  g_free(r->infer_proj_conv);
  g_free(r->infer_proj_bn);
}

static void
swap_layout(TdmReplica *r)
{
  float **acts = r->acts, **proj_conv = r->proj_conv, **proj_bn = r->proj_bn;
  void **argmax = r->argmax;
  r->acts = r->infer_acts;
  r->argmax = r->infer_argmax;
  r->proj_conv = r->infer_proj_conv;
  r->proj_bn = r->infer_proj_bn;
  r->infer_acts = acts;
  r->infer_argmax = argmax;
  r->infer_proj_conv = proj_conv;
  r->infer_proj_bn = proj_bn;
}

void
tdm_replica_infer_begin(TdmReplica *r)
{
  g_assert(!r->inferring);
  swap_layout(r);
  /* The high window, apart from the arena that the pass's buffers lie over. */
  tdm_replica_use_window(r, r->net->layer_count - 1);
  r->inferring = TRUE;
}

void
tdm_replica_infer_end(TdmReplica *r)
{
  g_assert(r->inferring);
  swap_layout(r);
  r->inferring = FALSE;
}
