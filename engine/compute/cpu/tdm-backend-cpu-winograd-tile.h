/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-winograd-tile.h — the transforms of one Winograd tile size F(M×M,
 * 3×3) for the CPU backend's whole convolutions, written once for the sizes that have
 * their own file: tdm-backend-cpu-winograd3.c (M = 3) and tdm-backend-cpu-winograd4.c
 * (M = 4) define R = M + 2, the matrices BT[R][R], G[R][3] and AT[M][R], and
 * WINO_NAME(), then include this. Every loop runs over those constants, so the
 * compiler unrolls it and folds the zero and unit coefficients away. The contracts
 * are those of F(2×2, 3×3)'s transforms in tdm-backend-cpu-winograd.c, with R × R
 * positions. Not for anything else. */

/* Σ_l coef[l] · v[l] over the non-zero coefficients in order, ±1 as an addition or
 * subtraction. Inlined with constant coefficients and unrolled, the tests on them
 * fold away. */
static inline __attribute__((always_inline)) Vec
combine(const float *coef, const Vec *v, int stride, int count)
{
  Vec acc = {0};
  gboolean first = TRUE;
#pragma GCC unroll 6
  for (int l = 0; l < count; l++) {
    const float a = coef[l * stride];
    if (a == 0.0f)
      continue;
    const Vec term = a == 1.0f ? v[l] : a == -1.0f ? -v[l] : a * v[l];
    acc = first ? term : acc + term;
    first = FALSE;
  }
  return acc;
}

/* U[p][o][i] = (G g Gᵀ)[p], one channel group at a time. */
static inline __attribute__((always_inline)) void
weights_group(float *uo, size_t pstride, const float *g, int c, int i, int count)
{
  Vec gv[3][3], t[R][3];
#pragma GCC unroll 3
  for (int a = 0; a < 3; a++)
#pragma GCC unroll 3
    for (int b = 0; b < 3; b++)
      gv[a][b] = ld(g + (a * 3 + b) * c + i, count);
#pragma GCC unroll 6
  for (int p = 0; p < R; p++)
#pragma GCC unroll 3
    for (int b = 0; b < 3; b++) {
      const Vec col[3] = {gv[0][b], gv[1][b], gv[2][b]};
      t[p][b] = combine(G[p], col, 1, 3);
    }
#pragma GCC unroll 6
  for (int p = 0; p < R; p++)
#pragma GCC unroll 6
    for (int q = 0; q < R; q++)
      st(uo + (size_t)(p * R + q) * pstride + i, combine(G[q], t[p], 1, 3), count);
}

WINOGRAD_CLONES void
WINO_NAME(weights)(float *u, const float *wt, int k, int c)
{
  const size_t pstride = (size_t)k * c;
  for (int o = 0; o < k; o++) {
    const float *g = wt + (size_t)o * 9 * c;
    float *uo = u + (size_t)o * c;
    int i = 0;
    for (; i + VL <= c; i += VL)
      weights_group(uo, pstride, g, c, i, VL);
    if (i < c)
      weights_group(uo, pstride, g, c, i, c - i);
  }
}

/* dw[o][·][·][i] = Gᵀ dU G. */
static inline __attribute__((always_inline)) void
weights_adjoint_group(float *g, const float *uo, size_t pstride, int c, int i, int count)
{
  Vec du[R][R], t[3][R];
#pragma GCC unroll 6
  for (int p = 0; p < R; p++)
#pragma GCC unroll 6
    for (int q = 0; q < R; q++)
      du[p][q] = ld(uo + (size_t)(p * R + q) * pstride + i, count);
  /* Gᵀ's rows are G's columns: coefficients G[·][a], stride 3. */
#pragma GCC unroll 3
  for (int a = 0; a < 3; a++)
#pragma GCC unroll 6
    for (int q = 0; q < R; q++) {
      Vec col[R];
#pragma GCC unroll 6
      for (int p = 0; p < R; p++)
        col[p] = du[p][q];
      t[a][q] = combine(&G[0][a], col, 3, R);
    }
#pragma GCC unroll 3
  for (int a = 0; a < 3; a++)
#pragma GCC unroll 3
    for (int b = 0; b < 3; b++)
      st(g + (a * 3 + b) * c + i, combine(&G[0][b], t[a], 3, R), count);
}

