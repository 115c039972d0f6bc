/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-pickle.c — a restricted unpickler for PyTorch state_dicts (tdm-pickle.h).
 *
 * The machine keeps Python's shape (a stack, marks into it, a memo) but its values
 * are plain tagged structs in one arena: containers, numbers, strings, and the three
 * things a state_dict is made of (an allowed global, a storage named by a persistent
 * id, a tensor viewing a storage). Each opcode is read with its operands checked
 * against what is left of the input; every push and memo entry counts against one
 * budget, so memory stays bounded whatever the file says.
 */
#include "tdm-pickle.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

#include <string.h>

/* Pushes and memo entries a pickle may make: a ResNet-50's makes about 5,000. */
#define MAX_STEPS (1 << 20)

typedef enum {
  V_NONE,
  V_BOOL,
  V_INT,
  V_FLOAT,
  V_STRING,                   /* str: UTF-8 */
  V_BYTES,                    /* bytes, or a protocol-2 str */
  V_TUPLE,
  V_LIST,
  V_DICT,                     /* items: key, value, key, value … */
  V_GLOBAL,
  V_STORAGE,
  V_TENSOR,
} Kind;

typedef enum {
  GLOBAL_ORDERED_DICT,
  GLOBAL_REBUILD_TENSOR_V2,
  GLOBAL_REBUILD_TENSOR,
  GLOBAL_REBUILD_PARAMETER,
  GLOBAL_STORAGE,
} GlobalKind;

static const char *const kind_names[] = {
  [V_NONE] = "None", [V_BOOL] = "bool", [V_INT] = "int", [V_FLOAT] = "float",
  [V_STRING] = "str", [V_BYTES] = "bytes", [V_TUPLE] = "tuple", [V_LIST] = "list",
  [V_DICT] = "dict", [V_GLOBAL] = "global", [V_STORAGE] = "storage", [V_TENSOR] = "tensor",
};

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

typedef struct Value Value;
struct Value {
  Kind kind;
  int depth;                  /* 0 for a scalar; a container: 1 + its deepest item's */
  union {
    gint64 integer;           /* V_BOOL, V_INT */
    double real;
    struct {
      char *text;
      gsize length;
    } string;
    GPtrArray *items;         /* V_TUPLE, V_LIST, V_DICT: borrowed Value * */
    struct {
      GlobalKind kind;
      int storage_class;      /* GLOBAL_STORAGE: index in storage_classes */
    } global;
    struct {
      int storage_class;
      char *key;
      gint64 numel;
    } storage;
    struct {
      const Value *storage;
      gint64 offset;
      int rank;
      gint64 shape[TDM_PICKLE_MAX_RANK], stride[TDM_PICKLE_MAX_RANK];
    } tensor;
  };
};

typedef struct {
  const guint8 *data;
  gsize size, pos;
  gsize op_at;                /* where the opcode being run began */
  guint op;
  GPtrArray *arena;           /* every Value, owned */
  GPtrArray *stack;           /* borrowed */
  GArray *marks;              /* stack lengths at each open MARK */
  GHashTable *memo;           /* index → Value * */
  guint steps;
  GError **error;
} Machine;

static void
value_free(gpointer p)
{
  Value *v = p;
  if (v->kind == V_STRING || v->kind == V_BYTES)
    g_free(v->string.text);
  else if (v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_DICT)
    g_ptr_array_unref(v->items);
  else if (v->kind == V_STORAGE)
    g_free(v->storage.key);
  g_free(v);
}

