/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-calls.h — what the two files of the front door (tdm-backend-calls.c and
 * tdm-backend-calls-layers.c) share: how an operation starts and how a bad argument
 * fails it. Private to them. */
#pragma once

#include "tdm-backend-ops.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

/* Counts the operation; FALSE after an earlier failure, when it must do nothing. */
static inline gboolean
tdm_backend_enter(TdmBackend *b)
{
  b->operations++;
  return !tdm_backend_failed(b);
}

/* TRUE when cond holds; else the operation's failure (the sticky error, whose message
 * names the operation and what is wrong) and FALSE. */
#define TDM_ARGS_OK(b, cond, ...)                                                       \
  (G_LIKELY(cond) || (tdm_backend_fail((b), TDM_ENGINE_ERROR_BACKEND, __VA_ARGS__), FALSE))

/* The failure of an operation this backend does not have (its slot is NULL). */
#define TDM_HAS_OP(b, slot)                                                             \
  TDM_ARGS_OK(b, (b)->ops->slot != NULL, _("%s: not an operation this backend has"), #slot)

/* x_type is float32, or bf16 where the backend reads it (tdm_backend_has_bn_bf16_input()). */
gboolean tdm_backend_input_ok (TdmBackend *b, const char *op, TdmDtype x_type);
