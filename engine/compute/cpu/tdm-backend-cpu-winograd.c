/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-winograd.c — 3×3 stride-1 convolutions by Winograd's minimal
 * filtering (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016)
 * on the CPU. F(2×2, 3×3): each 2×2 block of outputs ("tile") is Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d
 * B)] A, from the 4×4 input window d under it and the 3×3 kernel g; summed over input
 * channels, the ⊙ becomes, for each of the 16 positions of the 4×4, one GEMM (tiles ×
 * C_in · C_in × C_out): 16 multiplications per tile and channel pair where im2col's
 * GEMM does 36, and no 9× column matrix. F(3×3, 3×3) is the same with 3×3 tiles, 5×5
 * windows and 25 positions (its transforms in tdm-backend-cpu-winograd3.c): 25 for
 * 81, taken where it needs fewer products (tile_size()). The backward runs the
 * transposed maps: dM = A dy Aᵀ, dV = dM · U (the input gradient, scattered back as
 * B dV Bᵀ over the overlapping windows) and dU = Σ dMᵀ · V (the weight gradient,
 * Gᵀ dU G).
 *
 * Tiles go WINOGRAD_BLOCK at a time so that a block's transformed input and products
 * stay in the caches between the transform, the GEMMs and the inverse transform. The
 * GEMMs are the CPU copy's own register tiles (tdm-cpu-winograd-gemm.c), the
 * transformed weights packed for them once a call: a tile's output and input gradient
 * are the same bits whatever block, batch or shard it is in. Everything is in a fixed
 * order (the blocks in sequence, the weight gradient summed block after block into the
 * same buffer), and nothing here is threaded, so a shape gives the same bits every run
 * whatever the thread count (OpenBLAS's threaded sgemm does not: the im2col path's
 * products differ in the last bits between one and two threads). Not the im2col path
 * (tdm-backend-cpu.c and tdm-cpu-kernels.c), nor any other kernel size or stride. */
#include "tdm-backend-cpu-winograd.h"
#include "tdm-i18n.h"
#include "tdm-backend-cpu-winograd-private.h"
#include "tdm-backend-cpu-private.h"
#include "tdm-error.h"

/* Below this many input channels the per-position GEMMs are too thin to pay for the
 * transforms (a first layer on grey images has one). */
#define WINOGRAD_MIN_C 8

/* The largest tile: F(4×4, 3×3). */
#define WINOGRAD_MAX_TILE 4

/* TANDEM_CPU_WINOGRAD in the environment, read once: 0 turns Winograd off (the im2col
 * path, for comparisons); 2 or 3 caps the tile at 2×2 or 3×3 outputs; anything else,
 * or nothing, is the default. */
static int
winograd_setting(void)
{
  static int setting = -1;
  if (g_atomic_int_get(&setting) < 0) {
    const char *v = g_getenv("TANDEM_CPU_WINOGRAD");
    int value = WINOGRAD_MAX_TILE;
    if (v != NULL && (g_str_equal(v, "0") || g_str_equal(v, "2") || g_str_equal(v, "3")))
      value = v[0] - '0';
    g_atomic_int_set(&setting, value);
  }
  return g_atomic_int_get(&setting);
}

/* The tile for an output of oh × ow: the one whose tiles need the fewest
 * multiplications, counting the products an edge tile wastes past the output, the
 * smaller tile on a tie (cheaper transforms, smaller rounding error): F(2×2, 3×3) 16
 * for 4 outputs, F(3×3, 3×3) 25 for 9, F(4×4, 3×3) 36 for 16. Measured
 * (bench-winograd, bench/NOTES.md): on the resnet preset's convolutions (outputs 28,
 * 14, 7 and 3 wide) F(3×3, 3×3) ran 1.1–1.6× faster than F(2×2, 3×3), and F(4×4, 3×3)
 * then ran 1.0–1.3× faster than F(3×3, 3×3) where it needs fewer products (outputs
 * 28, 14 and 7 wide; bench/NOTES.md). */
