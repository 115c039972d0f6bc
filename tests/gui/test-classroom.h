/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-classroom.h — what test-classroom.c and its parts (test-classroom-devices.c,
 * test-classroom-scaling.c, test-classroom-controls.c) share: the devices a window is
 * given, a device row of the picker, a window set for a run (all defined in
 * test-classroom.c); and each part's registration of its tests.
 */
#pragma once

#include <adwaita.h>

#include "tdm-device-row.h"
#include "tdm-window.h"

/* The real CPU, and a made-up GPU of `gpu_bytes` when that is > 0. */
GArray *devices_with(gint64 gpu_bytes);
/* The device picker's CPU row (`cpu` TRUE) or its first GPU row. */
TdmDeviceRow *row_where(TdmWindow *window, gboolean cpu);
/* A window set for a run on two CPU workers and the synthetic set: the network
 * `spec`, `batch`, one epoch, the strategy at `strategy` in its dropdown. */
TdmWindow *window_for_run(const char *spec, int batch, guint strategy);

/* Registers test-classroom-devices.c's tests (the Devices page, the phase means, the
 * memory warning), test-classroom-scaling.c's (the Scaling page) and
 * test-classroom-controls.c's (presentation mode, stepping, a batch too large). */
void test_classroom_add_devices(void);
void test_classroom_add_scaling(void);
void test_classroom_add_controls(void);
