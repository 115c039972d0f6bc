/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-checkpoint-pth.c — PyTorch's .pth files (torch.save of a state_dict, the format
 * since PyTorch 1.6 and torchvision's downloads) read into a TdmCheckpoint.
 *
 * Such a file is a zip archive: ARCHIVE/data.pkl pickles the state_dict, each tensor
 * a view (offset, size, stride) of a storage whose raw elements are the entry
 * ARCHIVE/data/KEY (little-endian unless ARCHIVE/byteorder says "big"). The pickle is
 * read by tdm-pickle.c, which runs nothing; here each view is checked against its
 * storage's entry, and its values are read out of the mapped file only when they are
 * asked for, as float32 (float16, bfloat16, float64 and int64 converted): a tensor
 * the network does not use is never read, inflated or copied, and a view of a deflated
 * storage inflates only the bytes it spans. Older files (a bare pickle stream) and
 * TorchScript archives are named as such. Not the safetensors reader
 * (tdm-checkpoint.c), which hands these files over.
 */
#include "tdm-bf16.h"
#include "tdm-checkpoint-private.h"
#include "tdm-error.h"
#include "tdm-i18n.h"
#include "tdm-pickle.h"
#include "tdm-zip.h"

#include <math.h>
#include <string.h>

/* What a view of a deflated storage may span (that much is inflated into memory when
 * it is read); stored storages are read in place. */
#define MAX_INFLATED ((guint64)1 << 32)

gboolean
tdm_checkpoint_is_pth(const guint8 *bytes, gsize size)
{
  return size >= 4 && memcmp(bytes, "PK\003\004", 4) == 0;
}

static gpointer
pth_failed(GError **error, const char *path, const char *format, ...) G_GNUC_PRINTF(3, 4);

static gpointer
pth_failed(GError **error, const char *path, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *why = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT, "%s: %s", path, why);
  return NULL;
}

static float
half_to_float(guint16 h)
{
  int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float v;
  if (exponent == 0)
    v = ldexpf((float)mantissa, -24);
  else if (exponent == 31)
    v = mantissa != 0 ? NAN : INFINITY;
  else
    v = ldexpf((float)(mantissa | 0x400), exponent - 25);
  return sign ? -v : v;
}

/* Element i of a storage, as float. */
static float
element(const guint8 *p, TdmPickleDtype dtype, gboolean big_endian)
{
  int n = tdm_pickle_dtype_size(dtype);
  guint64 u = 0;
  for (int k = 0; k < n; k++)
    u |= (guint64)p[big_endian ? n - 1 - k : k] << (8 * k);
  switch (dtype) {
  case TDM_PICKLE_FLOAT32: {
    guint32 w = (guint32)u;
    float f;
    memcpy(&f, &w, sizeof f);
    return f;
  }
  case TDM_PICKLE_FLOAT16:
    return half_to_float((guint16)u);
  case TDM_PICKLE_BFLOAT16:
    return tdm_bf16_value((uint16_t)u);
  case TDM_PICKLE_FLOAT64: {
    double d;
    memcpy(&d, &u, sizeof d);
    return (float)d;
  }
  case TDM_PICKLE_INT64:
    return (float)(gint64)u;
  default:
    g_assert_not_reached();
  }
}

/* The view's element count and its last element's index in the storage; FALSE when
 * either overflows. */
static gboolean
view_extent(const TdmPickleTensor *t, guint64 *elements, guint64 *last)
{
  *elements = 1;
  *last = (guint64)t->offset;
  for (int d = 0; d < t->rank; d++) {
    guint64 reach;
    if (!g_uint64_checked_mul(elements, *elements, (guint64)t->shape[d]))
      return FALSE;
    if (t->shape[d] > 0 &&
        (!g_uint64_checked_mul(&reach, (guint64)t->shape[d] - 1, (guint64)t->stride[d]) ||
         !g_uint64_checked_add(last, *last, reach)))
      return FALSE;
  }
  return TRUE;
}

/* The view's elements, in row-major order, as floats, from the storage's bytes that
 * start at its element `first`. */
static float *
gather(const TdmPickleTensor *t, const guint8 *window, gint64 first, guint64 elements,
       gboolean big_endian)
{
  float *out = g_try_new(float, MAX(elements, 1));
  if (out == NULL)
    return NULL;
  int width = tdm_pickle_dtype_size(t->dtype);
  gint64 index[TDM_PICKLE_MAX_RANK] = {0};
  for (guint64 i = 0; i < elements; i++) {
    gint64 at = t->offset - first;
    for (int d = 0; d < t->rank; d++)
      at += index[d] * t->stride[d];
    out[i] = element(window + at * width, t->dtype, big_endian);
    for (int d = t->rank - 1; d >= 0; d--) {
      if (++index[d] < t->shape[d])
        break;
      index[d] = 0;
    }
  }
  return out;
}

