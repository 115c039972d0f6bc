/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-pickle.c — a restricted unpickler for PyTorch state_dicts (tdm-pickle.h): the
 * machine and the opcodes of plain values; torch's own are tdm-pickle-torch.c's.
 *
 * The machine keeps Python's shape (a stack, marks into it, a memo) but its values
 * are plain tagged structs in one arena: containers, numbers, strings, and the three
 * things a state_dict is made of (an allowed global, a storage named by a persistent
 * id, a tensor viewing a storage). Each opcode is read with its operands checked
 * against what is left of the input; every push and memo entry counts against one
 * budget, so memory stays bounded whatever the file says.
 */
#include "tdm-pickle-private.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

#include <string.h>

/* Pushes and memo entries a pickle may make: a ResNet-50's makes about 5,000. */
#define MAX_STEPS (1 << 20)

const char *const tdm_pickle_kind_names[] = {
  [V_NONE] = "None", [V_BOOL] = "bool", [V_INT] = "int", [V_FLOAT] = "float",
  [V_STRING] = "str", [V_BYTES] = "bytes", [V_TUPLE] = "tuple", [V_LIST] = "list",
  [V_DICT] = "dict", [V_GLOBAL] = "global", [V_STORAGE] = "storage", [V_TENSOR] = "tensor",
};

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

gboolean
tdm_pickle_fail(Machine *m, const char *format, ...)
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
    return tdm_pickle_fail(m, _("the pickle ends in the middle of an opcode's operand (truncated)"));
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
gboolean
tdm_pickle_take_line(Machine *m, char **out)
{
  *out = NULL;
  const guint8 *start = m->data + m->pos;
  const guint8 *nl = memchr(start, '\n', MIN(m->size - m->pos, 256));
  if (nl == NULL)
    return tdm_pickle_fail(m, _("a global's name does not end within 256 bytes"));
  for (const guint8 *p = start; p < nl; p++)
    if (*p < 0x20 || *p > 0x7e)
      return tdm_pickle_fail(m, _("a global's name is not printable text"));
  *out = g_strndup((const char *)start, nl - start);
  m->pos += nl - start + 1;
  return TRUE;
}

/* ---- values and the stack --------------------------------------------------- */

static gboolean
count_step(Machine *m)
{
  if (++m->steps > MAX_STEPS)
    return tdm_pickle_fail(m, _("the pickle makes more than %d values (no state_dict needs so many)"),
                MAX_STEPS);
  return TRUE;
}

Value *
tdm_pickle_new_value(Machine *m, Kind kind)
{
  Value *v = g_new0(Value, 1);
  v->kind = kind;
  if (kind == V_TUPLE || kind == V_LIST || kind == V_DICT)
    v->items = g_ptr_array_new();
  g_ptr_array_add(m->arena, v);
  return v;
}

gboolean
tdm_pickle_push(Machine *m, Value *v)
{
  if (!count_step(m))
    return FALSE;
  g_ptr_array_add(m->stack, v);
  return TRUE;
}

gboolean
tdm_pickle_push_new(Machine *m, Kind kind, Value **out)
{
  Value *v = tdm_pickle_new_value(m, kind);
  if (out != NULL)
    *out = v;
  return tdm_pickle_push(m, v);
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
    return tdm_pickle_fail(m, _("the pickle uses a MARK it never set"));
  guint floor = mark_floor(m);
  guint outer = m->marks->len > 1 ? g_array_index(m->marks, guint, m->marks->len - 2) : 0;
  if (floor <= outer)
    return tdm_pickle_fail(m, _("the pickle's stack is empty where a value was expected"));
  *out = m->stack->pdata[floor - 1];
  return TRUE;
}

/* Pops the top value (above the last mark). */
gboolean
tdm_pickle_pop(Machine *m, Value **out)
{
  *out = NULL;
  if (m->stack->len <= mark_floor(m))
    return tdm_pickle_fail(m, _("the pickle's stack is empty where a value was expected"));
  *out = g_ptr_array_steal_index(m->stack, m->stack->len - 1);
  return TRUE;
}

gboolean
tdm_pickle_top(Machine *m, Value **out)
{
  *out = NULL;
  if (m->stack->len <= mark_floor(m))
    return tdm_pickle_fail(m, _("the pickle's stack is empty where a value was expected"));
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
    return tdm_pickle_fail(m, _("the pickle nests containers more than %d deep"), TDM_PICKLE_MAX_DEPTH);
  g_ptr_array_add(container->items, item);
  return TRUE;
}

/* The values since the last MARK, taken off the stack along with the mark, into a
 * new tuple (or onto `into`'s items when given). */
static gboolean
pop_mark(Machine *m, Kind kind, Value *into, Value **out)
{
  if (m->marks->len == 0)
    return tdm_pickle_fail(m, _("the pickle uses a MARK it never set"));
  guint floor = mark_floor(m);
  g_array_set_size(m->marks, m->marks->len - 1);
  Value *v = into != NULL ? into : tdm_pickle_new_value(m, kind);
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
    return tdm_pickle_fail(m, _("a string of the pickle is not valid UTF-8"));
  Value *v;
  if (!tdm_pickle_push_new(m, kind, &v))
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
  if (!tdm_pickle_push_new(m, V_INT, &v))
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
    return tdm_pickle_fail(m, "an integer of %" G_GUINT64_FORMAT " bytes (at most 8 are read)", n);
  for (int i = (int)n - 1; i >= 0; i--)
    u = u << 8 | p[i];
  if (n > 0 && n < 8 && (p[n - 1] & 0x80))
    u |= ~(guint64)0 << (8 * n);
  Value *v;
  if (!tdm_pickle_push_new(m, V_INT, &v))
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
  if (!tdm_pickle_push_new(m, V_FLOAT, &v))
    return FALSE;
  memcpy(&v->real, &bits, sizeof bits);
  return TRUE;
}

