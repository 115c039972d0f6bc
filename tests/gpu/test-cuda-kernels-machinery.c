/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-kernels-machinery.c — the CUDA backend's own machinery, part of
 * test-cuda-kernels: graph capture and replay, the upload ring, allocation counting and
 * out-of-memory messages, and the peer communicator (and NCCL's plumbing on one GPU).
 */
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "test-cuda-kernels.h"

/* Graphs: a small classifier step, captured and replayed, against the same ops run
 * eagerly, on two different index sets uploaded into the same buffer. */

typedef struct {
  int samples, ss, count, out;
  uint8_t *images, *labels;
  int32_t *indices;
  float *w, *bias, *x, *logits, *dlogits, *dw, *db;
  int32_t *y;
  TdmMetrics *metrics;
} MiniStep;

static void
mini_body(TdmBackend *b, MiniStep *s)
{
  tdm_backend_gather(b, s->x, s->y, s->images, s->labels, s->indices, s->count, s->ss,
                     1.0f / 255.0f);
  tdm_backend_gemm(b, false, true, s->count, s->out, s->ss, 1.0f, s->x, s->ss, s->w, s->ss,
                   0.0f, s->logits, s->out);
  tdm_backend_bias_forward(b, s->logits, s->bias, s->count, s->out, 1, false);
  tdm_backend_softmax_xent(b, s->logits, s->y, s->count, s->out, 0.0f, 1.0f / s->count,
                           s->dlogits, s->metrics);
  tdm_backend_bias_backward(b, s->db, s->dlogits, s->count, s->out, 1);
  tdm_backend_gemm(b, true, false, s->out, s->ss, s->count, 1.0f, s->dlogits, s->out, s->x,
                   s->ss, 0.0f, s->dw, s->ss);
}

static void
mini_results(MiniStep *s, float **dw, float **db, TdmMetrics *m)
{
  *dw = back(gpu, s->dw, (size_t)s->out * s->ss * 4);
  *db = back(gpu, s->db, (size_t)s->out * 4);
  tdm_backend_download(gpu, m, s->metrics, sizeof *m);
  tdm_backend_zero(gpu, s->metrics, sizeof *m);
}

static void
test_graph(void)
{
  if (!have_gpu())
    return;
  MiniStep s = {.samples = 600, .ss = 784, .count = 128, .out = 10};
  size_t bytes = (size_t)s.samples * s.ss;
  g_autofree uint8_t *images = g_new(uint8_t, bytes);
  g_autofree uint8_t *labels = g_new(uint8_t, s.samples);
  for (size_t i = 0; i < bytes; i++)
    images[i] = (uint8_t)g_test_rand_int_range(0, 256);
  for (int i = 0; i < s.samples; i++)
    labels[i] = (uint8_t)g_test_rand_int_range(0, s.out);
  g_autofree float *w = random_floats((size_t)s.out * s.ss, -0.05, 0.05);
  g_autofree float *bias = random_floats(s.out, -0.1, 0.1);
  g_autofree int32_t *idx_a = g_new(int32_t, s.count);
  g_autofree int32_t *idx_b = g_new(int32_t, s.count);
  for (int i = 0; i < s.count; i++) {
    idx_a[i] = g_test_rand_int_range(0, s.samples);
    idx_b[i] = g_test_rand_int_range(0, s.samples);
  }
  s.images = on(gpu, images, bytes);
  s.labels = on(gpu, labels, s.samples);
  s.indices = on(gpu, NULL, s.count * 4);
  s.w = on(gpu, w, (size_t)s.out * s.ss * 4);
  s.bias = on(gpu, bias, s.out * 4);
  s.x = poisoned((size_t)s.count * s.ss);
  s.logits = poisoned((size_t)s.count * s.out);
  s.dlogits = poisoned((size_t)s.count * s.out);
  s.dw = poisoned((size_t)s.out * s.ss);
  s.db = poisoned(s.out);
  s.y = on(gpu, NULL, s.count * 4);
  s.metrics = on(gpu, NULL, sizeof(TdmMetrics));
  tdm_backend_zero(gpu, s.metrics, sizeof(TdmMetrics));

  const int32_t *sets[2] = {idx_a, idx_b};
  float *eager_dw[2], *eager_db[2];
  TdmMetrics eager_m[2];
  for (int k = 0; k < 2; k++) {
    tdm_backend_upload(gpu, s.indices, sets[k], s.count * 4);
    mini_body(gpu, &s);
    mini_results(&s, &eager_dw[k], &eager_db[k], &eager_m[k]);
  }

  /* The same step on the CPU, once, so the graph is not only self-consistent. */
  {
    MiniStep c = s;
    c.images = images;
    c.labels = labels;
    c.indices = idx_a;
    c.w = w;
    c.bias = bias;
    c.x = g_new(float, (size_t)s.count * s.ss);
    c.logits = g_new(float, (size_t)s.count * s.out);
    c.dlogits = g_new(float, (size_t)s.count * s.out);
    c.dw = g_new(float, (size_t)s.out * s.ss);
    c.db = g_new(float, s.out);
    c.y = g_new(int32_t, s.count);
    TdmMetrics cm = {0, 0};
    c.metrics = &cm;
    mini_body(cpu, &c);
    assert_ok(cpu);
    g_assert_cmpfloat(rel_error(eager_dw[0], c.dw, (size_t)s.out * s.ss), <=, TOL);
    g_assert_cmpfloat(rel_error(eager_db[0], c.db, s.out), <=, TOL);
    g_assert_cmpfloat(fabs(eager_m[0].loss_sum - cm.loss_sum), <=, 1e-5 * cm.loss_sum);
    g_assert_cmpfloat(eager_m[0].correct, ==, cm.correct);
    g_free(c.x);
    g_free(c.logits);
    g_free(c.dlogits);
    g_free(c.dw);
    g_free(c.db);
    g_free(c.y);
  }

  g_assert_false(tdm_backend_graph_launch(gpu, 4242));
  tdm_backend_upload(gpu, s.indices, idx_a, s.count * 4);
  gboolean captured = tdm_backend_graph_begin(gpu, 4242);
  if (!captured) {
    g_test_skip("graphs disabled (TDM_CUDA_GRAPHS=0)");
  } else {
    mini_body(gpu, &s);
    tdm_backend_graph_end(gpu, 4242);
    assert_ok(gpu);
    for (int k = 0; k < 2; k++) {
      if (k == 1)
        tdm_backend_upload(gpu, s.indices, idx_b, s.count * 4);
      g_assert_true(tdm_backend_graph_launch(gpu, 4242));
      float *dw, *db;
      TdmMetrics m;
      mini_results(&s, &dw, &db, &m);
      g_assert_cmpfloat(rel_error(dw, eager_dw[k], (size_t)s.out * s.ss), <=, 1e-6);
      g_assert_cmpfloat(rel_error(db, eager_db[k], s.out), <=, 1e-6);
      g_assert_cmpfloat(fabs(m.loss_sum - eager_m[k].loss_sum), <=, 1e-9 * eager_m[k].loss_sum);
      g_assert_cmpfloat(m.correct, ==, eager_m[k].correct);
      g_free(dw);
      g_free(db);
    }
  }
  for (int k = 0; k < 2; k++) {
    g_free(eager_dw[k]);
    g_free(eager_db[k]);
  }
  void *all[] = {s.images, s.labels, s.indices, s.w, s.bias, s.x, s.logits, s.dlogits,
                 s.dw, s.db, s.y, s.metrics};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(gpu, all[i]);
  /* Freeing buffers drops the graphs that used them. */
  g_assert_false(tdm_backend_graph_launch(gpu, 4242));
  assert_ok(gpu);
}

/* Misuse inside a capture is an error on that backend, and it cleans up. */
static void
test_graph_misuse(void)
{
  if (!have_gpu())
    return;
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_cuda_new(0, TDM_PRECISION_FP32, &error);
  g_assert_no_error(error);
  float *d = on(b, NULL, 64);
  if (tdm_backend_graph_begin(b, 1)) {
    float host[16] = {1};
    tdm_backend_upload(b, d, host, sizeof host);
    g_assert_true(tdm_backend_failed(b));
    tdm_backend_graph_end(b, 1);
    g_assert_false(tdm_backend_check(b, &error));
    g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_BACKEND);
    g_assert_nonnull(strstr(error->message, "graph capture"));
    g_test_message("%s", error->message);
  }
  tdm_backend_release(b, d);
  tdm_backend_free(b);
}

