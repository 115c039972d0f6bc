/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dataset-folder.c — a folder of class folders of images as a dataset pair
 * (tdm-dataset-folder.h).
 *
 * Three steps: a scan that lists the classes and their regular files without opening
 * any (tdm-folder-scan.c: stat only, so a FIFO or a symlink loop costs nothing; folders
 * inside a class folder are not entered, so no link can make the walk endless); a
 * cache look-up keyed by that list; on a miss, sorting the list, decoding on every
 * core straight into the datasets' buffers, then closing the gaps left by files that
 * could not be decoded. A cached start is the scan and one read. Not the decoder
 * (tdm-image.c), not the scan and not the cache file (tdm-image-cache.c).
 */
#include "tdm-dataset-folder.h"
#include "tdm-config.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-image.h"
#include "tdm-folder-scan.h"
#include "tdm-image-cache.h"

#include <limits.h>
#include <string.h>

/* Files named in the notice; the rest are counted. */
#define NOTICE_EXAMPLES 5
#define PROBE_FILES 64

static gint
compare_ints(gconstpointer a, gconstpointer b)
{
  int x = *(const int *)a, y = *(const int *)b;
  return x < y ? -1 : x > y;
}

/* Picks the size and colour left at 0 from a few headers spread over the folder. */
static void
resolve_options(TdmScan *s, TdmImageOptions *o)
{
  if (o->size > 0 && o->channels > 0)
    return;
  guint n = s->entries->len;
  guint step = MAX(1u, n / PROBE_FILES);
  g_autoptr(GArray) sides = g_array_new(FALSE, FALSE, sizeof(int));
  gboolean colour = FALSE, same = TRUE;
  int first_w = -1, first_h = -1;
  guint folder = 0;
  for (guint i = 0; i < n; i += step) {
    const TdmScanFolder *f = &g_array_index(s->folders, TdmScanFolder, folder);
    while (i >= f->first + f->count)
      f = &g_array_index(s->folders, TdmScanFolder, ++folder);
    TdmImageInfo info;
    g_autofree char *path = tdm_scan_entry_path(s, f, &g_array_index(s->entries, TdmScanEntry, i));
    if (!tdm_image_probe(path, &info, NULL))
      continue;
    int side = MIN(info.width, info.height);
    g_array_append_val(sides, side);
    colour |= info.channels == 3;
    if (first_w < 0) {
      first_w = info.width;
      first_h = info.height;
    }
    same &= info.width == first_w && info.height == first_h;
  }
  if (o->channels == 0)
    o->channels = colour || sides->len == 0 ? 3 : 1;
  if (o->size == 0) {
    if (sides->len == 0) {
      o->size = 32;
    } else if (same && first_w == first_h && first_w <= TDM_IMAGE_SIZE_AUTO_MAX) {
      o->size = MAX(first_w, TDM_IMAGE_SIZE_MIN);
    } else {
      g_array_sort(sides, compare_ints);
      const int *v = (const int *)sides->data;
      int median = v[sides->len / 2];
      o->size = CLAMP(median, TDM_IMAGE_SIZE_MIN, TDM_IMAGE_SIZE_AUTO_MAX);
    }
  }
}

static gint
compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *
format_count(gint64 n)
{
  g_autofree char *digits = g_strdup_printf("%" G_GINT64_FORMAT, n);
  GString *out = g_string_new(NULL);
  size_t len = strlen(digits);
  for (size_t i = 0; i < len; i++) {
    if (i > 0 && (len - i) % 3 == 0)
      g_string_append_c(out, ',');
    g_string_append_c(out, digits[i]);
  }
  return g_string_free(out, FALSE);
}

/* ---- parallel decoding ------------------------------------------------------ */

typedef struct {
  const TdmScan *scan;
  TdmDataset *sets[2];
  int size, channels;
  gint next;
  gint done;
  GMutex lock;
  GPtrArray *failed;     /* char *: "rel (reason)", under lock */
  GCancellable *cancellable;
  TdmFolderProgress progress;
  gpointer user_data;
} Work;

