/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dataset-idx.c — the IDX reader (MNIST, Fashion-MNIST and their kin), raw or
 * gzipped (one member or several, as zcat reads them). Every header field is checked
 * against what the file can hold before it is trusted, and a gzipped body is inflated
 * in bounded steps into a buffer that grows only as data actually arrives, so a
 * header that lies gives an error naming the file, never a huge allocation or a
 * crash. Only regular files are opened (tdm-file.h). Only unsigned-byte images of
 * rank 3 and labels of rank 1 are read; other IDX element types are refused. Not a
 * writer. */
#include "tdm-dataset.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-file.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define TDM_IDX_MAGIC_IMAGES 0x00000803u
#define TDM_IDX_MAGIC_LABELS 0x00000801u
#define TDM_IDX_TYPE_UBYTE 0x08u
#define TDM_IDX_MAX_SIDE 4096u
/* deflate cannot expand data by more than about 1032:1, so a gzip file promising
 * more than this ratio is truncated or lying, and is refused before reading on. The
 * check is cheap but not enough alone (padding defeats it): the body is also read in
 * bounded steps. */
#define TDM_IDX_MAX_GZIP_RATIO 1100u
/* Compressed bytes read from the file at a time. */
#define TDM_IDX_INPUT_CHUNK (64u * 1024u)
/* The first size of a gzipped body's buffer; it doubles as data arrives. */
#define TDM_IDX_FIRST_GROWTH (1u << 20)

typedef struct {
  const char *path;
  int fd;
  guint64 file_size; /* bytes on disk */
  gboolean gzip;
  guint64 consumed; /* uncompressed bytes read so far */
  /* gzip only */
  z_stream z;
  gboolean z_live;
  guint8 *in;            /* TDM_IDX_INPUT_CHUNK bytes of compressed input */
  gboolean in_eof;       /* the file has no more bytes */
  gboolean done;         /* the last member has ended */
  guint64 garbage;       /* bytes after the last member that start no new member */
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
  if (f->z_live)
    inflateEnd(&f->z);
  f->z_live = FALSE;
  g_clear_pointer(&f->in, g_free);
  if (f->fd >= 0)
    close(f->fd);
  f->fd = -1;
}

/* read(2) until `bytes` or the end of the file. */
static gboolean
tdm_idx_read_fd(TdmIdxFile *f, guint8 *buffer, gsize bytes, gsize *got, GError **error)
{
  *got = 0;
  while (*got < bytes) {
    ssize_t n = read(f->fd, buffer + *got, bytes - *got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET, _("%s: cannot read: %s"),
                  f->path, g_strerror(errno));
      return FALSE;
    }
    if (n == 0)
      break;
    *got += (gsize)n;
  }
  return TRUE;
}

static gboolean
tdm_idx_file_open(TdmIdxFile *f, const char *path, GError **error)
{
  memset(f, 0, sizeof *f);
  f->path = path;
  f->fd = -1;

  struct stat st;
  f->fd = tdm_file_open_regular(path, "", TDM_ENGINE_ERROR_DATASET, &st, error);
  if (f->fd < 0)
    return FALSE;
  f->file_size = (guint64)st.st_size;

  guint8 magic[2] = {0, 0};
  ssize_t got = pread(f->fd, magic, sizeof magic, 0);
  if (got < 0) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET, _("%s: cannot read: %s"), path,
                g_strerror(errno));
    return FALSE;
  }

  /* Sniffed rather than taken from the name: downloads get renamed, and some
   * tools inflate the file but keep ".gz". */
  f->gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  if (f->gzip) {
    /* 16 + MAX_WBITS: gzip framing only, checked CRC and length. */
    if (inflateInit2(&f->z, 16 + MAX_WBITS) != Z_OK) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  _("%s: cannot start inflating: out of memory"), path);
      return FALSE;
    }
    f->z_live = TRUE;
    f->in = g_malloc(TDM_IDX_INPUT_CHUNK);
  }
  return TRUE;
}

