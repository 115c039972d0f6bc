/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-winograd.c — the CPU backend's convolutions of the resnet preset, layer by
 * layer: the im2col path (im2col and a GEMM forward; the weight-gradient GEMM on the
 * forward's columns; the input-gradient GEMM and col2im) against the whole
 * convolution by Winograd, with the tile the backend picks for the size (forward;
 * backward to dw alone and to dw and dx together), on one thread, as one of two CPU
 * workers runs them. Prints milliseconds
 * of thread CPU time (the median of --reps runs after one warm-up) and the
 * direct convolution's GFLOP/s at that time (2·n·oh·ow·9·c·k a pass), so the two paths
 * read on one scale. Not a test: it checks only that the two outputs agree roughly.
 *
 *   OPENBLAS_NUM_THREADS=1 bench-winograd [--batch 256] [--reps 5] [--size 28]
 */
#include "tdm-backend.h"
#include "tdm-backend-cpu-winograd.h"
#include "tdm-bench.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
  const char *name;
  int h, c, k;
} Layer;

#define MAX_REPS 64

static float *
floats(TdmBackend *b, size_t n)
{
  g_autoptr(GError) error = NULL;
  float *p = tdm_backend_alloc(b, MAX(n, 1) * sizeof(float), &error);
  if (p == NULL) {
    g_printerr("bench-winograd: %s\n", error->message);
    exit(1);
  }
  return p;
}

static void
fill(float *p, size_t n, GRand *rng)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (float)g_rand_double_range(rng, -1, 1);
}

typedef enum { IM_FWD, IM_DW, IM_DX, WI_FWD, WI_DW, WI_BWD, KINDS } Kind;

static const char *const kind_names[KINDS] = {
  "im2col fwd", "im2col dw", "im2col dx", "wino fwd", "wino dw", "wino dw+dx",
};

