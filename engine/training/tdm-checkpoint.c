/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-checkpoint.c — reads and writes safetensors files of float32 tensors.
 *
 * Writing goes to a hidden temporary file beside the target, is flushed to disk and
 * renamed over it, so readers see the old checkpoint or the new one, never half of
 * one. Reading trusts nothing: every header field is checked against the file before
 * any tensor is looked at, and the file is mapped, so a tensor's values are read only
 * when someone asks for them. Which tensors a checkpoint holds is the trainer's
 * business.
 */
#include "tdm-checkpoint-private.h"
#include "tdm-i18n.h"
#include "tdm-json.h"
#include "tdm-error.h"
#include "tdm-file.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* safetensors' own readers refuse headers past 100 MB; so do we, before allocating. */
#define TDM_CHECKPOINT_MAX_HEADER (100 * 1000 * 1000)

struct _TdmCheckpoint {
  GMappedFile *file;       /* a loaded checkpoint's bytes, or NULL */
  GPtrArray *tensors;      /* Tensor *, in insertion order = file order */
  GHashTable *by_name;     /* name → TdmTensor * (borrowed) */
  GPtrArray *meta_keys;    /* insertion order, for a stable header */
  GHashTable *metadata;    /* key → value, both owned */
};

/* A tensor and where its values come from. */
typedef struct {
  TdmTensor t;             /* first: the TdmTensor * handed out is this */
  const char *src;         /* a loaded tensor's bytes in the mapping; NULL when added */
  TdmTensorReader read;    /* or what reads its values (a .pth file's), with source */
  gpointer source;
  GDestroyNotify source_free;
  gboolean owned;          /* t.data was allocated here (added, or converted) */
} Tensor;

static void
tensor_free(gpointer p)
{
  Tensor *t = p;
  g_free(t->t.name);
  if (t->owned)
    g_free(t->t.data);
  if (t->source_free != NULL)
    t->source_free(t->source);
  g_free(t);
}

static gint64
tensor_elements(int rank, const gint64 *shape)
{
  gint64 n = 1;
  for (int i = 0; i < rank; i++)
    n *= shape[i];
  return n;
}

TdmCheckpoint *
tdm_checkpoint_new(void)
{
  TdmCheckpoint *ckpt = g_new0(TdmCheckpoint, 1);
  ckpt->tensors = g_ptr_array_new_with_free_func(tensor_free);
  ckpt->by_name = g_hash_table_new(g_str_hash, g_str_equal);
  ckpt->meta_keys = g_ptr_array_new();
  ckpt->metadata = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  return ckpt;
}

void
tdm_checkpoint_free(TdmCheckpoint *ckpt)
{
  if (ckpt == NULL)
    return;
  g_hash_table_unref(ckpt->by_name);
  g_ptr_array_unref(ckpt->tensors);
  g_ptr_array_unref(ckpt->meta_keys);   /* borrows the keys owned by metadata */
  g_hash_table_unref(ckpt->metadata);
  if (ckpt->file != NULL)
    g_mapped_file_unref(ckpt->file);
  g_free(ckpt);
}

/* Takes ownership of `data`, or reads the values at `src` when asked. A second tensor
 * of the same name replaces the first in its place: a JSON header cannot hold two
 * members of one name. */
static Tensor *
checkpoint_take(TdmCheckpoint *ckpt, const char *name, int rank, const gint64 *shape,
                TdmTensorType type, float *data, const char *src)
{
  Tensor *t = g_new0(Tensor, 1);
  t->t.name = g_strdup(name);
  t->t.rank = rank;
  for (int i = 0; i < rank; i++)
    t->t.shape[i] = shape[i];
  t->t.type = type;
  t->t.data = data;
  t->owned = data != NULL;
  t->src = src;

  Tensor *old = g_hash_table_lookup(ckpt->by_name, name);
  if (old != NULL) {
    guint index;
    g_assert(g_ptr_array_find(ckpt->tensors, old, &index));
    g_hash_table_remove(ckpt->by_name, name);
    tensor_free(ckpt->tensors->pdata[index]);
    ckpt->tensors->pdata[index] = t;
  } else {
    g_ptr_array_add(ckpt->tensors, t);
  }
  g_hash_table_insert(ckpt->by_name, t->t.name, t);
  return t;
}

