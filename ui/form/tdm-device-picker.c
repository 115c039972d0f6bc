/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-device-picker.c: the list of devices to train on.
 *
 * A GtkListBox of TdmDeviceRows in a frame. The rows' "Main" buttons share one
 * radio group; when the main device is unchecked, the first checked device becomes
 * main, so a run always has one, and an unchecked device is never main.
 */

#include <glib/gi18n.h>

#include "tdm-device.h"
#include "tdm-device-picker.h"
#include "tdm-device-row.h"

struct _TdmDevicePicker
{
  GtkWidget   parent_instance;

  GtkWidget  *frame;
  GtkListBox *list;
  gboolean    filling;   /* while rows are made: one "changed" at the end */
};

enum {
  CHANGED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (TdmDevicePicker, tdm_device_picker, GTK_TYPE_WIDGET)

GPtrArray *
tdm_device_picker_get_rows (TdmDevicePicker *self)
{
  GPtrArray *rows = g_ptr_array_new ();

  g_return_val_if_fail (TDM_IS_DEVICE_PICKER (self), rows);

  for (GtkWidget *child = gtk_widget_get_first_child (GTK_WIDGET (self->list));
       child != NULL;
       child = gtk_widget_get_next_sibling (child))
    if (TDM_IS_DEVICE_ROW (child))
      g_ptr_array_add (rows, child);

  return rows;
}

/* Exactly one checked device is main whenever any is checked, and never an
 * unchecked one: with nothing checked there is no main device at all, so no run,
 * setting or later tick can inherit one from a device that is not used. */
static void
tdm_device_picker_fix_main (TdmDevicePicker *self)
{
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows (self);
  TdmDeviceRow *first = NULL;
  gboolean have_main = FALSE;

  for (guint i = 0; i < rows->len; i++)
    {
      TdmDeviceRow *row = rows->pdata[i];

      if (!tdm_device_row_get_active (row))
        {
          if (tdm_device_row_get_main (row))
            tdm_device_row_set_main (row, FALSE);
          continue;
        }
      have_main |= tdm_device_row_get_main (row);
      if (first == NULL)
        first = row;
    }

  if (!have_main && first != NULL)
    tdm_device_row_set_main (first, TRUE);
}

static void
tdm_device_picker_row_changed (TdmDevicePicker *self)
{
  if (self->filling)
    return;

  self->filling = TRUE;
  tdm_device_picker_fix_main (self);
  self->filling = FALSE;

  g_signal_emit (self, signals[CHANGED], 0);
}

/* How often `id` is among the names the settings keep: a GPU's replicas (names that
 * are no device count as none). */
static int
count_id (const char * const *names,
          TdmDeviceId         id)
{
  int n = 0;
  TdmDeviceId named;

  for (guint i = 0; names != NULL && names[i] != NULL; i++)
    n += tdm_device_id_parse (names[i], &named) && tdm_device_id_equal (named, id);
  return n;
}

void
tdm_device_picker_set_devices (TdmDevicePicker    *self,
                               GArray             *devices,
                               const char * const *chosen,
                               const char         *main_id,
                               int                 cpu_workers)
{
  g_autoptr(GPtrArray) rows = NULL;
  TdmDeviceRow *group = NULL;
  gboolean any_gpu = FALSE;
  gboolean remembered = chosen != NULL && chosen[0] != NULL;
  GtkWidget *child;
  TdmDeviceId main_device;
  gboolean have_main = main_id != NULL && tdm_device_id_parse (main_id, &main_device);

  g_return_if_fail (TDM_IS_DEVICE_PICKER (self));
  g_return_if_fail (devices != NULL);
  g_return_if_fail (g_array_get_element_size (devices) == sizeof (TdmDeviceInfo));

  self->filling = TRUE;

  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->list))))
    gtk_list_box_remove (self->list, child);

  for (guint i = 0; i < devices->len; i++)
    any_gpu |= g_array_index (devices, TdmDeviceInfo, i).kind != TDM_BACKEND_CPU;

  for (guint i = 0; i < devices->len; i++)
    {
      const TdmDeviceInfo *info = &g_array_index (devices, TdmDeviceInfo, i);
      TdmDeviceRow *row = TDM_DEVICE_ROW (tdm_device_row_new (info));
      TdmDeviceId id = tdm_device_info_id (info);
      gboolean active;

      if (remembered)
        active = count_id (chosen, id) > 0;
      else
        active = any_gpu ? info->kind != TDM_BACKEND_CPU : TRUE;

      if (info->kind == TDM_BACKEND_CPU && cpu_workers > 0)
        tdm_device_row_set_workers (row, cpu_workers);
      else if (info->kind != TDM_BACKEND_CPU && remembered)
        tdm_device_row_set_workers (row, MAX (count_id (chosen, id), 1));
      tdm_device_row_set_group (row, group);
      if (group == NULL)
        group = row;
      tdm_device_row_set_active (row, active);
      if (active && have_main && tdm_device_id_equal (main_device, id))
        tdm_device_row_set_main (row, TRUE);

      g_signal_connect_object (row, "changed",
                               G_CALLBACK (tdm_device_picker_row_changed), self,
                               G_CONNECT_SWAPPED);
      gtk_list_box_append (self->list, GTK_WIDGET (row));
    }

  /* What was remembered is gone (another machine, a GPU less): the default. */
  if (tdm_device_picker_count_replicas (self) == 0)
    {
      rows = tdm_device_picker_get_rows (self);
      for (guint i = 0; i < rows->len; i++)
        tdm_device_row_set_active (rows->pdata[i],
                                   any_gpu ? !tdm_device_row_is_cpu (rows->pdata[i]) : TRUE);
    }

  tdm_device_picker_fix_main (self);
  self->filling = FALSE;

  g_signal_emit (self, signals[CHANGED], 0);
}

