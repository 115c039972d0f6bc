/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tandem.c — the GTK application's entry point.
 *
 * Sets up the locale and translations, lets an uninstalled build find its own
 * schema, and runs TdmApplication. Everything else lives in ui/.
 */
#include <locale.h>

#include "tdm-application.h"

int
main(int argc, char **argv)
{
  setlocale(LC_ALL, "");
  tdm_application_init_i18n();
  tdm_application_init_uninstalled();

  g_autoptr(TdmApplication) app = tdm_application_new();
  return g_application_run(G_APPLICATION(app), argc, argv);
}
