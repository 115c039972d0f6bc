/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-conv-small-plan.c — conv-small-plan.h, the tiling of the engine's few-channel
 * convolution kernels (conv-small.cu), on any machine: the shapes it takes and refuses;
 * torchvision's stem, the resnet preset's first conv and an 8-channel 7×7 worked out
 * by hand; and over random shapes, that the weight gradient's splits cover the forward's
 * tiles exactly once, within the block count, the partials' bytes
 * theirs, and the forward's tile a divisor of the output channels within the shared
 * memory every sm_80+ GPU grants, the forward's tiles covering the output; and the
 * forward's halo and tables giving im2col's columns. The stem's two passes' plan
 * (tdm_k_stem_bn_plan()) too: by hand at r18-128's batch, refused shapes, random ones.
 */
#include "conv-small-plan.h"

#include <glib.h>
#include <string.h>

static void
test_stem(void)
{
  TdmKSmallPlan p = {0};
  g_assert_true(tdm_k_small_plan(128, 224, 224, 3, 64, 7, 3, 2, &p));
  g_assert_cmpint(p.oh, ==, 112);
  g_assert_cmpint(p.ow, ==, 112);
  g_assert_cmpint(p.rows, ==, 128 * 112 * 112);
  g_assert_cmpint(p.k, ==, 147);
  g_assert_cmpint(p.kpad, ==, 160);
  g_assert_cmpint(p.kc, ==, 160);
  g_assert_cmpint(p.kchunks, ==, 1);
  /* 112 × 112 outputs: tiles of 8 × 16 and of 16 × 8 cover them exactly, their halos
   * 21 × 37 and 37 × 21 pixels: the wider tile. 7 × 14 tiles an image. */
  g_assert_cmpint(p.tw, ==, 16);
  g_assert_cmpint(p.tr, ==, 8);
  g_assert_cmpint(p.tiles_x, ==, 7);
  g_assert_cmpint(p.tiles_y, ==, 14);
  g_assert_cmpint(p.tiles, ==, 128 * 98);
  g_assert_cmpint(p.halo_h, ==, 7 * 2 + 7);
  g_assert_cmpint(p.halo_w, ==, 15 * 2 + 7);
  g_assert_cmpint(p.bn, ==, 64);
  /* The forward's columns: a kernel row's 21 padded to 22, 154 in all, padded to 160. */
  g_assert_cmpint(p.fwd_rk, ==, 22);
  g_assert_cmpint(p.fwd_kpad, ==, 160);
  /* The bf16 output tile 128 × 72, the weights 64 × 168 bf16, the halo's 21 × 37 × 3
   * pair words (9,324 bytes, to 9,328), the pair table 80 × 8 bytes, the bn's 2 × 8
   * floats: 49,968 bytes, four blocks an H100 SM (as its 64 registers allow). */
  g_assert_cmpuint(p.fwd_smem, ==, 18432 + 21504 + 9328 + 640 + 64);
  g_assert_cmpint(p.ob, ==, 64);
  /* 12,544 tiles over 512 blocks: 25 tiles a split (24.5 rounded up), 502 splits. */
  g_assert_cmpint(p.split_tiles, ==, 25);
  g_assert_cmpint(p.splits, ==, 502);
  g_assert_cmpuint(p.partial_bytes, ==, (size_t)502 * 64 * 160 * 4);
  /* 20 fragments of 8 columns for 8 warps: no pixel groups. dy's tile 128 × 72 bf16,
   * the halo's pixel pair words 9,328 bytes, 64 pixel pairs of 8 bytes, 160 columns as
   * ints, the bn's 64 bytes. */
  g_assert_cmpint(p.pixel_groups, ==, 1);
  g_assert_cmpuint(p.wgrad_smem, ==, 18432 + 9328 + 512 + 640 + 64);
}

