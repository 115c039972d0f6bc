/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-config-private.h — what the configuration's source files share (tdm-config.c
 * and its parts for the fine-tuning fields and the training controls). Not for
 * anything else.
 */
#pragma once

#include <glib.h>

/* Sets TDM_ENGINE_ERROR_INVALID_OPTION with the formatted message (which names the
 * option first); returns FALSE. */
gboolean tdm_config_invalid (GError **error, const char *format, ...) G_GNUC_PRINTF (2, 3);

/* The checks' short name for it. */
#define invalid tdm_config_invalid