void
tdm_checkpoint_take_reader(TdmCheckpoint *ckpt, const char *name, int rank, const gint64 *shape,
                           TdmTensorType type, TdmTensorReader read, gpointer source,
                           GDestroyNotify source_free)
{
  Tensor *t = checkpoint_take(ckpt, name, rank, shape, type, NULL, NULL);
  t->read = read;
  t->source = source;
  t->source_free = source_free;
}

void
tdm_checkpoint_add(TdmCheckpoint *ckpt, const char *name, int rank, const gint64 *shape,
                   const float *data)
{
  g_return_if_fail(ckpt != NULL);
  g_return_if_fail(name != NULL && *name != '\0');
  g_return_if_fail(!g_str_equal(name, "__metadata__"));
  g_return_if_fail(rank >= 0 && rank <= 4);
  g_return_if_fail(rank == 0 || shape != NULL);
  for (int i = 0; i < rank; i++)
    g_return_if_fail(shape[i] >= 0);

  gint64 n = tensor_elements(rank, shape);
  g_return_if_fail(n == 0 || data != NULL);
  checkpoint_take(ckpt, name, rank, shape, TDM_TENSOR_F32,
                  n ? g_memdup2(data, (gsize)n * sizeof(float)) : NULL, NULL);
}

void
tdm_checkpoint_set_metadata(TdmCheckpoint *ckpt, const char *key, const char *value)
{
  g_return_if_fail(ckpt != NULL);
  g_return_if_fail(key != NULL);
  g_return_if_fail(value != NULL);

  if (!g_hash_table_contains(ckpt->metadata, key)) {
    char *owned = g_strdup(key);
    g_hash_table_insert(ckpt->metadata, owned, g_strdup(value));
    g_ptr_array_add(ckpt->meta_keys, owned);
  } else {
    g_hash_table_insert(ckpt->metadata, g_strdup(key), g_strdup(value));
    /* g_hash_table_insert keeps the old key, so meta_keys stays valid. */
  }
}

const TdmTensor *
tdm_checkpoint_find(TdmCheckpoint *ckpt, const char *name)
{
  g_return_val_if_fail(ckpt != NULL, NULL);
  g_return_val_if_fail(name != NULL, NULL);
  return g_hash_table_lookup(ckpt->by_name, name);
}

const float *
tdm_checkpoint_values(TdmCheckpoint *ckpt, const TdmTensor *tensor, GError **error)
{
  /* What a tensor of no values points at: not NULL, which means failure. */
  static const float none[1];
  g_return_val_if_fail(ckpt != NULL && tensor != NULL, NULL);
  Tensor *t = (Tensor *)tensor;
  gint64 count = tensor_elements(t->t.rank, t->t.shape);
  if (t->t.data != NULL || count == 0)
    return t->t.data != NULL ? t->t.data : none;
  if (t->read != NULL) {
    t->t.data = t->read(t->source, error);
    t->owned = t->t.data != NULL;
    return t->t.data;
  }
  g_return_val_if_fail(t->src != NULL, NULL);
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
  if (t->t.type == TDM_TENSOR_F32 && (guintptr)t->src % G_ALIGNOF(float) == 0) {
    t->t.data = (float *)t->src;   /* the mapping is read-only, and so is data */
    return t->t.data;
  }
#endif
  float *out = g_try_new(float, count);
  if (out == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("tensor “%s”: no memory for its %lld values"), t->t.name,
                (long long)count);
    return NULL;
  }
  for (gint64 i = 0; i < count; i++) {
    if (t->t.type == TDM_TENSOR_I64) {
      gint64 v;
      memcpy(&v, t->src + 8 * i, 8);
      out[i] = (float)GINT64_FROM_LE(v);
    } else {
      guint32 v;
      memcpy(&v, t->src + 4 * i, 4);
      v = GUINT32_FROM_LE(v);
      memcpy(&out[i], &v, 4);
    }
  }
  t->t.data = out;
  t->owned = TRUE;
  return out;
}

const TdmTensor *
tdm_checkpoint_get(TdmCheckpoint *ckpt, const char *name)
{
  const TdmTensor *t = tdm_checkpoint_find(ckpt, name);
  return t != NULL && tdm_checkpoint_values(ckpt, t, NULL) != NULL ? t : NULL;
}

const char *
tdm_checkpoint_get_metadata(TdmCheckpoint *ckpt, const char *key)
{
  g_return_val_if_fail(ckpt != NULL, NULL);
  g_return_val_if_fail(key != NULL, NULL);
  return g_hash_table_lookup(ckpt->metadata, key);
}

