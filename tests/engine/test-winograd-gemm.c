/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-winograd-gemm.c — the Winograd convolutions' own products
 * (tdm-cpu-winograd-gemm.c), every copy this CPU runs (generic; AVX2 and AVX-512 where
 * the CPU has them): the product against packed weights, both packings, and the
 * accumulation in place, on shapes whose rows, reduction and columns end inside a
 * register tile, a vector and a panel. The FMA copies must give, for every element,
 * the bits of one fmaf() chain over the reduction in order (so they agree with each
 * other to the bit, and a row's result cannot depend on the rows around it); the
 * generic copy, a multiply and an add a step, is held to the float bound of such a sum,
 * γ_n · Σ|a||b| (n the terms, γ_n = n·u / (1 − n·u), u = 2⁻²⁴), twice over. Nothing
 * outside C's columns is written. The convolutions built on them are test-winograd's. */
#include "tdm-cpu-kernels.h"

#include <glib.h>
#include <math.h>
#include <string.h>

#define SENTINEL 12345.0f

static const TdmCpuKernels *
copies(int i)
{
  switch (i) {
  case 0:
    return &tdm_cpu_kernels_generic;
#if defined(__x86_64__)
  case 1:
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
             ? &tdm_cpu_kernels_avx2
             : NULL;
  case 2:
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw")
             ? &tdm_cpu_kernels_avx512
             : NULL;
#endif
  default:
    return NULL;
  }
}

static void
fill(float *p, size_t n, GRand *rng)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (float)g_rand_double_range(rng, -1, 1);
}

/* Element (want) from its chain's terms a[l]·b[l], l < n, going on from c0. */
static void
check_element(const TdmCpuWinogradGemm *g, float got, float c0, const float *a, size_t as,
              const float *b, size_t bs, int n)
{
  if (!g_str_equal(g->name, "generic")) {
    float chain = c0;
    for (int l = 0; l < n; l++)
      chain = fmaf(a[l * as], b[l * bs], chain);
    g_assert_cmpmem(&got, sizeof got, &chain, sizeof chain);
    return;
  }
  double exact = c0, magnitude = fabs(c0);
  for (int l = 0; l < n; l++) {
    exact += (double)a[l * as] * b[l * bs];
    magnitude += fabs((double)a[l * as] * b[l * bs]);
  }
  const double u = 1.0 / 16777216.0, gamma = (n + 1) * u / (1.0 - (n + 1) * u);
  g_assert_cmpfloat(fabs(got - exact), <=, 2.0 * gamma * magnitude + 1e-30);
}

/* C = A · B with B given as U[col][depth] (the forward's packing, B = Uᵀ) or as
 * U[depth][col] (the input gradient's). */
static void
check_product(const TdmCpuWinogradGemm *g, int rows, int depth, int cols, gboolean transposed,
              GRand *rng)
{
  const size_t lda = depth + 3, ldc = cols + 5;
  g_autofree float *a = g_new(float, rows * lda);
  g_autofree float *u = g_new(float, (size_t)depth * cols);
  g_autofree float *packed = g_new(float, tdm_cpu_winograd_packed_floats(g, depth, cols));
  g_autofree float *c = g_new(float, rows * ldc);
  fill(a, rows * lda, rng);
  fill(u, (size_t)depth * cols, rng);
  for (size_t i = 0; i < rows * ldc; i++)
    c[i] = SENTINEL;
  /* Element (r, j) of B. */
  const size_t row_stride = transposed ? 1 : cols, col_stride = transposed ? depth : 1;
  g->pack(packed, u, row_stride, col_stride, depth, cols);
  g->product(c, ldc, a, lda, packed, rows, depth, cols);
  for (int i = 0; i < rows; i++) {
    for (int j = 0; j < cols; j++)
      check_element(g, c[i * ldc + j], 0.0f, a + i * lda, 1, u + j * col_stride, row_stride,
                    depth);
    for (size_t j = cols; j < ldc; j++)
      g_assert_cmpfloat(c[i * ldc + j], ==, SENTINEL);
  }
}

/* C += Aᵀ B, A depth × rows, B depth × cols, C holding values to go on from. */
static void
check_accumulate(const TdmCpuWinogradGemm *g, int depth, int rows, int cols, GRand *rng)
{
  const size_t lda = rows + 2, ldb = cols + 1, ldc = cols + 7;
  g_autofree float *a = g_new(float, depth * lda);
  g_autofree float *b = g_new(float, depth * ldb);
  g_autofree float *c = g_new(float, rows * ldc), *c0 = g_new(float, rows * ldc);
  fill(a, depth * lda, rng);
  fill(b, depth * ldb, rng);
  fill(c, rows * ldc, rng);
  for (int i = 0; i < rows; i++)
    for (size_t j = cols; j < ldc; j++)
      c[i * ldc + j] = SENTINEL;
  memcpy(c0, c, rows * ldc * sizeof(float));
  g->accumulate(c, ldc, a, lda, b, ldb, depth, rows, cols);
  for (int i = 0; i < rows; i++) {
    for (int j = 0; j < cols; j++)
      check_element(g, c[i * ldc + j], c0[i * ldc + j], a + i, lda, b + j, ldb, depth);
    for (size_t j = cols; j < ldc; j++)
      g_assert_cmpfloat(c[i * ldc + j], ==, SENTINEL);
  }
}

static void
test_products(void)
{
  static const int rows[] = {1, 5, 8, 13, 128};
  static const int depths[] = {1, 7, 32, 45};
  static const int cols[] = {1, 9, 16, 33, 64, 70};
  g_autoptr(GRand) rng = g_rand_new_with_seed(11);
  int tested = 0;
  for (int i = 0; i < 3; i++) {
    const TdmCpuKernels *k = copies(i);
    if (k == NULL)
      continue;
    const TdmCpuWinogradGemm *g = k->winograd;
    g_assert_nonnull(g);
    g_assert_cmpint(TDM_CPU_WINOGRAD_PANEL_MAX % g->panel, ==, 0);
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
      for (guint d = 0; d < G_N_ELEMENTS(depths); d++)
        for (guint c = 0; c < G_N_ELEMENTS(cols); c++) {
          check_product(g, rows[r], depths[d], cols[c], FALSE, rng);
          check_product(g, rows[r], depths[d], cols[c], TRUE, rng);
          check_accumulate(g, rows[r], depths[d], cols[c], rng);
        }
    g_test_message("%s: products checked", g->name);
    tested++;
  }
  g_assert_cmpint(tested, >=, 1);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/winograd-gemm/products", test_products);
  return g_test_run();
}
