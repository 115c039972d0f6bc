/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-error.c — the quark behind TDM_ENGINE_ERROR, and setting one in a line. */
#include "tdm-error.h"

G_DEFINE_QUARK (tdm-engine-error-quark, tdm_engine_error)

gboolean
tdm_error_set(GError **error, int code, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(error, TDM_ENGINE_ERROR, code, message);
  return FALSE;
}
