/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-conv-workspace.c — the convolution engine within its workspace budget (part
 * of test-cuda-conv): the choice reached through a workspace grown as the engine asks
 * (the replica's first run), column-free for the 224-px stem and a ResNet's 3×3 and 1×1
 * layers; batches whose columns come in chunks (tdm-conv-columns.h: 32 MiB in a bf16
 * run, 256 MiB in a float32 one), the last chunk short; cuDNN's forward and weight
 * gradient of a bn's bf16 output in chunks of samples where the whole normalized input
 * is more than a chunk (an odd batch among them), the weight gradient whether its plan
 * writes float32 or bf16, its need one chunk's copy of the input as
 * tdm-backend-cuda-conv-chunks.c counts it. Every
 * candidate against the CPU reference within test-cuda-conv.c's bounds (bound(), and
 * chunk_rounding_share() for a bf16 weight gradient's chunk sums). Skips without a CUDA
 * GPU.
 */
#include "tdm-backend.h"
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "tdm-backend-cuda.h"
#include "tdm-backend-cuda-conv-chunks.h"
#include "tdm-backend-cuda-conv-name.h"
#include "tdm-backend-cuda-conv-budget.h"
#include "tdm-backend-cuda-conv-cache.h"
#include "tdm-conv-columns.h"
#include "tdm-cudnn.h"
#include "test-cuda-conv.h"
#include "test-cuda-layers.h"

/* A bf16 cuDNN weight gradient's need, over an input the engine writes itself (not
 * padded): what tdm-backend-cuda-conv-chunks.c counts from the layout (the
 * reservations, one chunk's copy of the input, a bf16 plan's staged chunk sum, the
 * float32 sum of a later chunk) with the plan's own workspace, and its name's chunks
 * the rule's. */
static void
check_wgrad_need(Device *d, const Problem *p, const char *name, const char *label)
{
  TdmCudnnName n;
  if (!tdm_cudnn_name_parse(name, &n) || n.padded)
    return;
  TdmConvChunks chunks = tdm_conv_cudnn_chunks(&p->s, TDM_CONV_WGRAD, TRUE, 0);
  g_assert_cmpint(n.chunk, ==, chunks.count > 1 ? chunks.size : 0);
  size_t own = tdm_cuda_conv_cudnn_workspace_named(d->b, &d->a, TDM_CONV_WGRAD, name);
  size_t need = tdm_cuda_conv_need_named(d->b, &d->a, TDM_CONV_WGRAD, name);
  g_test_message("%s: needs %zu bytes, %zu of them cuDNN's own (%d chunks)", label, need, own,
                 chunks.count);
  g_assert_cmpuint(need, ==, tdm_conv_cudnn_wgrad_bytes(&p->s, &chunks, n.out == 'f', own));
}

/* The engine's choice within its workspace budget, reached as the replica reaches it
 * (a workspace grown on demand): the result against the CPU; where a candidate without
 * columns takes the shape (cuDNN's, for the stem and a ResNet's 3×3), a column-free choice
 * needs less than the bf16 columns, which are many times the operands there. */
static void
test_grown_workspace(void)
{
  if (!have_gpu())
    return;
  const Case grown[] = {
    {2, 224, 224, 3, 64, 7, 3, 2}, /* the stem at 224 px */
    {4, 28, 28, 64, 64, 3, 1, 1},
    {4, 28, 28, 64, 128, 1, 0, 2},
  };
  TdmBackend *backends[2] = {gpu, gpu_bf16};
  for (guint i = 0; i < G_N_ELEMENTS(grown); i++) {
    for (int prec = 0; prec < 2; prec++) {
      TdmBackend *b = backends[prec];
      const Case *c = &grown[i];
      Problem p;
      problem_init(&p, c, NULL);
      Device d;
      device_init(&d, b, &p, prec == 1);
      /* The stem's input gradient is never asked for (a first layer). */
      if (c->c == 3)
        d.a.dx = NULL;
      g_autofree char *what = g_strdup_printf("%s n%d %dx%dx%d→%d k%d s%d grown",
                                              prec ? "bf16" : "fp32", c->n, c->h, c->w, c->c,
                                              c->out_c, c->kernel, c->stride);
      size_t columns = p.rows * p.k * (prec ? 2 : 4);
      for (int backward = 0; backward < 2; backward++) {
        size_t need = 0;
        gboolean took = engine_call_grown(&d, backward, &need);
        TdmConvDirection dir = backward ? TDM_CONV_WGRAD : TDM_CONV_FORWARD;
        const char *chosen = tdm_cuda_conv_chosen(b, &d.a, dir);
        g_test_message("%s %s: %s, chosen %s, needs %zu bytes (columns %zu)", what,
                       backward ? "backward" : "forward", took ? "ran" : "declined",
                       chosen != NULL ? chosen : "none", need, columns);
        g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(b, &d.a, dir);
        gboolean column_free = FALSE;
        for (guint k = 0; k < names->len; k++)
          column_free = column_free || !g_str_equal(g_ptr_array_index(names, k), "im2col");
        /* With cuDNN, every one of these shapes has a way without columns in bf16 (the
         * stem's by its channels padded to 8, ":c8"). */
        if (tdm_cudnn_get() != NULL && !column_free) {
          g_test_message("%s%s: only im2col takes it", prec ? "FAILED " : "", what);
          if (prec)
            g_test_fail();
        }
        if (!took) {
          /* Declined: the replica composes it (im2col chosen, the replica's own way). */
          g_assert_cmpstr(chosen, ==, "im2col");
          continue;
        }
        /* A column-free choice needs less than the columns. Which one wins is timed: at
         * small n im2col may (0.012 against cuDNN's 0.016 ms on an H100), and then its
         * columns are what it needs. */
        if (column_free && c->kernel > 1 && chosen != NULL && !g_str_equal(chosen, "im2col"))
          g_assert_cmpuint(need, <, columns);
        if (backward) {
          check_close_b(b, what, d.dw, p.dw_ref, p.weights, bound(b, &p, TDM_CONV_WGRAD));
          if (d.a.dx != NULL)
            check_close_b(b, what, d.dx, p.dx_ref, p.in, bound(b, &p, TDM_CONV_DGRAD));
        } else {
          check_close_b(b, what, d.y, p.y_ref, p.out, bound(b, &p, TDM_CONV_FORWARD));
        }
      }
      device_clear(&d);
      problem_clear(&p);
    }
  }
}

/* Batches whose columns are more than a bf16 run's chunk holds (tdm-conv-columns.h: 32
 * MiB), odd sizes, so that the last chunk is short: every candidate against the CPU as
 * test_candidates checks them (im2col's chunks among them), and im2col's own: its need
 * is tdm_conv_engine_im2col_bytes()'s (what the memory plan counts), less than the
 * whole batch's columns, and its weight gradient, summed over the chunks in their
 * order, and its input gradient are the same bits twice. A float32 run's chunks hold
 * 256 MiB: there the 224-px stem (36, 36, 13) and the case of one sample's columns more
 * than a chunk (1 each) come in chunks, the others' float32 columns whole (their need
 * is then the whole batch's columns). The float32 inputs of the
 * projection and of the 1×1 at stride 1 are more than 32 MiB as bf16, so cuDNN's
 * forwards and weight gradients of them (float32 or bf16 output, each needing one
 * chunk's copy: check_wgrad_need()) run in chunks of samples (two sizes: 2 and 1, 6 and
 * 5), as do the padded stem's of the last case (29 and 28; its weight gradient float32
 * only). Their large input gradients (the last four's) are where cuDNN's
 * bf16 results for a float32 destination are widened in place (tdm-backend-cuda-conv-candidates.c's
 * widen_in_place()), checked against the CPU with the rest. */
static const Case chunked_cases[] = {
  {21, 225, 223, 3, 16, 7, 3, 2}, /* a 7×7 stem: 9 bf16 samples a chunk, 9, then 3 */
  {17, 61, 59, 64, 24, 3, 1, 1},  /* 3×3, 64 channels: 8, 8, 1 (float32: whole) */
  {15, 255, 253, 17, 8, 3, 1, 2}, /* 3×3 at stride 2, 17 channels: 6, 6, 3 */
  {17, 361, 359, 64, 16, 1, 0, 2}, /* a projection, 1×1 at stride 2: 8, 8, 1 */
  {17, 181, 179, 64, 16, 1, 0, 1}, /* 1×1 at stride 1: bf16 copies of x, 8, 8, 1 */
  {3, 255, 257, 64, 8, 3, 1, 1},  /* one sample's columns more than a chunk: 1 each (151 MB
                                   * a sample in float32: 1 each there too) */
  /* The stem at 224 px, its input padded to 8 channels (68 MB as bf16): cuDNN's ":c8"
   * forward and float32 weight gradient in chunks of 29 and 28 samples. */
  {85, 224, 224, 3, 16, 7, 3, 2},
};

static void
test_chunked(void)
{
  if (!have_gpu())
    return;
  TdmBackend *backends[2] = {gpu, gpu_bf16};
  int float_chunked = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(chunked_cases); i++) {
    const Case *c = &chunked_cases[i];
    for (int prec = 0; prec < 2; prec++) {
      TdmBackend *b = backends[prec];
      Problem p;
      problem_init(&p, c, NULL);
      Device d;
      device_init(&d, b, &p, prec == 1);
      g_autofree char *what = g_strdup_printf("chunked %s n%d %dx%dx%d→%d k%d p%d s%d",
                                              prec ? "bf16" : "fp32", c->n, c->h, c->w, c->c,
                                              c->out_c, c->kernel, c->pad, c->stride);
      size_t whole = p.rows * p.k * (prec ? 2 : 4);
      gboolean direct = c->kernel == 1 && c->stride == 1 && c->pad == 0;
      /* A float32 1×1 conv of stride 1 multiplies its input as it is: no columns. */
      gboolean columns = prec == 1 || !direct;
      gboolean chunked = columns && whole > tdm_conv_chunk_bytes(b->precision);
      if (prec == 1)
        g_assert_true(chunked);
      float_chunked += prec == 0 && chunked;
      check_candidates(&d, &p, what, p.y_ref);
      if (prec == 1) {
        g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(b, &d.a, TDM_CONV_WGRAD);
        for (guint k = 0; k < names->len; k++) {
          const char *name = g_ptr_array_index(names, k);
          g_autofree char *label = g_strdup_printf("%s wgrad %s", what, name);
          check_wgrad_need(&d, &p, name, label);
        }
      }
      for (int dir = TDM_CONV_FORWARD; dir <= TDM_CONV_WGRAD; dir++) {
        size_t need = tdm_cuda_conv_need_named(b, &d.a, dir, "im2col");
        g_assert_cmpuint(need, ==,
                         tdm_conv_engine_im2col_bytes(&p.s, dir, b->precision, FALSE, FALSE));
        /* Whole columns would need all n samples' beside the same scratch (in bf16,
         * the weights and, backward, dy as bf16, rounded up as the engine lays them
         * out); the chunks need less, and at least one sample's columns; float32
         * columns that fit one chunk, all n samples'. */
        size_t scratch = 0;
        if (prec == 1) {
          size_t dy16 = dir != TDM_CONV_FORWARD ? (p.rows * c->out_c * 2 + 15) / 16 * 16 : 0;
          scratch = (dy16 + (size_t)c->out_c * p.k * 2 + 255) / 256 * 256;
        }
        if (chunked) {
          g_assert_cmpuint(need, <, scratch + whole);
          g_assert_cmpuint(need, >=, scratch + whole / c->n);
        } else {
          g_assert_cmpuint(need, ==, columns ? whole : 0);
        }
        if (dir == TDM_CONV_FORWARD)
          continue;
        float *target = dir == TDM_CONV_DGRAD ? d.dx : d.dw;
        size_t count = dir == TDM_CONV_DGRAD ? p.in : p.weights;
        g_autofree float *first = g_new(float, count), *second = g_new(float, count);
        for (int run = 0; run < 2; run++) {
          g_assert_true(tdm_cuda_conv_run_named(b, &d.a, dir, "im2col"));
          tdm_backend_download(b, run == 0 ? first : second, target, count * 4);
          assert_ok(b);
        }
        g_assert_cmpmem(first, count * 4, second, count * 4);
      }
      device_clear(&d);
      problem_clear(&p);
    }
  }
  /* Float32 columns in chunks still: the 224-px stem's and the one-sample case's. */
  g_assert_cmpint(float_chunked, ==, 2);
  /* --exact on the stem's chunked shape: the rule's choice, the same bits twice, and
   * within the bound of the CPU's. */
  g_autoptr(GError) error = NULL;
  TdmBackend *exact = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  exact->deterministic = true;
  Problem p;
  problem_init(&p, &chunked_cases[0], NULL);
  Device d;
  device_init(&d, exact, &p, TRUE);
  d.a.dx = NULL; /* a first layer */
  g_test_message("exact, chunked stem: wgrad %s",
                 tdm_cuda_conv_chosen(exact, &d.a, TDM_CONV_WGRAD));
  g_autofree float *first = g_new(float, p.weights), *second = g_new(float, p.weights);
  for (int run = 0; run < 2; run++) {
    /* Declined for im2col (the replica's own composition, in the same chunks): the
     * engine's im2col, the same operations. */
    if (!tdm_backend_conv_engine_backward(exact, &d.a))
      g_assert_true(tdm_cuda_conv_run_named(exact, &d.a, TDM_CONV_WGRAD, "im2col"));
    tdm_backend_download(exact, run == 0 ? first : second, d.dw, p.weights * 4);
    assert_ok(exact);
    if (run == 1)
      g_assert_cmpmem(first, p.weights * 4, second, p.weights * 4);
  }
  check_close_b(exact, "exact chunked stem wgrad", d.dw, p.dw_ref, p.weights,
                bound(exact, &p, TDM_CONV_WGRAD));
  device_clear(&d);
  problem_clear(&p);
  tdm_backend_free(exact);
}

