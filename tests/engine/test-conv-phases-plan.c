/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-conv-phases-plan.c — conv-phases-plan.h, a strided convolution's input gradient as
 * one stride-1 forward convolution per output phase, on any machine, in double: the
 * weights sorted by tdm_k_phases_sorted_index() (every value once), then each phase
 * computed exactly as a forward convolution reads and writes the tensors its
 * descriptors give (dimensions, strides, offsets, padding before and after), against a
 * direct input gradient, for strides 2 to 4, kernels 1 to 7, padding 0 to 3, odd and
 * even sizes: every pixel of dx written once, the same sums within 1e-9; and the same
 * over dy's pre-padded copy (tdm_k_phases_pad(): every phase unpadded, its view inside
 * the copy). Also 3×3 at stride 2, padding 1, worked out by hand, its copy's margins
 * too.
 */
#include "conv-phases-plan.h"

#include <glib.h>
#include <math.h>

/* A convolution's shape, as the tests give it. */
typedef struct {
  int n, h, w, c, out_c, kernel, pad, stride;
} Shape;

static int
out_h(const Shape *s)
{
  return tdm_k_phases_out(s->h, s->kernel, s->pad, s->stride);
}

static int
out_w(const Shape *s)
{
  return tdm_k_phases_out(s->w, s->kernel, s->pad, s->stride);
}

/* dx of the forward y[n][oy][ox][o] = Σ x[n][s·oy + ky − p][s·ox + kx − p][ch] ·
 * w[o][ky][kx][ch]: every product scattered where the forward read it. */
static double *
direct_dgrad(const Shape *s, const double *dy, const double *w)
{
  int oh = out_h(s), ow = out_w(s);
  double *dx = g_new0(double, (size_t)s->n * s->h * s->w * s->c);
  for (int n = 0; n < s->n; n++)
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++)
        for (int ky = 0; ky < s->kernel; ky++)
          for (int kx = 0; kx < s->kernel; kx++) {
            int iy = oy * s->stride + ky - s->pad, ix = ox * s->stride + kx - s->pad;
            if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
              continue;
            for (int o = 0; o < s->out_c; o++)
              for (int ch = 0; ch < s->c; ch++)
                dx[(((size_t)n * s->h + iy) * s->w + ix) * s->c + ch] +=
                    dy[(((size_t)n * oh + oy) * ow + ox) * s->out_c + o] *
                    w[(((size_t)o * s->kernel + ky) * s->kernel + kx) * s->c + ch];
          }
  return dx;
}

/* The sorted kernels, as conv-phases.cu writes them; each place written once. */
static double *
sorted_weights(const Shape *s, const double *w)
{
  size_t count = (size_t)s->out_c * s->kernel * s->kernel * s->c;
  double *sorted = g_new(double, count);
  g_autofree int *hits = g_new0(int, count);
  for (int o = 0; o < s->out_c; o++)
    for (int ky = 0; ky < s->kernel; ky++)
      for (int kx = 0; kx < s->kernel; kx++)
        for (int ch = 0; ch < s->c; ch++) {
          int64_t at = tdm_k_phases_sorted_index(o, ky, kx, ch, s->c, s->out_c, s->kernel,
                                                 s->pad, s->stride);
          g_assert_cmpint(at, >=, 0);
          g_assert_cmpint(at, <, (int64_t)count);
          hits[at]++;
          sorted[at] = w[(((size_t)o * s->kernel + ky) * s->kernel + kx) * s->c + ch];
        }
  for (size_t e = 0; e < count; e++)
    g_assert_cmpint(hits[e], ==, 1);
  return sorted;
}

/* The last element a view of these dimensions and strides reaches, past its offset. */
static int64_t
view_end(const int64_t *dims, const int64_t *strides)
{
  int64_t end = 0;
  for (int d = 0; d < 4; d++)
    end += (dims[d] - 1) * strides[d];
  return end;
}

/* One phase as a cross-correlation of stride 1 over its descriptors: y (a view of dx)
 * from x (a view of dy) and its kernel w (KRSC, packed); each written pixel counted. */
