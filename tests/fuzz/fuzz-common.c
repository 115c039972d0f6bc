/* SPDX-License-Identifier: GPL-3.0-or-later */
/* fuzz-common.c — temporary folders and input splitting for the harnesses
 * (fuzz-common.h). */
#include "fuzz-common.h"

#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

static char *temp_folder;

static void
remove_tree(const char *path)
{
  GDir *dir = g_dir_open(path, 0, NULL);
  if (dir != NULL) {
    const char *entry;
    while ((entry = g_dir_read_name(dir)) != NULL) {
      g_autofree char *child = g_build_filename(path, entry, NULL);
      if (g_file_test(child, G_FILE_TEST_IS_DIR) && !g_file_test(child, G_FILE_TEST_IS_SYMLINK))
        remove_tree(child);
      else
        g_unlink(child);
    }
    g_dir_close(dir);
  }
  g_rmdir(path);
}

static void
remove_temp_folder(void)
{
  if (temp_folder != NULL)
    remove_tree(temp_folder);
}

const char *
fuzz_temp_folder(void)
{
  if (temp_folder == NULL) {
    temp_folder = g_dir_make_tmp("tandem-fuzz-XXXXXX", NULL);
    if (temp_folder == NULL)
      abort();
    atexit(remove_temp_folder);
  }
  return temp_folder;
}

void
fuzz_clear_folder(const char *folder)
{
  GDir *dir = g_dir_open(folder, 0, NULL);
  if (dir == NULL)
    return;
  const char *entry;
  while ((entry = g_dir_read_name(dir)) != NULL) {
    g_autofree char *child = g_build_filename(folder, entry, NULL);
    if (g_file_test(child, G_FILE_TEST_IS_DIR) && !g_file_test(child, G_FILE_TEST_IS_SYMLINK))
      remove_tree(child);
    else
      g_unlink(child);
  }
  g_dir_close(dir);
}

int
fuzz_write_files(const char *folder, const char *const *names, int count, const uint8_t *data,
                 size_t size)
{
  fuzz_clear_folder(folder);
  if (size == 0)
    return 0;
  unsigned mask = data[0];
  data++;
  size--;
  int written = 0;
  for (int i = 0; i < count; i++) {
    if (!(mask & (1u << (i % 8))))
      continue;
    size_t len = 0;
    if (size >= 4) {
      len = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 |
            (size_t)data[3] << 24;
      data += 4;
      size -= 4;
    } else {
      size = 0;
    }
    if (len > size)
      len = size;
    g_autofree char *path = g_build_filename(folder, names[i], NULL);
    /* Names may hold a sub-folder ("cat/1.png"). */
    g_autofree char *parent = g_path_get_dirname(path);
    g_mkdir_with_parents(parent, 0755);
    if (!g_file_set_contents(path, (const char *)data, (gssize)len, NULL))
      abort();
    data += len;
    size -= len;
    written++;
  }
  return written;
}
