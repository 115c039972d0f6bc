/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history-compact.c — keeps a long run's file a few MB: the recorder's writes,
 * and the thinning of the sampled steps once the file passes its budget.
 *
 * A run writes ~6.5 KB a second (the mlp on two CPU workers), half a GB a day. When
 * the file passes its budget, it is rewritten (a locked temporary renamed over it)
 * with the sampled steps older than the last few minutes thinned to an even grid
 * in time, so the whole run keeps its shape at a coarser rate; every other line
 * (settings, epochs, the end, renames) stays, and so does every step of the last
 * minutes. Not the reader: it skips nothing it finds.
 */
#include "tdm-history-private.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-file.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  gsize start, length;          /* in the file's text, without the newline */
  gboolean point;               /* a sampled step's line: may be thinned */
  gboolean broken;              /* not a JSON object (a write cut short): dropped, as
                                 * it would stop the reader once not last */
  gint64 step;
  double time;                  /* the run's time when it was written */
} Line;

/* Rewrites the file with the sampled steps (step metrics, device figures, phases)
 * older than the last `recent` seconds thinned to fit half the budget; every other
 * line stays. */
static gboolean tdm_history_compact(TdmRunRecorder *rec, GError **error);

void
tdm_history_recorder_write(TdmRunRecorder *rec, JsonBuilder *b)
{
  if (!tdm_history_append_line(rec->fd, rec->path, b, &rec->error))
    return;
  struct stat st;
  if (rec->budget <= 0 || fstat(rec->fd, &st) != 0)
    return;
  if (st.st_size <= MAX(rec->budget, rec->next_compaction))
    return;
  g_autoptr(GError) local = NULL;
  if (!tdm_history_compact(rec, &local)) {
    /* The run goes on with its file whole; not again before it has grown as much. */
    g_warning("%s", local->message);
    rec->next_compaction = (gint64)st.st_size + rec->budget;
  }
}

static gboolean
is_point(const char *type)
{
  return g_str_equal(type, "step") || g_str_equal(type, "devices") ||
         g_str_equal(type, "phases");
}

/* The lines of text, each with its kind, step and time. */
static GArray *
split_lines(const char *text, gsize length)
{
  GArray *lines = g_array_new(FALSE, TRUE, sizeof(Line));
  double time = 0;
  gsize at = 0;
  while (at < length) {
    const char *end = memchr(text + at, '\n', length - at);
    gsize len = end != NULL ? (gsize)(end - (text + at)) : length - at;
    Line line = {at, len, FALSE, TRUE, 0, time};
    g_autoptr(JsonNode) root = tdm_json_parse(text + at, (gssize)len, TDM_ENGINE_ERROR_HISTORY,
                                              NULL);
    if (root != NULL && JSON_NODE_HOLDS_OBJECT(root)) {
      JsonObject *o = json_node_get_object(root);
      const char *type = tdm_history_get_string(o, "type", "");
      double elapsed = tdm_history_get_double(o, "elapsed");
      if (g_str_equal(type, "step") && isfinite(elapsed))
        time = elapsed;
      line.broken = FALSE;
      line.point = is_point(type);
      line.step = tdm_history_get_int(o, "step");
      line.time = time;
    }
    if (len > 0)
      g_array_append_val(lines, line);
    at += len + 1;
  }
  return lines;
}

/* Marks which point lines stay: those of the last `recent` seconds, and of the older
 * ones the first step in each cell of an even grid over their time, as many cells as
 * fit half the budget. */