int
tdm_device_picker_get_replicas (TdmDevicePicker *self,
                                TdmDeviceId     *devices,
                                int              max,
                                int             *main_replica)
{
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows (self);
  int n = 0, main = 0;

  for (guint i = 0; i < rows->len; i++)
    {
      TdmDeviceRow *row = rows->pdata[i];
      int replicas = tdm_device_row_get_replicas (row);
      TdmDeviceId id = tdm_device_info_id (tdm_device_row_get_info (row));

      if (replicas > 0 && tdm_device_row_get_main (row))
        main = n;
      for (int k = 0; k < replicas; k++, n++)
        if (n < max)
          devices[n] = id;
    }

  if (main_replica != NULL)
    *main_replica = main;

  return n;
}

int
tdm_device_picker_count_replicas (TdmDevicePicker *self)
{
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows (self);
  int n = 0;

  for (guint i = 0; i < rows->len; i++)
    n += tdm_device_row_get_replicas (rows->pdata[i]);

  return n;
}

char **
tdm_device_picker_get_chosen (TdmDevicePicker *self)
{
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows (self);
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  for (guint i = 0; i < rows->len; i++)
    {
      TdmDeviceRow *row = rows->pdata[i];
      /* The CPU once (its workers have a key of their own); a GPU once per
       * replica, the way `--devices cuda:0,cuda:0` says it. */
      int times = tdm_device_row_is_cpu (row) ? 1 : tdm_device_row_get_replicas (row);

      for (int k = 0; k < times && tdm_device_row_get_active (row); k++)
        g_strv_builder_add (builder, tdm_device_row_get_id (row));
    }

  return g_strv_builder_end (builder);
}

const char *
tdm_device_picker_get_main_id (TdmDevicePicker *self)
{
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows (self);

  for (guint i = 0; i < rows->len; i++)
    if (tdm_device_row_get_active (rows->pdata[i]) && tdm_device_row_get_main (rows->pdata[i]))
      return tdm_device_row_get_id (rows->pdata[i]);

  return NULL;
}

int
tdm_device_picker_get_cpu_workers (TdmDevicePicker *self)
{
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows (self);

  for (guint i = 0; i < rows->len; i++)
    if (tdm_device_row_is_cpu (rows->pdata[i]))
      return tdm_device_row_get_workers (rows->pdata[i]);

  return 0;
}

static void
tdm_device_picker_dispose (GObject *object)
{
  TdmDevicePicker *self = (TdmDevicePicker *)object;

  g_clear_pointer (&self->frame, gtk_widget_unparent);

  G_OBJECT_CLASS (tdm_device_picker_parent_class)->dispose (object);
}

static void
tdm_device_picker_class_init (TdmDevicePickerClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_device_picker_dispose;

  signals[CHANGED] =
    g_signal_new ("changed",
                  G_TYPE_FROM_CLASS (klass),
                  G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);

  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
}

static void
tdm_device_picker_init (TdmDevicePicker *self)
{
  self->list = GTK_LIST_BOX (gtk_list_box_new ());
  gtk_list_box_set_selection_mode (self->list, GTK_SELECTION_NONE);
  gtk_widget_add_css_class (GTK_WIDGET (self->list), "device-list");
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->list),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, _("Devices"),
                                  -1);

  self->frame = gtk_frame_new (NULL);
  gtk_frame_set_child (GTK_FRAME (self->frame), GTK_WIDGET (self->list));
  gtk_widget_set_parent (self->frame, GTK_WIDGET (self));
}

char *
tdm_device_picker_dup_problem (TdmDevicePicker *self)
{
  g_autoptr(GPtrArray) rows = NULL;

  g_return_val_if_fail (TDM_IS_DEVICE_PICKER (self), NULL);

  rows = tdm_device_picker_get_rows (self);
  for (guint i = 0; i < rows->len; i++)
    {
      const char *problem = tdm_device_row_get_problem (rows->pdata[i]);

      if (problem != NULL)
        /* Translators: under the device list; %s the device ("cpu", "cuda:0"), %s what
         * is wrong with its count of workers or replicas */
        return g_strdup_printf (_("%s: %s"), tdm_device_row_get_info (rows->pdata[i])->id,
                                problem);
    }
  return NULL;
}
