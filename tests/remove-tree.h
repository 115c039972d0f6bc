/* SPDX-License-Identifier: GPL-3.0-or-later */
/* remove-tree.h — a test's temporary files removed: a file, or a folder and everything
 * under it. A folder a test made unreadable is made readable again first; a link is
 * removed, never followed. Header-only, so every test program can share it.
 */
#pragma once

#include <glib.h>
#include <glib/gstdio.h>

static inline void
test_remove_tree(const char *path)
{
  if (g_file_test(path, G_FILE_TEST_IS_DIR) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
    g_chmod(path, 0755);
    GDir *dir = g_dir_open(path, 0, NULL);
    if (dir != NULL) {
      const char *name;
      while ((name = g_dir_read_name(dir)) != NULL) {
        g_autofree char *child = g_build_filename(path, name, NULL);
        test_remove_tree(child);
      }
      g_dir_close(dir);
    }
    g_rmdir(path);
  } else {
    g_unlink(path);
  }
}
