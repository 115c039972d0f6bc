/* tdm-dataset-folder.c — a folder of class folders of images as a dataset pair
 * (tdm-dataset-folder.h).
 *
 * Three steps: a scan that lists the classes and their regular files without opening
 * any (stat only, so a FIFO or a symlink loop costs nothing; folders inside a class
 * folder are not entered, so no link can make the walk endless); a cache look-up keyed
 * by that list; on a miss, sorting the list, decoding on every core straight into the
 * datasets' buffers, then closing the gaps left by files that could not be decoded.
 * A cached start is the scan and one read: the scan is a readdir and an fstatat per
 * file and little else, which is as far as a key that must see every changed file can
 * go (a folder's own time does not change when a file in it is rewritten). Not the decoder
 * (tdm-image.c) and not the cache file (tdm-image-cache.c).
 */
/* qsort_r() */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tdm-dataset-folder.h"
#include "tdm-error.h"
#include "tdm-image.h"
#include "tdm-image-cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>

/* Bumped whenever decoding changes what a cached set would hold. */
#define FOLDER_CACHE_VERSION "tandem-image-folder-3"
/* Files named in the notice; the rest are counted. */
#define NOTICE_EXAMPLES 5
#define PROBE_FILES 64
#define DEFAULT_MAX_SIZE 64

/* The file list is kept small because it lives beside the decoded set while decoding:
 * names in one buffer, 8 bytes an entry, each folder a range of entries. For a folder
 * of 28 × 28 PNGs a list of strings and pointers was a tenth of the decoded set. */
typedef struct {
  guint32 name;          /* offset of the file's name (with its NUL) in Scan.names */
  guint32 slot;          /* SLOT_TEST when held out; after planning, also the index
                          * within its split; SLOT_FAILED when it could not be decoded */
} Entry;

#define SLOT_TEST 0x80000000u
#define SLOT_FAILED 0x40000000u
#define SLOT_INDEX 0x3fffffffu

typedef struct {
  char *dir;             /* relative to the root: "cat", "train/cat" or "test/cat" */
  guint32 first, count;  /* its files: entries [first, first + count) */
  guint8 label;          /* classes are at most 256 */
  guint8 split;          /* 1 for a folder under test/ */
} Folder;

typedef struct {
  char *root;
  gboolean split_layout;
  const char *train_part;  /* "train" when the classes sit in train/, else "" */
  GPtrArray *classes;    /* char *: class names in order */
  GArray *folders;       /* Folder, class by class (its train folder, then its test one) */
  GArray *entries;       /* Entry, folder by folder; in name order once sorted */
  GString *names;        /* the entries' names, NUL-separated */
  GPtrArray *bad;        /* char *: "rel (reason)" found by the scan */
  GPtrArray *empty;      /* char *: class folders without files */
  /* The folder's state for the cache key: every file's folder, name, size and times
   * hashed on its own and summed, so the sum does not depend on the order readdir
   * gives and a cached start needs no sorting (two independent 64-bit lanes). */
  guint64 sum[2];
  guint64 files;
  GChecksum *key;
} Scan;

static const char *
entry_name(const Scan *s, const Entry *e)
{
  return s->names->str + e->name;
}

static char *
entry_rel(const Scan *s, const Folder *f, const Entry *e)
{
  return g_strconcat(f->dir, G_DIR_SEPARATOR_S, entry_name(s, e), NULL);
}

static char *
entry_path(const Scan *s, const Folder *f, const Entry *e)
{
  return g_build_filename(s->root, f->dir, entry_name(s, e), NULL);
}

static void
folder_clear(gpointer data)
{
  g_free(((Folder *)data)->dir);
}

static void
scan_clear(Scan *s)
{
  g_free(s->root);
  g_clear_pointer(&s->classes, g_ptr_array_unref);
  g_clear_pointer(&s->folders, g_array_unref);
  g_clear_pointer(&s->entries, g_array_unref);
  if (s->names != NULL)
    g_string_free(s->names, TRUE);
  s->names = NULL;
  g_clear_pointer(&s->bad, g_ptr_array_unref);
  g_clear_pointer(&s->empty, g_ptr_array_unref);
  g_clear_pointer(&s->key, g_checksum_free);
}