static int
tile_size(int oh, int ow)
{
  int best = 2;
  double fewest = 16.0 * ((oh + 1) / 2) * ((ow + 1) / 2);
  for (int m = 3; m <= MAX(2, winograd_setting()); m++) {
    double products = (double)(m + 2) * (m + 2) * ((oh + m - 1) / m) * ((ow + m - 1) / m);
    if (products < fewest) {
      best = m;
      fewest = products;
    }
  }
  return best;
}

static Geometry
geometry(int n, int h, int w, int c, int k, int pad)
{
  Geometry g = {.n = n, .h = h, .w = w, .c = c, .k = k, .pad = pad};
  g.oh = h + 2 * pad - 2;
  g.ow = w + 2 * pad - 2;
  g.m = tile_size(g.oh, g.ow);
  g.th = (g.oh + g.m - 1) / g.m;
  g.tw = (g.ow + g.m - 1) / g.m;
  g.tiles = (size_t)n * g.th * g.tw;
  return g;
}

static int
positions(int m)
{
  return (m + 2) * (m + 2);
}

/* Floats of one position's packed weights, forward (C_in deep, C_out wide) or for the
 * input gradient (C_out deep, C_in wide), for any copy's panel. */
static size_t
packed_stride(int c, int k)
{
  const size_t most = TDM_CPU_WINOGRAD_PANEL_MAX;
  return MAX((size_t)c * ((k + most - 1) / most * most),
             (size_t)k * ((c + most - 1) / most * most));
}

/* The scratch for P positions (16, 25 or 36): U (P × k × c, the transformed weights),
 * dU (the same, the weight gradient's sum), U packed for the products (P sets of panels),
 * V (P × BLOCK × c: a block's transformed inputs, later their gradient), M (P × BLOCK ×
 * k: the products, or the output gradient transformed), and one zero pixel, as wide as
 * the wider of x and y, standing in for the padding and for dy past the edge. */
static size_t
scratch_floats(int p, int c, int k)
{
  return 2 * (size_t)p * k * c + (size_t)p * packed_stride(c, k) +
         (size_t)p * (pos_stride(c) + pos_stride(k)) + (size_t)MAX(c, k);
}

size_t
tdm_cpu_winograd_scratch_floats(int c, int out_c)
{
  return scratch_floats(positions(WINOGRAD_MAX_TILE), c, out_c);
}

typedef struct {
  float *u, *du, *packed, *v, *m, *zero;
} Scratch;

static Scratch
scratch(float *work, int p, int c, int k)
{
  Scratch s;
  s.u = work;
  s.du = s.u + (size_t)p * k * c;
  s.packed = s.du + (size_t)p * k * c;
  s.v = s.packed + (size_t)p * packed_stride(c, k);
  s.m = s.v + (size_t)p * pos_stride(c);
  s.zero = s.m + (size_t)p * pos_stride(k);
  return s;
}

/* Floats of scratch conv_forward and conv_backward need for this shape (any batch),
 * or 0 when the CPU backend does not run it by Winograd: kernel not 3×3, stride not
 * 1, too few input channels for the products to pay, an output so small that the
 * tiles' waste eats the saving, or TANDEM_CPU_WINOGRAD=0 in the environment (read
 * once, for comparisons; 2 or 3 there caps the tile size). */
static size_t
work_floats(int h, int w, int c, int out_c, int kernel, int pad, int stride)
{
  if (winograd_setting() == 0 || kernel != 3 || stride != 1 || c < WINOGRAD_MIN_C ||
      out_c < 1 ||
      h + 2 * pad < 3 || w + 2 * pad < 3)
    return 0;
  /* Multiplications per image and channel pair, against im2col's 9 an output. Above
   * a ratio of 0.7 the transforms eat what the GEMMs save: F(2×2, 3×3) on a 3×3
   * output (64 against 81, 0.79) ran no faster than im2col in bench-winograd, on a 7×7
   * one (256 against 441) faster. A 1×1 output (a tile of 16 or 25 for 9) stays with
   * im2col. */
  Geometry g = geometry(1, h, w, c, out_c, pad);
  if ((double)positions(g.m) * g.th * g.tw > 0.7 * 9.0 * g.oh * g.ow)
    return 0;
  return scratch_floats(positions(g.m), c, out_c);
}

