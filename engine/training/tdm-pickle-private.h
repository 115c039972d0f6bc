/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-pickle-private.h — the restricted unpickler's machine, shared by its two
 * halves: tdm-pickle.c runs the opcodes of containers, numbers, strings and the memo;
 * tdm-pickle-torch.c those that name and build torch's objects (globals, REDUCE,
 * persistent ids, BUILD) and finds the state_dict in what the pickle made. Not for
 * use outside them.
 */
#pragma once

#include "tdm-pickle.h"

G_BEGIN_DECLS

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


/* "None", "int", "tuple" … by Kind, for messages. */
extern const char *const tdm_pickle_kind_names[];

/* Sets the machine's error (once) with the opcode and where it began; FALSE. */
gboolean tdm_pickle_fail (Machine *m, const char *format, ...) G_GNUC_PRINTF (2, 3);
/* A GLOBAL operand: a line of printable ASCII. */
gboolean tdm_pickle_take_line (Machine *m, char **out);
/* A new value in the machine's arena (containers with their item arrays). */
Value *tdm_pickle_new_value (Machine *m, Kind kind);
/* The stack above the last MARK: each push counts against the machine's budget. */
gboolean tdm_pickle_push (Machine *m, Value *v);
gboolean tdm_pickle_push_new (Machine *m, Kind kind, Value **out);
gboolean tdm_pickle_pop (Machine *m, Value **out);
gboolean tdm_pickle_top (Machine *m, Value **out);

/* The opcodes of torch's objects (tdm-pickle-torch.c). */
gboolean tdm_pickle_op_global (Machine *m);
gboolean tdm_pickle_op_stack_global (Machine *m);
gboolean tdm_pickle_op_reduce (Machine *m);
gboolean tdm_pickle_op_binpersid (Machine *m);
gboolean tdm_pickle_op_build (Machine *m);
/* The dict that holds the tensors (the root, or a checkpoint's "state_dict" …), or
 * NULL; and its tensors as TdmPickleTensor, NULL with m's error set when a name is
 * unusable. */
const Value *tdm_pickle_find_state_dict (const Value *root);
GPtrArray *tdm_pickle_collect (Machine *m, const Value *dict);

G_END_DECLS
