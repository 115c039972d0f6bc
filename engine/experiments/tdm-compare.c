/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-compare.c — the one-device configuration of a run and the distance between
 * two parameter vectors (see tdm-compare.h). Nothing here trains. */
#include "tdm-compare.h"
#include "tdm-precision-auto.h"

#include <math.h>
#include <string.h>

/* Above this the runs differ by more than fp32 rounding over a few hundred steps. */
#define ROUNDING_LIMIT 1e-5

void
tdm_compare_prepare(TdmConfig *config, long steps)
{
  g_return_if_fail(config != NULL);
  config->exact = TRUE;
  if (steps > 0)
    config->max_steps = steps;
}

TdmConfig *
tdm_compare_one_device_config(const TdmConfig *config, long steps)
{
  g_return_val_if_fail(config != NULL && config->replicas > 0, NULL);
  TdmConfig *one = tdm_config_copy(config);
  int main_index = CLAMP(config->main_replica, 0, config->replicas - 1);
  one->devices[0] = config->devices[main_index];
  one->replicas = 1;
  one->main_replica = 0;
  /* Auto as the whole run resolves it, not for the one device: a newer GPU beside an
   * older one computes in fp32 in the run, so in its twin. */
  one->precision = tdm_precision_resolve_here(config->precision, config->devices,
                                              tdm_config_replica_count(config));
  g_clear_pointer(&one->save_path, g_free);
  if (steps > 0)
    one->max_steps = steps;
  return one;
}

double
tdm_compare_parameters(const float *a, const float *reference, size_t n)
{
  g_return_val_if_fail(n == 0 || (a != NULL && reference != NULL), NAN);
  double largest = 0, diff = 0;
  for (size_t i = 0; i < n; i++) {
    largest = MAX(largest, fabs((double)reference[i]));
    diff = MAX(diff, fabs((double)a[i] - reference[i]));
  }
  if (diff == 0)
    return 0;
  return largest > 0 ? diff / largest : INFINITY;
}

/* "largest difference 2.1 × 10⁻⁷: the same up to rounding", for a label. */
static char *
describe_difference(double difference)
{
  if (difference == 0)
    return g_strdup("no difference: bit for bit the same");
  if (!isfinite(difference))
    return g_strdup("the runs differ completely");
  int exponent = (int)floor(log10(difference));
  double mantissa = difference / pow(10, exponent);
  static const char *const superscript[] = {"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "largest difference %.1f × 10", mantissa);
  if (exponent < 0)
    g_string_append(s, "⁻");
  char digits[16];
  g_snprintf(digits, sizeof digits, "%d", abs(exponent));
  for (const char *d = digits; *d != '\0'; d++)
    g_string_append(s, superscript[*d - '0']);
  /* Past the limit the runs may still be the same computation: over many steps,
   * Adam most of all, float rounding grows (see the window's default step count). */
  g_string_append(s, difference <= ROUNDING_LIMIT
                       ? ": the same up to rounding"
                       : ": more than rounding at once; rounding grows over many steps"
                         " (most with Adam): compare fewer steps");
  return g_string_free(s, FALSE);
}

size_t
tdm_compare_count_differing(const float *a, const float *reference, size_t n)
{
  g_return_val_if_fail(n == 0 || (a != NULL && reference != NULL), 0);
  size_t differing = 0;
  for (size_t i = 0; i < n; i++)
    if (memcmp(&a[i], &reference[i], sizeof(float)) != 0)
      differing++;
  return differing;
}

char *
tdm_compare_describe_values(const float *a, const float *reference, size_t n)
{
  size_t differing = tdm_compare_count_differing(a, reference, n);
  if (differing == 0)
    return g_strdup_printf("identical: 0 of %zu values differ", n);
  g_autofree char *words = describe_difference(tdm_compare_parameters(a, reference, n));
  return g_strdup_printf("%zu of %zu values differ; %s", differing, n, words);
}
