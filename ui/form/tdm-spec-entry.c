/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-spec-entry.c: a one-line network spec, checked as it is typed.
 *
 * Parsing a spec only lays out the parameters (nothing is allocated on a device),
 * so it is cheap enough to do on every keystroke on the main thread. The entry gets
 * the "error" style class while the spec does not work, and the message line says
 * why in the engine's words, which name the token and its position. The tooltip
 * gives the syntax (layers, res(…) blocks, repeats), also the engine's.
 */

#include <glib/gi18n.h>

#include "tdm-network.h"
#include "tdm-format.h"
#include "tdm-spec-entry.h"

struct _TdmSpecEntry
{
  GtkWidget  parent_instance;

  GtkEntry  *entry;
  GtkLabel  *message_label;

  int        height, width, channels, classes;
  char      *message;
  guint      valid : 1;
};

enum {
  PROP_0,
  PROP_TEXT,
  PROP_EDITABLE,
  PROP_VALID,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (TdmSpecEntry, tdm_spec_entry, GTK_TYPE_WIDGET)

static void
tdm_spec_entry_check (TdmSpecEntry *self)
{
  g_autoptr(TdmNetwork) network = NULL;
  g_autoptr(GError) error = NULL;
  const char *text = gtk_editable_get_text (GTK_EDITABLE (self->entry));
  g_autofree char *stripped = g_strstrip (g_strdup (text));
  gboolean was_valid = self->valid;

  g_clear_pointer (&self->message, g_free);

  if (stripped[0] == '\0')
    {
      self->valid = FALSE;
      self->message = g_strdup (_("Type a network, for example fc128,relu,fc10 or conv16k3p1,bn,relu,gap,fc10"));
    }
  else if ((network = tdm_network_new (stripped, self->height, self->width,
                                       self->channels, self->classes, &error)))
    {
      g_autofree char *count = tdm_format_count ((double) network->parameter_count);
      g_autofree char *params = NULL;

      self->valid = TRUE;
      /* Translators: under the network spec; %s is a number like "1,796,010" */
      params = g_strdup_printf (ngettext ("%s parameter", "%s parameters",
                                          (gulong) MIN (network->parameter_count, G_MAXULONG)),
                                count);
      double mflop = tdm_network_forward_flops (network) / 1e6;
      /* Separated as the parameters beside it are ("1,819", not "1818.6"). */
      g_autofree char *work = mflop >= 100 ? tdm_format_count (mflop)
                                           : g_strdup_printf ("%.1f", mflop);

      /* Translators: under the network spec: "308,074 parameters, 74.3 MFLOP a
       * sample"; both numbers come formatted */
      self->message = g_strdup_printf (_("%s, %s MFLOP a sample"), params, work);
    }
  else
    {
      self->valid = FALSE;
      self->message = g_strdup (error->message);
    }

  gtk_label_set_label (self->message_label, self->message);
  if (self->valid)
    {
      gtk_widget_remove_css_class (GTK_WIDGET (self->entry), "error");
      gtk_widget_remove_css_class (GTK_WIDGET (self->message_label), "error");
      gtk_widget_add_css_class (GTK_WIDGET (self->message_label), "dim-label");
    }
  else
    {
      gtk_widget_add_css_class (GTK_WIDGET (self->entry), "error");
      gtk_widget_add_css_class (GTK_WIDGET (self->message_label), "error");
      gtk_widget_remove_css_class (GTK_WIDGET (self->message_label), "dim-label");
    }
  gtk_accessible_update_state (GTK_ACCESSIBLE (self->entry),
                               GTK_ACCESSIBLE_STATE_INVALID,
                               self->valid ? GTK_ACCESSIBLE_INVALID_FALSE
                                           : GTK_ACCESSIBLE_INVALID_TRUE,
                               -1);

  if (was_valid != self->valid)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_VALID]);
}

static void
tdm_spec_entry_text_changed (TdmSpecEntry *self)
{
  tdm_spec_entry_check (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_TEXT]);
}

static void
tdm_spec_entry_dispose (GObject *object)
{
  gtk_widget_dispose_template (GTK_WIDGET (object), TDM_TYPE_SPEC_ENTRY);

  G_OBJECT_CLASS (tdm_spec_entry_parent_class)->dispose (object);
}

static void
tdm_spec_entry_finalize (GObject *object)
{
  TdmSpecEntry *self = (TdmSpecEntry *)object;

  g_free (self->message);

  G_OBJECT_CLASS (tdm_spec_entry_parent_class)->finalize (object);
}

