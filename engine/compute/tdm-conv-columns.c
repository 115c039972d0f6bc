/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-conv-columns.c — the column way's chunks and its workspace (tdm-conv-columns.h).
 * The engine's layout mirrored here is tdm-backend-cuda-conv-candidates.c's
 * (tdm_conv_layout(), run_im2col()); tests/gpu/test-cuda-conv.c compares the two. */
#include "tdm-conv-columns.h"

/* The engine's alignment of what it takes from the workspace. */
#define ENGINE_ALIGN 256

static size_t
up(size_t v, size_t to)
{
  return (v + to - 1) / to * to;
}

/* The least slack of a budget, whatever the chunks: what cuDNN's plans may ask beyond
 * the least-needing candidate. */
#define BUDGET_SLACK ((guint64)64 << 20)
/* A GPU chunk's bound in a bf16 run and in a float32 or tf32 one (tdm-conv-columns.h). */
#define CHUNK_BF16 ((size_t)32 << 20)
#define CHUNK_FLOAT ((size_t)256 << 20)

guint64
tdm_conv_budget(guint64 least, TdmPrecision precision)
{
  guint64 slack = MAX(BUDGET_SLACK, (guint64)tdm_conv_chunk_bytes(precision));
  guint64 twice = least > G_MAXUINT64 / 2 ? G_MAXUINT64 : 2 * least;
  guint64 more = least > G_MAXUINT64 - slack ? G_MAXUINT64 : least + slack;
  return MAX(twice, more);
}

guint64
tdm_conv_budget_beyond(guint64 least, guint64 reserved, TdmPrecision precision)
{
  reserved = MIN(reserved, least);
  guint64 own = tdm_conv_budget(least - reserved, precision);
  return own > G_MAXUINT64 - reserved ? G_MAXUINT64 : reserved + own;
}

/* TANDEM_CONV_CHUNK_MIB's bytes, 0 where it is not set. */
static size_t
chunk_bytes_set(void)
{
  static gsize bytes;
  if (g_once_init_enter(&bytes)) {
    const char *mib = g_getenv("TANDEM_CONV_CHUNK_MIB");
    guint64 m = 0;
    if (mib != NULL && !g_ascii_string_to_unsigned(mib, 10, 1, 4096, &m, NULL)) {
      g_warning("TANDEM_CONV_CHUNK_MIB: '%s' is not a number of mebibytes from 1 to 4096; "
                "the precision's own bound is used",
                mib);
      m = 0;
    }
    /* g_once_init_leave() takes no 0: one more than the bytes. */
    g_once_init_leave(&bytes, ((gsize)m << 20) + 1);
  }
  return bytes - 1;
}

size_t
tdm_conv_chunk_bytes(TdmPrecision precision)
{
  size_t set = chunk_bytes_set();
  if (set > 0)
    return set;
  return precision == TDM_PRECISION_BF16 ? CHUNK_BF16 : CHUNK_FLOAT;
}

size_t
tdm_conv_columns_bound(TdmBackendKind kind, TdmPrecision precision)
{
  return kind == TDM_BACKEND_CUDA ? tdm_conv_chunk_bytes(precision) : 0;
}

int
tdm_conv_chunk_samples(int n, size_t sample_bytes, size_t bound)
{
  if (n <= 1 || bound == 0 || sample_bytes == 0 || (size_t)n * sample_bytes <= bound)
    return MAX(n, 1);
  return (int)MAX((size_t)1, bound / sample_bytes);
}

TdmConvChunks
tdm_conv_even_chunks(int n, size_t sample_bytes, size_t bound)
{
  n = MAX(n, 1);
  int most = tdm_conv_chunk_samples(n, sample_bytes, bound);
  TdmConvChunks c;
  c.count = (n + most - 1) / most;
  c.size = (n + c.count - 1) / c.count;
  /* large · size + (count − large) · (size − 1) = n */
  c.large = n - (c.size - 1) * c.count;
  return c;
}

int
tdm_conv_chunk_first(const TdmConvChunks *c, int i, int *m)
{
  *m = i < c->large ? c->size : c->size - 1;
  return i * c->size - MAX(0, i - c->large);
}

size_t
tdm_conv_engine_reserved_bytes(const TdmConvShape *s, TdmConvDirection dir, gboolean bf16,
                               gboolean dy16_outside)
{
  if (!bf16)
    return 0;
  size_t rows = (size_t)s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s);
  size_t k = (size_t)s->kernel * s->kernel * s->c, out_c = (size_t)s->out_c;
  size_t w16_at = dir != TDM_CONV_FORWARD && !dy16_outside ? up(rows * out_c * 2, 16) : 0;
  return up(w16_at + out_c * k * 2, ENGINE_ALIGN);
}

