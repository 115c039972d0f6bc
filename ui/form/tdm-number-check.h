/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-number-check.h: what a number field of the form holds as typed. A spin button
 * takes any text and, left alone, turns what it cannot read into its minimum and
 * what is out of range into the nearest end, without a word ("abc" → 0.00001). With a
 * check attached the typed text stays as it is, the value keeps what it was, and
 * the check's message says what is wrong, for the form to show and to hold Start
 * back. Not a widget: the form's rows show the message.
 */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define TDM_TYPE_NUMBER_CHECK (tdm_number_check_get_type ())

G_DECLARE_FINAL_TYPE (TdmNumberCheck, tdm_number_check, TDM, NUMBER_CHECK, GObject)

/* Watches spin (which keeps the check alive as long as it lives). */
TdmNumberCheck *tdm_number_check_attach      (GtkSpinButton  *spin);
/* The check attached to spin, or NULL. */
TdmNumberCheck *tdm_number_check_get         (GtkSpinButton  *spin);
/* NULL while the text is a number within the field's range; else why not, as a
 * sentence naming the text and the range. */
const char     *tdm_number_check_get_message (TdmNumberCheck *self);

G_END_DECLS
