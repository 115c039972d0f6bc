/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-network.c — network specs: parsing, shapes, parameter layout, errors, and the
 * seeded initialization. */
#include "tdm-network.h"
#include "tdm-error.h"

#include <math.h>
#include <string.h>

static void
test_mlp_layout(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new("mlp", 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  /* relu is fused into the fc before it: three layers remain. */
  g_assert_cmpint(net->layer_count, ==, 3);
  g_assert_true(net->layers[0].fused_relu);
  g_assert_true(net->layers[1].fused_relu);
  g_assert_false(net->layers[2].fused_relu);
  size_t expected = 784 * 1000 + 1000 + 1000 * 1000 + 1000 + 1000 * 10 + 10;
  g_assert_cmpuint(net->parameter_count, ==, expected);
  /* Weights then bias, layer after layer, with no gaps. */
  size_t offset = 0;
  for (int i = 0; i < net->layer_count; i++) {
    g_assert_cmpuint(net->layers[i].weight_offset, ==, offset);
    offset += net->layers[i].weight_count;
    g_assert_cmpuint(net->layers[i].bias_offset, ==, offset);
    offset += net->layers[i].bias_count;
  }
  g_assert_cmpuint(offset, ==, expected);
  g_assert_cmpstr(net->spec, ==, "fc1000,relu,fc1000,relu,fc10");
  g_assert_cmpstr(net->layers[0].name, ==, "fc1");
  g_assert_cmpstr(net->layers[2].name, ==, "fc3");
  g_assert_cmpfloat(tdm_network_forward_flops(net), ==, 2.0 * (784 * 1000 + 1000 * 1000 + 10000));
}

static void
test_cnn_shapes(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new("cnn", 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_assert_cmpint(net->layer_count, ==, 6);
  const TdmLayer *conv1 = &net->layers[0], *pool1 = &net->layers[1];
  const TdmLayer *conv2 = &net->layers[2], *pool2 = &net->layers[3];
  const TdmLayer *fc1 = &net->layers[4];
  g_assert_cmpint(conv1->out_h, ==, 28);
  g_assert_cmpint(conv1->out_c, ==, 32);
  g_assert_cmpuint(conv1->weight_count, ==, 32 * 1 * 3 * 3);
  g_assert_cmpint(pool1->out_h, ==, 14);
  g_assert_cmpint(conv2->in_c, ==, 32);
  g_assert_cmpuint(conv2->weight_count, ==, 64 * 32 * 9);
  g_assert_cmpint(pool2->out_w, ==, 7);
  g_assert_cmpuint(fc1->weight_count, ==, 128 * 7 * 7 * 64);
  g_assert_cmpuint(net->max_activation, ==, 28 * 28 * 32);

  /* CIFAR-sized input: 32×32×3, odd pooling floors. */
  g_autoptr(TdmNetwork) odd = tdm_network_new("conv8k5,pool3,relu,flatten,fc10", 32, 32, 3, 10,
                                              &error);
  g_assert_no_error(error);
  g_assert_cmpint(odd->layers[0].out_h, ==, 28);
  g_assert_cmpint(odd->layers[1].out_h, ==, 9);
  g_assert_cmpint(odd->layers[2].kind, ==, TDM_LAYER_RELU); /* after a pool: not fused */
  g_assert_cmpint(odd->layers[3].out_c, ==, 9 * 9 * 8);
  g_assert_cmpstr(odd->spec, ==, "conv8k5p0,pool3,relu,flatten,fc10");
}

static void
expect_error(const char *spec, int classes, const char *fragment)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(spec, 28, 28, 1, classes, &error);
  g_assert_null(net);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC);
  if (strstr(error->message, fragment) == NULL)
    g_error("spec “%s”: message “%s” lacks “%s”", spec, error->message, fragment);
}