int
tdm_checkpoint_count(TdmCheckpoint *ckpt)
{
  g_return_val_if_fail(ckpt != NULL, 0);
  return (int)ckpt->tensors->len;
}

const TdmTensor *
tdm_checkpoint_nth(TdmCheckpoint *ckpt, int index)
{
  g_return_val_if_fail(ckpt != NULL, NULL);
  g_return_val_if_fail(index >= 0 && (guint)index < ckpt->tensors->len, NULL);
  const TdmTensor *t = ckpt->tensors->pdata[index];
  return tdm_checkpoint_values(ckpt, t, NULL) != NULL ? t : NULL;
}

const char *
tdm_checkpoint_nth_name(TdmCheckpoint *ckpt, int index)
{
  g_return_val_if_fail(ckpt != NULL, NULL);
  g_return_val_if_fail(index >= 0 && (guint)index < ckpt->tensors->len, NULL);
  return ((const TdmTensor *)ckpt->tensors->pdata[index])->name;
}

/* Writing. */

static char *
header_json(TdmCheckpoint *ckpt)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  if (ckpt->meta_keys->len > 0) {
    json_builder_set_member_name(b, "__metadata__");
    json_builder_begin_object(b);
    for (guint i = 0; i < ckpt->meta_keys->len; i++) {
      const char *key = ckpt->meta_keys->pdata[i];
      json_builder_set_member_name(b, key);
      json_builder_add_string_value(b, g_hash_table_lookup(ckpt->metadata, key));
    }
    json_builder_end_object(b);
  }
  gint64 offset = 0;
  for (guint i = 0; i < ckpt->tensors->len; i++) {
    const TdmTensor *t = ckpt->tensors->pdata[i];
    /* Every tensor is written as float32, counters read from int64 included. */
    gint64 bytes = tensor_elements(t->rank, t->shape) * (gint64)sizeof(float);
    json_builder_set_member_name(b, t->name);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "dtype");
    json_builder_add_string_value(b, "F32");
    json_builder_set_member_name(b, "shape");
    json_builder_begin_array(b);
    for (int d = 0; d < t->rank; d++)
      json_builder_add_int_value(b, t->shape[d]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "data_offsets");
    json_builder_begin_array(b);
    json_builder_add_int_value(b, offset);
    json_builder_add_int_value(b, offset + bytes);
    json_builder_end_array(b);
    json_builder_end_object(b);
    offset += bytes;
  }
  json_builder_end_object(b);

  g_autoptr(JsonNode) root = json_builder_get_root(b);
  return tdm_json_to_string(root);
}

static gboolean
write_floats(int fd, const float *data, gint64 count)
{
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
  return tdm_file_write_all(fd, data, (size_t)count * sizeof(float));
#else
  guint32 chunk[4096];
  for (gint64 done = 0; done < count;) {
    gint64 n = MIN(count - done, (gint64)G_N_ELEMENTS(chunk));
    for (gint64 i = 0; i < n; i++) {
      guint32 v;
      memcpy(&v, data + done + i, sizeof v);
      chunk[i] = GUINT32_TO_LE(v);
    }
    if (!tdm_file_write_all(fd, chunk, (size_t)n * sizeof(float)))
      return FALSE;
    done += n;
  }
  return TRUE;
#endif
}

static gboolean
save_failed(GError **error, const char *path, const char *what, int err)
{
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
              _("checkpoint %s: cannot %s: %s"), path, what, g_strerror(err));
  return FALSE;
}

/* A save renames over path: onto a dangling link that would replace the link, not
 * write where it points. */
static gboolean
refuse_dangling(const char *path, GError **error)
{
  return tdm_file_check_not_dangling(path, _("checkpoint "), TDM_ENGINE_ERROR_CHECKPOINT,
                                     error);
}