/* test_bn_input_chunks' device side on backend b: the bn's ReLU, the output as bf16, the
 * input gradient not wanted (it reads no input: nothing to chunk). */
static void
chunks_input_init(BnInput *in, TdmBackend *b, const Problem *p, const float *bn,
                  const uint16_t *x16)
{
  bn_input_init(in, b, p, bn, x16, TRUE, TRUE, 0);
  in->d.a.dx = NULL;
}

/* The weight gradient of test_bn_input_chunks' case as the replica reaches it (a fresh
 * backend, a workspace grown as the engine asks, the choice timed and screened:
 * tdm-backend-cuda-conv-screen.h): the engine's result within the bf16 bound (2⁻⁷: the
 * operands' roundings, which every candidate shares, and the output's; a bf16 plan's
 * chunk sums' on top, chunk_rounding_share()), and so is the candidate the screen
 * offered, the choice, run by name (`errors`: each candidate's relative error against
 * the CPU, and its bound); the others are said with theirs, and whether the screen left
 * them out (cuDNN's engine 62 writing bf16 over this million-row sum, whole, lay
 * 0.0065–0.0100 from the CPU on the H100): it compares only those the choice tries,
 * fastest first, so one slower than the choice is neither compared nor offered. Where
 * more than one candidate is within the budget the choice was timed, so screened
 * against a reference, which the screen keeps. */
