/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-checkpoint.c — safetensors files: a bitwise round trip, the layout on disk,
 * one malformed file per check the loader makes, and atomic saving (a failed save
 * leaves the old checkpoint and no temporary file). Where Python's safetensors is
 * installed it must read our files too. */
#include "tdm-checkpoint.h"
#include "tdm-error.h"
#include "checkpoint-compare.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct {
  char *dir;
} Fixture;

static void
fixture_set_up(Fixture *f, gconstpointer data)
{
  f->dir = g_dir_make_tmp("tdm-ckpt-XXXXXX", NULL);
  g_assert_nonnull(f->dir);
}

static void
fixture_tear_down(Fixture *f, gconstpointer data)
{
  g_chmod(f->dir, 0755);
  GDir *d = g_dir_open(f->dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name(d))) {
    g_autofree char *p = g_build_filename(f->dir, name, NULL);
    g_unlink(p);
  }
  if (d)
    g_dir_close(d);
  g_rmdir(f->dir);
  g_free(f->dir);
}

/* Entries in the folder, to catch stray temporary files. */
static int
dir_count(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  int n = 0;
  while (d && g_dir_read_name(d))
    n++;
  if (d)
    g_dir_close(d);
  return n;
}

static float *
pattern(gsize n, guint32 salt)
{
  float *v = g_new(float, n);
  for (gsize i = 0; i < n; i++) {
    /* Awkward values on purpose: denormals, negative zero, huge, tiny. */
    guint32 bits = (guint32)(i * 2654435761u) ^ salt;
    if ((bits & 0x7f800000) == 0x7f800000)
      bits &= ~0x00800000u;   /* no NaN/Inf: keeps == meaningful below */
    memcpy(&v[i], &bits, sizeof bits);
  }
  return v;
}

static TdmCheckpoint *
sample_checkpoint(void)
{
  TdmCheckpoint *ckpt = tdm_checkpoint_new();
  const gint64 w[2] = {30, 7}, b[1] = {30}, conv[4] = {4, 3, 3, 3}, empty[2] = {0, 5};
  g_autofree float *wd = pattern(30 * 7, 1), *bd = pattern(30, 2), *cd = pattern(108, 3);
  float scalar = -0.0f;
  tdm_checkpoint_add(ckpt, "fc1.weight", 2, w, wd);
  tdm_checkpoint_add(ckpt, "fc1.bias", 1, b, bd);
  tdm_checkpoint_add(ckpt, "conv1.weight", 4, conv, cd);
  tdm_checkpoint_add(ckpt, "step", 0, NULL, &scalar);
  tdm_checkpoint_add(ckpt, "nothing", 2, empty, NULL);
  tdm_checkpoint_set_metadata(ckpt, "config", "{\"batch\": 100, \"quote\": \"\\\"\"}");
  tdm_checkpoint_set_metadata(ckpt, "format", "pt");
  tdm_checkpoint_set_metadata(ckpt, "note", "日本語 and \n newlines");
  return ckpt;
}

/* b holds a's tensors, each found by its name, and a's metadata. */
static void
assert_same(TdmCheckpoint *a, TdmCheckpoint *b)
{
  assert_same_tensors(b, a);
  for (int i = 0; i < tdm_checkpoint_count(a); i++)
    g_assert_true(tdm_checkpoint_get(b, tdm_checkpoint_nth(a, i)->name) ==
                  tdm_checkpoint_nth(b, i));
  const char *keys[] = {"config", "format", "note"};
  for (gsize i = 0; i < G_N_ELEMENTS(keys); i++)
    g_assert_cmpstr(tdm_checkpoint_get_metadata(a, keys[i]), ==,
                    tdm_checkpoint_get_metadata(b, keys[i]));
}

static void
test_round_trip(Fixture *f, gconstpointer data)
{
  g_autofree char *path = g_build_filename(f->dir, "a.safetensors", NULL);
  g_autoptr(TdmCheckpoint) ckpt = sample_checkpoint();
  g_autoptr(GError) error = NULL;

  g_assert_true(tdm_checkpoint_save(ckpt, path, &error));
  g_assert_no_error(error);
  g_assert_cmpint(dir_count(f->dir), ==, 1);

  g_autoptr(TdmCheckpoint) back = tdm_checkpoint_load(path, &error);
  g_assert_no_error(error);
  assert_same(ckpt, back);
  g_assert_null(tdm_checkpoint_get(back, "absent"));
  g_assert_null(tdm_checkpoint_get_metadata(back, "absent"));

  /* Saving again over it works and gives the same bytes. */
  g_autofree char *first = NULL, *second = NULL;
  gsize first_len, second_len;
  g_assert_true(g_file_get_contents(path, &first, &first_len, NULL));
  g_assert_true(tdm_checkpoint_save(back, path, &error));
  g_assert_true(g_file_get_contents(path, &second, &second_len, NULL));
  g_assert_cmpmem(first, first_len, second, second_len);
  g_assert_cmpint(dir_count(f->dir), ==, 1);
}