size_t
tdm_conv_engine_im2col_bytes(const TdmConvShape *s, TdmConvDirection dir,
                             TdmPrecision precision, gboolean y16, gboolean dy16_outside)
{
  size_t pixels = (size_t)tdm_conv_out_h(s) * tdm_conv_out_w(s);
  size_t k = (size_t)s->kernel * s->kernel * s->c, out_c = (size_t)s->out_c;
  size_t bound = tdm_conv_chunk_bytes(precision);
  if (precision == TDM_PRECISION_BF16) {
    size_t scratch = tdm_conv_engine_reserved_bytes(s, dir, TRUE, dy16_outside);
    int chunk = tdm_conv_chunk_samples(s->n, pixels * k * 2, bound);
    return scratch + (size_t)chunk * pixels * k * 2;
  }
  gboolean direct = s->kernel == 1 && s->stride == 1 && s->pad == 0;
  gboolean staged = dir == TDM_CONV_FORWARD && y16;
  size_t col_sample = direct ? 0 : pixels * k * sizeof(float);
  size_t stage_sample = staged ? pixels * out_c * sizeof(float) : 0;
  int chunk = tdm_conv_chunk_samples(s->n, col_sample + stage_sample, bound);
  size_t need = (size_t)chunk * col_sample;
  if (staged)
    need = up(need, ENGINE_ALIGN) + (size_t)chunk * stage_sample;
  return need;
}

size_t
tdm_conv_replica_bytes(const TdmConvShape *s, const TdmConvComposition *how, gboolean backward,
                       gboolean need_dx, size_t bound)
{
  if (!how->columns)
    return 0;
  size_t pixels = (size_t)tdm_conv_out_h(s) * tdm_conv_out_w(s);
  size_t k = (size_t)s->kernel * s->kernel * s->c, out_c = (size_t)s->out_c;
  size_t rows = (size_t)s->n * pixels;
  int chunk32 = tdm_conv_chunk_samples(s->n, pixels * k * sizeof(float), bound);
  size_t cols32 = (size_t)chunk32 * pixels * k * sizeof(float);
  if (!how->bf16 && ((!backward && how->y16) || (backward && how->dy16)))
    return tdm_conv_staged_stage_at(s, backward && !how->dy16_outside, bound) +
           (size_t)tdm_conv_staged_chunk(s, bound) * pixels * out_c * sizeof(float);
  if (!how->bf16)
    return cols32;
  int chunk16 = tdm_conv_chunk_samples(s->n, pixels * k * sizeof(uint16_t), bound);
  size_t halves = (size_t)chunk16 * pixels * k;
  if (backward && !how->dy16_outside)
    halves += rows * out_c;
  gboolean dx16 = need_dx && how->bf16_dx;
  if (!how->params16 && (!backward || dx16))
    halves += out_c * k;
  /* An input gradient that does not fit the bf16 way goes through float32 columns. */
  if (backward && need_dx && !dx16)
    return MAX(halves * sizeof(uint16_t), cols32);
  return halves * sizeof(uint16_t);
}

int
tdm_conv_staged_chunk(const TdmConvShape *s, size_t bound)
{
  size_t pixels = (size_t)tdm_conv_out_h(s) * tdm_conv_out_w(s);
  size_t k = (size_t)s->kernel * s->kernel * s->c;
  return tdm_conv_chunk_samples(s->n, pixels * (k + (size_t)s->out_c) * sizeof(float), bound);
}

size_t
tdm_conv_staged_columns_at(const TdmConvShape *s, gboolean dy16_at_start)
{
  size_t rows = (size_t)s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s);
  return dy16_at_start ? up(rows * s->out_c * sizeof(uint16_t), 64) : 0;
}

size_t
tdm_conv_staged_stage_at(const TdmConvShape *s, gboolean dy16_at_start, size_t bound)
{
  size_t pixels = (size_t)tdm_conv_out_h(s) * tdm_conv_out_w(s);
  size_t k = (size_t)s->kernel * s->kernel * s->c;
  size_t columns = (size_t)tdm_conv_staged_chunk(s, bound) * pixels * k * sizeof(float);
  return tdm_conv_staged_columns_at(s, dy16_at_start) + up(columns, 64);
}