/* What every tensor of one file reads from: the mapping, its zip directory. Shared by
 * reference, so it lives as long as the last tensor that may still be read. */
typedef struct {
  GMappedFile *file;
  TdmZip *zip;
  char *path;
  gboolean big_endian;
} Archive;

static void
archive_clear(gpointer p)
{
  Archive *a = p;
  tdm_zip_free(a->zip);
  g_mapped_file_unref(a->file);
  g_free(a->path);
}

/* One tensor, checked against its storage's entry but not read: a view of the entry. */
typedef struct {
  Archive *archive;        /* a reference */
  TdmPickleTensor view;    /* name and storage_key point at the two strings below */
  char *name;
  char *entry_name;
} Source;

static void
source_free(gpointer p)
{
  Source *s = p;
  g_rc_box_release_full(s->archive, archive_clear);
  g_free(s->name);
  g_free(s->entry_name);
  g_free(s);
}

/* A tensor's values, read when they are asked for: the bytes of its storage that the
 * view spans are read (inflated only that far when deflated, the CRC checked as
 * tdm_zip_read_range says) and the view gathered as floats. The caller's message names
 * the file. */
static float *
read_source(gpointer data, GError **error)
{
  Source *s = data;
  Archive *a = s->archive;
  const TdmZipEntry *entry = tdm_zip_find(a->zip, s->entry_name);
  guint64 elements, last;
  view_extent(&s->view, &elements, &last);
  guint64 width = (guint64)tdm_pickle_dtype_size(s->view.dtype);
  guint64 from = elements > 0 ? (guint64)s->view.offset * width : 0;
  guint64 length = elements > 0 ? (last - (guint64)s->view.offset + 1) * width : 0;
  g_autofree guint8 *owned = NULL;
  g_autoptr(GError) local = NULL;
  const guint8 *bytes = tdm_zip_read_range(a->zip, entry, from, length,
                                           entry->deflated ? MAX_INFLATED : G_MAXUINT64,
                                           &owned, &local);
  if (bytes == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT, _("tensor “%s”: %s"),
                s->name, local->message);
    return NULL;
  }
  float *values = gather(&s->view, bytes, s->view.offset, elements, a->big_endian);
  if (values == NULL)
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("tensor “%s”: no memory for its %lld values"), s->name, (long long)elements);
  return values;
}

/* One tensor of the state_dict into ckpt: its name, shape and where its values are,
 * checked against the archive; the values are read only when asked for, so a tensor
 * the network does not use costs nothing. */
static gboolean
add_tensor(Archive *archive, const char *prefix, const TdmPickleTensor *t, TdmCheckpoint *ckpt,
           GError **error)
{
  const char *path = archive->path;
  if (t->dtype == TDM_PICKLE_UNSUPPORTED) {
    pth_failed(error, path, _("tensor “%s” is of torch.%s; Tandem reads float32, float16, "
                              "bfloat16, float64 and int64 tensors"),
               t->name, t->storage_class);
    return FALSE;
  }
  if (t->rank > 4) {
    pth_failed(error, path, _("tensor “%s”: %d dimensions, Tandem reads at most 4"), t->name,
               t->rank);
    return FALSE;
  }
  g_autofree char *entry_name = g_strdup_printf("%s/data/%s", prefix, t->storage_key);
  const TdmZipEntry *entry = tdm_zip_find(archive->zip, entry_name);
  int width = tdm_pickle_dtype_size(t->dtype);
  if (entry == NULL) {
    pth_failed(error, path, _("tensor “%s”: its storage %s is not in the archive"), t->name,
               entry_name);
    return FALSE;
  }
  if (entry->size != (guint64)t->storage_numel * (guint64)width) {
    pth_failed(error, path, "tensor “%s”: its storage %s holds %" G_GUINT64_FORMAT " bytes, "
                            "but the pickle says %" G_GINT64_FORMAT " elements of %d",
               t->name, entry_name, entry->size, t->storage_numel, width);
    return FALSE;
  }
  guint64 elements, last;
  if (!view_extent(t, &elements, &last) ||
      (elements > 0 && (last >= (guint64)t->storage_numel || elements > (guint64)t->storage_numel))) {
    pth_failed(error, path, "tensor “%s”: its shape and strides reach past the %"
                              G_GINT64_FORMAT " elements of its storage",
               t->name, t->storage_numel);
    return FALSE;
  }
  Source *s = g_new0(Source, 1);
  s->archive = g_rc_box_acquire(archive);
  s->view = *t;
  s->name = g_strdup(t->name);
  s->entry_name = g_steal_pointer(&entry_name);
  s->view.name = s->name;
  s->view.storage_key = NULL;   /* entry_name says where the storage is */
  tdm_checkpoint_take_reader(ckpt, t->name, t->rank, t->shape,
                             t->dtype == TDM_PICKLE_INT64 ? TDM_TENSOR_I64 : TDM_TENSOR_F32,
                             read_source, s, source_free);
  return TRUE;
}

