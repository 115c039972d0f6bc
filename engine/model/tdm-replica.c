/* tdm-replica.c — forward and backward passes of one replica, expressed as backend
 * operations so the same code runs on the CPU and on a GPU (where the whole pass is
 * captured once in a graph and replayed). The network is walked flat: residual
 * blocks are RES_BEGIN … RES_END, the skip path's gradient kept aside until the walk
 * back reaches the block's start. No communication here except synchronized BN's
 * sums, handed to the caller's hook; no optimizer. */
#include "tdm-replica.h"
#include "tdm-counter-rng.h"
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
static gboolean
direct_1x1(const TdmLayer *l)
{
  return l->kind == TDM_LAYER_CONV && l->kernel == 1 && l->stride == 1 && l->pad == 0;
}

static size_t
col_floats_per_sample(const TdmNetwork *net, const TdmLayer *l)
{
  /* A 1×1 conv of stride 1 multiplies its input as it is: no columns. */
  if (l->kind == TDM_LAYER_CONV && !direct_1x1(l))
    return (size_t)l->out_h * l->out_w * l->in_c * l->kernel * l->kernel;
  if (l->kind == TDM_LAYER_RES_END && l->projection && l->stride > 1)
    return (size_t)l->out_h * l->out_w * net->layers[l->partner].in_c;
  return 0;
}

/* The channels a layer normalizes (bn, or a projection's bn), else 0. */
static int
bn_channels(const TdmLayer *l)
{
  return (int)(l->state_count / 2);
}

/* Whether conv layer i hands its bias, and its ReLU if it has one, to the pool after
 * it (maxpool_forward applies them after the max, on a quarter of the elements, and
 * maxpool_backward masks by the pool's output, so the conv runs neither bias_forward
 * nor relu_backward). Its own output then holds the bare product. */
static gboolean
bias_in_pool(const TdmNetwork *net, int i)
{
  return net->layers[i].kind == TDM_LAYER_CONV && net->layers[i].bias_count > 0 &&
         i + 1 < net->layer_count && net->layers[i + 1].kind == TDM_LAYER_POOL;
}

/* Whether the first layer is a small conv whose pool comes next, so that the two run
 * as conv_pool_forward and conv_pool_backward: no columns, and the conv's output is
 * never stored (nor its gradient, which a first layer does not pass on). */
static gboolean
conv_pool_first(const TdmNetwork *net)
{
  const TdmLayer *l = &net->layers[0];
  return bias_in_pool(net, 0) && l->stride == 1 &&
         l->in_c * l->kernel * l->kernel <= TDM_CONV_POOL_TAPS && l->out_c <= TDM_CONV_POOL_OUT;
}

/* Whether layer i's output is a buffer of its own (flatten and a block's start only
 * rename; the conv of a conv_pool_first network has none). */
static gboolean
owns_output(const TdmNetwork *net, int i)
{
  TdmLayerKind kind = net->layers[i].kind;
  return kind != TDM_LAYER_FLATTEN && kind != TDM_LAYER_RES_BEGIN &&
         !(i == 0 && conv_pool_first(net));
}

static gboolean
has_argmax(const TdmLayer *l)
{
  return l->kind == TDM_LAYER_POOL || l->kind == TDM_LAYER_GLOBAL_MAX;
}

static size_t
block_in_floats(const TdmNetwork *net, const TdmLayer *end)
{
  const TdmLayer *begin = &net->layers[end->partner];
  return (size_t)begin->in_h * begin->in_w * begin->in_c;
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
  size_t floats = 2 * net->parameter_count + net->state_count;
  floats += (size_t)capacity * net->in_h * net->in_w * net->in_c;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (owns_output(net, i))
      floats += (size_t)capacity * layer_out_floats(l);
    if (has_argmax(l))
      floats += (size_t)capacity * layer_out_floats(l); /* int32 argmax */
    if (!(i == 0 && conv_pool_first(net)))
      floats += (size_t)capacity * col_floats_per_sample(net, l);
    floats += 4 * (size_t)bn_channels(l);
    if (l->kind == TDM_LAYER_RES_END) {
      floats += (size_t)capacity * block_in_floats(net, l);
      if (l->projection)
        floats += 2 * (size_t)capacity * layer_out_floats(l);
    }
  }
  floats += 2 * (size_t)capacity * net->max_activation;
  floats += (size_t)capacity * net->classes; /* test-time flip */
  size_t bytes = floats * sizeof(float) + 2 * (size_t)capacity * sizeof(int32_t) +
                 sizeof(TdmMetrics);
  bytes += (size_t)train->count * (tdm_dataset_sample_size(train) + 1);
  bytes += (size_t)test->count * (tdm_dataset_sample_size(test) + 1);
  return bytes;
}

