/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dataset.h — labelled image sets held in memory as uint8.
 *
 * A TdmDataset is one split (train or test): count images of height × width ×
 * channels bytes in HWC order, and one uint8 label per image in [0, classes).
 * Loaders check every header field against the file size before trusting it and
 * name the file and the field in their errors. Not an iterator (tdm-iterator.h).
 */
#pragma once

#include <gio/gio.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef struct {
  char *name;            /* "fashion-mnist (train)" and the like */
  int count;
  int height, width, channels;
  int classes;
  uint8_t *images;       /* count × sample_size bytes, HWC */
  uint8_t *labels;       /* count bytes */
  char **class_names;    /* classes entries, or NULL */
} TdmDataset;

static inline int
tdm_dataset_sample_size (const TdmDataset *d)
{
  return d->height * d->width * d->channels;
}

/* A pair of splits as the trainer uses them. */
typedef struct {
  char *name;            /* "fashion-mnist", "mnist", "cifar10", "synthetic" */
  char *source;          /* the folder it came from, or NULL for built-in */
  TdmDataset *train;
  TdmDataset *test;
  char *notice;          /* what was skipped while loading ("3 of 12,040 files could
                          * not be read: …"), or NULL */
} TdmDatasetPair;

/* Opens a dataset by name or path:
 * - "fashion-mnist" (the Debian package's folder), "mnist" (folder given by
 *   TANDEM_MNIST_DIR or /usr/share/datasets/mnist), "synthetic" (built in);
 * - a folder holding IDX files (train-images-idx3-ubyte[.gz] …) or CIFAR-10 binary
 *   batches (data_batch_1.bin … test_batch.bin, also inside cifar-10-batches-bin/);
 * - a folder of class folders of PNG and JPEG images (tdm-dataset-folder.h), decoded
 *   with the default size and colour. */
TdmDatasetPair *tdm_dataset_open (const char *name_or_path, GError **error);

/* Whether a built-in name ("fashion-mnist", "mnist", "synthetic") can be opened on
 * this machine: its files are where tdm_dataset_open() looks (checked cheaply, by
 * their presence). FALSE for anything else. For offering only what is there. */
gboolean tdm_dataset_is_installed (const char *name);

/* The folder a dataset setting names, as an absolute path (~ expanded, a relative
 * path taken from the current folder), or NULL for a built-in name ("fashion-mnist",
 * "mnist", "synthetic"): what a checkpoint records to find its dataset again. */
char *tdm_dataset_folder_path (const char *name_or_path);

/* How image folders are read; other formats ignore it. */
typedef struct {
  int size;            /* side of the square samples; 0: chosen from the images */
  int channels;        /* 1 grey, 3 RGB; 0: grey when every image is grey */
  guint64 seed;        /* of the held-out split */
  gboolean no_cache;   /* neither read nor write the cache */
  GCancellable *cancellable;  /* stops decoding (tdm_dataset_open_with); may be NULL */
  /* Told, on the loading thread, of the files decoded so far (tdm_dataset_open_with);
   * may be NULL. */
  void (*progress) (int done, int total, gpointer user_data);
  gpointer progress_data;
} TdmImageOptions;

/* The same, with the size, colour and split of image folders given (NULL: defaults). */
TdmDatasetPair *tdm_dataset_open_with (const char *name_or_path,
                                       const TdmImageOptions *image_options,
                                       GError **error);
void tdm_dataset_pair_free (TdmDatasetPair *pair);

/* The individual loaders. */
TdmDataset *tdm_dataset_load_idx (const char *images_path, const char *labels_path,
                                  const char *name, GError **error);
TdmDatasetPair *tdm_dataset_load_idx_folder (const char *folder, GError **error);
TdmDatasetPair *tdm_dataset_load_cifar10_folder (const char *folder, GError **error);
/* A learnable but not trivial set of 10 classes of 28×28 grey images, made from seed. */
TdmDatasetPair *tdm_dataset_synthetic (guint64 seed, int train_count, int test_count);

TdmDataset *tdm_dataset_new (const char *name, int count, int height, int width,
                             int channels, int classes);
/* As tdm_dataset_new, but takes images (count × sample size bytes) and labels (count
 * bytes), both from g_malloc, instead of allocating them: a loader that has read the
 * data in growing steps hands it over without a copy. */
TdmDataset *tdm_dataset_new_take (const char *name, int count, int height, int width,
                                  int channels, int classes, uint8_t *images,
                                  uint8_t *labels);
void tdm_dataset_free (TdmDataset *d);

/* Where the default dataset lives. */
#define TDM_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmDataset, tdm_dataset_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmDatasetPair, tdm_dataset_pair_free)

G_END_DECLS
