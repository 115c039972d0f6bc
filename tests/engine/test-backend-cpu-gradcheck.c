/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu-gradcheck.c — the CPU backend's layers (Linear, Conv2d, MaxPool,
 * ReLU, softmax cross-entropy) against central differences; part of test-backend-cpu,
 * which registers these with the operation tests. */
#include "test-backend-cpu.h"

/* Gradient checks. Each layer's loss is L = Σ y · r for a fixed random r, so dL/dy = r
 * and the backward pass under test must give dL/d(input) and dL/d(parameters). */

typedef double (*LossFunc)(gpointer data);

/* Central differences with the step actually taken in float, not the nominal h. */
static double *
numeric_grad(LossFunc loss, gpointer data, float *param, size_t n)
{
  double *grad = g_new(double, n);
  for (size_t i = 0; i < n; i++) {
    const float saved = param[i];
    const float up = saved + (float)GRAD_H, down = saved - (float)GRAD_H;
    param[i] = up;
    const double lp = loss(data);
    param[i] = down;
    const double lm = loss(data);
    param[i] = saved;
    grad[i] = (lp - lm) / ((double)up - down);
  }
  return grad;
}

#define assert_grad(analytic, loss, data, param, n)                                     \
  G_STMT_START {                                                                        \
    double *numeric_ = numeric_grad((loss), (data), (param), (n));                      \
    assert_rel((analytic), numeric_, (n), GRAD_TOL);                                    \
    g_free(numeric_);                                                                   \
  } G_STMT_END

static double
dot(const float *y, const float *r, size_t n)
{
  double s = 0.0;
  for (size_t i = 0; i < n; i++)
    s += (double)y[i] * r[i];
  return s;
}

typedef struct {
  TdmBackend *b;
  int batch, in, out;
  float *x, *w, *bias, *y, *r;
} Linear;

static double
linear_loss(gpointer data)
{
  Linear *l = data;
  tdm_backend_gemm(l->b, false, true, l->batch, l->out, l->in, 1.0f, l->x, l->in, l->w, l->in,
                   0.0f, l->y, l->out);
  tdm_backend_bias_forward(l->b, l->y, l->bias, l->batch, l->out, 1, false);
  return dot(l->y, l->r, (size_t)l->batch * l->out);
}

static void
test_gradcheck_linear(void)
{
  TdmBackend *b = new_backend();
  Linear l = { .b = b, .batch = 4, .in = 7, .out = 5 };
  const size_t xn = (size_t)l.batch * l.in, wn = (size_t)l.out * l.in;
  const size_t yn = (size_t)l.batch * l.out;
  l.x = dev_floats(b, xn);
  l.w = dev_floats(b, wn);
  l.bias = dev_floats(b, l.out);
  l.y = dev_floats(b, yn);
  l.r = dev_floats(b, yn);
  fill_random(l.x, xn, -1, 1);
  fill_random(l.w, wn, -1, 1);
  fill_random(l.bias, l.out, -1, 1);
  fill_random(l.r, yn, -1, 1);
  float *dx = dev_floats(b, xn), *dw = dev_floats(b, wn), *db = dev_floats(b, l.out);
  poison(dx, xn);
  poison(dw, wn);
  poison(db, l.out);

  const float *dy = l.r;
  tdm_backend_gemm(b, true, false, l.out, l.in, l.batch, 1.0f, dy, l.out, l.x, l.in, 0.0f, dw,
                   l.in);
  tdm_backend_bias_backward(b, db, dy, l.batch, l.out, 1);
  tdm_backend_gemm(b, false, false, l.batch, l.in, l.out, 1.0f, dy, l.out, l.w, l.in, 0.0f, dx,
                   l.in);
  assert_written(dx, xn);
  assert_written(dw, wn);
  assert_written(db, l.out);

  assert_grad(dx, linear_loss, &l, l.x, xn);
  assert_grad(dw, linear_loss, &l, l.w, wn);
  assert_grad(db, linear_loss, &l, l.bias, l.out);
  g_assert_true(tdm_backend_check(b, NULL));

  for (float **p = (float *[]){ l.x, l.w, l.bias, l.y, l.r, dx, dw, db, NULL }; *p; p++)
    tdm_backend_release(b, *p);
  free_backend(b);
}

