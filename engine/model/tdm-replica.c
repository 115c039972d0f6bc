/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-replica.c — one replica's buffers, as its memory plan (tdm-replica-plan.c) sizes
 * them, and its workspace, and its evaluation and prediction, all as backend operations
 * so the same code runs on the CPU and on a GPU. The training step is
 * tdm-replica-train.c's, the walks over the layers tdm-replica-forward.c's and
 * tdm-replica-backward.c's. No communication here; no optimizer. */
#include "tdm-replica-private.h"
#include "tdm-replica-windows.h"
#include "tdm-error.h"
#include "tdm-conv-columns.h"

#include <string.h>

#define ALLOC(ptr, bytes)                                                               \
  do {                                                                                  \
    (ptr) = tdm_backend_alloc(b, (bytes), error);                                       \
    if ((ptr) == NULL)                                                                  \
      goto fail;                                                                        \
  } while (0)

gboolean
tdm_replica_shares_datasets(TdmBackendKind kind)
{
  return kind == TDM_BACKEND_CPU;
}

TdmReplica *
tdm_replica_new(TdmBackend *b, const TdmNetwork *net, int capacity, const TdmDataset *train,
                const TdmDataset *test, GError **error)
{
  return tdm_replica_new_sized(b, net, capacity, capacity, train, test, error);
}

TdmReplica *
tdm_replica_new_sized(TdmBackend *b, const TdmNetwork *net, int capacity, int eval_capacity,
                      const TdmDataset *train, const TdmDataset *test, GError **error)
{
  return tdm_replica_new_planned(b, net, capacity, eval_capacity, 0, train, test, error);
}

/* Layer i's buffers as replica r keeps them: tdm_replica_buffers_of()'s, with a bn's
 * output stored where r stores it (with_bn_store()). The plan sizes by the same rule. */
static TdmLayerBuffers
replica_buffers(const TdmReplica *r, int i)
{
  const TdmBackend *b = r->backend;
  return with_bn_store(r->net, i, r->stores_bf16, r->bn_store,
                       tdm_replica_buffers_of(r->net, i, b->kind, b->precision, r->stores_bf16));
}

/* The next piece of `bytes` of the activation arena from *at (tdm_replica_plan()'s
 * order: the input, then each layer's training_pieces()). */
static void *
arena_take(TdmReplica *r, size_t *at, size_t bytes)
{
  void *p = (char *)r->arena + *at;
  *at += arena_piece(bytes);
  return p;
}

