/* SPDX-License-Identifier: GPL-3.0-or-later */
/* hostile-util.h — what the tests of hostile inputs made on disk share
 * (test-hostile-files.c, test-hardening.c): the run's scratch folder `top`, which
 * main makes (scratch_begin) and removes (scratch_end), and folders under it; an
 * error checked for its code, the words it must name, one line and a bounded length;
 * and text nested to a depth no parser should follow. Header-only, included once by
 * each test program. */
#pragma once

#include "tdm-error.h"
#include "remove-tree.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

static char *top;   /* this run's scratch folder (and XDG_CACHE_HOME inside it) */

/* Makes top from TEMPLATE (g_dir_make_tmp's) and, before GLib reads it, points
 * XDG_CACHE_HOME inside it: the image cache goes to this run's scratch folder. */
static void
scratch_begin(const char *template)
{
  top = g_dir_make_tmp(template, NULL);
  g_assert_nonnull(top);
  g_autofree char *cache = g_build_filename(top, "cache", NULL);
  g_setenv("XDG_CACHE_HOME", cache, TRUE);
}

/* Removes top and everything under it. */
static void
scratch_end(void)
{
  test_remove_tree(top);
  g_clear_pointer(&top, g_free);
}

/* A folder NAME under top, made if missing. */
static char *
scratch(const char *name)
{
  char *dir = g_build_filename(top, name, NULL);
  g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
  return dir;
}

/* ERROR is the engine's CODE, its one line of under 1,000 bytes naming NEEDLE1 and
 * NEEDLE2 (unless NULL). */
static void
assert_error(const GError *error, int code, const char *needle1, const char *needle2)
{
  g_assert_nonnull(error);
  g_assert_true(error->domain == TDM_ENGINE_ERROR);
  if (error->code != code || strstr(error->message, needle1) == NULL ||
      (needle2 != NULL && strstr(error->message, needle2) == NULL))
    g_error("error %d “%s” is not %d naming “%s” and “%s”", error->code, error->message,
            code, needle1, needle2 ? needle2 : "");
  g_assert_null(strchr(error->message, '\n'));
  g_assert_cmpuint(strlen(error->message), <, 1000);
}

/* INNER inside DEPTH copies of OPEN and CLOSE. */
static char *
nested(const char *open, const char *inner, const char *close, int depth)
{
  GString *s = g_string_new(NULL);
  for (int i = 0; i < depth; i++)
    g_string_append(s, open);
  g_string_append(s, inner);
  for (int i = 0; i < depth; i++)
    g_string_append(s, close);
  return g_string_free(s, FALSE);
}