static void
test_resnet_preset(void)
{
  TdmKSmallPlan p = {0};
  g_assert_true(tdm_k_small_plan(512, 28, 28, 1, 32, 3, 1, 1, &p));
  g_assert_cmpint(p.rows, ==, 512 * 28 * 28);
  g_assert_cmpint(p.k, ==, 9);
  g_assert_cmpint(p.kpad, ==, 16);
  g_assert_cmpint(p.kc, ==, 16);
  /* 28 × 28 outputs: tiles 4 × 32 cover 28 × 32 (896 pixels), 8 × 16 and 16 × 8 cover
   * 32 × 32, 2 × 64 28 × 64: 4 × 32, one across, seven down; a halo of 6 × 34. */
  g_assert_cmpint(p.tw, ==, 32);
  g_assert_cmpint(p.tr, ==, 4);
  g_assert_cmpint(p.tiles_x, ==, 1);
  g_assert_cmpint(p.tiles_y, ==, 7);
  g_assert_cmpint(p.tiles, ==, 512 * 7);
  g_assert_cmpint(p.halo_h, ==, 6);
  g_assert_cmpint(p.halo_w, ==, 34);
  g_assert_cmpint(p.bn, ==, 32);
  /* A kernel row's 3 columns padded to 4: 12, padded to 16. 128 × 40 bf16, 32 × 24 bf16,
   * 204 pair words, 8 pairs of 8 bytes, 16 floats. */
  g_assert_cmpint(p.fwd_rk, ==, 4);
  g_assert_cmpint(p.fwd_kpad, ==, 16);
  g_assert_cmpuint(p.fwd_smem, ==, 10240 + 1536 + 816 + 64 + 64);
  g_assert_cmpint(p.ob, ==, 32);
  /* 3,584 tiles over 512 blocks: 7 a split (more than 512 pixels' 4.6 tiles), 512
   * splits. */
  g_assert_cmpint(p.split_tiles, ==, 7);
  g_assert_cmpint(p.splits, ==, 512);
  g_assert_cmpuint(p.partial_bytes, ==, (size_t)512 * 32 * 16 * 4);
  /* K = 9: two fragments of 8 columns, so four groups of two warps share a tile's 8
   * steps; dy's tile 128 × 40 bf16, the halo's 204 words, 64 pixel pairs of 8 bytes, 16
   * ints, 64 bytes of bn, the groups' sums 4 × 32 × 16 floats. */
  g_assert_cmpint(p.pixel_groups, ==, 4);
  g_assert_cmpuint(p.wgrad_smem, ==, 10240 + 816 + 512 + 64 + 64 + 8192);
}

static void
test_three_passes(void)
{
  TdmKSmallPlan p = {0};
  g_assert_true(tdm_k_small_plan(3, 29, 31, 8, 64, 7, 3, 1, &p));
  g_assert_cmpint(p.k, ==, 392);
  g_assert_cmpint(p.kpad, ==, 400);
  g_assert_cmpint(p.kc, ==, 160);
  g_assert_cmpint(p.kchunks, ==, 3);
  /* 29 × 31 outputs: tiles of 4 × 32, 8 × 16 and 16 × 8 all cover 32 × 32; halos of
   * 10 × 38, 14 × 22 and 22 × 14 pixels: 8 × 16, two across, four down. */
  g_assert_cmpint(p.tw, ==, 16);
  g_assert_cmpint(p.tiles, ==, 3 * 2 * 4);
  g_assert_cmpint(p.halo_h, ==, 14);
  g_assert_cmpint(p.halo_w, ==, 22);
  /* A kernel row's 56 columns are even already: 392, padded to 400. 18,432 + 64 × 408 × 2
   * + 14 × 22 × 8 × 4 + 200 × 8 + 64 = 82,176 bytes: within 99 KiB. */
  g_assert_cmpint(p.fwd_rk, ==, 56);
  g_assert_cmpint(p.fwd_kpad, ==, 400);
  g_assert_cmpint(p.bn, ==, 64);
  g_assert_cmpuint(p.fwd_smem, ==, 82176);
  g_assert_cmpuint(p.fwd_smem, <=, TDM_K_SMALL_SMEM_MAX);
  /* 24 tiles; 3 chunks: 170 splits at most, one tile each, but a split takes at least
   * 512 pixels, here 2,697 / 24 = 112.4 a tile: 5 tiles, 5 splits. */
  g_assert_cmpint(p.split_tiles, ==, 5);
  g_assert_cmpint(p.splits, ==, 5);
  g_assert_cmpint(p.pixel_groups, ==, 1);
  g_assert_true(tdm_k_small_plan(2, 9, 9, 8, 48, 3, 1, 1, &p));
  g_assert_cmpint(p.bn, ==, 16);
  g_assert_cmpint(p.ob, ==, 16);
  g_assert_true(tdm_k_small_plan(2, 9, 9, 8, 96, 3, 1, 1, &p));
  g_assert_cmpint(p.bn, ==, 32);
  g_assert_cmpint(p.ob, ==, 32);
}