/* The backend operations a layer kind needs beyond those every network uses. */
static const char *
missing_op(const TdmBackendOps *ops, const TdmLayer *l)
{
#define NEED(op)                                                                        \
  if (ops->op == NULL)                                                                  \
    return #op;
  switch (l->kind) {
  case TDM_LAYER_BN:
    NEED(bn_sums) NEED(bn_stats) NEED(bn_forward) NEED(bn_forward_eval)
    NEED(bn_backward_sums) NEED(bn_backward_dx)
    break;
  case TDM_LAYER_RES_END:
    if (l->projection) {
      NEED(bn_sums) NEED(bn_stats) NEED(bn_forward) NEED(bn_forward_eval)
      NEED(bn_backward_sums) NEED(bn_backward_dx)
    }
    break;
  case TDM_LAYER_AVGPOOL:
    NEED(avgpool_forward) NEED(avgpool_backward)
    break;
  case TDM_LAYER_GLOBAL_AVG:
    NEED(global_avgpool_forward) NEED(global_avgpool_backward)
    break;
  case TDM_LAYER_GLOBAL_MAX:
    NEED(global_maxpool_forward) NEED(global_maxpool_backward)
    break;
  case TDM_LAYER_DROPOUT:
    NEED(dropout_forward) NEED(dropout_backward)
    break;
  default:
    break;
  }
  return NULL;
#undef NEED
}

gboolean
tdm_replica_supported(TdmBackend *b, const TdmNetwork *net, GError **error)
{
  for (int i = 0; i < net->layer_count; i++) {
    const char *op = missing_op(b->ops, &net->layers[i]);
    if (op != NULL) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                  "%s: this build's backend for it has no %s, which the network's layer "
                  "%d (“%s”) needs; train it on cpu",
                  b->name, op, net->layers[i].position, net->layers[i].name);
      return FALSE;
    }
  }
  return TRUE;
}

