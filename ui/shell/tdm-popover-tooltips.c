/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-popover-tooltips.c: tooltips switched off above an open popover. */

#include "tdm-popover-tooltips.h"

#define QUIETED "tdm-popover-tooltips-quieted"   /* on a widget whose tooltip is off */
#define WATCHED "tdm-popover-tooltips-watched"   /* on a popover already followed */

static void
tdm_popover_tooltips_visible (GtkWidget  *popover,
                              GParamSpec *pspec,
                              gpointer    data)
{
  gboolean open = gtk_widget_get_visible (popover);

  for (GtkWidget *w = gtk_widget_get_parent (popover); w != NULL; w = gtk_widget_get_parent (w))
    {
      if (open && gtk_widget_get_has_tooltip (w))
        {
          /* Switched off, remembered, so that closing switches back only these. */
          g_object_set_data (G_OBJECT (w), QUIETED, GINT_TO_POINTER (TRUE));
          gtk_widget_set_has_tooltip (w, FALSE);
        }
      else if (!open && g_object_get_data (G_OBJECT (w), QUIETED) != NULL)
        {
          g_object_set_data (G_OBJECT (w), QUIETED, NULL);
          gtk_widget_set_has_tooltip (w, TRUE);
        }
    }
}

void
tdm_popover_tooltips_quiet (GtkWidget *root)
{
  g_return_if_fail (GTK_IS_WIDGET (root));

  if (GTK_IS_POPOVER (root) && g_object_get_data (G_OBJECT (root), WATCHED) == NULL)
    {
      g_object_set_data (G_OBJECT (root), WATCHED, GINT_TO_POINTER (TRUE));
      g_signal_connect (root, "notify::visible", G_CALLBACK (tdm_popover_tooltips_visible), NULL);
    }
  for (GtkWidget *child = gtk_widget_get_first_child (root); child != NULL;
       child = gtk_widget_get_next_sibling (child))
    tdm_popover_tooltips_quiet (child);
}

gboolean
tdm_popover_tooltips_quieted (GtkWidget *widget)
{
  g_return_val_if_fail (GTK_IS_WIDGET (widget), FALSE);

  return g_object_get_data (G_OBJECT (widget), QUIETED) != NULL;
}