static void
work_one(Work *w, guint i)
{
  const TdmScan *s = w->scan;
  /* Entries are read-only here but for this one's failure mark, which no other
   * thread touches. */
  TdmScanEntry *e = &g_array_index(s->entries, TdmScanEntry, i);
  const TdmScanFolder *f = tdm_scan_folder_of(s, i);
  TdmDataset *d = w->sets[(e->slot & TDM_SLOT_TEST) != 0];
  uint8_t *out = d->images + (size_t)(e->slot & TDM_SLOT_INDEX) * tdm_dataset_sample_size(d);
  GError *local = NULL;
  char path[PATH_MAX];
  g_snprintf(path, sizeof path, "%s" G_DIR_SEPARATOR_S "%s" G_DIR_SEPARATOR_S "%s", s->root,
             f->dir, tdm_scan_entry_name(s, e));
  if (!tdm_image_load(path, w->size, w->channels, out, &local)) {
    e->slot |= TDM_SLOT_FAILED;
    g_autofree char *rel = tdm_scan_entry_rel(s, f, e);
    g_mutex_lock(&w->lock);
    g_ptr_array_add(w->failed, g_strdup_printf("%s (%s)", rel, local->message));
    g_mutex_unlock(&w->lock);
    g_error_free(local);
  }
}

static gpointer
work_thread(gpointer data)
{
  Work *w = data;
  gint total = (gint)w->scan->entries->len;
  for (;;) {
    gint i = g_atomic_int_add(&w->next, 1);
    if (i >= total || g_cancellable_is_cancelled(w->cancellable))
      break;
    work_one(w, (guint)i);
    g_atomic_int_inc(&w->done);
  }
  return NULL;
}

/* The calling thread works too, and is the one that reports progress. */
static void
decode_all(Work *w)
{
  int threads = MAX(1, (int)g_get_num_processors());
  int total = (int)w->scan->entries->len;
  GThread **pool = g_new0(GThread *, threads);
  for (int t = 1; t < threads && t < total; t++)
    pool[t] = g_thread_new("tdm-decode", work_thread, w);
  int reported = -1, step = MAX(1, total / 200);
  for (;;) {
    gint i = g_atomic_int_add(&w->next, 1);
    if (i >= total || g_cancellable_is_cancelled(w->cancellable))
      break;
    work_one(w, (guint)i);
    int done = g_atomic_int_add(&w->done, 1) + 1;
    if (w->progress != NULL && done - reported >= step) {
      w->progress(done, total, w->user_data);
      reported = done;
    }
  }
  for (int t = 1; t < threads; t++)
    if (pool[t] != NULL)
      g_thread_join(pool[t]);
  g_free(pool);
  if (w->progress != NULL && !g_cancellable_is_cancelled(w->cancellable))
    w->progress(total, total, w->user_data);
}

/* Moves the decoded samples over the gaps of the failed ones and sets the labels. */
static void
compact(const TdmScan *s, TdmDataset *d, int split)
{
  size_t sample = (size_t)tdm_dataset_sample_size(d);
  int kept = 0;
  for (guint k = 0; k < s->folders->len; k++) {
    const TdmScanFolder *f = &g_array_index(s->folders, TdmScanFolder, k);
    for (guint i = f->first; i < f->first + f->count; i++) {
      const TdmScanEntry *e = &g_array_index(s->entries, TdmScanEntry, i);
      if (((e->slot & TDM_SLOT_TEST) != 0) != split || (e->slot & TDM_SLOT_FAILED))
        continue;
      int index = (int)(e->slot & TDM_SLOT_INDEX);
      if (kept != index)
        memmove(d->images + (size_t)kept * sample, d->images + (size_t)index * sample, sample);
      d->labels[kept] = f->label;
      kept++;
    }
  }
  d->count = kept;
}

/* A class folder whose files all failed to decode is no class: its label would be
 * one the network is asked to learn from no example. Labels stay dense. */
