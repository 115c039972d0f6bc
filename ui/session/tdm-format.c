/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-format.c: numbers and names as the window shows them.
 *
 * One place for how counts read, so the status line, the dataset facts and the
 * network's size agree, for how a replica is called, so the legends and the CSV
 * columns agree, and for the status line's sentences about a run. Not for numbers in files: exports write plain numbers.
 */

#include <locale.h>
#include <math.h>
#include <string.h>

#include <glib/gi18n.h>

#include "tdm-format.h"

/* Whole numbers in groups of three: the locale's separator, or a comma where the
 * locale has none (the C locale prints "1796010", which nobody reads at a glance). */
char *
tdm_format_count (double value)
{
  const struct lconv *lc = localeconv ();
  const char *sep = lc->thousands_sep && lc->thousands_sep[0] ? lc->thousands_sep : ",";
  char digits[64];
  GString *out;
  int n, lead;

  if (!isfinite (value))
    return g_strdup ("—");

  g_snprintf (digits, sizeof digits, "%.0f", fabs (value));
  n = (int) strlen (digits);
  out = g_string_new (value <= -0.5 ? "−" : "");
  lead = n % 3 ? n % 3 : 3;
  g_string_append_len (out, digits, lead);
  for (int i = lead; i < n; i += 3)
    {
      g_string_append (out, sep);
      g_string_append_len (out, digits + i, 3);
    }

  return g_string_free (out, FALSE);
}


char *
tdm_format_size (gint64           bytes,
                 GFormatSizeFlags flags)
{
  guint64 unit = flags & G_FORMAT_SIZE_IEC_UNITS ? 1024 : 1000;

  if (bytes < 0)
    return g_strdup ("—");
  if ((guint64) bytes < unit)
    /* Translators: a size under a kilobyte, "0 bytes", "512 bytes" */
    return g_strdup_printf (ngettext ("%u byte", "%u bytes", (gulong) bytes), (guint) bytes);
  /* From a kilobyte on GLib writes a number and a unit symbol, no words. */
  return g_format_size_full ((guint64) bytes, flags);
}

char *
tdm_format_sentence (const char *message)
{
  GString *out;
  gunichar first;
  gsize len;

  if (message == NULL || message[0] == '\0')
    return g_strdup ("");

  if (!g_utf8_validate (message, -1, NULL))
    return g_utf8_make_valid (message, -1);

  out = g_string_new (NULL);
  first = g_utf8_get_char (message);
  g_string_append_unichar (out, g_unichar_totitle (first));
  g_string_append (out, g_utf8_next_char (message));

  len = out->len;
  while (len > 0 && g_ascii_isspace (out->str[len - 1]))
    len--;
  g_string_truncate (out, len);
  if (len > 0 && !strchr (".!?", out->str[len - 1]) && !g_str_has_suffix (out->str, "。"))
    g_string_append_c (out, '.');

  return g_string_free (out, FALSE);
}

char *
tdm_format_replica (const TdmStartedEvent *started,
                    int                    replica)
{
  const char *id;
  int same = 0, nth = 0;

  g_return_val_if_fail (started != NULL, NULL);
  g_return_val_if_fail (replica >= 0 && replica < started->replicas, NULL);

  id = started->device[replica];
  for (int r = 0; r < started->replicas; r++)
    if (strncmp (started->device[r], id, sizeof started->device[r]) == 0)
      {
        same++;
        if (r <= replica)
          nth++;
      }

  if (same <= 1)
    return g_strndup (id, sizeof started->device[replica]);

  /* Translators: one of several replicas on the same device, e.g. "cpu 2" */
  return g_strdup_printf (C_("replica", "%.32s %d"), id, nth);
}

const char *
tdm_format_phase (TdmPhase phase)
{
  switch (phase)
    {
    /* Translators: the phases of a training step, on the Devices page */
    case TDM_PHASE_FORWARD: return C_("phase", "forward");
    case TDM_PHASE_BACKWARD: return C_("phase", "backward");
    case TDM_PHASE_REDUCE: return C_("phase", "reduce");
    case TDM_PHASE_ALLREDUCE: return C_("phase", "all-reduce");
    case TDM_PHASE_BROADCAST: return C_("phase", "broadcast");
    case TDM_PHASE_UPDATE: return C_("phase", "update");
    case TDM_PHASE_WAIT: return C_("phase", "wait");
    /* Translators: a micro-batch's gradients kept on the device, not sent (--accumulate) */
    case TDM_PHASE_ACCUMULATE: return C_("phase", "accumulate");
    case TDM_PHASE_COUNT:
    default:
      return tdm_phase_name (phase);
    }
}

