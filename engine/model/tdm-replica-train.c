/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-replica-train.c — a replica's training step: the gather of its shard, forward,
 * loss, backward and the caller's tail (the update), captured once in a graph and
 * replayed where the device has them, a step size's first step eagerly; the idle step
 * of a replica without samples, synchronized BN's set-up, and the loss probe. The
 * buffers are tdm-replica.c's, the walks over the layers tdm-replica-forward.c's
 * and tdm-replica-backward.c's. */
#include "tdm-replica-private.h"
#include "tdm-replica-windows.h"
#include "tdm-i18n.h"
#include "tdm-counter-rng.h"
#include "tdm-error.h"

#include <string.h>

static gboolean
augments(const TdmReplica *r)
{
  return r->augment_pad > 0 || r->augment_flip != TDM_FLIP_NEVER;
}

static void
gather_train(TdmReplica *r, int count)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  if (r->photo) {
    TdmPhotoAugment a = r->photo_augment;
    a.flip = (int)r->augment_flip;
    /* Erased pixels take the value that the normalization makes 0 (torchvision erases
     * the normalized tensor with 0). */
    for (int ch = 0; ch < 4; ch++)
      a.fill[ch] = 0;
    if (r->normalize)
      for (int ch = 0; ch < MIN(r->input_affine.channels, 4); ch++)
        a.fill[ch] = r->input_affine.mul[ch] != 0
                         ? CLAMP(-r->input_affine.add[ch] / r->input_affine.mul[ch], 0.0f, 1.0f)
                         : 0.0f;
    /* The normalization in the gather's pass: one write of the batch instead of a
     * write, a read and a write, the same bits. */
    a.normalize = r->normalize && r->input_affine.channels == net->in_c;
    for (int ch = 0; a.normalize && ch < net->in_c; ch++) {
      a.mul[ch] = r->input_affine.mul[ch];
      a.add[ch] = r->input_affine.add[ch];
    }
    tdm_backend_gather_photo(b, r->acts[0], r->labels, r->train_images, r->train_labels,
                             r->indices, count, net->in_h, net->in_w, net->in_c, &a,
                             tdm_crng_key(r->seed, TDM_RNG_AUGMENT), r->epoch);
    if (a.normalize)
      return;
  } else if (augments(r))
    tdm_backend_gather_augment(b, r->acts[0], r->labels, r->train_images, r->train_labels,
                               r->indices, count, net->in_h, net->in_w, net->in_c,
                               1.0f / 255.0f, r->augment_pad, r->augment_flip,
                               tdm_crng_key(r->seed, TDM_RNG_AUGMENT), r->epoch);
  else
    tdm_backend_gather(b, r->acts[0], r->labels, r->train_images, r->train_labels, r->indices,
                       count, r->sample_size, 1.0f / 255.0f);
  tdm_replica_normalize_input(r, count);
}

/* The step body that a graph captures: everything but the upload of indices. */
static void
train_body(TdmReplica *r, int count, float grad_scale)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  guint64 first = b->operations;
  gather_train(r, count);
  tdm_replica_forward(r, count, MODE_TRAIN);
  if (tdm_replica_aborted(r))
    return;
  if (r->forward_done != NULL)
    r->forward_done(r, r->forward_done_data);
  tdm_replica_use_window(r, net->layer_count - 1);
  tdm_backend_softmax_xent(b, r->acts[net->layer_count], r->labels, count, net->classes,
                           r->smoothing, grad_scale, r->grad_a, r->metrics);
  tdm_replica_backward(r, count);
  if (r->step_tail != NULL && !tdm_replica_aborted(r))
    r->step_tail(r, r->step_tail_data);
  r->ops_per_step = (int)(b->operations - first);
}

/* Graph keys pair the shard size with the gradient scale: both are baked in, and a
 * short last batch can give one replica a full shard's size with another scale.
 * Augmentation and dropout bake the epoch in too, and a step with its tail (the
 * update) is another graph than one without. */
static int
graph_key(const TdmReplica *r, int count, float grad_scale)
{
  guint32 bits;
  memcpy(&bits, &grad_scale, sizeof bits);
  guint32 key = ((guint32)count << 12) ^ (bits >> 8) ^ bits;
  if (augments(r) || r->net->has_dropout)
    key ^= r->epoch * 0x9E3779B1u;
  if (r->step_tail != NULL)
    key ^= 0x5BD1E995u;
  return (int)(key & G_MAXINT);
}

static void
train_eagerly(TdmReplica *r, int count, float grad_scale)
{
  g_hash_table_add(r->shapes_met, GINT_TO_POINTER(count));
  train_body(r, count, grad_scale);
  r->steps.eager++;
}

