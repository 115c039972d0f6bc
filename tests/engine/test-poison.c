/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-poison.c — no pass reads memory nothing wrote. With TANDEM_CPU_POISON set the
 * CPU backend fills every new buffer with NaN bit patterns (what a GPU's fresh memory
 * may hold), so a read of a buffer no layer wrote turns the logits into NaN instead of
 * the zeros a fresh CPU page gives. Here the inference pass (rotating buffers, chunks of
 * 7 beside a training shard of 5) and a training step of networks holding every layer
 * kind give the same bits poisoned and not. Not the GPU (test-cuda-train.c compares
 * the CUDA backend's passes with these). */
#include "tdm-backend.h"
#include "tdm-dataset.h"
#include "tdm-network.h"
#include "tdm-replica.h"

#include <math.h>
#include <string.h>

#define COUNT 30

static const char *const networks[] = {
  "conv8k3p1,bn,relu,res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,"
  "res(conv16k3p1,bn,relu,conv16k3p1,bn),relu,avg2,conv16k3p1,bn,relu,gmp,"
  "fc32,bn,relu,drop0.25,fc10",
  "conv8k3p1,bn,relu,pool2,res(conv8k3p1,bn,relu,conv8k3p1,bn,relu),gap,fc10nb,scale0.125",
  "conv8k3p1,relu,res(conv8k3p1,bn,res(conv8k3p1,relu,conv8k3p1),relu,"
  "res(conv16k1s2,bn)),pool2,flatten,fc10",
  "conv8k7s2p3,bn,relu,pool3s2p1,basic8,bottleneck4s2,avg3s1p1,gap,fc10",
};

static TdmDataset *
random_dataset(void)
{
  g_autoptr(GRand) rng = g_rand_new_with_seed(12);
  TdmDataset *d = tdm_dataset_new("poison", COUNT, 12, 12, 3, 10);
  for (int i = 0; i < COUNT * 12 * 12 * 3; i++)
    d->images[i] = (uint8_t)g_rand_int_range(rng, 0, 256);
  for (int i = 0; i < COUNT; i++)
    d->labels[i] = (uint8_t)g_rand_int_range(rng, 0, 10);
  return d;
}

/* The logits of every sample through the inference pass, after one training step on
 * the first 5 samples (so that the training pass's reads are checked too), on a CPU
 * backend made with or without poisoning. */
static float *
logits_of(const char *spec, const TdmDataset *data, gboolean poison)
{
  g_autoptr(GError) error = NULL;
  if (poison)
    g_setenv("TANDEM_CPU_POISON", "1", TRUE);
  else
    g_unsetenv("TANDEM_CPU_POISON");
  TdmBackend *b = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) net = tdm_network_new(spec, 12, 12, 3, 10, &error);
  g_assert_no_error(error);
  g_autofree float *params = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, 3, params);
  TdmReplica *rep = tdm_replica_new_sized(b, net, 5, 7, data, data, &error);
  g_assert_no_error(error);
  tdm_backend_upload(b, rep->params, params, net->parameter_count * sizeof(float));
  int indices[5] = {0, 1, 2, 3, 4};
  tdm_replica_train_step(rep, indices, 5, 1.0f / 5);
  float *logits = g_new(float, (size_t)COUNT * net->classes);
  for (int first = 0; first < COUNT; first += 7)
    tdm_replica_predict(rep, first, MIN(7, COUNT - first),
                        logits + (size_t)first * net->classes);
  /* The step's gradients too: a NaN read in backward shows there. */
  size_t n = net->parameter_count;
  float *out = g_new(float, (size_t)COUNT * net->classes + n);
  memcpy(out, logits, (size_t)COUNT * net->classes * sizeof(float));
  tdm_backend_download(b, out + (size_t)COUNT * net->classes, rep->grads, n * sizeof(float));
  g_free(logits);
  tdm_replica_free(rep);
  tdm_backend_free(b);
  g_unsetenv("TANDEM_CPU_POISON");
  return out;
}

static void
test_poisoned_buffers_unread(void)
{
  g_autoptr(TdmDataset) data = random_dataset();
  g_autoptr(GError) error = NULL;
  for (guint k = 0; k < G_N_ELEMENTS(networks); k++) {
    g_autoptr(TdmNetwork) net = tdm_network_new(networks[k], 12, 12, 3, 10, &error);
    g_assert_no_error(error);
    size_t n = (size_t)COUNT * net->classes + net->parameter_count;
    g_autofree float *clean = logits_of(networks[k], data, FALSE);
    g_autofree float *poisoned = logits_of(networks[k], data, TRUE);
    size_t differ = 0, not_finite = 0;
    for (size_t i = 0; i < n; i++) {
      differ += memcmp(&clean[i], &poisoned[i], sizeof(float)) != 0;
      not_finite += !isfinite(poisoned[i]);
    }
    g_test_message("%.40s…: %zu of %zu values differ poisoned, %zu not finite",
                   networks[k], differ, n, not_finite);
    g_assert_cmpuint(not_finite, ==, 0);
    g_assert_cmpuint(differ, ==, 0);
  }
}

/* The poisoning itself: a fresh buffer holds NaN, so the check above can fail. */
static void
test_poison_fills_nan(void)
{
  g_autoptr(GError) error = NULL;
  g_setenv("TANDEM_CPU_POISON", "1", TRUE);
  TdmBackend *b = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  for (size_t bytes = 64; bytes <= (8u << 20); bytes *= 64) {
    float *p = tdm_backend_alloc(b, bytes, &error);
    g_assert_no_error(error);
    g_assert_true(isnan(p[0]) && isnan(p[bytes / sizeof(float) - 1]));
    tdm_backend_release(b, p);
  }
  tdm_backend_free(b);
  g_unsetenv("TANDEM_CPU_POISON");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/poison/fills-nan", test_poison_fills_nan);
  g_test_add_func("/poison/buffers-unread", test_poisoned_buffers_unread);
  return g_test_run();
}