/* The replica storing the bn outputs of at most bn_store bytes a sample for their conv. */
static TdmReplica *
replica_new_stored(TdmBackend *b, const TdmNetwork *net, int capacity, int eval_capacity,
                   size_t columns_bytes, size_t bn_store, const TdmDataset *train,
                   const TdmDataset *test, GError **error)
{
  TdmReplica *r = g_new0(TdmReplica, 1);
  r->backend = b;
  r->net = net;
  r->capacity = capacity;
  r->eval_capacity = eval_capacity;
  size_t most = (size_t)MAX(capacity, eval_capacity);
  /* The high window's skip buffers, bytes a sample a level of nesting. */
  g_autofree size_t *widths = g_new0(size_t, MAX(tdm_replica_infer_count(net) - 2, 1));
  r->sample_size = tdm_dataset_sample_size(train);
  r->augment_flip = TDM_FLIP_NEVER;
  /* Decided once: the passes read the field, never the environment. */
  r->stores_bf16 = tdm_replica_stores_bf16(b->kind, b->precision) &&
                   tdm_backend_has_bn_bf16_input(b) && tdm_backend_has_bf16_blocks(b);
  r->start_sums = tdm_replica_start_sums() && tdm_backend_has_start_bn_sums(b);
  r->stem_bn = tdm_replica_stem_bn();
  r->bn_store = bn_store;
  int n = net->layer_count;
  r->acts = g_new0(float *, n + 1);
  r->argmax = g_new0(void *, n);
  r->cols = g_new0(float *, n);
  r->conv_work = g_new0(float *, n);
  r->bn_work = g_new0(float *, n);
  r->proj_conv = g_new0(float *, n);
  r->proj_bn = g_new0(float *, n);
  r->skip_grad = g_new0(float *, n);
  r->skip_grad_bytes = g_new0(size_t, n);
  r->relu_bits = g_new0(uint32_t *, n);
  r->graph_ops = g_hash_table_new(g_direct_hash, g_direct_equal);
  r->shapes_met = g_hash_table_new(g_direct_hash, g_direct_equal);

  ALLOC(r->params, MAX(1, net->parameter_count) * sizeof(float));
  ALLOC(r->grads, MAX(1, net->parameter_count) * sizeof(float));
  ALLOC(r->state, MAX(1, net->state_count) * sizeof(float));
  ALLOC(r->metrics, sizeof(TdmMetrics));
  tdm_backend_zero(b, r->metrics, sizeof(TdmMetrics));
  if (net->state_count > 0) {
    g_autofree float *state = g_new(float, net->state_count);
    tdm_network_init_state(net, state);
    tdm_backend_upload(b, r->state, state, net->state_count * sizeof(float));
    tdm_backend_synchronize(b);
  }
  /* The activation arena: the training's activations and the low window of the
   * backward-only buffers, as tdm_replica_plan() counts them (TdmGradientWindows.arena),
   * or the inference pass's buffers where they need more. */
  TdmGradientWindows windows =
      tdm_replica_gradient_windows(net, b->kind, b->precision, r->stores_bf16,
                                   tdm_replica_bn16(b), r->bn_store, (size_t)capacity);
  size_t arena = MAX(windows.arena, tdm_replica_infer_arena_bytes(net, r->stores_bf16,
                                                                  (size_t)eval_capacity));
  ALLOC(r->arena, arena);
  size_t at = 0;
  r->acts[0] = arena_take(r, &at,
                          (size_t)capacity * net->in_h * net->in_w * net->in_c * sizeof(float));
  /* Sized by tdm_replica_layer_buffers(), as tdm_replica_plan() sums them for the
   * memory estimate: columns and whole-convolution scratch are one workspace each. */
  r->columns_bound = tdm_conv_columns_bound(b->kind, b->precision);
  r->columns_limit = tdm_replica_column_workspace(net, b->kind, b->precision,
                                                  r->stores_bf16, (size_t)capacity,
                                                  (size_t)eval_capacity);
  if (r->columns_limit > 0) {
    r->columns_bytes = columns_bytes > 0 ? columns_bytes : r->columns_limit;
    ALLOC(r->columns, r->columns_bytes);
  }
  r->conv_scratch = r->columns;
  r->skip_levels = g_new0(float *, MAX(tdm_replica_infer_count(net) - 2, 1));
  {
    size_t skips;
    tdm_replica_block_buffers_in(net, b->kind, b->precision, r->stores_bf16,
                                 windows.split, n, widths, &skips);
    for (int k = 0; k < tdm_replica_infer_count(net) - 2; k++)
      if (widths[k] > 0)
        ALLOC(r->skip_levels[k], (size_t)capacity * widths[k]);
  }
  r->window_split = windows.split;
  if (windows.split > 0 && windows.low_skip > 0)
    r->skip_low = (float *)((char *)r->arena + windows.low_at);
  for (int i = 0; i < n; i++) {
    const TdmLayer *l = &net->layers[i];
    TdmLayerBuffers buf = replica_buffers(r, i);
    /* In the arena in training_pieces()'s order. */
    if (buf.output > 0)
      r->acts[i + 1] =
          arena_take(r, &at, (size_t)capacity * buf.output * tdm_dtype_size(buf.output_type));
    else if (l->kind == TDM_LAYER_FLATTEN || l->kind == TDM_LAYER_RES_BEGIN)
      r->acts[i + 1] = r->acts[i];
    if (buf.projection > 0)
      r->proj_conv[i] = arena_take(
          r, &at, (size_t)capacity * buf.projection * tdm_dtype_size(buf.projection_type));
    if (buf.argmax > 0)
      r->argmax[i] = arena_take(r, &at, (size_t)capacity * buf.argmax * buf.argmax_size);
    if (buf.relu_bits > 0)
      r->relu_bits[i] = arena_take(r, &at, relu_bits_bytes((size_t)capacity * buf.relu_bits));
    if (buf.columns > 0)
      r->cols[i] = r->columns;
    if (buf.conv_work > 0)
      r->conv_work[i] = r->conv_scratch;
    if (buf.bn_work > 0)
      ALLOC(r->bn_work[i], buf.bn_work * sizeof(float));
    if (buf.skip > 0) {
      gboolean low = i < windows.split;
      r->skip_grad[i] = low ? r->skip_low : r->skip_levels[l->depth - 1];
      r->skip_grad_bytes[i] =
          (size_t)capacity * (low ? windows.low_skip : widths[l->depth - 1]);
    }
  }
  g_assert(at <= arena);
  r->arena_bytes = arena;
  /* Each window's region, its halves the two gradient buffers: a write wider than a
   * half goes at its start when nothing else lives in it (tdm_replica_gradient_bytes_of()). */
  r->half_high = (size_t)capacity * windows.high_half;
  ALLOC(r->grad_high, 2 * r->half_high);
  if (windows.split > 0) {
    r->half_low = (size_t)capacity * windows.low_half;
    r->grad_low = (float *)((char *)r->arena + windows.low_at +
                            TDM_WINDOW_PIECE((size_t)capacity * windows.low_skip));
  }
  /* A projection's bn output, read by its block's add alone, into the second gradient
   * buffer of its window: the forward leaves it free there (the block's end uses the
   * first), and the block's output, which a layer after it reads, is no wider than the
   * buffer (as bf16 where the block's output is bf16, projection_bn_bf16()). */
  for (int i = 0; i < n; i++)
    if (net->layers[i].kind == TDM_LAYER_RES_END && net->layers[i].projection) {
      tdm_replica_use_window(r, i);
      g_assert((size_t)capacity * layer_out_floats(&net->layers[i]) *
                   (projection_bn_bf16(net, i, r->stores_bf16) ? sizeof(uint16_t)
                                                               : sizeof(float)) <=
               r->grad_half_bytes);
      r->proj_bn[i] = r->grad_b;
    }
  tdm_replica_use_window(r, n - 1);
  size_t params16 = tdm_replica_params16_bytes(net, b->kind, b->precision);
  if (params16 > 0)
    ALLOC(r->params16, params16);
  ALLOC(r->labels, most * sizeof(int32_t));
  ALLOC(r->indices, most * sizeof(int32_t));
  tdm_replica_infer_alloc(r);

  size_t train_bytes = (size_t)train->count * r->sample_size;
  size_t test_bytes = (size_t)test->count * r->sample_size;
  if (tdm_replica_shares_datasets(b->kind)) {
    /* The caller's datasets outlive the replica (the trainer frees its replicas
     * first; the classifier writes its one sample into the dataset it owns). */
    r->train_images = train->images;
    r->train_labels = train->labels;
    r->test_images = test->images;
    r->test_labels = test->labels;
  } else {
    ALLOC(r->train_images, train_bytes);
    ALLOC(r->train_labels, train->count);
    ALLOC(r->test_images, test_bytes);
    ALLOC(r->test_labels, test->count);
    tdm_backend_upload(b, r->train_images, train->images, train_bytes);
    tdm_backend_upload(b, r->train_labels, train->labels, train->count);
    tdm_backend_upload(b, r->test_images, test->images, test_bytes);
    tdm_backend_upload(b, r->test_labels, test->labels, test->count);
  }
  if (!tdm_backend_check(b, error))
    goto fail;
  return r;

fail:
  tdm_replica_free(r);
  return NULL;
}