/* Uploads are asynchronous from a pinned ring: the host buffer is reusable at once. */
static void
test_upload_ring(void)
{
  if (!have_gpu())
    return;
  enum { N = 9, LEN = 1000 };
  float *d[N];
  g_autofree float *host = g_new(float, LEN);
  for (int i = 0; i < N; i++) {
    d[i] = on(gpu, NULL, LEN * 4);
    for (int j = 0; j < LEN; j++)
      host[j] = (float)(i * LEN + j);
    tdm_backend_upload(gpu, d[i], host, LEN * 4); /* host rewritten right after */
  }
  /* Large uploads take the direct path. */
  size_t big = (size_t)3 << 20;
  g_autofree float *large = random_floats(big, -1, 1);
  float *dl = on(gpu, large, big * 4);
  for (int i = 0; i < N; i++) {
    g_autofree float *out = back(gpu, d[i], LEN * 4);
    for (int j = 0; j < LEN; j++)
      g_assert_cmpfloat(out[j], ==, (float)(i * LEN + j));
    tdm_backend_release(gpu, d[i]);
  }
  g_autofree float *out = back(gpu, dl, big * 4);
  g_assert_cmpmem(out, big * 4, large, big * 4);
  tdm_backend_release(gpu, dl);
}

/* Memory accounting */