static void
phase_forward(const TdmKPhase *ph, const double *dy, const double *sorted, double *dx,
              int *writes)
{
  const int64_t *xd = ph->x_dims, *xs = ph->x_strides, *wd = ph->w_dims;
  const int64_t *yd = ph->y_dims, *ys = ph->y_strides;
  for (int64_t n = 0; n < yd[0]; n++)
    for (int64_t k = 0; k < yd[1]; k++)
      for (int64_t ty = 0; ty < yd[2]; ty++)
        for (int64_t tx = 0; tx < yd[3]; tx++) {
          double sum = 0.0;
          for (int64_t my = 0; ph->kind == TDM_K_PHASE_CONV && my < wd[2]; my++)
            for (int64_t mx = 0; mx < wd[3]; mx++) {
              int64_t iy = ty + my - ph->pre[0], ix = tx + mx - ph->pre[1];
              if (iy < 0 || iy >= xd[2] || ix < 0 || ix >= xd[3])
                continue;
              for (int64_t ci = 0; ci < xd[1]; ci++)
                sum += dy[ph->x_offset + n * xs[0] + ci * xs[1] + iy * xs[2] + ix * xs[3]] *
                       sorted[ph->w_offset + ((k * wd[2] + my) * wd[3] + mx) * wd[1] + ci];
            }
          int64_t at = ph->y_offset + n * ys[0] + k * ys[1] + ty * ys[2] + tx * ys[3];
          dx[at] = sum;
          writes[at]++;
        }
}

/* How many phases of the shapes checked wrote zeros, started their view of dy past its
 * first row (a negative padding before), or had padding after, and how many pre-padded
 * copies had margins: each case is met. */
static int zero_phases, shifted_views, padded_after, pre_padded;

/* dy copied with the margins of pd (tdm_k_phases_pad_source()), as conv-phases.cu's
 * tdm_k_conv_phases_pad() copies it; each of dy's values once. */
static double *
padded_copy(const Shape *s, const TdmKPhasesPad *pd, const double *dy)
{
  int oh = out_h(s), ow = out_w(s);
  g_assert_cmpint(pd->dy_size[0], ==, oh);
  g_assert_cmpint(pd->dy_size[1], ==, ow);
  size_t pixels = (size_t)pd->size[0] * pd->size[1];
  double *copy = g_new(double, (size_t)s->n * pixels * s->out_c);
  g_autofree int *hits = g_new0(int, (size_t)oh * ow);
  for (int n = 0; n < s->n; n++)
    for (int r = 0; r < pd->size[0]; r++)
      for (int q = 0; q < pd->size[1]; q++) {
        int64_t from = tdm_k_phases_pad_source(r, q, pd);
        if (n == 0 && from >= 0)
          hits[from]++;
        for (int o = 0; o < s->out_c; o++)
          copy[((n * pixels) + (size_t)r * pd->size[1] + q) * s->out_c + o] =
              from < 0 ? 0.0 : dy[((size_t)n * oh * ow + from) * s->out_c + o];
      }
  for (int e = 0; e < oh * ow; e++)
    g_assert_cmpint(hits[e], ==, 1);
  return copy;
}

/* The phases of s against a direct input gradient, over dy as it is and over its
 * pre-padded copy (tdm_k_phase_prepadded(): every phase unpadded); FALSE where the shape
 * has no output. */
