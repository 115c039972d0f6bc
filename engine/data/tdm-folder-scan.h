/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-folder-scan.h — the list of an image folder's class folders and files, and the
 * key of its state (internal to engine/data).
 *
 * A scan reads each class folder once and looks at each file once (fstatat, nothing
 * opened): it is all a cached start does besides reading the cache, so it keeps little
 * per file (8 bytes and the name in one buffer) and leaves the sorting to a miss. The
 * key sums a hash of every file's folder, name, size and times, so it does not depend
 * on the order readdir gives. Not the decoding (tdm-dataset-folder.c), not the cache
 * file (tdm-image-cache.c).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The file list is kept small because it lives beside the decoded set while decoding:
 * names in one buffer, 8 bytes an entry, each folder a range of entries. For a folder
 * of 28 × 28 PNGs a list of strings and pointers was a tenth of the decoded set. */
typedef struct {
  guint32 name;          /* offset of the file's name (with its NUL) in TdmScan.names */
  guint32 slot;          /* TDM_SLOT_TEST when held out; after planning, also the index
                          * within its split; TDM_SLOT_FAILED when it could not be decoded */
} TdmScanEntry;

#define TDM_SLOT_TEST 0x80000000u
#define TDM_SLOT_FAILED 0x40000000u
#define TDM_SLOT_INDEX 0x3fffffffu

typedef struct {
  char *dir;             /* relative to the root: "cat", "train/cat" or "test/cat" */
  guint32 first, count;  /* its files: entries [first, first + count) */
  guint8 label;          /* classes are at most 256 */
  guint8 split;          /* 1 for a folder under test/ */
} TdmScanFolder;

typedef struct {
  char *root;
  gboolean split_layout;
  const char *train_part;  /* "train" when the classes sit in train/, else "" */
  GPtrArray *classes;    /* char *: class names in order */
  GArray *folders;       /* TdmScanFolder, class by class (its train folder, then its test one) */
  GArray *entries;       /* TdmScanEntry, folder by folder; in name order once sorted */
  GString *names;        /* the entries' names, NUL-separated */
  GPtrArray *bad;        /* char *: "rel (reason)" found by the scan */
  GPtrArray *empty;      /* char *: class folders without files */
  GPtrArray *unreadable; /* char *: class folders none of whose files decoded */
  GPtrArray *linked;     /* char *: class folders that are another class's folder */
  GPtrArray *dangling;   /* char *: class folders that are links to nothing (or loops) */
  /* The folder's state for the cache key: every file's folder, name, size and times
   * hashed on its own and summed, so the sum does not depend on the order readdir
   * gives and a cached start needs no sorting (two independent 64-bit lanes). */
  guint64 sum[2];
  guint64 files;
  GChecksum *key;
} TdmScan;

/* Lists `folder` (canonicalised) into s; the key (s->key) then holds the version, the
 * root, the folders and the sum. FALSE with an error naming the folder. */
gboolean tdm_scan_open (TdmScan *s, const char *folder, GError **error);
void tdm_scan_clear (TdmScan *s);

/* Each folder's files in byte order of their names: the order of the samples. */
void tdm_scan_sort (TdmScan *s);
/* Leaves out class folders without files, so labels stay dense (names in s->empty). */
void tdm_scan_drop_empty_classes (TdmScan *s);
/* Marks TDM_FOLDER_TEST_PERCENT of each class TDM_SLOT_TEST, by a seeded hash of
 * "class/name". */
void tdm_scan_split (TdmScan *s, guint64 seed);
/* Gives every file its index within its split, in folder order; counts[] per split. */
void tdm_scan_plan_slots (TdmScan *s, int counts[2]);

const char *tdm_scan_entry_name (const TdmScan *s, const TdmScanEntry *e);
char *tdm_scan_entry_rel (const TdmScan *s, const TdmScanFolder *f, const TdmScanEntry *e);
char *tdm_scan_entry_path (const TdmScan *s, const TdmScanFolder *f, const TdmScanEntry *e);
/* The folder holding entry i. */
const TdmScanFolder *tdm_scan_folder_of (const TdmScan *s, guint i);

/* Names in `dir` in byte order, hidden ones left out; folders only or not. */
GPtrArray *tdm_scan_list_names (const char *dir, gboolean folders, GError **error);
gboolean tdm_scan_is_dir (const char *root, const char *name);

G_END_DECLS
