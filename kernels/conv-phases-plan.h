/* SPDX-License-Identifier: GPL-3.0-or-later */
/* conv-phases-plan.h — a strided convolution's input gradient split by output phase: for
 * stride s, the pixels dx[s·ty + py][s·tx + px] of one phase (py, px) ∈ [0, s)² are a
 * stride-1 cross-correlation of dy with the taps (ky, kx) where ky ≡ py + pad and
 * kx ≡ px + pad (mod s), flipped and with the channels' roles swapped: a forward
 * convolution over dy (out_c channels in, c out) writing a strided view of dx. This file
 * is the arithmetic: each phase's views of dy and dx (dimensions, strides, offsets, as
 * cuDNN's tensor descriptors take them), its padding and its kernel, and where each tap
 * of the weights goes in the sorted kernels. Plain C without GLib or CUDA, shared by the
 * weight-sorting kernel (conv-phases.cu), the engine's candidate
 * (tdm-backend-cuda-conv-phases.c) and a CPU test (tests/engine/test-conv-phases-plan.c).
 *
 * One axis (rows; columns alike), stride s, kernel K, padding p, input size H, output
 * size OH = (H + 2p − K)/s + 1. The forward is y[o] = Σₖ x[s·o + k − p] · w[k], so
 * dx[i] = Σ dy[o] · w[k] over s·o + k − p = i. For i = s·t + φ: k ≡ φ + p (mod s), so
 * k = r + s·j with r = (φ + p) mod s, j ∈ [0, J), J = ⌈(K − r)/s⌉ (0 where r ≥ K), and
 * o = t + q − j with q = ⌊(φ + p)/s⌋. With m = J − 1 − j (the taps flipped):
 *   dx[s·t + φ] = Σₘ dy[t + m − P] · w[r + s·(J − 1 − m)],  P = J − 1 − q,
 * a stride-1 correlation of padding P before. A negative P starts the view of dy −P rows
 * in instead (in_start); the view keeps the rows the phase's T = ⌈(H − φ)/s⌉ outputs
 * reach, and what they reach past dy's end is padding after (post). Each tap k belongs
 * to one phase (φ = (k mod s − p) mod s), so the sorted kernels hold K² taps in all: as
 * many values as w. A phase with no tap (J = 0 on an axis) or no row of dy in reach
 * writes zeros; one with no output (φ ≥ H) writes nothing.
 *
 * Pre-padded (tdm_k_phases_pad()): a phase's padding is uneven (3×3 at stride 2,
 * padding 1: the odd phases have none before and one after), which some of cuDNN's
 * engines refuse. dy copied once into a buffer of B zero rows before it and A after
 * (B, A the most padding any phase that convolves has before and after; columns alike)
 * holds every phase's padding: its view starts at row in_start − pre + B of the copy
 * and spans pre + in_count + post rows, a stride-1 correlation without padding. It
 * stays inside the copy: in_start − pre ≥ −B, and in_start + in_count + post ≤ OH + A
 * (post > 0 only where the view reaches dy's end).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TDM_K_PHASES_BOTH __host__ __device__
#else
#define TDM_K_PHASES_BOTH
#endif

/* The largest stride split into phases (16 phases). */
#define TDM_K_PHASES_MAX_STRIDE 4

/* One axis of a phase. */
typedef struct {
  int phase;       /* φ: it writes dx's s·t + φ, t ∈ [0, count) */
  int first_tap;   /* r: its taps are w's r, r + s, … */
  int taps;        /* J: the stride-1 kernel's size on this axis */
  int taps_before; /* Σ J of the phases before φ: its taps' place in the axis' order */
  int count;       /* T: the outputs it writes */
  int in_start;    /* the first row of dy its view reads */
  int in_count;    /* the rows of dy its view reads */
  int pre, post;   /* the stride-1 correlation's padding before and after */
} TdmKPhaseAxis;

