/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history-weights.c — the trained network kept with each run of the history:
 * <id>.safetensors beside <id>.jsonl, the checkpoint its run saved (and resumes
 * from). Every run has its own, so the next run never overwrites it. Together they
 * stay under a size the person chooses: past it the oldest runs' weights go first,
 * their records stay. Only files beside a run file are counted or removed: nothing
 * else in the folder is touched. */
#include "tdm-history-private.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#define WEIGHTS_SUFFIX ".safetensors"

char *
tdm_history_weights_path(TdmHistory *h, const char *id)
{
  g_return_val_if_fail(h != NULL, NULL);
  if (!tdm_history_valid_id(id, NULL))
    return NULL;
  g_autofree char *file = g_strconcat(id, WEIGHTS_SUFFIX, NULL);
  return g_build_filename(h->folder, file, NULL);
}

typedef struct {
  char *id;
  guint64 bytes;
} Kept;

static void
kept_clear(gpointer data)
{
  g_free(((Kept *)data)->id);
}

static int
compare_kept(gconstpointer a, gconstpointer b)
{
  return strcmp(((const Kept *)a)->id, ((const Kept *)b)->id);
}

/* Every run's kept weights, oldest run first (ids sort by date). */
static GArray *
list_kept(TdmHistory *h)
{
  GArray *kept = g_array_new(FALSE, FALSE, sizeof(Kept));
  g_array_set_clear_func(kept, kept_clear);
  g_autoptr(GDir) dir = g_dir_open(h->folder, 0, NULL);
  const char *file;
  while (dir != NULL && (file = g_dir_read_name(dir)) != NULL) {
    if (!g_str_has_suffix(file, WEIGHTS_SUFFIX) || file[0] == '.')
      continue;
    g_autofree char *id = g_strndup(file, strlen(file) - strlen(WEIGHTS_SUFFIX));
    g_autofree char *run = tdm_history_run_path(h, id);
    g_autofree char *path = g_build_filename(h->folder, file, NULL);
    GStatBuf st;
    if (!g_file_test(run, G_FILE_TEST_IS_REGULAR) || g_lstat(path, &st) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    Kept k = {g_steal_pointer(&id), (guint64)st.st_size};
    g_array_append_val(kept, k);
  }
  g_array_sort(kept, compare_kept);
  return kept;
}

char *
tdm_history_newest_weights(TdmHistory *h)
{
  g_return_val_if_fail(h != NULL, NULL);
  g_autoptr(GArray) kept = list_kept(h);
  if (kept->len == 0)
    return NULL;
  return tdm_history_weights_path(h, g_array_index(kept, Kept, kept->len - 1).id);
}

guint64
tdm_history_weights_bytes(TdmHistory *h)
{
  g_return_val_if_fail(h != NULL, 0);
  g_autoptr(GArray) kept = list_kept(h);
  guint64 total = 0;
  for (guint i = 0; i < kept->len; i++)
    total += g_array_index(kept, Kept, i).bytes;
  return total;
}

int
tdm_history_limit_weights(TdmHistory *h, guint64 limit, const char *keep, GError **error)
{
  g_return_val_if_fail(h != NULL, -1);
  g_autoptr(GArray) kept = list_kept(h);
  guint64 total = 0;
  for (guint i = 0; i < kept->len; i++)
    total += g_array_index(kept, Kept, i).bytes;
  /* Without a run named, the newest keeps its own. */
  if (keep == NULL && kept->len > 0)
    keep = g_array_index(kept, Kept, kept->len - 1).id;
  int removed = 0;
  for (guint i = 0; i < kept->len && total > limit; i++) {
    const Kept *k = &g_array_index(kept, Kept, i);
    if (g_strcmp0(k->id, keep) == 0)
      continue;
    g_autofree char *path = tdm_history_weights_path(h, k->id);
    if (g_unlink(path) != 0) {
      int saved = errno;
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                  _("could not remove the kept weights %s: %s"), path, g_strerror(saved));
      return -1;
    }
    total -= k->bytes;
    removed++;
  }
  return removed;
}
