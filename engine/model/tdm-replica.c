/* tdm-replica.c — forward and backward passes of one replica, expressed as backend
 * operations so the same code runs on the CPU and on a GPU (where the whole pass is
 * captured once in a graph and replayed). No communication, no optimizer here. */
#include "tdm-replica.h"
#include "tdm-error.h"

#include <string.h>

#define ALLOC(ptr, bytes)                                                               \
  do {                                                                                  \
    (ptr) = tdm_backend_alloc(b, (bytes), error);                                       \
    if ((ptr) == NULL)                                                                  \
      goto fail;                                                                        \
  } while (0)

/* Layer i's im2col columns, in floats per sample (0 for other layers). Each conv
 * layer keeps its own, so that backward reuses the forward's instead of rebuilding
 * them (a copy as large as the columns themselves, per layer and step). */
static size_t
col_floats_per_sample(const TdmLayer *l)
{
  if (l->kind != TDM_LAYER_CONV)
    return 0;
  return (size_t)l->out_h * l->out_w * l->in_c * l->kernel * l->kernel;
}

/* Whether conv layer i hands its bias, and its ReLU if it has one, to the pool after
 * it (maxpool_forward applies them after the max, on a quarter of the elements, and
 * maxpool_backward masks by the pool's output, so the conv runs neither bias_forward
 * nor relu_backward). Its own output then holds the bare product. */
static gboolean
bias_in_pool(const TdmNetwork *net, int i)
{
  return net->layers[i].kind == TDM_LAYER_CONV && i + 1 < net->layer_count &&
         net->layers[i + 1].kind == TDM_LAYER_POOL;
}

/* Whether the first layer is a small conv whose pool comes next, so that the two run
 * as conv_pool_forward and conv_pool_backward: no columns, and the conv's output is
 * never stored (nor its gradient, which a first layer does not pass on). */
static gboolean
conv_pool_first(const TdmNetwork *net)
{
  const TdmLayer *l = &net->layers[0];
  return bias_in_pool(net, 0) && l->in_c * l->kernel * l->kernel <= TDM_CONV_POOL_TAPS &&
         l->out_c <= TDM_CONV_POOL_OUT;
}

/* Whether layer i's output is a buffer of its own (flatten only renames; the conv of
 * a conv_pool_first network has none). */
static gboolean
owns_output(const TdmNetwork *net, int i)
{
  return net->layers[i].kind != TDM_LAYER_FLATTEN && !(i == 0 && conv_pool_first(net));
}

static size_t
layer_out_floats(const TdmLayer *l)
{
  return (size_t)l->out_h * l->out_w * l->out_c;
}

size_t
tdm_replica_bytes_needed(const TdmNetwork *net, int capacity, const TdmDataset *train,
                         const TdmDataset *test)
{
  size_t floats = 2 * net->parameter_count;
  floats += (size_t)capacity * net->in_h * net->in_w * net->in_c;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (owns_output(net, i))
      floats += (size_t)capacity * layer_out_floats(l);
    if (l->kind == TDM_LAYER_POOL)
      floats += (size_t)capacity * layer_out_floats(l); /* int32 argmax */
    if (!(i == 0 && conv_pool_first(net)))
      floats += (size_t)capacity * col_floats_per_sample(l);
  }
  floats += 2 * (size_t)capacity * net->max_activation;
  size_t bytes = floats * sizeof(float) + 2 * (size_t)capacity * sizeof(int32_t) +
                 sizeof(TdmMetrics);
  bytes += (size_t)train->count * (tdm_dataset_sample_size(train) + 1);
  bytes += (size_t)test->count * (tdm_dataset_sample_size(test) + 1);
  return bytes;
}

