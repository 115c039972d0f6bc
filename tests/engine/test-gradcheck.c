/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-gradcheck.c — every layer kind and the loss, checked through a real replica on
 * the CPU backend: the analytic gradient of the mean training loss (batch statistics
 * for BN, the step's dropout mask, label smoothing) against central differences,
 * parameter by parameter. */
#include "tdm-backend.h"
#include "tdm-backend-cpu-winograd.h"
#include "tdm-dataset.h"
#include "tdm-network.h"
#include "tdm-replica.h"

#include <math.h>

#define SAMPLES 6

static TdmDataset *
random_dataset(int h, int w, int c, int classes, GRand *rng)
{
  TdmDataset *d = tdm_dataset_new("gradcheck", SAMPLES, h, w, c, classes);
  for (int i = 0; i < SAMPLES * h * w * c; i++)
    d->images[i] = (uint8_t)g_rand_int_range(rng, 0, 256);
  for (int i = 0; i < SAMPLES; i++)
    d->labels[i] = (uint8_t)g_rand_int_range(rng, 0, classes);
  return d;
}

/* Mean training-mode loss over the dataset at the current parameters. */
static double
mean_loss(TdmReplica *rep, const int32_t *indices)
{
  tdm_replica_train_loss(rep, indices, SAMPLES);
  TdmMetrics m = tdm_replica_take_metrics(rep);
  return m.loss_sum / SAMPLES;
}

static void check_spec_smoothed (const char *spec, int h, int w, int c, int classes,
                                 float smoothing);

static void
check_spec(const char *spec, int h, int w, int c, int classes)
{
  check_spec_smoothed(spec, h, w, c, classes, 0.0f);
}

static void
check_spec_smoothed(const char *spec, int h, int w, int c, int classes, float smoothing)
{
  g_autoptr(GRand) rng = g_rand_new_with_seed(g_str_hash(spec));
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmDataset) data = random_dataset(h, w, c, classes, rng);
  g_autoptr(TdmNetwork) net = tdm_network_new(spec, h, w, c, classes, &error);
  g_assert_no_error(error);
  TdmBackend *b = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  TdmReplica *rep = tdm_replica_new(b, net, SAMPLES, data, data, &error);
  g_assert_no_error(error);
  rep->smoothing = smoothing;
  rep->seed = 11;
  rep->epoch = 2;

  size_t n = net->parameter_count;
  g_autofree float *params = g_new(float, n);
  tdm_network_init_parameters(net, 3, params);
  /* Non-zero biases (BN betas, and gammas away from 1), so their gradients and the
   * ReLU kinks are exercised. */
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    for (size_t j = 0; j < l->bias_count; j++)
      params[l->bias_offset + j] = (float)g_rand_double_range(rng, -0.1, 0.1);
    if (l->kind == TDM_LAYER_BN)
      for (size_t j = 0; j < l->weight_count; j++)
        params[l->weight_offset + j] = (float)g_rand_double_range(rng, 0.5, 1.5);
  }
  tdm_backend_upload(b, rep->params, params, n * sizeof(float));

  int32_t indices[SAMPLES];
  for (int i = 0; i < SAMPLES; i++)
    indices[i] = i;
  tdm_replica_train_step(rep, indices, SAMPLES, 1.0f / SAMPLES);
  g_autofree float *grads = g_new(float, n);
  tdm_backend_download(b, grads, rep->grads, n * sizeof(float));
  tdm_replica_take_metrics(rep);

  int checked = 0, bad = 0;
  double worst = 0;
  for (size_t j = 0; j < n; j++) {
    /* A perturbation across a ReLU or max-pool kink spoils one finite difference;
     * a smaller step usually steps back from the kink, so try two. */
    const double steps[2] = {1e-3, 2.5e-4};
    gboolean agreed = FALSE;
    for (int s = 0; s < 2 && !agreed; s++) {
      float saved = params[j];
      params[j] = saved + (float)steps[s];
      tdm_backend_upload(b, rep->params + j, &params[j], sizeof(float));
      double up = mean_loss(rep, indices);
      params[j] = saved - (float)steps[s];
      tdm_backend_upload(b, rep->params + j, &params[j], sizeof(float));
      double down = mean_loss(rep, indices);
      params[j] = saved;
      tdm_backend_upload(b, rep->params + j, &params[j], sizeof(float));

      double numeric = (up - down) / (2 * steps[s]);
      double diff = fabs(numeric - grads[j]);
      double scale = MAX(fabs(numeric), fabs(grads[j]));
      /* Float losses differ by ~1e-7 relative: that, over the step, is the noise. */
      agreed = diff <= 2e-3 * scale + 1e-7 / steps[s] * 2;
      if (agreed)
        worst = MAX(worst, diff / (scale + 1e-6));
      else if (s == 1 && g_getenv("GRADCHECK_VERBOSE"))
        g_test_message("param %zu: numeric %.6f analytic %.6f", j, numeric, grads[j]);
    }
    bad += !agreed;
    checked++;
  }
  g_test_message("%s: %d parameters, %d outside tolerance, worst relative %.2e", spec,
                 checked, bad, worst);
  /* A wrong gradient is wrong almost everywhere; kinks spoil a few at most. */
  g_assert_cmpint(bad, <=, checked / 20);
  /* The analytic gradient is not trivially zero. */
  double norm = 0;
  for (size_t j = 0; j < n; j++)
    norm += (double)grads[j] * grads[j];
  g_assert_cmpfloat(norm, >, 1e-8);

  tdm_replica_free(rep);
  tdm_backend_free(b);
}