/* The stored bn outputs are the automatic rule's bargain of memory for speed
 * (tdm_replica_bn_store()): where the device has no room for them, the replica is made
 * again without them, as it was before they were stored, and says so. A store the
 * environment asked for (TANDEM_BN_STORE) is kept or fails. */
TdmReplica *
tdm_replica_new_planned(TdmBackend *b, const TdmNetwork *net, int capacity, int eval_capacity,
                        size_t columns_bytes, const TdmDataset *train, const TdmDataset *test,
                        GError **error)
{
  g_return_val_if_fail(capacity > 0 && eval_capacity > 0, NULL);
  size_t bn_store = tdm_replica_bn_store(net, b->kind, b->precision, capacity);
  GError *local = NULL;
  TdmReplica *r = replica_new_stored(b, net, capacity, eval_capacity, columns_bytes, bn_store,
                                     train, test, &local);
  if (r == NULL && bn_store > 0 && tdm_replica_bn_store_automatic() &&
      g_error_matches(local, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY)) {
    g_message("%s: no room for the bn outputs stored for their convs (%s); the replica "
              "normalizes them as its convs read them instead, a little slower",
              b->name, local->message);
    g_clear_error(&local);
    r = replica_new_stored(b, net, capacity, eval_capacity, columns_bytes, 0, train, test,
                           &local);
  }
  if (local != NULL)
    g_propagate_error(error, local);
  return r;
}