WINOGRAD_CLONES void
WINO_NAME(weights_adjoint)(float *dw, const float *du, int k, int c)
{
  const size_t pstride = (size_t)k * c;
  for (int o = 0; o < k; o++) {
    float *g = dw + (size_t)o * 9 * c;
    const float *uo = du + (size_t)o * c;
    int i = 0;
    for (; i + VL <= c; i += VL)
      weights_adjoint_group(g, uo, pstride, c, i, VL);
    if (i < c)
      weights_adjoint_group(g, uo, pstride, c, i, c - i);
  }
}

/* V = Bᵀ d B for one channel group of one tile. */
static inline __attribute__((always_inline)) void
input_group(float *vj, size_t pstride, const float *const *px, int i, int count)
{
  Vec d[R][R], t[R][R];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 6
    for (int q = 0; q < R; q++)
      d[r][q] = ld(px[r * R + q] + i, count);
#pragma GCC unroll 6
  for (int p = 0; p < R; p++)
#pragma GCC unroll 6
    for (int q = 0; q < R; q++) {
      Vec col[R];
#pragma GCC unroll 6
      for (int r = 0; r < R; r++)
        col[r] = d[r][q];
      t[p][q] = combine(BT[p], col, 1, R);
    }
#pragma GCC unroll 6
  for (int p = 0; p < R; p++)
#pragma GCC unroll 6
    for (int q = 0; q < R; q++)
      st(vj + (size_t)(p * R + q) * pstride + i, combine(BT[q], t[p], 1, R), count);
}

/* The R × R pixels of tile t's window: pointers into x (or dx), or `outside` where the
 * window leaves the image. */
static inline void
window(const float **px, const Geometry *g, const float *x, const float *outside, size_t t)
{
  size_t img;
  int y0, x0;
  tile_origin(g, t, &img, &y0, &x0);
  const float *base = x + img * g->h * g->w * g->c;
  for (int r = 0; r < R; r++)
    for (int q = 0; q < R; q++) {
      const int yy = y0 + r, xx = x0 + q;
      px[r * R + q] = yy >= 0 && yy < g->h && xx >= 0 && xx < g->w
                        ? base + ((size_t)yy * g->w + xx) * g->c
                        : outside;
    }
}

WINOGRAD_CLONES void
WINO_NAME(input)(float *v, const Geometry *g, const float *x, const float *zero, size_t t0,
                int count)
{
  const int c = g->c;
  const size_t pstride = pos_stride(c);
  for (int j = 0; j < count; j++) {
    const float *px[R * R];
    window(px, g, x, zero, t0 + j);
    float *vj = v + (size_t)j * c;
    int i = 0;
    for (; i + VL <= c; i += VL)
      input_group(vj, pstride, px, i, VL);
    if (i < c)
      input_group(vj, pstride, px, i, c - i);
  }
}

/* The window's pixels += B dV Bᵀ (B's rows are Bᵀ's columns: stride R); pixels
 * outside the image (NULL) are dropped. */
static inline __attribute__((always_inline)) void
input_adjoint_group(float *const *px, const float *vj, size_t pstride, int i, int count)
{
  Vec a[R][R], t[R][R];
#pragma GCC unroll 6
  for (int p = 0; p < R; p++)
#pragma GCC unroll 6
    for (int q = 0; q < R; q++)
      a[p][q] = ld(vj + (size_t)(p * R + q) * pstride + i, count);
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 6
    for (int q = 0; q < R; q++) {
      Vec col[R];
#pragma GCC unroll 6
      for (int p = 0; p < R; p++)
        col[p] = a[p][q];
      t[r][q] = combine(&BT[0][r], col, R, R);
    }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 6
    for (int q = 0; q < R; q++) {
      float *p = px[r * R + q];
      if (p != NULL)
        st(p + i, ld(p + i, count) + combine(&BT[0][q], t[r], R, R), count);
    }
}

WINOGRAD_CLONES void
WINO_NAME(input_adjoint)(float *dx, const Geometry *g, const float *dv, size_t t0, int count)
{
  const int c = g->c;
  const size_t pstride = pos_stride(c);
  for (int j = 0; j < count; j++) {
    float *px[R * R];
    window((const float **)px, g, dx, NULL, t0 + j);
    const float *vj = dv + (size_t)j * c;
    int i = 0;
    for (; i + VL <= c; i += VL)
      input_adjoint_group(px, vj, pstride, i, VL);
    if (i < c)
      input_adjoint_group(px, vj, pstride, i, c - i);
  }
}