static void
test_errors(void)
{
  expect_error("", 10, "empty");
  expect_error("fc128,relu,fc10,softmax", 10, "layer 4 “softmax”: unknown layer");
  expect_error("fc,fc10", 10, "layer 1 “fc”");
  expect_error("conv32,fc10", 10, "kernel size");
  expect_error("conv32k3p3,fc10", 10, "padding 3 must be smaller");
  expect_error("conv32k3q1,fc10", 10, "unexpected");
  expect_error("pool1,fc10", 10, "window K of 2 or more");
  expect_error("pool64,fc10", 10, "does not fit");
  expect_error("conv4k15,conv4k15,fc10", 10, "does not fit");
  expect_error("fc128,relu", 10, "must end with fc10");
  expect_error("fc128,fc5", 10, "ends with fc5 but the dataset has 10 classes");
  expect_error("fc10,relu", 10, "without a relu");
  expect_error("fc99999999,fc10", 10, "fcN");
  expect_error("fc128,conv8k3,fc10", 10, "flat vector");
  /* The ResNet layers' errors: each names the item, its position and why. */
  expect_error("bn,conv8k3p1,fc10", 10, "layer 1 “bn”: bn before any layer");
  expect_error("conv8k3p1,res(conv8k3p1,bn,avg2,conv16k1,res(conv16k3p2)),fc10", 10,
               "layer 7 “res(”: the block turns its 14×14×16 input into 16×16×16");
  expect_error("conv8k3s8p1,conv8k3s8p1,fc10", 10, "layer 2 “conv8k3s8p1”: stride 8 is larger");
  expect_error("conv8k3s0,fc10", 10, "stride sS between 1 and 15");
  expect_error("conv8k3p1s2s2,fc10", 10, "one stride");
  expect_error("res(conv1k3p1,fc10", 10, "layer 1 “res(”: its “(” is not closed");
  expect_error("conv8k3p1),fc10", 10, "a “)” with no res( open");
  expect_error("res(),fc10", 10, "needs layers");
  expect_error("blk(fc3),fc10", 10, "unknown block");
  expect_error("fc10,,fc10", 10, "layer 2 “”: an empty item");
  expect_error("drop1.5,fc10", 10, "rate P in [0, 1)");
  expect_error("99*fc3,fc10", 10, "repeat count");
  expect_error("fc16,bn", 10, "must end with fc10");
  expect_error("avg1,fc10", 10, "avgK with a window K of 2");
  /* The scale and no-bias items of the ResNet-9-style preset. */
  expect_error("fc10,scale0", 10, "layer 2 “scale0”: expected scaleS");
  expect_error("fc10,scale", 10, "expected scaleS");
  expect_error("fc10,scaleinf", 10, "expected scaleS");
  expect_error("fc10,scale0x10", 10, "expected scaleS");
  expect_error("fc10,scale2,relu", 10, "then scaleS if wanted), without a relu");
  expect_error("fc10,scale2,fc3", 10, "ends with fc3");
  expect_error("fc10n,fc10", 10, "layer 1 “fc10n”: unexpected “n” at its end");
  expect_error("conv8k3p1nbb,fc10", 10, "nb, for no bias, is the only suffix");
}

static void
test_scale_and_no_bias(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net =
    tdm_network_new(" conv4k3p1nb, relu , gap,fc10nb,scale0.125 , scale-3 ", 6, 6, 1, 10,
                    &error);
  g_assert_no_error(error);
  g_assert_cmpstr(net->spec, ==, "conv4k3p1nb,relu,gap,fc10nb,scale0.125,scale-3");
  g_assert_cmpint(net->layer_count, ==, 5);
  g_assert_cmpuint(net->layers[0].bias_count, ==, 0);
  g_assert_cmpuint(net->layers[2].bias_count, ==, 0);
  g_assert_cmpuint(net->parameter_count, ==, 4 * 9 + 4 * 10);
  g_assert_cmpint(net->layers[3].kind, ==, TDM_LAYER_SCALE);
  g_assert_cmpfloat(net->layers[3].factor, ==, 0.125f);
  g_assert_cmpfloat(net->layers[4].factor, ==, -3.0f);
  g_assert_cmpint(net->layers[4].out_c, ==, 10);
  /* A factor that %g would round is written with enough digits to read back. */
  g_autoptr(TdmNetwork) odd = tdm_network_new("fc10,scale0.1234567", 2, 2, 1, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) again = tdm_network_new(odd->spec, 2, 2, 1, 10, &error);
  g_assert_no_error(error);
  g_assert_cmpfloat(again->layers[1].factor, ==, odd->layers[1].factor);
  g_assert_cmpfloat(odd->layers[1].factor, ==, 0.1234567f);
}

