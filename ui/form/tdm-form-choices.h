/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-form-choices.h: the lists behind the run form's drop-downs.
 *
 * The network drop-down lists the engine's built-in networks (its catalogue) and then
 * "Custom"; the optimizer, strategy, batch-norm and precision drop-downs list their
 * GEnum's values in its order, so a position is the value, but the precision's
 * "Automatic" comes first (tdm_form_choice_value()). The titles are the window's.
 */

#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The position of "Custom", after the built-in networks. */
guint       tdm_form_network_custom_index (void);
/* The network at a position, as the settings and the engine name it ("custom" past
 * the built-in ones). */
const char *tdm_form_network_id           (guint position);
/* The built-in networks' titles, then "Custom". */
GListModel *tdm_form_network_model        (void);
/* The titles of an enum's values in the drop-down's order: TDM_TYPE_OPTIMIZER_KIND,
 * TDM_TYPE_STRATEGY, TDM_TYPE_BATCH_NORM or TDM_TYPE_PRECISION. */
GListModel *tdm_form_choice_model         (GType type);
/* The enum's value at a drop-down's position, and a value's position. */
int         tdm_form_choice_value         (GType type,
                                           guint position);
guint       tdm_form_choice_position      (GType type,
                                           int   value);

G_END_DECLS