/* The M × M outputs of tile t: pointers into y (or dy), or `outside` past the bottom or
 * right edge. */
static inline void
outputs(const float **py, const Geometry *g, const float *y, const float *outside, size_t t)
{
  size_t img;
  int y0, x0;
  tile_origin(g, t, &img, &y0, &x0);
  const int oy = y0 + g->pad, ox = x0 + g->pad;
  const float *base = y + img * g->oh * g->ow * g->k;
  for (int a = 0; a < M; a++)
    for (int b = 0; b < M; b++)
      py[a * M + b] = oy + a < g->oh && ox + b < g->ow
                        ? base + ((size_t)(oy + a) * g->ow + ox + b) * g->k
                        : outside;
}

/* y = Aᵀ M A for one channel group of one tile. */
static inline __attribute__((always_inline)) void
output_group(float *const *py, const float *mj, size_t pstride, int o, int count)
{
  Vec m[R][R], t[M][R];
#pragma GCC unroll 6
  for (int p = 0; p < R; p++)
#pragma GCC unroll 6
    for (int q = 0; q < R; q++)
      m[p][q] = ld(mj + (size_t)(p * R + q) * pstride + o, count);
#pragma GCC unroll 4
  for (int a = 0; a < M; a++)
#pragma GCC unroll 6
    for (int q = 0; q < R; q++) {
      Vec col[R];
#pragma GCC unroll 6
      for (int p = 0; p < R; p++)
        col[p] = m[p][q];
      t[a][q] = combine(AT[a], col, 1, R);
    }
#pragma GCC unroll 4
  for (int a = 0; a < M; a++)
#pragma GCC unroll 4
    for (int b = 0; b < M; b++)
      if (py[a * M + b] != NULL)
        st(py[a * M + b] + o, combine(AT[b], t[a], 1, R), count);
}

WINOGRAD_CLONES void
WINO_NAME(output)(float *y, const Geometry *g, const float *m, size_t t0, int count)
{
  const int k = g->k;
  const size_t pstride = pos_stride(k);
  for (int j = 0; j < count; j++) {
    float *py[M * M];
    outputs((const float **)py, g, y, NULL, t0 + j);
    const float *mj = m + (size_t)j * k;
    int o = 0;
    for (; o + VL <= k; o += VL)
      output_group(py, mj, pstride, o, VL);
    if (o < k)
      output_group(py, mj, pstride, o, k - o);
  }
}

/* dM = A dy Aᵀ (A's rows are Aᵀ's columns: stride R) for one channel group. */
static inline __attribute__((always_inline)) void
output_adjoint_group(float *mj, size_t pstride, const float *const *pd, int o, int count)
{
  Vec d[M][M], t[R][M];
#pragma GCC unroll 4
  for (int a = 0; a < M; a++)
#pragma GCC unroll 4
    for (int b = 0; b < M; b++)
      d[a][b] = ld(pd[a * M + b] + o, count);
#pragma GCC unroll 6
  for (int p = 0; p < R; p++)
#pragma GCC unroll 4
    for (int b = 0; b < M; b++) {
      Vec col[M];
#pragma GCC unroll 4
      for (int a = 0; a < M; a++)
        col[a] = d[a][b];
      t[p][b] = combine(&AT[0][p], col, R, M);
    }
#pragma GCC unroll 6
  for (int p = 0; p < R; p++)
#pragma GCC unroll 6
    for (int q = 0; q < R; q++)
      st(mj + (size_t)(p * R + q) * pstride + o, combine(&AT[0][q], t[p], R, M), count);
}

WINOGRAD_CLONES void
WINO_NAME(output_adjoint)(float *dm, const Geometry *g, const float *dy, const float *zero,
                         size_t t0, int count)
{
  const int k = g->k;
  const size_t pstride = pos_stride(k);
  for (int j = 0; j < count; j++) {
    const float *pd[M * M];
    outputs(pd, g, dy, zero, t0 + j);
    float *mj = dm + (size_t)j * k;
    int o = 0;
    for (; o + VL <= k; o += VL)
      output_adjoint_group(mj, pstride, pd, o, VL);
    if (o < k)
      output_adjoint_group(mj, pstride, pd, o, k - o);
  }
}