/* J, the taps of phase φ on an axis: w's r, r + s, … below kernel, r = (φ + pad) mod s. */
TDM_K_PHASES_BOTH static inline int
tdm_k_phase_taps(int kernel, int pad, int stride, int phase)
{
  int r = (phase + pad) % stride;
  return r < kernel ? (kernel - r + stride - 1) / stride : 0;
}

/* Σ J of the phases before φ on an axis. */
TDM_K_PHASES_BOTH static inline int
tdm_k_phase_taps_before(int kernel, int pad, int stride, int phase)
{
  int before = 0;
  for (int f = 0; f < phase; f++)
    before += tdm_k_phase_taps(kernel, pad, stride, f);
  return before;
}

/* The phase φ of one axis of a convolution of input size `size`, output size `out`. */
TDM_K_PHASES_BOTH static inline TdmKPhaseAxis
tdm_k_phase_axis(int size, int out, int kernel, int pad, int stride, int phase)
{
  TdmKPhaseAxis a;
  a.phase = phase;
  a.first_tap = (phase + pad) % stride;
  a.taps = tdm_k_phase_taps(kernel, pad, stride, phase);
  a.taps_before = tdm_k_phase_taps_before(kernel, pad, stride, phase);
  a.count = phase < size ? (size - phase + stride - 1) / stride : 0;
  int q = (phase + pad) / stride, p = a.taps - 1 - q;
  a.pre = p > 0 ? p : 0;
  a.in_start = p < 0 ? -p : 0;
  /* The rows of dy the outputs reach from in_start: T − 1 + J − pre. */
  int reach = a.count > 0 && a.taps > 0 ? a.count - 1 + a.taps - a.pre : 0;
  int left = out - a.in_start;
  a.in_count = reach < left ? reach : left;
  if (a.in_count < 0)
    a.in_count = 0;
  a.post = reach - a.in_count;
  return a;
}

/* Where tap k of an axis goes: its phase's index φ and its place m in that phase's
 * flipped kernel (m = J − 1 − j for k = r + s·j). */
TDM_K_PHASES_BOTH static inline void
tdm_k_phase_of_tap(int k, int kernel, int pad, int stride, int *phase, int *m)
{
  *phase = ((k % stride - pad) % stride + stride) % stride;
  *m = tdm_k_phase_taps(kernel, pad, stride, *phase) - 1 - k / stride;
}

/* What a phase does: writes nothing (no output pixel), zeros (no tap or nothing of dy in
 * reach), or a stride-1 correlation. */
typedef enum {
  TDM_K_PHASE_NONE,
  TDM_K_PHASE_ZERO,
  TDM_K_PHASE_CONV,
} TdmKPhaseKind;

/* A phase (py, px) of the input gradient of an NHWC convolution n × h × w × c → out_c,
 * kernel × kernel, as one forward convolution: its tensors as cuDNN describes them
 * (dimensions and strides in the order n, c, h, w, in elements; an offset in elements
 * from the tensor's start). x: the view of dy (out_c channels); w: its kernel in the
 * sorted weights, [c][taps_y][taps_x][out_c] (KRSC: c output channels); y: the view of
 * dx. Stride 1, padding pre and post per axis (rows, columns). */
typedef struct {
  TdmKPhaseKind kind;
  TdmKPhaseAxis row, col;
  int64_t x_dims[4], x_strides[4], x_offset;
  int64_t w_dims[4], w_offset;
  int64_t y_dims[4], y_strides[4], y_offset;
  int64_t pre[2], post[2];
} TdmKPhase;

/* Where phase (py, px)'s kernel starts in the sorted kernels, in elements: the phases
 * in order (py, px), those of earlier rows holding K · taps_before(py) taps, those
 * before it in its row taps_y · taps_before(px), each tap c · out_c values. */
TDM_K_PHASES_BOTH static inline int64_t
tdm_k_phases_block(int kernel, int pad, int stride, int py, int px, int c, int out_c)
{
  int64_t taps = (int64_t)kernel * tdm_k_phase_taps_before(kernel, pad, stride, py) +
                 (int64_t)tdm_k_phase_taps(kernel, pad, stride, py) *
                     tdm_k_phase_taps_before(kernel, pad, stride, px);
  return taps * c * out_c;
}