TdmReplica *
tdm_replica_new(TdmBackend *b, const TdmNetwork *net, int capacity, const TdmDataset *train,
                const TdmDataset *test, GError **error)
{
  g_return_val_if_fail(capacity > 0, NULL);

  TdmReplica *r = g_new0(TdmReplica, 1);
  r->backend = b;
  r->net = net;
  r->capacity = capacity;
  r->sample_size = tdm_dataset_sample_size(train);
  r->acts = g_new0(float *, net->layer_count + 1);
  r->argmax = g_new0(int32_t *, net->layer_count);
  r->cols = g_new0(float *, net->layer_count);

  ALLOC(r->params, net->parameter_count * sizeof(float));
  ALLOC(r->grads, net->parameter_count * sizeof(float));
  ALLOC(r->metrics, sizeof(TdmMetrics));
  b->ops->zero(b, r->metrics, sizeof(TdmMetrics));
  ALLOC(r->acts[0], (size_t)capacity * net->in_h * net->in_w * net->in_c * sizeof(float));
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (owns_output(net, i))
      ALLOC(r->acts[i + 1], (size_t)capacity * layer_out_floats(l) * sizeof(float));
    else if (l->kind == TDM_LAYER_FLATTEN)
      r->acts[i + 1] = r->acts[i];
    if (l->kind == TDM_LAYER_POOL)
      ALLOC(r->argmax[i], (size_t)capacity * layer_out_floats(l) * sizeof(int32_t));
    if (l->kind == TDM_LAYER_CONV && !(i == 0 && conv_pool_first(net)))
      ALLOC(r->cols[i], (size_t)capacity * col_floats_per_sample(l) * sizeof(float));
  }
  ALLOC(r->grad_a, (size_t)capacity * net->max_activation * sizeof(float));
  ALLOC(r->grad_b, (size_t)capacity * net->max_activation * sizeof(float));
  ALLOC(r->labels, (size_t)capacity * sizeof(int32_t));
  ALLOC(r->indices, (size_t)capacity * sizeof(int32_t));

  size_t train_bytes = (size_t)train->count * r->sample_size;
  size_t test_bytes = (size_t)test->count * r->sample_size;
  ALLOC(r->train_images, train_bytes);
  ALLOC(r->train_labels, train->count);
  ALLOC(r->test_images, test_bytes);
  ALLOC(r->test_labels, test->count);
  b->ops->upload(b, r->train_images, train->images, train_bytes);
  b->ops->upload(b, r->train_labels, train->labels, train->count);
  b->ops->upload(b, r->test_images, test->images, test_bytes);
  b->ops->upload(b, r->test_labels, test->labels, test->count);
  if (!tdm_backend_check(b, error))
    goto fail;
  return r;

fail:
  tdm_replica_free(r);
  return NULL;
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
  tdm_backend_release(b, r->metrics);
  tdm_backend_release(b, r->acts[0]);
  for (int i = 0; i < net->layer_count; i++) {
    if (owns_output(net, i))
      tdm_backend_release(b, r->acts[i + 1]);
    tdm_backend_release(b, r->argmax[i]);
    tdm_backend_release(b, r->cols[i]);
  }
  tdm_backend_release(b, r->grad_a);
  tdm_backend_release(b, r->grad_b);
  tdm_backend_release(b, r->labels);
  tdm_backend_release(b, r->indices);
  tdm_backend_release(b, r->train_images);
  tdm_backend_release(b, r->train_labels);
  tdm_backend_release(b, r->test_images);
  tdm_backend_release(b, r->test_labels);
  g_free(r->acts);
  g_free(r->argmax);
  g_free(r->cols);
  g_free(r);
}

static gboolean
aborted(TdmReplica *r)
{
  return r->abort_flag != NULL && g_atomic_int_get(r->abort_flag);
}