static void
drop_unreadable_classes(TdmScan *s, TdmDataset *sets[2])
{
  int classes = (int)s->classes->len;
  g_autofree int *seen = g_new0(int, classes);
  for (int t = 0; t < 2; t++)
    for (int i = 0; i < sets[t]->count; i++)
      seen[sets[t]->labels[i]]++;
  g_autofree int *relabel = g_new(int, classes);
  int kept = 0;
  for (int k = 0; k < classes; k++)
    relabel[k] = seen[k] > 0 ? kept++ : -1;
  if (kept == classes)
    return;
  for (int t = 0; t < 2; t++) {
    for (int i = 0; i < sets[t]->count; i++)
      sets[t]->labels[i] = (uint8_t)relabel[sets[t]->labels[i]];
    for (int k = 0, to = 0; k < classes; k++) {
      if (relabel[k] < 0) {
        g_free(sets[t]->class_names[k]);
        continue;
      }
      sets[t]->class_names[to++] = sets[t]->class_names[k];
    }
    sets[t]->class_names[kept] = NULL;
    sets[t]->classes = kept;
  }
  for (int k = classes; k-- > 0;)
    if (relabel[k] < 0) {
      g_ptr_array_add(s->unreadable, g_strdup(g_ptr_array_index(s->classes, k)));
      g_ptr_array_remove_index(s->classes, k);
    }
}

static char *
build_notice(TdmScan *s, GPtrArray *decode_failed)
{
  g_autoptr(GPtrArray) failed = g_ptr_array_new();
  for (guint i = 0; i < s->bad->len; i++)
    g_ptr_array_add(failed, g_ptr_array_index(s->bad, i));
  for (guint i = 0; i < decode_failed->len; i++)
    g_ptr_array_add(failed, g_ptr_array_index(decode_failed, i));
  g_ptr_array_sort(failed, compare_names);
  GString *notice = g_string_new(NULL);
  if (failed->len > 0) {
    g_autofree char *bad = format_count(failed->len);
    g_autofree char *all = format_count((gint64)s->entries->len + s->bad->len);
    g_string_append_printf(notice, "%s of %s files could not be read: ", bad, all);
    for (guint i = 0; i < failed->len && i < NOTICE_EXAMPLES; i++)
      g_string_append_printf(notice, "%s%s", i > 0 ? ", " : "",
                             (char *)g_ptr_array_index(failed, i));
    if (failed->len > NOTICE_EXAMPLES)
      g_string_append(notice, ", …");
  }
  for (guint i = 0; i < s->empty->len; i++)
    g_string_append_printf(notice, "%sclass folder “%s” holds no files and is left out",
                           notice->len > 0 ? "; " : "", (char *)g_ptr_array_index(s->empty, i));
  for (guint i = 0; i < s->unreadable->len; i++)
    g_string_append_printf(notice, "%sclass folder “%s” holds no image that could be read "
                           "and is left out", notice->len > 0 ? "; " : "",
                           (char *)g_ptr_array_index(s->unreadable, i));
  for (guint i = 0; i < s->dangling->len; i++)
    g_string_append_printf(notice, "%sclass folder “%s” is a symbolic link that leads "
                           "nowhere and is left out", notice->len > 0 ? "; " : "",
                           (char *)g_ptr_array_index(s->dangling, i));
  for (guint i = 0; i < s->linked->len; i++)
    g_string_append_printf(notice, "%sclass folder “%s” is the same folder as another class "
                           "(a link) and is left out", notice->len > 0 ? "; " : "",
                           (char *)g_ptr_array_index(s->linked, i));
  return notice->len > 0 ? g_string_free(notice, FALSE) : (g_string_free(notice, TRUE), NULL);
}

static char *
cache_path_for(const char *root, const TdmImageOptions *o)
{
  g_autofree char *id = g_strdup_printf("%s|%d|%d|%" G_GUINT64_FORMAT, root, o->size,
                                        o->channels, o->seed);
  g_autofree char *hex = g_compute_checksum_for_string(G_CHECKSUM_SHA256, id, -1);
  g_autofree char *name = g_strconcat(hex, ".cache", NULL);
  return g_build_filename(g_get_user_cache_dir(), "tandem", "images", name, NULL);
}

char *
tdm_image_folder_cache_path(const char *folder, const TdmImageOptions *options)
{
  g_return_val_if_fail(folder != NULL, NULL);
  TdmImageOptions o = options != NULL ? *options : (TdmImageOptions){0};
  g_autofree char *cwd = g_get_current_dir();
  g_autofree char *root = g_canonicalize_filename(folder, cwd);
  return cache_path_for(root, &o);
}