static void
test_linear(void)
{
  check_spec("fc7,fc4", 3, 3, 1, 4);
}

static void
test_linear_relu(void)
{
  check_spec("fc9,relu,fc6,relu,fc3", 4, 4, 1, 3);
}

static void
test_conv_pool(void)
{
  check_spec("conv4k3p1,relu,pool2,fc5,relu,fc3", 6, 6, 2, 3);
}

static void
test_conv_nopad_standalone_relu(void)
{
  check_spec("conv3k2,pool2,relu,conv2k1,flatten,fc3", 7, 7, 3, 3);
}

static void
test_conv_wide_kernel(void)
{
  check_spec("conv2k5p2,relu,pool3,fc4", 9, 9, 1, 4);
}

static void
test_bn_conv(void)
{
  /* Training-mode BN: the batch statistics depend on every sample, and the conv
   * before it has no bias. */
  check_spec("conv4k3p1,bn,relu,fc3", 5, 5, 2, 3);
}

static void
test_bn_linear(void)
{
  check_spec("fc6,bn,relu,fc3", 3, 3, 2, 3);
}

static void
test_strided_conv(void)
{
  check_spec("conv3k3s2p1,relu,conv4k2s2,fc3", 7, 7, 2, 3);
}

static void
test_residual_identity(void)
{
  check_spec("conv3k3p1,relu,res(conv3k3p1,bn,relu,conv3k3p1,bn),relu,fc3", 5, 5, 2, 3);
}

static void
test_residual_projection(void)
{
  /* Channels and size change: the skip path is a 1×1 conv of stride 2 and a bn. */
  check_spec("res(conv4k3s2p1,bn,relu,conv4k3p1,bn),relu,fc3", 6, 6, 2, 3);
  /* Channels only: a 1×1 conv of stride 1 reads the input as it is. */
  check_spec("conv2k3p1,res(conv4k3p1,bn),fc3", 4, 4, 1, 3);
}

static void
test_residual_nested(void)
{
  check_spec("conv2k3p1,res(res(conv2k3p1,relu),conv3k1,relu),gap,fc3", 4, 4, 2, 3);
}

static void
test_avg_pool(void)
{
  check_spec("conv3k3p1,relu,avg2,fc3", 5, 5, 2, 3);
}

static void
test_global_pools(void)
{
  check_spec("conv4k3p1,relu,gap,fc3", 4, 4, 2, 3);
  check_spec("conv4k3p1,gmp,fc3", 4, 4, 2, 3);
}

static void
test_dropout(void)
{
  /* The mask is a function of (seed, layer, epoch, sample, element): fixed here. */
  check_spec("fc12,relu,drop0.4,fc3", 3, 3, 2, 3);
}

static void
test_label_smoothing(void)
{
  check_spec_smoothed("fc7,fc4", 3, 3, 1, 4, 0.1f);
}