static void
forward(TdmReplica *r, int n)
{
  TdmBackend *b = r->backend;
  const TdmBackendOps *ops = b->ops;
  int first = 0;
  if (conv_pool_first(r->net)) {
    const TdmLayer *l = &r->net->layers[0];
    ops->conv_pool_forward(b, r->acts[2], r->argmax[1], r->acts[0], r->params + l->weight_offset,
                           r->params + l->bias_offset, l->fused_relu, n, l->in_h, l->in_w,
                           l->in_c, l->out_c, l->kernel, l->kernel, l->pad,
                           r->net->layers[1].kernel);
    first = 2;
  }
  for (int i = first; i < r->net->layer_count; i++) {
    const TdmLayer *l = &r->net->layers[i];
    const float *x = r->acts[i];
    float *y = r->acts[i + 1];
    const float *w = r->params + l->weight_offset;
    const float *bias = r->params + l->bias_offset;
    switch (l->kind) {
    case TDM_LAYER_LINEAR: {
      int in = l->in_h * l->in_w * l->in_c;
      ops->gemm(b, false, true, n, l->out_c, in, 1.0f, x, in, w, in, 0.0f, y, l->out_c);
      ops->bias_forward(b, y, bias, n, l->out_c, 1, l->fused_relu);
      break;
    }
    case TDM_LAYER_CONV: {
      int rows = n * l->out_h * l->out_w;
      int k = l->in_c * l->kernel * l->kernel;
      float *col = r->cols[i];
      ops->im2col(b, col, x, n, l->in_h, l->in_w, l->in_c, l->kernel, l->kernel, l->pad);
      ops->gemm(b, false, true, rows, l->out_c, k, 1.0f, col, k, w, k, 0.0f, y, l->out_c);
      if (!bias_in_pool(r->net, i))
        ops->bias_forward(b, y, bias, rows, l->out_c, 1, l->fused_relu);
      break;
    }
    case TDM_LAYER_POOL: {
      const TdmLayer *conv = i > 0 && bias_in_pool(r->net, i - 1) ? l - 1 : NULL;
      ops->maxpool_forward(b, y, r->argmax[i], x,
                           conv ? r->params + conv->bias_offset : NULL,
                           conv != NULL && conv->fused_relu, n, l->in_h, l->in_w, l->in_c,
                           l->kernel);
      break;
    }
    case TDM_LAYER_RELU:
      ops->relu_forward(b, y, x, (size_t)n * layer_out_floats(l));
      break;
    case TDM_LAYER_FLATTEN:
      break;
    }
    if (aborted(r))
      return;
  }
}

static void
backward(TdmReplica *r, int n)
{
  TdmBackend *b = r->backend;
  const TdmBackendOps *ops = b->ops;
  float *dy = r->grad_a, *dx = r->grad_b;

  for (int i = r->net->layer_count - 1; i >= 0; i--) {
    const TdmLayer *l = &r->net->layers[i];
    const float *x = r->acts[i];
    const float *y = r->acts[i + 1];
    const float *w = r->params + l->weight_offset;
    float *dw = r->grads + l->weight_offset;
    float *dbias = r->grads + l->bias_offset;
    gboolean need_dx = i > 0;

    switch (l->kind) {
    case TDM_LAYER_LINEAR: {
      int in = l->in_h * l->in_w * l->in_c;
      if (l->fused_relu)
        ops->relu_backward(b, dy, dy, y, (size_t)n * l->out_c);
      ops->gemm(b, true, false, l->out_c, in, n, 1.0f, dy, l->out_c, x, in, 0.0f, dw, in);
      ops->bias_backward(b, dbias, dy, n, l->out_c, 1);
      if (need_dx)
        ops->gemm(b, false, false, n, in, l->out_c, 1.0f, dy, l->out_c, w, in, 0.0f, dx, in);
      break;
    }
    case TDM_LAYER_CONV: {
      int rows = n * l->out_h * l->out_w;
      int k = l->in_c * l->kernel * l->kernel;
      float *col = r->cols[i];
      /* With its bias and ReLU in the pool, the pool's backward did both. */
      if (!bias_in_pool(r->net, i)) {
        if (l->fused_relu)
          ops->relu_backward(b, dy, dy, y, (size_t)rows * l->out_c);
        ops->bias_backward(b, dbias, dy, rows, l->out_c, 1);
      }
      ops->gemm(b, true, false, l->out_c, k, rows, 1.0f, dy, l->out_c, col, k, 0.0f, dw, k);
      if (need_dx) {
        /* The columns are spent: their gradient takes their place. */
        ops->gemm(b, false, false, rows, k, l->out_c, 1.0f, dy, l->out_c, w, k, 0.0f, col, k);
        ops->col2im(b, dx, col, n, l->in_h, l->in_w, l->in_c, l->kernel, l->kernel, l->pad);
      }
      break;
    }
    case TDM_LAYER_POOL:
      if (i == 1 && conv_pool_first(r->net)) {
        const TdmLayer *c = l - 1;
        ops->conv_pool_backward(b, r->grads + c->weight_offset, r->grads + c->bias_offset, dy,
                                r->argmax[1], y, r->acts[0], c->fused_relu, n, c->in_h,
                                c->in_w, c->in_c, c->out_c, c->kernel, c->kernel, c->pad,
                                l->kernel);
        if (r->grads_ready != NULL)
          r->grads_ready(r, c->weight_offset, c->weight_count + c->bias_count,
                         r->grads_ready_data);
        return;
      }
      if (need_dx) {
        /* The conv below handed this pool its bias (and ReLU): their gradients too. */
        const TdmLayer *c = bias_in_pool(r->net, i - 1) ? l - 1 : NULL;
        ops->maxpool_backward(b, dx, c ? r->grads + c->bias_offset : NULL, dy, r->argmax[i],
                              c && c->fused_relu ? y : NULL, n, l->in_h, l->in_w, l->in_c,
                              l->kernel);
      }
      break;
    case TDM_LAYER_RELU:
      if (need_dx)
        ops->relu_backward(b, dx, dy, y, (size_t)n * layer_out_floats(l));
      break;
    case TDM_LAYER_FLATTEN:
      continue; /* dy already is the input's gradient */
    }

    if (l->weight_count > 0 && r->grads_ready != NULL)
      r->grads_ready(r, l->weight_offset, l->weight_count + l->bias_count,
                     r->grads_ready_data);
    float *swap = dy;
    dy = dx;
    dx = swap;
    if (aborted(r))
      return;
  }
}

