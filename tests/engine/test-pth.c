/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-pth.c — PyTorch's .pth files through tdm_checkpoint_load(): files torch.save
 * wrote (tests/engine/pth-reference.py: float32, float16, bfloat16, float64 and int64
 * storages, num_batches_tracked, views that are transposed or share a storage at an
 * offset, pickle protocols 2 and 4, a training checkpoint holding a state_dict; each
 * tensor compared bit for bit with torch's own .float()), then archives built here byte
 * by byte: a well-formed one, and each hostile or damaged variant (a global such as
 * os.system, a REDUCE of anything else, opcodes a state_dict never uses, lying sizes
 * and views, deep nesting, every truncation, damaged CRCs, encryption, other
 * compression) refused with a message that names what is wrong, and a view of a few
 * values in a deflated storage of 1 GiB read at the cost of those values. Without
 * python3-torch the torch.save half skips and says so.
 */
#define _GNU_SOURCE   /* memmem */
#include "tdm-checkpoint.h"
#include "tdm-error.h"
#include "tdm-pickle.h"
#include "tdm-zip.h"
#include "checkpoint-compare.h"
#include "remove-tree.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <zlib.h>

#define PYTHON "/usr/bin/python3"

static char *tmp_dir;
static char *ref_dir;
static char *skip_reason;

/* ---- torch.save's files --------------------------------------------------------- */

static gboolean
need_references(void)
{
  if (ref_dir != NULL)
    return TRUE;
  if (skip_reason == NULL) {
    g_autofree char *script = g_test_build_filename(G_TEST_DIST, "pth-reference.py", NULL);
    g_autofree char *dir = g_build_filename(tmp_dir, "torch", NULL);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    const char *argv[] = {PYTHON, script, dir, NULL};
    g_autofree char *out = NULL, *err = NULL;
    int status = 0;
    if (!g_file_test(PYTHON, G_FILE_TEST_IS_EXECUTABLE)) {
      skip_reason = g_strdup("no " PYTHON);
    } else {
      g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                                 &err, &status, NULL));
      if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        skip_reason = g_strdup(g_strstrip(out));
      else if (!g_spawn_check_wait_status(status, NULL))
        g_error("pth-reference.py failed:\n%s%s", out, err);
      else
        ref_dir = g_steal_pointer(&dir);
    }
  }
  if (ref_dir == NULL)
    g_test_skip(skip_reason);
  return ref_dir != NULL;
}

static TdmCheckpoint *
load_ok(const char *path)
{
  g_autoptr(GError) error = NULL;
  TdmCheckpoint *ckpt = tdm_checkpoint_load(path, &error);
  g_assert_no_error(error);
  g_assert_nonnull(ckpt);
  return ckpt;
}

static void
test_torch_files(void)
{
  if (!need_references())
    return;
  g_autofree char *ref_path = g_build_filename(ref_dir, "mixed.ref", NULL);
  g_autoptr(TdmCheckpoint) want = load_ok(ref_path);
  const char *files[] = {"mixed.pth", "mixed-p4.pth"};
  for (gsize i = 0; i < G_N_ELEMENTS(files); i++) {
    g_autofree char *path = g_build_filename(ref_dir, files[i], NULL);
    g_autoptr(TdmCheckpoint) got = load_ok(path);
    assert_same_tensors(got, want);
  }
  /* Values that only an exact conversion keeps. */
  g_autofree char *path = g_build_filename(ref_dir, "mixed.pth", NULL);
  g_autoptr(TdmCheckpoint) got = load_ok(path);
  g_assert_cmpfloat(tdm_checkpoint_get(got, "bn1.num_batches_tracked")->data[0], ==, 1234);
  g_assert_cmpint(tdm_checkpoint_get(got, "bn1.num_batches_tracked")->rank, ==, 0);
  const float *edges = tdm_checkpoint_get(got, "half.edges")->data;
  g_assert_cmpfloat(edges[2], ==, 65504.0f);
  g_assert_true(isinf(edges[3]) && edges[3] > 0 && isinf(edges[4]) && edges[4] < 0);
  g_assert_true(edges[5] == 0 && signbit(edges[5]));
  g_assert_cmpfloat(tdm_checkpoint_get(got, "long.counts")->data[3], ==, 1099511627776.0);
  g_assert_cmpint(tensor_elements(tdm_checkpoint_get(got, "empty.weight")), ==, 0);
}

static void
test_torch_training_checkpoint(void)
{
  if (!need_references())
    return;
  g_autofree char *ref_path = g_build_filename(ref_dir, "mixed.ref", NULL);
  g_autofree char *path = g_build_filename(ref_dir, "nested.pth", NULL);
  g_autoptr(TdmCheckpoint) want = load_ok(ref_path);
  g_autoptr(TdmCheckpoint) got = load_ok(path);
  assert_same_tensors(got, want);
}

