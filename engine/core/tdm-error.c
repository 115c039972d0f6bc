/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-error.c — the quark behind TDM_ENGINE_ERROR. */
#include "tdm-error.h"

G_DEFINE_QUARK (tdm-engine-error-quark, tdm_engine_error)