static gboolean
tdm_idx_refill(TdmIdxFile *f, GError **error)
{
  if (f->z.avail_in > 0 || f->in_eof)
    return TRUE;
  gsize got = 0;
  if (!tdm_idx_read_fd(f, f->in, TDM_IDX_INPUT_CHUNK, &got, error))
    return FALSE;
  f->z.next_in = f->in;
  f->z.avail_in = (uInt)got;
  if (got < TDM_IDX_INPUT_CHUNK)
    f->in_eof = TRUE;
  return TRUE;
}

/* At the end of one gzip member: another member follows (zcat reads on), or the file
 * ends, or bytes that are no gzip member follow (counted, reported by the caller once
 * it knows whether the data it wanted was all there). */
static gboolean
tdm_idx_next_member(TdmIdxFile *f, GError **error)
{
  if (!tdm_idx_refill(f, error))
    return FALSE;
  if (f->z.avail_in == 0) {
    f->done = TRUE;
    return TRUE;
  }
  /* The two magic bytes may straddle a chunk boundary. */
  guint8 first[2];
  gsize have = MIN(f->z.avail_in, 2u);
  memcpy(first, f->z.next_in, have);
  if (have == 1 && !f->in_eof) {
    guint8 rest;
    ssize_t n = pread(f->fd, &rest, 1, lseek(f->fd, 0, SEEK_CUR));
    if (n == 1) {
      first[1] = rest;
      have = 2;
    }
  }
  if (have == 2 && first[0] == 0x1f && first[1] == 0x8b) {
    inflateReset(&f->z);
    return TRUE;
  }
  off_t at = lseek(f->fd, 0, SEEK_CUR);
  f->garbage = f->z.avail_in + (at >= 0 && (guint64)at < f->file_size
                                    ? f->file_size - (guint64)at : 0);
  f->z.avail_in = 0;
  f->done = TRUE;
  return TRUE;
}

static gboolean
tdm_idx_inflate(TdmIdxFile *f, guint8 *buffer, gsize bytes, gsize *got, GError **error)
{
  *got = 0;
  while (*got < bytes && !f->done) {
    if (!tdm_idx_refill(f, error))
      return FALSE;
    gsize want = MIN(bytes - *got, (gsize)G_MAXUINT32);
    f->z.next_out = buffer + *got;
    f->z.avail_out = (uInt)want;
    int rc = inflate(&f->z, Z_NO_FLUSH);
    gsize made = want - f->z.avail_out;
    *got += made;
    f->consumed += made;
    if (rc == Z_STREAM_END) {
      if (!tdm_idx_next_member(f, error))
        return FALSE;
      continue;
    }
    if (rc == Z_OK)
      continue;
    if (rc == Z_BUF_ERROR && f->z.avail_in == 0 && f->in_eof) {
      /* A cut-off download ends the deflate stream early: say so, not "bad data". */
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  "%s: truncated gzip data: the compressed stream ends after %" G_GUINT64_FORMAT
                  " uncompressed bytes",
                  f->path, f->consumed);
      return FALSE;
    }
    if (rc == Z_BUF_ERROR)
      continue;
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: damaged gzip data after %" G_GUINT64_FORMAT " uncompressed bytes: %s",
                f->path, f->consumed,
                rc == Z_MEM_ERROR ? "out of memory" : f->z.msg ? f->z.msg : "invalid data");
    return FALSE;
  }
  return TRUE;
}

