/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-front.c — the backends' front door (tdm-backend.h, tdm-backend-calls*.c):
 * every backend's table is complete; a bad argument to any operation becomes the
 * backend's sticky error naming that operation, before the backend sees it, and leaves
 * the output alone; every operation is counted, and after a failure none runs; an
 * operation a backend lacks either says so or issues what it stands for, with the same
 * bits. On the CPU backend, which has every required slot; the CUDA backend's table is
 * checked the same way in tests/gpu. */
#include "test-backend-cpu.h"
#include "tdm-backend-ops.h"

static void
test_tables_complete(void)
{
  TdmBackend *b = new_backend();
  g_assert_null(tdm_backend_ops_missing(b->ops));
  /* Copy the table, take one required slot out: named. */
  TdmBackendOps broken = *b->ops;
  broken.bn_forward = NULL;
  g_assert_cmpstr(tdm_backend_ops_missing(&broken), ==, "bn_forward");
  broken = *b->ops;
  broken.destroy = NULL;
  g_assert_cmpstr(tdm_backend_ops_missing(&broken), ==, "destroy");
  free_backend(b);

  g_autoptr(GError) error = NULL;
  b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_FP32, &error);
  g_assert_no_error(error);
  g_assert_null(tdm_backend_ops_missing(b->ops));
  free_backend(b);
}

/* One bad call: it fails, naming `op` and `detail`, writes nothing to out (of n
 * floats, all 7 before), and a second failure afterwards does not replace it. */
typedef void (*BadCall)(TdmBackend *b, float *out);

static void
expect_refused(BadCall call, const char *op, const char *detail)
{
  TdmBackend *b = new_backend();
  const size_t n = 64;
  float *out = dev_floats(b, n);
  for (size_t i = 0; i < n; i++)
    out[i] = 7.0f;
  guint64 before = b->operations;
  call(b, out);
  g_assert_cmpuint(b->operations, ==, before + 1);
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_BACKEND);
  if (strstr(error->message, op) == NULL || strstr(error->message, detail) == NULL)
    g_error("“%s” does not name %s and %s", error->message, op, detail);
  for (size_t i = 0; i < n; i++)
    g_assert_cmpfloat(out[i], ==, 7.0f);

  /* After the failure, a good operation does nothing, and the first failure stays. */
  tdm_backend_zero(b, out, n * sizeof(float));
  g_assert_cmpfloat(out[0], ==, 7.0f);
  g_clear_error(&error);
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_nonnull(strstr(error->message, op));
  tdm_backend_release(b, out);
  g_assert_cmpuint(b->bytes_in_use, ==, 0);
  tdm_backend_free(b);
}

static void
bad_gemm(TdmBackend *b, float *out)
{
  tdm_backend_gemm(b, false, false, 2, 2, 3, 1.0f, out, 2, out, 2, 0.0f, out, 2);
}

static void
bad_bias(TdmBackend *b, float *out)
{
  tdm_backend_bias_forward(b, out, out, 2, -3, 1, false);
}

static void
bad_im2col(TdmBackend *b, float *out)
{
  tdm_backend_im2col(b, out, out, 1, 2, 2, 1, 3, 3, 0, 1); /* kernel larger than the image */
}

static void
bad_col2im(TdmBackend *b, float *out)
{
  tdm_backend_col2im(b, out, out, 1, 4, 4, 1, 3, 3, 1, 0); /* stride 0 */
}

static void
bad_conv_pool(TdmBackend *b, float *out)
{
  tdm_backend_conv_pool_forward(b, out, (int32_t *)out, out, out, out, true, 1, 4, 4, 8, 4, 3,
                                3, 1, 2); /* 72 taps */
}

static void
bad_whole_conv(TdmBackend *b, float *out)
{
  tdm_backend_conv_forward(b, out, out, out, out, 1, 4, 4, 8, 0, 3, 1, 1); /* no outputs */
}

static void
bad_maxpool(TdmBackend *b, float *out)
{
  tdm_backend_maxpool_forward(b, out, (int32_t *)out, out, NULL, false, 1, 4, 4, 1, 0);
}

static void
bad_softmax(TdmBackend *b, float *out)
{
  int32_t label = 0;
  TdmMetrics m = {0, 0};
  tdm_backend_softmax_xent(b, out, &label, 1, 4, 1.5f, 1.0f, out, &m);
}

static void
bad_gather_augment(TdmBackend *b, float *out)
{
  uint8_t image[4] = {0};
  int32_t index = 0;
  tdm_backend_gather_augment(b, out, NULL, image, image, &index, 1, 2, 2, 1, 1.0f, 1, 3, 0,
                             0); /* no flip mode 3 */
}

static void
bad_affine(TdmBackend *b, float *out)
{
  TdmChannelAffine a = {.channels = 5};
  tdm_backend_channel_affine(b, out, 1, a);
}

static void
bad_bn(TdmBackend *b, float *out)
{
  tdm_backend_bn_forward(b, out, out, TDM_DTYPE_F32, out, out, out, out, 4, 0, false);
}

static void
bad_bn_slot(TdmBackend *b, float *out)
{
  tdm_backend_bn_moments(b, out, out, TDM_DTYPE_F32, 1, 1, 2, 2);
}

static void
bad_avgpool(TdmBackend *b, float *out)
{
  tdm_backend_avgpool_forward(b, out, out, 1, 2, 2, 1, 3); /* window larger than the image */
}

static void
bad_pool2d(TdmBackend *b, float *out)
{
  TdmPool2d g = {1, 4, 4, 1, 3, 2, 1, 3, 3}; /* the floor gives 2×2 */
  tdm_backend_maxpool2d_forward(b, out, TDM_DTYPE_F32, (int32_t *)out, out, TDM_DTYPE_F32, g);
}