/* Puts a new workspace of `bytes` in the old one's place, its first `keep` bytes
 * carried over. The old one goes first, so the device never holds both (the first
 * run's pre-warm grows it shape by shape: its peak is the largest, not two at once);
 * what is kept waits on the host meanwhile. */
static gboolean
replace_workspace(TdmReplica *r, size_t bytes, size_t keep, GError **error)
{
  TdmBackend *b = r->backend;
  keep = MIN(keep, MIN(bytes, r->columns_bytes));
  g_autofree void *kept = keep > 0 ? g_malloc(keep) : NULL;
  if (keep > 0)
    tdm_backend_download(b, kept, r->columns, keep);
  tdm_backend_release(b, r->columns);
  r->columns = NULL;
  r->columns_bytes = 0;
  r->conv_scratch = NULL;
  /* A failed allocation leaves the backend failed (sticky): nothing runs after it. */
  float *fresh = tdm_backend_alloc(b, bytes, error);
  if (fresh == NULL)
    return FALSE;
  for (int i = 0; i < r->net->layer_count; i++) {
    if (r->cols[i] != NULL)
      r->cols[i] = fresh;
    if (r->conv_work[i] != NULL)
      r->conv_work[i] = fresh;
  }
  r->columns = fresh;
  r->conv_scratch = fresh;
  r->columns_bytes = bytes;
  if (keep > 0)
    tdm_backend_upload(b, fresh, kept, keep);
  return TRUE;
}

gboolean
tdm_replica_workspace_grow(TdmReplica *r, size_t bytes, size_t keep)
{
  if (bytes <= r->columns_bytes)
    return TRUE;
  /* No allocation while a graph is captured: the step runs again eagerly instead
   * (tdm_replica_train_step()), and what was captured is never launched. */
  if (r->capturing) {
    r->capture_spoiled = TRUE;
    return FALSE;
  }
  g_autoptr(GError) error = NULL;
  if (r->columns == NULL || tdm_backend_failed(r->backend) ||
      !replace_workspace(r, bytes, keep, &error)) {
    if (error != NULL)
      tdm_backend_fail(r->backend, error->code, "%s", error->message);
    return FALSE;
  }
  g_debug("%s: the convolution workspace grew to %zu bytes", r->backend->name, bytes);
  return TRUE;
}

gboolean
tdm_replica_workspace_holds(TdmReplica *r, size_t bytes, size_t keep)
{
  r->columns_needed = MAX(r->columns_needed, bytes);
  return tdm_replica_workspace_grow(r, bytes, keep);
}

gboolean
tdm_replica_fit_workspace(TdmReplica *r, GError **error)
{
  if (!tdm_backend_has_conv_engine(r->backend) || r->columns == NULL ||
      r->columns_needed == 0 || r->columns_needed >= r->columns_bytes)
    return TRUE;
  tdm_backend_synchronize(r->backend);
  return tdm_backend_check(r->backend, error) &&
         replace_workspace(r, r->columns_needed, 0, error);
}

