/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-winograd.c — the CPU backend's whole 3×3 convolutions (Winograd F(2×2, 3×3)
 * and F(3×3, 3×3), tdm-backend-cpu-winograd.c) against the im2col path and a
 * double-precision direct convolution: output, input gradient and weight gradient on
 * random shapes (odd and even sizes, pad 0, 1 and 2, one and three input channels,
 * channel counts that are not multiples of 8, batches that end inside a block of
 * tiles); the same bits on every run; which shapes the rule hands it and the replica's
 * buffers that follow. The gradient check by central differences through a replica is
 * in test-gradcheck.c (/gradcheck/winograd).
 *
 * The tolerance. A float sum of K products is within γ_K = K·u / (1 − K·u) (u = 2⁻²⁴)
 * of the exact one, relative to the sum of the products' magnitudes. Winograd's
 * outputs are such sums, but of the transformed operands: y = Aᵀ [Σ_c (G g Gᵀ) ⊙
 * (Bᵀ d B)] A, so the magnitudes that bound its error are those of the same
 * expression with every matrix and operand replaced by its absolute value, S_w, which
 * is larger than the direct convolution's Σ|g||d| (the transforms mix neighbouring
 * taps: this is Winograd's known error growth, a few times the direct error for F(2,
 * 3), more for larger tiles). Along any path a value meets at most C roundings in the
 * GEMM's sum and, for F(2×2, 3×3), 10 in the transforms (2 for Bᵀ d B, 4 for G g Gᵀ, 4
 * for Aᵀ M A; 28 for F(3×3, 3×3), see check_case), so |error| <= γ_{C+10} · S_w; the
 * tests allow twice that. The backward passes are the same with the adjoint
 * transforms (the input gradient adds up to 4 overlapping tiles: 3 roundings more; the
 * weight gradient's GEMM sums over every tile). The im2col path is held to
 * 2·γ_{9C}·Σ|g||d|, and the two paths to the sum of both bounds. A wrong tap or a
 * misplaced tile is off by about one product, |g||d| ≈ Σ|g||d| / 9C: hundreds of times
 * more than these bounds on the shapes here. */
#include "tdm-backend.h"
#include "tdm-backend-cpu-winograd.h"
#include "tdm-error.h"
#include "tdm-network.h"
#include "tdm-replica.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#define U32 (1.0 / 16777216.0)

static double
gamma_n(double n)
{
  return n * U32 / (1.0 - n * U32);
}

/* The transforms of the tile the backend picks for a shape (tdm_cpu_winograd_tile()):
 * F(2×2, 3×3), or F(3×3, 3×3) for small outputs; AL = M + 2 is the window's side. */
static int M, AL;
static double BT[6][6], G[6][3], AT[4][6];

static void
use_tile(int m)
{
  static const double bt2[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static const double g2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static const double at2[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
  static const double bt3[5][5] = {{2, -1, -2, 1, 0}, {0, -2, -1, 1, 0}, {0, 2, -3, 1, 0},
                                   {0, -1, 0, 1, 0}, {0, 2, -1, -2, 1}};
  static const double g3[5][3] = {{0.5, 0, 0},
                                  {-0.5, -0.5, -0.5},
                                  {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                  {1.0 / 6, 1.0 / 3, 2.0 / 3}, {0, 0, 1}};
  static const double at3[3][5] = {{1, 1, 1, 1, 0}, {0, 1, -1, 2, 0}, {0, 1, 1, 4, 1}};
  static const double bt4[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0},
                                   {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0},
                                   {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static const double g4[6][3] = {{0.25, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                  {-1.0 / 6, 1.0 / 6, -1.0 / 6}, {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                  {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
  static const double at4[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0},
                                   {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
  M = m;
  AL = m + 2;
  for (int i = 0; i < AL; i++) {
    for (int j = 0; j < AL; j++)
      BT[i][j] = m == 2 ? bt2[i][j] : m == 3 ? bt3[i][j] : bt4[i][j];
    for (int j = 0; j < 3; j++)
      G[i][j] = m == 2 ? g2[i][j] : m == 3 ? g3[i][j] : g4[i][j];
  }
  for (int i = 0; i < m; i++)
    for (int j = 0; j < AL; j++)
      AT[i][j] = m == 2 ? at2[i][j] : m == 3 ? at3[i][j] : at4[i][j];
}

typedef struct {
  int n, h, w, c, k, pad;
  int oh, ow, th, tw;
} Shape;

static Shape
shape(int n, int h, int w, int c, int k, int pad)
{
  Shape s = {n, h, w, c, k, pad, h + 2 * pad - 2, w + 2 * pad - 2, 0, 0};
  use_tile(tdm_cpu_winograd_tile(h, w, pad));
  s.th = (s.oh + M - 1) / M;
  s.tw = (s.ow + M - 1) / M;
  return s;
}

static size_t
x_at(const Shape *s, int img, int y, int x, int ch)
{
  return (((size_t)img * s->h + y) * s->w + x) * s->c + ch;
}

static size_t
y_at(const Shape *s, int img, int y, int x, int o)
{
  return (((size_t)img * s->oh + y) * s->ow + x) * s->k + o;
}

static size_t
w_at(const Shape *s, int o, int ky, int kx, int ch)
{
  return (((size_t)o * 3 + ky) * 3 + kx) * s->c + ch;
}

static double
x_or_zero(const Shape *s, const float *x, int img, int y, int xx, int ch)
{
  if (y < 0 || y >= s->h || xx < 0 || xx >= s->w)
    return 0.0;
  return x[x_at(s, img, y, xx, ch)];
}

static double
dy_or_zero(const Shape *s, const float *dy, int img, int y, int x, int o)
{
  if (y >= s->oh || x >= s->ow)
    return 0.0;
  return dy[y_at(s, img, y, x, o)];
}

/* |G| |g| |G|ᵀ for kernel (o, ch). */
static void
u_abs(const Shape *s, const float *wt, int o, int ch, double u[6][6])
{
  for (int i = 0; i < AL; i++)
    for (int j = 0; j < AL; j++) {
      double sum = 0;
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
          sum += fabs(G[i][a]) * fabs((double)wt[w_at(s, o, a, b, ch)]) * fabs(G[j][b]);
      u[i][j] = sum;
    }
}

/* |Bᵀ| |d| |B| for the window of tile (ty, tx) of image img, channel ch. */
static void
v_abs(const Shape *s, const float *x, int img, int ty, int tx, int ch, double v[6][6])
{
  for (int i = 0; i < AL; i++)
    for (int j = 0; j < AL; j++) {
      double sum = 0;
      for (int a = 0; a < AL; a++)
        for (int b = 0; b < AL; b++)
          sum += fabs(BT[i][a]) * fabs(BT[j][b]) *
                 fabs(x_or_zero(s, x, img, M * ty - s->pad + a, M * tx - s->pad + b, ch));
      v[i][j] = sum;
    }
}

/* |A| |dy| |A|ᵀ for tile (ty, tx), output channel o. */
static void
dm_abs(const Shape *s, const float *dy, int img, int ty, int tx, int o, double m[6][6])
{
  for (int i = 0; i < AL; i++)
    for (int j = 0; j < AL; j++) {
      double sum = 0;
      for (int a = 0; a < M; a++)
        for (int b = 0; b < M; b++)
          sum += fabs(AT[a][i]) * fabs(AT[b][j]) *
                 fabs(dy_or_zero(s, dy, img, M * ty + a, M * tx + b, o));
      m[i][j] = sum;
    }
}

/* The largest |got − want| / bound over a buffer; > 1 is a failure. */
static double
worst(const float *got, const double *want, const double *bound, size_t count)
{
  double most = 0;
  for (size_t i = 0; i < count; i++) {
    g_assert_true(isfinite(got[i]));
    double ratio = fabs(got[i] - want[i]) / (bound[i] + 1e-300);
    most = MAX(most, ratio);
  }
  return most;
}

typedef struct {
  TdmBackend *b;
  Shape s;
  size_t xs, ys, ws;
  float *x, *wt, *dy;
  /* Winograd's results and the im2col path's. */
  float *y_w, *dx_w, *dw_w, *y_i, *dx_i, *dw_i;
  float *work, *col;
} Case;

static float *
floats(TdmBackend *b, size_t n)
{
  g_autoptr(GError) error = NULL;
  float *p = tdm_backend_alloc(b, MAX(n, 1) * sizeof(float), &error);
  g_assert_no_error(error);
  return p;
}

static void
fill(float *p, size_t n, double lo, double hi)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (float)g_test_rand_double_range(lo, hi);
}

static void
poison(float *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    p[i] = NAN;
}

static Case
case_new(int n, int h, int w, int c, int k, int pad)
{
  Case t = {0};
  g_autoptr(GError) error = NULL;
  t.b = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  t.s = shape(n, h, w, c, k, pad);
  t.xs = (size_t)n * h * w * c;
  t.ys = (size_t)n * t.s.oh * t.s.ow * k;
  t.ws = (size_t)k * 9 * c;
  t.x = floats(t.b, t.xs);
  t.wt = floats(t.b, t.ws);
  t.dy = floats(t.b, t.ys);
  t.y_w = floats(t.b, t.ys);
  t.y_i = floats(t.b, t.ys);
  t.dx_w = floats(t.b, t.xs);
  t.dx_i = floats(t.b, t.xs);
  t.dw_w = floats(t.b, t.ws);
  t.dw_i = floats(t.b, t.ws);
  t.work = floats(t.b, tdm_cpu_winograd_scratch_floats(c, k));
  t.col = floats(t.b, (size_t)n * t.s.oh * t.s.ow * 9 * c);
  fill(t.x, t.xs, -1, 1);
  fill(t.wt, t.ws, -0.5, 0.5);
  fill(t.dy, t.ys, -1, 1);
  return t;
}

static void
case_free(Case *t)
{
  float *all[] = {t->x, t->wt, t->dy, t->y_w, t->y_i, t->dx_w, t->dx_i, t->dw_w, t->dw_i,
                  t->work, t->col};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(t->b, all[i]);
  g_assert_true(tdm_backend_check(t->b, NULL));
  tdm_backend_free(t->b);
}

static void
run_winograd(Case *t)
{
  const Shape *s = &t->s;
  TdmBackend *b = t->b;
  poison(t->y_w, t->ys);
  poison(t->dx_w, t->xs);
  poison(t->dw_w, t->ws);
  poison(t->work, tdm_cpu_winograd_scratch_floats(s->c, s->k));
  tdm_backend_conv_forward(b, t->y_w, t->x, t->wt, t->work, s->n, s->h, s->w, s->c, s->k, 3,
                           s->pad, 1);
  tdm_backend_conv_backward(b, t->dx_w, t->dw_w, t->dy, t->x, t->wt, t->work, s->n, s->h, s->w,
                            s->c, s->k, 3, s->pad, 1);
  g_assert_true(tdm_backend_check(b, NULL));
}

/* The replica's composition: out = im2col(x) · Wᵀ; dw = dyᵀ · col; dx = col2im(dy · W). */
static void
run_im2col(Case *t)
{
  const Shape *s = &t->s;
  TdmBackend *b = t->b;
  int rows = s->n * s->oh * s->ow, kk = 9 * s->c;
  tdm_backend_im2col(b, t->col, t->x, s->n, s->h, s->w, s->c, 3, 3, s->pad, 1);
  tdm_backend_gemm(b, false, true, rows, s->k, kk, 1.0f, t->col, kk, t->wt, kk, 0.0f, t->y_i,
                   s->k);
  tdm_backend_gemm(b, true, false, s->k, kk, rows, 1.0f, t->dy, s->k, t->col, kk, 0.0f, t->dw_i,
                   kk);
  tdm_backend_gemm(b, false, false, rows, kk, s->k, 1.0f, t->dy, s->k, t->wt, kk, 0.0f, t->col,
                   kk);
  tdm_backend_col2im(b, t->dx_i, t->col, s->n, s->h, s->w, s->c, 3, 3, s->pad, 1);
  g_assert_true(tdm_backend_check(b, NULL));
}

/* Direct convolution in double, each result with its two bounds: the direct sum's
 * Σ|terms| and Winograd's S_w (see the top of the file). */
static void
check_case(int n, int h, int w, int c, int k, int pad)
{
  Case t = case_new(n, h, w, c, k, pad);
  const Shape *s = &t.s;
  run_winograd(&t);
  run_im2col(&t);

  g_autofree double *y = g_new0(double, t.ys), *y_abs = g_new0(double, t.ys);
  g_autofree double *dx = g_new0(double, t.xs), *dx_abs = g_new0(double, t.xs);
  g_autofree double *dw = g_new0(double, t.ws), *dw_abs = g_new0(double, t.ws);
  for (int img = 0; img < n; img++)
    for (int oy = 0; oy < s->oh; oy++)
      for (int ox = 0; ox < s->ow; ox++)
        for (int o = 0; o < k; o++)
          for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++)
              for (int ch = 0; ch < c; ch++) {
                int iy = oy - pad + ky, ix = ox - pad + kx;
                double xv = x_or_zero(s, t.x, img, iy, ix, ch);
                double wv = t.wt[w_at(s, o, ky, kx, ch)];
                double dyv = t.dy[y_at(s, img, oy, ox, o)];
                size_t yi = y_at(s, img, oy, ox, o), wi = w_at(s, o, ky, kx, ch);
                y[yi] += xv * wv;
                y_abs[yi] += fabs(xv * wv);
                dw[wi] += dyv * xv;
                dw_abs[wi] += fabs(dyv * xv);
                if (iy >= 0 && iy < h && ix >= 0 && ix < w) {
                  size_t xi = x_at(s, img, iy, ix, ch);
                  dx[xi] += dyv * wv;
                  dx_abs[xi] += fabs(dyv * wv);
                }
              }

  /* Winograd's magnitudes. */
  g_autofree double *y_sw = g_new0(double, t.ys), *dx_sw = g_new0(double, t.xs);
  g_autofree double *dw_sw = g_new0(double, t.ws);
  g_autofree double *uabs = g_new(double, (size_t)k * c * 36);
  for (int o = 0; o < k; o++)
    for (int ch = 0; ch < c; ch++)
      u_abs(s, t.wt, o, ch, (double(*)[6])(uabs + ((size_t)o * c + ch) * 36));
  g_autofree double *vabs = g_new(double, (size_t)c * 36);
  g_autofree double *mabs = g_new(double, (size_t)k * 36);
  g_autofree double *duabs = g_new0(double, (size_t)k * c * 36);
  for (int img = 0; img < n; img++)
    for (int ty = 0; ty < s->th; ty++)
      for (int tx = 0; tx < s->tw; tx++) {
        for (int ch = 0; ch < c; ch++)
          v_abs(s, t.x, img, ty, tx, ch, (double(*)[6])(vabs + (size_t)ch * 36));
        for (int o = 0; o < k; o++)
          dm_abs(s, t.dy, img, ty, tx, o, (double(*)[6])(mabs + (size_t)o * 36));
        for (int o = 0; o < k; o++)
          for (int ch = 0; ch < c; ch++)
            for (int p = 0; p < 36; p++)
              duabs[((size_t)o * c + ch) * 36 + p] += mabs[o * 36 + p] * vabs[ch * 36 + p];
        /* Forward: each valid output of the tile. */
        for (int a = 0; a < M; a++)
          for (int bb = 0; bb < M; bb++) {
            int oy = M * ty + a, ox = M * tx + bb;
            if (oy >= s->oh || ox >= s->ow)
              continue;
            for (int o = 0; o < k; o++) {
              double sum = 0;
              for (int ch = 0; ch < c; ch++)
                for (int i = 0; i < AL; i++)
                  for (int j = 0; j < AL; j++)
                    sum += fabs(AT[a][i]) * fabs(AT[bb][j]) *
                           uabs[((size_t)o * c + ch) * 36 + i * 6 + j] *
                             vabs[ch * 36 + i * 6 + j];
              y_sw[y_at(s, img, oy, ox, o)] = sum;
            }
          }
        /* Input gradient: the window's pixels, B (Σ_o U ⊙ dM) Bᵀ in magnitudes. */
        for (int r = 0; r < AL; r++)
          for (int q = 0; q < AL; q++) {
            int iy = M * ty - pad + r, ix = M * tx - pad + q;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w)
              continue;
            for (int ch = 0; ch < c; ch++) {
              double sum = 0;
              for (int o = 0; o < k; o++)
                for (int i = 0; i < AL; i++)
                  for (int j = 0; j < AL; j++)
                    sum += fabs(BT[i][r]) * fabs(BT[j][q]) *
                           uabs[((size_t)o * c + ch) * 36 + i * 6 + j] *
                             mabs[o * 36 + i * 6 + j];
              dx_sw[x_at(s, img, iy, ix, ch)] += sum;
            }
          }
      }
  for (int o = 0; o < k; o++)
    for (int ch = 0; ch < c; ch++)
      for (int ky = 0; ky < 3; ky++)
        for (int kx = 0; kx < 3; kx++) {
          double sum = 0;
          for (int i = 0; i < AL; i++)
            for (int j = 0; j < AL; j++)
              sum += fabs(G[i][ky]) * fabs(G[j][kx]) *
                     duabs[((size_t)o * c + ch) * 36 + i * 6 + j];
          dw_sw[w_at(s, o, ky, kx, ch)] = sum;
        }

  /* Bounds: twice γ of the roundings on the longest path, times the magnitudes. */
  double tiles = (double)n * s->th * s->tw;
  /* The larger tiles' transforms take more roundings: per 1-D stage up to 4 additions
   * and products by inexact constants (−3, ⅙, ⅓; −5, 1⁄12, 1⁄24), the constants
   * themselves rounded. F(3×3, 3×3): 10 for the data, 10 for the weights, 8 for the
   * output; F(4×4, 3×3): 14, 12 and 8. */
  double extra = M == 2 ? 0 : M == 3 ? 18 : 24;
  double g_y = 2 * gamma_n(c + 10 + extra), g_dx = 2 * gamma_n(k + 13 + extra),
         g_dw = 2 * gamma_n(tiles + 10 + extra);
  double gi_y = 2 * gamma_n(9.0 * c), gi_dx = 2 * gamma_n(9.0 * k),
         gi_dw = 2 * gamma_n((double)n * s->oh * s->ow);
  g_autofree double *bound = g_new(double, MAX(t.ys, MAX(t.xs, t.ws)));
  g_autofree double *ref = g_new(double, MAX(t.ys, MAX(t.xs, t.ws)));

  struct {
    const char *what;
    size_t count;
    const float *wino, *im2col;
    const double *exact, *direct_abs, *wino_abs;
    double gw, gi;
  } parts[] = {
    {"y", t.ys, t.y_w, t.y_i, y, y_abs, y_sw, g_y, gi_y},
    {"dx", t.xs, t.dx_w, t.dx_i, dx, dx_abs, dx_sw, g_dx, gi_dx},
    {"dw", t.ws, t.dw_w, t.dw_i, dw, dw_abs, dw_sw, g_dw, gi_dw},
  };
  for (guint p = 0; p < G_N_ELEMENTS(parts); p++) {
    for (size_t i = 0; i < parts[p].count; i++)
      bound[i] = parts[p].gw * parts[p].wino_abs[i];
    double wino = worst(parts[p].wino, parts[p].exact, bound, parts[p].count);
    for (size_t i = 0; i < parts[p].count; i++)
      bound[i] = parts[p].gi * parts[p].direct_abs[i];
    double im2col = worst(parts[p].im2col, parts[p].exact, bound, parts[p].count);
    for (size_t i = 0; i < parts[p].count; i++) {
      bound[i] = parts[p].gw * parts[p].wino_abs[i] + parts[p].gi * parts[p].direct_abs[i];
      ref[i] = parts[p].im2col[i];
    }
    double between = worst(parts[p].wino, ref, bound, parts[p].count);
    g_test_message("F(%d×%d) n=%d %d×%d c=%d k=%d pad %d, %s: Winograd %.3f, im2col %.3f, "
                   "between %.3f of their bounds", M, M, n, h, w, c, k, pad, parts[p].what,
                   wino, im2col, between);
    g_assert_cmpfloat(wino, <=, 1.0);
    g_assert_cmpfloat(im2col, <=, 1.0);
    g_assert_cmpfloat(between, <=, 1.0);
  }
  case_free(&t);
}

static void
test_shapes(void)
{
  /* n, h, w, c, k, pad: odd and even sizes (odd outputs end in half tiles), one and
   * three input channels, counts that are not multiples of 8. */
  static const int cases[][6] = {
    {1, 3, 3, 1, 1, 0},   {2, 4, 4, 1, 5, 1},  {1, 5, 7, 3, 4, 0},  {3, 6, 5, 3, 9, 1},
    {2, 7, 7, 5, 3, 2},   {1, 8, 9, 13, 17, 1}, {2, 9, 6, 19, 11, 0}, {1, 4, 11, 8, 8, 2},
    {2, 10, 10, 9, 7, 1}, {1, 3, 4, 2, 2, 2},
    /* The tile each output size gets: 3×3 and 5×5, F(3×3, 3×3); 4×4, 4×6, 5×4, 7×7
     * and 8×8, F(4×4, 3×3) (part tiles at the edges of the odd ones); 2×2, 2×5 and
     * 2×6, F(2×2, 3×3). */
    {2, 3, 3, 5, 7, 1},   {1, 5, 5, 9, 4, 0},   {3, 3, 3, 19, 10, 1}, {1, 7, 7, 3, 5, 0},
    {2, 6, 6, 5, 3, 0},   {1, 4, 6, 13, 17, 1}, {2, 5, 4, 6, 5, 1},   {1, 7, 7, 9, 4, 1},
    {2, 8, 8, 5, 7, 1},   {2, 4, 4, 3, 5, 0},   {1, 4, 7, 9, 6, 0},   {3, 2, 6, 7, 9, 1},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++)
    check_case(cases[i][0], cases[i][1], cases[i][2], cases[i][3], cases[i][4], cases[i][5]);
  /* And some drawn at random (g_test_rand: --seed replays them). */
  for (int i = 0; i < 6; i++)
    check_case(g_test_rand_int_range(1, 4), g_test_rand_int_range(3, 12),
               g_test_rand_int_range(3, 12), g_test_rand_int_range(1, 20),
               g_test_rand_int_range(1, 20), g_test_rand_int_range(0, 3));
  /* The tiles named above (TANDEM_CPU_WINOGRAD=2 or 3 caps them, for comparisons). */
  if (g_getenv("TANDEM_CPU_WINOGRAD") != NULL)
    return;
  g_assert_cmpint(tdm_cpu_winograd_tile(3, 3, 1), ==, 3);
  g_assert_cmpint(tdm_cpu_winograd_tile(7, 7, 0), ==, 3);
  g_assert_cmpint(tdm_cpu_winograd_tile(28, 28, 1), ==, 4);
  g_assert_cmpint(tdm_cpu_winograd_tile(7, 7, 1), ==, 4);
  g_assert_cmpint(tdm_cpu_winograd_tile(4, 4, 0), ==, 2);
  g_assert_cmpint(tdm_cpu_winograd_tile(4, 7, 0), ==, 2);
}

/* More tiles than one block (the last block partial, blocks crossing images). */
static void
test_many_blocks(void)
{
  check_case(7, 13, 12, 4, 6, 1);
  check_case(150, 3, 3, 4, 5, 1);
  check_case(40, 4, 6, 4, 6, 1);  /* F(4×4, 3×3) */
  check_case(300, 4, 4, 3, 5, 0); /* F(2×2, 3×3) */
}

/* The same bits every run, whatever the scratch held before, with one OpenBLAS thread
 * and with two: nothing here is threaded or goes through OpenBLAS, so the blocks and
 * their order never depend on the thread count. (The im2col path's products do:
 * OpenBLAS's threaded sgemm splits the rows so that some go through its edge kernels,
 * which round differently.) */
static void
test_deterministic(void)
{
  Case t = case_new(4, 18, 17, 40, 36, 1);
  const Shape *s = &t.s;
  g_autofree float *y = g_new(float, t.ys), *dx = g_new(float, t.xs), *dw = g_new(float, t.ws);
  int threads = openblas_get_num_threads();
  for (int count = 1; count <= 2; count++) {
    openblas_set_num_threads(count);
    for (int run = 0; run < 2; run++) {
      run_winograd(&t);
      if (run == 0) {
        memcpy(y, t.y_w, t.ys * sizeof(float));
        memcpy(dx, t.dx_w, t.xs * sizeof(float));
        memcpy(dw, t.dw_w, t.ws * sizeof(float));
        continue;
      }
      g_assert_cmpmem(y, t.ys * sizeof(float), t.y_w, t.ys * sizeof(float));
      g_assert_cmpmem(dx, t.xs * sizeof(float), t.dx_w, t.xs * sizeof(float));
      g_assert_cmpmem(dw, t.ws * sizeof(float), t.dw_w, t.ws * sizeof(float));
    }
    /* Without dx (a first layer), dw is the same. */
    poison(t.dw_w, t.ws);
    tdm_backend_conv_backward(t.b, NULL, t.dw_w, t.dy, t.x, t.wt, t.work, s->n, s->h, s->w,
                              s->c, s->k, 3, s->pad, 1);
    g_assert_cmpmem(dw, t.ws * sizeof(float), t.dw_w, t.ws * sizeof(float));
  }
  openblas_set_num_threads(threads);
  case_free(&t);
}

/* An image's output and input gradient are the same bits whatever batch it is in,
 * wherever the blocks of tiles begin and end around it (each output of the products
 * is its own chain): a worker's shard gives each sample what one worker would. The
 * weight gradient sums over the batch, and is not compared. */
static void
test_batch_independent(void)
{
  Case whole = case_new(7, 20, 21, 24, 20, 1);
  run_winograd(&whole);
  const Shape *s = &whole.s;
  const size_t x_image = (size_t)s->h * s->w * s->c, y_image = (size_t)s->oh * s->ow * s->k;
  for (int first = 1; first <= 4; first += 3) {
    const int n = 3;
    Case part = case_new(n, s->h, s->w, s->c, s->k, s->pad);
    memcpy(part.x, whole.x + first * x_image, n * x_image * sizeof(float));
    memcpy(part.wt, whole.wt, whole.ws * sizeof(float));
    memcpy(part.dy, whole.dy + first * y_image, n * y_image * sizeof(float));
    run_winograd(&part);
    g_assert_cmpmem(part.y_w, n * y_image * sizeof(float), whole.y_w + first * y_image,
                    n * y_image * sizeof(float));
    g_assert_cmpmem(part.dx_w, n * x_image * sizeof(float), whole.dx_w + first * x_image,
                    n * x_image * sizeof(float));
    case_free(&part);
  }
  case_free(&whole);
}

/* The AVX2 and AVX-512 copies (products and transforms) give the same bits: each
 * product element is one chain of FMAs in order, each transform the same operations on
 * each channel whatever the vector width. (The generic copy, without FMA, is held to
 * the bounds above by the winograd-generic run of this test.) */
static void
test_copies_agree(void)
{
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vl") ||
      !__builtin_cpu_supports("avx512dq") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("fma")) {
    g_test_skip("needs AVX-512");
    return;
  }
  static const int shapes[][6] = {{5, 28, 28, 32, 64, 1}, {9, 7, 7, 24, 40, 1},
                                  {3, 3, 3, 20, 19, 1}, {4, 9, 10, 17, 33, 0}};
  const char *saved = g_getenv("TANDEM_CPU_KERNELS");
  g_autofree char *keep = g_strdup(saved);
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    const int *sh = shapes[i];
    Case t[2];
    for (int copy = 0; copy < 2; copy++) {
      g_setenv("TANDEM_CPU_KERNELS", copy == 0 ? "avx2" : "avx512", TRUE);
      t[copy] = case_new(sh[0], sh[1], sh[2], sh[3], sh[4], sh[5]);
      if (copy == 1) {
        memcpy(t[1].x, t[0].x, t[0].xs * sizeof(float));
        memcpy(t[1].wt, t[0].wt, t[0].ws * sizeof(float));
        memcpy(t[1].dy, t[0].dy, t[0].ys * sizeof(float));
      }
      run_winograd(&t[copy]);
    }
    g_assert_cmpmem(t[0].y_w, t[0].ys * sizeof(float), t[1].y_w, t[1].ys * sizeof(float));
    g_assert_cmpmem(t[0].dx_w, t[0].xs * sizeof(float), t[1].dx_w, t[1].xs * sizeof(float));
    g_assert_cmpmem(t[0].dw_w, t[0].ws * sizeof(float), t[1].dw_w, t[1].ws * sizeof(float));
    case_free(&t[0]);
    case_free(&t[1]);
  }
  if (keep != NULL)
    g_setenv("TANDEM_CPU_KERNELS", keep, TRUE);
  else
    g_unsetenv("TANDEM_CPU_KERNELS");
#else
  g_test_skip("x86-64 only");
#endif
}

/* A shape it does not run is an error naming the operation, not a crash. */
static void
test_bad_shape(void)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_cpu_new(&error);
  float x[64] = {0}, wt[64] = {0}, y[64], work[4096];
  tdm_backend_conv_forward(b, y, x, wt, work, 1, 4, 4, 1, 1, 5, 2, 1);
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_BACKEND);
  g_assert_nonnull(strstr(error->message, "conv_forward"));
  tdm_backend_free(b);
}

/* Which convolutions the CPU runs whole: 3×3 of stride 1 with enough input channels
 * and output; never on CUDA. The replica keeps the scratch instead of columns. */
#define CPU TDM_BACKEND_CPU

static void
test_rule(void)
{
  if (g_strcmp0(g_getenv("TANDEM_CPU_WINOGRAD"), "0") == 0) {
    g_test_skip("TANDEM_CPU_WINOGRAD=0 turns the rule off");
    return;
  }
  g_assert_cmpuint(tdm_backend_conv_work_floats(CPU, 28, 28, 32, 64, 3, 1, 1), >, 0);
  /* Never more than what the operations are documented to need for any shape. */
  g_assert_cmpuint(tdm_backend_conv_work_floats(CPU, 28, 28, 32, 64, 3, 1, 1), <=,
                   tdm_cpu_winograd_scratch_floats(32, 64));
  g_assert_cmpuint(tdm_backend_conv_work_floats(CPU, 7, 7, 128, 256, 3, 1, 1), >, 0);
  /* The first layer of grey images, strides, other kernels, tiny outputs: im2col. */
  g_assert_cmpuint(tdm_backend_conv_work_floats(CPU, 28, 28, 1, 32, 3, 1, 1), ==, 0);
  g_assert_cmpuint(tdm_backend_conv_work_floats(CPU, 28, 28, 32, 64, 3, 1, 2), ==, 0);
  g_assert_cmpuint(tdm_backend_conv_work_floats(CPU, 28, 28, 32, 64, 5, 2, 1), ==, 0);
  g_assert_cmpuint(tdm_backend_conv_work_floats(CPU, 3, 3, 256, 256, 3, 1, 1), >, 0);
  g_assert_cmpuint(tdm_backend_conv_work_floats(CPU, 3, 3, 32, 32, 3, 0, 1), ==, 0);
  g_assert_cmpuint(tdm_backend_conv_work_floats(TDM_BACKEND_CUDA,
                                                 28, 28, 32, 64, 3, 1, 1), ==, 0);

  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net =
    tdm_network_new("conv16k3p1,relu,conv24k3p1,relu,conv8k3s2p1,relu,conv8k1,gap,fc10", 12,
                    12, 3, 10, &error);
  g_assert_no_error(error);
  static const gboolean whole[] = {FALSE, TRUE, FALSE, FALSE};
  int conv = 0;
  for (int i = 0; i < net->layer_count; i++) {
    if (net->layers[i].kind != TDM_LAYER_CONV)
      continue;
    TdmLayerBuffers cpu = tdm_replica_layer_buffers(net, i, TDM_BACKEND_CPU, TDM_PRECISION_FP32);
    TdmLayerBuffers gpu = tdm_replica_layer_buffers(net, i, TDM_BACKEND_CUDA, TDM_PRECISION_FP32);
    g_assert_cmpint(cpu.conv_work > 0, ==, whole[conv]);
    g_assert_cmpuint(gpu.conv_work, ==, 0);
    if (whole[conv])
      g_assert_cmpuint(cpu.columns, ==, 0);
    else
      g_assert_cmpuint(cpu.columns, ==, gpu.columns);
    conv++;
  }
  g_assert_cmpint(conv, ==, 4);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/winograd/shapes", test_shapes);
  g_test_add_func("/winograd/many-blocks", test_many_blocks);
  g_test_add_func("/winograd/deterministic", test_deterministic);
  g_test_add_func("/winograd/batch-independent", test_batch_independent);
  g_test_add_func("/winograd/copies-agree", test_copies_agree);
  g_test_add_func("/winograd/bad-shape", test_bad_shape);
  g_test_add_func("/winograd/rule", test_rule);
  return g_test_run();
}