/* Reads up to `bytes`; a short count means the end of the data. */
static gboolean
tdm_idx_file_read(TdmIdxFile *f, void *buffer, gsize bytes, gsize *got, GError **error)
{
  if (f->gzip)
    return tdm_idx_inflate(f, buffer, bytes, got, error);
  if (!tdm_idx_read_fd(f, buffer, bytes, got, error))
    return FALSE;
  f->consumed += *got;
  return TRUE;
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
                _("%s: wrong magic number 0x%08X: IDX %s start with 0x%08X (unsigned bytes, "
                "%d dimension%s)"),
                f->path, h->magic, kind, want_magic, rank, rank == 1 ? "" : "s");
    return FALSE;
  }
  if (raw[2] != TDM_IDX_TYPE_UBYTE) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: element type 0x%02X (%s) in magic number 0x%08X is not supported: "
                "Tandem reads IDX %s of unsigned bytes (0x08)"),
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
                _("%s: absurd %s count %u in the header (expected 1 to %d)"), f->path,
                images ? "image" : "label", h->dims[0], G_MAXINT32);
    return FALSE;
  }
  if (images) {
    for (int i = 1; i < 3; i++)
      if (h->dims[i] == 0 || h->dims[i] > TDM_IDX_MAX_SIDE) {
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                    _("%s: absurd image %s %u in the header (expected 1 to %u)"), f->path,
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

static char *
tdm_idx_what(const TdmIdxHeader *h)
{
  return h->rank == 3 ? g_strdup_printf("%u images of %u×%u", h->dims[0], h->dims[1], h->dims[2])
                      : g_strdup_printf("%u labels", h->dims[0]);
}

static gboolean
tdm_idx_short(TdmIdxFile *f, const TdmIdxHeader *h, gsize bytes, GError **error)
{
  g_autofree char *what = tdm_idx_what(h);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
              "%s: truncated: header says %s (%" G_GSIZE_FORMAT
              " bytes after the %d-byte header) but the file holds %" G_GUINT64_FORMAT " bytes%s",
              f->path, what, bytes, 4 + 4 * h->rank, f->consumed,
              f->gzip ? " once inflated" : "");
  return FALSE;
}

static gboolean
tdm_idx_no_memory(TdmIdxFile *f, const TdmIdxHeader *h, gsize bytes, GError **error)
{
  g_autofree char *what = tdm_idx_what(h);
  g_autofree char *size = g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
              _("%s: not enough memory to hold %s (%s)"), f->path, what, size);
  return FALSE;
}

/* Reads the `bytes` of data the header announced into a new buffer, then makes sure
 * nothing follows. A raw file's size was checked against the header, so the file has
 * proved it holds the data; a gzipped one proves it only as it inflates, so its buffer
 * starts small and doubles as the data arrives: a lying header costs at most twice
 * what the file really holds. Allocations that fail are errors, not aborts. */
static guint8 *
tdm_idx_read_body(TdmIdxFile *f, const TdmIdxHeader *h, gsize bytes, GError **error)
{
  gsize capacity = f->gzip ? MIN(bytes, (gsize)TDM_IDX_FIRST_GROWTH) : bytes;
  g_autofree guint8 *out = g_try_malloc(capacity + 1);
  if (out == NULL) {
    tdm_idx_no_memory(f, h, bytes, error);
    return NULL;
  }
  gsize have = 0;
  for (;;) {
    gsize got = 0;
    if (!tdm_idx_file_read(f, out + have, capacity - have, &got, error))
      return NULL;
    have += got;
    if (have < capacity) {
      tdm_idx_short(f, h, bytes, error);
      return NULL;
    }
    if (have == bytes)
      break;
    capacity = bytes - capacity > capacity ? 2 * capacity : bytes;
    guint8 *grown = g_try_realloc(out, capacity + 1);
    if (grown == NULL) {
      tdm_idx_no_memory(f, h, bytes, error);
      return NULL;
    }
    out = grown;
  }

  if (f->gzip) {
    guint8 extra[256];
    gsize more = 0, total = 0;
    do {
      if (!tdm_idx_file_read(f, extra, sizeof extra, &more, error))
        return NULL;
      total += more;
    } while (more == sizeof extra && total < 1u << 20);
    if (total > 0) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  "%s: %s%" G_GSIZE_FORMAT " bytes of trailing data once inflated, after the "
                  "%u %s the header announces",
                  f->path, more == sizeof extra ? "over " : "", total, h->dims[0],
                  h->rank == 3 ? "images" : "labels");
      return NULL;
    }
    if (f->garbage > 0) {
      /* zcat warns and goes on; a training set with junk appended was damaged or
       * tampered with, and is refused. */
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  "%s: %" G_GUINT64_FORMAT " bytes after the end of the gzip data are not "
                  "gzip data (the file is damaged or has something appended)",
                  f->path, f->garbage);
      return NULL;
    }
  }
  return g_steal_pointer(&out);
}

