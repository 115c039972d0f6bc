/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-library.h — a symbol of a library opened at run time with dlopen (NVML for the
 * telemetry, cuDNN for the convolution engine): the first of several names it may
 * export, newest version first. Header-only; not the opening, which each user does
 * with its own message for a library that is missing. */
#pragma once

#include <dlfcn.h>
#include <stddef.h>

static inline void *
tdm_library_symbol(void *library, const char *const *names)
{
  for (const char *const *name = names; *name != NULL; name++) {
    void *fn = dlsym(library, *name);
    if (fn != NULL)
      return fn;
  }
  return NULL;
}
