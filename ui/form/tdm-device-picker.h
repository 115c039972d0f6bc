/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-device-picker.h: the list of devices to train on.
 *
 * One TdmDeviceRow per device of an array of TdmDeviceInfo (what tdm_device_list()
 * reports, or a made-up set in tests), with exactly one checked device marked main
 * whenever any is checked. It turns the choice into replicas, one per replica asked
 * of a GPU and one per CPU worker, in the order the engine takes them.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-device-id.h"

G_BEGIN_DECLS

#define TDM_TYPE_DEVICE_PICKER (tdm_device_picker_get_type ())

G_DECLARE_FINAL_TYPE (TdmDevicePicker, tdm_device_picker, TDM, DEVICE_PICKER, GtkWidget)


/* Replaces the rows. `chosen` (device names, as the settings keep them) may be NULL or
 * empty for the default: every GPU, or the CPU when there is none; a GPU's name given
 * k times asks for k replicas on it; `main_id` may be NULL. */
void        tdm_device_picker_set_devices  (TdmDevicePicker    *self,
                                            GArray             *devices,
                                            const char * const *chosen,
                                            const char         *main_id,
                                            int                 cpu_workers);

/* The rows (TdmDeviceRow), in order. */
GPtrArray  *tdm_device_picker_get_rows     (TdmDevicePicker    *self);

/* One device per replica (the CPU once per worker), the first `max` of them into
 * `devices`; returns how many there are (perhaps more than `max`), and which one is
 * main. */
int         tdm_device_picker_get_replicas (TdmDevicePicker    *self,
                                            TdmDeviceId        *devices,
                                            int                 max,
                                            int                *main_replica);
int         tdm_device_picker_count_replicas (TdmDevicePicker  *self);

/* For saving the choice: the checked devices' ids (a GPU's once per replica, as
 * set_devices takes them back), the main one's, CPU workers. */
char      **tdm_device_picker_get_chosen   (TdmDevicePicker    *self);
const char *tdm_device_picker_get_main_id  (TdmDevicePicker    *self);
int         tdm_device_picker_get_cpu_workers (TdmDevicePicker *self);

/* What is wrong with a used device's count of workers or replicas as typed, naming
 * the device; NULL when nothing is. */
char       *tdm_device_picker_dup_problem  (TdmDevicePicker    *self);

/* Signal "changed": a device was checked or unchecked, made main, or its workers
 * or replicas changed. */

G_END_DECLS
