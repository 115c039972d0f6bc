/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-pickle-torch.c — the part of the restricted unpickler that knows torch
 * (tdm-pickle.h): the globals a state_dict names, understood rather than called
 * (OrderedDict, the tensor rebuilders, the storage classes), the persistent ids of
 * storages, BUILD of an OrderedDict's _metadata, and the state_dict found in what the
 * pickle made. The machine is tdm-pickle.c's.
 */
#include "tdm-pickle-private.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

#include <string.h>

/* The storage classes torch.save names, and what Tandem makes of them. */
static const struct {
  const char *name;
  const char *global;         /* as the pickle names it */
  TdmPickleDtype dtype;
} storage_classes[] = {
  {"FloatStorage", "torch.FloatStorage", TDM_PICKLE_FLOAT32},
  {"HalfStorage", "torch.HalfStorage", TDM_PICKLE_FLOAT16},
  {"BFloat16Storage", "torch.BFloat16Storage", TDM_PICKLE_BFLOAT16},
  {"DoubleStorage", "torch.DoubleStorage", TDM_PICKLE_FLOAT64},
  {"LongStorage", "torch.LongStorage", TDM_PICKLE_INT64},
  {"IntStorage", "torch.IntStorage", TDM_PICKLE_UNSUPPORTED},
  {"ShortStorage", "torch.ShortStorage", TDM_PICKLE_UNSUPPORTED},
  {"CharStorage", "torch.CharStorage", TDM_PICKLE_UNSUPPORTED},
  {"ByteStorage", "torch.ByteStorage", TDM_PICKLE_UNSUPPORTED},
  {"BoolStorage", "torch.BoolStorage", TDM_PICKLE_UNSUPPORTED},
  {"ComplexFloatStorage", "torch.ComplexFloatStorage", TDM_PICKLE_UNSUPPORTED},
  {"ComplexDoubleStorage", "torch.ComplexDoubleStorage", TDM_PICKLE_UNSUPPORTED},
};

static gboolean
push_global(Machine *m, const char *module, const char *name)
{
  GlobalKind kind;
  int storage = -1;
  if (g_str_equal(module, "collections") && g_str_equal(name, "OrderedDict")) {
    kind = GLOBAL_ORDERED_DICT;
  } else if (g_str_equal(module, "torch._utils") && g_str_equal(name, "_rebuild_tensor_v2")) {
    kind = GLOBAL_REBUILD_TENSOR_V2;
  } else if (g_str_equal(module, "torch._utils") && g_str_equal(name, "_rebuild_tensor")) {
    kind = GLOBAL_REBUILD_TENSOR;
  } else if (g_str_equal(module, "torch._utils") && g_str_equal(name, "_rebuild_parameter")) {
    kind = GLOBAL_REBUILD_PARAMETER;
  } else {
    kind = GLOBAL_STORAGE;
    for (gsize i = 0; g_str_equal(module, "torch") && i < G_N_ELEMENTS(storage_classes); i++)
      if (g_str_equal(name, storage_classes[i].name))
        storage = (int)i;
    if (storage < 0)
      return tdm_pickle_fail(m, _("the pickle names the global “%s.%s”, which a state_dict does not "
                       "use: Tandem reads only tensors (collections.OrderedDict, "
                       "torch._utils._rebuild_tensor_v2, torch's storages) and runs nothing "
                       "from the file (a whole model saved with torch.save(model) must be "
                       "saved again as torch.save(model.state_dict(), …))"),
                  module, name);
  }
  Value *v;
  if (!tdm_pickle_push_new(m, V_GLOBAL, &v))
    return FALSE;
  v->global.kind = kind;
  v->global.storage_class = storage;
  return TRUE;
}

gboolean
tdm_pickle_op_global(Machine *m)
{
  g_autofree char *module = NULL, *name = NULL;
  return tdm_pickle_take_line(m, &module) && tdm_pickle_take_line(m, &name) && push_global(m, module, name);
}

gboolean
tdm_pickle_op_stack_global(Machine *m)
{
  Value *name, *module;
  if (!tdm_pickle_pop(m, &name) || !tdm_pickle_pop(m, &module))
    return FALSE;
  if (module->kind != V_STRING || name->kind != V_STRING ||
      strlen(module->string.text) != module->string.length ||
      strlen(name->string.text) != name->string.length)
    return tdm_pickle_fail(m, _("a global named by values that are not strings"));
  return push_global(m, module->string.text, name->string.text);
}

static const char *
global_text(const Value *v)
{
  switch (v->global.kind) {
  case GLOBAL_ORDERED_DICT:
    return "collections.OrderedDict";
  case GLOBAL_REBUILD_TENSOR_V2:
    return "torch._utils._rebuild_tensor_v2";
  case GLOBAL_REBUILD_TENSOR:
    return "torch._utils._rebuild_tensor";
  case GLOBAL_REBUILD_PARAMETER:
    return "torch._utils._rebuild_parameter";
  default:
    return storage_classes[v->global.storage_class].global;
  }
}