int
tdm_cpu_winograd_tile(int h, int w, int pad)
{
  return tile_size(h + 2 * pad - 2, w + 2 * pad - 2);
}

/* U[p][o][i] = (G g Gᵀ)[p] for every output channel o and input channel i, g the 3×3
 * kernel wt[o][·][·][i]. G = [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1]. */
WINOGRAD_CLONES static void
transform_weights(float *restrict u, const float *restrict wt, int k, int c)
{
  const size_t pstride = (size_t)k * c;
  for (int o = 0; o < k; o++) {
    const float *restrict g = wt + (size_t)o * 9 * c;
    float *restrict uo = u + (size_t)o * c;
    for (int i = 0; i < c; i++) {
      float r[4][3];
      for (int col = 0; col < 3; col++) {
        const float g0 = g[(0 * 3 + col) * c + i], g1 = g[(1 * 3 + col) * c + i];
        const float g2 = g[(2 * 3 + col) * c + i];
        r[0][col] = g0;
        r[1][col] = (g0 + g1 + g2) * 0.5f;
        r[2][col] = (g0 - g1 + g2) * 0.5f;
        r[3][col] = g2;
      }
      for (int row = 0; row < 4; row++) {
        float *restrict up = uo + (size_t)row * 4 * pstride;
        up[0 * pstride + i] = r[row][0];
        up[1 * pstride + i] = (r[row][0] + r[row][1] + r[row][2]) * 0.5f;
        up[2 * pstride + i] = (r[row][0] - r[row][1] + r[row][2]) * 0.5f;
        up[3 * pstride + i] = r[row][2];
      }
    }
  }
}

/* The adjoint: dw[o][·][·][i] = Gᵀ dU[·][o][i] G. */
WINOGRAD_CLONES static void
transform_weights_adjoint(float *restrict dw, const float *restrict du, int k, int c)
{
  const size_t pstride = (size_t)k * c;
  for (int o = 0; o < k; o++) {
    float *restrict g = dw + (size_t)o * 9 * c;
    const float *restrict uo = du + (size_t)o * c;
    for (int i = 0; i < c; i++) {
      float r[4][3];
      for (int row = 0; row < 4; row++) {
        const float *restrict up = uo + (size_t)row * 4 * pstride;
        const float a0 = up[0 * pstride + i], a1 = up[1 * pstride + i];
        const float a2 = up[2 * pstride + i], a3 = up[3 * pstride + i];
        r[row][0] = a0 + (a1 + a2) * 0.5f;
        r[row][1] = (a1 - a2) * 0.5f;
        r[row][2] = (a1 + a2) * 0.5f + a3;
      }
      for (int col = 0; col < 3; col++) {
        g[(0 * 3 + col) * c + i] = r[0][col] + (r[1][col] + r[2][col]) * 0.5f;
        g[(1 * 3 + col) * c + i] = (r[1][col] - r[2][col]) * 0.5f;
        g[(2 * 3 + col) * c + i] = (r[1][col] + r[2][col]) * 0.5f + r[3][col];
      }
    }
  }
}


/* One channel group of one tile: V[p] = (Bᵀ d B)[p], Bᵀ = [1 0 −1 0; 0 1 1 0;
 * 0 −1 1 0; 0 1 0 −1]; d's rows first, then across. */
static inline __attribute__((always_inline)) void
input_group(float *vj, size_t pstride, const float *const *px, int i, int count)
{
  Vec d[16];
  for (int e = 0; e < 16; e++)
    d[e] = ld(px[e] + i, count);
  Vec r[4][4];
  for (int q = 0; q < 4; q++) {
    r[0][q] = d[0 + q] - d[8 + q];
    r[1][q] = d[4 + q] + d[8 + q];
    r[2][q] = d[8 + q] - d[4 + q];
    r[3][q] = d[4 + q] - d[12 + q];
  }
  for (int row = 0; row < 4; row++) {
    float *vp = vj + (size_t)row * 4 * pstride + i;
    st(vp + 0 * pstride, r[row][0] - r[row][2], count);
    st(vp + 1 * pstride, r[row][1] + r[row][2], count);
    st(vp + 2 * pstride, r[row][2] - r[row][1], count);
    st(vp + 3 * pstride, r[row][1] - r[row][3], count);
  }
}