static gint
compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in `dir` in byte order, hidden ones left out; folders only or not. */
static GPtrArray *
list_names(const char *dir, gboolean folders, GError **error)
{
  GError *local = NULL;
  GDir *d = g_dir_open(dir, 0, &local);
  if (d == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: cannot read the folder: %s", dir, local->message);
    g_error_free(local);
    return NULL;
  }
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL) {
    if (name[0] == '.')
      continue;
    if (folders) {
      g_autofree char *path = g_build_filename(dir, name, NULL);
      if (!g_file_test(path, G_FILE_TEST_IS_DIR))
        continue;
    }
    g_ptr_array_add(names, g_strdup(name));
  }
  g_dir_close(d);
  g_ptr_array_sort(names, compare_names);
  return names;
}

static gboolean
is_dir(const char *root, const char *name)
{
  g_autofree char *path = g_build_filename(root, name, NULL);
  return g_file_test(path, G_FILE_TEST_IS_DIR);
}

static guint64
mix64(guint64 x)
{
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Adds one file to the order-free sum: its folder, its name and, for a file that could
 * be looked at, its size, modification time and status-change time. The change time
 * is there for what keeps size and modification time: two files of one size and time
 * swapped by renaming, or a file rewritten and its time set back (touch -r). */
static void
scan_hash(Scan *s, guint32 folder, const char *name, size_t len, const struct stat *st)
{
  guint64 words[6] = {((guint64)folder << 32) | (st != NULL), len};
  int n = 2;
  if (st != NULL) {
    words[n++] = (guint64)st->st_size;
    words[n++] = ((guint64)st->st_mtim.tv_sec << 30) ^ (guint64)st->st_mtim.tv_nsec;
    words[n++] = ((guint64)st->st_ctim.tv_sec << 30) ^ (guint64)st->st_ctim.tv_nsec;
  }
  guint64 a = 0x243F6A8885A308D3ull, b = 0x13198A2E03707344ull;
  for (int i = 0; i < n; i++) {
    a = mix64(a ^ words[i]);
    b = mix64(b + words[i] * 0xA4093822299F31D1ull);
  }
  for (size_t i = 0; i < len; i += 8) {
    guint64 w = 0;
    memcpy(&w, name + i, MIN(8, len - i));
    a = mix64(a ^ w);
    b = mix64(b + w * 0xA4093822299F31D1ull);
  }
  s->sum[0] += a;
  s->sum[1] += b;
  s->files++;
}

/* Adds the regular files of one folder, unsorted (a cached start needs no order).
 * Files are looked at relative to the open folder (fstatat), which keeps the scan of
 * many thousand files from walking the whole path for each, and nothing is allocated
 * for a file beyond its name in the one buffer. */
static void
scan_class_folder(Scan *s, const char *part, const char *cls, int label, int split)
{
  Folder f = {.dir = *part ? g_build_filename(part, cls, NULL) : g_strdup(cls),
              .first = s->entries->len, .label = (guint8)label, .split = (guint8)split};
  guint32 index = s->folders->len;
  g_checksum_update(s->key, (const guchar *)f.dir, (gssize)strlen(f.dir) + 1);
  g_autofree char *path = g_build_filename(s->root, f.dir, NULL);
  DIR *d = opendir(path);
  if (d == NULL) {
    g_ptr_array_add(s->bad, g_strdup_printf("%s (cannot read the folder: %s)", f.dir,
                                            g_strerror(errno)));
    g_array_append_val(s->folders, f);
    return;
  }
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *name = de->d_name;
    if (name[0] == '.')
      continue;
    size_t len = strlen(name);
    struct stat st;
    /* stat follows links: a loop or a dangling link fails here, unopened. */
    if (fstatat(dirfd(d), name, &st, 0) != 0) {
      int saved = errno;
      g_ptr_array_add(s->bad, g_strdup_printf("%s/%s (%s)", f.dir, name, g_strerror(saved)));
      scan_hash(s, index, name, len, NULL);
      continue;
    }
    if (S_ISDIR(st.st_mode))
      continue;
    if (!S_ISREG(st.st_mode)) {
      g_ptr_array_add(s->bad, g_strdup_printf("%s/%s (not a regular file)", f.dir, name));
      scan_hash(s, index, name, len, NULL);
      continue;
    }
    scan_hash(s, index, name, len, &st);
    Entry e = {.name = (guint32)s->names->len};
    g_string_append_len(s->names, name, (gssize)len + 1);
    g_array_append_val(s->entries, e);
  }
  closedir(d);
  f.count = s->entries->len - f.first;
  g_array_append_val(s->folders, f);
}