TdmReplica *
tdm_replica_new(TdmBackend *b, const TdmNetwork *net, int capacity, const TdmDataset *train,
                const TdmDataset *test, GError **error)
{
  g_return_val_if_fail(capacity > 0, NULL);
  if (!tdm_replica_supported(b, net, error))
    return NULL;

  TdmReplica *r = g_new0(TdmReplica, 1);
  r->backend = b;
  r->net = net;
  r->capacity = capacity;
  r->sample_size = tdm_dataset_sample_size(train);
  r->augment_flip = TDM_FLIP_NEVER;
  int n = net->layer_count;
  r->acts = g_new0(float *, n + 1);
  r->argmax = g_new0(int32_t *, n);
  r->cols = g_new0(float *, n);
  r->bn_work = g_new0(float *, n);
  r->proj_conv = g_new0(float *, n);
  r->proj_bn = g_new0(float *, n);
  r->skip_grad = g_new0(float *, n);

  ALLOC(r->params, MAX(1, net->parameter_count) * sizeof(float));
  ALLOC(r->grads, MAX(1, net->parameter_count) * sizeof(float));
  ALLOC(r->state, MAX(1, net->state_count) * sizeof(float));
  ALLOC(r->metrics, sizeof(TdmMetrics));
  b->ops->zero(b, r->metrics, sizeof(TdmMetrics));
  if (net->state_count > 0) {
    g_autofree float *state = g_new(float, net->state_count);
    tdm_network_init_state(net, state);
    b->ops->upload(b, r->state, state, net->state_count * sizeof(float));
    b->ops->synchronize(b);
  }
  ALLOC(r->acts[0], (size_t)capacity * net->in_h * net->in_w * net->in_c * sizeof(float));
  for (int i = 0; i < n; i++) {
    const TdmLayer *l = &net->layers[i];
    size_t out = (size_t)capacity * layer_out_floats(l);
    if (owns_output(net, i))
      ALLOC(r->acts[i + 1], out * sizeof(float));
    else if (l->kind == TDM_LAYER_FLATTEN || l->kind == TDM_LAYER_RES_BEGIN)
      r->acts[i + 1] = r->acts[i];
    if (has_argmax(l))
      ALLOC(r->argmax[i], out * sizeof(int32_t));
    size_t cols = col_floats_per_sample(net, l);
    if (cols > 0 && !(i == 0 && conv_pool_first(net)))
      ALLOC(r->cols[i], (size_t)capacity * cols * sizeof(float));
    if (bn_channels(l) > 0)
      ALLOC(r->bn_work[i], 4 * (size_t)bn_channels(l) * sizeof(float));
    if (l->kind == TDM_LAYER_RES_END) {
      ALLOC(r->skip_grad[i], (size_t)capacity * block_in_floats(net, l) * sizeof(float));
      if (l->projection) {
        ALLOC(r->proj_conv[i], out * sizeof(float));
        ALLOC(r->proj_bn[i], out * sizeof(float));
      }
    }
  }
  ALLOC(r->grad_a, (size_t)capacity * net->max_activation * sizeof(float));
  ALLOC(r->grad_b, (size_t)capacity * net->max_activation * sizeof(float));
  ALLOC(r->tta_logits, (size_t)capacity * net->classes * sizeof(float));
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
  tdm_backend_release(b, r->state);
  tdm_backend_release(b, r->metrics);
  tdm_backend_release(b, r->acts[0]);
  for (int i = 0; i < net->layer_count; i++) {
    if (owns_output(net, i))
      tdm_backend_release(b, r->acts[i + 1]);
    tdm_backend_release(b, r->argmax[i]);
    tdm_backend_release(b, r->cols[i]);
    tdm_backend_release(b, r->bn_work[i]);
    tdm_backend_release(b, r->proj_conv[i]);
    tdm_backend_release(b, r->proj_bn[i]);
    tdm_backend_release(b, r->skip_grad[i]);
  }
  tdm_backend_release(b, r->grad_a);
  tdm_backend_release(b, r->grad_b);
  tdm_backend_release(b, r->tta_logits);
  tdm_backend_release(b, r->labels);
  tdm_backend_release(b, r->indices);
  tdm_backend_release(b, r->train_images);
  tdm_backend_release(b, r->train_labels);
  tdm_backend_release(b, r->test_images);
  tdm_backend_release(b, r->test_labels);
  g_free(r->acts);
  g_free(r->argmax);
  g_free(r->cols);
  g_free(r->bn_work);
  g_free(r->proj_conv);
  g_free(r->proj_bn);
  g_free(r->skip_grad);
  g_free(r);
}

static gboolean
aborted(TdmReplica *r)
{
  return r->reduce_failed || (r->abort_flag != NULL && g_atomic_int_get(r->abort_flag));
}

typedef enum {
  MODE_EVAL,                   /* running statistics, no dropout */
  MODE_TRAIN,                  /* batch statistics, running averages move */
  MODE_PROBE,                  /* batch statistics, running averages left alone */
} Mode;

static gboolean
bn_reduce(TdmReplica *r, float *buffer, size_t count)
{
  if (r->bn_reduce == NULL || r->reduce_failed)
    return !r->reduce_failed;
  if (!r->bn_reduce(r, buffer, count, r->bn_reduce_data))
    r->reduce_failed = TRUE;
  return !r->reduce_failed;
}

/* The rows the batch statistics run over: this shard's, or every replica's when
 * synchronized. */
static double
bn_count(TdmReplica *r, int n, int pixels)
{
  int samples = r->bn_reduce != NULL && r->global_count > 0 ? r->global_count : n;
  return (double)samples * pixels;
}