/* The bytes on disk are safetensors': LE length, space-padded header to a multiple of
 * 8, data in insertion order from offset 0. */
static void
test_layout(Fixture *f, gconstpointer data)
{
  g_autofree char *path = g_build_filename(f->dir, "b.safetensors", NULL);
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_new();
  const gint64 s2[1] = {2}, s3[1] = {3};
  const float a[2] = {1.0f, -2.0f}, b[3] = {0.5f, 0.25f, 3.0f};
  tdm_checkpoint_add(ckpt, "z", 1, s2, a);
  tdm_checkpoint_add(ckpt, "a", 1, s3, b);
  /* Replacing keeps the place. */
  tdm_checkpoint_add(ckpt, "z", 1, s2, a);
  g_assert_true(tdm_checkpoint_save(ckpt, path, NULL));

  g_autofree guint8 *bytes = NULL;
  gsize len;
  g_assert_true(g_file_get_contents(path, (char **)&bytes, &len, NULL));
  guint64 header_len = 0;
  for (int i = 0; i < 8; i++)
    header_len |= (guint64)bytes[i] << (8 * i);
  g_assert_cmpuint(header_len % 8, ==, 0);
  g_assert_cmpuint(len, ==, 8 + header_len + 5 * sizeof(float));
  g_autofree char *header = g_strndup((char *)bytes + 8, header_len);
  g_test_message("%s", header);
  g_assert_true(header[0] == '{');
  g_assert_nonnull(strstr(header, "\"z\":{\"dtype\":\"F32\",\"shape\":[2],"
                                  "\"data_offsets\":[0,8]}"));
  g_assert_nonnull(strstr(header, "\"a\":{\"dtype\":\"F32\",\"shape\":[3],"
                                  "\"data_offsets\":[8,20]}"));
  g_assert_true(strstr(header, "\"z\"") < strstr(header, "\"a\""));
  /* Little-endian float32: 1.0f is 00 00 80 3f. */
  const guint8 one[4] = {0x00, 0x00, 0x80, 0x3f};
  g_assert_cmpmem(bytes + 8 + header_len, 4, one, 4);
  g_assert_cmpint(tdm_checkpoint_count(ckpt), ==, 2);
}

/* Writes a file from a header and raw data, with the header length as given (or the
 * real one when length < 0). */
static char *
write_raw(const char *dir, const char *name, gint64 length, const char *header,
          const void *data, gsize data_len)
{
  GByteArray *bytes = g_byte_array_new();
  guint64 n = length < 0 ? strlen(header) : (guint64)length;
  guint8 le[8];
  for (int i = 0; i < 8; i++)
    le[i] = (guint8)(n >> (8 * i));
  g_byte_array_append(bytes, le, 8);
  g_byte_array_append(bytes, (const guint8 *)header, strlen(header));
  if (data_len)
    g_byte_array_append(bytes, data, data_len);
  char *path = g_build_filename(dir, name, NULL);
  g_assert_true(g_file_set_contents(path, (char *)bytes->data, bytes->len, NULL));
  g_byte_array_unref(bytes);
  return path;
}

static void
assert_load_fails(const char *path, const char *needle)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, &error);
  g_assert_null(ckpt);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT);
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, path));
  g_assert_nonnull(strstr(error->message, needle));
}

