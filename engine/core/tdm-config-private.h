/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-config-private.h — what the configuration's source files share (tdm-config.c
 * and its part for the training controls). Not for
 * anything else.
 */
#pragma once

#include <glib.h>

#include "tdm-error.h"

/* Sets TDM_ENGINE_ERROR_INVALID_OPTION with the formatted message (which names the
 * option first); returns FALSE. */
#define invalid(error, ...) tdm_error_set ((error), TDM_ENGINE_ERROR_INVALID_OPTION, __VA_ARGS__)