static void
test_refused(void)
{
  TdmKSmallPlan p = {0};
  g_assert_false(tdm_k_small_plan(2, 13, 11, 9, 32, 3, 1, 1, &p));     /* 9 channels */
  g_assert_false(tdm_k_small_plan(2, 13, 11, 0, 32, 3, 1, 1, &p));     /* none */
  g_assert_false(tdm_k_small_plan(2, 13, 11, 3, 24, 3, 1, 1, &p));     /* 24 out */
  g_assert_false(tdm_k_small_plan(2, 13, 11, 3, 8, 3, 1, 1, &p));      /* 8 out */
  g_assert_false(tdm_k_small_plan(2, 13, 11, 3, 32, 8, 1, 1, &p));     /* 8×8 */
  g_assert_false(tdm_k_small_plan(2, 13, 11, 3, 32, 3, 4, 1, &p));     /* padding 4 */
  g_assert_false(tdm_k_small_plan(2, 13, 11, 3, 32, 3, 1, 3, &p));     /* stride 3 */
  g_assert_false(tdm_k_small_plan(2, 3, 11, 3, 32, 7, 1, 1, &p));      /* h + 2·pad < 7 */
  g_assert_false(tdm_k_small_plan(0, 13, 11, 3, 32, 3, 1, 1, &p));     /* no sample */
  /* More output pixels than an int holds, with a tile to spare. */
  g_assert_false(tdm_k_small_plan(65536, 256, 256, 3, 32, 3, 1, 1, &p));
  g_assert_true(tdm_k_small_plan(2, 1, 1, 1, 16, 7, 3, 1, &p));        /* all padding but one */
  g_assert_cmpint(p.rows, ==, 2);
}