static gboolean
check_shape(const Shape *s, GRand *rand)
{
  int oh = out_h(s), ow = out_w(s);
  if (oh < 1 || ow < 1)
    return FALSE;
  size_t in = (size_t)s->n * s->h * s->w * s->c, out = (size_t)s->n * oh * ow * s->out_c;
  size_t weights = (size_t)s->out_c * s->kernel * s->kernel * s->c;
  g_autofree double *dy = g_new(double, out);
  g_autofree double *w = g_new(double, weights);
  for (size_t e = 0; e < out; e++)
    dy[e] = g_rand_double_range(rand, -1, 1);
  for (size_t e = 0; e < weights; e++)
    w[e] = g_rand_double_range(rand, -1, 1);
  g_autofree double *ref = direct_dgrad(s, dy, w);
  g_autofree double *sorted = sorted_weights(s, w);
  TdmKPhasesPad pd = tdm_k_phases_pad(s->h, s->w, s->kernel, s->pad, s->stride);
  g_autofree double *copy = padded_copy(s, &pd, dy);
  size_t copy_count = (size_t)s->n * pd.size[0] * pd.size[1] * s->out_c;
  pre_padded += tdm_k_phases_pad_any(&pd);
  g_autofree double *dx = g_new(double, in);
  g_autofree int *writes = g_new(int, in);
  for (int form = 0; form < 2; form++) {
    gboolean prepadded = form == 1;
    const double *source = prepadded ? copy : dy;
    size_t source_count = prepadded ? copy_count : out;
    for (size_t e = 0; e < in; e++) {
      dx[e] = NAN;
      writes[e] = 0;
    }
    int64_t taps = 0;
    for (int py = 0; py < s->stride; py++)
      for (int px = 0; px < s->stride; px++) {
        TdmKPhase ph = tdm_k_phase(s->n, s->h, s->w, s->c, s->out_c, s->kernel, s->pad,
                                   s->stride, py, px);
        if (prepadded) {
          /* A phase's padding fits the copy's margins. */
          for (int d = 0; ph.kind == TDM_K_PHASE_CONV && d < 2; d++) {
            g_assert_cmpint(ph.pre[d], <=, pd.before[d]);
            g_assert_cmpint(ph.post[d], <=, pd.after[d]);
          }
          ph = tdm_k_phase_prepadded(ph, &pd, s->out_c);
        }
        taps += ph.w_dims[2] * ph.w_dims[3];
        if (ph.kind == TDM_K_PHASE_NONE) {
          g_assert_true(py >= s->h || px >= s->w);
          continue;
        }
        /* What a forward convolution's descriptors must agree on: its output's size from
         * its input's, its kernel's and its padding; its views inside their tensors; a
         * kernel of the sorted ones. */
        for (int d = 0; d < 2; d++) {
          g_assert_cmpint(ph.pre[d], >=, 0);
          g_assert_cmpint(ph.post[d], >=, 0);
          if (ph.kind == TDM_K_PHASE_CONV) {
            g_assert_cmpint(ph.pre[d], <, ph.w_dims[2 + d]);
            g_assert_cmpint(ph.y_dims[2 + d], ==,
                            ph.x_dims[2 + d] + ph.pre[d] + ph.post[d] - ph.w_dims[2 + d] + 1);
            if (prepadded)
              g_assert_cmpint(ph.pre[d] + ph.post[d], ==, 0);
          }
        }
        g_assert_cmpint(ph.y_offset + view_end(ph.y_dims, ph.y_strides), <, (int64_t)in);
        if (ph.kind == TDM_K_PHASE_CONV) {
          g_assert_cmpint(ph.x_offset, >=, 0);
          g_assert_cmpint(ph.x_offset + view_end(ph.x_dims, ph.x_strides), <,
                          (int64_t)source_count);
          g_assert_cmpint(ph.w_offset +
                              ph.w_dims[0] * ph.w_dims[1] * ph.w_dims[2] * ph.w_dims[3],
                          <=, (int64_t)weights);
          g_assert_cmpint(ph.w_dims[0], ==, s->c);
          g_assert_cmpint(ph.w_dims[1], ==, s->out_c);
        }
        if (!prepadded) {
          zero_phases += ph.kind == TDM_K_PHASE_ZERO;
          shifted_views +=
              ph.kind == TDM_K_PHASE_CONV && (ph.row.in_start > 0 || ph.col.in_start > 0);
          padded_after += ph.kind == TDM_K_PHASE_CONV && (ph.post[0] > 0 || ph.post[1] > 0);
        }
        phase_forward(&ph, source, sorted, dx, writes);
      }
    g_assert_cmpint(taps, ==, (int64_t)s->kernel * s->kernel);
    for (size_t e = 0; e < in; e++) {
      if (writes[e] != 1 || fabs(dx[e] - ref[e]) > 1e-9 * (1.0 + fabs(ref[e]))) {
        g_test_message("n%d %dx%d c%d o%d k%d p%d s%d%s: dx[%zu] written %d times, %g where "
                       "the direct gradient has %g",
                       s->n, s->h, s->w, s->c, s->out_c, s->kernel, s->pad, s->stride,
                       prepadded ? " pre-padded" : "", e, writes[e], dx[e], ref[e]);
        g_test_fail();
        return TRUE;
      }
    }
  }
  return TRUE;
}