/* What load says of path: the message must hold every one of the fragments. */
static void
assert_refused(const char *path, const char *const *fragments)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, &error);
  g_assert_null(ckpt);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT);
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, path));
  for (int i = 0; fragments[i] != NULL; i++)
    if (strstr(error->message, fragments[i]) == NULL)
      g_error("“%s” is not in: %s", fragments[i], error->message);
}

static void
test_torch_other_files(void)
{
  if (!need_references())
    return;
  struct {
    const char *file;
    const char *fragments[3];
  } cases[] = {
    {"module.pth", {"torch.nn.modules.container.Sequential", "model.state_dict()", NULL}},
    {"legacy.pth", {"before PyTorch 1.6", "save it again", NULL}},
    {"script.pt", {"TorchScript", NULL}},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *path = g_build_filename(ref_dir, cases[i].file, NULL);
    assert_refused(path, cases[i].fragments);
  }
}

/* ---- archives built here ---------------------------------------------------------- */

/* A pickle, opcode by opcode. */
typedef GByteArray Pickle;

static void
op(Pickle *p, guint8 code)
{
  g_byte_array_append(p, &code, 1);
}

static void
raw(Pickle *p, const void *bytes, gsize n)
{
  g_byte_array_append(p, bytes, (guint)n);
}

static void
u32(Pickle *p, guint32 v)
{
  guint8 b[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >> 24};
  raw(p, b, 4);
}

static void
str(Pickle *p, const char *s)
{
  op(p, 'X');
  u32(p, (guint32)strlen(s));
  raw(p, s, strlen(s));
}

static void
integer(Pickle *p, guint32 v)
{
  if (v < 256) {
    op(p, 'K');
    op(p, (guint8)v);
  } else {
    op(p, 'J');
    u32(p, v);
  }
}

static void
global(Pickle *p, const char *module, const char *name)
{
  op(p, 'c');
  raw(p, module, strlen(module));
  op(p, '\n');
  raw(p, name, strlen(name));
  op(p, '\n');
}

static void
ints(Pickle *p, int n, const guint32 *v)
{
  op(p, '(');
  for (int i = 0; i < n; i++)
    integer(p, v[i]);
  op(p, 't');
}

/* _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()). */
static void
tensor(Pickle *p, const char *storage_class, const char *key, guint32 numel, guint32 offset,
       int rank, const guint32 *shape, const guint32 *stride)
{
  global(p, "torch._utils", "_rebuild_tensor_v2");
  op(p, '(');
  op(p, '(');
  str(p, "storage");
  global(p, "torch", storage_class);
  str(p, key);
  str(p, "cpu");
  integer(p, numel);
  op(p, 't');
  op(p, 'Q');
  integer(p, offset);
  ints(p, rank, shape);
  ints(p, rank, stride);
  op(p, 0x89);
  global(p, "collections", "OrderedDict");
  op(p, ')');
  op(p, 'R');
  op(p, 't');
  op(p, 'R');
}

static Pickle *
dict_begin(void)
{
  Pickle *p = g_byte_array_new();
  op(p, 0x80);
  op(p, 2);
  global(p, "collections", "OrderedDict");
  op(p, ')');
  op(p, 'R');
  op(p, '(');
  return p;
}

static void
dict_end(Pickle *p)
{
  op(p, 'u');
  op(p, '.');
}

/* A state_dict of two tensors over one float32 storage of 6: "w" [2, 3] and "t", the
 * transposed view of its last four values as [2, 2] (offset 2, strides 1, 2). */
static Pickle *
good_pickle(void)
{
  Pickle *p = dict_begin();
  str(p, "w");
  tensor(p, "FloatStorage", "0", 6, 0, 2, (guint32[]){2, 3}, (guint32[]){3, 1});
  str(p, "t");
  tensor(p, "FloatStorage", "0", 6, 2, 2, (guint32[]){2, 2}, (guint32[]){1, 2});
  dict_end(p);
  return p;
}

static const float good_values[6] = {1.5f, -2.0f, 0.25f, 3.0f, -0.125f, 8.0f};

typedef struct {
  const char *name;
  const void *data;
  gsize size;
  gboolean deflate;
  /* Already deflated (then data is unused, size is the inflated size): */
  const GByteArray *packed;
  guint32 crc;
} Entry;

static void
le(GByteArray *b, guint64 v, int bytes)
{
  for (int i = 0; i < bytes; i++) {
    guint8 c = (guint8)(v >> (8 * i));
    g_byte_array_append(b, &c, 1);
  }
}

