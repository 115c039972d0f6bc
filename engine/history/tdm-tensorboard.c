/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-tensorboard.c — TensorBoard event files written by hand (tdm-tensorboard.h): the
 * protocol buffer's few fields as varints, doubles, floats and length-delimited bytes,
 * framed as TFRecords with masked CRC-32Cs.
 */
#include "tdm-tensorboard.h"
#include "tdm-error.h"
#include "tdm-file.h"
#include "tdm-i18n.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

struct _TdmTensorboard {
  int fd;
  char *path;              /* the event file */
  char *temporary;         /* a replacing file's temporary, renamed over path at close */
  GError *error;           /* the first write error */
};

/* ---- CRC-32C ------------------------------------------------------------------ */

static guint32 crc_table[256];

static gpointer
make_crc_table(gpointer unused)
{
  for (guint32 i = 0; i < 256; i++) {
    guint32 c = i;
    for (int k = 0; k < 8; k++)
      c = c & 1 ? 0x82f63b78u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
  return NULL;
}

guint32
tdm_tensorboard_crc32c(const guint8 *data, gsize length)
{
  static GOnce once = G_ONCE_INIT;
  g_once(&once, make_crc_table, NULL);
  guint32 c = 0xffffffffu;
  for (gsize i = 0; i < length; i++)
    c = crc_table[(c ^ data[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

guint32
tdm_tensorboard_masked_crc(guint32 crc)
{
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* ---- protocol buffers ------------------------------------------------------------ */

static void
put_varint(GByteArray *b, guint64 v)
{
  do {
    guint8 byte = (guint8)(v & 0x7f);
    v >>= 7;
    if (v != 0)
      byte |= 0x80;
    g_byte_array_append(b, &byte, 1);
  } while (v != 0);
}

static void
put_le(GByteArray *b, guint64 v, int bytes)
{
  for (int i = 0; i < bytes; i++) {
    guint8 byte = (guint8)(v >> (8 * i));
    g_byte_array_append(b, &byte, 1);
  }
}

/* A field's key: its number and wire type (0 varint, 1 64-bit, 2 bytes, 5 32-bit). */
static void
put_key(GByteArray *b, int field, int wire)
{
  put_varint(b, (guint64)(field << 3 | wire));
}

static void
put_bytes(GByteArray *b, int field, const void *data, gsize length)
{
  put_key(b, field, 2);
  put_varint(b, length);
  g_byte_array_append(b, data, (guint)length);
}

static void
put_double(GByteArray *b, int field, double v)
{
  guint64 bits;
  memcpy(&bits, &v, sizeof bits);
  put_key(b, field, 1);
  put_le(b, bits, 8);
}

static void
put_float(GByteArray *b, int field, float v)
{
  guint32 bits;
  memcpy(&bits, &v, sizeof bits);
  put_key(b, field, 5);
  put_le(b, bits, 4);
}

/* Event { double wall_time = 1; int64 step = 2; } without the what. */
static GByteArray *
event_begin(double wall_time, gint64 step)
{
  GByteArray *e = g_byte_array_new();
  put_double(e, 1, wall_time);
  put_key(e, 2, 0);
  put_varint(e, (guint64)step);
  return e;
}

/* ---- the file ----------------------------------------------------------------- */

static void
write_record(TdmTensorboard *tb, const GByteArray *data)
{
  if (tb->fd < 0 || tb->error != NULL)
    return;
  g_autoptr(GByteArray) record = g_byte_array_sized_new(data->len + 16);
  put_le(record, data->len, 8);
  put_le(record, tdm_tensorboard_masked_crc(tdm_tensorboard_crc32c(record->data, 8)), 4);
  g_byte_array_append(record, data->data, data->len);
  put_le(record, tdm_tensorboard_masked_crc(tdm_tensorboard_crc32c(data->data, data->len)), 4);
  if (!tdm_file_write_all(tb->fd, record->data, record->len)) {
    int saved = errno;
    g_set_error(&tb->error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("TensorBoard event file %s: cannot write: %s"), tb->path, g_strerror(saved));
  }
}

static int
create_new(const char *folder, double wall_time, char **path)
{
  char host[256] = "localhost";
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
    g_strlcpy(host, "localhost", sizeof host);
  for (int attempt = 0; attempt < 100; attempt++) {
    g_autofree char *name =
        attempt == 0 ? g_strdup_printf("events.out.tfevents.%.0f.%s", floor(wall_time), host)
                     : g_strdup_printf("events.out.tfevents.%.0f.%s.%d", floor(wall_time), host,
                                       attempt);
    g_free(*path);
    *path = g_build_filename(folder, name, NULL);
    int fd = g_open(*path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST)
      return fd;
  }
  return -1;
}

TdmTensorboard *
tdm_tensorboard_new(const char *folder, const char *file_name, double wall_time,
                    GError **error)
{
  g_return_val_if_fail(folder != NULL, NULL);
  if (g_mkdir_with_parents(folder, 0755) != 0) {
    int saved = errno;
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("TensorBoard folder %s: cannot make it: %s"), folder, g_strerror(saved));
    return NULL;
  }
  g_autoptr(TdmTensorboard) tb = g_new0(TdmTensorboard, 1);
  if (file_name != NULL) {
    tb->path = g_build_filename(folder, file_name, NULL);
    /* Renamed over at the close: a dangling link there would be replaced, not followed. */
    if (!tdm_file_check_not_dangling(tb->path, _("TensorBoard event file "),
                                     TDM_ENGINE_ERROR_HISTORY, error))
      return NULL;
    tb->fd = tdm_file_create_temp(folder, file_name, &tb->temporary);
  } else {
    tb->fd = create_new(folder, wall_time, &tb->path);
  }
  if (tb->fd < 0) {
    int saved = errno;
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("TensorBoard event file %s: cannot create it: %s"), tb->path,
                g_strerror(saved));
    return NULL;
  }
  g_autoptr(GByteArray) e = event_begin(wall_time, 0);
  static const char version[] = "brain.Event:2";
  put_bytes(e, 3, version, sizeof version - 1);
  write_record(tb, e);
  if (tb->error != NULL) {
    g_propagate_error(error, g_steal_pointer(&tb->error));
    return NULL;
  }
  return g_steal_pointer(&tb);
}

void
tdm_tensorboard_add(TdmTensorboard *tb, gint64 step, double wall_time, int count,
                    const char *const *tags, const double *values)
{
  g_return_if_fail(tb != NULL && count >= 0);
  g_autoptr(GByteArray) summary = g_byte_array_new();
  for (int i = 0; i < count; i++) {
    if (!isfinite(values[i]))
      continue;
    g_autoptr(GByteArray) value = g_byte_array_new();
    put_bytes(value, 1, tags[i], strlen(tags[i]));
    put_float(value, 2, (float)values[i]);
    put_bytes(summary, 1, value->data, value->len);
  }
  if (summary->len == 0)
    return;
  g_autoptr(GByteArray) e = event_begin(wall_time, step);
  put_bytes(e, 5, summary->data, summary->len);
  write_record(tb, e);
}

gboolean
tdm_tensorboard_close(TdmTensorboard *tb, GError **error)
{
  g_return_val_if_fail(tb != NULL, FALSE);
  if (tb->fd >= 0) {
    if (close(tb->fd) != 0 && tb->error == NULL) {
      int saved = errno;
      g_set_error(&tb->error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                  _("TensorBoard event file %s: cannot write: %s"), tb->path, g_strerror(saved));
    }
    tb->fd = -1;
    if (tb->temporary != NULL && tb->error == NULL && g_rename(tb->temporary, tb->path) != 0) {
      int saved = errno;
      g_set_error(&tb->error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                  _("TensorBoard event file %s: cannot replace it: %s"), tb->path,
                  g_strerror(saved));
    }
    if (tb->temporary != NULL && tb->error != NULL)
      g_unlink(tb->temporary);
    g_clear_pointer(&tb->temporary, g_free);
  }
  if (tb->error != NULL) {
    g_propagate_error(error, g_steal_pointer(&tb->error));
    return FALSE;
  }
  return TRUE;
}

void
tdm_tensorboard_free(TdmTensorboard *tb)
{
  if (tb == NULL)
    return;
  if (tb->fd >= 0) {
    close(tb->fd);
    if (tb->temporary != NULL)
      g_unlink(tb->temporary);
  }
  g_free(tb->temporary);
  g_free(tb->path);
  g_clear_error(&tb->error);
  g_free(tb);
}
