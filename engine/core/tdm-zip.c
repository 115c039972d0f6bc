/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-zip.c — a zip archive's directory and entries, read from memory (tdm-zip.h).
 *
 * The end-of-directory record is found from the end of the archive (within the
 * 64 KiB a comment may take), zip64's records where it has them (PyTorch always
 * writes them), then each directory entry and the local header it points to, whose
 * own name and extra lengths say where the data begins (PyTorch pads them to align
 * the data). Every offset and length is checked against the archive's size before it
 * is used.
 */
#include "tdm-zip.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

#include <stdatomic.h>
#include <string.h>
#include <zlib.h>

#define END_SIGNATURE 0x06054b50u
#define END_SIZE 22
#define ZIP64_LOCATOR_SIGNATURE 0x07064b50u
#define ZIP64_LOCATOR_SIZE 20
#define ZIP64_END_SIGNATURE 0x06064b50u
#define ZIP64_END_SIZE 56
#define CENTRAL_SIGNATURE 0x02014b50u
#define CENTRAL_SIZE 46
#define LOCAL_SIGNATURE 0x04034b50u
#define LOCAL_SIZE 30
#define ZIP64_EXTRA_ID 0x0001
#define MAX_NAME 4096

struct _TdmZip {
  const guint8 *data;
  guint64 size;
  GArray *entries;            /* TdmZipEntry */
  GHashTable *by_name;        /* name → index + 1 */
};

static guint16
le16(const guint8 *p)
{
  return (guint16)(p[0] | p[1] << 8);
}

static guint32
le32(const guint8 *p)
{
  return (guint32)p[0] | (guint32)p[1] << 8 | (guint32)p[2] << 16 | (guint32)p[3] << 24;
}

static guint64
le64(const guint8 *p)
{
  return (guint64)le32(p) | (guint64)le32(p + 4) << 32;
}

static gpointer
zip_fail(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);

static gpointer
zip_fail(GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT, message);
  return NULL;
}

/* Whether [offset, offset + length) lies within the archive, without overflow. */
static gboolean
within(const TdmZip *zip, guint64 offset, guint64 length)
{
  return offset <= zip->size && length <= zip->size - offset;
}

void
tdm_zip_free(TdmZip *zip)
{
  if (zip == NULL)
    return;
  for (guint i = 0; i < zip->entries->len; i++)
    g_free(g_array_index(zip->entries, TdmZipEntry, i).name);
  g_array_unref(zip->entries);
  g_hash_table_unref(zip->by_name);
  g_free(zip);
}

/* The end record's position: searched backwards over the comment's 64 KiB at most. */
static gboolean
find_end(const TdmZip *zip, guint64 *end)
{
  if (zip->size < END_SIZE)
    return FALSE;
  guint64 last = zip->size - END_SIZE;
  guint64 first = last > 0xFFFF ? last - 0xFFFF : 0;
  for (guint64 at = last + 1; at-- > first;) {
    const guint8 *p = zip->data + at;
    if (le32(p) == END_SIGNATURE && at + END_SIZE + le16(p + 20) <= zip->size) {
      *end = at;
      return TRUE;
    }
  }
  return FALSE;
}

/* Where the directory is and how many entries it has, from the end record or, when
 * the archive has one, from zip64's. */
static gboolean
read_directory_place(const TdmZip *zip, guint64 end, guint64 *offset, guint64 *bytes,
                     guint64 *count, GError **error)
{
  const guint8 *p = zip->data + end;
  if (le16(p + 4) != 0 || le16(p + 6) != 0 || le16(p + 8) != le16(p + 10)) {
    zip_fail(error, _("a zip archive split over several disks"));
    return FALSE;
  }
  *count = le16(p + 10);
  *bytes = le32(p + 12);
  *offset = le32(p + 16);
  guint64 limit = end;
  if (end >= ZIP64_LOCATOR_SIZE &&
      le32(zip->data + end - ZIP64_LOCATOR_SIZE) == ZIP64_LOCATOR_SIGNATURE) {
    const guint8 *loc = zip->data + end - ZIP64_LOCATOR_SIZE;
    guint64 at = le64(loc + 8);
    if (le32(loc + 4) != 0 || le32(loc + 16) > 1) {
      zip_fail(error, _("a zip archive split over several disks"));
      return FALSE;
    }
    if (at > end - ZIP64_LOCATOR_SIZE || end - ZIP64_LOCATOR_SIZE - at < ZIP64_END_SIZE ||
        le32(zip->data + at) != ZIP64_END_SIGNATURE) {
      zip_fail(error, _("its zip64 end record is not where its locator says"));
      return FALSE;
    }
    const guint8 *z = zip->data + at;
    if (le32(z + 16) != 0 || le32(z + 20) != 0 || le64(z + 24) != le64(z + 32)) {
      zip_fail(error, _("a zip archive split over several disks"));
      return FALSE;
    }
    *count = le64(z + 32);
    *bytes = le64(z + 40);
    *offset = le64(z + 48);
    limit = at;
  }
  if (*offset > limit || *bytes > limit - *offset) {
    zip_fail(error, "its zip directory (%" G_GUINT64_FORMAT " bytes at %" G_GUINT64_FORMAT
                    ") lies outside the %" G_GUINT64_FORMAT " bytes before its end record "
                    "(truncated, or not a zip archive)",
             *bytes, *offset, limit);
    return FALSE;
  }
  if (*count > TDM_ZIP_MAX_ENTRIES || *count > *bytes / CENTRAL_SIZE) {
    zip_fail(error, "its zip directory claims %" G_GUINT64_FORMAT " entries in %"
                    G_GUINT64_FORMAT " bytes (at most %d are read)",
             *count, *bytes, TDM_ZIP_MAX_ENTRIES);
    return FALSE;
  }
  return TRUE;
}

