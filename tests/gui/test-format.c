/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-format.c: numbers and messages as the window shows them (tdm-format.h).
 *
 * Counts are grouped in threes in every locale, the C locale included (not
 * "1796010 parameters"); engine messages become sentences (they started
 * in lower case and read like the command line's).
 */

#include <locale.h>
#include <math.h>

#include <glib.h>

#include "tdm-format.h"

static void
check_count(double value, const char *expected)
{
  g_autofree char *text = tdm_format_count(value);

  g_assert_cmpstr(text, ==, expected);
}

static void
test_count_c_locale(void)
{
  g_assert_nonnull(setlocale(LC_ALL, "C"));
  check_count(1796010, "1,796,010");
  check_count(0, "0");
  check_count(999, "999");
  check_count(1000, "1,000");
  check_count(12345.6, "12,346");
  check_count(-4200, "−4,200");
  check_count(NAN, "—");
  check_count(INFINITY, "—");
}

static void
check_sentence(const char *message, const char *expected)
{
  g_autofree char *text = tdm_format_sentence(message);

  g_assert_cmpstr(text, ==, expected);
}

static void
test_sentence(void)
{
  check_sentence("/data/x: no such folder", "/data/x: no such folder.");
  check_sentence("the training loss became NaN at step 3 ", "The training loss became NaN at step 3.");
  check_sentence("Already a sentence.", "Already a sentence.");
  check_sentence("réseau trop grand?", "Réseau trop grand?");
  check_sentence("データセットがありません。", "データセットがありません。");
  check_sentence("", "");
  check_sentence(NULL, "");
}

/* One naming of replicas for legends and CSV columns (the CSV once said r0_,
 * r1_ where the window said "cpu 1", "cpu 2"). */
static void
test_replica(void)
{
  TdmStartedEvent started = {.replicas = 4};
  const char *ids[] = {"cpu", "cuda:0", "cpu", "cuda:1"};
  const char *expected[] = {"cpu 1", "cuda:0", "cpu 2", "cuda:1"};

  for (int r = 0; r < 4; r++)
    g_strlcpy(started.device[r], ids[r], sizeof started.device[r]);
  for (int r = 0; r < 4; r++) {
    g_autofree char *name = tdm_format_replica(&started, r);

    g_assert_cmpstr(name, ==, expected[r]);
  }
}

/* What a run computed in, as its start says it: auto with why, else the title. */
static void
test_precision(void)
{
  TdmStartedEvent asked = {.precision = TDM_PRECISION_TF32};
  TdmStartedEvent automatic = {.precision = TDM_PRECISION_BF16, .precision_auto = TRUE};
  g_autofree char *plain = tdm_format_precision(&asked);
  g_autofree char *text = NULL;

  g_strlcpy(automatic.precision_why, "every device has bfloat16 tensor cores",
            sizeof automatic.precision_why);
  text = tdm_format_precision(&automatic);
  g_assert_cmpstr(plain, ==, "TF32");
  g_assert_cmpstr(text, ==, "Bfloat16 (automatic: every device has bfloat16 tensor cores)");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);

  g_test_add_func("/format/count/c-locale", test_count_c_locale);
  g_test_add_func("/format/sentence", test_sentence);
  g_test_add_func("/format/replica", test_replica);
  g_test_add_func("/format/precision", test_precision);

  return g_test_run();
}