typedef struct {
  TdmBackend *b;
  ConvShape s;
  int oh, ow, cout;
  size_t rows, cols, xn;
  float *x, *w, *bias, *col, *y, *r;
} Conv;

static double
conv_loss(gpointer data)
{
  Conv *cv = data;
  TdmBackend *b = cv->b;
  const ConvShape *s = &cv->s;
  tdm_backend_im2col(b, cv->col, cv->x, s->n, s->h, s->w, s->c, s->kh, s->kw, s->pad, 1);
  tdm_backend_gemm(b, false, true, cv->rows, cv->cout, cv->cols, 1.0f, cv->col, cv->cols, cv->w,
                   cv->cols, 0.0f, cv->y, cv->cout);
  tdm_backend_bias_forward(b, cv->y, cv->bias, cv->rows, cv->cout, 1, false);
  return dot(cv->y, cv->r, cv->rows * cv->cout);
}

static void
gradcheck_conv(const ConvShape *shape, int cout)
{
  TdmBackend *b = new_backend();
  Conv cv = { .b = b, .s = *shape, .cout = cout };
  conv_dims(shape, &cv.oh, &cv.ow, &cv.rows, &cv.cols, &cv.xn);
  const size_t wn = cout * cv.cols, yn = cv.rows * cout;
  cv.x = dev_floats(b, cv.xn);
  cv.w = dev_floats(b, wn);
  cv.bias = dev_floats(b, cout);
  cv.col = dev_floats(b, cv.rows * cv.cols);
  cv.y = dev_floats(b, yn);
  cv.r = dev_floats(b, yn);
  fill_random(cv.x, cv.xn, -1, 1);
  fill_random(cv.w, wn, -1, 1);
  fill_random(cv.bias, cout, -1, 1);
  fill_random(cv.r, yn, -1, 1);
  float *dx = dev_floats(b, cv.xn), *dw = dev_floats(b, wn), *db = dev_floats(b, cout);
  float *dcol = dev_floats(b, cv.rows * cv.cols);
  poison(dx, cv.xn);
  poison(dw, wn);
  poison(db, cout);

  conv_loss(&cv);  /* fills col */
  const float *dy = cv.r;
  tdm_backend_gemm(b, true, false, cout, cv.cols, cv.rows, 1.0f, dy, cout, cv.col, cv.cols,
                   0.0f, dw, cv.cols);
  tdm_backend_bias_backward(b, db, dy, cv.rows, cout, 1);
  tdm_backend_gemm(b, false, false, cv.rows, cv.cols, cout, 1.0f, dy, cout, cv.w, cv.cols, 0.0f,
                   dcol, cv.cols);
  tdm_backend_col2im(b, dx, dcol, shape->n, shape->h, shape->w, shape->c, shape->kh, shape->kw,
                     shape->pad, 1);
  assert_written(dx, cv.xn);
  assert_written(dw, wn);
  assert_written(db, cout);

  assert_grad(dx, conv_loss, &cv, cv.x, cv.xn);
  assert_grad(dw, conv_loss, &cv, cv.w, wn);
  assert_grad(db, conv_loss, &cv, cv.bias, cout);
  g_assert_true(tdm_backend_check(b, NULL));

  for (float **p = (float *[]){ cv.x, cv.w, cv.bias, cv.col, cv.y, cv.r, dx, dw, db, dcol,
                                NULL };
       *p; p++)
    tdm_backend_release(b, *p);
  free_backend(b);
}

static void
test_gradcheck_conv(void)
{
  gradcheck_conv(&(ConvShape){ 2, 5, 6, 3, 3, 3, 1 }, 4);
  gradcheck_conv(&(ConvShape){ 1, 6, 5, 2, 2, 3, 0 }, 3);
}

/* Inputs for ops with kinks (max, ReLU): values at least 5·h apart from each other
 * or from zero, so no central difference straddles a kink. */