gboolean
tdm_checkpoint_check_writable(const char *path, GError **error)
{
  if (!refuse_dangling(path, error))
    return FALSE;
  g_return_val_if_fail(path != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("checkpoint %s: is a folder, not a file"), path);
    return FALSE;
  }
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("checkpoint %s: exists and is not a regular file; a save would replace it"),
                path);
    return FALSE;
  }
  g_autofree char *dir = g_path_get_dirname(path);
  g_autofree char *base = g_path_get_basename(path);
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("checkpoint %s: cannot save there: the folder %s does not exist"), path, dir);
    return FALSE;
  }
  g_autofree char *tmp_path = NULL;
  int fd = tdm_file_create_temp(dir, base, &tmp_path);
  if (fd < 0) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("checkpoint %s: cannot save there: cannot create a file in %s: %s"), path, dir,
                g_strerror(errno));
    return FALSE;
  }
  close(fd);
  g_unlink(tmp_path);
  return TRUE;
}

gboolean
tdm_checkpoint_save(TdmCheckpoint *ckpt, const char *path, GError **error)
{
  g_return_val_if_fail(ckpt != NULL, FALSE);
  g_return_val_if_fail(path != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  g_autofree char *json = header_json(ckpt);
  size_t json_len = strlen(json);
  /* Spaces, as safetensors pads, so the data starts 8-byte aligned. */
  size_t header_len = (json_len + 7) & ~(size_t)7;
  g_autofree char *header = g_malloc(8 + header_len);
  guint64 le_len = GUINT64_TO_LE((guint64)header_len);
  memcpy(header, &le_len, 8);
  memcpy(header + 8, json, json_len);
  memset(header + 8 + json_len, ' ', header_len - json_len);

  if (!refuse_dangling(path, error))
    return FALSE;
  g_autofree char *tmp_path = NULL;
  int fd = tdm_file_create_temp_beside(path, &tmp_path);
  if (fd < 0)
    return save_failed(error, path, _("create a temporary file in its folder"), errno);

  const char *what = "write";
  gboolean ok = tdm_file_write_all(fd, header, 8 + header_len);
  for (guint i = 0; ok && i < ckpt->tensors->len; i++) {
    const TdmTensor *t = ckpt->tensors->pdata[i];
    const float *values = tdm_checkpoint_values(ckpt, t, NULL);
    if (values == NULL)
      errno = ENOMEM;
    ok = values != NULL && write_floats(fd, values, tensor_elements(t->rank, t->shape));
  }
  if (ok && fsync(fd) != 0) {
    what = "flush it to disk";
    ok = FALSE;
  }
  gboolean renaming = FALSE;
  int err = tdm_file_commit_temp(fd, ok, tmp_path, path, &renaming);
  if (err != 0)
    return save_failed(error, path, renaming ? "replace it" : what, err);

  /* The rename itself lives in the folder: sync it too, so a power cut after we
   * return still finds the new checkpoint. Failure here loses durability only. */
  g_autofree char *dir = g_path_get_dirname(path);
  int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    (void)fsync(dir_fd);
    close(dir_fd);
  }
  return TRUE;
}

/* Reading. */

static gboolean
load_failed(GError **error, const char *path, const char *format, ...) G_GNUC_PRINTF(3, 4);

static gboolean
load_failed(GError **error, const char *path, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *why = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
              _("checkpoint %s: %s"), path, why);
  return FALSE;
}

typedef struct {
  const char *name;
  gint64 begin, end;
  gboolean i64;            /* int64 values, read as floats */
} Span;