/* zip64's extra field replaces each 32-bit field that is all ones, in this order. */
static gboolean
read_zip64_extra(const guint8 *extra, guint length, TdmZipEntry *e, guint64 *local,
                 gboolean wide_size, gboolean wide_compressed, gboolean wide_offset)
{
  for (guint at = 0; at + 4 <= length;) {
    guint id = le16(extra + at), n = le16(extra + at + 2);
    if (at + 4 + n > length)
      return FALSE;
    if (id == ZIP64_EXTRA_ID) {
      const guint8 *f = extra + at + 4;
      guint need = 8 * (wide_size + wide_compressed + wide_offset);
      if (n < need)
        return FALSE;
      if (wide_size)
        e->size = le64(f), f += 8;
      if (wide_compressed)
        e->compressed_size = le64(f), f += 8;
      if (wide_offset)
        *local = le64(f);
      return TRUE;
    }
    at += 4 + n;
  }
  return !wide_size && !wide_compressed && !wide_offset;
}

/* One directory entry at *at; moves *at past it. */
static gboolean
read_entry(TdmZip *zip, guint64 *at, guint64 end, TdmZipEntry *e, GError **error)
{
  if (end - *at < CENTRAL_SIZE || le32(zip->data + *at) != CENTRAL_SIGNATURE) {
    zip_fail(error, _("entry %u of its zip directory is damaged"), zip->entries->len + 1);
    return FALSE;
  }
  const guint8 *p = zip->data + *at;
  guint flags = le16(p + 8), method = le16(p + 10);
  guint name_length = le16(p + 28), extra_length = le16(p + 30), comment_length = le16(p + 32);
  if (end - *at - CENTRAL_SIZE < (guint64)name_length + extra_length + comment_length) {
    zip_fail(error, _("entry %u of its zip directory runs past the directory"),
             zip->entries->len + 1);
    return FALSE;
  }
  const char *name = (const char *)p + CENTRAL_SIZE;
  if (name_length == 0 || name_length > MAX_NAME || memchr(name, '\0', name_length) != NULL) {
    zip_fail(error, _("entry %u of its zip directory has no usable name"),
             zip->entries->len + 1);
    return FALSE;
  }
  e->name = g_strndup(name, name_length);
  e->crc32 = le32(p + 16);
  e->compressed_size = le32(p + 20);
  e->size = le32(p + 24);
  guint64 local = le32(p + 42);
  if (!read_zip64_extra(p + CENTRAL_SIZE + name_length, extra_length, e, &local,
                        e->size == 0xFFFFFFFFu, e->compressed_size == 0xFFFFFFFFu,
                        local == 0xFFFFFFFFu)) {
    zip_fail(error, _("entry “%s”: its zip64 sizes are missing or damaged"), e->name);
    return FALSE;
  }
  *at += CENTRAL_SIZE + (guint64)name_length + extra_length + comment_length;

  if (flags & 0x41) {
    zip_fail(error, _("entry “%s” is encrypted"), e->name);
    return FALSE;
  }
  if (method != 0 && method != 8) {
    zip_fail(error, _("entry “%s” is compressed with zip method %u (only stored and "
                      "deflated entries are read)"), e->name, method);
    return FALSE;
  }
  e->deflated = method == 8;
  if (!e->deflated && e->compressed_size != e->size) {
    zip_fail(error, "entry “%s” is stored, but its sizes differ (%" G_GUINT64_FORMAT
                    " and %" G_GUINT64_FORMAT " bytes)",
             e->name, e->compressed_size, e->size);
    return FALSE;
  }
  /* The local header's own name and extra field (PyTorch's alignment padding) say
   * where the data starts. */
  if (!within(zip, local, LOCAL_SIZE) || le32(zip->data + local) != LOCAL_SIGNATURE) {
    zip_fail(error, "entry “%s”: no local header at offset %" G_GUINT64_FORMAT
                    " (truncated, or not a zip archive)", e->name, local);
    return FALSE;
  }
  const guint8 *l = zip->data + local;
  e->offset = local + LOCAL_SIZE + le16(l + 26) + le16(l + 28);
  if (!within(zip, e->offset, e->compressed_size)) {
    zip_fail(error, "entry “%s”: its %" G_GUINT64_FORMAT " bytes at offset %"
                    G_GUINT64_FORMAT " run past the end of the %" G_GUINT64_FORMAT
                    "-byte file (truncated)",
             e->name, e->compressed_size, e->offset, zip->size);
    return FALSE;
  }
  return TRUE;
}

