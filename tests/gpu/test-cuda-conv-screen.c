/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-conv-screen.c — the convolution engine's screen of its candidates (part of
 * test-cuda-conv; tdm-backend-cuda-conv-screen.h): a fastest candidate whose result is
 * wrong is left out of the choice and never written to the cache, and the next one is
 * chosen. The wrong one is made so by TANDEM_CONV_FAULT (its result scaled by 1 + 2⁻⁵,
 * 2⁻⁵ from the reference's, many times the bf16 bound), a candidate that is not the
 * reference, which the engine then counts as the fastest: the one its choice tries first
 * (the screen compares only as far as the choice needs, fastest first). The screen
 * compares the results in pieces through a candidate's scratch; in pieces of a few KiB
 * (TANDEM_CONV_SCREEN_PIECE_BYTES, tens of them a result, the last shorter) it judges
 * every candidate as it does in one piece. Skips without a CUDA GPU.
 */
#include "tdm-backend.h"
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "tdm-backend-cuda.h"
#include "tdm-backend-cuda-conv-budget.h"
#include "tdm-backend-cuda-conv-cache.h"
#include "tdm-backend-cuda-conv-screen.h"
#include "test-cuda-conv.h"
#include "test-cuda-layers.h"

#include <glib/gstdio.h>

/* What one backend's engine made of direction dir of p's backward: its choice, the
 * screen's reference and the candidates it left out, in the order it tried them. */
typedef struct {
  char *chosen, *reference;
  GPtrArray *left_out;
  char *cache;                 /* the cache file's text afterwards */
} Screened;

static void
screened_clear(Screened *s)
{
  g_free(s->chosen);
  g_free(s->reference);
  g_ptr_array_unref(s->left_out);
  g_free(s->cache);
}

/* A fresh bf16 backend and a fresh cache file at `path` (none before: every choice
 * timed): the backward as the replica calls it, the result of direction dir within the
 * bf16 bound of the CPU's. */
static void
screen_backward(const Problem *p, TdmConvDirection dir, const char *path, Screened *out)
{
  g_unlink(path);
  g_setenv("TANDEM_CONV_CACHE", path, TRUE);
  tdm_conv_cache_reset();
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  Device d;
  device_init(&d, b, p, TRUE);
  size_t need = 0;
  gboolean took = engine_call_grown(&d, TRUE, &need);
  out->chosen = g_strdup(tdm_cuda_conv_chosen(b, &d.a, dir));
  out->left_out = tdm_cuda_conv_left_out(b, &d.a, dir, &out->reference);
  g_assert_nonnull(out->chosen);
  /* Declined: im2col both ways, the replica's own composition, the engine's im2col. */
  if (!took)
    g_assert_true(tdm_cuda_conv_run_named(b, &d.a, dir, "im2col"));
  g_autofree char *what = g_strdup_printf("%s: the engine's %s", direction_names[dir],
                                          out->chosen);
  if (dir == TDM_CONV_DGRAD)
    check_close_b(b, what, d.dx, p->dx_ref, p->in, bound(b, p, dir));
  else
    check_close_b(b, what, d.dw, p->dw_ref, p->weights, bound(b, p, dir));
  device_clear(&d);
  tdm_backend_free(b);
  g_assert_true(g_file_get_contents(path, &out->cache, NULL, NULL));
  g_setenv("TANDEM_CONV_CACHE", "0", TRUE); /* main()'s: this process's table alone */
  tdm_conv_cache_reset();
}

/* The candidates of direction dir within the budget, as the engine counts them
 * (tdm-backend-cuda-conv-budget.h): those it times. */
static GPtrArray *
timed_names(const Problem *p, TdmConvDirection dir)
{
  Device d;
  device_init(&d, gpu_bf16, p, TRUE);
  GPtrArray *names = tdm_cuda_conv_candidate_names(gpu_bf16, &d.a, dir);
  g_autofree guint64 *needs = g_new(guint64, MAX(names->len, 1));
  g_autofree gboolean *eligible = g_new(gboolean, MAX(names->len, 1));
  for (guint k = 0; k < names->len; k++)
    needs[k] = tdm_cuda_conv_need_named(gpu_bf16, &d.a, dir, g_ptr_array_index(names, k));
  tdm_conv_budget_select(needs, names->len,
                         tdm_conv_engine_reserved_bytes(&d.a.shape, dir, TRUE, FALSE),
                         TDM_PRECISION_BF16, eligible);
  for (guint k = names->len; k-- > 0;)
    if (!eligible[k])
      g_ptr_array_remove_index(names, k);
  device_clear(&d);
  return names;
}

static gboolean
has(GPtrArray *names, const char *name)
{
  return g_ptr_array_find_with_equal_func(names, name, g_str_equal, NULL);
}

/* The room TANDEM_CONV_SCREEN_PIECE_BYTES gives the pieces below: 2,816-byte pieces
 * (11 · 256), so that a result's last piece is shorter. */
#define SMALL_PIECES "3000"

/* Whether two screenings of the same call agree: the same reference, and the same
 * verdict on every candidate both judged but `faulted` (which a fault set for one of
 * them alone changes; NULL: none), as the results are the same bits, and a deviation's
 * two sums added over pieces instead of at once agree to double's rounding, far inside
 * any margin the bound is decided by: neither's choice is left out by either. Which
 * candidates each compared depends on its timing. */
static void
assert_agree(const Screened *a, const Screened *b, const char *faulted)
{
  g_assert_cmpstr(a->reference, ==, b->reference);
  g_assert_false(has(a->left_out, a->chosen));
  g_assert_false(has(b->left_out, b->chosen));
  if (faulted == NULL || !g_str_equal(b->chosen, faulted))
    g_assert_false(has(a->left_out, b->chosen));
  if (faulted == NULL || !g_str_equal(a->chosen, faulted))
    g_assert_false(has(b->left_out, a->chosen));
}

/* screen_backward() with the screen's pieces small: the same verdicts as `whole`'s
 * (assert_agree()), and where a fault is set its candidate the first left out. The
 * choice is the fastest of those kept, measured again: said, not asserted, as two
 * timings of near candidates may order them either way. */
static void
screen_in_pieces(const Problem *p, TdmConvDirection dir, const char *path,
                 const Screened *whole, const char *wrong)
{
  g_setenv("TANDEM_CONV_SCREEN_PIECE_BYTES", SMALL_PIECES, TRUE);
  tdm_conv_screen_reset();
  Screened pieces = {0};
  screen_backward(p, dir, path, &pieces);
  g_unsetenv("TANDEM_CONV_SCREEN_PIECE_BYTES");
  tdm_conv_screen_reset();
  g_test_message("%s in pieces of at most %s bytes: %s, against %s, %u left out%s",
                 direction_names[dir], SMALL_PIECES, pieces.chosen, pieces.reference,
                 pieces.left_out->len,
                 g_str_equal(pieces.chosen, whole->chosen) ? " (the same choice)"
                                                          : " (another choice: timing)");
  assert_agree(&pieces, whole, NULL);
  if (wrong != NULL) {
    g_assert_cmpuint(pieces.left_out->len, >=, 1);
    g_assert_cmpstr(g_ptr_array_index(pieces.left_out, 0), ==, wrong);
  }
  screened_clear(&pieces);
}

/* For the input gradient (im2col through bf16 columns and our own kernel, cuDNN's where
 * it is loaded) and the weight gradient (im2col and cuDNN's) of a ResNet's 3×3: the
 * choice without a fault, then with a non-reference candidate wrong (the clean choice
 * where that is not the reference), which the engine counts as the fastest. It is the
 * first the choice tries and is left out, the reference stays the same, the choice is
 * the next one (another kept candidate, or the reference), its result within the bound,
 * the verdicts agree with the clean run's (assert_agree()), and the cache file names the
 * new choice and never the wrong one. */
static void
test_screen_leaves_out_a_wrong_candidate(void)
{
  if (!have_gpu())
    return;
  const Case c = {4, 14, 14, 64, 64, 3, 1, 1};
  Problem p;
  problem_init(&p, &c, NULL);
  g_autoptr(GError) tmp_error = NULL;
  g_autofree char *dir = g_dir_make_tmp("tandem-conv-screen-XXXXXX", &tmp_error);
  g_assert_no_error(tmp_error);
  g_autofree char *clean_path = g_build_filename(dir, "clean.txt", NULL);
  g_autofree char *fault_path = g_build_filename(dir, "fault.txt", NULL);
  int checked = 0;
  for (int dir_ = TDM_CONV_DGRAD; dir_ <= TDM_CONV_WGRAD; dir_++) {
    const char *direction = direction_names[dir_];
    const char *key_word = dir_ == TDM_CONV_DGRAD ? "dgrad" : "wgrad";
    g_autoptr(GPtrArray) timed = timed_names(&p, dir_);
    if (timed->len < 2) {
      g_test_message("%s: %u candidate(s) within the budget: nothing timed, nothing to "
                     "screen", direction, timed->len);
      continue;
    }
    Screened clean = {0};
    screen_backward(&p, dir_, clean_path, &clean);
    g_test_message("%s without a fault: %s, against %s, %u left out", direction, clean.chosen,
                   clean.reference, clean.left_out->len);
    g_assert_nonnull(clean.reference);
    g_assert_false(has(clean.left_out, clean.reference));
    g_assert_false(has(clean.left_out, clean.chosen));
    screen_in_pieces(&p, dir_, clean_path, &clean, NULL);
    /* The clean choice, where it is not the reference; else another one not left out.
     * Either way the fault makes it the fastest. */
    const char *wrong = NULL;
    if (!g_str_equal(clean.chosen, clean.reference))
      wrong = clean.chosen;
    for (guint k = 0; wrong == NULL && k < timed->len; k++) {
      const char *name = g_ptr_array_index(timed, k);
      if (!g_str_equal(name, clean.reference) && !has(clean.left_out, name))
        wrong = name;
    }
    if (wrong == NULL) {
      g_test_message("%s: every candidate but the reference was left out already", direction);
      screened_clear(&clean);
      continue;
    }
    g_autofree char *fault = g_strdup_printf("%s %s", key_word, wrong);
    g_setenv("TANDEM_CONV_FAULT", fault, TRUE);
    Screened faulty = {0};
    screen_backward(&p, dir_, fault_path, &faulty);
    g_unsetenv("TANDEM_CONV_FAULT");
    g_test_message("%s with %s wrong: %s, against %s, %u left out", direction, wrong,
                   faulty.chosen, faulty.reference, faulty.left_out->len);
    /* The first tried, left out; the next one chosen. */
    g_assert_cmpuint(faulty.left_out->len, >=, 1);
    g_assert_cmpstr(g_ptr_array_index(faulty.left_out, 0), ==, wrong);
    g_assert_cmpstr(faulty.chosen, !=, wrong);
    assert_agree(&faulty, &clean, wrong);
    g_setenv("TANDEM_CONV_FAULT", fault, TRUE);
    screen_in_pieces(&p, dir_, fault_path, &faulty, wrong);
    g_unsetenv("TANDEM_CONV_FAULT");
    /* The file: this direction's key names the choice, nothing names the wrong one
     * for it (the other direction's line may name the same candidate: its own). */
    g_auto(GStrv) lines = g_strsplit(faulty.cache, "\n", -1);
    gboolean written = FALSE;
    for (char **line = lines; *line != NULL; line++) {
      if (!g_str_has_prefix(*line, key_word))
        continue;
      g_auto(GStrv) f = g_strsplit(*line, "\t", 3);
      g_assert_cmpuint(g_strv_length(f), ==, 3);
      g_assert_cmpstr(f[1], !=, wrong);
      written = written || g_str_equal(f[1], faulty.chosen);
    }
    g_assert_true(written);
    checked++;
    screened_clear(&clean);
    screened_clear(&faulty);
  }
  g_test_message("%d direction(s) screened with a wrong candidate", checked);
  /* The input gradient has im2col and, where our kernel takes a stride-1 3×3 in bf16
   * (tdm_k_conv_dgrad_bf16_fits()), own:dgrad, without cuDNN too. */
  g_assert_cmpint(checked, >=, 1);
  g_unlink(clean_path);
  g_unlink(fault_path);
  g_rmdir(dir);
  problem_clear(&p);
}

void
test_cuda_conv_add_screen(void)
{
  g_test_add_func("/cuda-conv/screen-leaves-out", test_screen_leaves_out_a_wrong_candidate);
}

#endif