static gboolean
op_tuple_n(Machine *m, guint n)
{
  if (m->stack->len < mark_floor(m) + n)
    return tdm_pickle_fail(m, _("the pickle's stack is empty where a value was expected"));
  Value *t = tdm_pickle_new_value(m, V_TUPLE);
  for (guint i = m->stack->len - n; i < m->stack->len; i++)
    if (!add_item(m, t, m->stack->pdata[i]))
      return FALSE;
  g_ptr_array_set_size(m->stack, m->stack->len - n);
  return tdm_pickle_push(m, t);
}

static gboolean
memo_put(Machine *m, guint64 index)
{
  Value *v;
  if (!tdm_pickle_top(m, &v) || !count_step(m))
    return FALSE;
  if (index > G_MAXUINT32)
    return tdm_pickle_fail(m, _("a memo index beyond 2³²"));
  g_hash_table_insert(m->memo, GUINT_TO_POINTER((guint)index), v);
  return TRUE;
}

static gboolean
memo_get(Machine *m, guint64 index)
{
  Value *v = index <= G_MAXUINT32 ? g_hash_table_lookup(m->memo, GUINT_TO_POINTER((guint)index))
                                  : NULL;
  if (v == NULL)
    return tdm_pickle_fail(m, "the pickle reads memo entry %" G_GUINT64_FORMAT ", which it never "
                              "wrote", index);
  return tdm_pickle_push(m, v);
}

static gboolean
set_items(Machine *m, Value *dict, GPtrArray *pairs, guint from)
{
  if (dict->kind != V_DICT)
    return tdm_pickle_fail(m, _("the pickle sets items of a %s"), tdm_pickle_kind_names[dict->kind]);
  if ((pairs->len - from) % 2 != 0)
    return tdm_pickle_fail(m, _("the pickle sets a key without a value"));
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
  if (!tdm_pickle_pop(m, &value) || !tdm_pickle_pop(m, &key) || !tdm_pickle_top(m, &dict))
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
  } else if (!tdm_pickle_pop(m, &item) || !tdm_pickle_top(m, &list)) {
    return FALSE;
  }
  if (list->kind != V_LIST)
    return tdm_pickle_fail(m, _("the pickle appends to a %s"), tdm_pickle_kind_names[list->kind]);
  if (!many)
    return add_item(m, list, item);
  return pop_mark(m, V_LIST, list, NULL);
}

static gboolean
op_mark(Machine *m)
{
  if (m->marks->len >= TDM_PICKLE_MAX_DEPTH)
    return tdm_pickle_fail(m, _("the pickle nests containers more than %d deep"), TDM_PICKLE_MAX_DEPTH);
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
    return n >= 2 && n <= 5 ? TRUE : tdm_pickle_fail(m, "pickle protocol %" G_GUINT64_FORMAT, n);
  case 0x95: /* FRAME: a length that only helps streaming readers */
    return take_uint(m, 8, &n);
  case '.':
    if (m->marks->len > 0)
      return tdm_pickle_fail(m, _("the pickle stops with a MARK still open"));
    return tdm_pickle_pop(m, result);
  case '(':
    return op_mark(m);
  case '}':
    return tdm_pickle_push_new(m, V_DICT, NULL);
  case ']':
    return tdm_pickle_push_new(m, V_LIST, NULL);
  case ')':
    return tdm_pickle_push_new(m, V_TUPLE, NULL);
  case 't': {
    Value *t;
    return pop_mark(m, V_TUPLE, NULL, &t) && tdm_pickle_push(m, t);
  }
  case 0x85:
  case 0x86:
  case 0x87:
    return op_tuple_n(m, m->op - 0x84);
  case 'N':
    return tdm_pickle_push_new(m, V_NONE, NULL);
  case 0x88:
  case 0x89: {
    Value *v;
    if (!tdm_pickle_push_new(m, V_BOOL, &v))
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
    return tdm_pickle_op_global(m);
  case 0x93:
    return tdm_pickle_op_stack_global(m);
  case 'R':
    return tdm_pickle_op_reduce(m);
  case 'Q':
    return tdm_pickle_op_binpersid(m);
  case 'b':
    return tdm_pickle_op_build(m);
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
      return tdm_pickle_fail(m, _("the pickle uses an opcode a state_dict does not: Tandem reads only "
                       "tensors and runs nothing from the file"));
    return tdm_pickle_fail(m, _("byte 0x%02x is not a pickle opcode (not a state_dict, or damaged)"),
                m->op);
  }
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
    const Value *dict = tdm_pickle_find_state_dict(root);
    if (dict != NULL)
      tensors = tdm_pickle_collect(&m, dict);
    else if (root->kind == V_DICT)
      g_set_error(&local, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                  _("the pickle's dict holds no tensors (nor does a “state_dict” or “model” "
                    "entry of it): not a state_dict"));
    else
      g_set_error(&local, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                  _("the pickle holds an object of type %s, not a state_dict (a dict of "
                    "tensors)"),
                  tdm_pickle_kind_names[root->kind]);
  }
  g_hash_table_unref(m.memo);
  g_array_unref(m.marks);
  g_ptr_array_unref(m.stack);
  g_ptr_array_unref(m.arena);
  if (tensors == NULL)
    g_propagate_error(error, g_steal_pointer(&local));
  return tensors;
}
