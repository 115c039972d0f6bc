/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-history-weights.c — the networks kept with the run history: one file a run,
 * beside its record; a size limit lets the oldest go first and the one named (or
 * the newest) stay; files that are not a run's are never counted nor touched;
 * deleting a run deletes its network. */
#include "tdm-history.h"

#include <glib/gstdio.h>
#include <string.h>

static void
write_file(const char *folder, const char *name, gsize bytes)
{
  g_autofree char *path = g_build_filename(folder, name, NULL);
  g_autofree char *data = g_malloc0(MAX(bytes, 1));

  g_assert_true(g_file_set_contents(path, data, (gssize)bytes, NULL));
}

static gboolean
exists(const char *folder, const char *name)
{
  g_autofree char *path = g_build_filename(folder, name, NULL);

  return g_file_test(path, G_FILE_TEST_EXISTS);
}

static void
test_limit_oldest_first(void)
{
  g_autofree char *folder = g_dir_make_tmp("tandem-weights-XXXXXX", NULL);
  g_autoptr(TdmHistory) history = tdm_history_new(folder);
  g_autoptr(GError) error = NULL;
  static const char *const ids[] = {"20240101-000000-a", "20240102-000000-b",
                                    "20240103-000000-c"};

  for (guint i = 0; i < G_N_ELEMENTS(ids); i++) {
    g_autofree char *run = g_strconcat(ids[i], ".jsonl", NULL);
    g_autofree char *net = g_strconcat(ids[i], ".safetensors", NULL);

    write_file(folder, run, 10);
    write_file(folder, net, 1000);
  }
  /* Not a run's: no record beside it, or hidden (a checkpoint being written). */
  write_file(folder, "mine.safetensors", 5000);
  write_file(folder, ".20240103-000000-c.safetensors.XYZ", 5000);

  g_autofree char *path = tdm_history_weights_path(history, ids[1]);
  g_autofree char *expected = g_build_filename(folder, "20240102-000000-b.safetensors", NULL);
  g_assert_cmpstr(path, ==, expected);
  g_assert_null(tdm_history_weights_path(history, "../x"));
  g_assert_cmpuint(tdm_history_weights_bytes(history), ==, 3000);
  g_autofree char *newest = tdm_history_newest_weights(history);
  g_autofree char *newest_expected = g_build_filename(folder, "20240103-000000-c.safetensors", NULL);
  g_assert_cmpstr(newest, ==, newest_expected);

  /* Room for two: the oldest goes. */
  g_assert_cmpint(tdm_history_limit_weights(history, 2000, NULL, &error), ==, 1);
  g_assert_no_error(error);
  g_assert_false(exists(folder, "20240101-000000-a.safetensors"));
  g_assert_true(exists(folder, "20240101-000000-a.jsonl"));
  g_assert_true(exists(folder, "20240102-000000-b.safetensors"));
  /* Room for none: the run named keeps its own, and so does nothing else of it. */
  g_assert_cmpint(tdm_history_limit_weights(history, 0, ids[1], &error), ==, 1);
  g_assert_true(exists(folder, "20240102-000000-b.safetensors"));
  g_assert_false(exists(folder, "20240103-000000-c.safetensors"));
  /* Without a run named, the newest left keeps its own. */
  g_assert_cmpint(tdm_history_limit_weights(history, 0, NULL, &error), ==, 0);
  g_assert_true(exists(folder, "20240102-000000-b.safetensors"));
  g_assert_true(exists(folder, "mine.safetensors"));
  g_assert_true(exists(folder, ".20240103-000000-c.safetensors.XYZ"));

  /* Deleting a run deletes its network; one without is deleted all the same. */
  g_assert_true(tdm_history_delete(history, ids[1], &error));
  g_assert_no_error(error);
  g_assert_false(exists(folder, "20240102-000000-b.safetensors"));
  g_assert_true(tdm_history_delete(history, ids[0], &error));
  g_assert_no_error(error);
  g_assert_cmpuint(tdm_history_weights_bytes(history), ==, 0);
  g_assert_null(tdm_history_newest_weights(history));

  g_autofree char *command = g_strdup_printf("rm -rf '%s'", folder);
  g_spawn_command_line_sync(command, NULL, NULL, NULL, NULL);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/history-weights/limit-oldest-first", test_limit_oldest_first);
  return g_test_run();
}