static gboolean
scan_folder(Scan *s, const char *folder, GError **error)
{
  memset(s, 0, sizeof *s);
  if (g_path_is_absolute(folder)) {
    s->root = g_canonicalize_filename(folder, NULL);
  } else {
    g_autofree char *cwd = g_get_current_dir();
    s->root = g_canonicalize_filename(folder, cwd);
  }
  s->bad = g_ptr_array_new_with_free_func(g_free);
  s->empty = g_ptr_array_new_with_free_func(g_free);
  s->key = g_checksum_new(G_CHECKSUM_SHA256);
  s->folders = g_array_new(FALSE, FALSE, sizeof(Folder));
  g_array_set_clear_func(s->folders, folder_clear);
  s->entries = g_array_new(FALSE, FALSE, sizeof(Entry));
  s->names = g_string_new(NULL);
  g_checksum_update(s->key, (const guchar *)FOLDER_CACHE_VERSION, -1);
  g_checksum_update(s->key, (const guchar *)s->root, (gssize)strlen(s->root) + 1);

  s->split_layout = is_dir(s->root, "train") && is_dir(s->root, "test");
  /* A train/ without a test/ holds the classes, and a share is held out of them. */
  s->train_part = is_dir(s->root, "train") ? "train" : "";
  g_autofree char *class_root = g_build_filename(s->root, s->train_part, NULL);
  s->classes = list_names(class_root, TRUE, error);
  if (s->classes == NULL)
    return FALSE;
  if (s->classes->len > 256) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: %u class folders; at most 256 classes are supported", class_root,
                s->classes->len);
    return FALSE;
  }
  if (s->split_layout) {
    g_autofree char *test_root = g_build_filename(s->root, "test", NULL);
    g_autoptr(GPtrArray) test_classes = list_names(test_root, TRUE, error);
    if (test_classes == NULL)
      return FALSE;
    for (guint i = 0; i < test_classes->len; i++) {
      const char *name = g_ptr_array_index(test_classes, i);
      if (!g_ptr_array_find_with_equal_func(s->classes, name, g_str_equal, NULL)) {
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                    "%s/test/%s: a class that train/ does not have", s->root, name);
        return FALSE;
      }
    }
  }
  for (guint k = 0; k < s->classes->len; k++) {
    const char *cls = g_ptr_array_index(s->classes, k);
    scan_class_folder(s, s->train_part, cls, (int)k, 0);
    if (s->split_layout) {
      g_autofree char *test_dir = g_build_filename(s->root, "test", cls, NULL);
      if (g_file_test(test_dir, G_FILE_TEST_IS_DIR))
        scan_class_folder(s, "test", cls, (int)k, 1);
    }
  }
  guint64 tail[3] = {s->sum[0], s->sum[1], s->files};
  g_checksum_update(s->key, (const guchar *)tail, sizeof tail);
  return TRUE;
}

static int
compare_entries(const void *a, const void *b, void *data)
{
  const char *names = data;
  return strcmp(names + ((const Entry *)a)->name, names + ((const Entry *)b)->name);
}

/* Puts each folder's files in byte order of their names: the order of the samples. */
static void
scan_sort(Scan *s)
{
  for (guint i = 0; i < s->folders->len; i++) {
    Folder *f = &g_array_index(s->folders, Folder, i);
    qsort_r(&g_array_index(s->entries, Entry, f->first), f->count, sizeof(Entry),
            compare_entries, s->names->str);
  }
}

/* Leaves out class folders without files, so labels stay dense. */
static void
drop_empty_classes(Scan *s)
{
  guint classes = s->classes->len;
  g_autofree guint32 *files = g_new0(guint32, classes);
  for (guint i = 0; i < s->folders->len; i++) {
    Folder *f = &g_array_index(s->folders, Folder, i);
    files[f->label] += f->count;
  }
  g_autofree int *relabel = g_new(int, classes);
  int kept = 0;
  for (guint k = 0; k < classes; k++)
    relabel[k] = files[k] > 0 ? kept++ : -1;
  for (guint i = s->folders->len; i-- > 0;) {
    Folder *f = &g_array_index(s->folders, Folder, i);
    if (relabel[f->label] < 0)
      g_array_remove_index(s->folders, i);   /* no entries: no range moves */
    else
      f->label = (guint8)relabel[f->label];
  }
  for (guint k = classes; k-- > 0;)
    if (relabel[k] < 0) {
      g_ptr_array_add(s->empty, g_strdup(g_ptr_array_index(s->classes, k)));
      g_ptr_array_remove_index(s->classes, k);
    }
}

/* Holds out TDM_FOLDER_TEST_PERCENT of each class (at least one where a class has two
 * files): those whose seeded hash of "class/name" ranks lowest, so adding a file
 * moves no other file across the split. Without test/ a class is one folder. */
typedef struct {
  guint64 rank;
  Entry *entry;
} Ranked;