static int
span_compare(gconstpointer a, gconstpointer b)
{
  const Span *x = a, *y = b;
  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* A JSON number that is a non-negative whole number, as an int64. */
static gboolean
json_count(JsonNode *node, gint64 *out)
{
  if (node == NULL || json_node_get_value_type(node) != G_TYPE_INT64)
    return FALSE;
  *out = json_node_get_int(node);
  return *out >= 0;
}

static gboolean
read_metadata(JsonNode *node, TdmCheckpoint *ckpt, const char *path, GError **error)
{
  if (!JSON_NODE_HOLDS_OBJECT(node))
    return load_failed(error, path, _("“__metadata__” is not an object"));
  JsonObject *meta = json_node_get_object(node);
  g_autoptr(GList) keys = json_object_get_members(meta);
  for (GList *l = keys; l; l = l->next) {
    JsonNode *v = json_object_get_member(meta, l->data);
    if (json_node_get_value_type(v) != G_TYPE_STRING)
      return load_failed(error, path, _("metadata “%s” is not a string"), (char *)l->data);
    tdm_checkpoint_set_metadata(ckpt, l->data, json_node_get_string(v));
  }
  return TRUE;
}

/* Checks one tensor's header entry; fills the span and shape. */
static gboolean
read_entry(const char *name, JsonNode *node, gint64 data_len, int *rank, gint64 *shape,
           Span *span, const char *path, GError **error)
{
  if (!JSON_NODE_HOLDS_OBJECT(node))
    return load_failed(error, path, _("tensor “%s”: header entry is not an object"), name);
  JsonObject *o = json_node_get_object(node);

  JsonNode *dtype = json_object_get_member(o, "dtype");
  if (dtype == NULL || json_node_get_value_type(dtype) != G_TYPE_STRING)
    return load_failed(error, path, _("tensor “%s”: no “dtype” string"), name);
  /* PyTorch's state_dicts hold BN's num_batches_tracked as an int64 scalar: read as
   * a float; every other tensor must be float32. */
  gboolean i64 = g_str_equal(json_node_get_string(dtype), "I64");
  if (!g_str_equal(json_node_get_string(dtype), "F32") && !i64)
    return load_failed(error, path, _("tensor “%s”: dtype %s, but Tandem reads only F32 "
                       "(and I64 counters)"), name, json_node_get_string(dtype));
  const gint64 width = i64 ? 8 : (gint64)sizeof(float);

  JsonNode *shape_node = json_object_get_member(o, "shape");
  if (shape_node == NULL || !JSON_NODE_HOLDS_ARRAY(shape_node))
    return load_failed(error, path, _("tensor “%s”: no “shape” array"), name);
  JsonArray *shape_array = json_node_get_array(shape_node);
  guint r = json_array_get_length(shape_array);
  if (r > 4)
    return load_failed(error, path, _("tensor “%s”: %u dimensions, Tandem reads at most 4"),
                       name, r);
  /* Checked against the data as it grows, so the product cannot overflow. */
  gint64 elements = 1;
  gboolean too_big = FALSE;
  for (guint d = 0; d < r; d++) {
    if (!json_count(json_array_get_element(shape_array, d), &shape[d]))
      return load_failed(error, path, _("tensor “%s”: shape[%u] is not a non-negative "
                                      "whole number"), name, d);
    if (shape[d] != 0 && elements > G_MAXINT64 / width / shape[d])
      too_big = TRUE;
    else
      elements *= shape[d];
  }
  if (too_big && elements != 0)
    return load_failed(error, path, _("tensor “%s”: its shape is larger than any file's data"),
                       name);

  JsonNode *offsets_node = json_object_get_member(o, "data_offsets");
  if (offsets_node == NULL || !JSON_NODE_HOLDS_ARRAY(offsets_node) ||
      json_array_get_length(json_node_get_array(offsets_node)) != 2)
    return load_failed(error, path, _("tensor “%s”: no “data_offsets” pair"), name);
  JsonArray *offsets = json_node_get_array(offsets_node);
  gint64 begin, end;
  if (!json_count(json_array_get_element(offsets, 0), &begin) ||
      !json_count(json_array_get_element(offsets, 1), &end))
    return load_failed(error, path, _("tensor “%s”: data_offsets are not non-negative "
                                    "whole numbers"), name);
  if (end < begin)
    return load_failed(error, path, "tensor “%s”: data_offsets [%" G_GINT64_FORMAT
                                    ", %" G_GINT64_FORMAT "] end before they begin",
                       name, begin, end);
  if (end > data_len)
    return load_failed(error, path, "tensor “%s”: data_offsets [%" G_GINT64_FORMAT
                                    ", %" G_GINT64_FORMAT "] run past the %" G_GINT64_FORMAT
                                    " bytes of data in the file", name, begin, end, data_len);
  if (elements * width != end - begin)
    return load_failed(error, path, "tensor “%s”: shape holds %" G_GINT64_FORMAT
                                    " values but data_offsets span %" G_GINT64_FORMAT " bytes",
                       name, elements, end - begin);
  *rank = (int)r;
  span->i64 = i64;
  span->name = name;
  span->begin = begin;
  span->end = end;
  return TRUE;
}

TdmCheckpoint *
tdm_checkpoint_load(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  g_autoptr(GError) local = NULL;
  /* A FIFO or a device would block or never end: refused before it is opened. */
  g_autoptr(GMappedFile) file = tdm_file_map(path, _("checkpoint "),
                                             TDM_ENGINE_ERROR_CHECKPOINT, error);
  if (file == NULL)
    return NULL;
  const char *bytes = g_mapped_file_get_contents(file);
  gint64 size = (gint64)g_mapped_file_get_length(file);

  /* torch.save's files: a zip archive since PyTorch 1.6, a bare pickle stream before
   * (it starts with the pickled magic number 0x1950a86a20f9469cfc6c). */
  if (tdm_checkpoint_is_pth((const guint8 *)bytes, (gsize)size))
    return tdm_checkpoint_parse_pth(path, file, error);
  static const char legacy_torch[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";
  if (size >= (gint64)sizeof legacy_torch - 1 &&
      memcmp(bytes, legacy_torch, sizeof legacy_torch - 1) == 0) {
    load_failed(error, path, _("a PyTorch file in the format before PyTorch 1.6, which "
                               "Tandem does not read: load it in PyTorch and save it again "
                               "with torch.save(torch.load(…), …)"));
    return NULL;
  }

  if (size < 8) {
    load_failed(error, path, "%" G_GINT64_FORMAT " bytes, too short for a safetensors "
                             "header length", size);
    return NULL;
  }
  guint64 header_len;
  memcpy(&header_len, bytes, 8);
  header_len = GUINT64_FROM_LE(header_len);
  if (header_len > (guint64)(size - 8)) {
    load_failed(error, path, "header length %" G_GUINT64_FORMAT " is larger than the "
                             "%" G_GINT64_FORMAT " bytes that follow it (not a safetensors "
                             "file, or truncated)", header_len, size - 8);
    return NULL;
  }
  if (header_len < 2 || header_len > TDM_CHECKPOINT_MAX_HEADER) {
    load_failed(error, path, "header length %" G_GUINT64_FORMAT " is not plausible "
                             "(not a safetensors file)", header_len);
    return NULL;
  }
  const char *header = bytes + 8;
  const char *data = header + header_len;
  gint64 data_len = size - 8 - (gint64)header_len;
  if (header[0] != '{' || !g_utf8_validate(header, (gssize)header_len, NULL)) {
    load_failed(error, path, _("the header is not a JSON object (not a safetensors file)"));
    return NULL;
  }

  g_autoptr(JsonNode) root =
      tdm_json_parse(header, (gssize)header_len, TDM_ENGINE_ERROR_CHECKPOINT, &local);
  if (root == NULL) {
    load_failed(error, path, _("the header is not valid JSON: %s"), local->message);
    return NULL;
  }
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
    load_failed(error, path, _("the header is not a JSON object"));
    return NULL;
  }
  JsonObject *object = json_node_get_object(root);

  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_new();
  /* File order is data order; json-glib keeps members in the order read. */
  g_autoptr(GList) names = json_object_get_members(object);
  guint n = g_list_length(names);
  g_autofree Span *spans = g_new0(Span, n);
  g_autofree int *ranks = g_new0(int, n);
  g_autofree gint64 *shapes = g_new0(gint64, 4 * (gsize)n);
  guint count = 0;

  for (GList *l = names; l; l = l->next) {
    const char *name = l->data;
    JsonNode *node = json_object_get_member(object, name);
    if (g_str_equal(name, "__metadata__")) {
      if (!read_metadata(node, ckpt, path, error))
        return NULL;
      continue;
    }
    if (*name == '\0') {
      load_failed(error, path, _("a tensor has an empty name"));
      return NULL;
    }
    if (!read_entry(name, node, data_len, &ranks[count], &shapes[4 * count], &spans[count],
                    path, error))
      return NULL;
    count++;
  }

  /* Sorted by offset, each span must end before the next begins. */
  g_autofree Span *sorted = g_memdup2(spans, sizeof(Span) * count);
  if (count > 1)
    qsort(sorted, count, sizeof(Span), span_compare);
  for (guint i = 1; i < count; i++) {
    if (sorted[i].begin < sorted[i - 1].end) {
      load_failed(error, path, _("tensors “%s” and “%s” overlap in the data"),
                  sorted[i - 1].name, sorted[i].name);
      return NULL;
    }
  }

  for (guint i = 0; i < count; i++)
    checkpoint_take(ckpt, spans[i].name, ranks[i], &shapes[4 * i],
                    spans[i].i64 ? TDM_TENSOR_I64 : TDM_TENSOR_F32, NULL,
                    data + spans[i].begin);
  ckpt->file = g_steal_pointer(&file);
  return g_steal_pointer(&ckpt);
}