/* The archive's folder: the one data.pkl is in. */
static char *
archive_prefix(TdmZip *zip)
{
  for (guint i = 0; i < tdm_zip_count(zip); i++) {
    const char *name = tdm_zip_nth(zip, i)->name;
    const char *slash = strchr(name, '/');
    if (slash != NULL && slash != name && g_str_equal(slash, "/data.pkl"))
      return g_strndup(name, slash - name);
  }
  return NULL;
}

static gboolean
is_torchscript(TdmZip *zip)
{
  for (guint i = 0; i < tdm_zip_count(zip); i++) {
    const char *name = tdm_zip_nth(zip, i)->name;
    if (g_str_has_suffix(name, "/constants.pkl") || strstr(name, "/code/") != NULL)
      return TRUE;
  }
  return FALSE;
}

/* "little" or "big" from ARCHIVE/byteorder (PyTorch 2.1 on); little without it. */
static gboolean
read_byte_order(TdmZip *zip, const char *prefix, gboolean *big_endian, const char *path,
                GError **error)
{
  *big_endian = FALSE;
  g_autofree char *name = g_strdup_printf("%s/byteorder", prefix);
  const TdmZipEntry *entry = tdm_zip_find(zip, name);
  if (entry == NULL)
    return TRUE;
  g_autofree guint8 *owned = NULL;
  g_autoptr(GError) local = NULL;
  const guint8 *bytes = tdm_zip_read(zip, entry, 16, &owned, &local);
  if (bytes == NULL) {
    pth_failed(error, path, "%s", local->message);
    return FALSE;
  }
  g_autofree char *text = g_strstrip(g_strndup((const char *)bytes, entry->size));
  if (g_str_equal(text, "big")) {
    *big_endian = TRUE;
  } else if (!g_str_equal(text, "little")) {
    pth_failed(error, path, _("its byteorder entry says neither little nor big"));
    return FALSE;
  }
  return TRUE;
}

TdmCheckpoint *
tdm_checkpoint_parse_pth(const char *path, GMappedFile *file, GError **error)
{
  g_return_val_if_fail(path != NULL && file != NULL, NULL);
  const guint8 *bytes = (const guint8 *)g_mapped_file_get_contents(file);
  gsize size = g_mapped_file_get_length(file);
  g_autoptr(GError) local = NULL;
  g_autoptr(TdmZip) zip = tdm_zip_open(bytes, size, &local);
  if (zip == NULL)
    return pth_failed(error, path, _("a zip archive that cannot be read: %s"), local->message);
  /* TorchScript archives have a data.pkl too, of the module's objects. */
  if (is_torchscript(zip))
    return pth_failed(error, path, _("a TorchScript archive (torch.jit.save), not a "
                                     "state_dict: save model.state_dict() with torch.save"));
  g_autofree char *prefix = archive_prefix(zip);
  if (prefix == NULL)
    return pth_failed(error, path, _("a zip archive without data.pkl: not a file torch.save "
                                     "wrote"));
  g_autofree char *pickle_name = g_strdup_printf("%s/data.pkl", prefix);
  const TdmZipEntry *pickle_entry = tdm_zip_find(zip, pickle_name);
  g_autofree guint8 *pickle_owned = NULL;
  const guint8 *pickle = tdm_zip_read(zip, pickle_entry, TDM_PICKLE_MAX_BYTES, &pickle_owned,
                                      &local);
  if (pickle == NULL)
    return pth_failed(error, path, "%s", local->message);
  g_autoptr(GPtrArray) tensors = tdm_pickle_read_state_dict(pickle, pickle_entry->size, &local);
  if (tensors == NULL)
    return pth_failed(error, path, "%s", local->message);
  gboolean big_endian;
  if (!read_byte_order(zip, prefix, &big_endian, path, error))
    return NULL;

  Archive *archive = g_rc_box_new0(Archive);
  archive->file = g_mapped_file_ref(file);
  archive->zip = g_steal_pointer(&zip);
  archive->path = g_strdup(path);
  archive->big_endian = big_endian;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_new();
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < tensors->len; i++)
    ok = add_tensor(archive, prefix, tensors->pdata[i], ckpt, error);
  g_rc_box_release_full(archive, archive_clear);
  return ok ? g_steal_pointer(&ckpt) : NULL;
}