void
tdm_replica_free(TdmReplica *r)
{
  if (r == NULL)
    return;
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  tdm_backend_release(b, r->params);
  tdm_backend_release(b, r->grads);
  tdm_backend_release(b, r->state);
  tdm_backend_release(b, r->metrics);
  tdm_backend_release(b, r->arena); /* acts, argmax, proj_conv, the inference's buffers */
  for (int i = 0; i < net->layer_count; i++)
    tdm_backend_release(b, r->bn_work[i]);
  for (int k = 0; r->skip_levels != NULL && k < tdm_replica_infer_count(net) - 2; k++)
    tdm_backend_release(b, r->skip_levels[k]);
  g_free(r->skip_levels);
  tdm_backend_release(b, r->columns); /* conv_scratch too */
  tdm_replica_infer_free(r);
  tdm_backend_release(b, r->bn_slots);
  tdm_backend_release(b, r->grad_high); /* the low window lies in the arena */
  tdm_backend_release(b, r->params16);
  tdm_backend_release(b, r->labels);
  tdm_backend_release(b, r->indices);
  if (!tdm_replica_shares_datasets(b->kind)) {
    tdm_backend_release(b, r->train_images);
    tdm_backend_release(b, r->train_labels);
    tdm_backend_release(b, r->test_images);
    tdm_backend_release(b, r->test_labels);
  }
  g_free(r->acts);
  g_free(r->argmax);
  g_free(r->cols);
  g_free(r->conv_work);
  g_free(r->bn_work);
  g_free(r->proj_conv);
  g_free(r->proj_bn);
  g_free(r->skip_grad);
  g_free(r->skip_grad_bytes);
  g_free(r->relu_bits);
  if (r->graph_ops != NULL)
    g_hash_table_destroy(r->graph_ops);
  if (r->shapes_met != NULL)
    g_hash_table_destroy(r->shapes_met);
  g_free(r);
}

/* The per-channel normalization of a gathered batch, on the device. Test-time shifts
 * are cut from the normalized batch, so their zero fill is 0 after normalization. */
void
tdm_replica_normalize_input(TdmReplica *r, int count)
{
  if (!r->normalize)
    return;
  const TdmNetwork *net = r->net;
  tdm_backend_channel_affine(r->backend, r->acts[0], (size_t)count * net->in_h * net->in_w,
                             r->input_affine);
}

/* Test-time translations: copy the gathered batch x (count samples of h×w×c floats)
 * into v shifted by (dy, dx) and mirrored when asked, with gather_augment's
 * convention: v[r, q] = x[r + dy, q' + dx], q' = w − 1 − q when mirrored, else q; 0
 * outside the image. On the host: the backend has no shift operation, and the
 * evaluation is not what a run's time is measured on. */
static void
shift_batch(float *restrict v, const float *restrict x, int count, int h, int w, int c,
            int dy, int dx, gboolean mirrored)
{
  const size_t sample = (size_t)h * w * c;
  for (int i = 0; i < count; i++) {
    const float *src = x + (size_t)i * sample;
    float *dst = v + (size_t)i * sample;
    for (int r = 0; r < h; r++) {
      const int iy = r + dy;
      for (int q = 0; q < w; q++) {
        const int ix = (mirrored ? w - 1 - q : q) + dx;
        float *d = dst + ((size_t)r * w + q) * c;
        if (iy < 0 || iy >= h || ix < 0 || ix >= w)
          memset(d, 0, sizeof(float) * c);
        else
          memcpy(d, src + ((size_t)iy * w + ix) * c, sizeof(float) * c);
      }
    }
  }
}

int
tdm_replica_test_views(const TdmReplica *r)
{
  gboolean flip = r->test_flip;
  return (r->test_shift > 0 ? 5 : 1) * (flip ? 2 : 1);
}

/* The network's outputs for test samples [first, first + count) as the evaluation
 * scores them: the mean of the logits of every test-time view (the image; with
 * test_flip its mirror; with test_shift its four shifted copies, each mirrored too
 * with test_flip), left in acts[layer_count]. The classifier and the trainer's
 * confusion matrix read the same, so a test image gets the class the evaluation gave
 * it. With flips alone the sum is the image's logits plus its mirror's, halved, as
 * before translations existed. */
