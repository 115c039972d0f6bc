/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-tensorboard.c — the TensorBoard event-file writer: CRC-32C against its published
 * check value and TensorFlow's masking, the TFRecord framing read back record by record
 * (lengths, both CRCs), the first record's file_version, scalars that are not finite
 * left out, and a replacing file (a conversion) leaving one file however often it is
 * written. That TensorBoard's own reading agrees is test-cli-tensorboard.sh's
 * (python3-protobuf). */
#define _GNU_SOURCE
#include "tdm-error.h"
#include "tdm-tensorboard.h"
#include "tensorboard-records.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

static void
test_crc(void)
{
  /* The check value of CRC-32C (Castagnoli), as RFC 3720 and every implementation give. */
  g_assert_cmphex(tdm_tensorboard_crc32c((const guint8 *)"123456789", 9), ==, 0xe3069283u);
  g_assert_cmphex(tdm_tensorboard_crc32c((const guint8 *)"", 0), ==, 0);
  /* TensorFlow's mask: rotate right by 15, add 0xa282ead8. */
  g_assert_cmphex(tdm_tensorboard_masked_crc(0), ==, 0xa282ead8u);
  g_assert_cmphex(tdm_tensorboard_masked_crc(0xe3069283u), ==,
                  ((0xe3069283u >> 15) | (0xe3069283u << 17)) + 0xa282ead8u);
}

static gboolean
holds(GBytes *b, const char *text)
{
  gsize n;
  const guint8 *p = g_bytes_get_data(b, &n);
  return memmem(p, n, text, strlen(text)) != NULL;
}

/* The one event file in `folder`, found as TensorBoard finds it. */
static char *
only_file(const char *folder)
{
  g_autoptr(GDir) dir = g_dir_open(folder, 0, NULL);
  g_assert_nonnull(dir);
  const char *name = g_dir_read_name(dir);
  g_assert_nonnull(name);
  char *path = g_build_filename(folder, name, NULL);
  g_assert_null(g_dir_read_name(dir));
  return path;
}

static void
test_records(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-tb-XXXXXX", NULL);
  g_autofree char *folder = g_build_filename(dir, "run", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmTensorboard) tb = tdm_tensorboard_new(folder, NULL, 1e9, &error);
  g_assert_no_error(error);
  const char *tags[] = {"loss/train", "accuracy/train"};
  const double values[] = {0.5, NAN};
  tdm_tensorboard_add(tb, 7, 1e9 + 1, 2, tags, values);
  const double none[] = {NAN, INFINITY};
  tdm_tensorboard_add(tb, 8, 1e9 + 2, 2, tags, none);   /* nothing left: no record */
  g_assert_true(tdm_tensorboard_close(tb, &error));
  g_autofree char *path = only_file(folder);
  g_autofree char *base = g_path_get_basename(path);
  g_assert_true(g_str_has_prefix(base, "events.out.tfevents.1000000000."));

  g_autoptr(GPtrArray) r = test_tensorboard_records(path);
  g_assert_cmpuint(r->len, ==, 2);
  g_assert_true(holds(r->pdata[0], "brain.Event:2"));
  g_assert_true(holds(r->pdata[1], "loss/train"));
  g_assert_false(holds(r->pdata[1], "accuracy/train"));
  /* step 7 as field 2's varint, 0.5 as field 2's float inside the value. */
  g_assert_true(holds(r->pdata[1], "\x10\x07"));
  g_assert_true(holds(r->pdata[1], "\x15\x00\x00\x00\x3f"));
  /* The same, decoded: one scalar, at its step and wall time. */
  g_autofree char *version = NULL;
  g_autoptr(GArray) scalars = test_tensorboard_scalars(path, &version);
  g_assert_cmpstr(version, ==, "brain.Event:2");
  g_assert_cmpuint(scalars->len, ==, 1);
  const TestTensorboardScalar *loss = test_tensorboard_find(scalars, "loss/train", 7);
  g_assert_nonnull(loss);
  g_assert_cmpfloat(loss->value, ==, 0.5f);
  g_assert_cmpfloat(loss->wall_time, ==, 1e9 + 1);

  /* A replacing file: written twice, one file with the second's records. */
  for (int round = 0; round < 2; round++) {
    g_autoptr(TdmTensorboard) again = tdm_tensorboard_new(folder, "events.out.tfevents.5.x",
                                                          5, &error);
    g_assert_no_error(error);
    const double v[] = {round, 1};
    tdm_tensorboard_add(again, round, 6, 2, tags, v);
    g_assert_true(tdm_tensorboard_close(again, &error));
  }
  g_autofree char *replaced = g_build_filename(folder, "events.out.tfevents.5.x", NULL);
  g_autoptr(GPtrArray) rr = test_tensorboard_records(replaced);
  g_assert_cmpuint(rr->len, ==, 2);
  g_assert_true(holds(rr->pdata[1], "\x10\x01"));
  /* A replacing file onto a dangling link: refused by name, the link left as it was. */
  g_autofree char *link = g_build_filename(folder, "events.out.tfevents.6.x", NULL);
  g_assert_cmpint(symlink("nowhere/at/all", link), ==, 0);
  g_assert_null(tdm_tensorboard_new(folder, "events.out.tfevents.6.x", 6, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY);
  g_assert_nonnull(strstr(error->message, link));
  g_assert_nonnull(strstr(error->message, "nowhere/at/all"));
  g_clear_error(&error);
  g_autofree char *target = g_file_read_link(link, NULL);
  g_assert_cmpstr(target, ==, "nowhere/at/all");
  g_remove(link);

  g_autoptr(GDir) d = g_dir_open(folder, 0, NULL);
  int files = 0;
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL) {
    g_autofree char *path = g_build_filename(folder, name, NULL);
    g_remove(path);
    files++;
  }
  g_assert_cmpint(files, ==, 2);   /* the live one and the replaced one, no temporary */
  g_rmdir(folder);
  g_rmdir(dir);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/tensorboard/crc", test_crc);
  g_test_add_func("/tensorboard/records", test_records);
  return g_test_run();
}