static void
test_malformed(Fixture *f, gconstpointer data)
{
  float floats[8] = {0};
  g_autofree char *missing = g_build_filename(f->dir, "missing.safetensors", NULL);
  assert_load_fails(missing, "missing file");
  assert_load_fails(f->dir, "a folder, not a file");

  /* Shorter than the 8-byte length itself. */
  g_autofree char *tiny = g_build_filename(f->dir, "tiny", NULL);
  g_file_set_contents(tiny, "\x10\x00\x00", 3, NULL);
  assert_load_fails(tiny, "too short");
  g_autofree char *empty = g_build_filename(f->dir, "empty", NULL);
  g_file_set_contents(empty, "", 0, NULL);
  assert_load_fails(empty, "too short");

  const char *ok_header = "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  g_autofree char *too_long = write_raw(f->dir, "long", 4096, ok_header, floats, 8);
  assert_load_fails(too_long, "larger than");
  g_autofree char *huge = write_raw(f->dir, "huge", G_MAXINT64, ok_header, floats, 8);
  assert_load_fails(huge, "larger than");
  g_autofree char *zero = write_raw(f->dir, "zero", 0, ok_header, floats, 8);
  assert_load_fails(zero, "not plausible");

  /* Something else altogether: a text file. */
  g_autofree char *text = g_build_filename(f->dir, "text", NULL);
  g_file_set_contents(text, "hello, this is not a checkpoint at all\n", -1, NULL);
  assert_load_fails(text, "larger than");

  g_autofree char *not_json = write_raw(f->dir, "notjson", -1, "{\"t\": oops}", floats, 8);
  assert_load_fails(not_json, "not valid JSON");
  g_autofree char *not_object = write_raw(f->dir, "array", -1, "[1, 2, 3]   ", NULL, 0);
  assert_load_fails(not_object, "not a JSON object");
  g_autofree char *binary = write_raw(f->dir, "binary", -1, "{\"\xff\xfe\": 1}", NULL, 0);
  assert_load_fails(binary, "not a JSON object");

  struct {
    const char *header;
    gsize data_len;
    const char *needle;
  } cases[] = {
    {"{\"t\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, "dtype F16"},
    {"{\"t\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "only F32"},
    {"{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "no “dtype”"},
    {"{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "no “shape”"},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "no “data_offsets”"},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "data_offsets"},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8, "run past"},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}", 8, "run past"},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "end before"},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-4,4]}}", 8, "non-negative"},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 16, "holds 3 values"},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,8]}}", 16, "holds 4"},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape[0]"},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "shape[0]"},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
     "5 dimensions"},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,8]}}",
     8, "larger than"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 16, "overlap"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16, "overlap"},
    {"{\"t\":[1,2]}", 8, "not an object"},
    {"{\"__metadata__\":{\"k\":1}}", 0, "metadata “k” is not a string"},
    {"{\"__metadata__\":[\"k\"]}", 0, "“__metadata__” is not an object"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *name = g_strdup_printf("case%zu", i);
    g_autofree char *path = write_raw(f->dir, name, -1, cases[i].header, floats,
                                      cases[i].data_len);
    assert_load_fails(path, cases[i].needle);
  }

  /* The mirror image: well-formed files from other writers load. Header padded with
   * spaces, holes and trailing bytes tolerated, metadata only, empty tensors. */
  const char *good[] = {
    "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}       ",
    "{\"__metadata__\":{\"format\":\"pt\"}}",
    "{}",
    "{\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
    "\"t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[4,8]}}",
  };
  for (gsize i = 0; i < G_N_ELEMENTS(good); i++) {
    g_autofree char *name = g_strdup_printf("good%zu", i);
    g_autofree char *path = write_raw(f->dir, name, -1, good[i], floats, 16);
    g_autoptr(GError) error = NULL;
    g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, &error);
    g_assert_no_error(error);
    g_assert_nonnull(ckpt);
  }
}

static void
write_old(const char *path, TdmCheckpoint **out, char **bytes, gsize *len)
{
  *out = sample_checkpoint();
  g_assert_true(tdm_checkpoint_save(*out, path, NULL));
  g_assert_true(g_file_get_contents(path, bytes, len, NULL));
}

static TdmCheckpoint *
big_checkpoint(void)
{
  TdmCheckpoint *ckpt = tdm_checkpoint_new();
  const gint64 shape[1] = {1 << 20};
  g_autofree float *v = pattern(1 << 20, 9);
  tdm_checkpoint_add(ckpt, "big", 1, shape, v);
  return ckpt;
}

/* A folder we may not write to: the save fails before touching the old file. */
static void
test_unwritable(Fixture *f, gconstpointer data)
{
  g_autofree char *path = g_build_filename(f->dir, "c.safetensors", NULL);
  g_autoptr(TdmCheckpoint) old = NULL;
  g_autofree char *before = NULL;
  gsize before_len;
  write_old(path, &old, &before, &before_len);

  g_assert_cmpint(g_chmod(f->dir, 0555), ==, 0);
  if (g_access(f->dir, W_OK) == 0) {
    g_chmod(f->dir, 0755);
    g_test_skip("permissions do not bind here (running as root?)");
    return;
  }
  g_autoptr(TdmCheckpoint) big = big_checkpoint();
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_checkpoint_save(big, path, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT);
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, path));
  g_chmod(f->dir, 0755);

  g_autofree char *after = NULL;
  gsize after_len;
  g_assert_true(g_file_get_contents(path, &after, &after_len, NULL));
  g_assert_cmpmem(before, before_len, after, after_len);
  g_assert_cmpint(dir_count(f->dir), ==, 1);
}