TDM_K_PHASES_BOTH static inline int
tdm_k_phases_out(int size, int kernel, int pad, int stride)
{
  return (size + 2 * pad - kernel) / stride + 1;
}

TDM_K_PHASES_BOTH static inline void
tdm_k_phases_four(int64_t *v, int64_t a, int64_t b, int64_t c, int64_t d)
{
  v[0] = a;
  v[1] = b;
  v[2] = c;
  v[3] = d;
}

TDM_K_PHASES_BOTH static inline TdmKPhase
tdm_k_phase(int n, int h, int w, int c, int out_c, int kernel, int pad, int stride, int py,
            int px)
{
  TdmKPhase ph;
  int oh = tdm_k_phases_out(h, kernel, pad, stride),
      ow = tdm_k_phases_out(w, kernel, pad, stride);
  ph.row = tdm_k_phase_axis(h, oh, kernel, pad, stride, py);
  ph.col = tdm_k_phase_axis(w, ow, kernel, pad, stride, px);
  ph.kind = ph.row.count == 0 || ph.col.count == 0         ? TDM_K_PHASE_NONE
            : ph.row.in_count == 0 || ph.col.in_count == 0 ? TDM_K_PHASE_ZERO
                                                           : TDM_K_PHASE_CONV;
  int64_t C = c, O = out_c;
  /* dy's rows in_start.. and columns likewise, packed NHWC of out_c channels. */
  tdm_k_phases_four(ph.x_dims, n, O, ph.row.in_count, ph.col.in_count);
  tdm_k_phases_four(ph.x_strides, (int64_t)oh * ow * O, 1, (int64_t)ow * O, O);
  ph.x_offset = ((int64_t)ph.row.in_start * ow + ph.col.in_start) * O;
  tdm_k_phases_four(ph.w_dims, C, O, ph.row.taps, ph.col.taps);
  ph.w_offset = tdm_k_phases_block(kernel, pad, stride, py, px, c, out_c);
  /* dx's every stride-th row and column from (py, px). */
  tdm_k_phases_four(ph.y_dims, n, C, ph.row.count, ph.col.count);
  tdm_k_phases_four(ph.y_strides, (int64_t)h * w * C, 1, (int64_t)stride * w * C,
                    (int64_t)stride * C);
  ph.y_offset = ((int64_t)py * w + px) * C;
  ph.pre[0] = ph.row.pre;
  ph.pre[1] = ph.col.pre;
  ph.post[0] = ph.row.post;
  ph.post[1] = ph.col.post;
  return ph;
}

/* Where w's value (o, ky, kx, ch) (KRSC: out_c × kernel × kernel × c) goes in the sorted
 * kernels: phase (py, px)'s block at its w_offset, [ch][my][mx][o] within it. */
TDM_K_PHASES_BOTH static inline int64_t
tdm_k_phases_sorted_index(int o, int ky, int kx, int ch, int c, int out_c, int kernel, int pad,
                          int stride)
{
  int py, my, px, mx;
  tdm_k_phase_of_tap(ky, kernel, pad, stride, &py, &my);
  tdm_k_phase_of_tap(kx, kernel, pad, stride, &px, &mx);
  int taps_y = tdm_k_phase_taps(kernel, pad, stride, py);
  int taps_x = tdm_k_phase_taps(kernel, pad, stride, px);
  int64_t block = tdm_k_phases_block(kernel, pad, stride, py, px, c, out_c);
  return block + (((int64_t)ch * taps_y + my) * taps_x + mx) * out_c + o;
}

/* The pre-padded copy of dy: per axis (rows, columns) its zeros before and after dy and
 * its size, and dy's size (OH, OW). */
typedef struct {
  int before[2], after[2];
  int size[2];     /* OH + before + after; OW likewise */
  int dy_size[2];  /* OH, OW */
} TdmKPhasesPad;

