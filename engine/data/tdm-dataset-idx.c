/* tdm-dataset-idx.c — the IDX reader (MNIST, Fashion-MNIST and their kin), raw or
 * gzipped, read through GIO. Every header field is checked against what the file
 * can hold before a buffer is sized from it, so a damaged or hostile file gives an
 * error naming the file and the field, never a huge allocation or a crash. Only
 * unsigned-byte images of rank 3 and labels of rank 1 are read; other IDX element
 * types are refused. Not a writer. */
#include "tdm-dataset.h"
#include "tdm-error.h"

#include <gio/gio.h>
#include <string.h>

#define TDM_IDX_MAGIC_IMAGES 0x00000803u
#define TDM_IDX_MAGIC_LABELS 0x00000801u
#define TDM_IDX_TYPE_UBYTE 0x08u
#define TDM_IDX_MAX_SIDE 4096u
/* deflate cannot expand data by more than about 1032:1, so a gzip file promising
 * more than this ratio is truncated or lying, and is refused before allocating. */
#define TDM_IDX_MAX_GZIP_RATIO 1100u

typedef struct {
  const char *path;
  GInputStream *stream; /* raw file, or the inflating stream over it */
  guint64 file_size;    /* bytes on disk */
  gboolean gzip;
  guint64 consumed; /* uncompressed bytes read so far */
} TdmIdxFile;

typedef struct {
  guint32 magic;
  guint32 dims[3];
  int rank;
} TdmIdxHeader;

static const char *const tdm_fashion_mnist_names[] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot",
};

static void
tdm_idx_file_close(TdmIdxFile *f)
{
  g_clear_object(&f->stream);
}

static gboolean
tdm_idx_file_open(TdmIdxFile *f, const char *path, GError **error)
{
  memset(f, 0, sizeof *f);
  f->path = path;

  g_autoptr(GFile) file = g_file_new_for_path(path);
  GError *local = NULL;
  g_autoptr(GFileInputStream) in = g_file_read(file, NULL, &local);
  if (in == NULL) {
    if (g_error_matches(local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET, "%s: missing file", path);
    else
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET, "%s: cannot read: %s",
                  path, local->message);
    g_error_free(local);
    return FALSE;
  }

  g_autoptr(GFileInfo) info =
      g_file_input_stream_query_info(in, G_FILE_ATTRIBUTE_STANDARD_SIZE, NULL, &local);
  if (info == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: cannot read its size: %s", path, local->message);
    g_error_free(local);
    return FALSE;
  }
  f->file_size = (guint64)g_file_info_get_size(info);

  guint8 magic[2] = {0, 0};
  gsize got = 0;
  if (!g_input_stream_read_all(G_INPUT_STREAM(in), magic, sizeof magic, &got, NULL, &local) ||
      !g_seekable_seek(G_SEEKABLE(in), 0, G_SEEK_SET, NULL, &local)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET, "%s: cannot read: %s", path,
                local->message);
    g_error_free(local);
    return FALSE;
  }

  /* Sniffed rather than taken from the name: downloads get renamed, and some
   * tools inflate the file but keep ".gz". */
  f->gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  if (f->gzip) {
    g_autoptr(GZlibDecompressor) inflater =
        g_zlib_decompressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP);
    f->stream = g_converter_input_stream_new(G_INPUT_STREAM(in), G_CONVERTER(inflater));
  } else {
    f->stream = G_INPUT_STREAM(g_object_ref(in));
  }
  return TRUE;
}

/* Reads up to `bytes`; a short count means the end of the data. */
static gboolean
tdm_idx_file_read(TdmIdxFile *f, void *buffer, gsize bytes, gsize *got, GError **error)
{
  GError *local = NULL;
  *got = 0;
  gboolean ok = g_input_stream_read_all(f->stream, buffer, bytes, got, NULL, &local);
  f->consumed += *got;
  if (!ok) {
    /* A cut-off download ends the deflate stream early: say so, not "bad data". */
    if (f->gzip && g_error_matches(local, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT))
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  "%s: truncated gzip data: the compressed stream ends after %" G_GUINT64_FORMAT
                  " uncompressed bytes",
                  f->path, f->consumed);
    else if (f->gzip)
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  "%s: damaged gzip data after %" G_GUINT64_FORMAT " uncompressed bytes: %s",
                  f->path, f->consumed, local->message);
    else
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET, "%s: cannot read: %s",
                  f->path, local->message);
    g_error_free(local);
  }
  return ok;
}