/* Every stride 2–4, kernel 1–7, padding 0–3, and sizes 1 to 13 (odd and even, rows and
 * columns apart), two samples of 2 → 3 channels. */
static void
test_shapes(void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(31);
  int checked = 0;
  for (int stride = 2; stride <= TDM_K_PHASES_MAX_STRIDE; stride++)
    for (int kernel = 1; kernel <= 7; kernel++)
      for (int pad = 0; pad <= 3; pad++)
        for (int h = 1; h <= 13; h++) {
          int w = h % 3 == 0 ? h : h + 1 + h % 2; /* square, and odd against even */
          Shape s = {2, h, w, 2, 3, kernel, pad, stride};
          checked += check_shape(&s, rand);
        }
  g_test_message("%d shapes: %d phases of zeros, %d views of dy shifted, %d padded after, "
                 "%d pre-padded copies with margins",
                 checked, zero_phases, shifted_views, padded_after, pre_padded);
  g_assert_cmpint(checked, >, 1000);
  g_assert_cmpint(zero_phases, >, 0);
  g_assert_cmpint(shifted_views, >, 0);
  g_assert_cmpint(padded_after, >, 0);
  g_assert_cmpint(pre_padded, >, 0);
}

/* Wider channels on the shapes the CIFAR ResNets have: 3×3 at stride 2, padding 1, and the
 * 1×1 projection at stride 2, padding 0, on even and odd sizes. */
static void
test_resnet_shapes(void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(18);
  const Shape shapes[] = {
    {2, 8, 8, 16, 24, 3, 1, 2},
    {1, 9, 11, 16, 24, 3, 1, 2},
    {2, 8, 8, 16, 24, 1, 0, 2},
    {1, 9, 11, 8, 16, 1, 0, 2},
    {1, 32, 32, 8, 16, 3, 1, 2},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++)
    g_assert_true(check_shape(&shapes[i], rand));
}

/* 3×3 at stride 2, padding 1, 8 × 8 → 4 × 4, worked out by hand. dx[2t + 1] =
 * dy[t] · w[2] + dy[t + 1] · w[0], dx[2t] = dy[t] · w[1]: phase 0 has the middle tap and
 * no padding, phase 1 the outer two, flipped, and one row of padding after (dx's last
 * odd row, 7, has only dy[3] · w[2]). */