/* V[p][j][·] for tiles t0 … t0 + count − 1 (j = t − t0): each tile's 16 window pixels
 * are pointers into x, or to the zero pixel where the window leaves the image. */
WINOGRAD_CLONES static void
transform_input(float *v, const Geometry *g, const float *x, const float *zero, size_t t0,
                int count)
{
  const int c = g->c;
  const size_t pstride = pos_stride(c);
  for (int j = 0; j < count; j++) {
    size_t img;
    int y0, x0;
    tile_origin(g, t0 + j, &img, &y0, &x0);
    const float *base = x + img * g->h * g->w * c;
    const float *px[16];
    for (int r = 0; r < 4; r++)
      for (int q = 0; q < 4; q++) {
        const int yy = y0 + r, xx = x0 + q;
        px[r * 4 + q] = yy >= 0 && yy < g->h && xx >= 0 && xx < g->w
                          ? base + ((size_t)yy * g->w + xx) * c
                          : zero;
      }
    float *vj = v + (size_t)j * c;
    int i = 0;
    for (; i + VL <= c; i += VL)
      input_group(vj, pstride, px, i, VL);
    if (i < c)
      input_group(vj, pstride, px, i, c - i);
  }
}

/* One channel group of the adjoint: the window's pixels += B dV Bᵀ, B = [1 0 0 0;
 * 0 1 −1 1; −1 1 1 0; 0 0 0 −1]; pixels outside the image (NULL) are dropped. */
static inline __attribute__((always_inline)) void
input_adjoint_group(float *const *px, const float *vj, size_t pstride, int i, int count)
{
  Vec a[16];
  for (int e = 0; e < 16; e++)
    a[e] = ld(vj + e * pstride + i, count);
  Vec r[4][4];
  for (int q = 0; q < 4; q++) {
    r[0][q] = a[0 + q];
    r[1][q] = a[4 + q] - a[8 + q] + a[12 + q];
    r[2][q] = a[4 + q] + a[8 + q] - a[0 + q];
    r[3][q] = -a[12 + q];
  }
  for (int row = 0; row < 4; row++) {
    const Vec e[4] = {
      r[row][0],
      r[row][1] - r[row][2] + r[row][3],
      r[row][1] + r[row][2] - r[row][0],
      -r[row][3],
    };
    for (int q = 0; q < 4; q++) {
      float *p = px[row * 4 + q];
      if (p != NULL)
        st(p + i, ld(p + i, count) + e[q], count);
    }
  }
}

/* The adjoint of transform_input, added into dx over the tiles of the block in order
 * (neighbouring windows overlap by two rows or columns). */
WINOGRAD_CLONES static void
transform_input_adjoint(float *dx, const Geometry *g, const float *dv, size_t t0, int count)
{
  const int c = g->c;
  const size_t pstride = pos_stride(c);
  for (int j = 0; j < count; j++) {
    size_t img;
    int y0, x0;
    tile_origin(g, t0 + j, &img, &y0, &x0);
    float *base = dx + img * g->h * g->w * c;
    float *px[16];
    for (int r = 0; r < 4; r++)
      for (int q = 0; q < 4; q++) {
        const int yy = y0 + r, xx = x0 + q;
        px[r * 4 + q] = yy >= 0 && yy < g->h && xx >= 0 && xx < g->w
                          ? base + ((size_t)yy * g->w + xx) * c
                          : NULL;
      }
    const float *vj = dv + (size_t)j * c;
    int i = 0;
    for (; i + VL <= c; i += VL)
      input_adjoint_group(px, vj, pstride, i, VL);
    if (i < c)
      input_adjoint_group(px, vj, pstride, i, c - i);
  }
}