/* A non-negative whole number that fits the views' arithmetic (2⁴⁸ elements). */
static gboolean
count_of(const Value *v, gint64 *out)
{
  if (v->kind != V_INT || v->integer < 0 || v->integer > ((gint64)1 << 48))
    return FALSE;
  *out = v->integer;
  return TRUE;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])
 * and _rebuild_tensor(storage, offset, size, stride): a view of a storage. */
static gboolean
rebuild_tensor(Machine *m, GPtrArray *args, gboolean v2, Value **out)
{
  guint n = args->len;
  if (v2 ? (n != 6 && n != 7) : n != 4)
    return tdm_pickle_fail(m, _("a tensor rebuilt from %u arguments"), n);
  Value *storage = args->pdata[0], *size = args->pdata[2], *stride = args->pdata[3];
  gint64 offset;
  if (storage->kind != V_STORAGE)
    return tdm_pickle_fail(m, _("a tensor rebuilt from a %s instead of a storage"),
                tdm_pickle_kind_names[storage->kind]);
  if (!count_of(args->pdata[1], &offset) || size->kind != V_TUPLE ||
      stride->kind != V_TUPLE || size->items->len != stride->items->len)
    return tdm_pickle_fail(m, _("a tensor's offset, size or stride is malformed"));
  if (size->items->len > TDM_PICKLE_MAX_RANK)
    return tdm_pickle_fail(m, _("a tensor of %u dimensions (at most %d are read)"), size->items->len,
                TDM_PICKLE_MAX_RANK);
  Value *t = tdm_pickle_new_value(m, V_TENSOR);
  t->tensor.storage = storage;
  t->tensor.offset = offset;
  t->tensor.rank = (int)size->items->len;
  for (int d = 0; d < t->tensor.rank; d++)
    if (!count_of(size->items->pdata[d], &t->tensor.shape[d]) ||
        !count_of(stride->items->pdata[d], &t->tensor.stride[d]))
      return tdm_pickle_fail(m, _("a tensor's size or stride is not a non-negative whole number"));
  *out = t;
  return TRUE;
}

gboolean
tdm_pickle_op_reduce(Machine *m)
{
  Value *args, *callable, *result = NULL;
  if (!tdm_pickle_pop(m, &args) || !tdm_pickle_pop(m, &callable))
    return FALSE;
  if (callable->kind != V_GLOBAL)
    return tdm_pickle_fail(m, _("the pickle calls a %s, which a state_dict never does"),
                tdm_pickle_kind_names[callable->kind]);
  if (args->kind != V_TUPLE)
    return tdm_pickle_fail(m, _("the pickle calls %s with a %s for arguments"), global_text(callable),
                tdm_pickle_kind_names[args->kind]);
  switch (callable->global.kind) {
  case GLOBAL_ORDERED_DICT:
    if (args->items->len != 0)
      return tdm_pickle_fail(m, _("an OrderedDict made from arguments (a state_dict's is made empty, "
                       "then filled)"));
    result = tdm_pickle_new_value(m, V_DICT);
    break;
  case GLOBAL_REBUILD_TENSOR_V2:
  case GLOBAL_REBUILD_TENSOR:
    if (!rebuild_tensor(m, args->items, callable->global.kind == GLOBAL_REBUILD_TENSOR_V2,
                        &result))
      return FALSE;
    break;
  case GLOBAL_REBUILD_PARAMETER:
    /* (data, requires_grad, hooks): a parameter is its tensor here. */
    if (args->items->len != 3 || ((Value *)args->items->pdata[0])->kind != V_TENSOR)
      return tdm_pickle_fail(m, _("a parameter rebuilt from something other than a tensor"));
    result = args->items->pdata[0];
    break;
  default:
    return tdm_pickle_fail(m, _("the pickle calls %s directly, which a state_dict never does"),
                global_text(callable));
  }
  return tdm_pickle_push(m, result);
}

/* The persistent id of a storage: ('storage', class, key, location, numel). */
gboolean
tdm_pickle_op_binpersid(Machine *m)
{
  Value *pid;
  if (!tdm_pickle_pop(m, &pid))
    return FALSE;
  GPtrArray *f = pid->kind == V_TUPLE ? pid->items : NULL;
  Value *tag = f != NULL && f->len == 5 ? f->pdata[0] : NULL;
  if (tag == NULL || (tag->kind != V_STRING && tag->kind != V_BYTES) ||
      strcmp(tag->string.text, "storage") != 0)
    return tdm_pickle_fail(m, _("a persistent id that is not a storage's"));
  Value *cls = f->pdata[1], *key = f->pdata[2], *numel = f->pdata[4];
  gint64 count;
  if (cls->kind != V_GLOBAL || cls->global.kind != GLOBAL_STORAGE)
    return tdm_pickle_fail(m, _("a storage whose type is not one of torch's storage classes"));
  if ((key->kind != V_STRING && key->kind != V_BYTES) || key->string.length == 0 ||
      key->string.length > 64 || strlen(key->string.text) != key->string.length ||
      strchr(key->string.text, '/') != NULL)
    return tdm_pickle_fail(m, _("a storage whose key is not a short name"));
  if (!count_of(numel, &count))
    return tdm_pickle_fail(m, _("a storage whose size is not a non-negative whole number"));
  Value *v;
  if (!tdm_pickle_push_new(m, V_STORAGE, &v))
    return FALSE;
  v->storage.storage_class = cls->global.storage_class;
  v->storage.key = g_strdup(key->string.text);
  v->storage.numel = count;
  return TRUE;
}