static void
test_alloc(void)
{
  if (!have_gpu())
    return;
  g_autoptr(GError) error = NULL;
  size_t before = gpu->bytes_in_use;
  void *a = tdm_backend_alloc(gpu, 1 << 20, &error);
  g_assert_no_error(error);
  void *b = tdm_backend_alloc(gpu, 3, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(gpu->bytes_in_use, ==, before + (1 << 20) + 3);
  g_assert_cmpuint(gpu->bytes_peak, >=, gpu->bytes_in_use);
  tdm_backend_release(gpu, a);
  g_assert_cmpuint(gpu->bytes_in_use, ==, before + 3);
  tdm_backend_release(gpu, b);
  g_assert_cmpuint(gpu->bytes_in_use, ==, before);

  /* A petabyte does not fit: a clear error, and the backend carries on. */
  size_t huge = (size_t)1 << 50;
  void *c = tdm_backend_alloc(gpu, huge, &error);
  g_assert_null(c);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY);
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, "cuda:0"));
  g_assert_nonnull(strstr(error->message, "1125899906842624 bytes"));
  g_assert_nonnull(strstr(error->message, "free"));
  g_assert_cmpuint(gpu->bytes_in_use, ==, before);
  float one = 2.0f;
  float *d = on(gpu, &one, 4);
  tdm_backend_scale(gpu, d, 3.0f, 1);
  g_autofree float *out = back(gpu, d, 4);
  g_assert_cmpfloat(*out, ==, 6.0f);
  tdm_backend_release(gpu, d);

  /* A backend that names a GPU that is not there. */
  g_clear_error(&error);
  g_assert_null(tdm_backend_cuda_new(4096, TDM_PRECISION_FP32, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE);
}

/* Peer communicator: replicas are threads with a backend each, all on cuda:0. */

typedef struct {
  TdmCommunicator *c;
  int r, replicas;
  size_t n, offset, count;
  const float *init;           /* this replica's values */
  float *dev;
  float *after_allreduce, *after_buckets, *after_reduce, *after_broadcast;
  double sums[2];
  GError *error;
  gint finished;               /* set when the job's thread is done */
} PeerJob;

