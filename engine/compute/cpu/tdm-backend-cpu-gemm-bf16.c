/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-gemm-bf16.c — the CPU backend's matrix products of bfloat16 operands
 * (--precision bf16), the reference the GPU's bf16 GEMMs are checked against: every
 * product of two bfloat16 values is exact in float32, and the products are summed in
 * float32, as a GPU's tensor cores sum them.
 *
 * C is computed a block of MC × NC at a time into a float32 buffer, over the reduction
 * in pieces of KC, and only then scaled into C (or rounded, for gemm_bf16_out). Where
 * the CPU has AVX-512 BF16 (and the AVX-512 loops are in use), each piece is packed as
 * pairs of bfloat16 and multiplied by vdpbf16ps, 8 rows × 32 columns a step; elsewhere
 * the pieces are widened to float32 (exactly) and multiplied by OpenBLAS's sgemm. Both
 * sum the same exact products in float32, in different orders. The buffers are the
 * backend's, allocated once, a fixed size whatever the product (as BLAS keeps its own).
 */
#include "tdm-backend-cpu-private.h"
#include "tdm-bf16.h"

#include <cblas.h>
#include <string.h>

/* A block of C: MC rows (a multiple of MR) × NC columns (a multiple of NR), KC of the
 * reduction (even) a piece. */
#define MR 8
#define NR 32
#define MC 256
#define NC 256
#define KC 512

struct _TdmCpuGemmBf16 {
  float *a;                    /* the piece of op(A): MC × KC floats, or pairs */
  float *bm;                   /* the piece of op(B): KC × NC floats, or pairs */
  float *c;                    /* the block of C, MC × NC */
};

static TdmCpuGemmBf16 *
scratch_new(void)
{
  TdmCpuGemmBf16 *s = g_new0(TdmCpuGemmBf16, 1);
  s->a = g_new0(float, (size_t)MC * KC);
  s->bm = g_new0(float, (size_t)KC * NC);
  s->c = g_new0(float, (size_t)MC * NC);
  return s;
}

void
tdm_cpu_gemm_bf16_scratch_free(TdmCpuGemmBf16 *s)
{
  if (s == NULL)
    return;
  g_free(s->a);
  g_free(s->bm);
  g_free(s->c);
  g_free(s);
}

/* op(X)'s element (row i, column p) where X is stored row-major with leading
 * dimension ld, transposed when t. */
static inline uint16_t
at(const uint16_t *x, int ld, bool t, int i, int p)
{
  return t ? x[(size_t)p * ld + i] : x[(size_t)i * ld + p];
}

/* The widened pieces, for sgemm: a = op(A)[i0 .. i0 + mc, p0 .. p0 + kc] row-major
 * (ld kc), b = op(B)[p0 .. p0 + kc, j0 .. j0 + nc] row-major (ld nc). */
static void
widen_a(float *restrict a, const uint16_t *x, int ld, bool t, int i0, int mc, int p0, int kc)
{
  for (int i = 0; i < mc; i++)
    for (int p = 0; p < kc; p++)
      a[(size_t)i * kc + p] = tdm_bf16_value(at(x, ld, t, i0 + i, p0 + p));
}