/* y = BN(x) (then ReLU) over rows × C, in the given mode; work is the layer's 4·C. */
static void
bn_forward(TdmReplica *r, Mode mode, float *y, const float *x, int n, int pixels, int c,
           const float *gamma, const float *beta, float *work, float *running, bool relu)
{
  TdmBackend *b = r->backend;
  const TdmBackendOps *ops = b->ops;
  int rows = n * pixels;
  if (mode == MODE_EVAL) {
    ops->bn_forward_eval(b, y, x, running, running + c, gamma, beta, TDM_BN_EPS, rows, c,
                         relu);
    return;
  }
  double count = bn_count(r, n, pixels);
  float *sum = work, *sqdev = work + c, *saved = work + 2 * c;
  ops->bn_sums(b, sum, x, NULL, 0.0f, rows, c);
  if (!bn_reduce(r, sum, c))
    return;
  ops->bn_sums(b, sqdev, x, sum, (float)(1.0 / count), rows, c);
  if (!bn_reduce(r, sqdev, c))
    return;
  ops->bn_stats(b, saved, sum, sqdev, c, count, TDM_BN_EPS, TDM_BN_MOMENTUM,
                mode == MODE_TRAIN ? running : NULL, mode == MODE_TRAIN ? running + c : NULL);
  ops->bn_forward(b, y, x, saved, saved + c, gamma, beta, rows, c, relu);
}

/* dx from dy through BN (a fused ReLU's mask already applied to dy), and the
 * parameter gradients into dgamma and dbeta (contiguous: dbeta = dgamma + C). */
static void
bn_backward(TdmReplica *r, float *dx, const float *dy, const float *x, int n, int pixels,
            int c, const float *gamma, float *dgamma, float *work)
{
  TdmBackend *b = r->backend;
  const TdmBackendOps *ops = b->ops;
  int rows = n * pixels;
  const float *saved = work + 2 * c;
  ops->bn_backward_sums(b, dgamma, dgamma + c, dy, x, saved, saved + c, rows, c);
  const float *sums = dgamma;
  if (r->bn_reduce != NULL) {
    /* The gradients stay this replica's (the gradient all-reduce sums them); the
     * normalization's backward needs the sums over every replica. */
    ops->copy(b, work, dgamma, 2 * (size_t)c * sizeof(float));
    if (!bn_reduce(r, work, 2 * (size_t)c))
      return;
    sums = work;
  }
  ops->bn_backward_dx(b, dx, dy, x, saved, saved + c, gamma, sums, sums + c,
                      (float)(1.0 / bn_count(r, n, pixels)), rows, c);
}

static uint64_t
dropout_key(const TdmReplica *r, int layer)
{
  return tdm_crng_key(r->seed, TDM_RNG_DROPOUT + (uint32_t)layer);
}

/* A conv's product: out = cols(x) · Wᵀ, the columns kept in col (or x itself for a
 * 1×1 conv of stride 1). */
static void
conv_forward(TdmReplica *r, const TdmLayer *l, float *y, const float *x, float *col,
             const float *w, int n, int in_h, int in_w, int in_c, int out_c, int kernel,
             int pad, int stride, int out_h, int out_w)
{
  TdmBackend *b = r->backend;
  int rows = n * out_h * out_w;
  int k = in_c * kernel * kernel;
  const float *a = x;
  if (col != NULL) {
    b->ops->im2col(b, col, x, n, in_h, in_w, in_c, kernel, kernel, pad, stride);
    a = col;
  }
  b->ops->gemm(b, false, true, rows, out_c, k, 1.0f, a, k, w, k, 0.0f, y, out_c);
}

/* Its backward from dy: dw, and dx when wanted (col is spent: its gradient takes its
 * place before col2im). */
static void
conv_backward(TdmReplica *r, float *dx, float *dw, const float *dy, const float *x, float *col,
              const float *w, int n, int in_h, int in_w, int in_c, int out_c, int kernel,
              int pad, int stride, int out_h, int out_w, gboolean need_dx)
{
  TdmBackend *b = r->backend;
  int rows = n * out_h * out_w;
  int k = in_c * kernel * kernel;
  b->ops->gemm(b, true, false, out_c, k, rows, 1.0f, dy, out_c, col ? col : x, k, 0.0f, dw, k);
  if (!need_dx)
    return;
  if (col == NULL) {
    b->ops->gemm(b, false, false, rows, k, out_c, 1.0f, dy, out_c, w, k, 0.0f, dx, k);
    return;
  }
  b->ops->gemm(b, false, false, rows, k, out_c, 1.0f, dy, out_c, w, k, 0.0f, col, k);
  b->ops->col2im(b, dx, col, n, in_h, in_w, in_c, kernel, kernel, pad, stride);
}

