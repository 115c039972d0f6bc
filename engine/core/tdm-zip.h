/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-zip.h — the entries of a zip archive held in memory, for reading PyTorch's
 * .pth files (torch.save writes a zip of a pickle and one raw file per storage).
 *
 * The central directory is read and every field checked against the archive's size
 * before anything is trusted: offsets, sizes, name lengths, the local headers they
 * point to, zip64's larger fields. Entries are stored (what PyTorch writes) or
 * deflated (inflated with zlib, to the size the directory declares and no more, or
 * only as far as a range of it that is asked for); encrypted entries, other methods,
 * archives split over disks and duplicate names are refused. An entry's CRC-32 is
 * checked when it is read whole (tdm_zip_read_range says when else). Messages say what is
 * wrong, not which file: the caller names it. Not a writer, and not a file reader
 * (the caller maps the file).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* More entries than any state_dict's archive holds (one per storage). */
#define TDM_ZIP_MAX_ENTRIES (1 << 18)

typedef struct {
  char *name;                 /* UTF-8 or not, without NUL bytes */
  guint64 offset;             /* of the entry's data in the archive */
  guint64 size;               /* once read (uncompressed) */
  guint64 compressed_size;    /* in the archive */
  guint32 crc32;
  gboolean deflated;          /* FALSE: stored */
} TdmZipEntry;

typedef struct _TdmZip TdmZip;

/* Reads the directory of the archive in data[size] (which must outlive the TdmZip).
 * Errors (TDM_ENGINE_ERROR_CHECKPOINT) say what is wrong with the archive. */
TdmZip *tdm_zip_open (const guint8 *data, gsize size, GError **error);
void tdm_zip_free (TdmZip *zip);

guint tdm_zip_count (TdmZip *zip);
const TdmZipEntry *tdm_zip_nth (TdmZip *zip, guint index);
/* NULL when no entry has that name. */
const TdmZipEntry *tdm_zip_find (TdmZip *zip, const char *name);

/* The entry's bytes, its CRC-32 checked: a pointer into the archive for a stored
 * entry, or a buffer inflated into *owned (free it) for a deflated one. An entry
 * larger than max_size is refused before anything is inflated. */
const guint8 *tdm_zip_read (TdmZip *zip, const TdmZipEntry *entry, guint64 max_size,
                            guint8 **owned, GError **error);

/* Bytes [from, from + length) of the entry (which must lie within it), the way
 * tdm_zip_read reads it, but a deflated entry is inflated only up to the range's end,
 * into a buffer of length bytes (what comes before passes through a small one): its
 * CRC-32 is then checked only when the range reaches the entry's end; a stored entry's
 * CRC-32 is always checked (in place). A range longer than max_size is refused. */
const guint8 *tdm_zip_read_range (TdmZip *zip, const TdmZipEntry *entry, guint64 from,
                                  guint64 length, guint64 max_size, guint8 **owned,
                                  GError **error);

/* The most bytes one read has allocated, over the process's reads since the last
 * reset (reset TRUE returns it and starts again): for tests, to show what a hostile
 * entry costs. */
guint64 tdm_zip_peak_bytes (gboolean reset);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmZip, tdm_zip_free)

G_END_DECLS