void
tdm_replica_train_step(TdmReplica *r, const int32_t *indices, int count, float grad_scale)
{
  TdmBackend *b = r->backend;
  g_return_if_fail(count > 0 && count <= r->capacity);
  r->step_graph_ops = 0;
  r->step_captured_ops = 0;

  tdm_backend_upload(b, r->indices, indices, (size_t)count * sizeof(int32_t));

  /* Graphs replay fixed launches, so a bucket hook, synchronized BN (which issue
   * communication from the host) or the forward hook of a sampled step rule them
   * out. A run has at most two shard sizes (full and last). A size's first step runs
   * eagerly: the convolution engine times its choices for the shapes (a capture
   * would take an untimed one) and the workspace grows to what they need, and no
   * allocation may happen while the stream is captured. */
  if (!tdm_backend_has_graphs(b) || r->grads_ready != NULL || r->bn_reduce != NULL ||
      r->forward_done != NULL ||
      !g_hash_table_contains(r->shapes_met, GINT_TO_POINTER(count))) {
    train_eagerly(r, count, grad_scale);
    return;
  }
  int key = graph_key(r, count, grad_scale);
  int held = GPOINTER_TO_INT(g_hash_table_lookup(r->graph_ops, GINT_TO_POINTER(key)));
  if (tdm_backend_graph_launch(b, key)) {
    r->step_graph_ops = held;
    r->steps.replayed++;
    return;
  }
  if (!tdm_backend_graph_begin(b, key)) {
    train_eagerly(r, count, grad_scale);
    return;
  }
  r->capturing = TRUE;
  r->capture_spoiled = FALSE;
  train_body(r, count, grad_scale);
  r->capturing = FALSE;
  tdm_backend_graph_end(b, key);
  /* A stop during the capture leaves it short of the step's end: not launched (the
   * step is undone), and the run stops before another step could replay it. */
  if (tdm_replica_aborted(r))
    return;
  if (r->capture_spoiled) {
    /* A convolution wanted more workspace than the step's eager run left (an engine's
     * choice that changed since): the graph computes in too little, so it is never
     * launched. Growing the workspace releases the old one, which drops every graph
     * that used it, this one too; the step then runs eagerly. */
    g_debug("%s: a step of %d samples wanted a larger workspace while captured; run "
            "eagerly", b->name, count);
    if (tdm_replica_workspace_holds(r, r->columns_needed, 0))
      train_eagerly(r, count, grad_scale);
    return;
  }
  g_hash_table_insert(r->graph_ops, GINT_TO_POINTER(key), GINT_TO_POINTER(r->ops_per_step));
  r->step_captured_ops = r->ops_per_step;
  r->step_graph_ops = r->ops_per_step;
  r->steps.captured++;
  if (!tdm_backend_graph_launch(b, key) && !tdm_backend_failed(b))
    tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, _("a captured step graph did not launch"));
}

void
tdm_replica_train_idle(TdmReplica *r)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  tdm_backend_zero(b, r->grads, net->parameter_count * sizeof(float));
  if (r->bn_reduce == NULL)
    return;
  /* The same collectives in the same order as a step: one per BN forward (an empty
   * slot: count 0), one per BN backward (zero sums). */
  for (int i = 0; i < net->layer_count && !tdm_replica_aborted(r); i++) {
    int c = bn_channels(&net->layers[i]);
    if (c == 0)
      continue;
    size_t floats = TDM_BN_SLOT_FLOATS(c) * r->bn_slot_count;
    tdm_backend_zero(b, r->bn_slots, floats * sizeof(float));
    tdm_replica_bn_reduce(r, r->bn_slots, floats);
  }
  for (int i = net->layer_count - 1; i >= 0 && !tdm_replica_aborted(r); i--) {
    int c = bn_channels(&net->layers[i]);
    if (c == 0)
      continue;
    tdm_backend_zero(b, r->bn_work[i], 2 * (size_t)c * sizeof(float));
    tdm_replica_bn_reduce(r, r->bn_work[i], 2 * (size_t)c);
  }
}

gboolean
tdm_replica_sync_bn(TdmReplica *r, TdmBnReduce reduce, gpointer data, int slot,
                    int slot_count, GError **error)
{
  g_return_val_if_fail(slot >= 0 && slot < slot_count, FALSE);
  TdmBackend *b = r->backend;
  int most = 0;
  for (int i = 0; i < r->net->layer_count; i++)
    most = MAX(most, bn_channels(&r->net->layers[i]));
  tdm_backend_release(b, r->bn_slots);
  r->bn_slots = NULL;
  if (most > 0) {
    r->bn_slots = tdm_backend_alloc(b, TDM_BN_SLOT_FLOATS(most) * slot_count * sizeof(float),
                                    error);
    if (r->bn_slots == NULL)
      return FALSE;
  }
  r->bn_slot = slot;
  r->bn_slot_count = slot_count;
  r->bn_reduce = reduce;
  r->bn_reduce_data = data;
  return TRUE;
}

void
tdm_replica_train_loss(TdmReplica *r, const int32_t *indices, int count)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  g_return_if_fail(count > 0 && count <= r->capacity);
  tdm_backend_upload(b, r->indices, indices, (size_t)count * sizeof(int32_t));
  gather_train(r, count);
  tdm_replica_forward(r, count, MODE_PROBE);
  tdm_backend_softmax_xent(b, r->acts[net->layer_count], r->labels, count, net->classes,
                           r->smoothing, 0.0f, NULL, r->metrics);
  tdm_backend_synchronize(b);
}