static void
forward(TdmReplica *r, int n, Mode mode)
{
  TdmBackend *b = r->backend;
  const TdmBackendOps *ops = b->ops;
  const TdmNetwork *net = r->net;
  int first = 0;
  if (conv_pool_first(net)) {
    const TdmLayer *l = &net->layers[0];
    ops->conv_pool_forward(b, r->acts[2], r->argmax[1], r->acts[0], r->params + l->weight_offset,
                           r->params + l->bias_offset, l->fused_relu, n, l->in_h, l->in_w,
                           l->in_c, l->out_c, l->kernel, l->kernel, l->pad,
                           net->layers[1].kernel);
    first = 2;
  }
  for (int i = first; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    const float *x = r->acts[i];
    float *y = r->acts[i + 1];
    const float *w = r->params + l->weight_offset;
    const float *bias = r->params + l->bias_offset;
    size_t out = (size_t)n * layer_out_floats(l);
    int pixels = l->out_h * l->out_w;
    switch (l->kind) {
    case TDM_LAYER_LINEAR: {
      int in = l->in_h * l->in_w * l->in_c;
      ops->gemm(b, false, true, n, l->out_c, in, 1.0f, x, in, w, in, 0.0f, y, l->out_c);
      if (l->bias_count > 0)
        ops->bias_forward(b, y, bias, n, l->out_c, 1, l->fused_relu);
      else if (l->fused_relu)
        ops->relu_forward(b, y, y, out);
      break;
    }
    case TDM_LAYER_CONV:
      conv_forward(r, l, y, x, r->cols[i], w, n, l->in_h, l->in_w, l->in_c, l->out_c,
                   l->kernel, l->pad, l->stride, l->out_h, l->out_w);
      if (bias_in_pool(net, i))
        break;
      if (l->bias_count > 0)
        ops->bias_forward(b, y, bias, n * pixels, l->out_c, 1, l->fused_relu);
      else if (l->fused_relu)
        ops->relu_forward(b, y, y, out);
      break;
    case TDM_LAYER_POOL: {
      const TdmLayer *conv = i > 0 && bias_in_pool(net, i - 1) ? l - 1 : NULL;
      ops->maxpool_forward(b, y, r->argmax[i], x, conv ? r->params + conv->bias_offset : NULL,
                           conv != NULL && conv->fused_relu, n, l->in_h, l->in_w, l->in_c,
                           l->kernel);
      break;
    }
    case TDM_LAYER_RELU:
      ops->relu_forward(b, y, x, out);
      break;
    case TDM_LAYER_FLATTEN:
    case TDM_LAYER_RES_BEGIN:
      break;
    case TDM_LAYER_BN:
      bn_forward(r, mode, y, x, n, pixels, l->out_c, w, bias, r->bn_work[i],
                 r->state + l->state_offset, l->fused_relu);
      break;
    case TDM_LAYER_AVGPOOL:
      ops->avgpool_forward(b, y, x, n, l->in_h, l->in_w, l->in_c, l->kernel);
      break;
    case TDM_LAYER_GLOBAL_AVG:
      ops->global_avgpool_forward(b, y, x, n, l->in_h * l->in_w, l->in_c);
      break;
    case TDM_LAYER_GLOBAL_MAX:
      ops->global_maxpool_forward(b, y, r->argmax[i], x, n, l->in_h * l->in_w, l->in_c);
      break;
    case TDM_LAYER_DROPOUT:
      if (mode == MODE_EVAL || l->rate == 0.0f)
        ops->copy(b, y, x, out * sizeof(float));
      else
        ops->dropout_forward(b, y, x, r->indices, n, (int)layer_out_floats(l), l->rate,
                             dropout_key(r, i), r->epoch);
      break;
    case TDM_LAYER_RES_END: {
      const TdmLayer *begin = &net->layers[l->partner];
      const float *skip = r->acts[l->partner];
      if (l->projection) {
        conv_forward(r, l, r->proj_conv[i], skip, r->cols[i], w, n, begin->in_h, begin->in_w,
                     begin->in_c, l->out_c, 1, 0, l->stride, l->out_h, l->out_w);
        bn_forward(r, mode, r->proj_bn[i], r->proj_conv[i], n, pixels, l->out_c, bias,
                   bias + l->out_c, r->bn_work[i], r->state + l->state_offset, false);
        skip = r->proj_bn[i];
      }
      ops->copy(b, y, x, out * sizeof(float));
      ops->add(b, y, skip, out);
      if (l->fused_relu)
        ops->relu_forward(b, y, y, out);
      break;
    }
    }
    if (aborted(r))
      return;
  }
}