static void
test_random_shapes(void)
{
  for (int i = 0; i < 20000; i++) {
    int n = g_test_rand_int_range(1, 300), h = g_test_rand_int_range(1, 300);
    int w = g_test_rand_int_range(1, 300), c = g_test_rand_int_range(1, 9);
    int out_c = 16 * g_test_rand_int_range(1, 33), kernel = g_test_rand_int_range(1, 8);
    int pad = g_test_rand_int_range(0, 4), stride = g_test_rand_int_range(1, 3);
    TdmKSmallPlan p = {0};
    gboolean takes = tdm_k_small_plan(n, h, w, c, out_c, kernel, pad, stride, &p);
    g_assert_cmpint(takes, ==, h + 2 * pad >= kernel && w + 2 * pad >= kernel);
    if (!takes)
      continue;
    g_assert_cmpint(p.oh, ==, (h + 2 * pad - kernel) / stride + 1);
    g_assert_cmpint(p.kpad % 16, ==, 0);
    g_assert_cmpint(p.kpad - p.k, <, 16);
    g_assert_cmpint(p.kpad, >=, p.k);
    g_assert_cmpint((p.kchunks - 1) * TDM_K_SMALL_KC, <, p.kpad);
    g_assert_cmpint(p.kchunks * TDM_K_SMALL_KC, >=, p.kpad);
    g_assert_true(p.bn == 64 || p.bn == 32 || p.bn == 16);
    g_assert_cmpint(out_c % p.bn, ==, 0);
    g_assert_cmpuint(p.fwd_smem, <=, TDM_K_SMALL_SMEM_MAX);
    /* The forward's tiles: 128 pixels, covering the output, no tile wholly outside. */
    g_assert_cmpint(p.tw * p.tr, ==, TDM_K_SMALL_BM);
    g_assert_cmpint((p.tw & (p.tw - 1)), ==, 0);
    g_assert_cmpint((int64_t)p.tiles_x * p.tw, >=, p.ow);
    g_assert_cmpint((int64_t)(p.tiles_x - 1) * p.tw, <, p.ow);
    g_assert_cmpint((int64_t)p.tiles_y * p.tr, >=, p.oh);
    g_assert_cmpint((int64_t)(p.tiles_y - 1) * p.tr, <, p.oh);
    g_assert_cmpint(p.tiles, ==, (int64_t)n * p.tiles_x * p.tiles_y);
    g_assert_true(p.ob == 64 || p.ob == 32 || p.ob == 16);
    g_assert_cmpint(out_c % p.ob, ==, 0);
    /* The splits: whole tiles, every tile in exactly one (none empty). */
    g_assert_cmpint((int64_t)p.split_tiles * p.rows, >=, TDM_K_SMALL_SPLIT_PIXELS * p.tiles);
    g_assert_cmpint((int64_t)(p.splits - 1) * p.split_tiles, <, p.tiles);
    g_assert_cmpint((int64_t)p.splits * p.split_tiles, >=, p.tiles);
    /* Pixel groups: the warps all busy where the columns are few, a tile's 8 steps of 16
     * pixels shared evenly. */
    g_assert_true(p.pixel_groups == 1 || p.pixel_groups == 2 || p.pixel_groups == 4);
    g_assert_cmpint(p.pixel_groups * (p.kc / 8), <=, 8 > p.kc / 8 ? 8 : p.kc / 8);
    g_assert_cmpuint(p.wgrad_smem, <=, TDM_K_SMALL_SMEM_MAX);
    int64_t blocks = (int64_t)p.splits * p.kchunks * (out_c / p.ob);
    int64_t others = (int64_t)p.kchunks * (out_c / p.ob);
    g_assert_cmpint(blocks, <=, MAX(TDM_K_SMALL_WGRAD_BLOCKS, others));
    g_assert_cmpuint(p.partial_bytes, ==, (size_t)p.splits * out_c * p.kpad * 4);
  }
}

/* The value column k of output pixel (img, oy, ox) takes, as im2col computes it: x at
 * the tap's input pixel and channel, zero in the padding. */
static int
naive_column(const int *x, int h, int w, int c, int kernel, int pad, int stride, int img,
             int oy, int ox, int k)
{
  int ch = k % c, tap = k / c;
  int iy = oy * stride - pad + tap / kernel, ix = ox * stride - pad + tap % kernel;
  if (iy < 0 || iy >= h || ix < 0 || ix >= w)
    return 0;
  return x[(((size_t)img * h + iy) * w + ix) * c + ch];
}

/* The halo and its tables, as the kernels use them, on random shapes: the forward's
 * column order holds each im2col column once, in pairs of neighbours in the halo, at the
 * im2col column's offset; the halo of a tile read as its rows and columns
 * (tdm_k_small_halo_row + tdm_k_small_halo_col, for every row of the tile, padded pixels
 * too, and every column of kpad) stays inside the halo, a column past K is −1, and for
 * every pixel in the image the value is im2col's. The input holds distinct values (its index + 1), so a wrong tap, channel or
 * row shows. */