static const char *
tdm_idx_type_name(guint type)
{
  switch (type) {
  case 0x08:
    return "unsigned byte";
  case 0x09:
    return "signed byte";
  case 0x0B:
    return "short";
  case 0x0C:
    return "int";
  case 0x0D:
    return "float";
  case 0x0E:
    return "double";
  default:
    return "unknown";
  }
}

static gboolean
tdm_idx_read_header(TdmIdxFile *f, gboolean images, TdmIdxHeader *h, GError **error)
{
  const char *kind = images ? "images" : "labels";
  const guint32 want_magic = images ? TDM_IDX_MAGIC_IMAGES : TDM_IDX_MAGIC_LABELS;
  const int rank = images ? 3 : 1;
  const gsize header_bytes = 4 + 4 * (gsize)rank;
  const char *packed = f->gzip ? " once inflated" : "";

  guint8 raw[16];
  gsize got = 0;
  if (!tdm_idx_file_read(f, raw, 4, &got, error))
    return FALSE;
  if (got < 4) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: truncated header: the file holds %" G_GSIZE_FORMAT " bytes%s, an IDX "
                "header needs at least 4",
                f->path, got, packed);
    return FALSE;
  }
  h->magic = (guint32)raw[0] << 24 | (guint32)raw[1] << 16 | (guint32)raw[2] << 8 | raw[3];
  h->rank = raw[3];

  if (raw[0] != 0 || raw[1] != 0 || raw[3] != rank) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: wrong magic number 0x%08X: IDX %s start with 0x%08X (unsigned bytes, "
                "%d dimension%s)",
                f->path, h->magic, kind, want_magic, rank, rank == 1 ? "" : "s");
    return FALSE;
  }
  if (raw[2] != TDM_IDX_TYPE_UBYTE) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: element type 0x%02X (%s) in magic number 0x%08X is not supported: "
                "Tandem reads IDX %s of unsigned bytes (0x08)",
                f->path, raw[2], tdm_idx_type_name(raw[2]), h->magic, kind);
    return FALSE;
  }

  if (!tdm_idx_file_read(f, raw + 4, header_bytes - 4, &got, error))
    return FALSE;
  if (got < header_bytes - 4) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: truncated header: %d dimension%s need %" G_GSIZE_FORMAT
                " header bytes but the file holds %" G_GSIZE_FORMAT "%s",
                f->path, rank, rank == 1 ? "" : "s", header_bytes, 4 + got, packed);
    return FALSE;
  }
  for (int i = 0; i < rank; i++) {
    const guint8 *p = raw + 4 + 4 * i;
    h->dims[i] = (guint32)p[0] << 24 | (guint32)p[1] << 16 | (guint32)p[2] << 8 | p[3];
  }

  if (h->dims[0] == 0 || h->dims[0] > G_MAXINT32) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: absurd %s count %u in the header (expected 1 to %d)", f->path,
                images ? "image" : "label", h->dims[0], G_MAXINT32);
    return FALSE;
  }
  if (images) {
    for (int i = 1; i < 3; i++)
      if (h->dims[i] == 0 || h->dims[i] > TDM_IDX_MAX_SIDE) {
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                    "%s: absurd image %s %u in the header (expected 1 to %u)", f->path,
                    i == 1 ? "height" : "width", h->dims[i], TDM_IDX_MAX_SIDE);
        return FALSE;
      }
  }

  /* The data size follows from the header alone; it must agree with the file. */
  guint64 sample = images ? (guint64)h->dims[1] * h->dims[2] : 1;
  guint64 data = (guint64)h->dims[0] * sample;
  guint64 expected = header_bytes + data;
  g_autofree char *what =
      images ? g_strdup_printf("%u images of %u×%u", h->dims[0], h->dims[1], h->dims[2])
             : g_strdup_printf("%u labels", h->dims[0]);
  if (!f->gzip && expected != f->file_size) {
    if (expected > f->file_size)
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  "%s: truncated: header says %s (%" G_GUINT64_FORMAT
                  " bytes after the %" G_GSIZE_FORMAT
                  "-byte header) but the file holds %" G_GUINT64_FORMAT " bytes",
                  f->path, what, data, header_bytes, f->file_size);
    else
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  "%s: %" G_GUINT64_FORMAT " bytes of trailing data after the %s the "
                  "header announces",
                  f->path, f->file_size - expected, what);
    return FALSE;
  }
  if (f->gzip && expected / TDM_IDX_MAX_GZIP_RATIO > f->file_size) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: truncated: header says %s (%" G_GUINT64_FORMAT
                " bytes) but %" G_GUINT64_FORMAT " gzipped bytes cannot hold that much",
                f->path, what, data, f->file_size);
    return FALSE;
  }
  return TRUE;
}

