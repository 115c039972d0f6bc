/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-form-choices.c: the lists behind the run form's drop-downs.
 *
 * The network drop-down lists the engine's built-in networks (its catalogue, one
 * place for them), then "custom". The choices' drop-downs list their GEnum's values
 * in its order, so a position is the value, but for the precision, whose automatic
 * value (the enum's last, so that a zeroed struct reads as fp32) comes first, as the
 * default; the settings keep the value's name (its nick). Only the titles are the
 * window's; a value without one (a switch the compiler checks) shows its name.
 */

#include <gtk/gtk.h>
#include <glib/gi18n.h>

#include "tdm-choice.h"
#include "tdm-config.h"
#include "tdm-form-choices.h"
#include "tdm-format.h"
#include "tdm-network-catalogue.h"

guint
tdm_form_network_custom_index (void)
{
  int count;

  tdm_network_presets (&count);
  return (guint) count;
}

const char *
tdm_form_network_id (guint position)
{
  int count;
  const TdmNetworkPreset *presets = tdm_network_presets (&count);

  return position < (guint) count ? presets[position].name : "custom";
}

GListModel *
tdm_form_network_model (void)
{
  int count;
  const TdmNetworkPreset *presets = tdm_network_presets (&count);
  GtkStringList *list = gtk_string_list_new (NULL);

  for (int i = 0; i < count; i++)
    gtk_string_list_append (list, _(presets[i].title));
  gtk_string_list_append (list, _("Custom"));
  return G_LIST_MODEL (list);
}

static const char *
optimizer_title (int value)
{
  switch ((TdmOptimizerKind) value)
    {
    case TDM_OPTIMIZER_SGD: return _("SGD");
    case TDM_OPTIMIZER_MOMENTUM: return _("Momentum SGD");
    case TDM_OPTIMIZER_ADAM: return _("Adam");
    case TDM_OPTIMIZER_NESTEROV: return _("Nesterov SGD");
    }
  return tdm_choice_name (TDM_TYPE_OPTIMIZER_KIND, value);
}

static const char *
strategy_title (int value)
{
  switch ((TdmStrategy) value)
    {
    case TDM_STRATEGY_MAIN: return _("Main device");
    case TDM_STRATEGY_ALLREDUCE: return _("All-reduce");
    }
  return tdm_choice_name (TDM_TYPE_STRATEGY, value);
}

static const char *
batchnorm_title (int value)
{
  switch ((TdmBatchNorm) value)
    {
    case TDM_BATCHNORM_PER_REPLICA: return _("Per replica");
    case TDM_BATCHNORM_SYNC: return _("Synchronized");
    }
  return tdm_choice_name (TDM_TYPE_BATCH_NORM, value);
}

static const char *
precision_title (int value)
{
  return tdm_format_precision_title ((TdmPrecision) value);
}

int
tdm_form_choice_value (GType type,
                       guint position)
{
  guint count = tdm_choice_count (type);

  if (type == TDM_TYPE_PRECISION && position < count)
    return position == 0 ? TDM_PRECISION_AUTO : (int) position - 1;
  return (int) position;
}

guint
tdm_form_choice_position (GType type,
                          int   value)
{
  if (type == TDM_TYPE_PRECISION)
    return value == TDM_PRECISION_AUTO ? 0 : (guint) value + 1;
  return (guint) value;
}

GListModel *
tdm_form_choice_model (GType type)
{
  const char *(*title) (int value) = optimizer_title;
  GtkStringList *list = gtk_string_list_new (NULL);

  if (type == TDM_TYPE_STRATEGY)
    title = strategy_title;
  else if (type == TDM_TYPE_BATCH_NORM)
    title = batchnorm_title;
  else if (type == TDM_TYPE_PRECISION)
    title = precision_title;
  else
    g_return_val_if_fail (type == TDM_TYPE_OPTIMIZER_KIND, G_LIST_MODEL (list));

  for (guint i = 0; i < tdm_choice_count (type); i++)
    gtk_string_list_append (list, title (tdm_form_choice_value (type, i)));
  return G_LIST_MODEL (list);
}