static gpointer
peer_worker(gpointer data)
{
  PeerJob *j = data;
  TdmCommunicator *c = j->c;
  TdmBackend *b = c->backends[j->r];
  const TdmCommunicatorOps *o = c->ops;
  size_t bytes = j->n * sizeof(float);
  int root_reduce = 1 % j->replicas, root_bcast = j->replicas - 1;

  tdm_backend_upload(b, j->dev, j->init, bytes);
  if (!o->allreduce(c, j->r, j->dev, j->offset, j->count, &j->error) ||
      !o->wait(c, j->r, &j->error))
    return NULL;
  j->after_allreduce = back(b, j->dev, bytes);

  /* Two buckets in flight before one wait, as backward issues them. */
  tdm_backend_upload(b, j->dev, j->init, bytes);
  size_t half = j->n / 2;
  if (!o->allreduce(c, j->r, j->dev, half, j->n - half, &j->error) ||
      !o->allreduce(c, j->r, j->dev, 0, half, &j->error) || !o->wait(c, j->r, &j->error))
    return NULL;
  j->after_buckets = back(b, j->dev, bytes);

  tdm_backend_upload(b, j->dev, j->init, bytes);
  if (!o->reduce(c, j->r, j->dev, j->n, root_reduce, &j->error) ||
      !o->wait(c, j->r, &j->error))
    return NULL;
  j->after_reduce = back(b, j->dev, bytes);

  tdm_backend_upload(b, j->dev, j->init, bytes);
  if (!o->broadcast(c, j->r, j->dev, j->n, root_bcast, &j->error) ||
      !o->wait(c, j->r, &j->error))
    return NULL;
  j->after_broadcast = back(b, j->dev, bytes);

  j->sums[0] = j->r;
  j->sums[1] = 0.5;
  o->sum_doubles(c, j->r, j->sums, 2, &j->error);
  return NULL;
}

static void
comm_case(const char *kind, int replicas, size_t n, gboolean staging)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *backends[4];
  for (int r = 0; r < replicas; r++) {
    backends[r] = tdm_backend_cuda_new(0, TDM_PRECISION_FP32, &error);
    g_assert_no_error(error);
  }
  if (staging)
    g_setenv("TDM_PEER_STAGING", "1", TRUE);
  TdmCommunicator *c = NULL;
  if (g_str_equal(kind, "peer"))
    c = tdm_communicator_peer_new(backends, replicas, &error);
#if TDM_HAVE_NCCL
  else
    c = tdm_communicator_nccl_new(backends, replicas, &error);
#endif
  g_unsetenv("TDM_PEER_STAGING");
  g_assert_no_error(error);
  g_assert_cmpstr(c->kind, ==, kind);

  PeerJob jobs[4];
  float *init[4];
  GThread *threads[4];
  for (int r = 0; r < replicas; r++) {
    init[r] = random_floats(n, -1, 1);
    jobs[r] = (PeerJob){.c = c, .r = r, .replicas = replicas, .n = n, .offset = 5,
                        .count = n - 17, .init = init[r]};
    jobs[r].dev = on(backends[r], NULL, n * sizeof(float));
  }
  for (int r = 0; r < replicas; r++)
    threads[r] = g_thread_new("replica", peer_worker, &jobs[r]);
  for (int r = 0; r < replicas; r++)
    g_thread_join(threads[r]);
  for (int r = 0; r < replicas; r++)
    if (jobs[r].error != NULL)
      g_error("replica %d: %s", r, jobs[r].error->message);

  g_autofree float *sum = g_new(float, n);
  for (size_t i = 0; i < n; i++) {
    double s = 0.0;
    for (int r = 0; r < replicas; r++)
      s += init[r][i];
    sum[i] = (float)s;
  }
  int root_reduce = 1 % replicas, root_bcast = replicas - 1;
  for (int r = 0; r < replicas; r++) {
    PeerJob *j = &jobs[r];
    /* allreduce: the range summed, the rest untouched. */
    for (size_t i = 0; i < n; i++) {
      gboolean inside = i >= j->offset && i < j->offset + j->count;
      float want = inside ? sum[i] : init[r][i];
      if (fabsf(j->after_allreduce[i] - want) > 1e-6f * (1 + fabsf(want)))
        g_error("allreduce, %d replicas, replica %d, element %zu: %g, expected %g",
                replicas, r, i, j->after_allreduce[i], want);
    }
    g_assert_cmpfloat(rel_error(j->after_buckets, sum, n), <=, 1e-6);
    if (r == root_reduce)
      g_assert_cmpfloat(rel_error(j->after_reduce, sum, n), <=, 1e-6);
    else
      g_assert_cmpmem(j->after_reduce, n * 4, init[r], n * 4);
    g_assert_cmpmem(j->after_broadcast, n * 4, init[root_bcast], n * 4);
    g_assert_cmpfloat(j->sums[0], ==, replicas * (replicas - 1) / 2.0);
    g_assert_cmpfloat(j->sums[1], ==, 0.5 * replicas);
    g_free(j->after_allreduce);
    g_free(j->after_buckets);
    g_free(j->after_reduce);
    g_free(j->after_broadcast);
    tdm_backend_release(backends[r], j->dev);
    g_free(init[r]);
  }
  tdm_communicator_free(c);
  /* The communicator gave back its staging: each backend holds its workspace alone. */
  for (int r = 0; r < replicas; r++) {
    assert_ok(backends[r]);
    g_assert_cmpuint(backends[r]->bytes_in_use, ==, gpu_base_bytes);
    tdm_backend_free(backends[r]);
  }
}