/* One channel group of a tile's outputs, Aᵀ M A with Aᵀ = [1 1 1 0; 0 1 −1 −1]; the
 * outputs past the bottom or right edge (NULL, odd output sizes) are not written. */
static inline __attribute__((always_inline)) void
output_group(float *const *py, const float *mj, size_t pstride, int o, int count)
{
  Vec a[16];
  for (int e = 0; e < 16; e++)
    a[e] = ld(mj + e * pstride + o, count);
  Vec r[2][4];
  for (int q = 0; q < 4; q++) {
    r[0][q] = a[0 + q] + a[4 + q] + a[8 + q];
    r[1][q] = a[4 + q] - a[8 + q] - a[12 + q];
  }
  for (int row = 0; row < 2; row++) {
    if (py[row * 2] != NULL)
      st(py[row * 2] + o, r[row][0] + r[row][1] + r[row][2], count);
    if (py[row * 2 + 1] != NULL)
      st(py[row * 2 + 1] + o, r[row][1] - r[row][2] - r[row][3], count);
  }
}

WINOGRAD_CLONES static void
transform_output(float *y, const Geometry *g, const float *m, size_t t0, int count)
{
  const int k = g->k;
  const size_t pstride = pos_stride(k);
  for (int j = 0; j < count; j++) {
    size_t img;
    int y0, x0;
    tile_origin(g, t0 + j, &img, &y0, &x0);
    const int oy = y0 + g->pad, ox = x0 + g->pad;
    float *y00 = y + (img * g->oh * g->ow + (size_t)oy * g->ow + ox) * k;
    const gboolean right = ox + 1 < g->ow, down = oy + 1 < g->oh;
    float *py[4] = {y00, right ? y00 + k : NULL, down ? y00 + (size_t)g->ow * k : NULL,
                    right && down ? y00 + ((size_t)g->ow + 1) * k : NULL};
    const float *mj = m + (size_t)j * k;
    int o = 0;
    for (; o + VL <= k; o += VL)
      output_group(py, mj, pstride, o, VL);
    if (o < k)
      output_group(py, mj, pstride, o, k - o);
  }
}

/* One channel group of dM = A dy Aᵀ (A = [1 0; 1 1; 1 −1; 0 −1]): rows of A dy, then
 * across. */
static inline __attribute__((always_inline)) void
output_adjoint_group(float *mj, size_t pstride, const float *const *pd, int o, int count)
{
  const Vec a = ld(pd[0] + o, count), b = ld(pd[1] + o, count);
  const Vec cc = ld(pd[2] + o, count), d = ld(pd[3] + o, count);
  const Vec r[4][2] = {{a, b}, {a + cc, b + d}, {a - cc, b - d}, {-cc, -d}};
  for (int row = 0; row < 4; row++) {
    float *mp = mj + (size_t)row * 4 * pstride + o;
    st(mp + 0 * pstride, r[row][0], count);
    st(mp + 1 * pstride, r[row][0] + r[row][1], count);
    st(mp + 2 * pstride, r[row][0] - r[row][1], count);
    st(mp + 3 * pstride, -r[row][1], count);
  }
}

/* dM[p][j][·] for the block's tiles, dy's outputs past the edge reading as 0. */
WINOGRAD_CLONES static void
transform_output_adjoint(float *dm, const Geometry *g, const float *dy, const float *zero,
                         size_t t0, int count)
{
  const int k = g->k;
  const size_t pstride = pos_stride(k);
  for (int j = 0; j < count; j++) {
    size_t img;
    int y0, x0;
    tile_origin(g, t0 + j, &img, &y0, &x0);
    const int oy = y0 + g->pad, ox = x0 + g->pad;
    const float *d00 = dy + (img * g->oh * g->ow + (size_t)oy * g->ow + ox) * k;
    const gboolean right = ox + 1 < g->ow, down = oy + 1 < g->oh;
    const float *pd[4] = {d00, right ? d00 + k : zero, down ? d00 + (size_t)g->ow * k : zero,
                          right && down ? d00 + ((size_t)g->ow + 1) * k : zero};
    float *mj = dm + (size_t)j * k;
    int o = 0;
    for (; o + VL <= k; o += VL)
      output_adjoint_group(mj, pstride, pd, o, VL);
    if (o < k)
      output_adjoint_group(mj, pstride, pd, o, k - o);
  }
}