static void
bn_input_screened(const Problem *p, const float *bn, const uint16_t *x16, const char *what,
                  GHashTable *errors)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *fresh = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  tdm_conv_cache_reset(); /* no choice of this process's for the key: timed now */
  BnInput in;
  chunks_input_init(&in, fresh, p, bn, x16);
  size_t need = 0;
  gboolean took = engine_call_grown(&in.d, TRUE, &need);
  const char *chosen = tdm_cuda_conv_chosen(fresh, &in.d.a, TDM_CONV_WGRAD);
  g_autofree char *reference = NULL;
  g_autoptr(GPtrArray) left_out =
      tdm_cuda_conv_left_out(fresh, &in.d.a, TDM_CONV_WGRAD, &reference);
  g_test_message("%s wgrad: the engine chose %s (%s, %zu bytes), screened against %s, %u "
                 "left out", what, chosen, took ? "ran" : "declined: the replica's own",
                 need, reference != NULL ? reference : "nothing", left_out->len);
  g_assert_nonnull(chosen);
  /* Timed where more than one candidate is within the budget, as the engine counts it
   * (tdm-backend-cuda-conv-budget.h): then screened. */
  g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(fresh, &in.d.a, TDM_CONV_WGRAD);
  g_autofree guint64 *needs = g_new(guint64, MAX(names->len, 1));
  g_autofree gboolean *eligible = g_new(gboolean, MAX(names->len, 1));
  for (guint k = 0; k < names->len; k++)
    needs[k] = tdm_cuda_conv_need_named(fresh, &in.d.a, TDM_CONV_WGRAD,
                                        g_ptr_array_index(names, k));
  if (tdm_conv_budget_select(
          needs, names->len,
          tdm_conv_engine_reserved_bytes(&in.d.a.shape, TDM_CONV_WGRAD, TRUE, FALSE),
          TDM_PRECISION_BF16, eligible) > 1)
    g_assert_nonnull(reference);
  if (!took) /* im2col: the replica composes it, the same operations as the engine's */
    g_assert_true(tdm_cuda_conv_run_named(fresh, &in.d.a, TDM_CONV_WGRAD, "im2col"));
  g_autofree char *label = g_strdup_printf("%s wgrad, the engine's %s", what, chosen);
  check_close_b(fresh, label, in.d.dw, p->dw_ref, p->weights,
                0x1p-7 + chunk_rounding_share(p, TDM_CONV_WGRAD, chosen));
  GHashTableIter iter;
  gpointer name, judged;
  g_hash_table_iter_init(&iter, errors);
  while (g_hash_table_iter_next(&iter, &name, &judged)) {
    gboolean out = g_ptr_array_find_with_equal_func(left_out, name, g_str_equal, NULL);
    const double *e = judged; /* the relative error, its bound */
    gboolean offered = g_str_equal(name, chosen);
    g_test_message("%s wgrad %s: %.3g (bound %.3g)%s", what, (const char *)name, e[0], e[1],
                   out ? ", left out by the screen" : offered ? ", chosen" : "");
    if (offered && !(e[0] <= e[1])) {
      g_test_message("FAILED %s wgrad %s: %.3g, offered by the screen", what,
                     (const char *)name, e[0]);
      g_test_fail();
    }
  }
  g_assert_false(g_ptr_array_find_with_equal_func(left_out, chosen, g_str_equal, NULL));
  if (reference != NULL)
    g_assert_false(g_ptr_array_find_with_equal_func(left_out, reference, g_str_equal, NULL));
  bn_input_clear(&in);
  tdm_backend_free(fresh);
}