static void
test_by_hand(void)
{
  TdmKPhaseAxis even = tdm_k_phase_axis(8, 4, 3, 1, 2, 0);
  g_assert_cmpint(even.first_tap, ==, 1);
  g_assert_cmpint(even.taps, ==, 1);
  g_assert_cmpint(even.taps_before, ==, 0);
  g_assert_cmpint(even.count, ==, 4);
  g_assert_cmpint(even.in_start, ==, 0);
  g_assert_cmpint(even.in_count, ==, 4);
  g_assert_cmpint(even.pre, ==, 0);
  g_assert_cmpint(even.post, ==, 0);
  TdmKPhaseAxis odd = tdm_k_phase_axis(8, 4, 3, 1, 2, 1);
  g_assert_cmpint(odd.first_tap, ==, 0);
  g_assert_cmpint(odd.taps, ==, 2);
  g_assert_cmpint(odd.taps_before, ==, 1);
  g_assert_cmpint(odd.count, ==, 4);
  g_assert_cmpint(odd.in_count, ==, 4);
  g_assert_cmpint(odd.pre, ==, 0);
  g_assert_cmpint(odd.post, ==, 1);
  int phase, m;
  tdm_k_phase_of_tap(0, 3, 1, 2, &phase, &m);
  g_assert_cmpint(phase, ==, 1);
  g_assert_cmpint(m, ==, 1);
  tdm_k_phase_of_tap(1, 3, 1, 2, &phase, &m);
  g_assert_cmpint(phase, ==, 0);
  g_assert_cmpint(m, ==, 0);
  tdm_k_phase_of_tap(2, 3, 1, 2, &phase, &m);
  g_assert_cmpint(phase, ==, 1);
  g_assert_cmpint(m, ==, 0);

  /* 64 → 128 channels: phase (1, 0) writes dx's odd rows, even columns: 2 × 1 taps after
   * phase (0, 0)'s one and (0, 1)'s two, at dx's pixel (1, 0), every other row and
   * column. */
  TdmKPhase ph = tdm_k_phase(2, 8, 8, 64, 128, 3, 1, 2, 1, 0);
  g_assert_cmpint(ph.kind, ==, TDM_K_PHASE_CONV);
  g_assert_cmpint(ph.w_dims[2], ==, 2);
  g_assert_cmpint(ph.w_dims[3], ==, 1);
  g_assert_cmpint(ph.w_offset, ==, (int64_t)3 * 64 * 128);
  g_assert_cmpint(ph.y_offset, ==, 8 * 64);
  g_assert_cmpint(ph.y_strides[2], ==, 2 * 8 * 64);
  g_assert_cmpint(ph.y_strides[3], ==, 2 * 64);
  g_assert_cmpint(ph.y_strides[0], ==, 8 * 8 * 64);
  g_assert_cmpint(ph.x_offset, ==, 0);
  g_assert_cmpint(ph.x_strides[0], ==, 4 * 4 * 128);

  /* Pre-padded: no phase pads before, the odd ones one row (column) after, so dy's
   * 4 × 4 is copied into 5 × 5 with a zero row and column after it; phase (1, 1) reads
   * all of it, unpadded, phase (0, 0) its first 4 × 4. */
  TdmKPhasesPad pd = tdm_k_phases_pad(8, 8, 3, 1, 2);
  g_assert_cmpint(pd.before[0], ==, 0);
  g_assert_cmpint(pd.after[0], ==, 1);
  g_assert_cmpint(pd.after[1], ==, 1);
  g_assert_cmpint(pd.size[0], ==, 5);
  g_assert_cmpint(pd.size[1], ==, 5);
  g_assert_cmpint(tdm_k_phases_pad_source(3, 3, &pd), ==, 15);
  g_assert_cmpint(tdm_k_phases_pad_source(4, 0, &pd), ==, -1);
  TdmKPhase odd11 =
      tdm_k_phase_prepadded(tdm_k_phase(2, 8, 8, 64, 128, 3, 1, 2, 1, 1), &pd, 128);
  g_assert_cmpint(odd11.x_dims[2], ==, 5);
  g_assert_cmpint(odd11.x_dims[3], ==, 5);
  g_assert_cmpint(odd11.x_strides[2], ==, 5 * 128);
  g_assert_cmpint(odd11.x_offset, ==, 0);
  g_assert_cmpint(odd11.post[0] + odd11.post[1] + odd11.pre[0] + odd11.pre[1], ==, 0);
  TdmKPhase even00 =
      tdm_k_phase_prepadded(tdm_k_phase(2, 8, 8, 64, 128, 3, 1, 2, 0, 0), &pd, 128);
  g_assert_cmpint(even00.x_dims[2], ==, 4);
  g_assert_cmpint(even00.x_strides[0], ==, 5 * 5 * 128);
  /* 1×1 at stride 2, padding 0: no margins (nothing to pre-pad). */
  TdmKPhasesPad none = tdm_k_phases_pad(8, 8, 1, 0, 2);
  g_assert_false(tdm_k_phases_pad_any(&none));

  /* 1×1 at stride 2, padding 0: only phase (0, 0) has the tap; the other three write
   * zeros. */
  g_assert_cmpint(tdm_k_phase(1, 8, 8, 64, 128, 1, 0, 2, 0, 0).kind, ==, TDM_K_PHASE_CONV);
  g_assert_cmpint(tdm_k_phase(1, 8, 8, 64, 128, 1, 0, 2, 0, 1).kind, ==, TDM_K_PHASE_ZERO);
  g_assert_cmpint(tdm_k_phase(1, 8, 8, 64, 128, 1, 0, 2, 1, 1).kind, ==, TDM_K_PHASE_ZERO);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/conv-phases-plan/by-hand", test_by_hand);
  g_test_add_func("/conv-phases-plan/shapes", test_shapes);
  g_test_add_func("/conv-phases-plan/resnet-shapes", test_resnet_shapes);
  return g_test_run();
}
