/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-form-choices.h: the lists behind the run form's drop-downs.
 *
 * The network drop-down lists the engine's built-in networks (its catalogue) and then
 * "Custom"; the optimizer, strategy and batch-norm drop-downs list their GEnum's
 * values in its order, so a position is the value. The titles are the window's.
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
/* The titles of an enum's values in its order: TDM_TYPE_OPTIMIZER_KIND,
 * TDM_TYPE_STRATEGY or TDM_TYPE_BATCH_NORM. */
GListModel *tdm_form_choice_model         (GType type);

G_END_DECLS