/* A zip archive of the entries, as PyTorch lays them out (stored, or deflated). */
static GByteArray *
zip_of(const Entry *entries, int n)
{
  GByteArray *z = g_byte_array_new();
  g_autoptr(GByteArray) directory = g_byte_array_new();
  for (int i = 0; i < n; i++) {
    const Entry *e = &entries[i];
    guint32 crc = e->packed != NULL ? e->crc : (guint32)crc32(0, e->data, (uInt)e->size);
    g_autofree guint8 *packed = NULL;
    gsize packed_size = e->size;
    gboolean deflated = e->deflate || e->packed != NULL;
    if (e->packed != NULL) {
      packed = g_memdup2(e->packed->data, e->packed->len);
      packed_size = e->packed->len;
    } else if (e->deflate) {
      z_stream s = {0};
      g_assert_cmpint(deflateInit2(&s, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), ==,
                      Z_OK);
      packed = g_malloc(deflateBound(&s, e->size));
      s.next_in = (Bytef *)e->data;
      s.avail_in = (uInt)e->size;
      s.next_out = packed;
      s.avail_out = (uInt)deflateBound(&s, e->size);
      g_assert_cmpint(deflate(&s, Z_FINISH), ==, Z_STREAM_END);
      packed_size = s.total_out;
      deflateEnd(&s);
    }
    guint32 offset = z->len;
    le(z, 0x04034b50, 4);
    le(z, 20, 2);
    le(z, 0, 2);
    le(z, deflated ? 8 : 0, 2);
    le(z, 0, 4);
    le(z, crc, 4);
    le(z, packed_size, 4);
    le(z, e->size, 4);
    le(z, strlen(e->name), 2);
    le(z, 0, 2);
    g_byte_array_append(z, (const guint8 *)e->name, (guint)strlen(e->name));
    g_byte_array_append(z, deflated ? packed : e->data, (guint)packed_size);

    le(directory, 0x02014b50, 4);
    le(directory, 20, 2);
    le(directory, 20, 2);
    le(directory, 0, 2);
    le(directory, deflated ? 8 : 0, 2);
    le(directory, 0, 4);
    le(directory, crc, 4);
    le(directory, packed_size, 4);
    le(directory, e->size, 4);
    le(directory, strlen(e->name), 2);
    le(directory, 0, 4);   /* extra and comment lengths */
    le(directory, 0, 4);   /* disk, internal attributes */
    le(directory, 0, 4);   /* external attributes */
    le(directory, offset, 4);
    g_byte_array_append(directory, (const guint8 *)e->name, (guint)strlen(e->name));
  }
  guint32 at = z->len;
  g_byte_array_append(z, directory->data, directory->len);
  le(z, 0x06054b50, 4);
  le(z, 0, 4);
  le(z, n, 2);
  le(z, n, 2);
  le(z, directory->len, 4);
  le(z, at, 4);
  le(z, 0, 2);
  return z;
}

/* The archive of a state_dict whose storage "0" holds `storage`. */
static GByteArray *
archive(Pickle *p, const void *storage, gsize storage_size, gboolean deflate)
{
  Entry entries[] = {
    {"archive/data.pkl", p->data, p->len, deflate},
    {"archive/data/0", storage, storage_size, deflate},
    {"archive/version", "3\n", 2, FALSE},
  };
  return zip_of(entries, G_N_ELEMENTS(entries));
}

static char *
write_file(const char *name, const void *data, gsize size)
{
  char *path = g_build_filename(tmp_dir, name, NULL);
  g_assert_true(g_file_set_contents(path, data, (gssize)size, NULL));
  return path;
}

static void
test_built_archive(void)
{
  for (int deflate = 0; deflate < 2; deflate++) {
    g_autoptr(GByteArray) p = good_pickle();
    g_autoptr(GByteArray) z = archive(p, good_values, sizeof good_values, deflate);
    g_autofree char *path = write_file("good.pth", z->data, z->len);
    g_autoptr(TdmCheckpoint) ckpt = load_ok(path);
    g_assert_cmpint(tdm_checkpoint_count(ckpt), ==, 2);
    const TdmTensor *w = tdm_checkpoint_get(ckpt, "w"), *t = tdm_checkpoint_get(ckpt, "t");
    g_assert_cmpint(w->rank, ==, 2);
    g_assert_cmpint(w->shape[0], ==, 2);
    g_assert_cmpint(w->shape[1], ==, 3);
    g_assert_cmpmem(w->data, 6 * sizeof(float), good_values, sizeof good_values);
    /* t[i][j] = storage[2 + i + 2j]. */
    const float want[4] = {good_values[2], good_values[4], good_values[3], good_values[5]};
    g_assert_cmpmem(t->data, sizeof want, want, sizeof want);
  }
}