TdmZip *
tdm_zip_open(const guint8 *data, gsize size, GError **error)
{
  g_return_val_if_fail(data != NULL || size == 0, NULL);
  g_autoptr(TdmZip) zip = g_new0(TdmZip, 1);
  zip->data = data;
  zip->size = size;
  zip->entries = g_array_new(FALSE, TRUE, sizeof(TdmZipEntry));
  zip->by_name = g_hash_table_new(g_str_hash, g_str_equal);

  guint64 end, offset, bytes, count;
  if (!find_end(zip, &end))
    return zip_fail(error, _("no zip end record (truncated, or not a zip archive)"));
  if (!read_directory_place(zip, end, &offset, &bytes, &count, error))
    return NULL;
  guint64 at = offset;
  for (guint64 i = 0; i < count; i++) {
    TdmZipEntry e = {0};
    gboolean ok = read_entry(zip, &at, offset + bytes, &e, error);
    if (!ok) {
      g_free(e.name);
      return NULL;
    }
    if (g_hash_table_contains(zip->by_name, e.name)) {
      zip_fail(error, _("two entries are named “%s”"), e.name);
      g_free(e.name);
      return NULL;
    }
    g_array_append_val(zip->entries, e);
    g_hash_table_insert(zip->by_name, e.name, GUINT_TO_POINTER(zip->entries->len));
  }
  return g_steal_pointer(&zip);
}

guint
tdm_zip_count(TdmZip *zip)
{
  g_return_val_if_fail(zip != NULL, 0);
  return zip->entries->len;
}

const TdmZipEntry *
tdm_zip_nth(TdmZip *zip, guint index)
{
  g_return_val_if_fail(zip != NULL && index < zip->entries->len, NULL);
  return &g_array_index(zip->entries, TdmZipEntry, index);
}

const TdmZipEntry *
tdm_zip_find(TdmZip *zip, const char *name)
{
  g_return_val_if_fail(zip != NULL && name != NULL, NULL);
  guint index = GPOINTER_TO_UINT(g_hash_table_lookup(zip->by_name, name));
  return index > 0 ? &g_array_index(zip->entries, TdmZipEntry, index - 1) : NULL;
}

/* zlib counts in uInt: long buffers go through in pieces. */
#define ZLIB_PIECE ((guint64)1 << 30)

static guint32
crc_of(const guint8 *p, guint64 n)
{
  uLong crc = crc32(0L, Z_NULL, 0);
  for (guint64 done = 0; done < n;) {
    uInt piece = (uInt)MIN(n - done, ZLIB_PIECE);
    crc = crc32(crc, p + done, piece);
    done += piece;
  }
  return (guint32)crc;
}

static gpointer
crc_failed(const TdmZipEntry *e, GError **error)
{
  return zip_fail(error, _("entry “%s” does not match its CRC-32 (the file is damaged)"),
                  e->name);
}

/* Bytes before a range are inflated here and dropped. */
#define SKIP_BUFFER ((guint64)256 * 1024)

static _Atomic guint64 peak_bytes;

static void
note_bytes(guint64 bytes)
{
  guint64 seen = atomic_load(&peak_bytes);
  while (bytes > seen && !atomic_compare_exchange_weak(&peak_bytes, &seen, bytes))
    ;
}

guint64
tdm_zip_peak_bytes(gboolean reset)
{
  return reset ? atomic_exchange(&peak_bytes, 0) : atomic_load(&peak_bytes);
}

/* Bytes [from, from + length) of a deflated entry, inflated as a stream: what comes
 * before them passes through a small buffer, and the stream stops once they are out,
 * so a view of a few values costs those values, however large the storage. What is
 * checked: zlib's own consistency of every block inflated, and, when the range runs to
 * the entry's end (the whole stream was inflated), that the stream ends there and the
 * entry's CRC-32 over every byte. A range that ends earlier leaves the rest of the
 * stream unread, so its CRC cannot be checked: damage after the range goes unseen,
 * and so can damage within it that still inflates. */
