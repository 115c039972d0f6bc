/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-device-row.c: one device in the window's device list.
 *
 * The row keeps a copy of the TdmDeviceInfo it was made from and mirrors its three
 * controls as properties. "Main" is a radio button among the rows, shown only on a
 * device in use and only where there is more than one device to choose from;
 * keeping exactly one main device across the list is the picker's job. The spin
 * button counts the CPU's workers or, on a GPU, the replicas sharing it (the CLI's
 * `--devices cuda:0,cuda:0`): a classroom with one GPU still shows data parallelism.
 */

#include <glib/gi18n.h>

#include "tdm-device-row.h"
#include "tdm-format.h"
#include "tdm-number-check.h"

struct _TdmDeviceRow
{
  GtkListBoxRow    parent_instance;

  TdmDeviceInfo    info;

  GtkCheckButton  *use_check;
  GtkLabel        *name_label;
  GtkLabel        *detail_label;
  GtkWidget       *workers_box;
  GtkLabel        *workers_label;
  GtkSpinButton   *workers_spin;
  GtkCheckButton  *main_check;
  gboolean         in_group;     /* another row's Main is in the same radio group */
};

enum {
  PROP_0,
  PROP_ACTIVE,
  PROP_MAIN,
  PROP_WORKERS,
  N_PROPS
};

enum {
  CHANGED,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (TdmDeviceRow, tdm_device_row, GTK_TYPE_LIST_BOX_ROW)

/* "Main" is a choice among the devices in use: shown (as a radio button) only on a
 * used device, and only when there is another device to choose instead. It keeps
 * its place when hidden, so the rows do not jump. */
static void
tdm_device_row_update_main (TdmDeviceRow *self)
{
  gboolean active = gtk_check_button_get_active (self->use_check);

  gtk_widget_set_child_visible (GTK_WIDGET (self->main_check), active && self->in_group);
  gtk_widget_set_sensitive (GTK_WIDGET (self->main_check), active);
}

static void
tdm_device_row_use_toggled (TdmDeviceRow   *self,
                            GtkCheckButton *button)
{
  gboolean active = gtk_check_button_get_active (button);

  tdm_device_row_update_main (self);
  gtk_widget_set_sensitive (self->workers_box, active);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ACTIVE]);
  g_signal_emit (self, signals[CHANGED], 0);
}

static void
tdm_device_row_main_toggled (TdmDeviceRow   *self,
                             GtkCheckButton *button)
{
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_MAIN]);
  g_signal_emit (self, signals[CHANGED], 0);
}

static void
tdm_device_row_workers_changed (TdmDeviceRow  *self,
                                GtkSpinButton *spin)
{
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_WORKERS]);
  g_signal_emit (self, signals[CHANGED], 0);
}

