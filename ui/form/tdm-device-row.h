/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-device-row.h: one device in the window's device list.
 *
 * A row shows a device as tdm_device_list() found it, a check button to train on
 * it, a "Main" radio button (grouped with the other rows) and how many replicas it
 * runs: the CPU's workers, or replicas sharing a GPU. It only reports choices; the window turns them into a
 * configuration.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-device.h"

G_BEGIN_DECLS

#define TDM_TYPE_DEVICE_ROW (tdm_device_row_get_type ())

G_DECLARE_FINAL_TYPE (TdmDeviceRow, tdm_device_row, TDM, DEVICE_ROW, GtkListBoxRow)

GtkWidget           *tdm_device_row_new          (const TdmDeviceInfo *info);
const TdmDeviceInfo *tdm_device_row_get_info     (TdmDeviceRow        *self);
const char          *tdm_device_row_get_id       (TdmDeviceRow        *self);
gboolean             tdm_device_row_is_cpu       (TdmDeviceRow        *self);

/* The most replicas one GPU row offers: enough for a 1 → N scaling run on one GPU. */
#define TDM_DEVICE_ROW_MAX_GPU_REPLICAS 8

/* Properties "active", "main" and "workers" (the CPU's workers or a GPU's
 * replicas); "changed" is emitted after any. */
gboolean             tdm_device_row_get_active   (TdmDeviceRow        *self);
/* While the device is used, what is wrong with its count of workers (or replicas)
 * as typed; NULL when nothing is. */
const char          *tdm_device_row_get_problem  (TdmDeviceRow        *self);
void                 tdm_device_row_set_active   (TdmDeviceRow        *self,
                                                  gboolean             active);
gboolean             tdm_device_row_get_main     (TdmDeviceRow        *self);
void                 tdm_device_row_set_main     (TdmDeviceRow        *self,
                                                  gboolean             main);
int                  tdm_device_row_get_workers  (TdmDeviceRow        *self);
void                 tdm_device_row_set_workers  (TdmDeviceRow        *self,
                                                  int                  workers);

/* Replicas this row contributes: 0 when unchecked, else its workers / replicas. */
int                  tdm_device_row_get_replicas (TdmDeviceRow        *self);

/* Puts this row's "Main" button in the same radio group as `group`'s. */
void                 tdm_device_row_set_group    (TdmDeviceRow        *self,
                                                  TdmDeviceRow        *group);

G_END_DECLS