static void
test_peer(void)
{
  if (!have_gpu())
    return;
  comm_case("peer", 2, 100003, FALSE);
  comm_case("peer", 3, 100003, FALSE);
  comm_case("peer", 3, 3000017, TRUE);  /* more than one staging piece */
  comm_case("peer", 2, 999, TRUE);
  comm_case("peer", 1, 1000, FALSE);
}

/* One GPU can only show NCCL's plumbing: one rank, and the refusal of two replicas
 * on one GPU. Several GPUs are test-cuda-train's. */
static void
test_nccl(void)
{
  if (!have_gpu())
    return;
#if TDM_HAVE_NCCL
  comm_case("nccl", 1, 100003, FALSE);
  g_autoptr(GError) error = NULL;
  TdmBackend *backends[2];
  for (int r = 0; r < 2; r++)
    backends[r] = tdm_backend_cuda_new(0, TDM_PRECISION_FP32, &error);
  g_assert_no_error(error);
  g_assert_null(tdm_communicator_nccl_new(backends, 2, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION);
  g_test_message("%s", error->message);
  for (int r = 0; r < 2; r++)
    tdm_backend_free(backends[r]);
#else
  g_test_skip("built without NCCL");
#endif
}

/* Abort: a replica that never arrives must not hang the others. */
static gpointer
abort_worker(gpointer data)
{
  PeerJob *j = data;
  j->c->ops->allreduce(j->c, j->r, j->dev, 0, j->n, &j->error);
  g_atomic_int_set(&j->finished, 1);
  return NULL;
}

static void
test_peer_abort(void)
{
  if (!have_gpu())
    return;
  g_autoptr(GError) error = NULL;
  TdmBackend *backends[2];
  for (int r = 0; r < 2; r++)
    backends[r] = tdm_backend_cuda_new(0, TDM_PRECISION_FP32, &error);
  g_assert_no_error(error);
  TdmCommunicator *c = tdm_communicator_peer_new(backends, 2, &error);
  g_assert_no_error(error);
  PeerJob job = {.c = c, .r = 0, .n = 64};
  job.dev = on(backends[0], NULL, 64 * 4);
  GThread *t = g_thread_new("replica", abort_worker, &job);
  /* Aborted while it waits for the other replica, not before it gets there; a replica
   * that failed on its own instead ends the loop and fails the count. */
  while (tdm_communicator_peer_waiting(c) < 1 && !g_atomic_int_get(&job.finished))
    g_thread_yield();
  g_assert_cmpint(tdm_communicator_peer_waiting(c), ==, 1);
  tdm_communicator_abort(c);
  g_thread_join(t);
  g_assert_error(job.error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION);
  g_clear_error(&job.error);
  tdm_backend_release(backends[0], job.dev);
  tdm_communicator_free(c);
  for (int r = 0; r < 2; r++)
    tdm_backend_free(backends[r]);
}


void
test_cuda_add_machinery(void)
{
  g_test_add_func("/cuda/graph", test_graph);
  g_test_add_func("/cuda/graph-misuse", test_graph_misuse);
  g_test_add_func("/cuda/upload-ring", test_upload_ring);
  g_test_add_func("/cuda/alloc", test_alloc);
  g_test_add_func("/cuda/peer", test_peer);
  g_test_add_func("/cuda/peer-abort", test_peer_abort);
  g_test_add_func("/cuda/nccl", test_nccl);
}

#endif /* TDM_HAVE_CUDA */