static void
widen_b(float *restrict b, const uint16_t *x, int ld, bool t, int p0, int kc, int j0, int nc)
{
  /* op(B)'s row p is x's row p (or its column p when transposed). */
  for (int p = 0; p < kc; p++)
    for (int j = 0; j < nc; j++)
      b[(size_t)p * nc + j] = tdm_bf16_value(at(x, ld, t, p0 + p, j0 + j));
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_DOT 1

/* Two consecutive values of the reduction as one 32-bit lane: the first in the low
 * half, as vdpbf16ps pairs them (zero past the reduction's end). */
static inline uint32_t
pair(const uint16_t *x, int ld, bool t, int i, int p, int k_end)
{
  uint32_t lo = at(x, ld, t, i, p);
  uint32_t hi = p + 1 < k_end ? at(x, ld, t, i, p + 1) : 0;
  return lo | hi << 16;
}

/* op(A)'s piece in pairs, MR rows a group: [group][pair][row] (rows past m are 0). */
static void
pack_a(uint32_t *restrict a, const uint16_t *x, int ld, bool t, int i0, int mc, int p0, int kc,
       int m)
{
  const int pairs = (kc + 1) / 2, k_end = p0 + kc;
  for (int g = 0; g < (mc + MR - 1) / MR; g++)
    for (int q = 0; q < pairs; q++)
      for (int r = 0; r < MR; r++) {
        int i = i0 + g * MR + r;
        a[((size_t)g * pairs + q) * MR + r] = i < m ? pair(x, ld, t, i, p0 + 2 * q, k_end) : 0;
      }
}

/* op(B)'s piece in pairs, NR columns a group: [group][pair][column]; op(B) (k × n) is
 * read column by column, that is as op(B)ᵀ's rows: x transposed the other way. */
static void
pack_b(uint32_t *restrict b, const uint16_t *x, int ld, bool t, int p0, int kc, int j0, int nc,
       int n)
{
  const int pairs = (kc + 1) / 2, k_end = p0 + kc;
  for (int g = 0; g < (nc + NR - 1) / NR; g++)
    for (int q = 0; q < pairs; q++)
      for (int c = 0; c < NR; c++) {
        int j = j0 + g * NR + c;
        b[((size_t)g * pairs + q) * NR + c] = j < n ? pair(x, ld, !t, j, p0 + 2 * q, k_end) : 0;
      }
}

/* c (MR × NR, row stride ldc) += the group's products over `pairs` pairs. */
__attribute__((target("avx512f,avx512bf16"))) static void
dot_tile(float *c, int ldc, const uint32_t *a, const uint32_t *b, int pairs)
{
  __m512 acc[MR][2];
  for (int r = 0; r < MR; r++) {
    acc[r][0] = _mm512_loadu_ps(c + (size_t)r * ldc);
    acc[r][1] = _mm512_loadu_ps(c + (size_t)r * ldc + 16);
  }
  for (int q = 0; q < pairs; q++) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + (size_t)q * NR);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + (size_t)q * NR + 16);
    for (int r = 0; r < MR; r++) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[(size_t)q * MR + r]);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  for (int r = 0; r < MR; r++) {
    _mm512_storeu_ps(c + (size_t)r * ldc, acc[r][0]);
    _mm512_storeu_ps(c + (size_t)r * ldc + 16, acc[r][1]);
  }
}
#else
#define HAVE_DOT 0
#endif

gboolean
tdm_cpu_gemm_bf16_has_dot(void)
{
#if HAVE_DOT
  return __builtin_cpu_supports("avx512bf16");
#else
  return FALSE;
#endif
}

/* cbuf (mc × nc of ldc NC, zeroed) += op(A)[i0.., p0..] · op(B)[p0.., j0..] for one piece. */
static void
piece(TdmBackendCpu *cpu, bool ta, bool tb, const uint16_t *a, int lda, const uint16_t *bm,
      int ldb, int m, int n, int i0, int mc, int j0, int nc, int p0, int kc)
{
  TdmCpuGemmBf16 *s = cpu->gemm_bf16;
#if HAVE_DOT
  if (cpu->bf16_dot) {
    const int pairs = (kc + 1) / 2;
    pack_a((uint32_t *)s->a, a, lda, ta, i0, mc, p0, kc, m);
    pack_b((uint32_t *)s->bm, bm, ldb, tb, p0, kc, j0, nc, n);
    for (int g = 0; g < (mc + MR - 1) / MR; g++)
      for (int h = 0; h < (nc + NR - 1) / NR; h++)
        dot_tile(s->c + (size_t)g * MR * NC + h * NR, NC,
                 (const uint32_t *)s->a + (size_t)g * pairs * MR,
                 (const uint32_t *)s->bm + (size_t)h * pairs * NR, pairs);
    return;
  }
#endif
  widen_a(s->a, a, lda, ta, i0, mc, p0, kc);
  widen_b(s->bm, bm, ldb, tb, p0, kc, j0, nc);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mc, nc, kc, 1.0f, s->a, kc, s->bm, nc,
              1.0f, s->c, NC);
}

