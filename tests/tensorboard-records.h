/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tensorboard-records.h — TensorBoard event files read back, for tests: the TFRecord
 * framing checked record by record (the length's and the data's masked CRC-32C, as
 * TensorFlow's reader checks them), and the Event protocol buffers decoded into the
 * scalars they hold. The decoder knows the fields a scalar event has (wall_time 1,
 * step 2, file_version 3, summary 5 of values: tag 1, simple_value 2) and fails the
 * test on any other, so a field written wrong does not go unseen. Header-only, so the
 * engine's tests and the window's share it.
 */
#pragma once

#include "tdm-tensorboard.h"

#include <glib.h>
#include <string.h>

/* One scalar of an event file: its step, tag and value. */
typedef struct {
  gint64 step;
  double wall_time;
  char *tag;
  float value;
} TestTensorboardScalar;

static inline guint64
test_tensorboard_le(const guint8 *p, int bytes)
{
  guint64 v = 0;
  for (int i = bytes - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* The records of an event file, both CRCs of each checked; their data as GBytes. */
static inline GPtrArray *
test_tensorboard_records(const char *path)
{
  g_autofree guint8 *data = NULL;
  gsize size = 0;
  g_assert_true(g_file_get_contents(path, (char **)&data, &size, NULL));
  GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  gsize at = 0;
  while (at < size) {
    g_assert_cmpuint(size - at, >=, 16);
    guint64 n = test_tensorboard_le(data + at, 8);
    g_assert_cmphex(test_tensorboard_le(data + at + 8, 4), ==,
                    tdm_tensorboard_masked_crc(tdm_tensorboard_crc32c(data + at, 8)));
    g_assert_cmpuint(n, <=, size - at - 16);
    g_assert_cmphex(test_tensorboard_le(data + at + 12 + n, 4), ==,
                    tdm_tensorboard_masked_crc(tdm_tensorboard_crc32c(data + at + 12, n)));
    g_ptr_array_add(out, g_bytes_new(data + at + 12, n));
    at += 16 + n;
  }
  return out;
}

/* A protocol buffer field: its number and wire type, and its value (varint, fixed)
 * or its bytes (length-delimited). Returns FALSE at the end of [*p, end). */
typedef struct {
  guint number, wire;
  guint64 number_value;
  const guint8 *bytes;
  gsize length;
} TestProtoField;

static inline guint64
test_proto_varint(const guint8 **p, const guint8 *end)
{
  guint64 v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    g_assert_true(*p < end);
    guint8 b = *(*p)++;
    v |= (guint64)(b & 0x7f) << shift;
    if (!(b & 0x80))
      return v;
  }
  g_assert_not_reached();
}

static inline gboolean
test_proto_next(const guint8 **p, const guint8 *end, TestProtoField *f)
{
  *f = (TestProtoField){0};
  if (*p >= end)
    return FALSE;
  guint64 key = test_proto_varint(p, end);
  f->number = (guint)(key >> 3);
  f->wire = (guint)(key & 7);
  switch (f->wire) {
  case 0:
    f->number_value = test_proto_varint(p, end);
    break;
  case 1:
  case 5: {
    gsize n = f->wire == 1 ? 8 : 4;
    g_assert_cmpint(end - *p, >=, (gssize)n);
    f->number_value = test_tensorboard_le(*p, (int)n);
    *p += n;
    break;
  }
  case 2:
    f->length = test_proto_varint(p, end);
    g_assert_cmpuint(f->length, <=, (gsize)(end - *p));
    f->bytes = *p;
    *p += f->length;
    break;
  default:
    g_assert_not_reached();
  }
  return TRUE;
}

static inline void
test_tensorboard_scalar_clear(gpointer data)
{
  g_free(((TestTensorboardScalar *)data)->tag);
}

/* Every scalar of an event file, in the file's order. *version: the first record's
 * file_version (the caller frees it); every later record must be a summary. */
static inline GArray *
test_tensorboard_scalars(const char *path, char **version)
{
  g_autoptr(GPtrArray) records = test_tensorboard_records(path);
  GArray *out = g_array_new(FALSE, TRUE, sizeof(TestTensorboardScalar));
  g_array_set_clear_func(out, test_tensorboard_scalar_clear);
  *version = NULL;
  for (guint r = 0; r < records->len; r++) {
    gsize n;
    const guint8 *p = g_bytes_get_data(records->pdata[r], &n), *end = p + n;
    TestProtoField f;
    gint64 step = 0;
    double wall = 0;
    guint first = out->len;
    while (test_proto_next(&p, end, &f)) {
      if (f.number == 1 && f.wire == 1) {
        memcpy(&wall, &f.number_value, sizeof wall);
      } else if (f.number == 2 && f.wire == 0) {
        step = (gint64)f.number_value;
      } else if (f.number == 3 && f.wire == 2 && r == 0) {
        *version = g_strndup((const char *)f.bytes, f.length);
      } else if (f.number == 5 && f.wire == 2) {
        const guint8 *s = f.bytes, *s_end = f.bytes + f.length;
        TestProtoField value;
        while (test_proto_next(&s, s_end, &value)) {
          g_assert_true(value.number == 1 && value.wire == 2);
          TestTensorboardScalar scalar = {0};
          const guint8 *v = value.bytes, *v_end = value.bytes + value.length;
          TestProtoField part;
          gboolean has_value = FALSE;
          while (test_proto_next(&v, v_end, &part)) {
            if (part.number == 1 && part.wire == 2) {
              scalar.tag = g_strndup((const char *)part.bytes, part.length);
            } else {
              g_assert_true(part.number == 2 && part.wire == 5);
              guint32 bits = (guint32)part.number_value;
              memcpy(&scalar.value, &bits, sizeof scalar.value);
              has_value = TRUE;
            }
          }
          g_assert_nonnull(scalar.tag);
          g_assert_true(has_value);
          g_array_append_val(out, scalar);
        }
      } else {
        g_assert_not_reached();
      }
    }
    for (guint i = first; i < out->len; i++) {
      g_array_index(out, TestTensorboardScalar, i).step = step;
      g_array_index(out, TestTensorboardScalar, i).wall_time = wall;
    }
  }
  return out;
}

/* The scalar `tag` at `step`, or NULL. */
static inline const TestTensorboardScalar *
test_tensorboard_find(GArray *scalars, const char *tag, gint64 step)
{
  for (guint i = 0; i < scalars->len; i++) {
    const TestTensorboardScalar *s = &g_array_index(scalars, TestTensorboardScalar, i);
    if (s->step == step && g_str_equal(s->tag, tag))
      return s;
  }
  return NULL;
}

/* How many scalars `tag` has. */
static inline guint
test_tensorboard_count(GArray *scalars, const char *tag)
{
  guint count = 0;
  for (guint i = 0; i < scalars->len; i++)
    count += g_str_equal(g_array_index(scalars, TestTensorboardScalar, i).tag, tag);
  return count;
}
