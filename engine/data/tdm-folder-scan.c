/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-folder-scan.c — listing an image folder and keying its state (tdm-folder-scan.h).
 *
 * Measured on 20,000 files in ten class folders (bench-images): a readdir and an
 * fstatat per file are nine tenths of a cached start, and nothing here can go below
 * them while every rewritten file must change the key (a folder's own time does not
 * change when a file in it is rewritten in place). Not the decoding.
 */
/* qsort_r() */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tdm-folder-scan.h"
#include "tdm-i18n.h"
#include "tdm-dataset-folder.h"
#include "tdm-error.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Bumped whenever decoding changes what a cached set would hold. */
#define FOLDER_CACHE_VERSION "tandem-image-folder-3"

const char *
tdm_scan_entry_name(const TdmScan *s, const TdmScanEntry *e)
{
  return s->names->str + e->name;
}

char *
tdm_scan_entry_rel(const TdmScan *s, const TdmScanFolder *f, const TdmScanEntry *e)
{
  return g_strconcat(f->dir, G_DIR_SEPARATOR_S, tdm_scan_entry_name(s, e), NULL);
}

char *
tdm_scan_entry_path(const TdmScan *s, const TdmScanFolder *f, const TdmScanEntry *e)
{
  return g_build_filename(s->root, f->dir, tdm_scan_entry_name(s, e), NULL);
}

static void
folder_clear(gpointer data)
{
  g_free(((TdmScanFolder *)data)->dir);
}

void
tdm_scan_clear(TdmScan *s)
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
  g_clear_pointer(&s->unreadable, g_ptr_array_unref);
  g_clear_pointer(&s->linked, g_ptr_array_unref);
  g_clear_pointer(&s->dangling, g_ptr_array_unref);
  g_clear_pointer(&s->key, g_checksum_free);
}

static gint
compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in `dir` in byte order, hidden ones left out; folders only or not. */
GPtrArray *
tdm_scan_list_names(const char *dir, gboolean folders, GError **error)
{
  GError *local = NULL;
  GDir *d = g_dir_open(dir, 0, &local);
  if (d == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: cannot read the folder: %s"), dir, local->message);
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

gboolean
tdm_scan_is_dir(const char *root, const char *name)
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
scan_hash(TdmScan *s, guint32 folder, const char *name, size_t len, const struct stat *st)
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
scan_class_folder(TdmScan *s, const char *part, const char *cls, int label, int split)
{
  TdmScanFolder f = {.dir = *part ? g_build_filename(part, cls, NULL) : g_strdup(cls),
                     .first = s->entries->len, .label = (guint8)label,
                     .split = (guint8)split};
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
    TdmScanEntry e = {.name = (guint32)s->names->len};
    g_string_append_len(s->names, name, (gssize)len + 1);
    g_array_append_val(s->entries, e);
  }
  closedir(d);
  f.count = s->entries->len - f.first;
  g_array_append_val(s->folders, f);
}

/* A link to another class's folder would be a second class of the same images, each
 * image with two labels: the first name (in byte order) keeps it. */
static void
drop_linked_classes(TdmScan *s, const char *class_root)
{
  g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(guint64) * 2);
  for (guint k = 0; k < s->classes->len;) {
    g_autofree char *dir = g_build_filename(class_root, g_ptr_array_index(s->classes, k), NULL);
    struct stat st;
    guint64 id[2] = {0, 0};
    gboolean twin = FALSE;
    if (stat(dir, &st) == 0) {
      id[0] = (guint64)st.st_dev;
      id[1] = (guint64)st.st_ino;
      for (guint j = 0; j < ids->len && !twin; j++)
        twin = memcmp(&g_array_index(ids, guint64, 2 * j), id, sizeof id) == 0;
    }
    if (twin) {
      g_ptr_array_add(s->linked, g_strdup(g_ptr_array_index(s->classes, k)));
      g_ptr_array_remove_index(s->classes, k);
      continue;
    }
    g_array_append_vals(ids, id, 1);
    k++;
  }
}

/* A class folder that is a link to nothing is no folder to list: it would be left out
 * as if it were a stray file. Named instead. */
static void
note_dangling_classes(TdmScan *s, const char *class_root)
{
  GDir *d = g_dir_open(class_root, 0, NULL);
  if (d == NULL)
    return;
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL) {
    if (name[0] == '.')
      continue;
    g_autofree char *path = g_build_filename(class_root, name, NULL);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && stat(path, &st) != 0)
      g_ptr_array_add(s->dangling, g_strdup(name));
  }
  g_dir_close(d);
  g_ptr_array_sort(s->dangling, compare_names);
}