static void
fill_distinct(float *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (float)(((double)i + 0.5) * 5 * GRAD_H - n * 2.5 * GRAD_H);
  for (size_t i = n; i > 1; i--) {
    const size_t j = g_test_rand_int_range(0, i);
    const float t = p[i - 1];
    p[i - 1] = p[j];
    p[j] = t;
  }
}

typedef struct {
  TdmBackend *b;
  int n, h, w, c, k;
  size_t xn, yn;
  float *x, *y, *r, *bias;     /* bias NULL: a plain pool; else bias and ReLU folded in */
  int32_t *arg;
} Pool;

static double
pool_loss(gpointer data)
{
  Pool *p = data;
  tdm_backend_maxpool_forward(p->b, p->y, p->arg, p->x, p->bias, p->bias != NULL, p->n, p->h,
                              p->w, p->c, p->k);
  return dot(p->y, p->r, p->yn);
}

static void
gradcheck_maxpool(gboolean fold)
{
  TdmBackend *b = new_backend();
  Pool p = { .b = b, .n = 2, .h = 7, .w = 5, .c = 3, .k = 2 };
  p.xn = (size_t)p.n * p.h * p.w * p.c;
  p.yn = (size_t)p.n * (p.h / p.k) * (p.w / p.k) * p.c;
  p.x = dev_floats(b, p.xn);
  p.y = dev_floats(b, p.yn);
  p.r = dev_floats(b, p.yn);
  p.arg = dev_alloc(b, p.yn * sizeof(int32_t));
  float *dx = dev_floats(b, p.xn);
  fill_distinct(p.x, p.xn);
  fill_random(p.r, p.yn, -1, 1);
  if (fold) {
    /* Multiples of the inputs' spacing keep x + bias off the ReLU's kink. */
    p.bias = dev_floats(b, p.c);
    for (int ch = 0; ch < p.c; ch++)
      p.bias[ch] = (float)(5 * GRAD_H * (ch - 1) * 3);
  }

  pool_loss(&p);
  poison(dx, p.xn);
  float *db = dev_floats(b, p.c);
  poison(db, p.c);
  tdm_backend_maxpool_backward(b, dx, fold ? db : NULL, p.r, p.arg, fold ? p.y : NULL, p.n, p.h,
                               p.w, p.c, p.k);
  assert_written(dx, p.xn);
  assert_grad(dx, pool_loss, &p, p.x, p.xn);
  if (fold)
    assert_grad(db, pool_loss, &p, p.bias, p.c);
  g_assert_true(tdm_backend_check(b, NULL));
  tdm_backend_release(b, db);

  tdm_backend_release(b, p.x);
  tdm_backend_release(b, p.y);
  tdm_backend_release(b, p.r);
  tdm_backend_release(b, p.arg);
  tdm_backend_release(b, p.bias);
  tdm_backend_release(b, dx);
  free_backend(b);
}

static void
test_gradcheck_maxpool(void)
{
  gradcheck_maxpool(FALSE);
  gradcheck_maxpool(TRUE);
}

typedef struct {
  TdmBackend *b;
  size_t n;
  float *x, *y, *r;
} Relu;

static double
relu_loss(gpointer data)
{
  Relu *l = data;
  tdm_backend_relu_forward(l->b, l->y, l->x, l->n);
  return dot(l->y, l->r, l->n);
}

typedef struct {
  TdmBackend *b;
  int outer, channels;
  float *x, *bias, *y, *r;
} BiasRelu;

static double
bias_relu_loss(gpointer data)
{
  BiasRelu *l = data;
  const size_t n = (size_t)l->outer * l->channels;
  memcpy(l->y, l->x, n * sizeof(float));
  tdm_backend_bias_forward(l->b, l->y, l->bias, l->outer, l->channels, 1, true);
  return dot(l->y, l->r, n);
}

