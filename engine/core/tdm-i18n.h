/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-i18n.h — messages in the user's language.
 *
 * The engine's messages belong to its own gettext domain, "tandem-engine", which the
 * engine binds itself on the first message it translates (as GLib binds its own), so
 * every program that links the engine (the window, tandem-train, tests) shows them in
 * the user's language without doing anything. Engine files include this header for
 * _() and N_(); the programs' own strings stay in their domain ("tandem").
 * tdm_i18n_bind() is the one rule for where a domain's catalogues are: installed, in
 * the build tree when the program runs from it, or TANDEM_LOCALEDIR.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define TDM_ENGINE_GETTEXT_PACKAGE "tandem-engine"

/* msgid in the engine's domain. */
const char *tdm_engine_gettext (const char *msgid) G_GNUC_FORMAT (1);
/* msgid or its plural, as n asks, in the engine's domain (po/engine/meson.build gives
 * xgettext its name). */
const char *tdm_engine_ngettext (const char *msgid, const char *plural, unsigned long n)
  G_GNUC_FORMAT (1);

/* Binds `domain` (UTF-8) to its catalogues: TANDEM_LOCALEDIR when set, else the
 * build tree's `build_subdir` (a path under it, "po" or "po/engine") when this program
 * runs from the build tree, else the installed locale folder. */
void tdm_i18n_bind (const char *domain, const char *build_subdir);

/* Whether this program runs from the build tree (uninstalled). */
gboolean tdm_running_from_build_tree (void);

G_END_DECLS

#ifdef TDM_ENGINE_COMPILATION
#define _(String) tdm_engine_gettext (String)
#define N_(String) (String)
#endif
