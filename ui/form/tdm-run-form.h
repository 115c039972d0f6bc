/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run-form.h: the choices that make a training run, on the window's left.
 *
 * Dataset, network (a built-in or a one-line spec), devices, global batch size with
 * its split over the replicas, epochs, optimizer, learning rate and strategy. The
 * form remembers them in GSettings as they change, says whether they make a run that
 * can start (the "ready" property), and turns them into a TdmConfig. It does not run
 * anything: TdmWindow does, and makes the form insensitive meanwhile.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-config.h"
#include "tdm-events.h"

G_BEGIN_DECLS

#define TDM_TYPE_RUN_FORM (tdm_run_form_get_type ())

G_DECLARE_FINAL_TYPE (TdmRunForm, tdm_run_form, TDM, RUN_FORM, GtkWidget)


/* Replaces the device list (an array of TdmDeviceInfo), keeping the remembered
 * choice of devices where it still applies. Without it the form lists
 * tdm_device_list() after the window's first frame. */
void       tdm_run_form_set_devices  (TdmRunForm  *self,
                                      GArray      *devices);
gboolean   tdm_run_form_get_ready    (TdmRunForm  *self);
/* Property "loading": the dataset is being read or the devices are not listed yet;
 * both wait for the window's first frame. */
gboolean   tdm_run_form_get_loading  (TdmRunForm  *self);
/* The devices ticked, one id per replica, the first `max` into `devices`; returns
 * how many there are (0 when none, perhaps more than `max`) and which is main: for a
 * run that takes the rest of its settings elsewhere. */
int        tdm_run_form_get_replicas (TdmRunForm  *self,
                                      TdmDeviceId *devices,
                                      int          max,
                                      int         *main_replica);
/* Why the form is not ready, in its own words (a sentence naming the control to
 * change); NULL when it is. Free with g_free(). */
char      *tdm_run_form_dup_problem  (TdmRunForm  *self);
/* The run the choices describe, validated; NULL with @error set when they cannot make
 * one. */
TdmConfig *tdm_run_form_build_config (TdmRunForm  *self,
                                      GError     **error);
/* The engine's memory estimate (tdm-memory.h) for the run the choices describe, per
 * device and on the host; whether it fits this machine's free memory and each chosen
 * GPU (the engine's tdm_memory_fits()), and the largest global batch that would (the
 * configured one when it fits).
 * FALSE with @error while the choices make no run or the dataset is not loaded. The
 * signal "changed" says when to ask again. */
gboolean   tdm_run_form_estimate_memory (TdmRunForm      *self,
                                         TdmMemoryEvent  *estimate,
                                         gboolean        *fits,
                                         int             *largest_batch,
                                         GError         **error);
/* Asks for a dataset folder (a file chooser). */
void       tdm_run_form_open_folder  (TdmRunForm  *self);

G_END_DECLS
