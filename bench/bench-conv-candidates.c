/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-conv-candidates.c — the convolution engine's candidates for the first layers of
 * issue 31's networks, timed on a GPU in a bf16 run (an image stored as float32, the
 * output stored as bf16 for the bn after it, the weight gradient from a bf16 dy):
 * torchvision's 7×7 stem at 224 px (batch 128), the resnet preset's first 3×3 conv of
 * one channel at 28 px and the CIFAR ResNet-18 stem at 32 px (batch 512); and the CIFAR
 * ResNet-18's second conv of a block at 128 px (batch 128) in each stage, whose input
 * the bn before stored as bf16 and the conv normalizes as it reads it (the "bn
 * prologue": the plain cuDNN plans copy the normalized input in chunks, the fused ones,
 * "cudnn-fused:…", apply the bn in cuDNN's graph). For each shape and direction
 * (forward, weight gradient) the engine chooses on a fresh backend without the disk
 * cache: as it runs (every candidate within the workspace budget), then with
 * TANDEM_CONV=cudnn (cuDNN's plans alone, so that those the budget of a column-free
 * candidate leaves out are timed too), and for a bn-prologue conv with
 * TANDEM_CONV=cudnn-fused (the fused plans alone; their lines say which compiled at
 * run time). The times are the
 * engine's own (CUDA events, one warm-up and three runs: its g_debug lines), with each
 * candidate's workspace need. A table on stdout, run by hand on a GPU machine (record
 * numbers in NOTES.md); exits 77 without a GPU. Not a test: test-cuda-conv.c checks
 * the candidates' results.
 *   usage: bench-conv-candidates [stem|preset|cifar|bn128|bn128-64|…]  (a prefix of the
 *   layers' keys)
 */
#include "tdm-backend.h"
#include "tdm-backend-cuda.h"
#include "tdm-build-config.h"
#include "tdm-bench.h"

#include <stdio.h>
#include <string.h>

typedef struct {
  const char *key, *name;
  TdmConvShape s;
  gboolean bn;                 /* x stored as bf16, normalized by a bn (and ReLU) as read */
} Layer;

static const Layer layers[] = {
  {"stem", "torchvision stem, 224 px", {128, 224, 224, 3, 64, 7, 3, 2}, FALSE},
  {"preset", "resnet preset's first conv, 28 px", {512, 28, 28, 1, 32, 3, 1, 1}, FALSE},
  {"cifar", "CIFAR ResNet-18 stem, 32 px", {512, 32, 32, 3, 64, 3, 1, 1}, FALSE},
  {"bn128-64", "CIFAR ResNet-18 128 px, layer1's bn-prologue conv",
   {128, 128, 128, 64, 64, 3, 1, 1}, TRUE},
  {"bn128-128", "CIFAR ResNet-18 128 px, layer2's bn-prologue conv",
   {128, 64, 64, 128, 128, 3, 1, 1}, TRUE},
  {"bn128-256", "CIFAR ResNet-18 128 px, layer3's bn-prologue conv",
   {128, 32, 32, 256, 256, 3, 1, 1}, TRUE},
  {"bn128-512", "CIFAR ResNet-18 128 px, layer4's bn-prologue conv",
   {128, 16, 16, 512, 512, 3, 1, 1}, TRUE},
};

/* The engine's lines about its candidates, kept while a choice is made. */
static GPtrArray *lines;

static void
keep_line(const char *domain, GLogLevelFlags level, const char *message, gpointer data)
{
  (void)domain;
  (void)level;
  (void)data;
  if (strstr(message, "convolution candidate") != NULL || strstr(message, "cuDNN fused") != NULL)
    g_ptr_array_add(lines, g_strdup(message));
}

/* Values in [-1, 1) of a fixed pattern. */
static void *
filled(TdmBackend *b, size_t count)
{
  g_autofree float *host = g_new(float, count);
  for (size_t i = 0; i < count; i++)
    host[i] = (float)((i * 2654435761u) % 2000) / 1000.0f - 1.0f;
  void *d = tdm_bench_alloc(b, count * 4);
  tdm_backend_upload(b, d, host, count * 4);
  return d;
}

/* One choice of the engine for a direction of the layer, `forced` as TANDEM_CONV (or
 * NULL), reached as the replica reaches it (the workspace grown as the engine asks). */
static void
choose(const Layer *layer, gboolean backward, const char *forced)
{
  if (forced != NULL)
    g_setenv("TANDEM_CONV", forced, TRUE);
  else
    g_unsetenv("TANDEM_CONV");
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  if (b == NULL)
    g_error("%s", error->message);
  const TdmConvShape *s = &layer->s;
  size_t rows = (size_t)s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s);
  size_t in = (size_t)s->n * s->h * s->w * s->c, out = rows * s->out_c;
  size_t weights = (size_t)s->out_c * s->kernel * s->kernel * s->c;
  float *x = filled(b, in), *w = filled(b, weights), *dy = NULL, *dw = NULL, *bn = NULL;
  uint16_t *w16 = tdm_bench_alloc(b, weights * 2), *y16 = NULL, *x16 = NULL;
  tdm_backend_to_bf16(b, w16, w, weights);
  TdmConvArgs a = {.shape = *s, .x = x, .w = w, .w16 = w16};
  if (layer->bn) {
    /* The bn's mean, invstd, γ and β (a fixed pattern near a trained bn's), x as bf16. */
    g_autofree float *host = g_new(float, 4 * (size_t)s->c);
    for (int ch = 0; ch < s->c; ch++) {
      host[ch] = 0.1f * (float)(ch % 7) - 0.3f;
      host[s->c + ch] = 1.0f + 0.01f * (float)(ch % 5);
      host[2 * s->c + ch] = 1.0f;
      host[3 * s->c + ch] = 0.05f * (float)(ch % 3);
    }
    bn = tdm_bench_alloc(b, 4 * (size_t)s->c * 4);
    tdm_backend_upload(b, bn, host, 4 * (size_t)s->c * 4);
    x16 = tdm_bench_alloc(b, in * 2);
    tdm_backend_to_bf16(b, x16, x, in);
    a.x = (const float *)x16; /* the type says what it holds */
    a.x_type = TDM_DTYPE_BF16;
    a.bn_mean = bn;
    a.bn_invstd = bn + s->c;
    a.bn_gamma = bn + 2 * s->c;
    a.bn_beta = bn + 3 * s->c;
    a.bn_relu = true;
  }
  if (backward) {
    dy = filled(b, out);
    dw = tdm_bench_alloc(b, weights * 4);
    a.dy = dy;
    a.dw = dw;
  } else {
    y16 = tdm_bench_alloc(b, out * 2);
    a.y16 = y16;
  }
  size_t need = 0, bytes = 256;
  a.work_needed = &need;
  gboolean took = FALSE;
  void *work = NULL;
  g_ptr_array_set_size(lines, 0);
  for (int tries = 0; tries <= 3 && !took; tries++) {
    work = tdm_bench_alloc(b, bytes);
    a.work = work;
    a.work_bytes = bytes;
    took = backward ? tdm_backend_conv_engine_backward(b, &a)
                    : tdm_backend_conv_engine_forward(b, &a);
    if (!took && need > bytes) {
      tdm_backend_release(b, work);
      work = NULL;
      bytes = need;
      continue;
    }
    break;
  }
  tdm_backend_synchronize(b);
  TdmConvDirection dir = backward ? TDM_CONV_WGRAD : TDM_CONV_FORWARD;
  const char *chosen = tdm_cuda_conv_chosen(b, &a, dir);
  printf("%s, %s%s%s: chosen %s (workspace %zu bytes)\n", layer->name,
         backward ? "weight gradient" : "forward", forced != NULL ? ", TANDEM_CONV=" : "",
         forced != NULL ? forced : "", chosen != NULL ? chosen : "none (im2col, the replica's)",
         need);
  for (guint i = 0; i < lines->len; i++) {
    const char *line = g_ptr_array_index(lines, i);
    const char *what = strstr(line, "convolution candidate");
    printf("  %s\n", what != NULL ? what : strstr(line, "cuDNN fused"));
  }
  g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(b, &a, dir);
  for (guint i = 0; i < names->len; i++) {
    const char *name = g_ptr_array_index(names, i);
    printf("  need %-24s %zu bytes\n", name, tdm_cuda_conv_need_named(b, &a, dir, name));
  }
  fflush(stdout);
  void *all[] = {x, w, w16, y16, dy, dw, work, x16, bn};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    if (all[i] != NULL)
      tdm_backend_release(b, all[i]);
  tdm_backend_free(b);
  g_unsetenv("TANDEM_CONV");
}

int
main(int argc, char **argv)
{
  if (!tdm_backend_cuda_available()) {
    fprintf(stderr, "no CUDA GPU\n");
    return 77;
  }
  /* Every choice timed here, none read from or written to the person's cache. */
  g_setenv("TANDEM_CONV_CACHE", "0", TRUE);
  lines = g_ptr_array_new_with_free_func(g_free);
  g_log_set_handler("Tandem-Compute", G_LOG_LEVEL_DEBUG, keep_line, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(layers); i++) {
    if (argc > 1 && !g_str_has_prefix(layers[i].key, argv[1]))
      continue;
    for (int backward = 0; backward < 2; backward++) {
      choose(&layers[i], backward, NULL);
      choose(&layers[i], backward, "cudnn");
      if (layers[i].bn)
        choose(&layers[i], backward, "cudnn-fused");
    }
  }
  g_ptr_array_free(lines, TRUE);
  return 0;
}