gboolean
tdm_scan_open(TdmScan *s, const char *folder, GError **error)
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
  s->unreadable = g_ptr_array_new_with_free_func(g_free);
  s->linked = g_ptr_array_new_with_free_func(g_free);
  s->dangling = g_ptr_array_new_with_free_func(g_free);
  s->key = g_checksum_new(G_CHECKSUM_SHA256);
  s->folders = g_array_new(FALSE, FALSE, sizeof(TdmScanFolder));
  g_array_set_clear_func(s->folders, folder_clear);
  s->entries = g_array_new(FALSE, FALSE, sizeof(TdmScanEntry));
  s->names = g_string_new(NULL);
  g_checksum_update(s->key, (const guchar *)FOLDER_CACHE_VERSION, -1);
  g_checksum_update(s->key, (const guchar *)s->root, (gssize)strlen(s->root) + 1);

  s->split_layout = tdm_scan_is_dir(s->root, "train") && tdm_scan_is_dir(s->root, "test");
  /* test/ alone would be read as one class named "test". */
  if (!s->split_layout && tdm_scan_is_dir(s->root, "test") &&
      !tdm_scan_is_dir(s->root, "train")) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: has a test/ folder but no train/: put the training images in "
                "train/CLASS/… beside test/CLASS/…, or the class folders directly in it"),
                s->root);
    return FALSE;
  }
  /* A train/ without a test/ holds the classes, and a share is held out of them. */
  s->train_part = tdm_scan_is_dir(s->root, "train") ? "train" : "";
  g_autofree char *class_root = g_build_filename(s->root, s->train_part, NULL);
  s->classes = tdm_scan_list_names(class_root, TRUE, error);
  if (s->classes == NULL)
    return FALSE;
  drop_linked_classes(s, class_root);
  note_dangling_classes(s, class_root);
  if (s->classes->len > 256) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: %u class folders; at most 256 classes are supported"), class_root,
                s->classes->len);
    return FALSE;
  }
  if (s->split_layout) {
    g_autofree char *test_root = g_build_filename(s->root, "test", NULL);
    g_autoptr(GPtrArray) test_classes = tdm_scan_list_names(test_root, TRUE, error);
    if (test_classes == NULL)
      return FALSE;
    for (guint i = 0; i < test_classes->len; i++) {
      const char *name = g_ptr_array_index(test_classes, i);
      if (!g_ptr_array_find_with_equal_func(s->classes, name, g_str_equal, NULL) &&
          !g_ptr_array_find_with_equal_func(s->linked, name, g_str_equal, NULL)) {
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                    _("%s/test/%s: a class that train/ does not have"), s->root, name);
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
  return strcmp(names + ((const TdmScanEntry *)a)->name, names + ((const TdmScanEntry *)b)->name);
}

/* Puts each folder's files in byte order of their names: the order of the samples. */
void
tdm_scan_sort(TdmScan *s)
{
  for (guint i = 0; i < s->folders->len; i++) {
    TdmScanFolder *f = &g_array_index(s->folders, TdmScanFolder, i);
    qsort_r(&g_array_index(s->entries, TdmScanEntry, f->first), f->count, sizeof(TdmScanEntry),
            compare_entries, s->names->str);
  }
}

/* Leaves out class folders without files, so labels stay dense. */
void
tdm_scan_drop_empty_classes(TdmScan *s)
{
  guint classes = s->classes->len;
  g_autofree guint32 *files = g_new0(guint32, classes);
  for (guint i = 0; i < s->folders->len; i++) {
    TdmScanFolder *f = &g_array_index(s->folders, TdmScanFolder, i);
    files[f->label] += f->count;
  }
  g_autofree int *relabel = g_new(int, classes);
  int kept = 0;
  for (guint k = 0; k < classes; k++)
    relabel[k] = files[k] > 0 ? kept++ : -1;
  for (guint i = s->folders->len; i-- > 0;) {
    TdmScanFolder *f = &g_array_index(s->folders, TdmScanFolder, i);
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
  TdmScanEntry *entry;
} Ranked;

static gint
compare_ranked(gconstpointer a, gconstpointer b)
{
  guint64 x = ((const Ranked *)a)->rank, y = ((const Ranked *)b)->rank;
  return x < y ? -1 : x > y;
}

void
tdm_scan_split(TdmScan *s, guint64 seed)
{
  for (guint k = 0; k < s->folders->len; k++) {
    TdmScanFolder *f = &g_array_index(s->folders, TdmScanFolder, k);
    int n = (int)f->count;
    int hold = n >= 2 ? MAX(1, (n * TDM_FOLDER_TEST_PERCENT + 50) / 100) : 0;
    g_autofree Ranked *ranked = g_new(Ranked, MAX(n, 1));
    guint64 base = seed;
    for (const char *p = f->dir; *p; p++)
      base = mix64(base ^ (guint8)*p);
    base = mix64(base ^ (guint8)'/');
    for (int i = 0; i < n; i++) {
      TdmScanEntry *e = &g_array_index(s->entries, TdmScanEntry, f->first + i);
      guint64 h = base;
      for (const char *p = tdm_scan_entry_name(s, e); *p; p++)
        h = mix64(h ^ (guint8)*p);
      ranked[i] = (Ranked){h, e};
    }
    qsort(ranked, n, sizeof *ranked, (int (*)(const void *, const void *))compare_ranked);
    for (int i = 0; i < hold; i++)
      ranked[i].entry->slot |= TDM_SLOT_TEST;
  }
}

/* The folder holding entry i (folders are few; their ranges are in order): the last
 * one starting at or before i, since an empty folder starts where the next begins. */
const TdmScanFolder *
tdm_scan_folder_of(const TdmScan *s, guint i)
{
  g_return_val_if_fail(i < s->entries->len && s->folders->len > 0, NULL);
  guint lo = 0, hi = s->folders->len - 1;
  while (lo < hi) {
    guint mid = (lo + hi + 1) / 2;
    if (g_array_index(s->folders, TdmScanFolder, mid).first <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  return &g_array_index(s->folders, TdmScanFolder, lo);
}

/* Gives every file its index within its split, in folder order. */
void
tdm_scan_plan_slots(TdmScan *s, int counts[2])
{
  counts[0] = counts[1] = 0;
  for (guint k = 0; k < s->folders->len; k++) {
    const TdmScanFolder *f = &g_array_index(s->folders, TdmScanFolder, k);
    for (guint i = f->first; i < f->first + f->count; i++) {
      TdmScanEntry *e = &g_array_index(s->entries, TdmScanEntry, i);
      int split = f->split || (e->slot & TDM_SLOT_TEST) ? 1 : 0;
      e->slot = (split ? TDM_SLOT_TEST : 0) | (guint32)counts[split]++;
    }
  }
}