static float *
eval_logits_of(TdmReplica *r, const uint8_t *images, const uint8_t *labels,
               const int32_t *samples, int first, int count)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  /* Every pass below runs on the inference buffers (tdm-replica-infer.c): acts[]
   * point into them until infer_end. */
  tdm_replica_infer_begin(r);
  int32_t *indices = g_new(int32_t, count);
  for (int i = 0; i < count; i++)
    indices[i] = samples != NULL ? samples[i] : first + i;
  tdm_backend_upload(b, r->indices, indices, (size_t)count * sizeof(int32_t));
  tdm_backend_gather(b, r->acts[0], r->labels, images, labels, r->indices, count,
                     r->sample_size, 1.0f / 255.0f);
  tdm_replica_normalize_input(r, count);
  /* The unshifted batch, for the translations, before a forward pass overwrites it. */
  const size_t sample = (size_t)net->in_h * net->in_w * net->in_c;
  const size_t batch_floats = (size_t)count * sample;
  float *host_x = NULL, *host_v = NULL;
  if (r->test_shift > 0) {
    host_x = g_new(float, batch_floats);
    host_v = g_new(float, batch_floats);
    tdm_backend_download(b, host_x, r->acts[0], batch_floats * sizeof(float));
  }
  tdm_replica_forward(r, count, MODE_EVAL);
  float *logits = r->acts[net->layer_count];
  size_t floats = (size_t)count * net->classes;
  int views = tdm_replica_test_views(r);
  gboolean flip = r->test_flip;
  if (views > 1) {
    tdm_backend_copy(b, r->tta_logits, logits, floats * sizeof(float));
    if (flip) {
      tdm_backend_gather_augment(b, r->acts[0], r->labels, images, labels, r->indices, count,
                                 net->in_h, net->in_w, net->in_c, 1.0f / 255.0f, 0,
                                 TDM_FLIP_ALWAYS, 0, 0);
      tdm_replica_normalize_input(r, count);
      tdm_replica_forward(r, count, MODE_EVAL);
      tdm_backend_add(b, r->tta_logits, logits, floats);
    }
    const int s = r->test_shift;
    const int shifts[4][2] = {{-s, 0}, {s, 0}, {0, -s}, {0, s}};
    for (int k = 0; k < 4 && s > 0; k++) {
      for (int m = 0; m < (flip ? 2 : 1); m++) {
        shift_batch(host_v, host_x, count, net->in_h, net->in_w, net->in_c, shifts[k][0],
                    shifts[k][1], m == 1);
        tdm_backend_upload(b, r->acts[0], host_v, batch_floats * sizeof(float));
        /* host_v is written again for the next view: the upload must be done. */
        tdm_backend_synchronize(b);
        tdm_replica_forward(r, count, MODE_EVAL);
        tdm_backend_add(b, r->tta_logits, logits, floats);
      }
    }
    tdm_backend_scale(b, r->tta_logits, 1.0f / (float)views, floats);
    tdm_backend_copy(b, logits, r->tta_logits, floats * sizeof(float));
  }
  /* The upload may be asynchronous: keep the host indices alive until it is done. */
  tdm_backend_synchronize(b);
  tdm_replica_infer_end(r);
  g_free(indices);
  g_free(host_x);
  g_free(host_v);
  return logits;
}

static float *
eval_logits(TdmReplica *r, int first, int count)
{
  return eval_logits_of(r, r->test_images, r->test_labels, NULL, first, count);
}

void
tdm_replica_evaluate(TdmReplica *r, int first, int count)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  g_return_if_fail(count > 0 && count <= r->eval_capacity);

  float *logits = eval_logits(r, first, count);
  tdm_backend_softmax_xent(b, logits, r->labels, count, net->classes, 0.0f, 0.0f, NULL,
                           r->metrics);
  tdm_backend_synchronize(b);
}

void
tdm_replica_evaluate_train(TdmReplica *r, const int32_t *samples, int count)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  g_return_if_fail(count > 0 && count <= r->eval_capacity && samples != NULL);

  float *logits = eval_logits_of(r, r->train_images, r->train_labels, samples, 0, count);
  tdm_backend_softmax_xent(b, logits, r->labels, count, net->classes, 0.0f, 0.0f, NULL,
                           r->metrics);
  tdm_backend_synchronize(b);
}

const float *
tdm_replica_outputs(const TdmReplica *r)
{
  /* The last inference pass's: outside one, its pointers wait in infer_acts. */
  return r->infer_acts[r->net->layer_count];
}

void
tdm_replica_predict(TdmReplica *r, int first, int count, float *logits)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  g_return_if_fail(count > 0 && count <= r->eval_capacity && logits != NULL);

  float *device_logits = eval_logits(r, first, count);
  tdm_backend_download(b, logits, device_logits, (size_t)count * net->classes * sizeof(float));
}

TdmMetrics
tdm_replica_take_metrics(TdmReplica *r)
{
  TdmBackend *b = r->backend;
  TdmMetrics m = {0, 0};
  tdm_backend_download(b, &m, r->metrics, sizeof m);
  tdm_backend_zero(b, r->metrics, sizeof(TdmMetrics));
  return m;
}