static void
tdm_device_row_get_property (GObject    *object,
                             guint       prop_id,
                             GValue     *value,
                             GParamSpec *pspec)
{
  TdmDeviceRow *self = TDM_DEVICE_ROW (object);

  switch (prop_id)
    {
    case PROP_ACTIVE:
      g_value_set_boolean (value, tdm_device_row_get_active (self));
      break;

    case PROP_MAIN:
      g_value_set_boolean (value, tdm_device_row_get_main (self));
      break;

    case PROP_WORKERS:
      g_value_set_int (value, tdm_device_row_get_workers (self));
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_device_row_set_property (GObject      *object,
                             guint         prop_id,
                             const GValue *value,
                             GParamSpec   *pspec)
{
  TdmDeviceRow *self = TDM_DEVICE_ROW (object);

  switch (prop_id)
    {
    case PROP_ACTIVE:
      tdm_device_row_set_active (self, g_value_get_boolean (value));
      break;

    case PROP_MAIN:
      tdm_device_row_set_main (self, g_value_get_boolean (value));
      break;

    case PROP_WORKERS:
      tdm_device_row_set_workers (self, g_value_get_int (value));
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_device_row_class_init (TdmDeviceRowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->get_property = tdm_device_row_get_property;
  object_class->set_property = tdm_device_row_set_property;

  properties[PROP_ACTIVE] =
    g_param_spec_boolean ("active", NULL, NULL, FALSE,
                          G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_MAIN] =
    g_param_spec_boolean ("main", NULL, NULL, FALSE,
                          G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_WORKERS] =
    g_param_spec_int ("workers", NULL, NULL, 1, 256, 1,
                      G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  signals[CHANGED] =
    g_signal_new ("changed",
                  G_TYPE_FROM_CLASS (klass),
                  G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tandem/Tandem/ui/tdm-device-row.ui");
  gtk_widget_class_bind_template_child (widget_class, TdmDeviceRow, use_check);
  gtk_widget_class_bind_template_child (widget_class, TdmDeviceRow, name_label);
  gtk_widget_class_bind_template_child (widget_class, TdmDeviceRow, detail_label);
  gtk_widget_class_bind_template_child (widget_class, TdmDeviceRow, workers_box);
  gtk_widget_class_bind_template_child (widget_class, TdmDeviceRow, workers_label);
  gtk_widget_class_bind_template_child (widget_class, TdmDeviceRow, workers_spin);
  gtk_widget_class_bind_template_child (widget_class, TdmDeviceRow, main_check);
}

static void
tdm_device_row_init (TdmDeviceRow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));

  gtk_widget_set_sensitive (self->workers_box, FALSE);
  tdm_device_row_update_main (self);

  g_signal_connect_object (self->use_check, "toggled",
                           G_CALLBACK (tdm_device_row_use_toggled), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->main_check, "toggled",
                           G_CALLBACK (tdm_device_row_main_toggled), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->workers_spin, "value-changed",
                           G_CALLBACK (tdm_device_row_workers_changed), self,
                           G_CONNECT_SWAPPED);
  /* A count typed wrong is said, not turned into the nearest that works. */
  g_signal_connect_object (tdm_number_check_attach (self->workers_spin), "notify::message",
                           G_CALLBACK (tdm_device_row_workers_changed), self,
                           G_CONNECT_SWAPPED);
}

static char *
format_memory (gint64 bytes)
{
  if (bytes <= 0)
    return g_strdup (_("unknown memory"));

  return tdm_format_size (bytes, G_FORMAT_SIZE_IEC_UNITS);
}

GtkWidget *
tdm_device_row_new (const TdmDeviceInfo *info)
{
  TdmDeviceRow *self;
  g_autofree char *memory = NULL;
  g_autofree char *detail = NULL;
  g_autofree char *use_label = NULL;
  g_autofree char *main_label = NULL;
  g_autofree char *name = NULL;

  g_return_val_if_fail (info != NULL, NULL);

  self = g_object_new (TDM_TYPE_DEVICE_ROW, NULL);
  self->info = *info;
  self->info.id[sizeof self->info.id - 1] = '\0';
  self->info.name[sizeof self->info.name - 1] = '\0';

  memory = format_memory (info->memory_bytes);
  if (info->kind == TDM_BACKEND_CPU)
    {
      name = g_strdup (info->name[0] ? info->name : _("CPU"));
      /* Translators: the CPU's description in the device list, e.g. "cpu · 16 cores · 62.8 GiB" */
      detail = g_strdup_printf (ngettext ("%s · %d core · %s", "%s · %d cores · %s",
                                          MAX (info->cores, 1)),
                                self->info.id, MAX (info->cores, 1), memory);
      gtk_widget_set_visible (self->workers_box, TRUE);
      gtk_adjustment_set_upper (gtk_spin_button_get_adjustment (self->workers_spin),
                                CLAMP (MAX (info->cores, 1) * 2, 8, 256));
      /* Cut with "…" in a narrow sidebar: whole in its tooltip. */
      gtk_widget_set_tooltip_text (GTK_WIDGET (self->detail_label), detail);
    }
  else
    {
      g_autofree char *tooltip = NULL;

      name = g_strdup (info->name[0] ? info->name : self->info.id);
      /* Translators: a GPU's description in the device list, e.g. "cuda:0 · 139.8 GiB · CC 9.0";
       * CC is its CUDA compute capability */
      detail = g_strdup_printf (_("%s · %s · CC %d.%d"),
                                self->info.id, memory,
                                info->compute_major, info->compute_minor);
      /* Translators: tooltip of a GPU in the device list */
      tooltip = g_strdup_printf (_("%s, %s of memory, compute capability %d.%d, %d multiprocessors, PCI bus %s"),
                                 self->info.id, memory,
                                 info->compute_major, info->compute_minor,
                                 info->cores, info->pci_bus_id[0] ? info->pci_bus_id : "—");
      gtk_widget_set_tooltip_text (GTK_WIDGET (self->detail_label), tooltip);

      /* One replica unless asked: a GPU row starts as plain "train on it". */
      gtk_label_set_text_with_mnemonic (self->workers_label, _("_Replicas"));
      gtk_widget_set_tooltip_text (GTK_WIDGET (self->workers_spin),
                                   _("Replicas sharing this GPU: each trains on its own share of the batch, as separate GPUs would"));
      gtk_accessible_update_property (GTK_ACCESSIBLE (self->workers_spin),
                                      GTK_ACCESSIBLE_PROPERTY_LABEL, _("Replicas on this GPU"),
                                      -1);
      gtk_adjustment_set_upper (gtk_spin_button_get_adjustment (self->workers_spin),
                                TDM_DEVICE_ROW_MAX_GPU_REPLICAS);
      gtk_spin_button_set_value (self->workers_spin, 1);
      gtk_widget_set_visible (self->workers_box, TRUE);
    }

  gtk_label_set_label (self->name_label, name);
  gtk_label_set_label (self->detail_label, detail);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->name_label), name);

  /* Translators: accessible name of the check button that picks a device, %s is its name */
  use_label = g_strdup_printf (_("Train on %s"), name);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->use_check),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, use_label,
                                  -1);
  /* Translators: accessible name of the radio button that makes a device the main one */
  main_label = g_strdup_printf (_("Make %s the main device"), name);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->main_check),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, main_label,
                                  -1);

  return GTK_WIDGET (self);
}