/* Reads the `bytes` of data the header announced, then makes sure nothing follows. */
static gboolean
tdm_idx_read_body(TdmIdxFile *f, const TdmIdxHeader *h, guint8 *out, gsize bytes,
                  GError **error)
{
  gsize got = 0;
  if (!tdm_idx_file_read(f, out, bytes, &got, error))
    return FALSE;
  if (got < bytes) {
    g_autofree char *what =
        h->rank == 3 ? g_strdup_printf("%u images of %u×%u", h->dims[0], h->dims[1], h->dims[2])
                     : g_strdup_printf("%u labels", h->dims[0]);
    g_set_error(
        error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
        "%s: truncated: header says %s (%" G_GSIZE_FORMAT
        " bytes after the %d-byte header) but the file holds %" G_GUINT64_FORMAT " bytes%s",
        f->path, what, bytes, 4 + 4 * h->rank, f->consumed, f->gzip ? " once inflated" : "");
    return FALSE;
  }
  if (f->gzip) {
    guint8 extra[256];
    gsize more = 0, total = 0;
    do {
      if (!tdm_idx_file_read(f, extra, sizeof extra, &more, error))
        return FALSE;
      total += more;
    } while (more == sizeof extra && total < 1u << 20);
    if (total > 0) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  "%s: %s%" G_GSIZE_FORMAT " bytes of trailing data once inflated, after the "
                  "%u %s the header announces",
                  f->path, more == sizeof extra ? "over " : "", total, h->dims[0],
                  h->rank == 3 ? "images" : "labels");
      return FALSE;
    }
  }
  return TRUE;
}

TdmDataset *
tdm_dataset_load_idx(const char *images_path, const char *labels_path, const char *name,
                     GError **error)
{
  g_return_val_if_fail(images_path != NULL && labels_path != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  TdmIdxFile images = {0}, labels = {0};
  TdmIdxHeader ih, lh;
  TdmDataset *d = NULL;

  /* Both headers first, so a mismatch is found before 47 MB are inflated. */
  if (!tdm_idx_file_open(&images, images_path, error) ||
      !tdm_idx_read_header(&images, TRUE, &ih, error) ||
      !tdm_idx_file_open(&labels, labels_path, error) ||
      !tdm_idx_read_header(&labels, FALSE, &lh, error))
    goto out;

  if (ih.dims[0] != lh.dims[0]) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: holds %u labels but %s holds %u images; the counts must match",
                labels_path, lh.dims[0], images_path, ih.dims[0]);
    goto out;
  }

  /* classes is known once the labels are read; until then, every uint8 label fits. */
  d = tdm_dataset_new(name, (int)ih.dims[0], (int)ih.dims[1], (int)ih.dims[2], 1, 256);
  if (!tdm_idx_read_body(&labels, &lh, d->labels, d->count, error) ||
      !tdm_idx_read_body(&images, &ih, d->images,
                         (gsize)d->count * (gsize)tdm_dataset_sample_size(d), error)) {
    g_clear_pointer(&d, tdm_dataset_free);
    goto out;
  }

  int max_label = 0;
  for (int i = 0; i < d->count; i++)
    max_label = MAX(max_label, d->labels[i]);
  d->classes = max_label + 1;
  /* A small MNIST-shaped subset may lack the top digits; it still has 10 classes,
   * so that a network built from it fits the full set. */
  if (d->height == 28 && d->width == 28 && d->classes < 10)
    d->classes = 10;

out:
  tdm_idx_file_close(&images);
  tdm_idx_file_close(&labels);
  return d;
}

/* Finds base or base.gz in folder; the raw file wins when both are there, since it
 * loads faster and is most likely the one the person inflated on purpose. */
static char *
tdm_idx_find(const char *folder, const char *base, GError **error)
{
  g_autofree char *raw = g_build_filename(folder, base, NULL);
  if (g_file_test(raw, G_FILE_TEST_EXISTS))
    return g_steal_pointer(&raw);
  g_autofree char *gz = g_strconcat(raw, ".gz", NULL);
  if (g_file_test(gz, G_FILE_TEST_EXISTS))
    return g_steal_pointer(&gz);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
              "%s: missing file: neither %s nor %s.gz is there", folder, base, base);
  return NULL;
}