/* A write that fails half-way (here: the file size limit, which binds even for
 * root): the old file stays whole and the temporary file goes. */
static void
test_failed_write(Fixture *f, gconstpointer data)
{
  g_autofree char *path = g_build_filename(f->dir, "d.safetensors", NULL);
  g_autoptr(TdmCheckpoint) old = NULL;
  g_autofree char *before = NULL;
  gsize before_len;
  write_old(path, &old, &before, &before_len);

  struct rlimit saved, small;
  g_assert_cmpint(getrlimit(RLIMIT_FSIZE, &saved), ==, 0);
  small = saved;
  small.rlim_cur = 64 * 1024;
  if (saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur < small.rlim_cur) {
    g_test_skip("the file size limit is already below 64 KiB");
    return;
  }
  void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
  g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &small), ==, 0);

  g_autoptr(TdmCheckpoint) big = big_checkpoint();
  g_autoptr(GError) error = NULL;
  gboolean ok = tdm_checkpoint_save(big, path, &error);

  g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &saved), ==, 0);
  signal(SIGXFSZ, old_handler);

  g_assert_false(ok);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT);
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, path));

  g_autofree char *after = NULL;
  gsize after_len;
  g_assert_true(g_file_get_contents(path, &after, &after_len, NULL));
  g_assert_cmpmem(before, before_len, after, after_len);
  g_assert_cmpint(dir_count(f->dir), ==, 1);

  /* And with the limit lifted the same save goes through. */
  g_assert_true(tdm_checkpoint_save(big, path, NULL));
  g_autoptr(TdmCheckpoint) back = tdm_checkpoint_load(path, NULL);
  assert_same(big, back);
}

static void
test_no_folder(Fixture *f, gconstpointer data)
{
  g_autofree char *path = g_build_filename(f->dir, "no", "such", "e.safetensors", NULL);
  g_autoptr(TdmCheckpoint) ckpt = sample_checkpoint();
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_checkpoint_save(ckpt, path, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT);
  g_assert_nonnull(strstr(error->message, path));
  g_assert_cmpint(dir_count(f->dir), ==, 0);
}

/* PyTorch's safetensors must read what we write, where it is installed. */
static void
test_python(Fixture *f, gconstpointer data)
{
  g_autofree char *python = g_find_program_in_path("python3");
  if (python == NULL) {
    g_test_skip("no python3");
    return;
  }
  int status = 0;
  const char *probe[] = {python, "-c", "import safetensors.numpy", NULL};
  if (!g_spawn_sync(NULL, (char **)probe, NULL, G_SPAWN_STDOUT_TO_DEV_NULL |
                    G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, NULL, NULL, &status, NULL) ||
      !g_spawn_check_wait_status(status, NULL)) {
    g_test_skip("python3 has no safetensors package");
    return;
  }

  g_autofree char *path = g_build_filename(f->dir, "py.safetensors", NULL);
  g_autoptr(TdmCheckpoint) ckpt = sample_checkpoint();
  g_assert_true(tdm_checkpoint_save(ckpt, path, NULL));
  const char *script =
    "import sys\n"
    "from safetensors import safe_open\n"
    "with safe_open(sys.argv[1], framework='numpy') as f:\n"
    "    assert f.metadata()['format'] == 'pt'\n"
    "    w = f.get_tensor('fc1.weight')\n"
    "    assert w.shape == (30, 7) and str(w.dtype) == 'float32'\n"
    "    assert f.get_tensor('conv1.weight').shape == (4, 3, 3, 3)\n"
    "    assert f.get_tensor('step').shape == ()\n"
    "    print(float(w.sum()))\n";
  const char *argv[] = {python, "-c", script, path, NULL};
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                             &err, &status, &error));
  g_test_message("python: %s%s", out, err);
  g_assert_true(g_spawn_check_wait_status(status, NULL));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
#define ADD(path, fn) g_test_add(path, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)
  ADD("/checkpoint/round-trip", test_round_trip);
  ADD("/checkpoint/layout", test_layout);
  ADD("/checkpoint/malformed", test_malformed);
  ADD("/checkpoint/unwritable-folder", test_unwritable);
  ADD("/checkpoint/failed-write", test_failed_write);
  ADD("/checkpoint/no-folder", test_no_folder);
  ADD("/checkpoint/python", test_python);
  return g_test_run();
}
