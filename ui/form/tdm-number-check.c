/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-number-check.c: see tdm-number-check.h.
 *
 * GtkSpinButton reads its text on "input" and writes its value back on "output".
 * While the text is wrong, "input" keeps the value as it was and "output" keeps the
 * text as typed, so neither a focus change nor Enter rewrites it; a value set by the
 * program (a preset's recipe, the settings) writes its own text again.
 */

#include <glib/gi18n.h>
#include <math.h>
#include <stdlib.h>

#include "tdm-number-check.h"

struct _TdmNumberCheck
{
  GObject        parent_instance;

  GtkSpinButton *spin;      /* not owned: the spin button owns the check */
  char          *message;
  double         kept;      /* the value when the text went wrong */
};

enum {
  PROP_0,
  PROP_MESSAGE,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (TdmNumberCheck, tdm_number_check, G_TYPE_OBJECT)

/* A bound of the field as its digits show it, without trailing zeros: 0.00001, 10. */
static char *
format_bound (GtkSpinButton *spin,
              double         value)
{
  guint digits = gtk_spin_button_get_digits (spin);
  char *text = g_strdup_printf ("%.*f", (int) digits, value);

  if (digits > 0)
    {
      char *end = text + strlen (text) - 1;

      while (*end == '0')
        *end-- = '\0';
      if (*end == '.')
        *end = '\0';
    }
  return text;
}

/* The number the text says, in the C notation spin buttons show (1e-3 too); FALSE
 * when it says none. */
static gboolean
parse_number (const char *text,
              double     *value)
{
  g_autofree char *copy = g_strstrip (g_strdup (text));
  char *end = NULL;

  if (copy[0] == '\0')
    return FALSE;
  *value = g_ascii_strtod (copy, &end);
  return end != NULL && *end == '\0' && isfinite (*value);
}

/* What is wrong with the text, or NULL; *value gets the number it says. */
static char *
problem_of (GtkSpinButton *spin,
            const char    *text,
            double        *value)
{
  GtkAdjustment *adjustment = gtk_spin_button_get_adjustment (spin);
  g_autofree char *lower = format_bound (spin, gtk_adjustment_get_lower (adjustment));
  g_autofree char *upper = format_bound (spin, gtk_adjustment_get_upper (adjustment));
  g_autofree char *shown = g_strstrip (g_strdup (text));

  if (!parse_number (text, value))
    return shown[0] == '\0'
             /* Translators: under an empty number field; %s and %s its range */
             ? g_strdup_printf (_("Type a number from %s to %s"), lower, upper)
             /* Translators: under a number field; %s the text typed, then its range */
             : g_strdup_printf (_("“%s” is not a number: type one from %s to %s"), shown,
                                lower, upper);
  if (gtk_spin_button_get_digits (spin) == 0 && *value != floor (*value))
    /* Translators: under a number field that takes whole numbers; %s the text typed,
     * then its range */
    return g_strdup_printf (_("%s is not a whole number: type one from %s to %s"), shown,
                            lower, upper);
  /* A value the field shows rounded to its digits is that value: 0.000004 in a
   * field of five digits is 0, below a lower bound of 0.00001. */
  {
    double scale = pow (10, gtk_spin_button_get_digits (spin));
    double shown_value = round (*value * scale) / scale;

    if (shown_value < gtk_adjustment_get_lower (adjustment) - 0.5 / scale ||
        shown_value > gtk_adjustment_get_upper (adjustment) + 0.5 / scale)
      /* Translators: under a number field; %s the number typed, then its range */
      return g_strdup_printf (_("%s is out of range: type a number from %s to %s"), shown,
                              lower, upper);
  }
  return NULL;
}

static void
tdm_number_check_set_message (TdmNumberCheck *self,
                              char           *message)
{
  if (g_strcmp0 (message, self->message) == 0)
    {
      g_free (message);
      return;
    }
  g_free (self->message);
  self->message = message;
  if (message != NULL)
    self->kept = gtk_spin_button_get_value (self->spin);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_MESSAGE]);
}

static void
tdm_number_check_text_changed (TdmNumberCheck *self)
{
  double value;

  tdm_number_check_set_message (self, problem_of (self->spin,
                                                  gtk_editable_get_text (GTK_EDITABLE (self->spin)),
                                                  &value));
}

static int
tdm_number_check_input (GtkSpinButton  *spin,
                        double         *new_value,
                        TdmNumberCheck *self)
{
  g_autofree char *problem = problem_of (spin, gtk_editable_get_text (GTK_EDITABLE (spin)),
                                         new_value);

  if (problem != NULL)
    *new_value = gtk_spin_button_get_value (spin);
  return TRUE;
}

static gboolean
tdm_number_check_output (GtkSpinButton  *spin,
                         TdmNumberCheck *self)
{
  /* TRUE: the text stays as typed. */
  return self->message != NULL && gtk_spin_button_get_value (spin) == self->kept;
}

static void
tdm_number_check_finalize (GObject *object)
{
  TdmNumberCheck *self = (TdmNumberCheck *)object;

  g_free (self->message);

  G_OBJECT_CLASS (tdm_number_check_parent_class)->finalize (object);
}

static void
tdm_number_check_get_property (GObject    *object,
                               guint       prop_id,
                               GValue     *value,
                               GParamSpec *pspec)
{
  TdmNumberCheck *self = TDM_NUMBER_CHECK (object);

  switch (prop_id)
    {
    case PROP_MESSAGE:
      g_value_set_string (value, self->message);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_number_check_class_init (TdmNumberCheckClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->finalize = tdm_number_check_finalize;
  object_class->get_property = tdm_number_check_get_property;

  properties[PROP_MESSAGE] =
    g_param_spec_string ("message", NULL, NULL, NULL,
                         G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
tdm_number_check_init (TdmNumberCheck *self)
{
}

TdmNumberCheck *
tdm_number_check_attach (GtkSpinButton *spin)
{
  TdmNumberCheck *self;

  g_return_val_if_fail (GTK_IS_SPIN_BUTTON (spin), NULL);

  self = g_object_new (TDM_TYPE_NUMBER_CHECK, NULL);
  self->spin = spin;
  g_object_set_data_full (G_OBJECT (spin), "tdm-number-check", self, g_object_unref);
  g_signal_connect_object (spin, "changed", G_CALLBACK (tdm_number_check_text_changed),
                           self, G_CONNECT_SWAPPED);
  g_signal_connect_object (spin, "input", G_CALLBACK (tdm_number_check_input), self, 0);
  g_signal_connect_object (spin, "output", G_CALLBACK (tdm_number_check_output), self, 0);
  return self;
}

TdmNumberCheck *
tdm_number_check_get (GtkSpinButton *spin)
{
  g_return_val_if_fail (GTK_IS_SPIN_BUTTON (spin), NULL);

  return g_object_get_data (G_OBJECT (spin), "tdm-number-check");
}

const char *
tdm_number_check_get_message (TdmNumberCheck *self)
{
  g_return_val_if_fail (TDM_IS_NUMBER_CHECK (self), NULL);

  return self->message;
}