const TdmDeviceInfo *
tdm_device_row_get_info (TdmDeviceRow *self)
{
  g_return_val_if_fail (TDM_IS_DEVICE_ROW (self), NULL);

  return &self->info;
}

const char *
tdm_device_row_get_id (TdmDeviceRow *self)
{
  g_return_val_if_fail (TDM_IS_DEVICE_ROW (self), NULL);

  return self->info.id;
}

gboolean
tdm_device_row_is_cpu (TdmDeviceRow *self)
{
  g_return_val_if_fail (TDM_IS_DEVICE_ROW (self), FALSE);

  return self->info.kind == TDM_BACKEND_CPU;
}

gboolean
tdm_device_row_get_active (TdmDeviceRow *self)
{
  g_return_val_if_fail (TDM_IS_DEVICE_ROW (self), FALSE);

  return gtk_check_button_get_active (self->use_check);
}

void
tdm_device_row_set_active (TdmDeviceRow *self,
                           gboolean      active)
{
  g_return_if_fail (TDM_IS_DEVICE_ROW (self));

  gtk_check_button_set_active (self->use_check, active);
}

gboolean
tdm_device_row_get_main (TdmDeviceRow *self)
{
  g_return_val_if_fail (TDM_IS_DEVICE_ROW (self), FALSE);

  return gtk_check_button_get_active (self->main_check);
}

void
tdm_device_row_set_main (TdmDeviceRow *self,
                         gboolean      main)
{
  g_return_if_fail (TDM_IS_DEVICE_ROW (self));

  gtk_check_button_set_active (self->main_check, main);
}

int
tdm_device_row_get_workers (TdmDeviceRow *self)
{
  g_return_val_if_fail (TDM_IS_DEVICE_ROW (self), 1);

  return gtk_spin_button_get_value_as_int (self->workers_spin);
}

void
tdm_device_row_set_workers (TdmDeviceRow *self,
                            int           workers)
{
  g_return_if_fail (TDM_IS_DEVICE_ROW (self));

  gtk_spin_button_set_value (self->workers_spin, workers);
}

int
tdm_device_row_get_replicas (TdmDeviceRow *self)
{
  g_return_val_if_fail (TDM_IS_DEVICE_ROW (self), 0);

  if (!tdm_device_row_get_active (self))
    return 0;

  return tdm_device_row_get_workers (self);
}

void
tdm_device_row_set_group (TdmDeviceRow *self,
                          TdmDeviceRow *group)
{
  g_return_if_fail (TDM_IS_DEVICE_ROW (self));
  g_return_if_fail (group == NULL || TDM_IS_DEVICE_ROW (group));

  gtk_check_button_set_group (self->main_check, group ? group->main_check : NULL);
  self->in_group = group != NULL;
  tdm_device_row_update_main (self);
  if (group != NULL)
    {
      group->in_group = TRUE;
      tdm_device_row_update_main (group);
    }
}

const char *
tdm_device_row_get_problem (TdmDeviceRow *self)
{
  g_return_val_if_fail (TDM_IS_DEVICE_ROW (self), NULL);

  if (!gtk_check_button_get_active (self->use_check))
    return NULL;
  return tdm_number_check_get_message (tdm_number_check_get (self->workers_spin));
}
