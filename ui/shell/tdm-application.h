/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-application.h: Tandem's AdwApplication.
 *
 * One main window per activation, the app-wide actions (quit, keyboard shortcuts,
 * about) and their accelerators, and the set-up that lets Tandem run from its
 * build tree: translations from the build's po/ and the schema compiled in data/.
 * No training logic lives here.
 */

#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define TDM_TYPE_APPLICATION (tdm_application_get_type ())

G_DECLARE_FINAL_TYPE (TdmApplication, tdm_application, TDM, APPLICATION, AdwApplication)

TdmApplication *tdm_application_new       (void);

/* Binds the "tandem" gettext domain and makes it the default. The locale directory
 * is $TANDEM_LOCALEDIR when set; else the build tree's po/ when the running program
 * is inside the build tree; else the installed one. Call once, early. */
void            tdm_application_init_i18n (void);

/* When running from the build tree, points GSETTINGS_SCHEMA_DIR at the schema
 * compiled there (unless it is set already). Call before the first GSettings. */
void            tdm_application_init_uninstalled (void);

G_END_DECLS