static gint
compare_ranked(gconstpointer a, gconstpointer b)
{
  guint64 x = ((const Ranked *)a)->rank, y = ((const Ranked *)b)->rank;
  return x < y ? -1 : x > y;
}

static void
split_classes(Scan *s, guint64 seed)
{
  for (guint k = 0; k < s->folders->len; k++) {
    Folder *f = &g_array_index(s->folders, Folder, k);
    int n = (int)f->count;
    int hold = n >= 2 ? MAX(1, (n * TDM_FOLDER_TEST_PERCENT + 50) / 100) : 0;
    g_autofree Ranked *ranked = g_new(Ranked, MAX(n, 1));
    guint64 base = seed;
    for (const char *p = f->dir; *p; p++)
      base = mix64(base ^ (guint8)*p);
    base = mix64(base ^ (guint8)'/');
    for (int i = 0; i < n; i++) {
      Entry *e = &g_array_index(s->entries, Entry, f->first + i);
      guint64 h = base;
      for (const char *p = entry_name(s, e); *p; p++)
        h = mix64(h ^ (guint8)*p);
      ranked[i] = (Ranked){h, e};
    }
    qsort(ranked, n, sizeof *ranked, (int (*)(const void *, const void *))compare_ranked);
    for (int i = 0; i < hold; i++)
      ranked[i].entry->slot |= SLOT_TEST;
  }
}

static gint
compare_ints(gconstpointer a, gconstpointer b)
{
  int x = *(const int *)a, y = *(const int *)b;
  return x < y ? -1 : x > y;
}

/* Picks the size and colour left at 0 from a few headers spread over the folder. */
static void
resolve_options(Scan *s, TdmImageOptions *o)
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
    while (i >= g_array_index(s->folders, Folder, folder).first +
                    g_array_index(s->folders, Folder, folder).count)
      folder++;
    TdmImageInfo info;
    g_autofree char *path = entry_path(s, &g_array_index(s->folders, Folder, folder),
                                       &g_array_index(s->entries, Entry, i));
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
    } else if (same && first_w == first_h && first_w <= DEFAULT_MAX_SIZE) {
      o->size = MAX(first_w, TDM_FOLDER_MIN_SIZE);
    } else {
      g_array_sort(sides, compare_ints);
      const int *v = (const int *)sides->data;
      int median = v[sides->len / 2];
      o->size = CLAMP(median, TDM_FOLDER_MIN_SIZE, DEFAULT_MAX_SIZE);
    }
  }
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
  const Scan *scan;
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