gboolean
tdm_dataset_is_image_folder(const char *folder)
{
  g_return_val_if_fail(folder != NULL, FALSE);
  if (tdm_scan_is_dir(folder, "train") && tdm_scan_is_dir(folder, "test"))
    return TRUE;
  /* The window asks on its main loop: read one name of each class folder, not all. */
  g_autoptr(GPtrArray) classes = tdm_scan_list_names(folder, TRUE, NULL);
  for (guint i = 0; classes != NULL && i < classes->len; i++) {
    g_autofree char *dir = g_build_filename(folder, g_ptr_array_index(classes, i), NULL);
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name = NULL;
    while (d != NULL && (name = g_dir_read_name(d)) != NULL && name[0] == '.')
      ;
    if (d != NULL)
      g_dir_close(d);
    if (name != NULL)
      return TRUE;
  }
  return FALSE;
}

static gboolean
check_options(const TdmImageOptions *o, GError **error)
{
  if (o->size != 0 && (o->size < TDM_IMAGE_SIZE_MIN || o->size > TDM_IMAGE_SIZE_MAX)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("--image-size %d is outside %d…%d"), o->size, TDM_IMAGE_SIZE_MIN,
                TDM_IMAGE_SIZE_MAX);
    return FALSE;
  }
  if (o->channels != 0 && o->channels != 1 && o->channels != 3) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("--color: %d channels; expected grey (1) or rgb (3)"), o->channels);
    return FALSE;
  }
  return TRUE;
}

TdmDatasetPair *
tdm_dataset_load_image_folder(const char *folder, const TdmImageOptions *options,
                              TdmFolderProgress progress, gpointer user_data,
                              GCancellable *cancellable, GError **error)
{
  g_return_val_if_fail(folder != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  TdmImageOptions asked = options != NULL ? *options : (TdmImageOptions){0};
  if (!check_options(&asked, error))
    return NULL;

  TdmScan s;
  if (!tdm_scan_open(&s, folder, error)) {
    tdm_scan_clear(&s);
    return NULL;
  }
  TdmDatasetPair *pair = NULL;
  g_autoptr(GPtrArray) failed = g_ptr_array_new_with_free_func(g_free);
  /* Declared before the first jump to out, so their cleanups see NULL at worst. */
  g_autofree char *base = NULL;
  g_autofree int *per_class = NULL;
  char opts_text[96];
  g_snprintf(opts_text, sizeof opts_text, "|%d|%d|%" G_GUINT64_FORMAT "|", asked.size,
             asked.channels, asked.seed);
  g_checksum_update(s.key, (const guchar *)opts_text, -1);
  guint8 key[TDM_IMAGE_CACHE_KEY_BYTES];
  gsize key_len = sizeof key;
  g_checksum_get_digest(s.key, key, &key_len);
  g_autofree char *cache = cache_path_for(s.root, &asked);

  g_autoptr(GError) cache_damage = NULL;
  if (!asked.no_cache) {
    pair = tdm_image_cache_read(cache, key, &cache_damage);
    if (pair != NULL) {
      if (progress != NULL)
        progress(1, 1, user_data);
      goto out;
    }
  }

  tdm_scan_sort(&s);
  tdm_scan_drop_empty_classes(&s);
  if (s.classes->len < 2) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: needs at least two class folders holding images; found %u%s"), s.root,
                s.classes->len,
                s.classes->len == 1 ? " (every image would get the same label)" : "");
    goto out;
  }
  if (!s.split_layout)
    tdm_scan_split(&s, asked.seed);
  TdmImageOptions o = asked;
  resolve_options(&s, &o);

  int counts[2];
  tdm_scan_plan_slots(&s, counts);
  base = g_path_get_basename(s.root);
  Work w = {.scan = &s, .failed = failed, .size = o.size, .channels = o.channels,
            .cancellable = cancellable, .progress = progress, .user_data = user_data};
  g_mutex_init(&w.lock);
  const char *which[2] = {"train", "test"};
  for (int t = 0; t < 2; t++) {
    g_autofree char *name = g_strdup_printf("%s (%s)", base, which[t]);
    w.sets[t] = tdm_dataset_new(name, counts[t], o.size, o.size, o.channels, (int)s.classes->len);
    w.sets[t]->class_names = g_new0(char *, s.classes->len + 1);
    for (guint k = 0; k < s.classes->len; k++)
      w.sets[t]->class_names[k] = g_filename_display_name(g_ptr_array_index(s.classes, k));
  }
  decode_all(&w);
  g_mutex_clear(&w.lock);
  if (g_cancellable_is_cancelled(cancellable)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED,
                _("%s: loading was cancelled"), s.root);
    tdm_dataset_free(w.sets[0]);
    tdm_dataset_free(w.sets[1]);
    goto out;
  }
  compact(&s, w.sets[0], 0);
  compact(&s, w.sets[1], 1);
  drop_unreadable_classes(&s, w.sets);

  pair = g_new0(TdmDatasetPair, 1);
  pair->name = g_filename_display_name(base);
  pair->source = g_strdup(s.root);
  pair->train = w.sets[0];
  pair->test = w.sets[1];
  pair->notice = build_notice(&s, failed);

  int usable = 0;
  per_class = g_new0(int, s.classes->len);
  for (int i = 0; i < pair->train->count; i++)
    per_class[pair->train->labels[i]]++;
  for (guint k = 0; k < s.classes->len; k++)
    usable += per_class[k] > 0;
  if (usable < 2) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: needs at least two classes with images that can be read; %d %s%s%s%s"),
                s.root, usable, usable == 1 ? "has" : "have",
                pair->notice != NULL ? " (" : "", pair->notice != NULL ? pair->notice : "",
                pair->notice != NULL ? ")" : "");
    g_clear_pointer(&pair, tdm_dataset_pair_free);
    goto out;
  }
  if (pair->test->count == 0) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: too few images to hold out a test split (add a test/ folder or more "
                "images per class)"),
                s.root);
    g_clear_pointer(&pair, tdm_dataset_pair_free);
    goto out;
  }
  if (!asked.no_cache) {
    GError *local = NULL;
    if (!tdm_image_cache_write(cache, key, pair, &local)) {
      /* Training still works without the cache; say why the next start is slow. */
      g_autofree char *old = pair->notice;
      pair->notice = g_strdup_printf("%s%s%s", old != NULL ? old : "", old != NULL ? "; " : "",
                                     local->message);
      g_error_free(local);
    }
  }
  if (cache_damage != NULL) {
    /* Said this once (after the write, so the rebuilt cache does not keep saying it). */
    g_autofree char *old = pair->notice;
    pair->notice = g_strdup_printf("%s%s%s; rebuilt from the images", old != NULL ? old : "",
                                   old != NULL ? "; " : "", cache_damage->message);
  }