static void
test_gradcheck_relu(void)
{
  TdmBackend *b = new_backend();
  Relu l = { .b = b, .n = 200 };
  l.x = dev_floats(b, l.n);
  l.y = dev_floats(b, l.n);
  l.r = dev_floats(b, l.n);
  float *dx = dev_floats(b, l.n);
  fill_distinct(l.x, l.n);
  fill_random(l.r, l.n, -1, 1);
  relu_loss(&l);
  poison(dx, l.n);
  tdm_backend_relu_backward(b, dx, l.r, l.y, l.n);
  assert_written(dx, l.n);
  assert_grad(dx, relu_loss, &l, l.x, l.n);

  /* The fused bias + ReLU of bias_forward, differentiated through relu_backward and
   * bias_backward. Zero bias keeps x's distance from the kink. */
  BiasRelu f = { .b = b, .outer = 8, .channels = 25, .x = l.x, .r = l.r };
  f.bias = dev_floats(b, f.channels);
  f.y = dev_floats(b, l.n);
  float *dbias = dev_floats(b, f.channels);
  tdm_backend_zero(b, f.bias, f.channels * sizeof(float));
  bias_relu_loss(&f);
  tdm_backend_relu_backward(b, dx, f.r, f.y, l.n);
  poison(dbias, f.channels);
  tdm_backend_bias_backward(b, dbias, dx, f.outer, f.channels, 1);
  assert_written(dbias, f.channels);
  assert_grad(dx, bias_relu_loss, &f, f.x, l.n);
  assert_grad(dbias, bias_relu_loss, &f, f.bias, f.channels);
  g_assert_true(tdm_backend_check(b, NULL));

  tdm_backend_release(b, l.x);
  tdm_backend_release(b, l.y);
  tdm_backend_release(b, l.r);
  tdm_backend_release(b, dx);
  tdm_backend_release(b, f.bias);
  tdm_backend_release(b, f.y);
  tdm_backend_release(b, dbias);
  free_backend(b);
}

typedef struct {
  TdmBackend *b;
  int rows, classes;
  float *z;
  int32_t *labels;
} Xent;

static double
xent_loss(gpointer data)
{
  Xent *x = data;
  TdmMetrics m = { 0, 0 };
  tdm_backend_softmax_xent(x->b, x->z, x->labels, x->rows, x->classes, 0.0f, 1.0f, NULL, &m);
  return m.loss_sum / x->rows;
}

static void
test_gradcheck_softmax_xent(void)
{
  TdmBackend *b = new_backend();
  Xent x = { .b = b, .rows = 6, .classes = 10 };
  const size_t n = (size_t)x.rows * x.classes;
  x.z = dev_floats(b, n);
  x.labels = dev_alloc(b, x.rows * sizeof(int32_t));
  float *d = dev_floats(b, n);
  TdmMetrics *m = dev_alloc(b, sizeof(TdmMetrics));
  fill_random(x.z, n, -3, 3);
  for (int r = 0; r < x.rows; r++)
    x.labels[r] = g_test_rand_int_range(0, x.classes);
  *m = (TdmMetrics){ 0, 0 };
  poison(d, n);
  tdm_backend_softmax_xent(b, x.z, x.labels, x.rows, x.classes, 0.0f, 1.0f / x.rows, d, m);
  assert_written(d, n);
  assert_grad(d, xent_loss, &x, x.z, n);
  g_assert_true(tdm_backend_check(b, NULL));

  tdm_backend_release(b, x.z);
  tdm_backend_release(b, x.labels);
  tdm_backend_release(b, d);
  tdm_backend_release(b, m);
  free_backend(b);
}


void
test_backend_cpu_add_gradchecks(void)
{
  g_test_add_func("/backend-cpu/gradcheck/linear", test_gradcheck_linear);
  g_test_add_func("/backend-cpu/gradcheck/conv2d", test_gradcheck_conv);
  g_test_add_func("/backend-cpu/gradcheck/maxpool", test_gradcheck_maxpool);
  g_test_add_func("/backend-cpu/gradcheck/relu", test_gradcheck_relu);
  g_test_add_func("/backend-cpu/gradcheck/softmax-xent", test_gradcheck_softmax_xent);
}