TdmDataset *
tdm_dataset_load_idx(const char *images_path, const char *labels_path, const char *name,
                     GError **error)
{
  g_return_val_if_fail(images_path != NULL && labels_path != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  TdmIdxFile images = {.fd = -1}, labels = {.fd = -1};
  TdmIdxHeader ih, lh;
  TdmDataset *d = NULL;
  guint8 *label_bytes = NULL, *image_bytes = NULL;

  /* Both headers first, so a mismatch is found before 47 MB are inflated. */
  if (!tdm_idx_file_open(&images, images_path, error) ||
      !tdm_idx_read_header(&images, TRUE, &ih, error) ||
      !tdm_idx_file_open(&labels, labels_path, error) ||
      !tdm_idx_read_header(&labels, FALSE, &lh, error))
    goto out;

  if (ih.dims[0] != lh.dims[0]) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: holds %u labels but %s holds %u images; the counts must match"),
                labels_path, lh.dims[0], images_path, ih.dims[0]);
    goto out;
  }

  /* Labels first: they are small, and a short label file is found before the images
   * are inflated. */
  label_bytes = tdm_idx_read_body(&labels, &lh, lh.dims[0], error);
  if (label_bytes == NULL)
    goto out;
  image_bytes =
      tdm_idx_read_body(&images, &ih, (gsize)ih.dims[0] * ih.dims[1] * ih.dims[2], error);
  if (image_bytes == NULL)
    goto out;

  /* classes is known once the labels are read; until then, every uint8 label fits. */
  d = tdm_dataset_new_take(name, (int)ih.dims[0], (int)ih.dims[1], (int)ih.dims[2], 1, 256,
                           g_steal_pointer(&image_bytes), g_steal_pointer(&label_bytes));

  int max_label = 0;
  for (int i = 0; i < d->count; i++)
    max_label = MAX(max_label, d->labels[i]);
  d->classes = max_label + 1;
  /* A small MNIST-shaped subset may lack the top digits; it still has 10 classes,
   * so that a network built from it fits the full set. */
  if (d->height == 28 && d->width == 28 && d->classes < 10)
    d->classes = 10;

out:
  g_free(label_bytes);
  g_free(image_bytes);
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
  /* lstat, not stat: a dangling link is found, and its open says what is wrong. */
  if (tdm_file_present(raw))
    return g_steal_pointer(&raw);
  g_autofree char *gz = g_strconcat(raw, ".gz", NULL);
  if (tdm_file_present(gz))
    return g_steal_pointer(&gz);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
              _("%s: missing file: neither %s nor %s.gz is there"), folder, base, base);
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
                  _("%s: label %d at index %d is out of range for %d classes (%s)"),
                  labels_path, d->labels[i], i, classes, why);
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
                _("%s: test images are %d×%d but the training images (%s) are %d×%d"), test_images,
                test->height, test->width, train_images, train->height, train->width);
    return NULL;
  }

  if (classes > 0) {
    g_autofree char *why = g_strdup_printf("%s has labels 0 to %d", kind, classes - 1);
    if (!tdm_idx_check_labels(train, train_labels, classes, why, error) ||
        !tdm_idx_check_labels(test, test_labels, classes, why, error))
      return NULL;
  } else {
    /* The classes are the training set's labels 0 to K-1, K the first label no
     * training image has: a label past such a gap leaves classes without a single
     * example, which is a damaged label file (a stray 200 among 0 to 9), not a set
     * of 201 classes. A test label the network cannot output means the files do not
     * belong together. */
    guint64 seen[256] = {0};
    for (int i = 0; i < train->count; i++)
      seen[train->labels[i]]++;
    int first_gap = 0;
    while (first_gap < 256 && seen[first_gap] > 0)
      first_gap++;
    if (first_gap < train->classes && first_gap > 0) {
      g_autofree char *why = g_strdup_printf(
          "the training labels are 0 to %d; no training image has label %d", first_gap - 1,
          first_gap);
      if (!tdm_idx_check_labels(train, train_labels, first_gap, why, error))
        return NULL;
    }
    classes = train->classes;
    g_autofree char *why =
        g_strdup_printf("the training set has labels 0 to %d", classes - 1);
    if (!tdm_idx_check_labels(test, test_labels, classes, why, error))
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