static char **
tdm_idx_class_names(const char *kind, int classes)
{
  char **names = g_new0(char *, classes + 1);
  if (g_str_equal(kind, "fashion-mnist") && classes == 10) {
    for (int i = 0; i < classes; i++)
      names[i] = g_strdup(tdm_fashion_mnist_names[i]);
  } else {
    /* MNIST's classes are the digits themselves; for unknown sets a number is
     * the honest name. */
    for (int i = 0; i < classes; i++)
      names[i] = g_strdup_printf("%d", i);
  }
  return names;
}

static gboolean
tdm_idx_check_labels(const TdmDataset *d, const char *labels_path, int classes, const char *why,
                     GError **error)
{
  for (int i = 0; i < d->count; i++)
    if (d->labels[i] >= classes) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  "%s: label %d at index %d is out of range: %s has %d classes (0 to %d)",
                  labels_path, d->labels[i], i, why, classes, classes - 1);
      return FALSE;
    }
  return TRUE;
}

/* Also used by tdm_dataset_open, which knows the dataset's name when the folder's
 * name does not tell it. classes is 0 when the labels decide it. */
TdmDatasetPair *tdm_dataset_load_idx_folder_as(const char *folder, const char *kind,
                                               int classes, GError **error);

TdmDatasetPair *
tdm_dataset_load_idx_folder_as(const char *folder, const char *kind, int classes,
                               GError **error)
{
  g_autofree char *train_images = tdm_idx_find(folder, "train-images-idx3-ubyte", error);
  if (train_images == NULL)
    return NULL;
  g_autofree char *train_labels = tdm_idx_find(folder, "train-labels-idx1-ubyte", error);
  if (train_labels == NULL)
    return NULL;
  g_autofree char *test_images = tdm_idx_find(folder, "t10k-images-idx3-ubyte", error);
  if (test_images == NULL)
    return NULL;
  g_autofree char *test_labels = tdm_idx_find(folder, "t10k-labels-idx1-ubyte", error);
  if (test_labels == NULL)
    return NULL;

  g_autofree char *train_name = g_strdup_printf("%s (train)", kind);
  g_autofree char *test_name = g_strdup_printf("%s (test)", kind);
  g_autoptr(TdmDataset) train =
      tdm_dataset_load_idx(train_images, train_labels, train_name, error);
  if (train == NULL)
    return NULL;
  g_autoptr(TdmDataset) test = tdm_dataset_load_idx(test_images, test_labels, test_name, error);
  if (test == NULL)
    return NULL;

  if (test->height != train->height || test->width != train->width) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: test images are %d×%d but the training images (%s) are %d×%d", test_images,
                test->height, test->width, train_images, train->height, train->width);
    return NULL;
  }

  if (classes > 0) {
    if (!tdm_idx_check_labels(train, train_labels, classes, kind, error) ||
        !tdm_idx_check_labels(test, test_labels, classes, kind, error))
      return NULL;
  } else {
    /* The classes are the training set's: a test label the network cannot output
     * means the files do not belong together. */
    classes = train->classes;
    if (!tdm_idx_check_labels(test, test_labels, classes, "the training set", error))
      return NULL;
  }
  train->classes = test->classes = classes;
  train->class_names = tdm_idx_class_names(kind, classes);
  test->class_names = tdm_idx_class_names(kind, classes);

  TdmDatasetPair *pair = g_new0(TdmDatasetPair, 1);
  pair->name = g_strdup(kind);
  pair->source = g_strdup(folder);
  pair->train = g_steal_pointer(&train);
  pair->test = g_steal_pointer(&test);
  return pair;
}

TdmDatasetPair *
tdm_dataset_load_idx_folder(const char *folder, GError **error)
{
  g_return_val_if_fail(folder != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  /* The folder's name is the only hint to what an IDX set is; MNIST and
   * Fashion-MNIST have exactly 10 classes, anything else has what its labels say. */
  g_autofree char *base = g_path_get_basename(folder);
  g_autofree char *lower = g_ascii_strdown(base, -1);
  if (strstr(lower, "fashion") != NULL)
    return tdm_dataset_load_idx_folder_as(folder, "fashion-mnist", 10, error);
  if (g_str_equal(lower, "mnist"))
    return tdm_dataset_load_idx_folder_as(folder, "mnist", 10, error);
  return tdm_dataset_load_idx_folder_as(folder, base, 0, error);
}