static void
test_halo_columns(void)
{
  for (int i = 0; i < 300; i++) {
    int n = g_test_rand_int_range(1, 3), h = g_test_rand_int_range(1, 70);
    int w = g_test_rand_int_range(1, 300), c = g_test_rand_int_range(1, 9);
    int kernel = g_test_rand_int_range(1, 8), pad = g_test_rand_int_range(0, 4);
    int stride = g_test_rand_int_range(1, 3);
    TdmKSmallPlan p = {0};
    if (!tdm_k_small_plan(n, h, w, c, 16, kernel, pad, stride, &p))
      continue;
    size_t in = (size_t)n * h * w * c;
    g_autofree int *x = g_new(int, in);
    for (size_t e = 0; e < in; e++)
      x[e] = (int)e + 1;
    int halo_n = p.halo_h * p.halo_w * c;
    g_autofree int *halo = g_new(int, halo_n);
    g_autofree int *cols = g_new(int, p.kpad);
    for (int k = 0; k < p.kpad; k++) {
      cols[k] = tdm_k_small_halo_col(k, kernel, c, p.halo_w);
      g_assert_cmpint(cols[k] < 0, ==, k >= p.k);
    }
    /* The forward's order: every im2col column once; a pair's two columns neighbours in
     * the halo, or the second one padding, or both. */
    g_assert_cmpint(p.fwd_rk % 2, ==, 0);
    g_assert_cmpint(p.fwd_kpad % 16, ==, 0);
    g_assert_cmpint(p.fwd_kpad, >=, kernel * p.fwd_rk);
    g_autofree int *fcols = g_new(int, p.fwd_kpad);
    g_autofree int *fofs = g_new(int, p.fwd_kpad);
    g_autofree int *seen = g_new0(int, p.k);
    for (int k = 0; k < p.fwd_kpad; k++) {
      fcols[k] = tdm_k_small_fwd_column(k, kernel, c, p.fwd_rk);
      fofs[k] = tdm_k_small_fwd_offset(k, kernel, c, p.fwd_rk, p.halo_w);
      g_assert_cmpint(fcols[k] < 0, ==, fofs[k] < 0);
      g_assert_cmpint(fcols[k], <, p.k);
      if (fcols[k] >= 0) {
        seen[fcols[k]]++;
        g_assert_cmpint(fofs[k], ==, cols[fcols[k]]);
      }
      if (k % 2 == 1 && fofs[k] >= 0)
        g_assert_cmpint(fofs[k], ==, fofs[k - 1] + 1);
    }
    for (int k = 0; k < p.k; k++)
      g_assert_cmpint(seen[k], ==, 1);
    /* The first tile, the last (partial where the tiles overhang), and some between. */
    for (int j = 0; j < 6; j++) {
      int64_t tile = j == 0 ? 0 : j == 1 ? p.tiles - 1 : g_test_rand_int_range(0, (int)p.tiles);
      int tx = (int)(tile % p.tiles_x), ty = (int)(tile / p.tiles_x % p.tiles_y);
      int img = (int)(tile / p.tiles_x / p.tiles_y);
      int oy0 = ty * p.tr, ox0 = tx * p.tw;
      int iy0 = oy0 * stride - pad, ix0 = ox0 * stride - pad;
      for (int hy = 0; hy < p.halo_h; hy++)
        for (int hx = 0; hx < p.halo_w; hx++)
          for (int ch = 0; ch < c; ch++) {
            int iy = iy0 + hy, ix = ix0 + hx;
            halo[(hy * p.halo_w + hx) * c + ch] =
                iy >= 0 && iy < h && ix >= 0 && ix < w
                    ? x[(((size_t)img * h + iy) * w + ix) * c + ch]
                    : 0;
          }
      for (int r = 0; r < TDM_K_SMALL_BM; r++) {
        int row = tdm_k_small_halo_row(r, p.tw, stride, c, p.halo_w);
        int oy = oy0 + r / p.tw, ox = ox0 + r % p.tw;
        for (int k = 0; k < p.kpad; k++) {
          if (cols[k] < 0)
            continue;
          g_assert_cmpint(row + cols[k], >=, 0);
          g_assert_cmpint(row + cols[k], <, halo_n);
          if (oy < p.oh && ox < p.ow)
            g_assert_cmpint(halo[row + cols[k]], ==,
                            naive_column(x, h, w, c, kernel, pad, stride, img, oy, ox, k));
        }
      }
    }
  }
}

/* The stem's two passes (tdm_k_stem_bn_plan(), conv-stem-bn.cu): the CIFAR stem at
 * r18-128's batch worked out by hand, the rows' other sizes, what it refuses, and over
 * random shapes that what it takes has 64-channel tiles both ways and one chunk of at
 * most 128 columns, its layouts' regions in order on 16-byte boundaries within the
 * shared memory every sm_80+ GPU grants (the pixel groups' sums within dy's room), its
 * blocks the weight gradient's splits and its scratch the larger of its two passes'. */
