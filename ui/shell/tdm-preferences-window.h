/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-preferences-window.h: the window's preferences (Ctrl+comma): what holds for
 * every run the window starts, as opposed to the form's choices for one run. For now
 * whether runs also write TensorBoard event files, and the folder they go in; both
 * are GSettings keys ("tensorboard", "tensorboard-folder") that TdmWindow reads when
 * a run starts.
 */

#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define TDM_TYPE_PREFERENCES_WINDOW (tdm_preferences_window_get_type ())

G_DECLARE_FINAL_TYPE (TdmPreferencesWindow, tdm_preferences_window, TDM, PREFERENCES_WINDOW,
                      AdwPreferencesWindow)

TdmPreferencesWindow *tdm_preferences_window_new (GtkWindow *parent);

/* The folder the runs' TensorBoard event files go in, from the settings: the
 * "tensorboard-folder" key, or its default, "tensorboard" in Tandem's data folder. */
char *tdm_preferences_tensorboard_folder (GSettings *settings);

G_END_DECLS