int
main(int argc, char **argv)
{
  int batch = 256, reps = 5, size = 28, only = -1, only_kind = -1;
  GOptionEntry entries[] = {
    {"batch", 0, 0, G_OPTION_ARG_INT, &batch, "samples (a worker's shard)", "N"},
    {"reps", 0, 0, G_OPTION_ARG_INT, &reps, "timed runs per figure (median)", "R"},
    {"size", 0, 0, G_OPTION_ARG_INT, &size, "input height and width (28 or 32)", "S"},
    {"layer", 0, 0, G_OPTION_ARG_INT, &only, "only this row of the table (0 …)", "L"},
    {"kind", 0, 0, G_OPTION_ARG_INT, &only_kind, "only this column (0 … 5), for perf", "K"},
    {NULL},
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("— im2col against Winograd per layer");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
    g_printerr("bench-winograd: %s\n", error->message);
    return 2;
  }
  reps = CLAMP(reps, 1, MAX_REPS);

  /* The resnet preset's 3×3 convolutions (tdm-network.h) for size×size inputs. */
  const Layer layers[] = {
    {"conv32 (first)", size, 1, 32},
    {"conv64", size, 32, 64},
    {"res conv64", size / 2, 64, 64},
    {"conv128", size / 2, 64, 128},
    {"conv256", size / 4, 128, 256},
    {"res conv256", size / 8, 256, 256},
  };

  TdmBackend *b = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  g_autoptr(GRand) rng = g_rand_new_with_seed(7);

  printf("batch %d, %d×%d inputs, thread CPU ms (median of %d) and GFLOP/s of the direct "
         "convolution's 2·n·oh·ow·9·c·k\n\n", batch, size, size, reps);
  printf("| layer | h×w | c → k |");
  for (int k = 0; k < KINDS; k++)
    printf(" %s |", kind_names[k]);
  printf(" fwd × | bwd × |\n|---|---|---|");
  for (int k = 0; k < KINDS + 2; k++)
    printf("---|");
  printf("\n");

  for (guint li = 0; li < G_N_ELEMENTS(layers); li++) {
    const Layer *l = &layers[li];
    if (only >= 0 && (int)li != only)
      continue;
    int n = batch, h = l->h, c = l->c, k = l->k, pad = 1;
    int rows = n * h * h, kk = 9 * c;
    size_t xs = (size_t)n * h * h * c, ys = (size_t)rows * k, ws = (size_t)k * kk;
    float *x = floats(b, xs), *wt = floats(b, ws), *dy = floats(b, ys);
    float *y1 = floats(b, ys), *y2 = floats(b, ys), *dx = floats(b, xs), *dw = floats(b, ws);
    float *col = floats(b, (size_t)rows * kk);
    float *work = floats(b, tdm_cpu_winograd_scratch_floats(c, k));
    fill(x, xs, rng);
    fill(wt, ws, rng);
    fill(dy, ys, rng);
    double ms[KINDS][MAX_REPS];
    for (int r = -1; r < reps; r++) {
      for (int kind = 0; kind < KINDS; kind++) {
        double t0 = tdm_bench_thread_cpu_ms();
        if (only_kind >= 0 && kind != only_kind && kind != IM_FWD)
          continue;
        switch ((Kind)kind) {
        case IM_FWD:
          tdm_backend_im2col(b, col, x, n, h, h, c, 3, 3, pad, 1);
          tdm_backend_gemm(b, false, true, rows, k, kk, 1.0f, col, kk, wt, kk, 0.0f, y1, k);
          break;
        case IM_DW:
          tdm_backend_gemm(b, true, false, k, kk, rows, 1.0f, dy, k, col, kk, 0.0f, dw, kk);
          break;
        case IM_DX:
          tdm_backend_gemm(b, false, false, rows, kk, k, 1.0f, dy, k, wt, kk, 0.0f, col, kk);
          tdm_backend_col2im(b, dx, col, n, h, h, c, 3, 3, pad, 1);
          break;
        case WI_FWD:
          tdm_backend_conv_forward(b, y2, x, wt, work, n, h, h, c, k, 3, pad, 1);
          break;
        case WI_DW:
          tdm_backend_conv_backward(b, NULL, dw, dy, x, wt, work, n, h, h, c, k, 3, pad, 1);
          break;
        case WI_BWD:
          tdm_backend_conv_backward(b, dx, dw, dy, x, wt, work, n, h, h, c, k, 3, pad, 1);
          break;
        case KINDS:
          break;
        }
        if (r >= 0)
          ms[kind][r] = tdm_bench_thread_cpu_ms() - t0;
      }
    }
    if (!tdm_backend_check(b, &error)) {
      g_printerr("bench-winograd: %s\n", error->message);
      return 1;
    }
    double diff = 0, norm = 0;
    for (size_t i = 0; i < ys; i++) {
      diff += ((double)y1[i] - y2[i]) * ((double)y1[i] - y2[i]);
      norm += (double)y1[i] * y1[i];
    }
    if (sqrt(diff / norm) > 1e-4)
      g_printerr("bench-winograd: %s: the outputs differ (relative %.2e)\n", l->name,
                 sqrt(diff / norm));
    double flops = 2.0 * rows * 9.0 * c * k, med[KINDS];
    printf("| %s | %d×%d | %d → %d |", l->name, h, h, c, k);
    for (int kind = 0; kind < KINDS; kind++) {
      qsort(ms[kind], reps, sizeof(double), tdm_bench_compare_doubles);
      med[kind] = ms[kind][reps / 2];
      double passes = kind == WI_BWD ? 2.0 : 1.0;
      printf(" %.1f (%.0f) |", med[kind], passes * flops / (med[kind] * 1e6));
    }
    printf(" %.2f | %.2f |\n", (med[IM_FWD]) / med[WI_FWD],
           (med[IM_DW] + med[IM_DX]) / med[WI_BWD]);
    fflush(stdout);
    float *all[] = {x, wt, dy, y1, y2, dx, dw, col, work};
    for (guint i = 0; i < G_N_ELEMENTS(all); i++)
      tdm_backend_release(b, all[i]);
  }
  tdm_backend_free(b);
  return 0;
}
