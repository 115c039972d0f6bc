/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run-form-private.h: TdmRunForm's fields, for its source files.
 *
 * tdm-run-form.c holds the choices, their settings, whether they make a run, and
 * the wait for the window's first frame; tdm-run-form-config.c turns the choices into
 * a TdmConfig and its memory estimate. Nothing outside ui/form/tdm-run-form*.c
 * includes this.
 */

#pragma once

#include <adwaita.h>

#include "tdm-dataset-chooser.h"
#include "tdm-device-picker.h"
#include "tdm-finetune-group.h"
#include "tdm-run-form.h"
#include "tdm-spec-entry.h"

G_BEGIN_DECLS

struct _TdmRunForm
{
  GtkWidget          parent_instance;

  /* Template children. */
  AdwPreferencesGroup *dataset_group;
  TdmDatasetChooser *dataset_chooser;
  AdwComboRow       *network_dropdown;
  TdmSpecEntry      *spec_entry;
  TdmFinetuneGroup  *finetune_group;
  TdmDevicePicker   *device_picker;
  GtkLabel          *devices_hint_label;
  AdwActionRow      *batch_row;
  GtkSpinButton     *batch_spin;
  AdwActionRow      *epochs_row;
  GtkSpinButton     *epochs_spin;
  AdwComboRow       *optimizer_dropdown;
  AdwActionRow      *lr_row;
  GtkSpinButton     *lr_spin;
  AdwComboRow       *strategy_dropdown;
  AdwComboRow       *batchnorm_dropdown;
  AdwComboRow       *precision_dropdown;

  GSettings         *settings;
  char              *custom_spec;

  gboolean           ready;
  gboolean           loading;     /* the dataset or the devices are not in yet */
  gboolean           restoring;   /* applying settings: do not write them back */

  gboolean           devices_listed;
  guint              devices_idle;
  GtkWidget         *waiting_root;  /* for its first frame, while rooted */
  GdkFrameClock     *waiting_clock;
};

G_END_DECLS