/* The shapes these transforms take; the front door checked the rest. */
static gboolean
winograd_takes(TdmBackend *b, const char *op, int kernel, int stride, int out_c)
{
  if (kernel == 3 && stride == 1)
    return TRUE;
  tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND,
                   _("%s: the CPU's whole convolution is 3×3 of stride 1, not %d×%d of "
                     "stride %d to %d channels"),
                   op, kernel, kernel, stride, out_c);
  return FALSE;
}

static gboolean
aborted(TdmBackend *b)
{
  return b->abort_flag != NULL && g_atomic_int_get(b->abort_flag);
}

/* One algorithm's transforms: F(2×2, 3×3)'s above, or F(3×3, 3×3)'s. */
typedef struct {
  void (*weights) (float *u, const float *wt, int k, int c);
  void (*weights_adjoint) (float *dw, const float *du, int k, int c);
  void (*input) (float *v, const Geometry *g, const float *x, const float *zero, size_t t0,
                 int count);
  void (*input_adjoint) (float *dx, const Geometry *g, const float *dv, size_t t0, int count);
  void (*output) (float *y, const Geometry *g, const float *m, size_t t0, int count);
  void (*output_adjoint) (float *dm, const Geometry *g, const float *dy, const float *zero,
                          size_t t0, int count);
} Transforms;

static const Transforms f2 = {
  transform_weights, transform_weights_adjoint, transform_input, transform_input_adjoint,
  transform_output,  transform_output_adjoint,
};

static const Transforms f3 = {
  tdm_wino3_weights, tdm_wino3_weights_adjoint, tdm_wino3_input, tdm_wino3_input_adjoint,
  tdm_wino3_output,  tdm_wino3_output_adjoint,
};

static const Transforms f4 = {
  tdm_wino4_weights, tdm_wino4_weights_adjoint, tdm_wino4_input, tdm_wino4_input_adjoint,
  tdm_wino4_output,  tdm_wino4_output_adjoint,
};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
static const Transforms f3_avx512 = {
  tdm_wino3_avx512_weights, tdm_wino3_avx512_weights_adjoint, tdm_wino3_avx512_input,
  tdm_wino3_avx512_input_adjoint, tdm_wino3_avx512_output, tdm_wino3_avx512_output_adjoint,
};

static const Transforms f4_avx512 = {
  tdm_wino4_avx512_weights, tdm_wino4_avx512_weights_adjoint, tdm_wino4_avx512_input,
  tdm_wino4_avx512_input_adjoint, tdm_wino4_avx512_output, tdm_wino4_avx512_output_adjoint,
};
#endif

/* The transforms for tile m on backend b: the AVX-512 build where the backend runs its
 * AVX-512 loops (the CPU has them, TANDEM_CPU_KERNELS does not say otherwise). */
static const Transforms *
transforms(TdmBackend *b, int m)
{
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (g_str_equal(tdm_cpu_winograd_gemm(b)->name, "avx512") && m >= 3)
    return m == 4 ? &f4_avx512 : &f3_avx512;
#else
  (void)b;
#endif
  return m == 4 ? &f4 : m == 3 ? &f3 : &f2;
}