static void
announce(TdmReplica *r, const TdmLayer *l)
{
  if (l->param_count > 0 && r->grads_ready != NULL)
    r->grads_ready(r, l->param_offset, l->param_count, r->grads_ready_data);
}

static void
backward(TdmReplica *r, int n)
{
  TdmBackend *b = r->backend;
  const TdmBackendOps *ops = b->ops;
  const TdmNetwork *net = r->net;
  float *dy = r->grad_a, *dx = r->grad_b;

  for (int i = net->layer_count - 1; i >= 0; i--) {
    const TdmLayer *l = &net->layers[i];
    const float *x = r->acts[i];
    const float *y = r->acts[i + 1];
    const float *w = r->params + l->weight_offset;
    float *dw = r->grads + l->weight_offset;
    float *dbias = r->grads + l->bias_offset;
    gboolean need_dx = i > 0;
    size_t out = (size_t)n * layer_out_floats(l);
    int pixels = l->out_h * l->out_w;

    switch (l->kind) {
    case TDM_LAYER_LINEAR: {
      int in = l->in_h * l->in_w * l->in_c;
      if (l->fused_relu)
        ops->relu_backward(b, dy, dy, y, out);
      ops->gemm(b, true, false, l->out_c, in, n, 1.0f, dy, l->out_c, x, in, 0.0f, dw, in);
      if (l->bias_count > 0)
        ops->bias_backward(b, dbias, dy, n, l->out_c, 1);
      if (need_dx)
        ops->gemm(b, false, false, n, in, l->out_c, 1.0f, dy, l->out_c, w, in, 0.0f, dx, in);
      break;
    }
    case TDM_LAYER_CONV:
      /* With its bias and ReLU in the pool, the pool's backward did both. */
      if (!bias_in_pool(net, i)) {
        if (l->fused_relu)
          ops->relu_backward(b, dy, dy, y, out);
        if (l->bias_count > 0)
          ops->bias_backward(b, dbias, dy, n * pixels, l->out_c, 1);
      }
      conv_backward(r, dx, dw, dy, x, r->cols[i], w, n, l->in_h, l->in_w, l->in_c, l->out_c,
                    l->kernel, l->pad, l->stride, l->out_h, l->out_w, need_dx);
      break;
    case TDM_LAYER_POOL:
      if (i == 1 && conv_pool_first(net)) {
        const TdmLayer *c = l - 1;
        ops->conv_pool_backward(b, r->grads + c->weight_offset, r->grads + c->bias_offset, dy,
                                r->argmax[1], y, r->acts[0], c->fused_relu, n, c->in_h,
                                c->in_w, c->in_c, c->out_c, c->kernel, c->kernel, c->pad,
                                l->kernel);
        announce(r, c);
        return;
      }
      if (need_dx) {
        /* The conv below handed this pool its bias (and ReLU): their gradients too. */
        const TdmLayer *c = bias_in_pool(net, i - 1) ? l - 1 : NULL;
        ops->maxpool_backward(b, dx, c ? r->grads + c->bias_offset : NULL, dy, r->argmax[i],
                              c && c->fused_relu ? y : NULL, n, l->in_h, l->in_w, l->in_c,
                              l->kernel);
      }
      break;
    case TDM_LAYER_RELU:
      if (need_dx)
        ops->relu_backward(b, dx, dy, y, out);
      break;
    case TDM_LAYER_FLATTEN:
      continue; /* dy already is the input's gradient */
    case TDM_LAYER_BN:
      if (l->fused_relu)
        ops->relu_backward(b, dy, dy, y, out);
      bn_backward(r, dx, dy, x, n, pixels, l->out_c, w, dw, r->bn_work[i]);
      break;
    case TDM_LAYER_AVGPOOL:
      if (need_dx)
        ops->avgpool_backward(b, dx, dy, n, l->in_h, l->in_w, l->in_c, l->kernel);
      break;
    case TDM_LAYER_GLOBAL_AVG:
      if (need_dx)
        ops->global_avgpool_backward(b, dx, dy, n, l->in_h * l->in_w, l->in_c);
      break;
    case TDM_LAYER_GLOBAL_MAX:
      if (need_dx)
        ops->global_maxpool_backward(b, dx, dy, r->argmax[i], n, l->in_h * l->in_w, l->in_c);
      break;
    case TDM_LAYER_DROPOUT:
      if (need_dx) {
        if (l->rate == 0.0f)
          ops->copy(b, dx, dy, out * sizeof(float));
        else
          ops->dropout_backward(b, dx, dy, r->indices, n, (int)layer_out_floats(l), l->rate,
                                dropout_key(r, i), r->epoch);
      }
      break;
    case TDM_LAYER_RES_END: {
      /* dy goes on to the block's layers unchanged; the skip path's share waits in
       * skip_grad for the block's start. */
      if (l->fused_relu)
        ops->relu_backward(b, dy, dy, y, out);
      float *skip = r->skip_grad[i];
      if (l->projection) {
        const TdmLayer *begin = &net->layers[l->partner];
        float *dconv = r->proj_bn[i]; /* the bn's output is spent */
        bn_backward(r, dconv, dy, r->proj_conv[i], n, pixels, l->out_c,
                    r->params + l->bias_offset, r->grads + l->bias_offset, r->bn_work[i]);
        conv_backward(r, skip, dw, dconv, r->acts[l->partner], r->cols[i], w, n, begin->in_h,
                      begin->in_w, begin->in_c, l->out_c, 1, 0, l->stride, l->out_h, l->out_w,
                      TRUE);
      } else {
        ops->copy(b, skip, dy, out * sizeof(float));
      }
      announce(r, l);
      if (aborted(r))
        return;
      continue;
    }
    case TDM_LAYER_RES_BEGIN: {
      const TdmLayer *end = &net->layers[l->partner];
      ops->add(b, dy, r->skip_grad[l->partner], (size_t)n * block_in_floats(net, end));
      continue;
    }
    }

    announce(r, l);
    float *swap = dy;
    dy = dx;
    dx = swap;
    if (aborted(r))
      return;
  }
}

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
  if (augments(r))
    b->ops->gather_augment(b, r->acts[0], r->labels, r->train_images, r->train_labels,
                           r->indices, count, net->in_h, net->in_w, net->in_c, 1.0f / 255.0f,
                           r->augment_pad, r->augment_flip,
                           tdm_crng_key(r->seed, TDM_RNG_AUGMENT), r->epoch);
  else
    b->ops->gather(b, r->acts[0], r->labels, r->train_images, r->train_labels, r->indices,
                   count, r->sample_size, 1.0f / 255.0f);
}