static guint8 *
inflate_range(const TdmZip *zip, const TdmZipEntry *e, guint64 from, guint64 length,
              GError **error)
{
  guint64 goal = from + length;
  gboolean whole = goal == e->size;
  guint8 *out = g_try_malloc(MAX(length, 1));
  if (out == NULL)
    return zip_fail(error, "entry “%s”: no memory to inflate %" G_GUINT64_FORMAT " bytes",
                    e->name, length);
  g_autofree guint8 *skip = from > 0 ? g_malloc(SKIP_BUFFER) : NULL;
  note_bytes(MAX(length, 1) + (skip != NULL ? SKIP_BUFFER : 0));
  z_stream z = {0};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) {
    g_free(out);
    return zip_fail(error, _("entry “%s”: zlib cannot start"), e->name);
  }
  const guint8 *in = zip->data + e->offset;
  guint64 in_left = e->compressed_size, done = 0;
  uLong crc = crc32(0L, Z_NULL, 0);
  int status = Z_OK;
  while (status == Z_OK) {
    if (z.avail_in == 0 && in_left > 0) {
      z.next_in = (Bytef *)in;
      z.avail_in = (uInt)MIN(in_left, ZLIB_PIECE);
      in += z.avail_in;
      in_left -= z.avail_in;
    }
    /* Past the range: room for one byte more when the whole stream is read, so a
     * stream longer than the directory says is caught rather than cut short. */
    guint8 spare, *to;
    uInt room;
    if (done < from) {
      to = skip;
      room = (uInt)MIN(from - done, SKIP_BUFFER);
    } else if (done < goal) {
      to = out + (done - from);
      room = (uInt)MIN(goal - done, ZLIB_PIECE);
    } else if (whole) {
      to = &spare;
      room = 1;
    } else {
      break;
    }
    z.next_out = to;
    z.avail_out = room;
    status = inflate(&z, Z_NO_FLUSH);
    guint64 made = room - z.avail_out;
    if (done >= goal && made > 0) {
      status = Z_DATA_ERROR;
      break;
    }
    if (whole)
      crc = crc32(crc, to, (uInt)made);
    done += made;
    if (status == Z_BUF_ERROR && z.avail_in == 0 && in_left == 0)
      break;
    if (status == Z_BUF_ERROR)
      status = Z_OK;
  }
  inflateEnd(&z);
  gboolean ok = whole ? status == Z_STREAM_END && done == e->size
                      : (status == Z_OK || status == Z_STREAM_END) && done == goal;
  if (!ok) {
    g_free(out);
    return zip_fail(error, "entry “%s”: its deflated data is damaged or does not inflate "
                           "to the %" G_GUINT64_FORMAT " bytes the directory says",
                    e->name, e->size);
  }
  if (whole && (guint32)crc != e->crc32) {
    g_free(out);
    return crc_failed(e, error);
  }
  return out;
}

const guint8 *
tdm_zip_read_range(TdmZip *zip, const TdmZipEntry *e, guint64 from, guint64 length,
                   guint64 max_size, guint8 **owned, GError **error)
{
  g_return_val_if_fail(zip != NULL && e != NULL && owned != NULL, NULL);
  g_return_val_if_fail(from <= e->size && length <= e->size - from, NULL);
  *owned = NULL;
  if (length > max_size)
    return zip_fail(error, "entry “%s”: %" G_GUINT64_FORMAT " of its bytes are asked for, "
                           "more than the %" G_GUINT64_FORMAT " a read may take",
                    e->name, length, max_size);
  if (e->deflated)
    return *owned = inflate_range(zip, e, from, length, error);
  /* A stored entry is read in place: its CRC covers the whole entry at the cost of
   * reading it, not of memory. */
  const guint8 *bytes = zip->data + e->offset;
  if (crc_of(bytes, e->size) != e->crc32)
    return crc_failed(e, error);
  return bytes + from;
}

const guint8 *
tdm_zip_read(TdmZip *zip, const TdmZipEntry *e, guint64 max_size, guint8 **owned,
             GError **error)
{
  g_return_val_if_fail(zip != NULL && e != NULL && owned != NULL, NULL);
  *owned = NULL;
  if (e->size > max_size)
    return zip_fail(error, "entry “%s” holds %" G_GUINT64_FORMAT " bytes, more than the %"
                           G_GUINT64_FORMAT " it may", e->name, e->size, max_size);
  return tdm_zip_read_range(zip, e, 0, e->size, max_size, owned, error);
}