static void
choose(GArray *lines, const TdmRunRecorder *rec, gboolean *keep)
{
  double last = 0;
  for (guint i = 0; i < lines->len; i++)
    last = MAX(last, g_array_index(lines, Line, i).time);
  double cutoff = last - rec->recent;
  gint64 old_bytes = 0, old_steps = 0, step = G_MININT64;
  double first = -1;
  for (guint i = 0; i < lines->len; i++) {
    const Line *l = &g_array_index(lines, Line, i);
    keep[i] = !l->broken;
    if (!l->point || l->time >= cutoff)
      continue;
    old_bytes += (gint64)l->length + 1;
    if (l->step != step) {
      step = l->step;
      old_steps++;
    }
    if (first < 0)
      first = l->time;
  }
  gint64 target = rec->budget / 2;
  if (old_bytes <= target || old_steps < 2)
    return;
  double cells = MAX(1.0, floor((double)old_steps * (double)target / (double)old_bytes));
  double width = MAX((cutoff - first) / cells, 1e-9);
  gint64 kept_cell = -1;
  gboolean keeping = TRUE;
  step = G_MININT64;
  for (guint i = 0; i < lines->len; i++) {
    const Line *l = &g_array_index(lines, Line, i);
    if (!l->point || l->time >= cutoff)
      continue;
    if (l->step != step) {
      step = l->step;
      gint64 cell = (gint64)floor((l->time - first) / width);
      keeping = cell != kept_cell;
      if (keeping)
        kept_cell = cell;
    }
    keep[i] = keeping;
  }
}

static gboolean
tdm_history_compact(TdmRunRecorder *rec, GError **error)
{
  /* Held until the thinned copy is renamed over the file: a rename of the run
   * (tdm_history_rename) waits meanwhile, and then appends to the new file. */
  while (flock(rec->fd, LOCK_EX) != 0 && errno == EINTR)
    ;
  g_autoptr(GBytes) bytes = tdm_file_read_all(rec->path, _("run file "),
                                              TDM_ENGINE_ERROR_HISTORY, TDM_HISTORY_MAX_FILE,
                                              error);
  if (bytes == NULL) {
    flock(rec->fd, LOCK_UN);
    return FALSE;
  }
  gsize length = 0;
  const char *text = g_bytes_get_data(bytes, &length);
  g_autoptr(GArray) lines = split_lines(text, length);
  g_autofree gboolean *keep = g_new0(gboolean, MAX(1, lines->len));
  choose(lines, rec, keep);
  GString *out = g_string_sized_new(length);
  for (guint i = 0; i < lines->len; i++) {
    const Line *l = &g_array_index(lines, Line, i);
    if (keep[i]) {
      g_string_append_len(out, text + l->start, (gssize)l->length);
      g_string_append_c(out, '\n');
    }
  }

  g_autofree char *base = g_path_get_basename(rec->path);
  tdm_file_remove_stale_temps(rec->folder, base);
  g_autofree char *tmp = NULL;
  int fd = tdm_file_create_temp(rec->folder, base, &tmp);
  gboolean ok = fd >= 0;
  int saved = errno;
  if (ok && !tdm_file_write_all(fd, out->str, out->len)) {
    ok = FALSE;
    saved = errno;
  }
  if (ok && fsync(fd) != 0) {
    ok = FALSE;
    saved = errno;
  }
  if (fd >= 0 && close(fd) != 0 && ok) {
    ok = FALSE;
    saved = errno;
  }
  if (ok && g_rename(tmp, rec->path) != 0) {
    ok = FALSE;
    saved = errno;
  }
  gsize written = out->len;
  g_string_free(out, TRUE);
  if (!ok) {
    flock(rec->fd, LOCK_UN);
    if (tmp != NULL)
      g_unlink(tmp);
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("could not thin the run history file %s: %s"), rec->path, g_strerror(saved));
    return FALSE;
  }
  /* The old descriptor points at the file just replaced: append to the new one. */
  int fresh = g_open(rec->path, O_WRONLY | O_APPEND | O_CLOEXEC, 0);
  if (fresh < 0) {
    saved = errno;
    flock(rec->fd, LOCK_UN);
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("could not reopen the run history file %s: %s"), rec->path, g_strerror(saved));
    return FALSE;
  }
  g_close(rec->fd, NULL);   /* the lock goes with it */
  rec->fd = fresh;
  /* A quarter of the budget to grow before the next: the rewrites cost a constant
   * share of what is written, even when the last minutes alone pass the budget. */
  rec->next_compaction = (gint64)written + rec->budget / 4;
  return TRUE;
}