static gboolean
aborted(TdmBackend *b)
{
  return b->abort_flag != NULL && g_atomic_int_get(b->abort_flag);
}

/* The block loop both products share: each MC × NC block of C summed over the whole
 * reduction in float32, then handed to write (the block, its origin and size). */
typedef void (*WriteBlock) (const float *block, int i0, int mc, int j0, int nc, void *data);

static void
blocks(TdmBackend *b, bool ta, bool tb, int m, int n, int k, const uint16_t *a, int lda,
       const uint16_t *bm, int ldb, WriteBlock write, void *data)
{
  TdmBackendCpu *cpu = (TdmBackendCpu *)b;
  if (cpu->gemm_bf16 == NULL)
    cpu->gemm_bf16 = scratch_new();
  float *cbuf = cpu->gemm_bf16->c;
  for (int i0 = 0; i0 < m && !aborted(b); i0 += MC) {
    const int mc = MIN(MC, m - i0);
    for (int j0 = 0; j0 < n; j0 += NC) {
      const int nc = MIN(NC, n - j0);
      memset(cbuf, 0, sizeof(float) * MC * NC);
      for (int p0 = 0; p0 < k; p0 += KC)
        piece(cpu, ta, tb, a, lda, bm, ldb, m, n, i0, mc, j0, nc, p0, MIN(KC, k - p0));
      write(cbuf, i0, mc, j0, nc, data);
    }
  }
}

typedef struct {
  float alpha, beta;
  float *c;
  int ldc;
} ScaleInto;

/* C = alpha · block + beta · C, with beta 0 clearing C whatever it held. */
static void
scale_into(const float *block, int i0, int mc, int j0, int nc, void *data)
{
  const ScaleInto *s = data;
  for (int i = 0; i < mc; i++) {
    float *restrict c = s->c + (size_t)(i0 + i) * s->ldc + j0;
    const float *restrict v = block + (size_t)i * NC;
    if (s->beta == 0.0f)
      for (int j = 0; j < nc; j++)
        c[j] = s->alpha * v[j];
    else
      for (int j = 0; j < nc; j++)
        c[j] = s->alpha * v[j] + s->beta * c[j];
  }
}

typedef struct {
  uint16_t *c;
  int ldc;
} RoundInto;

static void
round_into(const float *block, int i0, int mc, int j0, int nc, void *data)
{
  const RoundInto *s = data;
  for (int i = 0; i < mc; i++) {
    uint16_t *restrict c = s->c + (size_t)(i0 + i) * s->ldc + j0;
    const float *restrict v = block + (size_t)i * NC;
    for (int j = 0; j < nc; j++)
      c[j] = tdm_bf16_round(v[j]);
  }
}

void
tdm_cpu_gemm_bf16(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                  const uint16_t *a, int lda, const uint16_t *bm, int ldb, float beta, float *c,
                  int ldc)
{
  ScaleInto s = {alpha, beta, c, ldc};
  blocks(b, trans_a, trans_b, m, n, k, a, lda, bm, ldb, scale_into, &s);
}

void
tdm_cpu_gemm_bf16_out(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                      const uint16_t *a, int lda, const uint16_t *bm, int ldb, uint16_t *c,
                      int ldc)
{
  RoundInto s = {c, ldc};
  blocks(b, trans_a, trans_b, m, n, k, a, lda, bm, ldb, round_into, &s);
}