static void
test_resnet_preset(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new("resnet", 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(net->spec, ==, TDM_NETWORK_RESNET);
  /* The canonical spec parses to itself. */
  g_autoptr(TdmNetwork) again = tdm_network_new(net->spec, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(again->spec, ==, net->spec);
  g_assert_cmpuint(again->parameter_count, ==, net->parameter_count);

  /* Names as PyTorch's ResNets have them; the two blocks are one stage (no
   * projection starts a new one). */
  const char *names[] = {"conv1", "bn1", "conv2", "bn2", "layer1.0.conv1", "layer1.0.bn2",
                         "conv3", "conv4", "bn4", "layer1.1.conv2", "layer1.1.bn2", "fc"};
  for (gsize k = 0; k < G_N_ELEMENTS(names); k++) {
    gboolean found = FALSE;
    for (int i = 0; i < net->layer_count; i++)
      found |= g_str_equal(net->layers[i].name, names[k]);
    if (!found)
      g_error("no layer named %s", names[k]);
  }
  int blocks = 0, bns = 0, convs = 0, pools = 0;
  size_t offset = 0;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->kind == TDM_LAYER_RES_END) {
      blocks++;
      g_assert_false(l->projection);
      g_assert_cmpint(net->layers[l->partner].partner, ==, i);
    }
    bns += l->kind == TDM_LAYER_BN;
    pools += l->kind == TDM_LAYER_POOL;
    /* Convs before bn have no bias; every conv is 3×3, stride 1, with its ReLU. */
    if (l->kind == TDM_LAYER_CONV) {
      convs++;
      g_assert_cmpuint(l->bias_count, ==, 0);
      g_assert_cmpint(l->kernel, ==, 3);
      g_assert_cmpint(l->stride, ==, 1);
      g_assert_true(net->layers[i + 1].fused_relu);
    }
    if (l->param_count > 0) {
      g_assert_cmpuint(l->param_offset, ==, offset);
      offset += l->param_count;
    }
  }
  g_assert_cmpuint(offset, ==, net->parameter_count);
  g_assert_cmpint(blocks, ==, 2);
  g_assert_cmpint(convs, ==, 8);
  g_assert_cmpint(pools, ==, 3);
  g_assert_cmpint(net->bn_count, ==, bns);
  g_assert_cmpint(bns, ==, 8);
  g_assert_cmpuint(net->state_count, ==, 2 * (32 + 64 * 3 + 128 + 256 * 3));
  /* gmp, fc10 without bias, ×0.125: the logits. */
  const TdmLayer *scale = &net->layers[net->layer_count - 1];
  const TdmLayer *fc = scale - 1;
  g_assert_cmpint(scale->kind, ==, TDM_LAYER_SCALE);
  g_assert_cmpfloat(scale->factor, ==, 0.125f);
  g_assert_cmpint(fc->kind, ==, TDM_LAYER_LINEAR);
  g_assert_cmpuint(fc->bias_count, ==, 0);
  g_assert_cmpint(fc->in_h * fc->in_w * fc->in_c, ==, 256);
  g_assert_cmpint((fc - 1)->kind, ==, TDM_LAYER_GLOBAL_MAX);
  g_assert_cmpint((fc - 1)->in_h, ==, 3);
  double mflop = tdm_network_forward_flops(net) / 1e6;
  g_test_message("resnet on 28×28: %zu parameters, %.1f MFLOP a sample", net->parameter_count,
                 mflop);
  /* 28·28·9·32 + 28·28·9·32·64 + 14·14·9·64·64·2 + 14·14·9·64·128 + 7·7·9·128·256 +
   * 3·3·9·256·256·2 + 256·10 multiply-adds. */
  g_assert_cmpfloat(fabs(mflop - 137.296), <, 0.001);

  /* 32×32×3 inputs take the same spec. */
  g_autoptr(TdmNetwork) cifar = tdm_network_new("resnet", 32, 32, 3, 10, &error);
  g_assert_no_error(error);

  /* Weight decay reaches conv, projection and fc weights, not biases or BN. */
  g_autofree uint8_t *mask = g_malloc(net->parameter_count);
  tdm_network_decay_mask(net, mask);
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    for (size_t j = 0; j < l->weight_count; j++)
      g_assert_cmpint(mask[l->weight_offset + j], ==, l->kind != TDM_LAYER_BN);
    for (size_t j = 0; j < l->bias_count; j++)
      g_assert_cmpint(mask[l->bias_offset + j], ==, 0);
  }
  /* BN starts as the identity: gamma 1, beta 0, running mean 0 and variance 1. */
  g_autofree float *params = g_new(float, net->parameter_count);
  g_autofree float *state = g_new(float, net->state_count);
  tdm_network_init_parameters(net, 1, params);
  tdm_network_init_state(net, state);
  const TdmLayer *bn1 = &net->layers[1];
  g_assert_cmpint(bn1->kind, ==, TDM_LAYER_BN);
  g_assert_cmpfloat(params[bn1->weight_offset + 5], ==, 1.0f);
  g_assert_cmpfloat(params[bn1->bias_offset + 5], ==, 0.0f);
  g_assert_cmpfloat(state[bn1->state_offset + 5], ==, 0.0f);
  g_assert_cmpfloat(state[bn1->state_offset + 32 + 5], ==, 1.0f);
}