/* The step body that a graph captures: everything but the upload of indices. */
static void
train_body(TdmReplica *r, int count, float grad_scale)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  guint64 first = b->operations;
  b->ops->gather(b, r->acts[0], r->labels, r->train_images, r->train_labels, r->indices,
                 count, r->sample_size, 1.0f / 255.0f);
  forward(r, count);
  if (aborted(r))
    return;
  if (r->forward_done != NULL)
    r->forward_done(r, r->forward_done_data);
  b->ops->softmax_xent(b, r->acts[net->layer_count], r->labels, count, net->classes,
                       grad_scale, r->grad_a, r->metrics);
  backward(r, count);
  r->ops_per_step = (int)(b->operations - first);
}

/* Graph keys pair the shard size with the gradient scale: both are baked in, and a
 * short last batch can give one replica a full shard's size with another scale. */
static int
graph_key(int count, float grad_scale)
{
  guint32 bits;
  memcpy(&bits, &grad_scale, sizeof bits);
  return (int)(((guint32)count << 12) ^ (bits >> 8) ^ bits) & G_MAXINT;
}

void
tdm_replica_train_step(TdmReplica *r, const int32_t *indices, int count, float grad_scale)
{
  TdmBackend *b = r->backend;
  g_return_if_fail(count > 0 && count <= r->capacity);

  b->ops->upload(b, r->indices, indices, (size_t)count * sizeof(int32_t));

  /* Graphs replay fixed launches, so a bucket hook (which issues communication from
   * the host) rules them out. A run has at most two shard sizes (full and last). */
  if (b->ops->graph_launch == NULL || r->grads_ready != NULL || r->forward_done != NULL) {
    train_body(r, count, grad_scale);
    return;
  }
  int key = graph_key(count, grad_scale);
  if (b->ops->graph_launch(b, key))
    return;
  if (b->ops->graph_begin(b, key)) {
    train_body(r, count, grad_scale);
    b->ops->graph_end(b, key);
    if (!b->ops->graph_launch(b, key) && !tdm_backend_failed(b))
      tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, "a captured step graph did not launch");
    return;
  }
  train_body(r, count, grad_scale);
}

void
tdm_replica_evaluate(TdmReplica *r, int first, int count)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  g_return_if_fail(count > 0 && count <= r->capacity);

  int32_t *indices = g_new(int32_t, count);
  for (int i = 0; i < count; i++)
    indices[i] = first + i;
  b->ops->upload(b, r->indices, indices, (size_t)count * sizeof(int32_t));
  b->ops->gather(b, r->acts[0], r->labels, r->test_images, r->test_labels, r->indices, count,
                 r->sample_size, 1.0f / 255.0f);
  forward(r, count);
  b->ops->softmax_xent(b, r->acts[net->layer_count], r->labels, count, net->classes, 0.0f,
                       NULL, r->metrics);
  /* The upload may be asynchronous: keep the host indices alive until it is done. */
  b->ops->synchronize(b);
  g_free(indices);
}

const float *
tdm_replica_outputs(const TdmReplica *r)
{
  return r->acts[r->net->layer_count];
}

TdmMetrics
tdm_replica_take_metrics(TdmReplica *r)
{
  TdmBackend *b = r->backend;
  TdmMetrics m = {0, 0};
  b->ops->download(b, &m, r->metrics, sizeof m);
  b->ops->zero(b, r->metrics, sizeof(TdmMetrics));
  return m;
}