static void
check_stem_layouts(const TdmKStemBnPlan *p, int c)
{
  const TdmKSmallPlan *s = &p->small;
  int halo = s->halo_h * s->halo_w * c;
  TdmKStemSumsLayout a = tdm_k_stem_sums_layout(s->fwd_kpad, halo);
  size_t sums[] = {a.weights, a.halo, a.pairs, a.dy, a.bn, a.slots, a.total};
  for (size_t i = 0; i + 1 < G_N_ELEMENTS(sums); i++) {
    g_assert_cmpuint(sums[i] % 16, ==, 0);
    g_assert_cmpuint(sums[i], <, sums[i + 1]);
  }
  TdmKStemDxLayout d = tdm_k_stem_dx_layout(s->fwd_kpad, s->kc, halo);
  size_t dx[] = {d.weights, d.halo, d.pixels, d.pairs, d.rows, d.cols, d.dy, d.bn, d.total};
  for (size_t i = 0; i + 1 < G_N_ELEMENTS(dx); i++) {
    g_assert_cmpuint(dx[i] % 16, ==, 0);
    g_assert_cmpuint(dx[i], <, dx[i + 1]);
  }
  g_assert_cmpuint(d.pixels - d.halo, >=, (size_t)halo * 4);
  g_assert_cmpuint(d.cols - d.rows, ==, TDM_K_SMALL_BM / 2 * 8);
  g_assert_cmpuint(d.dy - d.cols, >=, (size_t)s->kc * 4);
  if (s->pixel_groups > 1)
    g_assert_cmpuint((size_t)s->pixel_groups * TDM_K_STEM_CB * s->kc * 4, <=, d.bn - d.dy);
  g_assert_cmpuint(p->sums_smem, ==, a.total);
  g_assert_cmpuint(p->dx_smem, ==, d.total);
  g_assert_cmpuint(p->sums_smem, <=, TDM_K_SMALL_SMEM_MAX);
  g_assert_cmpuint(p->dx_smem, <=, TDM_K_SMALL_SMEM_MAX);
  g_assert_cmpint(p->blocks, ==, s->splits);
  g_assert_cmpuint(p->wgrad_bytes, ==, s->partial_bytes);
  g_assert_cmpuint(p->scratch_bytes, ==, MAX(p->sums_bytes, p->wgrad_bytes));
  g_assert_cmpint(p->fpw, ==, s->kpad <= 64 ? 1 : 2);
}