/* The folder holding entry i (folders are few; their ranges are in order). */
static const Folder *
folder_of(const Scan *s, guint i)
{
  guint lo = 0, hi = s->folders->len - 1;
  while (lo < hi) {
    guint mid = (lo + hi + 1) / 2;
    if (g_array_index(s->folders, Folder, mid).first <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  return &g_array_index(s->folders, Folder, lo);
}

static void
work_one(Work *w, guint i)
{
  const Scan *s = w->scan;
  Entry *e = &g_array_index(s->entries, Entry, i);
  const Folder *f = folder_of(s, i);
  TdmDataset *d = w->sets[(e->slot & SLOT_TEST) != 0];
  uint8_t *out = d->images + (size_t)(e->slot & SLOT_INDEX) * tdm_dataset_sample_size(d);
  GError *local = NULL;
  char path[PATH_MAX];
  g_snprintf(path, sizeof path, "%s" G_DIR_SEPARATOR_S "%s" G_DIR_SEPARATOR_S "%s", s->root,
             f->dir, entry_name(s, e));
  if (!tdm_image_load(path, w->size, w->channels, out, &local)) {
    /* Only this thread writes this entry; the others read other entries. */
    e->slot |= SLOT_FAILED;
    g_autofree char *rel = entry_rel(s, f, e);
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

/* Gives every file its index within its split, in folder order. */
static void
plan_slots(Scan *s, int counts[2])
{
  counts[0] = counts[1] = 0;
  for (guint k = 0; k < s->folders->len; k++) {
    const Folder *f = &g_array_index(s->folders, Folder, k);
    for (guint i = f->first; i < f->first + f->count; i++) {
      Entry *e = &g_array_index(s->entries, Entry, i);
      int split = f->split || (e->slot & SLOT_TEST) ? 1 : 0;
      e->slot = (split ? SLOT_TEST : 0) | (guint32)counts[split]++;
    }
  }
}

/* Moves the decoded samples over the gaps of the failed ones and sets the labels. */
static void
compact(const Scan *s, TdmDataset *d, int split)
{
  size_t sample = (size_t)tdm_dataset_sample_size(d);
  int kept = 0;
  for (guint k = 0; k < s->folders->len; k++) {
    const Folder *f = &g_array_index(s->folders, Folder, k);
    for (guint i = f->first; i < f->first + f->count; i++) {
      const Entry *e = &g_array_index(s->entries, Entry, i);
      if (((e->slot & SLOT_TEST) != 0) != split || (e->slot & SLOT_FAILED))
        continue;
      int index = (int)(e->slot & SLOT_INDEX);
      if (kept != index)
        memmove(d->images + (size_t)kept * sample, d->images + (size_t)index * sample, sample);
      d->labels[kept] = f->label;
      kept++;
    }
  }
  d->count = kept;
}

static char *
build_notice(Scan *s, GPtrArray *decode_failed)
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
  if (is_dir(folder, "train") && is_dir(folder, "test"))
    return TRUE;
  /* The window asks on its main loop: read one name of each class folder, not all. */
  g_autoptr(GPtrArray) classes = list_names(folder, TRUE, NULL);
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
  if (o->size != 0 && (o->size < TDM_FOLDER_MIN_SIZE || o->size > TDM_FOLDER_MAX_SIZE)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                "--image-size %d is outside %d…%d", o->size, TDM_FOLDER_MIN_SIZE,
                TDM_FOLDER_MAX_SIZE);
    return FALSE;
  }
  if (o->channels != 0 && o->channels != 1 && o->channels != 3) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                "--color: %d channels; expected grey (1) or rgb (3)", o->channels);
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

  Scan s;
  if (!scan_folder(&s, folder, error)) {
    scan_clear(&s);
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

  if (!asked.no_cache) {
    pair = tdm_image_cache_read(cache, key);
    if (pair != NULL) {
      if (progress != NULL)
        progress(1, 1, user_data);
      goto out;
    }
  }

  scan_sort(&s);
  drop_empty_classes(&s);
  if (s.classes->len < 2) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: needs at least two class folders holding images; found %u%s", s.root,
                s.classes->len,
                s.classes->len == 1 ? " (every image would get the same label)" : "");
    goto out;
  }
  if (!s.split_layout)
    split_classes(&s, asked.seed);
  TdmImageOptions o = asked;
  resolve_options(&s, &o);

  int counts[2];
  plan_slots(&s, counts);
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
                "%s: loading was cancelled", s.root);
    tdm_dataset_free(w.sets[0]);
    tdm_dataset_free(w.sets[1]);
    goto out;
  }
  compact(&s, w.sets[0], 0);
  compact(&s, w.sets[1], 1);

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
                "%s: needs at least two classes with images that can be read; %d %s%s%s%s",
                s.root, usable, usable == 1 ? "has" : "have",
                pair->notice != NULL ? " (" : "", pair->notice != NULL ? pair->notice : "",
                pair->notice != NULL ? ")" : "");
    g_clear_pointer(&pair, tdm_dataset_pair_free);
    goto out;
  }
  if (pair->test->count == 0) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: too few images to hold out a test split (add a test/ folder or more "
                "images per class)",
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
out:
  scan_clear(&s);
  return pair;
}

TdmFolderSummary *
tdm_image_folder_scan(const char *folder, GError **error)
{
  g_return_val_if_fail(folder != NULL, NULL);
  Scan s;
  if (!scan_folder(&s, folder, error)) {
    scan_clear(&s);
    return NULL;
  }
  TdmFolderSummary *sum = g_new0(TdmFolderSummary, 1);
  sum->folder = g_strdup(s.root);
  sum->split = s.split_layout;
  sum->class_count = (int)s.classes->len;
  sum->classes = g_new0(TdmFolderClass, s.classes->len + 1);
  scan_sort(&s);
  for (guint k = 0; k < s.classes->len; k++) {
    TdmFolderClass *c = &sum->classes[k];
    c->name = g_filename_display_name(g_ptr_array_index(s.classes, k));
    c->examples = g_new0(char *, TDM_FOLDER_EXAMPLES + 1);
    int shown = 0;
    for (guint i = 0; i < s.folders->len; i++) {
      const Folder *f = &g_array_index(s.folders, Folder, i);
      if (f->label != k)
        continue;
      c->count += (int)f->count;
      for (guint j = 0; j < f->count && shown < TDM_FOLDER_EXAMPLES; j++)
        c->examples[shown++] = entry_path(&s, f, &g_array_index(s.entries, Entry, f->first + j));
    }
    sum->files += c->count;
  }
  scan_clear(&s);
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