/* 3725 s → "1:02:05", 30 s → "0:30"; "—" for NaN and negatives. */
static char *
tdm_format_duration (double seconds)
{
  gint64 s;

  if (!isfinite (seconds) || seconds < 0)
    return g_strdup ("—");

  s = (gint64) (seconds + 0.5);
  if (s >= 3600)
    return g_strdup_printf ("%" G_GINT64_FORMAT ":%02d:%02d",
                            s / 3600, (int) (s / 60 % 60), (int) (s % 60));

  return g_strdup_printf ("%d:%02d", (int) (s / 60), (int) (s % 60));
}

char *
tdm_format_progress (const TdmStartedEvent *started,
                     const TdmStepEvent    *s,
                     gboolean               paused)
{
  g_autofree char *epoch = NULL;
  g_autofree char *step = NULL;
  g_autofree char *rate = NULL;
  g_autofree char *elapsed = NULL;
  g_autofree char *eta = NULL;
  g_autofree char *steps_done = NULL;
  g_autofree char *steps_total = NULL;
  g_autofree char *samples = NULL;
  g_autofree char *elapsed_time = NULL;
  g_autofree char *eta_time = NULL;
  char *text;

  g_return_val_if_fail (started != NULL, NULL);
  g_return_val_if_fail (s != NULL, NULL);

  epoch = g_strdup_printf (_("Epoch %d of %d"),
                           MIN (s->epoch + 1, started->epochs), started->epochs);
  steps_done = tdm_format_count (s->step);
  /* The run's own end: a comparison's 50 steps, not the epochs' 600. */
  steps_total = tdm_format_count (started->end_step > 0 ? started->end_step : started->total_steps);
  step = g_strdup_printf (_("Step %s of %s"), steps_done, steps_total);
  samples = tdm_format_count (s->samples_per_second);
  rate = g_strdup_printf (_("%s samples/s"), samples);
  elapsed_time = tdm_format_duration (s->elapsed);
  elapsed = g_strdup_printf (_("%s elapsed"), elapsed_time);
  eta_time = tdm_format_duration (s->eta);
  eta = g_strdup_printf (_("%s left"), eta_time);

  text = g_strjoin (" · ", epoch, step, rate, elapsed, eta, NULL);
  if (paused)
    {
      g_autofree char *body = text;

      text = g_strjoin (" · ", _("Paused"), body, NULL);
    }

  return text;
}

char *
tdm_format_finished (const TdmFinishedEvent *f)
{
  g_autofree char *elapsed = tdm_format_duration (f->elapsed);
  g_autofree char *steps = tdm_format_count (f->steps);

  if (f->stopped)
    return g_strdup_printf (_("Stopped after %s steps in %s"), steps, elapsed);
  if (isfinite (f->test_accuracy))
    return g_strdup_printf (_("Finished in %s · test accuracy %.1f %% · test loss %.4f"),
                            elapsed, 100.0 * f->test_accuracy, f->test_loss);
  return g_strdup_printf (_("Finished in %s"), elapsed);
}

const char *
tdm_format_precision_title (TdmPrecision precision)
{
  switch (precision)
    {
    case TDM_PRECISION_FP32: return _("Float32");
    case TDM_PRECISION_TF32: return _("TF32");
    case TDM_PRECISION_BF16: return _("Bfloat16");
    case TDM_PRECISION_AUTO: return _("Automatic");
    }
  return "";
}

char *
tdm_format_precision (const TdmStartedEvent *started)
{
  const char *title;

  g_return_val_if_fail (started != NULL, NULL);

  title = tdm_format_precision_title (started->precision);
  if (!started->precision_auto)
    return g_strdup (title);
  /* Translators: what a run computes in, then why the automatic choice made it so
   * ("Bfloat16 (automatic: every device has bfloat16 tensor cores)") */
  return g_strdup_printf (_("%s (automatic: %s)"), title, started->precision_why);
}