static const char *
opcode_name(guint op)
{
  static const struct {
    guint op;
    const char *name;
  } names[] = {
    {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"},
    {'F', "FLOAT"}, {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"},
    {'M', "BININT2"}, {'N', "NONE"}, {'P', "PERSID"}, {'Q', "BINPERSID"}, {'R', "REDUCE"},
    {'S', "STRING"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"},
    {'X', "BINUNICODE"}, {'a', "APPEND"}, {'b', "BUILD"}, {'c', "GLOBAL"}, {'d', "DICT"},
    {'}', "EMPTY_DICT"}, {'e', "APPENDS"}, {'g', "GET"}, {'h', "BINGET"}, {'i', "INST"},
    {'j', "LONG_BINGET"}, {'l', "LIST"}, {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"},
    {'q', "BINPUT"}, {'r', "LONG_BINPUT"}, {'s', "SETITEM"}, {'t', "TUPLE"},
    {')', "EMPTY_TUPLE"}, {'u', "SETITEMS"}, {'G', "BINFLOAT"}, {'B', "BINBYTES"},
    {'C', "SHORT_BINBYTES"}, {0x80, "PROTO"}, {0x81, "NEWOBJ"}, {0x82, "EXT1"},
    {0x83, "EXT2"}, {0x84, "EXT4"}, {0x85, "TUPLE1"}, {0x86, "TUPLE2"}, {0x87, "TUPLE3"},
    {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"}, {0x8a, "LONG1"}, {0x8b, "LONG4"},
    {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"},
    {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"},
    {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"}, {0x95, "FRAME"}, {0x96, "BYTEARRAY8"},
    {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(names); i++)
    if (names[i].op == op)
      return names[i].name;
  return NULL;
}

static gboolean
fail(Machine *m, const char *format, ...) G_GNUC_PRINTF(2, 3);

static gboolean
fail(Machine *m, const char *format, ...)
{
  if (m->error == NULL || *m->error != NULL)
    return FALSE;
  va_list args;
  va_start(args, format);
  g_autofree char *why = g_strdup_vprintf(format, args);
  va_end(args);
  const char *name = opcode_name(m->op);
  g_set_error(m->error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
              _("%s (opcode %s at byte %zu of the pickle)"), why, name != NULL ? name : "?",
              m->op_at);
  return FALSE;
}

/* ---- input ------------------------------------------------------------------ */

static gboolean
take(Machine *m, gsize n, const guint8 **out)
{
  *out = NULL;
  if (n > m->size - m->pos)
    return fail(m, _("the pickle ends in the middle of an opcode's operand (truncated)"));
  *out = m->data + m->pos;
  m->pos += n;
  return TRUE;
}

static gboolean
take_uint(Machine *m, int bytes, guint64 *out)
{
  const guint8 *p;
  *out = 0;
  if (!take(m, bytes, &p))
    return FALSE;
  *out = 0;
  for (int i = bytes - 1; i >= 0; i--)
    *out = *out << 8 | p[i];
  return TRUE;
}

/* A GLOBAL operand: text up to a newline, of printable ASCII. */
static gboolean
take_line(Machine *m, char **out)
{
  *out = NULL;
  const guint8 *start = m->data + m->pos;
  const guint8 *nl = memchr(start, '\n', MIN(m->size - m->pos, 256));
  if (nl == NULL)
    return fail(m, _("a global's name does not end within 256 bytes"));
  for (const guint8 *p = start; p < nl; p++)
    if (*p < 0x20 || *p > 0x7e)
      return fail(m, _("a global's name is not printable text"));
  *out = g_strndup((const char *)start, nl - start);
  m->pos += nl - start + 1;
  return TRUE;
}

/* ---- values and the stack --------------------------------------------------- */

static gboolean
count_step(Machine *m)
{
  if (++m->steps > MAX_STEPS)
    return fail(m, _("the pickle makes more than %d values (no state_dict needs so many)"),
                MAX_STEPS);
  return TRUE;
}

static Value *
new_value(Machine *m, Kind kind)
{
  Value *v = g_new0(Value, 1);
  v->kind = kind;
  if (kind == V_TUPLE || kind == V_LIST || kind == V_DICT)
    v->items = g_ptr_array_new();
  g_ptr_array_add(m->arena, v);
  return v;
}

static gboolean
push(Machine *m, Value *v)
{
  if (!count_step(m))
    return FALSE;
  g_ptr_array_add(m->stack, v);
  return TRUE;
}

static gboolean
push_new(Machine *m, Kind kind, Value **out)
{
  Value *v = new_value(m, kind);
  if (out != NULL)
    *out = v;
  return push(m, v);
}

static guint
mark_floor(Machine *m)
{
  return m->marks->len > 0 ? g_array_index(m->marks, guint, m->marks->len - 1) : 0;
}

/* The container SETITEMS and APPENDS fill: the value just below the last MARK, which
 * must lie above the MARK before it. */
static gboolean
below_mark(Machine *m, Value **out)
{
  *out = NULL;
  if (m->marks->len == 0)
    return fail(m, _("the pickle uses a MARK it never set"));
  guint floor = mark_floor(m);
  guint outer = m->marks->len > 1 ? g_array_index(m->marks, guint, m->marks->len - 2) : 0;
  if (floor <= outer)
    return fail(m, _("the pickle's stack is empty where a value was expected"));
  *out = m->stack->pdata[floor - 1];
  return TRUE;
}

/* Pops the top value (above the last mark). */
static gboolean
pop(Machine *m, Value **out)
{
  *out = NULL;
  if (m->stack->len <= mark_floor(m))
    return fail(m, _("the pickle's stack is empty where a value was expected"));
  *out = g_ptr_array_steal_index(m->stack, m->stack->len - 1);
  return TRUE;
}

static gboolean
top(Machine *m, Value **out)
{
  *out = NULL;
  if (m->stack->len <= mark_floor(m))
    return fail(m, _("the pickle's stack is empty where a value was expected"));
  *out = m->stack->pdata[m->stack->len - 1];
  return TRUE;
}

/* Adds item to container, keeping the depth bound. */
static gboolean
add_item(Machine *m, Value *container, Value *item)
{
  if (item->depth + 1 > container->depth)
    container->depth = item->depth + 1;
  if (container->depth > TDM_PICKLE_MAX_DEPTH)
    return fail(m, _("the pickle nests containers more than %d deep"), TDM_PICKLE_MAX_DEPTH);
  g_ptr_array_add(container->items, item);
  return TRUE;
}

/* The values since the last MARK, taken off the stack along with the mark, into a
 * new tuple (or onto `into`'s items when given). */
static gboolean
pop_mark(Machine *m, Kind kind, Value *into, Value **out)
{
  if (m->marks->len == 0)
    return fail(m, _("the pickle uses a MARK it never set"));
  guint floor = mark_floor(m);
  g_array_set_size(m->marks, m->marks->len - 1);
  Value *v = into != NULL ? into : new_value(m, kind);
  for (guint i = floor; i < m->stack->len; i++)
    if (!add_item(m, v, m->stack->pdata[i]))
      return FALSE;
  g_ptr_array_set_size(m->stack, floor);
  if (out != NULL)
    *out = v;
  return TRUE;
}

/* ---- the opcodes -------------------------------------------------------------- */

static gboolean
op_string(Machine *m, Kind kind, int length_bytes)
{
  guint64 n;
  const guint8 *p;
  if (!take_uint(m, length_bytes, &n) || !take(m, n, &p))
    return FALSE;
  if (kind == V_STRING && !g_utf8_validate((const char *)p, (gssize)n, NULL))
    return fail(m, _("a string of the pickle is not valid UTF-8"));
  Value *v;
  if (!push_new(m, kind, &v))
    return FALSE;
  v->string.text = g_strndup((const char *)p, n);
  v->string.length = n;
  return TRUE;
}

static gboolean
op_int(Machine *m, int bytes, gboolean is_signed)
{
  guint64 u;
  if (!take_uint(m, bytes, &u))
    return FALSE;
  Value *v;
  if (!push_new(m, V_INT, &v))
    return FALSE;
  v->integer = is_signed ? (gint64)(gint32)(guint32)u : (gint64)u;
  return TRUE;
}

/* LONG1: n bytes of a little-endian two's complement integer; 8 at most here. */
static gboolean
op_long1(Machine *m)
{
  guint64 n, u = 0;
  const guint8 *p;
  if (!take_uint(m, 1, &n) || !take(m, n, &p))
    return FALSE;
  if (n > 8)
    return fail(m, _("an integer of %" G_GUINT64_FORMAT " bytes (at most 8 are read)"), n);
  for (int i = (int)n - 1; i >= 0; i--)
    u = u << 8 | p[i];
  if (n > 0 && n < 8 && (p[n - 1] & 0x80))
    u |= ~(guint64)0 << (8 * n);
  Value *v;
  if (!push_new(m, V_INT, &v))
    return FALSE;
  v->integer = (gint64)u;
  return TRUE;
}

static gboolean
op_binfloat(Machine *m)
{
  guint64 bits = 0;
  const guint8 *p;
  if (!take(m, 8, &p))
    return FALSE;
  for (int i = 0; i < 8; i++)
    bits = bits << 8 | p[i];      /* big-endian, unlike every other operand */
  Value *v;
  if (!push_new(m, V_FLOAT, &v))
    return FALSE;
  memcpy(&v->real, &bits, sizeof bits);
  return TRUE;
}

static gboolean
op_tuple_n(Machine *m, guint n)
{
  if (m->stack->len < mark_floor(m) + n)
    return fail(m, _("the pickle's stack is empty where a value was expected"));
  Value *t = new_value(m, V_TUPLE);
  for (guint i = m->stack->len - n; i < m->stack->len; i++)
    if (!add_item(m, t, m->stack->pdata[i]))
      return FALSE;
  g_ptr_array_set_size(m->stack, m->stack->len - n);
  return push(m, t);
}

static gboolean
memo_put(Machine *m, guint64 index)
{
  Value *v;
  if (!top(m, &v) || !count_step(m))
    return FALSE;
  if (index > G_MAXUINT32)
    return fail(m, _("a memo index beyond 2³²"));
  g_hash_table_insert(m->memo, GUINT_TO_POINTER((guint)index), v);
  return TRUE;
}

static gboolean
memo_get(Machine *m, guint64 index)
{
  Value *v = index <= G_MAXUINT32 ? g_hash_table_lookup(m->memo, GUINT_TO_POINTER((guint)index))
                                  : NULL;
  if (v == NULL)
    return fail(m, _("the pickle reads memo entry %" G_GUINT64_FORMAT ", which it never "
                     "wrote"), index);
  return push(m, v);
}

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
      return fail(m, _("the pickle names the global “%s.%s”, which a state_dict does not "
                       "use: Tandem reads only tensors (collections.OrderedDict, "
                       "torch._utils._rebuild_tensor_v2, torch's storages) and runs nothing "
                       "from the file (a whole model saved with torch.save(model) must be "
                       "saved again as torch.save(model.state_dict(), …))"),
                  module, name);
  }
  Value *v;
  if (!push_new(m, V_GLOBAL, &v))
    return FALSE;
  v->global.kind = kind;
  v->global.storage_class = storage;
  return TRUE;
}

static gboolean
op_global(Machine *m)
{
  g_autofree char *module = NULL, *name = NULL;
  return take_line(m, &module) && take_line(m, &name) && push_global(m, module, name);
}

static gboolean
op_stack_global(Machine *m)
{
  Value *name, *module;
  if (!pop(m, &name) || !pop(m, &module))
    return FALSE;
  if (module->kind != V_STRING || name->kind != V_STRING ||
      strlen(module->string.text) != module->string.length ||
      strlen(name->string.text) != name->string.length)
    return fail(m, _("a global named by values that are not strings"));
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
    return fail(m, _("a tensor rebuilt from %u arguments"), n);
  Value *storage = args->pdata[0], *size = args->pdata[2], *stride = args->pdata[3];
  gint64 offset;
  if (storage->kind != V_STORAGE)
    return fail(m, _("a tensor rebuilt from a %s instead of a storage"),
                kind_names[storage->kind]);
  if (!count_of(args->pdata[1], &offset) || size->kind != V_TUPLE ||
      stride->kind != V_TUPLE || size->items->len != stride->items->len)
    return fail(m, _("a tensor's offset, size or stride is malformed"));
  if (size->items->len > TDM_PICKLE_MAX_RANK)
    return fail(m, _("a tensor of %u dimensions (at most %d are read)"), size->items->len,
                TDM_PICKLE_MAX_RANK);
  Value *t = new_value(m, V_TENSOR);
  t->tensor.storage = storage;
  t->tensor.offset = offset;
  t->tensor.rank = (int)size->items->len;
  for (int d = 0; d < t->tensor.rank; d++)
    if (!count_of(size->items->pdata[d], &t->tensor.shape[d]) ||
        !count_of(stride->items->pdata[d], &t->tensor.stride[d]))
      return fail(m, _("a tensor's size or stride is not a non-negative whole number"));
  *out = t;
  return TRUE;
}

static gboolean
op_reduce(Machine *m)
{
  Value *args, *callable, *result = NULL;
  if (!pop(m, &args) || !pop(m, &callable))
    return FALSE;
  if (callable->kind != V_GLOBAL)
    return fail(m, _("the pickle calls a %s, which a state_dict never does"),
                kind_names[callable->kind]);
  if (args->kind != V_TUPLE)
    return fail(m, _("the pickle calls %s with a %s for arguments"), global_text(callable),
                kind_names[args->kind]);
  switch (callable->global.kind) {
  case GLOBAL_ORDERED_DICT:
    if (args->items->len != 0)
      return fail(m, _("an OrderedDict made from arguments (a state_dict's is made empty, "
                       "then filled)"));
    result = new_value(m, V_DICT);
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
      return fail(m, _("a parameter rebuilt from something other than a tensor"));
    result = args->items->pdata[0];
    break;
  default:
    return fail(m, _("the pickle calls %s directly, which a state_dict never does"),
                global_text(callable));
  }
  return push(m, result);
}

/* The persistent id of a storage: ('storage', class, key, location, numel). */
static gboolean
op_binpersid(Machine *m)
{
  Value *pid;
  if (!pop(m, &pid))
    return FALSE;
  GPtrArray *f = pid->kind == V_TUPLE ? pid->items : NULL;
  Value *tag = f != NULL && f->len == 5 ? f->pdata[0] : NULL;
  if (tag == NULL || (tag->kind != V_STRING && tag->kind != V_BYTES) ||
      strcmp(tag->string.text, "storage") != 0)
    return fail(m, _("a persistent id that is not a storage's"));
  Value *cls = f->pdata[1], *key = f->pdata[2], *numel = f->pdata[4];
  gint64 count;
  if (cls->kind != V_GLOBAL || cls->global.kind != GLOBAL_STORAGE)
    return fail(m, _("a storage whose type is not one of torch's storage classes"));
  if ((key->kind != V_STRING && key->kind != V_BYTES) || key->string.length == 0 ||
      key->string.length > 64 || strlen(key->string.text) != key->string.length ||
      strchr(key->string.text, '/') != NULL)
    return fail(m, _("a storage whose key is not a short name"));
  if (!count_of(numel, &count))
    return fail(m, _("a storage whose size is not a non-negative whole number"));
  Value *v;
  if (!push_new(m, V_STORAGE, &v))
    return FALSE;
  v->storage.storage_class = cls->global.storage_class;
  v->storage.key = g_strdup(key->string.text);
  v->storage.numel = count;
  return TRUE;
}

/* BUILD sets an object's state; a state_dict uses it once, for the OrderedDict's
 * _metadata (which Tandem does not need). */
static gboolean
op_build(Machine *m)
{
  Value *state, *object;
  if (!pop(m, &state) || !top(m, &object))
    return FALSE;
  if (object->kind != V_DICT || (state->kind != V_DICT && state->kind != V_NONE))
    return fail(m, _("the pickle sets the state of a %s, which a state_dict never does"),
                kind_names[object->kind]);
  return TRUE;
}

static gboolean
set_items(Machine *m, Value *dict, GPtrArray *pairs, guint from)
{
  if (dict->kind != V_DICT)
    return fail(m, _("the pickle sets items of a %s"), kind_names[dict->kind]);
  if ((pairs->len - from) % 2 != 0)
    return fail(m, _("the pickle sets a key without a value"));
  for (guint i = from; i < pairs->len; i++)
    if (!add_item(m, dict, pairs->pdata[i]))
      return FALSE;
  return TRUE;
}

static gboolean
op_setitems(Machine *m)
{
  Value *dict;
  if (!below_mark(m, &dict))
    return FALSE;
  guint floor = mark_floor(m);
  if (!set_items(m, dict, m->stack, floor))
    return FALSE;
  g_ptr_array_set_size(m->stack, floor);
  g_array_set_size(m->marks, m->marks->len - 1);
  return TRUE;
}

static gboolean
op_setitem(Machine *m)
{
  Value *value, *key, *dict;
  if (!pop(m, &value) || !pop(m, &key) || !top(m, &dict))
    return FALSE;
  g_autoptr(GPtrArray) pair = g_ptr_array_new();
  g_ptr_array_add(pair, key);
  g_ptr_array_add(pair, value);
  return set_items(m, dict, pair, 0);
}

static gboolean
op_append(Machine *m, gboolean many)
{
  Value *list, *item = NULL;
  if (many) {
    if (!below_mark(m, &list))
      return FALSE;
  } else if (!pop(m, &item) || !top(m, &list)) {
    return FALSE;
  }
  if (list->kind != V_LIST)
    return fail(m, _("the pickle appends to a %s"), kind_names[list->kind]);
  if (!many)
    return add_item(m, list, item);
  return pop_mark(m, V_LIST, list, NULL);
}

static gboolean
op_mark(Machine *m)
{
  if (m->marks->len >= TDM_PICKLE_MAX_DEPTH)
    return fail(m, _("the pickle nests containers more than %d deep"), TDM_PICKLE_MAX_DEPTH);
  guint at = m->stack->len;
  g_array_append_val(m->marks, at);
  return TRUE;
}

/* One opcode; *done at STOP with its value. */
static gboolean
step(Machine *m, Value **result)
{
  const guint8 *p;
  guint64 n;
  m->op_at = m->pos;
  if (!take(m, 1, &p))
    return FALSE;
  m->op = *p;
  switch (m->op) {
  case 0x80: /* PROTO */
    if (!take_uint(m, 1, &n))
      return FALSE;
    return n >= 2 && n <= 5 ? TRUE : fail(m, _("pickle protocol %" G_GUINT64_FORMAT), n);
  case 0x95: /* FRAME: a length that only helps streaming readers */
    return take_uint(m, 8, &n);
  case '.':
    if (m->marks->len > 0)
      return fail(m, _("the pickle stops with a MARK still open"));
    return pop(m, result);
  case '(':
    return op_mark(m);
  case '}':
    return push_new(m, V_DICT, NULL);
  case ']':
    return push_new(m, V_LIST, NULL);
  case ')':
    return push_new(m, V_TUPLE, NULL);
  case 't': {
    Value *t;
    return pop_mark(m, V_TUPLE, NULL, &t) && push(m, t);
  }
  case 0x85:
  case 0x86:
  case 0x87:
    return op_tuple_n(m, m->op - 0x84);
  case 'N':
    return push_new(m, V_NONE, NULL);
  case 0x88:
  case 0x89: {
    Value *v;
    if (!push_new(m, V_BOOL, &v))
      return FALSE;
    v->integer = m->op == 0x88;
    return TRUE;
  }
  case 'J':
    return op_int(m, 4, TRUE);
  case 'K':
    return op_int(m, 1, FALSE);
  case 'M':
    return op_int(m, 2, FALSE);
  case 0x8a:
    return op_long1(m);
  case 'G':
    return op_binfloat(m);
  case 'X':
    return op_string(m, V_STRING, 4);
  case 0x8c:
    return op_string(m, V_STRING, 1);
  case 0x8d:
    return op_string(m, V_STRING, 8);
  case 'U':
  case 'C':
    return op_string(m, V_BYTES, 1);
  case 'T':
  case 'B':
    return op_string(m, V_BYTES, 4);
  case 'q':
    return take_uint(m, 1, &n) && memo_put(m, n);
  case 'r':
    return take_uint(m, 4, &n) && memo_put(m, n);
  case 0x94:
    return memo_put(m, g_hash_table_size(m->memo));
  case 'h':
    return take_uint(m, 1, &n) && memo_get(m, n);
  case 'j':
    return take_uint(m, 4, &n) && memo_get(m, n);
  case 'c':
    return op_global(m);
  case 0x93:
    return op_stack_global(m);
  case 'R':
    return op_reduce(m);
  case 'Q':
    return op_binpersid(m);
  case 'b':
    return op_build(m);
  case 's':
    return op_setitem(m);
  case 'u':
    return op_setitems(m);
  case 'a':
    return op_append(m, FALSE);
  case 'e':
    return op_append(m, TRUE);
  default:
    if (opcode_name(m->op) != NULL)
      return fail(m, _("the pickle uses an opcode a state_dict does not: Tandem reads only "
                       "tensors and runs nothing from the file"));
    return fail(m, _("byte 0x%02x is not a pickle opcode (not a state_dict, or damaged)"),
                m->op);
  }
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
static const Value *
find_state_dict(const Value *root)
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

static GPtrArray *
collect(Machine *m, const Value *dict)
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

GPtrArray *
tdm_pickle_read_state_dict(const guint8 *data, gsize size, GError **error)
{
  g_return_val_if_fail(data != NULL || size == 0, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if (size > TDM_PICKLE_MAX_BYTES) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("the pickle is %zu bytes (a state_dict's is far smaller; at most %d are "
                  "read)"), size, TDM_PICKLE_MAX_BYTES);
    return NULL;
  }
  g_autoptr(GError) local = NULL;
  Machine m = {
    .data = data,
    .size = size,
    .arena = g_ptr_array_new_with_free_func(value_free),
    .stack = g_ptr_array_new(),
    .marks = g_array_new(FALSE, FALSE, sizeof(guint)),
    .memo = g_hash_table_new(g_direct_hash, g_direct_equal),
    .error = &local,
  };
  Value *root = NULL;
  while (root == NULL && step(&m, &root))
    ;
  GPtrArray *tensors = NULL;
  if (root != NULL) {
    const Value *dict = find_state_dict(root);
    if (dict != NULL)
      tensors = collect(&m, dict);
    else if (root->kind == V_DICT)
      g_set_error(&local, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                  _("the pickle's dict holds no tensors (nor does a “state_dict” or “model” "
                    "entry of it): not a state_dict"));
    else
      g_set_error(&local, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                  _("the pickle holds an object of type %s, not a state_dict (a dict of "
                    "tensors)"),
                  kind_names[root->kind]);
  }
  g_hash_table_unref(m.memo);
  g_array_unref(m.marks);
  g_ptr_array_unref(m.stack);
  g_ptr_array_unref(m.arena);
  if (tensors == NULL)
    g_propagate_error(error, g_steal_pointer(&local));
  return tensors;
}