/* The step body that a graph captures: everything but the upload of indices. */
static void
train_body(TdmReplica *r, int count, float grad_scale)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  guint64 first = b->operations;
  gather_train(r, count);
  forward(r, count, MODE_TRAIN);
  if (aborted(r))
    return;
  if (r->forward_done != NULL)
    r->forward_done(r, r->forward_done_data);
  b->ops->softmax_xent(b, r->acts[net->layer_count], r->labels, count, net->classes,
                       r->smoothing, grad_scale, r->grad_a, r->metrics);
  backward(r, count);
  r->ops_per_step = (int)(b->operations - first);
}

/* Graph keys pair the shard size with the gradient scale: both are baked in, and a
 * short last batch can give one replica a full shard's size with another scale.
 * Augmentation and dropout bake the epoch in too. */
static int
graph_key(const TdmReplica *r, int count, float grad_scale)
{
  guint32 bits;
  memcpy(&bits, &grad_scale, sizeof bits);
  guint32 key = ((guint32)count << 12) ^ (bits >> 8) ^ bits;
  if (augments(r) || r->net->has_dropout)
    key ^= r->epoch * 0x9E3779B1u;
  return (int)(key & G_MAXINT);
}

void
tdm_replica_train_step(TdmReplica *r, const int32_t *indices, int count, float grad_scale)
{
  TdmBackend *b = r->backend;
  g_return_if_fail(count > 0 && count <= r->capacity);

  b->ops->upload(b, r->indices, indices, (size_t)count * sizeof(int32_t));

  /* Graphs replay fixed launches, so a bucket hook, synchronized BN (which issue
   * communication from the host) or the forward hook of a sampled step rule them
   * out. A run has at most two shard sizes (full and last). */
  if (b->ops->graph_launch == NULL || r->grads_ready != NULL || r->bn_reduce != NULL ||
      r->forward_done != NULL) {
    train_body(r, count, grad_scale);
    return;
  }
  int key = graph_key(r, count, grad_scale);
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
tdm_replica_train_idle(TdmReplica *r)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  b->ops->zero(b, r->grads, net->parameter_count * sizeof(float));
  if (r->bn_reduce == NULL)
    return;
  /* The same collectives in the same order as a step: two per BN forward, one per BN
   * backward, each with zeros. */
  for (int i = 0; i < net->layer_count && !aborted(r); i++) {
    int c = bn_channels(&net->layers[i]);
    if (c == 0)
      continue;
    b->ops->zero(b, r->bn_work[i], 4 * (size_t)c * sizeof(float));
    bn_reduce(r, r->bn_work[i], c);
    bn_reduce(r, r->bn_work[i] + c, c);
  }
  for (int i = net->layer_count - 1; i >= 0 && !aborted(r); i--) {
    int c = bn_channels(&net->layers[i]);
    if (c == 0)
      continue;
    b->ops->zero(b, r->bn_work[i], 2 * (size_t)c * sizeof(float));
    bn_reduce(r, r->bn_work[i], 2 * (size_t)c);
  }
}