/* A tensor's storage is read only when its values are asked for: a tensor nobody
 * uses costs nothing, however large or damaged its storage. Here "unused" views a
 * stored storage whose bytes no longer match their CRC, "count" an int64 storage: the
 * file loads, "w" reads, "unused" fails only when read (naming the CRC), and "count"
 * stays typed as int64, for the matching to refuse it as a weight. */
static void
test_storage_read_when_used(void)
{
  Pickle *p = dict_begin();
  str(p, "w");
  tensor(p, "FloatStorage", "0", 6, 0, 2, (guint32[]){2, 3}, (guint32[]){3, 1});
  str(p, "unused");
  tensor(p, "FloatStorage", "1", 4, 0, 1, (guint32[]){4}, (guint32[]){1});
  str(p, "count");
  tensor(p, "LongStorage", "2", 1, 0, 0, NULL, NULL);
  dict_end(p);
  static const char unused[16] = "UNREAD-STORAGE!";
  const gint64 count = 7;
  Entry entries[] = {
    {"archive/data.pkl", p->data, p->len, FALSE},
    {"archive/data/0", good_values, sizeof good_values, FALSE},
    {"archive/data/1", unused, sizeof unused, FALSE},
    {"archive/data/2", &count, sizeof count, FALSE},
  };
  g_autoptr(GByteArray) z = zip_of(entries, G_N_ELEMENTS(entries));
  g_byte_array_unref(p);
  guint8 *at = memmem(z->data, z->len, unused, sizeof unused);
  g_assert_nonnull(at);
  at[0] = 'X';
  g_autofree char *path = write_file("unread.pth", z->data, z->len);
  g_autoptr(TdmCheckpoint) ckpt = load_ok(path);
  g_assert_cmpint(tdm_checkpoint_count(ckpt), ==, 3);
  const TdmTensor *w = tdm_checkpoint_get(ckpt, "w");
  g_assert_nonnull(w);
  g_assert_cmpmem(w->data, sizeof good_values, good_values, sizeof good_values);
  const TdmTensor *bad = tdm_checkpoint_find(ckpt, "unused");
  g_assert_nonnull(bad);
  g_assert_cmpint(bad->shape[0], ==, 4);
  g_assert_null(bad->data);
  g_autoptr(GError) error = NULL;
  g_assert_null(tdm_checkpoint_values(ckpt, bad, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT);
  g_assert_nonnull(strstr(error->message, "“unused”"));
  g_assert_nonnull(strstr(error->message, "CRC"));
  const TdmTensor *c = tdm_checkpoint_get(ckpt, "count");
  g_assert_nonnull(c);
  g_assert_cmpint(c->type, ==, TDM_TENSOR_I64);
  g_assert_cmpfloat(c->data[0], ==, 7);
  g_assert_cmpint(tdm_checkpoint_find(ckpt, "w")->type, ==, TDM_TENSOR_F32);
}

/* Raw deflate of `piece`, appended to out; Z_FULL_FLUSH leaves the stream byte-aligned
 * and forgets the history, so the same piece deflates to the same bytes every time. */
static void
deflate_piece(z_stream *s, const guint8 *piece, gsize size, int flush, GByteArray *out)
{
  guint8 buffer[1 << 16];
  s->next_in = (Bytef *)piece;
  s->avail_in = (uInt)size;
  int status;
  do {
    s->next_out = buffer;
    s->avail_out = sizeof buffer;
    status = deflate(s, flush);
    g_assert_true(status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR);
    g_byte_array_append(out, buffer, (guint)(sizeof buffer - s->avail_out));
  } while (s->avail_out == 0 || (flush == Z_FINISH && status != Z_STREAM_END));
}

#define HUGE_PIECE ((gsize)1 << 20)
/* What a read may hold beyond the view's own bytes: the buffer the bytes before it
 * pass through (tdm-zip.c's SKIP_BUFFER). */
#define SKIP_ALLOWANCE ((guint64)256 * 1024)

/* A deflated storage of `pieces` MiB of float32 zeros but for its first four values
 * and its last four: the piece of zeros is deflated once and repeated (a full flush
 * makes that a valid stream), so the test never holds the storage it describes. */
static GByteArray *
huge_deflated_storage(int pieces, const float head[4], const float tail[4], guint32 *crc)
{
  g_autofree guint8 *piece = g_malloc0(HUGE_PIECE);
  GByteArray *out = g_byte_array_new();
  g_autoptr(GByteArray) zeros = g_byte_array_new(), again = g_byte_array_new();
  z_stream s = {0};
  g_assert_cmpint(deflateInit2(&s, 1, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), ==, Z_OK);
  memcpy(piece, head, 4 * sizeof(float));
  deflate_piece(&s, piece, HUGE_PIECE, Z_FULL_FLUSH, out);
  *crc = (guint32)crc32(0, piece, HUGE_PIECE);
  memset(piece, 0, HUGE_PIECE);
  deflate_piece(&s, piece, HUGE_PIECE, Z_FULL_FLUSH, zeros);
  deflate_piece(&s, piece, HUGE_PIECE, Z_FULL_FLUSH, again);
  g_assert_cmpmem(zeros->data, zeros->len, again->data, again->len);
  uLong zeros_crc = crc32(0, piece, HUGE_PIECE);
  for (int i = 1; i < pieces - 1; i++) {
    g_byte_array_append(out, zeros->data, zeros->len);
    *crc = (guint32)crc32_combine(*crc, zeros_crc, HUGE_PIECE);
  }
  memcpy(piece + HUGE_PIECE - 4 * sizeof(float), tail, 4 * sizeof(float));
  deflate_piece(&s, piece, HUGE_PIECE, Z_FINISH, out);
  *crc = (guint32)crc32(*crc, piece, HUGE_PIECE);
  deflateEnd(&s);
  return out;
}

/* The checkpoint of three views of such a storage: "head" its first four values as
 * [2, 2], "tail" its last four, "near" three values 1 MiB in; crc_flip damages the
 * CRC the directory gives. */
static TdmCheckpoint *
load_huge_views(int pieces, guint32 crc_flip, const float head[4], const float tail[4])
{
  const guint32 numel = (guint32)pieces * (HUGE_PIECE / sizeof(float));
  guint32 crc;
  g_autoptr(GByteArray) storage = huge_deflated_storage(pieces, head, tail, &crc);
  g_test_message("%u float32 values deflated to %u bytes", numel, storage->len);
  g_autoptr(GByteArray) p = dict_begin();
  str(p, "head");
  tensor(p, "FloatStorage", "0", numel, 0, 2, (guint32[]){2, 2}, (guint32[]){2, 1});
  str(p, "tail");
  tensor(p, "FloatStorage", "0", numel, numel - 4, 1, (guint32[]){4}, (guint32[]){1});
  str(p, "near");
  tensor(p, "FloatStorage", "0", numel, HUGE_PIECE / sizeof(float), 1, (guint32[]){3},
         (guint32[]){1});
  dict_end(p);
  Entry entries[] = {
    {"archive/data.pkl", p->data, p->len, FALSE, NULL, 0},
    {"archive/data/0", NULL, (gsize)numel * sizeof(float), TRUE, storage, crc ^ crc_flip},
  };
  g_autoptr(GByteArray) z = zip_of(entries, G_N_ELEMENTS(entries));
  g_autofree char *path = write_file("huge-view.pth", z->data, z->len);
  return load_ok(path);
}

/* A few values viewed in a deflated storage of 1 GiB (a file of 4.6 MB): each view
 * inflates only as far as it reaches, keeping its own bytes and passing those before
 * it through a small buffer, so the reader's largest allocation stays the view's size
 * (and that buffer), not the storage's. The view that reaches the end inflates the
 * whole stream and checks the CRC: damaged (in a storage of 4 MiB, for time), that
 * view is refused, while one that stops earlier cannot see it and loads. */
static void
test_view_of_huge_deflated_storage(void)
{
  const float head[4] = {1.5f, -2.0f, 0.25f, 3.0f}, tail[4] = {-0.125f, 8.0f, 6.0f, -7.0f};
  g_autoptr(TdmCheckpoint) ckpt = load_huge_views(1024, 0, head, tail);
  tdm_zip_peak_bytes(TRUE);
  const TdmTensor *h = tdm_checkpoint_get(ckpt, "head");
  g_assert_nonnull(h);
  g_assert_cmpmem(h->data, sizeof head, head, sizeof head);
  g_assert_cmpuint(tdm_zip_peak_bytes(TRUE), ==, sizeof head);
  const TdmTensor *n = tdm_checkpoint_get(ckpt, "near");
  g_assert_nonnull(n);
  g_assert_true(n->data[0] == 0 && n->data[1] == 0 && n->data[2] == 0);
  g_assert_cmpuint(tdm_zip_peak_bytes(FALSE), >=, 3 * sizeof(float));
  g_assert_cmpuint(tdm_zip_peak_bytes(TRUE), <=, 3 * sizeof(float) + SKIP_ALLOWANCE);
  const TdmTensor *t = tdm_checkpoint_get(ckpt, "tail");
  g_assert_nonnull(t);
  g_assert_cmpmem(t->data, sizeof tail, tail, sizeof tail);
  g_assert_cmpuint(tdm_zip_peak_bytes(FALSE), >=, sizeof tail);
  g_assert_cmpuint(tdm_zip_peak_bytes(TRUE), <=, sizeof tail + SKIP_ALLOWANCE);

  g_autoptr(TdmCheckpoint) damaged = load_huge_views(4, 1, head, tail);
  g_assert_cmpmem(tdm_checkpoint_get(damaged, "near")->data, 3 * sizeof(float),
                  (float[3]){0}, 3 * sizeof(float));
  g_autoptr(GError) error = NULL;
  g_assert_null(tdm_checkpoint_values(damaged, tdm_checkpoint_find(damaged, "tail"), &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT);
  g_assert_nonnull(strstr(error->message, "CRC"));
  g_assert_nonnull(strstr(error->message, "“tail”"));
}

/* The archive with pickle p over the good storage must be refused, naming each of
 * the fragments. */
static void
assert_pickle_refused(Pickle *p, const char *const *fragments)
{
  g_autoptr(GByteArray) z = archive(p, good_values, sizeof good_values, FALSE);
  g_autofree char *path = write_file("hostile.pth", z->data, z->len);
  assert_refused(path, fragments);
}

static void
test_hostile_globals(void)
{
  /* os.system, the classic: refused by name before anything is called. */
  g_autoptr(GByteArray) a = dict_begin();
  str(a, "w");
  global(a, "posix", "system");
  str(a, "echo hello");
  op(a, 0x85);
  op(a, 'R');
  dict_end(a);
  assert_pickle_refused(a, (const char *[]){"“posix.system”", "runs nothing", NULL});

  g_autoptr(GByteArray) b = dict_begin();
  op(b, 0x8c);
  op(b, 8);
  raw(b, "builtins", 8);
  op(b, 0x8c);
  op(b, 4);
  raw(b, "eval", 4);
  op(b, 0x93);
  dict_end(b);
  assert_pickle_refused(b, (const char *[]){"“builtins.eval”", "STACK_GLOBAL", NULL});

  /* A REDUCE of an allowed global that a state_dict never calls. */
  g_autoptr(GByteArray) c = dict_begin();
  str(c, "w");
  global(c, "torch", "FloatStorage");
  op(c, ')');
  op(c, 'R');
  dict_end(c);
  assert_pickle_refused(c, (const char *[]){"calls torch.FloatStorage directly", "REDUCE", NULL});

  /* A REDUCE of something that is not a global at all. */
  g_autoptr(GByteArray) d = dict_begin();
  str(d, "w");
  str(d, "callable?");
  op(d, ')');
  op(d, 'R');
  dict_end(d);
  assert_pickle_refused(d, (const char *[]){"calls a str", NULL});

  /* An OrderedDict built from arguments, and BUILD on something else. */
  g_autoptr(GByteArray) e = dict_begin();
  global(e, "collections", "OrderedDict");
  op(e, ']');
  op(e, 0x85);
  op(e, 'R');
  dict_end(e);
  assert_pickle_refused(e, (const char *[]){"made from arguments", NULL});

  g_autoptr(GByteArray) f = dict_begin();
  op(f, ']');
  op(f, '}');
  op(f, 'b');
  dict_end(f);
  assert_pickle_refused(f, (const char *[]){"state of a list", "BUILD", NULL});
}

static void
test_hostile_opcodes(void)
{
  /* INST and OBJ create instances; PERSID is the text form; EXT1 the extension
   * registry: none is in a state_dict. */
  const struct {
    const char *bytes;
    gsize length;
    const char *name;
  } cases[] = {
    {"iposix\nsystem\n", 14, "INST"},
    {"o", 1, "OBJ"},
    {"Pfoo\n", 5, "PERSID"},
    {"\x82\x01", 2, "EXT1"},
    {"\x81", 1, "NEWOBJ"},
    {"\xff", 1, "0xff"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GByteArray) p = dict_begin();
    raw(p, cases[i].bytes, cases[i].length);
    dict_end(p);
    assert_pickle_refused(p, (const char *[]){cases[i].name, NULL});
  }
  /* A persistent id that is not a storage's. */
  g_autoptr(GByteArray) q = dict_begin();
  str(q, "w");
  op(q, '(');
  str(q, "module");
  str(q, "x");
  op(q, 't');
  op(q, 'Q');
  dict_end(q);
  assert_pickle_refused(q, (const char *[]){"not a storage's", NULL});
  /* The memo read where it was never written; an integer of 9 bytes. */
  g_autoptr(GByteArray) r = dict_begin();
  op(r, 'h');
  op(r, 77);
  dict_end(r);
  assert_pickle_refused(r, (const char *[]){"memo entry 77", NULL});
  g_autoptr(GByteArray) s = dict_begin();
  raw(s, "\x8a\x09" "123456789", 11);
  dict_end(s);
  assert_pickle_refused(s, (const char *[]){"integer of 9 bytes", NULL});
}

static void
test_deep_nesting(void)
{
  /* MARKs without end, then lists nested by APPEND: both stop at the bound. */
  g_autoptr(GByteArray) a = dict_begin();
  for (int i = 0; i < 100000; i++)
    op(a, '(');
  assert_pickle_refused(a, (const char *[]){"more than 64 deep", NULL});

  g_autoptr(GByteArray) b = dict_begin();
  op(b, ']');
  for (int i = 0; i < 100000; i++)
    op(b, 0x85);   /* TUPLE1: the value so far inside a tuple */
  dict_end(b);
  assert_pickle_refused(b, (const char *[]){"more than 64 deep", NULL});

  /* A list appended to itself through the memo: a cycle, which nothing walks. */
  g_autoptr(GByteArray) c = dict_begin();
  str(c, "w");
  tensor(c, "FloatStorage", "0", 6, 0, 1, (guint32[]){6}, (guint32[]){1});
  str(c, "loop");
  op(c, ']');
  op(c, 'q');
  op(c, 1);
  op(c, 'h');
  op(c, 1);
  op(c, 'a');
  dict_end(c);
  g_autoptr(GByteArray) z = archive(c, good_values, sizeof good_values, FALSE);
  g_autofree char *path = write_file("cycle.pth", z->data, z->len);
  g_autoptr(TdmCheckpoint) ckpt = load_ok(path);
  g_assert_cmpint(tdm_checkpoint_count(ckpt), ==, 1);
}

static void
test_lying_sizes(void)
{
  /* A storage said to hold 1000 floats, and a view past the 6 there are. */
  g_autoptr(GByteArray) a = dict_begin();
  str(a, "w");
  tensor(a, "FloatStorage", "0", 1000, 0, 1, (guint32[]){6}, (guint32[]){1});
  dict_end(a);
  assert_pickle_refused(a, (const char *[]){"“w”", "24 bytes", "1000 elements", NULL});

  g_autoptr(GByteArray) b = dict_begin();
  str(b, "w");
  tensor(b, "FloatStorage", "0", 6, 2, 2, (guint32[]){2, 3}, (guint32[]){3, 1});
  dict_end(b);
  assert_pickle_refused(b, (const char *[]){"“w”", "reach past the 6 elements", NULL});

  /* Strides of zero would make 2³² values of one: refused, nothing allocated. */
  g_autoptr(GByteArray) c = dict_begin();
  str(c, "w");
  tensor(c, "FloatStorage", "0", 6, 0, 2, (guint32[]){65536, 65536}, (guint32[]){0, 0});
  dict_end(c);
  assert_pickle_refused(c, (const char *[]){"“w”", "reach past", NULL});

  /* A storage the archive does not have, and one of a type Tandem does not read. */
  g_autoptr(GByteArray) d = dict_begin();
  str(d, "w");
  tensor(d, "FloatStorage", "7", 6, 0, 1, (guint32[]){6}, (guint32[]){1});
  dict_end(d);
  assert_pickle_refused(d, (const char *[]){"archive/data/7", NULL});

  g_autoptr(GByteArray) e = dict_begin();
  str(e, "w");
  tensor(e, "ByteStorage", "0", 24, 0, 1, (guint32[]){24}, (guint32[]){1});
  dict_end(e);
  assert_pickle_refused(e, (const char *[]){"torch.ByteStorage", NULL});

  g_autoptr(GByteArray) f = dict_begin();
  str(f, "w");
  tensor(f, "FloatStorage", "0", 6, 0, 5, (guint32[]){1, 1, 1, 1, 6},
         (guint32[]){6, 6, 6, 6, 1});
  dict_end(f);
  assert_pickle_refused(f, (const char *[]){"5 dimensions", NULL});

  /* A string whose length runs past the pickle. */
  g_autoptr(GByteArray) g = dict_begin();
  op(g, 'X');
  u32(g, 0x7fffffff);
  assert_pickle_refused(g, (const char *[]){"truncated", NULL});
}

/* Offsets in the archive archive() builds, for damaging it. */
static guint32
read_le32(const guint8 *p)
{
  return (guint32)p[0] | (guint32)p[1] << 8 | (guint32)p[2] << 16 | (guint32)p[3] << 24;
}

static void
test_damaged_archives(void)
{
  g_autoptr(GByteArray) p = good_pickle();
  g_autoptr(GByteArray) z = archive(p, good_values, sizeof good_values, FALSE);
  gsize end = z->len - 22, directory = read_le32(z->data + end + 16);

  /* Every truncation fails cleanly, with a message, and never crashes. */
  for (gsize n = 0; n < z->len; n++) {
    g_autofree char *path = write_file("cut.pth", z->data, n);
    g_autoptr(GError) error = NULL;
    g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, &error);
    g_assert_null(ckpt);
    g_assert_nonnull(error);
    g_assert_cmpstr(error->message, !=, "");
  }

  struct {
    gsize at, also;        /* the bytes changed (also: 0 for none) */
    guint8 value;
    const char *fragment;
  } cases[] = {
    {30 + 16, 0, 'Y', "CRC-32"},                    /* a byte of data.pkl */
    {directory + 8, 0, 1, "encrypted"},             /* data.pkl's flags */
    {directory + 10, 0, 12, "zip method 12"},       /* bzip2 */
    {end + 19, 0, 0x7f, "zip directory"},           /* the directory's offset */
    {end + 9, end + 11, 0x7f, "entries"},           /* the entry counts */
    {end + 8, 0, 0x02, "several disks"},            /* entries on this disk */
    {directory + 42, 0, 0x7f, "no local header"},   /* data.pkl's local header offset */
    {directory + 24, 0, 0x7f, "sizes differ"},      /* data.pkl's size */
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GByteArray) bad = g_byte_array_new();
    g_byte_array_append(bad, z->data, z->len);
    bad->data[cases[i].at] = cases[i].value;
    if (cases[i].also != 0)
      bad->data[cases[i].also] = cases[i].value;
    g_autofree char *path = write_file("damaged.pth", bad->data, bad->len);
    assert_refused(path, (const char *[]){cases[i].fragment, NULL});
  }

  /* Two entries of one name; an archive without data.pkl. */
  Entry twice[] = {
    {"archive/data.pkl", p->data, p->len, FALSE},
    {"archive/data.pkl", p->data, p->len, FALSE},
  };
  g_autoptr(GByteArray) dup = zip_of(twice, 2);
  g_autofree char *dup_path = write_file("twice.pth", dup->data, dup->len);
  assert_refused(dup_path, (const char *[]){"two entries are named “archive/data.pkl”", NULL});
  Entry other[] = {{"archive/notes.txt", "hello", 5, FALSE}};
  g_autoptr(GByteArray) zip = zip_of(other, 1);
  g_autofree char *zip_path = write_file("other.zip", zip->data, zip->len);
  assert_refused(zip_path, (const char *[]){"without data.pkl", NULL});
}

