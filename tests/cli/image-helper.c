/* SPDX-License-Identifier: GPL-3.0-or-later */
/* image-helper.c — writes the image folders test-cli-images.sh runs tandem-train on,
 * so that test needs neither Python nor an image tool.
 *
 *   image-helper DIR   → DIR/good (three classes of 12 PNGs, 10 × 10 grey),
 *                        DIR/single (one class), DIR/damaged (good plus bad files),
 *                        DIR/bomb.png (a 60000 × 60000 header)
 */
#include "image-writer.h"

#include <sys/stat.h>
#include <unistd.h>

static void
write_class(const char *root, const char *name, int count, int level)
{
  g_autofree char *dir = g_build_filename(root, name, NULL);
  g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
  for (int i = 0; i < count; i++) {
    g_autofree char *path = g_strdup_printf("%s/%03d.png", dir, i);
    uint8_t px[100];
    for (int k = 0; k < 100; k++)
      px[k] = (uint8_t)(level + (k % 10 < 5 ? 0 : 30) + i % 5);
    test_write_png(path, 10, 10, 1, px);
  }
}

int
main(int argc, char **argv)
{
  if (argc != 2) {
    g_printerr("usage: image-helper DIR\n");
    return 2;
  }
  const char *dir = argv[1];
  const char *names[] = {"ant", "bee", "cat"};
  for (int set = 0; set < 2; set++) {
    g_autofree char *root = g_build_filename(dir, set == 0 ? "good" : "damaged", NULL);
    for (int c = 0; c < 3; c++)
      write_class(root, names[c], 12, 20 + 80 * c);
  }
  g_autofree char *single = g_build_filename(dir, "single", NULL);
  write_class(single, "only", 5, 100);

  g_autofree char *cut = g_build_filename(dir, "damaged", "ant", "cut.png", NULL);
  test_write_truncated_png(cut, 100);
  g_autofree char *text = g_build_filename(dir, "damaged", "bee", "notes.txt", NULL);
  g_assert_true(g_file_set_contents(text, "not an image", -1, NULL));
  g_autofree char *fifo = g_build_filename(dir, "damaged", "cat", "pipe.png", NULL);
  g_assert_cmpint(mkfifo(fifo, 0644), ==, 0);
  g_autofree char *bomb = g_build_filename(dir, "bomb.png", NULL);
  test_write_bomb_png(bomb);
  return 0;
}