static void
test_repeats_and_shapes(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(
    "conv8k3p1,bn,relu,2*(res(conv8k3p1,bn,relu,conv8k3p1,bn),relu),conv16k3s2p1,avg2,"
    "drop0.25,gmp,fc10",
    28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(net->spec, ==,
                  "conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
                  "res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,conv16k3s2p1,avg2,drop0.25,gmp,"
                  "fc10");
  /* Two blocks of one stage: layer1.0 and layer1.1. */
  gboolean second = FALSE;
  for (int i = 0; i < net->layer_count; i++)
    second |= g_str_equal(net->layers[i].name, "layer1.1.conv2");
  g_assert_true(second);
  g_assert_true(net->has_dropout);
  /* 28 → stride 2 → 14 → avg2 → 7 → gmp → 1. */
  const TdmLayer *gmp = &net->layers[net->layer_count - 2];
  g_assert_cmpint(gmp->kind, ==, TDM_LAYER_GLOBAL_MAX);
  g_assert_cmpint(gmp->in_h, ==, 7);
  g_assert_cmpint(gmp->out_h, ==, 1);
  g_assert_cmpint(gmp->out_c, ==, 16);
}

static void
test_init_is_seeded_lecun(void)
{
  g_autoptr(TdmNetwork) net = tdm_network_new("mlp", 28, 28, 1, 10, NULL);
  size_t n = net->parameter_count;
  g_autofree float *a = g_new(float, n), *b = g_new(float, n), *c = g_new(float, n);
  tdm_network_init_parameters(net, 7, a);
  tdm_network_init_parameters(net, 7, b);
  tdm_network_init_parameters(net, 8, c);
  g_assert_cmpmem(a, n * sizeof(float), b, n * sizeof(float));
  g_assert_true(memcmp(a, c, n * sizeof(float)) != 0);

  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    double sum = 0, sq = 0;
    for (size_t j = 0; j < l->weight_count; j++) {
      sum += a[l->weight_offset + j];
      sq += (double)a[l->weight_offset + j] * a[l->weight_offset + j];
    }
    double mean = sum / l->weight_count;
    double std = sqrt(sq / l->weight_count - mean * mean);
    double fan_in = (double)l->weight_count / l->bias_count;
    g_assert_cmpfloat(fabs(mean), <, 0.05 / sqrt(fan_in));
    g_assert_cmpfloat(fabs(std * sqrt(fan_in) - 1.0), <, 0.05);
    for (size_t j = 0; j < l->bias_count; j++)
      g_assert_cmpfloat(a[l->bias_offset + j], ==, 0.0f);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/network/scale-and-no-bias", test_scale_and_no_bias);
  g_test_add_func("/network/resnet-preset", test_resnet_preset);
  g_test_add_func("/network/repeats-and-shapes", test_repeats_and_shapes);
  g_test_add_func("/network/mlp-layout", test_mlp_layout);
  g_test_add_func("/network/cnn-shapes", test_cnn_shapes);
  g_test_add_func("/network/errors", test_errors);
  g_test_add_func("/network/init-seeded-lecun", test_init_is_seeded_lecun);
  return g_test_run();
}
