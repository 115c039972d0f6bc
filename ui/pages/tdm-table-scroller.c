/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-table-scroller.c: a table that scrolls sideways under a scrollbar that stays.
 *
 * A scrolled window with its horizontal scrollbar outside it, in a box under the
 * table, shown while the table is wider than the room it was given. The table is
 * the scroller's "child" property (so a template sets it). Not a table itself.
 */

#include "tdm-table-scroller.h"

struct _TdmTableScroller
{
  GtkWidget  parent_instance;

  GtkWidget *scroller;
  GtkWidget *scrollbar;
};

enum {
  PROP_0,
  PROP_CHILD,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (TdmTableScroller, tdm_table_scroller, GTK_TYPE_WIDGET)

/* The scrollbar shows while the table is wider than its room. */
static void
tdm_table_scroller_width_changed (GtkAdjustment    *hadjustment,
                                  TdmTableScroller *self)
{
  gtk_widget_set_visible (self->scrollbar,
                          gtk_adjustment_get_upper (hadjustment)
                          > gtk_adjustment_get_page_size (hadjustment) + 0.5);
}

static void
tdm_table_scroller_dispose (GObject *object)
{
  TdmTableScroller *self = TDM_TABLE_SCROLLER (object);

  g_clear_pointer (&self->scroller, gtk_widget_unparent);
  g_clear_pointer (&self->scrollbar, gtk_widget_unparent);
  G_OBJECT_CLASS (tdm_table_scroller_parent_class)->dispose (object);
}

static void
tdm_table_scroller_get_property (GObject    *object,
                                 guint       prop_id,
                                 GValue     *value,
                                 GParamSpec *pspec)
{
  TdmTableScroller *self = TDM_TABLE_SCROLLER (object);

  switch (prop_id)
    {
    case PROP_CHILD:
      g_value_set_object (value, tdm_table_scroller_get_child (self));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_table_scroller_set_property (GObject      *object,
                                 guint         prop_id,
                                 const GValue *value,
                                 GParamSpec   *pspec)
{
  TdmTableScroller *self = TDM_TABLE_SCROLLER (object);

  switch (prop_id)
    {
    case PROP_CHILD:
      tdm_table_scroller_set_child (self, g_value_get_object (value));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_table_scroller_class_init (TdmTableScrollerClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_table_scroller_dispose;
  object_class->get_property = tdm_table_scroller_get_property;
  object_class->set_property = tdm_table_scroller_set_property;

  properties[PROP_CHILD] =
    g_param_spec_object ("child", "Child", "The table", GTK_TYPE_WIDGET,
                         G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BOX_LAYOUT);
}

static void
tdm_table_scroller_init (TdmTableScroller *self)
{
  GtkAdjustment *hadjustment;

  gtk_orientable_set_orientation (GTK_ORIENTABLE (gtk_widget_get_layout_manager (GTK_WIDGET (self))),
                                  GTK_ORIENTATION_VERTICAL);
  self->scroller = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (self->scroller),
                                  GTK_POLICY_EXTERNAL, GTK_POLICY_NEVER);
  gtk_widget_set_parent (self->scroller, GTK_WIDGET (self));
  hadjustment = gtk_scrolled_window_get_hadjustment (GTK_SCROLLED_WINDOW (self->scroller));
  self->scrollbar = gtk_scrollbar_new (GTK_ORIENTATION_HORIZONTAL, hadjustment);
  gtk_widget_set_visible (self->scrollbar, FALSE);
  gtk_widget_set_parent (self->scrollbar, GTK_WIDGET (self));
  g_signal_connect_object (hadjustment, "changed",
                           G_CALLBACK (tdm_table_scroller_width_changed), self, 0);
}

void
tdm_table_scroller_set_child (TdmTableScroller *self,
                              GtkWidget        *child)
{
  g_return_if_fail (TDM_IS_TABLE_SCROLLER (self));
  g_return_if_fail (child == NULL || GTK_IS_WIDGET (child));

  if (child == tdm_table_scroller_get_child (self))
    return;
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (self->scroller), child);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CHILD]);
}

GtkWidget *
tdm_table_scroller_get_child (TdmTableScroller *self)
{
  GtkWidget *child;

  g_return_val_if_fail (TDM_IS_TABLE_SCROLLER (self), NULL);

  /* A child that is not scrollable sits in a viewport the scroller adds. */
  child = gtk_scrolled_window_get_child (GTK_SCROLLED_WINDOW (self->scroller));
  if (GTK_IS_VIEWPORT (child))
    child = gtk_viewport_get_child (GTK_VIEWPORT (child));
  return child;
}

GtkWidget *
tdm_table_scroller_get_viewport (TdmTableScroller *self)
{
  g_return_val_if_fail (TDM_IS_TABLE_SCROLLER (self), NULL);

  return self->scroller;
}
