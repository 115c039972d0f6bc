/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-history.h — what test-history.c and test-history-window.c share: the history
 * folder on disk and the store's rows. Header-only test helpers.
 */
#pragma once

#include <glib/gstdio.h>
#include <adwaita.h>

#include "tdm-history-store.h"

static inline char *
runs_folder(void)
{
  return g_build_filename(g_get_user_data_dir(), "tandem", "runs", NULL);
}

static inline guint
files_in(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  guint n = 0;

  while (d != NULL && g_dir_read_name(d) != NULL)
    n++;
  return n;
}

static inline TdmRunItem *
item_at(TdmHistoryStore *store, guint i)
{
  TdmRunItem *item = g_list_model_get_item(G_LIST_MODEL(store), i);

  g_assert_nonnull(item);
  g_object_unref(item);   /* the store keeps it */
  return item;
}

/* Registers the tests of the window's own runs (test-history-window.c): recorded,
 * restored after a restart, overlaid, compared with one device, swept, and a history
 * folder that cannot be made. */
void test_history_add_window(void);