/* The pickle reader alone, on what is not a state_dict. */
static void
test_not_a_state_dict(void)
{
  const struct {
    const char *bytes;
    gsize length;
    const char *fragment;
  } cases[] = {
    {"\x80\x02K\x05.", 5, "of type int"},
    {"\x80\x02}.", 4, "holds no tensors"},
    {"\x80\x02(.", 4, "MARK still open"},
    {"\x80\x09}.", 4, "pickle protocol 9"},
    {"\x80\x02", 2, "truncated"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) tensors =
        tdm_pickle_read_state_dict((const guint8 *)cases[i].bytes, cases[i].length, &error);
    g_assert_null(tensors);
    g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT);
    if (strstr(error->message, cases[i].fragment) == NULL)
      g_error("“%s” is not in: %s", cases[i].fragment, error->message);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  tmp_dir = g_dir_make_tmp("tandem-pth-XXXXXX", NULL);
  g_test_add_func("/pth/torch-files", test_torch_files);
  g_test_add_func("/pth/torch-training-checkpoint", test_torch_training_checkpoint);
  g_test_add_func("/pth/torch-other-files", test_torch_other_files);
  g_test_add_func("/pth/built-archive", test_built_archive);
  g_test_add_func("/pth/storage-read-when-used", test_storage_read_when_used);
  g_test_add_func("/pth/view-of-huge-deflated-storage", test_view_of_huge_deflated_storage);
  g_test_add_func("/pth/hostile-globals", test_hostile_globals);
  g_test_add_func("/pth/hostile-opcodes", test_hostile_opcodes);
  g_test_add_func("/pth/deep-nesting", test_deep_nesting);
  g_test_add_func("/pth/lying-sizes", test_lying_sizes);
  g_test_add_func("/pth/damaged-archives", test_damaged_archives);
  g_test_add_func("/pth/not-a-state-dict", test_not_a_state_dict);
  int status = g_test_run();
  test_remove_tree(tmp_dir);
  g_free(tmp_dir);
  g_free(ref_dir);
  g_free(skip_reason);
  return status;
}