/* BUILD sets an object's state; a state_dict uses it once, for the OrderedDict's
 * _metadata (which Tandem does not need). */
gboolean
tdm_pickle_op_build(Machine *m)
{
  Value *state, *object;
  if (!tdm_pickle_pop(m, &state) || !tdm_pickle_top(m, &object))
    return FALSE;
  if (object->kind != V_DICT || (state->kind != V_DICT && state->kind != V_NONE))
    return tdm_pickle_fail(m, _("the pickle sets the state of a %s, which a state_dict never does"),
                tdm_pickle_kind_names[object->kind]);
  return TRUE;
}

/* ---- the state_dict ----------------------------------------------------------- */

static guint
tensors_in(const Value *dict)
{
  guint n = 0;
  for (guint i = 1; i < dict->items->len; i += 2)
    n += ((const Value *)dict->items->pdata[i])->kind == V_TENSOR;
  return n;
}

/* The dict holding the tensors: the pickle's own, or one a training checkpoint keeps
 * them in. */
const Value *
tdm_pickle_find_state_dict(const Value *root)
{
  static const char *const keys[] = {"state_dict", "model", "model_state_dict"};
  if (root->kind != V_DICT)
    return NULL;
  if (tensors_in(root) > 0)
    return root;
  for (gsize k = 0; k < G_N_ELEMENTS(keys); k++)
    for (guint i = 0; i + 1 < root->items->len; i += 2) {
      const Value *key = root->items->pdata[i], *value = root->items->pdata[i + 1];
      if (key->kind == V_STRING && g_str_equal(key->string.text, keys[k]) &&
          value->kind == V_DICT && tensors_in(value) > 0)
        return value;
    }
  return NULL;
}

static void
pickle_tensor_free(gpointer p)
{
  TdmPickleTensor *t = p;
  g_free(t->name);
  g_free(t->storage_key);
  g_free(t);
}

int
tdm_pickle_dtype_size(TdmPickleDtype dtype)
{
  switch (dtype) {
  case TDM_PICKLE_FLOAT32:
    return 4;
  case TDM_PICKLE_FLOAT16:
  case TDM_PICKLE_BFLOAT16:
    return 2;
  case TDM_PICKLE_FLOAT64:
  case TDM_PICKLE_INT64:
    return 8;
  default:
    return 0;
  }
}

GPtrArray *
tdm_pickle_collect(Machine *m, const Value *dict)
{
  GPtrArray *out = g_ptr_array_new_with_free_func(pickle_tensor_free);
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i + 1 < dict->items->len; i += 2) {
    const Value *key = dict->items->pdata[i], *value = dict->items->pdata[i + 1];
    if (value->kind != V_TENSOR || key->kind != V_STRING)
      continue;
    if (key->string.length == 0 || strlen(key->string.text) != key->string.length) {
      g_set_error(m->error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                  _("a tensor's name in the state_dict is empty or holds a NUL byte"));
      g_ptr_array_unref(out);
      return NULL;
    }
    TdmPickleTensor *t = g_new0(TdmPickleTensor, 1);
    const Value *storage = value->tensor.storage;
    int cls = storage->storage.storage_class;
    t->name = g_strdup(key->string.text);
    t->dtype = storage_classes[cls].dtype;
    t->storage_class = storage_classes[cls].name;
    t->storage_key = g_strdup(storage->storage.key);
    t->storage_numel = storage->storage.numel;
    t->offset = value->tensor.offset;
    t->rank = value->tensor.rank;
    memcpy(t->shape, value->tensor.shape, sizeof t->shape);
    memcpy(t->stride, value->tensor.stride, sizeof t->stride);
    /* A dict keeps the last value of a key, in the first one's place. */
    TdmPickleTensor *old = g_hash_table_lookup(seen, t->name);
    if (old != NULL) {
      guint index;
      g_assert(g_ptr_array_find(out, old, &index));
      g_hash_table_remove(seen, old->name);
      pickle_tensor_free(out->pdata[index]);
      out->pdata[index] = t;
    } else {
      g_ptr_array_add(out, t);
    }
    g_hash_table_insert(seen, t->name, t);
  }
  return out;
}