/* A bf16 backend whose bn passes walk downwards (TANDEM_DESCENDING, the default) or
 * upwards (=0), the variable as it was after. */
static TdmBackend *
backend_walking(gboolean descending)
{
  g_autofree char *was = g_strdup(g_getenv("TANDEM_DESCENDING"));
  g_setenv("TANDEM_DESCENDING", descending ? "1" : "0", TRUE);
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  if (was != NULL)
    g_setenv("TANDEM_DESCENDING", was, TRUE);
  else
    g_unsetenv("TANDEM_DESCENDING");
  return b;
}

/* test_bn_input_chunks' forward with its chunks run last first and each chunk's input
 * normalized downwards (TANDEM_DESCENDING's default), and first to last and upwards
 * (=0): the same bits, for every cuDNN candidate in chunks (`suffix`) and im2col's,
 * whose chunks keep their samples, sizes and plans either way. A candidate whose two
 * upward runs differ is not deterministic itself: said, not compared. */
static void
forward_chunk_order(const Problem *p, const float *bn, const uint16_t *x16, const char *what,
                    const char *suffix)
{
  TdmBackend *walks[2] = {backend_walking(FALSE), backend_walking(TRUE)};
  BnInput in[2];
  for (int w = 0; w < 2; w++)
    chunks_input_init(&in[w], walks[w], p, bn, x16);
  g_autoptr(GPtrArray) names =
      tdm_cuda_conv_candidate_names(walks[0], &in[0].d.a, TDM_CONV_FORWARD);
  g_autofree uint16_t *up = g_new(uint16_t, p->out), *again = g_new(uint16_t, p->out);
  g_autofree uint16_t *down = g_new(uint16_t, p->out);
  uint16_t *runs[3] = {up, again, down};
  int compared = 0;
  for (guint k = 0; k < names->len; k++) {
    const char *name = g_ptr_array_index(names, k);
    if (!g_str_has_suffix(name, suffix) && !g_str_equal(name, "im2col"))
      continue;
    if (tdm_cuda_conv_need_named(walks[0], &in[0].d.a, TDM_CONV_FORWARD, name) >
        in[0].d.a.work_bytes)
      continue;
    g_autofree char *label = g_strdup_printf("%s forward %s", what, name);
    gboolean ran = TRUE;
    for (int r = 0; r < 3 && ran; r++) {
      BnInput *on_walk = &in[r < 2 ? 0 : 1];
      bn_input_poison(on_walk, p);
      ran = tdm_cuda_conv_run_named(on_walk->d.b, &on_walk->d.a, TDM_CONV_FORWARD, name);
      if (ran)
        bn_input_forward_error(on_walk, p, runs[r]);
    }
    if (!ran) {
      g_test_message("%s: not a candidate of both backends", label);
      continue;
    }
    if (memcmp(up, again, p->out * 2) != 0) {
      g_test_message("%s: two upward runs differ (not deterministic): not compared", label);
      continue;
    }
    compared++;
    gboolean same = memcmp(up, down, p->out * 2) == 0;
    g_test_message("%s: downwards, last chunk first, against upwards: %s", label,
                   same ? "the same bits" : "different");
    if (!same) {
      g_test_message("FAILED %s: the chunks' order changed the bits", label);
      g_test_fail();
    }
  }
  if (compared == 0) {
    g_test_message("FAILED %s: no forward candidate compared in both orders", what);
    g_test_fail();
  }
  for (int w = 0; w < 2; w++) {
    bn_input_clear(&in[w]);
    tdm_backend_free(walks[w]);
  }
}