void
tdm_replica_train_loss(TdmReplica *r, const int32_t *indices, int count)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  g_return_if_fail(count > 0 && count <= r->capacity);
  b->ops->upload(b, r->indices, indices, (size_t)count * sizeof(int32_t));
  gather_train(r, count);
  forward(r, count, MODE_PROBE);
  b->ops->softmax_xent(b, r->acts[net->layer_count], r->labels, count, net->classes,
                       r->smoothing, 0.0f, NULL, r->metrics);
  b->ops->synchronize(b);
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
  forward(r, count, MODE_EVAL);
  float *logits = r->acts[net->layer_count];
  size_t floats = (size_t)count * net->classes;
  if (r->test_flip && b->ops->gather_augment != NULL) {
    b->ops->copy(b, r->tta_logits, logits, floats * sizeof(float));
    b->ops->gather_augment(b, r->acts[0], r->labels, r->test_images, r->test_labels,
                           r->indices, count, net->in_h, net->in_w, net->in_c, 1.0f / 255.0f,
                           0, TDM_FLIP_ALWAYS, 0, 0);
    forward(r, count, MODE_EVAL);
    b->ops->add(b, logits, r->tta_logits, floats);
    b->ops->scale(b, logits, 0.5f, floats);
  }
  b->ops->softmax_xent(b, logits, r->labels, count, net->classes, 0.0f, 0.0f, NULL,
                       r->metrics);
  /* The upload may be asynchronous: keep the host indices alive until it is done. */
  b->ops->synchronize(b);
  g_free(indices);
}

const float *
tdm_replica_outputs(const TdmReplica *r)
{
  return r->acts[r->net->layer_count];
}

void
tdm_replica_predict(TdmReplica *r, int first, int count, float *logits)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  g_return_if_fail(count > 0 && count <= r->capacity && logits != NULL);

  int32_t *indices = g_new(int32_t, count);
  for (int i = 0; i < count; i++)
    indices[i] = first + i;
  b->ops->upload(b, r->indices, indices, (size_t)count * sizeof(int32_t));
  b->ops->gather(b, r->acts[0], r->labels, r->test_images, r->test_labels, r->indices, count,
                 r->sample_size, 1.0f / 255.0f);
  forward(r, count, MODE_EVAL);
  b->ops->download(b, logits, r->acts[net->layer_count],
                   (size_t)count * net->classes * sizeof(float));
  g_free(indices);
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
