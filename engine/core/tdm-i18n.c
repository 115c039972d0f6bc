/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-i18n.c — the engine's gettext domain, bound on first use (tdm-i18n.h). */
#include "tdm-i18n.h"
#include "tdm-build-config.h"

#include <libintl.h>

gboolean
tdm_running_from_build_tree(void)
{
  g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
  g_autofree char *build = g_canonicalize_filename(TDM_BUILD_DIR, NULL);
  g_autofree char *prefix = g_strconcat(build, G_DIR_SEPARATOR_S, NULL);
  return exe != NULL && g_str_has_prefix(exe, prefix);
}

void
tdm_i18n_bind(const char *domain, const char *build_subdir)
{
  g_return_if_fail(domain != NULL && build_subdir != NULL);
  const char *localedir = g_getenv("TANDEM_LOCALEDIR");
  g_autofree char *built = NULL;
  if (localedir == NULL || localedir[0] == '\0') {
    localedir = TDM_LOCALEDIR;
    if (tdm_running_from_build_tree()) {
      built = g_build_filename(TDM_BUILD_DIR, build_subdir, NULL);
      localedir = built;
    }
  }
  bindtextdomain(domain, localedir);
  bind_textdomain_codeset(domain, "UTF-8");
}

static void
bind_engine_domain(void)
{
  static gsize bound = 0;
  if (g_once_init_enter(&bound)) {
    tdm_i18n_bind(TDM_ENGINE_GETTEXT_PACKAGE, "po/engine");
    g_once_init_leave(&bound, 1);
  }
}

const char *
tdm_engine_gettext(const char *msgid)
{
  bind_engine_domain();
  return g_dgettext(TDM_ENGINE_GETTEXT_PACKAGE, msgid);
}

const char *
tdm_engine_ngettext(const char *msgid, const char *plural, unsigned long n)
{
  bind_engine_domain();
  return g_dngettext(TDM_ENGINE_GETTEXT_PACKAGE, msgid, plural, n);
}