static void
test_stem_bn(void)
{
  TdmKStemBnPlan p = {0};
  g_assert_true(tdm_k_stem_bn_plan(128, 128, 128, 3, 64, 3, 1, 1, &p));
  const TdmKSmallPlan *s = &p.small;
  /* 128 × 128 outputs: every width covers them exactly; the halo least at 8 × 16 and
   * 16 × 8 (10 × 18 and 18 × 10 pixels): the wider. 8 × 16 tiles an image. */
  g_assert_cmpint(s->tw, ==, 16);
  g_assert_cmpint(s->tiles, ==, 128 * 128);
  g_assert_cmpint(s->kpad, ==, 32);
  g_assert_cmpint(s->pixel_groups, ==, 2);
  /* 512 splits of 32 tiles: the sums' partials 512 × 2 × 64 doubles, the weight
   * gradient's 512 × 64 × 32 floats. */
  g_assert_cmpint(p.blocks, ==, 512);
  g_assert_cmpint(s->split_tiles, ==, 32);
  g_assert_cmpint(p.fpw, ==, 1);
  g_assert_cmpuint(p.sums_bytes, ==, 512 * 2 * 64 * 8);
  g_assert_cmpuint(p.wgrad_bytes, ==, 512 * 64 * 32 * 4);
  g_assert_cmpuint(p.scratch_bytes, ==, 4 << 20);
  /* Weights 64 × 40 bf16, the halo 10 × 18 × 3 words, the pair table 16 pairs, dy twice
   * 128 × 72 bf16, the bn 4 × 64 floats, the slots 256 × 16 doubles. */
  g_assert_cmpuint(p.sums_smem, ==, 5120 + 2160 + 128 + 36864 + 1024 + 32768);
  /* ... the halo twice, the pixel table 64 pairs, the column table 32 ints, the bn 5 × 64. */
  g_assert_cmpuint(p.dx_smem, ==, 5120 + 2 * 2160 + 128 + 512 + 128 + 36864 + 1280);
  check_stem_layouts(&p, 3);
  /* The rows' other sizes: 32 px at 512, 64 px at 256. */
  g_assert_true(tdm_k_stem_bn_plan(512, 32, 32, 3, 64, 3, 1, 1, &p));
  check_stem_layouts(&p, 3);
  g_assert_true(tdm_k_stem_bn_plan(256, 64, 64, 3, 64, 3, 1, 1, &p));
  check_stem_layouts(&p, 3);
  /* 8 channels: 72 columns, two fragments a warp; 128 outputs. */
  g_assert_true(tdm_k_stem_bn_plan(2, 19, 23, 8, 128, 3, 1, 2, &p));
  g_assert_cmpint(p.fpw, ==, 2);
  check_stem_layouts(&p, 8);
  /* Refused: 32 or 48 outputs (no 64-channel tile), 200 or 392 columns (more than 128),
   * what conv-small refuses. */
  g_assert_false(tdm_k_stem_bn_plan(2, 32, 32, 3, 32, 3, 1, 1, &p));
  g_assert_false(tdm_k_stem_bn_plan(2, 32, 32, 3, 48, 3, 1, 1, &p));
  g_assert_false(tdm_k_stem_bn_plan(2, 32, 32, 8, 64, 5, 2, 1, &p));
  g_assert_false(tdm_k_stem_bn_plan(2, 32, 32, 8, 64, 7, 3, 1, &p));
  g_assert_false(tdm_k_stem_bn_plan(2, 32, 32, 16, 64, 3, 1, 1, &p));
  g_assert_false(tdm_k_stem_bn_plan(2, 32, 32, 3, 64, 3, 1, 3, &p));
  /* Random shapes. */
  for (int i = 0; i < 2000; i++) {
    int n = g_test_rand_int_range(1, 9), h = g_test_rand_int_range(1, 140);
    int w = g_test_rand_int_range(1, 140), c = g_test_rand_int_range(1, 9);
    int out_c = 16 * g_test_rand_int_range(1, 13), kernel = g_test_rand_int_range(1, 8);
    int pad = g_test_rand_int_range(0, 4), stride = g_test_rand_int_range(1, 3);
    TdmKStemBnPlan q = {0}, again = {0};
    gboolean takes = tdm_k_stem_bn_plan(n, h, w, c, out_c, kernel, pad, stride, &q);
    g_assert_cmpint(takes, ==,
                    tdm_k_stem_bn_plan(n, h, w, c, out_c, kernel, pad, stride, &again));
    if (!takes)
      continue;
    g_assert_cmpint(memcmp(&q, &again, sizeof q), ==, 0);
    TdmKSmallPlan plain = {0};
    g_assert_true(tdm_k_small_plan(n, h, w, c, out_c, kernel, pad, stride, &plain));
    g_assert_cmpint(memcmp(&q.small, &plain, sizeof plain), ==, 0);
    g_assert_cmpint(out_c % 64, ==, 0);
    g_assert_cmpint(q.small.bn, ==, 64);
    g_assert_cmpint(q.small.ob, ==, 64);
    g_assert_cmpint(q.small.kchunks, ==, 1);
    g_assert_cmpint(q.small.kpad, <=, TDM_K_STEM_KPAD_MAX);
    g_assert_cmpuint(q.sums_bytes, ==, (size_t)q.blocks * 2 * out_c * 8);
    check_stem_layouts(&q, c);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/conv-small-plan/stem", test_stem);
  g_test_add_func("/conv-small-plan/resnet-preset", test_resnet_preset);
  g_test_add_func("/conv-small-plan/three-passes", test_three_passes);
  g_test_add_func("/conv-small-plan/refused", test_refused);
  g_test_add_func("/conv-small-plan/random-shapes", test_random_shapes);
  g_test_add_func("/conv-small-plan/halo-columns", test_halo_columns);
  g_test_add_func("/conv-small-plan/stem-bn", test_stem_bn);
  return g_test_run();
}