/* A forward whose input a bn before stored as bf16 and the conv normalizes as it reads
 * it ("bn x16 y16"), where the whole normalized input is more than a chunk holds
 * (tdm-conv-columns.h: a bf16 run's 32 MiB): cuDNN runs it in even chunks of samples
 * ("cudnn:…:nM": tdm-backend-cuda-conv-candidates.c's cudnn_chunks()), each with a plan for its
 * size — an odd batch (37 at 128 px: 13, 12, 12, two plans) and an even one (64: four of 16,
 * one plan). Every forward candidate against the CPU's convolution of the CPU's bn output,
 * within the bf16 bound; every weight-gradient one (summed over the chunks in float32,
 * a bf16 plan's chunk sums widened first) measured, and the one the screen offers, the
 * engine's choice, within the bf16 bound too (a bf16 plan's chunk sums' roundings on
 * top: chunk_rounding_share(); bn_input_screened()); every cuDNN weight gradient's need one chunk's
 * copy of the input (check_wgrad_need()), and a bf16-output one among them run by name
 * where cuDNN is there; the chunked ones within the budget the chunked columns set, so
 * the engine may choose them; forced to cuDNN (TANDEM_CONV=cudnn) through a workspace
 * grown as the replica grows it, the engine chooses a chunked plan and its result
 * matches; a chunked weight gradient is the same bits twice; under --exact the rule's
 * choice is the same bits twice; the forward's chunks run last first (and normalized
 * downwards) give the bits of first to last (forward_chunk_order()). */