void
tdm_cpu_conv_forward(TdmBackend *b, float *y, const float *x, const float *wt, float *work,
                     int n, int h, int w, int c, int out_c, int kernel, int pad, int stride)
{
  if (!winograd_takes(b, "conv_forward", kernel, stride, out_c))
    return;
  const Geometry g = geometry(n, h, w, c, out_c, pad);
  const Transforms *t = transforms(b, g.m);
  const TdmCpuWinogradGemm *gemm = tdm_cpu_winograd_gemm(b);
  const int np = positions(g.m);
  const Scratch s = scratch(work, np, c, out_c);
  memset(s.zero, 0, sizeof(float) * MAX(c, out_c));
  const size_t vstride = pos_stride(c), mstride = pos_stride(out_c);
  const size_t ustride = (size_t)out_c * c, pstride = packed_stride(c, out_c);
  /* Each position's U[o][i] as the products' B[i][o], packed once for every block. */
  t->weights(s.u, wt, out_c, c);
  for (int p = 0; p < np; p++)
    gemm->pack(s.packed + p * pstride, s.u + p * ustride, 1, c, c, out_c);
  for (size_t t0 = 0; t0 < g.tiles && !aborted(b); t0 += WINOGRAD_BLOCK) {
    const int count = (int)MIN((size_t)WINOGRAD_BLOCK, g.tiles - t0);
    t->input(s.v, &g, x, s.zero, t0, count);
    for (int p = 0; p < np; p++)
      gemm->product(s.m + p * mstride, out_c, s.v + p * vstride, c, s.packed + p * pstride,
                    count, c, out_c);
    t->output(y, &g, s.m, t0, count);
  }
}

void
tdm_cpu_conv_backward(TdmBackend *b, float *dx, float *dw, const float *dy, const float *x,
                      const float *wt, float *work, int n, int h, int w, int c, int out_c,
                      int kernel, int pad, int stride)
{
  if (!winograd_takes(b, "conv_backward", kernel, stride, out_c))
    return;
  const Geometry g = geometry(n, h, w, c, out_c, pad);
  const Transforms *t = transforms(b, g.m);
  const TdmCpuWinogradGemm *gemm = tdm_cpu_winograd_gemm(b);
  const int np = positions(g.m);
  const Scratch s = scratch(work, np, c, out_c);
  const size_t vstride = pos_stride(c), mstride = pos_stride(out_c);
  const size_t ustride = (size_t)out_c * c, pstride = packed_stride(c, out_c);
  memset(s.zero, 0, sizeof(float) * MAX(c, out_c));
  if (dx != NULL) {
    /* U[o][i] as the input gradient's B, C_out deep. */
    t->weights(s.u, wt, out_c, c);
    for (int p = 0; p < np; p++)
      gemm->pack(s.packed + p * pstride, s.u + p * ustride, c, 1, out_c, c);
    memset(dx, 0, sizeof(float) * n * h * w * c);
  }
  memset(s.du, 0, sizeof(float) * np * ustride);
  for (size_t t0 = 0; t0 < g.tiles && !aborted(b); t0 += WINOGRAD_BLOCK) {
    const int count = (int)MIN((size_t)WINOGRAD_BLOCK, g.tiles - t0);
    t->input(s.v, &g, x, s.zero, t0, count);
    t->output_adjoint(s.m, &g, dy, s.zero, t0, count);
    /* dU[o][i] += Σ over the block's tiles dM[t][o] V[t][i], in place. */
    for (int p = 0; p < np; p++)
      gemm->accumulate(s.du + p * ustride, c, s.m + p * mstride, out_c, s.v + p * vstride, c,
                       count, out_c, c);
    if (dx == NULL)
      continue;
    /* V is spent: its gradient takes its place. */
    for (int p = 0; p < np; p++)
      gemm->product(s.v + p * vstride, c, s.m + p * mstride, out_c, s.packed + p * pstride,
                    count, out_c, c);
    t->input_adjoint(dx, &g, s.v, t0, count);
  }
  t->weights_adjoint(dw, s.du, out_c, c);
}

/* Declared with the backend interface (tdm-backend.h): only the CPU backend keeps a
 * convolution scratch of this kind, so the rule lives with it. */
size_t
tdm_backend_conv_work_floats(TdmBackendKind kind, int h, int w, int c, int out_c, int kernel,
                             int pad, int stride)
{
  if (kind == TDM_BACKEND_CPU)
    return work_floats(h, w, c, out_c, kernel, pad, stride);
  return 0;
}
