/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-tensorboard.h — TensorBoard event files: scalars written the way TensorBoard
 * reads them, so Tandem's runs sit beside PyTorch's, Lightning's and Keras's.
 *
 * A file is a sequence of TFRecords (the data's length as a little-endian uint64, the
 * masked CRC-32C of those 8 bytes, the data, the masked CRC-32C of the data), each an
 * Event protocol buffer: wall_time (field 1, double), step (2, int64), and either
 * file_version (3, "brain.Event:2", the first record) or a summary (5) of values
 * (Summary.value, 1: tag 1, simple_value 2, a float). The few fields are encoded here
 * by hand. Each record is written with one write() as it is made, so TensorBoard sees
 * it at once and a crash loses nothing written. Not which scalars a run has
 * (tdm-tensorboard-run.h).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _TdmTensorboard TdmTensorboard;

/* Creates `folder` (and its parents) and in it a new event file named
 * events.out.tfevents.<seconds>.<host> (".N" added if that exists), whose first record
 * says the file's version; or, with `file_name`, that name written whole to a
 * temporary file and renamed over it on tdm_tensorboard_close() (a conversion that
 * replaces its earlier output). Errors (TDM_ENGINE_ERROR_HISTORY) name the file. */
TdmTensorboard *tdm_tensorboard_new (const char *folder, const char *file_name,
                                     double wall_time, GError **error);

/* One event of several scalars at a step: tags[i] is values[i]. Values that are not
 * finite are left out; an event with none is not written. A write error is kept for
 * tdm_tensorboard_close() and stops later writes. */
void tdm_tensorboard_add (TdmTensorboard *tb, gint64 step, double wall_time, int count,
                          const char *const *tags, const double *values);

/* Closes the file (renames a replacing file into place); FALSE with the first write
 * error, if any. */
gboolean tdm_tensorboard_close (TdmTensorboard *tb, GError **error);
void tdm_tensorboard_free (TdmTensorboard *tb);

/* CRC-32C (Castagnoli) of data, and TensorFlow's masking of it: for tests. */
guint32 tdm_tensorboard_crc32c (const guint8 *data, gsize length);
guint32 tdm_tensorboard_masked_crc (guint32 crc);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmTensorboard, tdm_tensorboard_free)

G_END_DECLS