out:
  tdm_scan_clear(&s);
  return pair;
}

TdmFolderSummary *
tdm_image_folder_scan(const char *folder, GError **error)
{
  g_return_val_if_fail(folder != NULL, NULL);
  TdmScan s;
  if (!tdm_scan_open(&s, folder, error)) {
    tdm_scan_clear(&s);
    return NULL;
  }
  TdmFolderSummary *sum = g_new0(TdmFolderSummary, 1);
  sum->folder = g_strdup(s.root);
  sum->split = s.split_layout;
  sum->class_count = (int)s.classes->len;
  sum->classes = g_new0(TdmFolderClass, s.classes->len + 1);
  tdm_scan_sort(&s);
  for (guint k = 0; k < s.classes->len; k++) {
    TdmFolderClass *c = &sum->classes[k];
    c->name = g_filename_display_name(g_ptr_array_index(s.classes, k));
    c->examples = g_new0(char *, TDM_FOLDER_EXAMPLES + 1);
    int shown = 0;
    for (guint i = 0; i < s.folders->len; i++) {
      const TdmScanFolder *f = &g_array_index(s.folders, TdmScanFolder, i);
      if (f->label != k)
        continue;
      c->count += (int)f->count;
      for (guint j = 0; j < f->count && shown < TDM_FOLDER_EXAMPLES; j++)
        c->examples[shown++] = tdm_scan_entry_path(&s, f, &g_array_index(s.entries, TdmScanEntry, f->first + j));
    }
    sum->files += c->count;
  }
  tdm_scan_clear(&s);
  return sum;
}

void
tdm_folder_summary_free(TdmFolderSummary *sum)
{
  if (sum == NULL)
    return;
  for (int k = 0; k < sum->class_count; k++) {
    g_free(sum->classes[k].name);
    g_strfreev(sum->classes[k].examples);
  }
  g_free(sum->classes);
  g_free(sum->folder);
  g_free(sum);
}