static void
bad_global(TdmBackend *b, float *out)
{
  tdm_backend_global_avgpool_forward(b, out, out, 1, 0, 4);
}

static void
bad_dropout(TdmBackend *b, float *out)
{
  int32_t index = 0;
  tdm_backend_dropout_forward(b, out, out, &index, 1, 4, 1.0f, 0, 0);
}

static void
bad_deviation(TdmBackend *b, float *out)
{
  /* A type that is neither float32 nor bf16. */
  tdm_backend_deviation(b, (double *)out, out, out, (TdmDtype)7, 4);
}

static void
missing_maxpool_bn(TdmBackend *b, float *out)
{
  tdm_backend_maxpool_forward_bn(b, out, (int32_t *)out, out, out, out, out, out, false, 1, 2,
                                 2, 1, 2);
}

static void
test_refused(void)
{
  expect_refused(bad_gemm, "gemm", "lda");
  expect_refused(bad_bias, "bias_forward", "-3");
  expect_refused(bad_im2col, "im2col", "kernel 3×3");
  expect_refused(bad_col2im, "col2im", "stride 0");
  expect_refused(bad_conv_pool, "conv_pool_forward", "taps");
  expect_refused(bad_whole_conv, "conv_forward", "0 output channels");
  expect_refused(bad_maxpool, "maxpool_forward", "k=0");
  expect_refused(bad_softmax, "softmax_xent", "1.5");
  expect_refused(bad_gather_augment, "gather_augment", "pad 1");
  expect_refused(bad_affine, "channel_affine", "5");
  expect_refused(bad_bn, "bn_forward", "4×0");
  expect_refused(bad_bn_slot, "bn_moments", "slot 2 of 2");
  expect_refused(bad_avgpool, "avgpool_forward", "k=3");
  expect_refused(bad_pool2d, "maxpool2d_forward", "→ 3×3");
  expect_refused(bad_global, "global_avgpool_forward", "1×0×4");
  expect_refused(bad_dropout, "dropout_forward", "rate 1");
  expect_refused(bad_deviation, "deviation", "type 7");
  /* The CPU has no one-pass pool of a bn's output: the call says so. */
  expect_refused(missing_maxpool_bn, "maxpool_forward_bn", "not an operation");
}

/* Calls that have nothing to do are counted and do nothing: an empty GEMM leaves C. */
static void
test_empty(void)
{
  TdmBackend *b = new_backend();
  float c[4] = {3, 3, 3, 3};
  guint64 before = b->operations;
  tdm_backend_gemm(b, false, false, 0, 2, 2, 1.0f, c, 2, c, 2, 0.0f, c, 2);
  tdm_backend_copy(b, c, c, sizeof c);
  tdm_backend_zero(b, c, 0);
  g_assert_cmpuint(b->operations, ==, before + 3);
  g_assert_cmpfloat(c[0], ==, 3.0f);
  /* Synchronizing issues nothing. */
  tdm_backend_synchronize(b);
  g_assert_cmpuint(b->operations, ==, before + 3);
  free_backend(b);
}

/* add_out on a backend without the one pass: the copy, add and ReLU it stands for,
 * their bits, for y a third buffer and y the second operand. */
static void
test_add_out_composed(void)
{
  TdmBackend *b = new_backend();
  g_assert_null(b->ops->add_out);
  const size_t n = 333;
  float *a = dev_floats(b, n), *x = dev_floats(b, n), *y = dev_floats(b, n);
  float *ref = dev_floats(b, n);
  fill_random(a, n, -1, 1);
  fill_random(x, n, -1, 1);
  for (int relu = 0; relu < 2; relu++) {
    tdm_backend_copy(b, ref, a, n * sizeof(float));
    tdm_backend_add(b, ref, x, n);
    if (relu)
      tdm_backend_relu_forward(b, ref, ref, n);
    poison(y, n);
    guint64 before = b->operations;
    tdm_backend_add_out(b, y, a, x, n, relu);
    g_assert_cmpuint(b->operations, ==, before + 2 + relu);
    g_assert_cmpmem(y, n * sizeof(float), ref, n * sizeof(float));
    float *x2 = dev_floats(b, n);
    tdm_backend_copy(b, x2, x, n * sizeof(float));
    tdm_backend_add_out(b, x2, a, x2, n, relu);
    g_assert_cmpmem(x2, n * sizeof(float), ref, n * sizeof(float));
    tdm_backend_release(b, x2);
  }
  g_assert_true(tdm_backend_check(b, NULL));
  tdm_backend_release(b, a);
  tdm_backend_release(b, x);
  tdm_backend_release(b, y);
  tdm_backend_release(b, ref);
  free_backend(b);
}

/* A backend without graphs: begin and launch say no, end does nothing, nothing fails. */
static void
test_no_graphs(void)
{
  TdmBackend *b = new_backend();
  g_assert_false(tdm_backend_has_graphs(b));
  g_assert_false(tdm_backend_graph_begin(b, 1));
  tdm_backend_graph_end(b, 1);
  g_assert_false(tdm_backend_graph_launch(b, 1));
  g_assert_false(tdm_backend_has_exact_add(b));
  free_backend(b);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/backend-front/tables-complete", test_tables_complete);
  g_test_add_func("/backend-front/refused", test_refused);
  g_test_add_func("/backend-front/empty", test_empty);
  g_test_add_func("/backend-front/add-out-composed", test_add_out_composed);
  g_test_add_func("/backend-front/no-graphs", test_no_graphs);
  return g_test_run();
}