/* The most padding before and after of an axis' phases that reach dy (a phase that
 * convolves is one that does on both axes); FALSE where none does. */
TDM_K_PHASES_BOTH static inline bool
tdm_k_phases_margins(int size, int out, int kernel, int pad, int stride, int *before,
                     int *after)
{
  bool any = false;
  *before = 0;
  *after = 0;
  for (int f = 0; f < stride; f++) {
    TdmKPhaseAxis a = tdm_k_phase_axis(size, out, kernel, pad, stride, f);
    if (a.count == 0 || a.in_count == 0)
      continue;
    any = true;
    *before = a.pre > *before ? a.pre : *before;
    *after = a.post > *after ? a.post : *after;
  }
  return any;
}

/* The copy of dy that holds every phase's padding, for an input of h × w (no margins
 * where no phase convolves). */
TDM_K_PHASES_BOTH static inline TdmKPhasesPad
tdm_k_phases_pad(int h, int w, int kernel, int pad, int stride)
{
  TdmKPhasesPad pd;
  pd.dy_size[0] = tdm_k_phases_out(h, kernel, pad, stride);
  pd.dy_size[1] = tdm_k_phases_out(w, kernel, pad, stride);
  bool rows = tdm_k_phases_margins(h, pd.dy_size[0], kernel, pad, stride, &pd.before[0],
                                   &pd.after[0]);
  bool cols = tdm_k_phases_margins(w, pd.dy_size[1], kernel, pad, stride, &pd.before[1],
                                   &pd.after[1]);
  for (int d = 0; d < 2; d++) {
    if (!rows || !cols)
      pd.before[d] = pd.after[d] = 0;
    pd.size[d] = pd.dy_size[d] + pd.before[d] + pd.after[d];
  }
  return pd;
}

/* Whether the copy has any margin: where it has none, every phase is unpadded already. */
TDM_K_PHASES_BOTH static inline bool
tdm_k_phases_pad_any(const TdmKPhasesPad *pd)
{
  return pd->before[0] + pd->after[0] + pd->before[1] + pd->after[1] > 0;
}

/* Where the copy's pixel (r, q) of a sample comes from: dy's pixel r − before, q − before
 * within the sample (row · OW + column), or −1 for a zero of the margins. */
TDM_K_PHASES_BOTH static inline int64_t
tdm_k_phases_pad_source(int r, int q, const TdmKPhasesPad *pd)
{
  int y = r - pd->before[0], x = q - pd->before[1];
  if (y < 0 || y >= pd->dy_size[0] || x < 0 || x >= pd->dy_size[1])
    return -1;
  return (int64_t)y * pd->dy_size[1] + x;
}

/* Phase ph (out_c channels of dy) over the copy instead of dy: its view of dy widened by
 * its padding and taken from the copy, no padding left (pre and post 0; its axes' pre and
 * post still say what the padding was). A phase that does not convolve is unchanged. */
TDM_K_PHASES_BOTH static inline TdmKPhase
tdm_k_phase_prepadded(TdmKPhase ph, const TdmKPhasesPad *pd, int out_c)
{
  if (ph.kind != TDM_K_PHASE_CONV)
    return ph;
  int64_t O = out_c;
  int64_t rows = ph.pre[0] + ph.row.in_count + ph.post[0];
  int64_t cols = ph.pre[1] + ph.col.in_count + ph.post[1];
  int64_t top = ph.row.in_start - ph.pre[0] + pd->before[0];
  int64_t left = ph.col.in_start - ph.pre[1] + pd->before[1];
  tdm_k_phases_four(ph.x_dims, ph.x_dims[0], O, rows, cols);
  tdm_k_phases_four(ph.x_strides, (int64_t)pd->size[0] * pd->size[1] * O, 1,
                    (int64_t)pd->size[1] * O, O);
  ph.x_offset = (top * pd->size[1] + left) * O;
  for (int d = 0; d < 2; d++)
    ph.pre[d] = ph.post[d] = 0;
  return ph;
}