static void
tdm_spec_entry_get_property (GObject    *object,
                             guint       prop_id,
                             GValue     *value,
                             GParamSpec *pspec)
{
  TdmSpecEntry *self = TDM_SPEC_ENTRY (object);

  switch (prop_id)
    {
    case PROP_TEXT:
      g_value_set_string (value, tdm_spec_entry_get_text (self));
      break;

    case PROP_EDITABLE:
      g_value_set_boolean (value, tdm_spec_entry_get_editable (self));
      break;

    case PROP_VALID:
      g_value_set_boolean (value, self->valid);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_spec_entry_set_property (GObject      *object,
                             guint         prop_id,
                             const GValue *value,
                             GParamSpec   *pspec)
{
  TdmSpecEntry *self = TDM_SPEC_ENTRY (object);

  switch (prop_id)
    {
    case PROP_TEXT:
      tdm_spec_entry_set_text (self, g_value_get_string (value));
      break;

    case PROP_EDITABLE:
      tdm_spec_entry_set_editable (self, g_value_get_boolean (value));
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static gboolean
tdm_spec_entry_grab_focus (GtkWidget *widget)
{
  return gtk_widget_grab_focus (GTK_WIDGET (TDM_SPEC_ENTRY (widget)->entry));
}

static void
tdm_spec_entry_class_init (TdmSpecEntryClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_spec_entry_dispose;
  object_class->finalize = tdm_spec_entry_finalize;
  object_class->get_property = tdm_spec_entry_get_property;
  object_class->set_property = tdm_spec_entry_set_property;

  widget_class->grab_focus = tdm_spec_entry_grab_focus;

  properties[PROP_TEXT] =
    g_param_spec_string ("text", NULL, NULL, "",
                         G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_EDITABLE] =
    g_param_spec_boolean ("editable", NULL, NULL, TRUE,
                          G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_VALID] =
    g_param_spec_boolean ("valid", NULL, NULL, FALSE,
                          G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tandem/Tandem/ui/tdm-spec-entry.ui");
  gtk_widget_class_bind_template_child (widget_class, TdmSpecEntry, entry);
  gtk_widget_class_bind_template_child (widget_class, TdmSpecEntry, message_label);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BOX_LAYOUT);
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_GROUP);
}

static void
tdm_spec_entry_init (TdmSpecEntry *self)
{
  GtkLayoutManager *layout;

  gtk_widget_init_template (GTK_WIDGET (self));

  layout = gtk_widget_get_layout_manager (GTK_WIDGET (self));
  gtk_orientable_set_orientation (GTK_ORIENTABLE (layout), GTK_ORIENTATION_VERTICAL);
  gtk_box_layout_set_spacing (GTK_BOX_LAYOUT (layout), 4);

  self->height = 28;
  self->width = 28;
  self->channels = 1;
  self->classes = 10;

  /* The syntax, in the engine's words (one rule, one place). */
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->entry), tdm_network_spec_help ());

  g_signal_connect_object (self->entry, "changed",
                           G_CALLBACK (tdm_spec_entry_text_changed), self,
                           G_CONNECT_SWAPPED);
  tdm_spec_entry_check (self);
}

const char *
tdm_spec_entry_get_text (TdmSpecEntry *self)
{
  g_return_val_if_fail (TDM_IS_SPEC_ENTRY (self), NULL);

  return gtk_editable_get_text (GTK_EDITABLE (self->entry));
}

void
tdm_spec_entry_set_text (TdmSpecEntry *self,
                         const char   *text)
{
  g_return_if_fail (TDM_IS_SPEC_ENTRY (self));

  if (g_strcmp0 (text, tdm_spec_entry_get_text (self)) == 0)
    return;

  gtk_editable_set_text (GTK_EDITABLE (self->entry), text ? text : "");
}

gboolean
tdm_spec_entry_get_editable (TdmSpecEntry *self)
{
  g_return_val_if_fail (TDM_IS_SPEC_ENTRY (self), FALSE);

  return gtk_editable_get_editable (GTK_EDITABLE (self->entry));
}

void
tdm_spec_entry_set_editable (TdmSpecEntry *self,
                             gboolean      editable)
{
  g_return_if_fail (TDM_IS_SPEC_ENTRY (self));

  editable = !!editable;
  if (editable == tdm_spec_entry_get_editable (self))
    return;

  gtk_editable_set_editable (GTK_EDITABLE (self->entry), editable);
  gtk_widget_set_can_focus (GTK_WIDGET (self->entry), editable);
  if (editable)
    gtk_widget_remove_css_class (GTK_WIDGET (self->entry), "dim-label");
  else
    gtk_widget_add_css_class (GTK_WIDGET (self->entry), "dim-label");
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_EDITABLE]);
}

void
tdm_spec_entry_set_shape (TdmSpecEntry *self,
                          int           height,
                          int           width,
                          int           channels,
                          int           classes)
{
  g_return_if_fail (TDM_IS_SPEC_ENTRY (self));
  g_return_if_fail (height > 0 && width > 0 && channels > 0 && classes > 0);

  if (self->height == height && self->width == width &&
      self->channels == channels && self->classes == classes)
    return;

  self->height = height;
  self->width = width;
  self->channels = channels;
  self->classes = classes;
  tdm_spec_entry_check (self);
}

gboolean
tdm_spec_entry_get_valid (TdmSpecEntry *self)
{
  g_return_val_if_fail (TDM_IS_SPEC_ENTRY (self), FALSE);

  return self->valid;
}

const char *
tdm_spec_entry_get_message (TdmSpecEntry *self)
{
  g_return_val_if_fail (TDM_IS_SPEC_ENTRY (self), NULL);

  return self->message;
}