static void
test_bn_input_chunks(void)
{
  if (!have_gpu())
    return;
  const Case chunk_cases[] = {
    {37, 128, 128, 64, 16, 3, 1, 1}, /* 74 MiB of bf16 input: 13 + 12 + 12 */
    {64, 128, 128, 64, 16, 1, 0, 1}, /* 128 MiB: 4 × 16 */
  };
  gboolean cudnn = tdm_cudnn_get() != NULL;
  int bf16_sums_run = 0; /* bf16-output cuDNN weight gradients run in chunks */
  for (guint i = 0; i < G_N_ELEMENTS(chunk_cases); i++) {
    const Case *c = &chunk_cases[i];
    size_t in = (size_t)c->n * c->h * c->w * c->c;
    size_t bound = tdm_conv_chunk_bytes(TDM_PRECISION_BF16);
    g_assert_cmpuint(in * 2, >, bound);
    TdmConvChunks chunks = tdm_conv_even_chunks(c->n, (size_t)c->h * c->w * c->c * 2, bound);
    g_autofree char *suffix = g_strdup_printf(":n%d", chunks.size);
    g_autofree uint16_t *x16 = NULL;
    g_autofree float *x = random_bf16_input(in, &x16);
    g_autofree float *bn = random_bn(c->c);
    g_autofree float *xn = g_new(float, in);
    tdm_backend_bn_forward(cpu, xn, x, TDM_DTYPE_F32, bn, bn + c->c, bn + 2 * c->c,
                           bn + 3 * c->c, (int)(in / c->c), c->c, true);
    Problem p;
    problem_init(&p, c, xn);
    BnInput main_in;
    chunks_input_init(&main_in, gpu_bf16, &p, bn, x16);
    Device d = main_in.d;
    g_autofree char *what = g_strdup_printf("bn x16 y16 n%d %dx%dx%d→%d k%d (%d chunks of ≤ %d)",
                                            c->n, c->h, c->w, c->c, c->out_c, c->kernel,
                                            chunks.count, chunks.size);
    g_assert_cmpint(chunks.count, >, 1);
    g_autofree uint16_t *host = g_new(uint16_t, p.out);
    g_autofree float *dw_first = g_new(float, p.weights);
    g_autofree float *dw_again = g_new(float, p.weights);
    g_autoptr(GHashTable) wgrad_errors =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    int forward_admitted = 0;
    for (int dir = TDM_CONV_FORWARD; dir <= TDM_CONV_WGRAD; dir += 2) {
      g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(gpu_bf16, &d.a, dir);
      /* The most the engine lets a candidate need: the chunked columns' budget, beyond
       * the reservations every candidate of the call holds (tdm_conv_budget_beyond()). */
      guint64 budget = tdm_conv_budget_beyond(
          tdm_cuda_conv_need_named(gpu_bf16, &d.a, dir, "im2col"),
          tdm_conv_engine_reserved_bytes(&d.a.shape, dir, TRUE, FALSE), TDM_PRECISION_BF16);
      int chunked = 0, admitted = 0;
      for (guint k = 0; k < names->len; k++) {
        const char *name = g_ptr_array_index(names, k);
        g_autofree char *label = g_strdup_printf("%s %s %s", what, direction_names[dir], name);
        size_t need = tdm_cuda_conv_need_named(gpu_bf16, &d.a, dir, name);
        gboolean in_chunks = g_str_has_suffix(name, suffix);
        chunked += in_chunks;
        admitted += in_chunks && need <= budget;
        /* Every cuDNN forward and weight gradient runs in chunks, the latter's chunk
         * sums added in float32 whether its plan writes float32 or bf16; a weight
         * gradient needs one chunk's copy of the input. */
        if (g_str_has_prefix(name, "cudnn:"))
          g_assert_true(in_chunks);
        if (dir == TDM_CONV_WGRAD)
          check_wgrad_need(&d, &p, name, label);
        g_test_message("%s: needs %zu bytes (budget %" G_GUINT64_FORMAT ")", label, need,
                       budget);
        if (need > d.a.work_bytes) {
          g_test_message("%s: more than the test's workspace, not run", label);
          continue;
        }
        if (dir == TDM_CONV_FORWARD) {
          bn_input_poison(&main_in, &p);
          g_assert_true(tdm_cuda_conv_run_named(gpu_bf16, &d.a, dir, name));
          double rel = bn_input_forward_error(&main_in, &p, NULL);
          g_test_message("%s: %.3g", label, rel);
          if (!(rel <= 0x1p-7)) {
            g_test_message("FAILED %s: %.3g", label, rel);
            g_test_fail();
          }
          continue;
        }
        for (int run = 0; run < 2; run++) {
          poison_b(gpu_bf16, d.dw, p.weights);
          g_assert_true(tdm_cuda_conv_run_named(gpu_bf16, &d.a, dir, name));
          tdm_backend_download(gpu_bf16, run == 0 ? dw_first : dw_again, d.dw, p.weights * 4);
          assert_ok(gpu_bf16);
        }
        g_assert_cmpmem(dw_first, p.weights * 4, dw_again, p.weights * 4);
        /* Judged below, once the engine's screen has said which it offers: within 2⁻⁷
         * (the operands' and the output's roundings), a bf16 plan's chunk sums' on top.
         * Wrong indices or a lost chunk would be off by the result itself. */
        gboolean rounds_sum = g_str_has_prefix(name, "cudnn") && strstr(name, ":h") != NULL;
        bf16_sums_run += rounds_sum && in_chunks;
        double judged[2] = {rel_error(dw_first, p.dw_ref, p.weights),
                            0x1p-7 + chunk_rounding_share(&p, dir, name)};
        g_test_message("%s: relative error %.3g (bound %.3g)", label, judged[0], judged[1]);
        g_hash_table_insert(wgrad_errors, g_strdup(name), g_memdup2(judged, sizeof judged));
      }
      g_test_message("%s %s: %u candidates, %d in chunks, %d within the budget", what,
                     direction_names[dir], names->len, chunked, admitted);
      if (dir == TDM_CONV_FORWARD)
        forward_admitted = admitted;
      else
        bn_input_screened(&p, bn, x16, what, wgrad_errors);
      if (cudnn && dir == TDM_CONV_FORWARD && admitted == 0) {
        g_test_message("FAILED %s: cuDNN is loaded but no chunked forward is within the "
                       "budget", what);
        g_test_fail();
      }
    }

    forward_chunk_order(&p, bn, x16, what, suffix);

    /* Forced to cuDNN, as the replica calls the engine (a workspace grown on demand),
     * on a backend of its own (the choice is fresh): a chunked plan (the others are
     * not cuDNN's), within the bf16 bound; the weight gradient likewise (a plan writing
     * float32 or bf16, whichever is faster, in chunks either way). */
    if (cudnn && forward_admitted > 0) {
      g_autoptr(GError) error = NULL;
      TdmBackend *forced = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
      g_assert_no_error(error);
      g_setenv("TANDEM_CONV", "cudnn", TRUE);
      BnInput f;
      chunks_input_init(&f, forced, &p, bn, x16);
      size_t need = 0;
      bn_input_poison(&f, &p);
      gboolean took = engine_call_grown(&f.d, FALSE, &need);
      const char *chosen = tdm_cuda_conv_chosen(forced, &f.d.a, TDM_CONV_FORWARD);
      g_test_message("%s forced to cuDNN: %s, %zu bytes", what, chosen, need);
      g_assert_true(took);
      g_assert_true(g_str_has_prefix(chosen, "cudnn:") && g_str_has_suffix(chosen, suffix));
      double rel = bn_input_forward_error(&f, &p, NULL);
      if (!(rel <= 0x1p-7)) {
        g_test_message("FAILED %s forced: %.3g", what, rel);
        g_test_fail();
      }
      need = 0;
      took = engine_call_grown(&f.d, TRUE, &need);
      chosen = tdm_cuda_conv_chosen(forced, &f.d.a, TDM_CONV_WGRAD);
      g_test_message("%s wgrad forced to cuDNN: %s, %zu bytes", what, chosen, need);
      g_assert_true(took);
      g_assert_true(g_str_has_prefix(chosen, "cudnn:") && g_str_has_suffix(chosen, suffix));
      g_autofree char *forced_label = g_strdup_printf("%s wgrad forced %s", what, chosen);
      check_close_b(forced, forced_label, f.d.dw, p.dw_ref, p.weights,
                    0x1p-7 + chunk_rounding_share(&p, TDM_CONV_WGRAD, chosen));
      g_unsetenv("TANDEM_CONV");
      bn_input_clear(&f);
      tdm_backend_free(forced);

      /* --exact: the rule's choice (cuDNN's first plan within the budget, in chunks),
       * the same bits twice, within the bound. */
      TdmBackend *exact = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
      g_assert_no_error(error);
      exact->deterministic = true;
      BnInput e;
      chunks_input_init(&e, exact, &p, bn, x16);
      g_autofree uint16_t *first = g_new(uint16_t, p.out);
      for (int run = 0; run < 2; run++) {
        bn_input_poison(&e, &p);
        g_assert_true(engine_call_grown(&e.d, FALSE, &need));
        rel = bn_input_forward_error(&e, &p, host);
        if (run == 0)
          memcpy(first, host, p.out * 2);
      }
      chosen = tdm_cuda_conv_chosen(exact, &e.d.a, TDM_CONV_FORWARD);
      g_test_message("%s exact: %s, %.3g", what, chosen, rel);
      g_assert_true(g_str_has_prefix(chosen, "cudnn:") && g_str_has_suffix(chosen, suffix));
      g_assert_cmpmem(first, p.out * 2, host, p.out * 2);
      g_assert_cmpfloat(rel, <=, 0x1p-7);
      bn_input_clear(&e);
      tdm_backend_free(exact);
    }
    bn_input_clear(&main_in);
    problem_clear(&p);
  }
  /* cuDNN offers bf16-output weight gradients for these shapes (engine 62's for the 1×1
   * on the H100): at least one ran in chunks, by name. */
  g_test_message("bf16-output cuDNN weight gradients run in chunks: %d", bf16_sums_run);
  if (cudnn && bf16_sums_run == 0) {
    g_test_message("FAILED: cuDNN is loaded but no bf16-output weight gradient ran in chunks");
    g_test_fail();
  }
}

void
test_cuda_conv_add_workspace(void)
{
  g_test_add_func("/cuda-conv/grown-workspace", test_grown_workspace);
  g_test_add_func("/cuda-conv/chunked", test_chunked);
  g_test_add_func("/cuda-conv/bn-input-chunks", test_bn_input_chunks);
}

#endif