static void
test_scale_no_bias(void)
{
  /* The preset's head: a biasless fc scaled down, here after a biasless conv, and a
   * scale inside the network. */
  check_spec("conv3k3p1nb,relu,scale1.5,gmp,fc3nb,scale0.125", 5, 5, 2, 3);
}

/* Convolutions the CPU backend runs by Winograd (tdm-backend-cpu-winograd.c): 3×3,
 * stride 1, eight input channels or more, every tile size. On 7×7 images F(3×3, 3×3)
 * with pad 2 and 1 (9×9 outputs, part tiles at the edges) and F(4×4, 3×3) with pad 0,
 * a first layer (no input gradient) and layers with one, and a global average pool at
 * the end, whose gradient has no kinks (a max pool's spoil 50 of 2,103 differences,
 * through im2col as much as through Winograd); F(2×2, 3×3) on 2×5 images (a half tile
 * at the right); F(3×3, 3×3) on 3×3 images. */
static void
test_winograd(void)
{
  const struct {
    const char *spec;
    int h, w;
  } cases[] = {
    {"conv8k3p2,relu,conv9k3p1,bn,relu,conv10k3,relu,gap,fc3", 7, 7},
    {"conv8k3p1,relu,conv9k3p1,bn,relu,gap,fc3", 2, 5},
    {"conv8k3p1,bn,relu,conv9k3p1,relu,gap,fc3", 3, 3},
  };
  gboolean seen[5] = {FALSE};
  for (guint k = 0; k < G_N_ELEMENTS(cases); k++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(TdmNetwork) net =
      tdm_network_new(cases[k].spec, cases[k].h, cases[k].w, 8, 3, &error);
    g_assert_no_error(error);
    for (int i = 0; i < net->layer_count; i++) {
      const TdmLayer *l = &net->layers[i];
      if (l->kind != TDM_LAYER_CONV)
        continue;
      if (g_strcmp0(g_getenv("TANDEM_CPU_WINOGRAD"), "0") != 0)
        g_assert_cmpuint(tdm_replica_layer_buffers(net, i, TDM_BACKEND_CPU, TDM_PRECISION_FP32).conv_work, >, 0);
      seen[tdm_cpu_winograd_tile(l->in_h, l->in_w, l->pad)] = TRUE;
    }
    check_spec(cases[k].spec, cases[k].h, cases[k].w, 8, 3);
  }
  if (g_getenv("TANDEM_CPU_WINOGRAD") == NULL)
    g_assert_true(seen[2] && seen[3] && seen[4]);
}

static void
test_env_spec(void)
{
  check_spec(g_getenv("GRADCHECK_SPEC"), 7, 7, 3, 3);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  if (g_getenv("GRADCHECK_SPEC"))
    g_test_add_func("/gradcheck/env", test_env_spec);
  g_test_add_func("/gradcheck/linear", test_linear);
  g_test_add_func("/gradcheck/linear-relu", test_linear_relu);
  g_test_add_func("/gradcheck/conv-pool", test_conv_pool);
  g_test_add_func("/gradcheck/conv-nopad-standalone-relu", test_conv_nopad_standalone_relu);
  g_test_add_func("/gradcheck/conv-wide-kernel", test_conv_wide_kernel);
  g_test_add_func("/gradcheck/bn-conv", test_bn_conv);
  g_test_add_func("/gradcheck/bn-linear", test_bn_linear);
  g_test_add_func("/gradcheck/strided-conv", test_strided_conv);
  g_test_add_func("/gradcheck/residual-identity", test_residual_identity);
  g_test_add_func("/gradcheck/residual-projection", test_residual_projection);
  g_test_add_func("/gradcheck/residual-nested", test_residual_nested);
  g_test_add_func("/gradcheck/avg-pool", test_avg_pool);
  g_test_add_func("/gradcheck/global-pools", test_global_pools);
  g_test_add_func("/gradcheck/dropout", test_dropout);
  g_test_add_func("/gradcheck/label-smoothing", test_label_smoothing);
  g_test_add_func("/gradcheck/scale-no-bias", test_scale_no_bias);
  g_test_add_func("/gradcheck/winograd", test_winograd);
  return g_test_run();
}
