/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-onnx-model.c — a network's layer list walked once, each kind of layer turned
 * into its ONNX nodes and initializers, the whole packed by protobuf-c
 * (tdm-onnx-model.h). A new kind of layer is one more case in emit_layer(); the
 * compiler names the switch that misses it.
 *
 * Values in the graph are NCHW images (rank 4) until an fc or a flatten makes them
 * rows of features (rank 2). Tandem's flattened features are in HWC order: an fc that
 * flattens an image gets its weight's columns permuted to CHW (what nn.Flatten +
 * nn.Linear compute), and an explicit flatten transposes the image to NHWC first, so
 * whatever reads the features after it sees Tandem's order.
 */
#include "tdm-onnx-model.h"
#include "tdm-i18n.h"
#include "tdm-build-config.h"
#include "tdm-error.h"
#include "tdm-json.h"
#include "tdm-onnx.pb-c.h"

#include <stdarg.h>
#include <string.h>

/* ONNX 1.8's IR with opset 13: every operator used here has had its current meaning
 * since then, and every runtime of the last years reads it. */
#define ONNX_IR_VERSION 7
#define ONNX_OPSET 13
/* protobuf refuses to parse messages of 2 GB or more. */
#define ONNX_MAX_BYTES ((size_t)G_MAXINT32)
#define MAX_ATTRIBUTES 6

typedef struct {
  GPtrArray *owned;          /* everything allocated for the model: freed together */
  GPtrArray *nodes;          /* TdmOnnx__NodeProto *, in execution order */
  GPtrArray *initializers;   /* TdmOnnx__TensorProto * */
} Graph;

/* A value between nodes: its name and rank (4: NCHW, 2: [N, features]). */
typedef struct {
  const char *name;
  int rank;
} Value;

static gpointer
own(Graph *g, gpointer p)
{
  g_ptr_array_add(g->owned, p);
  return p;
}

static char *
own_printf(Graph *g, const char *format, ...) G_GNUC_PRINTF(2, 3);

static char *
own_printf(Graph *g, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  char *s = g_strdup_vprintf(format, args);
  va_end(args);
  return own(g, s);
}

/* Initializers. raw_data is little-endian whatever the host. */

static void
add_raw(Graph *g, const char *name, int rank, const int64_t *dims, int32_t type, void *data,
        size_t bytes)
{
  TdmOnnx__TensorProto *t = own(g, g_new(TdmOnnx__TensorProto, 1));
  tdm_onnx__tensor_proto__init(t);
  t->name = own(g, g_strdup(name));
  t->n_dims = rank;
  t->dims = rank > 0 ? own(g, g_memdup2(dims, rank * sizeof(int64_t))) : NULL;
  t->has_data_type = TRUE;
  t->data_type = type;
  t->has_raw_data = TRUE;
  t->raw_data.len = bytes;
  t->raw_data.data = own(g, data);
  g_ptr_array_add(g->initializers, t);
}

/* Takes data (count floats, g_malloc'ed). */
static void
add_floats_take(Graph *g, const char *name, int rank, const int64_t *dims, float *data,
                size_t count)
{
#if G_BYTE_ORDER == G_BIG_ENDIAN
  guint32 *words = (guint32 *)data;
  for (size_t i = 0; i < count; i++)
    words[i] = GUINT32_SWAP_LE_BE(words[i]);
#endif
  add_raw(g, name, rank, dims, TDM_ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, data,
          count * sizeof(float));
}

static void
add_floats(Graph *g, const char *name, int rank, const int64_t *dims, const float *data,
           size_t count)
{
  add_floats_take(g, name, rank, dims, g_memdup2(data, count * sizeof(float)), count);
}

static void
add_int64s(Graph *g, const char *name, const int64_t *values, int count)
{
  int64_t dims[1] = {count};
  gint64 *data = g_new(gint64, count);
  for (int i = 0; i < count; i++)
    data[i] = GINT64_TO_LE(values[i]);
  add_raw(g, name, 1, dims, TDM_ONNX__TENSOR_PROTO__DATA_TYPE__INT64, data,
          count * sizeof(gint64));
}

/* Nodes. Each has one output, named as the node. */

static TdmOnnx__NodeProto *
add_node(Graph *g, const char *op, const char *name, const char *in0, const char *in1,
         const char *in2, const char *in3, const char *in4)
{
  const char *inputs[] = {in0, in1, in2, in3, in4};
  TdmOnnx__NodeProto *n = own(g, g_new(TdmOnnx__NodeProto, 1));
  tdm_onnx__node_proto__init(n);
  n->op_type = own(g, g_strdup(op));
  n->name = own(g, g_strdup(name));
  n->input = own(g, g_new0(char *, G_N_ELEMENTS(inputs)));
  for (gsize i = 0; i < G_N_ELEMENTS(inputs) && inputs[i] != NULL; i++)
    n->input[n->n_input++] = own(g, g_strdup(inputs[i]));
  n->output = own(g, g_new0(char *, 1));
  n->output[0] = n->name;
  n->n_output = 1;
  n->attribute = own(g, g_new0(TdmOnnx__AttributeProto *, MAX_ATTRIBUTES));
  g_ptr_array_add(g->nodes, n);
  return n;
}

static TdmOnnx__AttributeProto *
add_attribute(Graph *g, TdmOnnx__NodeProto *n, const char *name,
              TdmOnnx__AttributeProto__AttributeType type)
{
  g_assert(n->n_attribute < MAX_ATTRIBUTES);
  TdmOnnx__AttributeProto *a = own(g, g_new(TdmOnnx__AttributeProto, 1));
  tdm_onnx__attribute_proto__init(a);
  a->name = own(g, g_strdup(name));
  a->has_type = TRUE;
  a->type = type;
  n->attribute[n->n_attribute++] = a;
  return a;
}

static void
attr_int(Graph *g, TdmOnnx__NodeProto *n, const char *name, int64_t value)
{
  TdmOnnx__AttributeProto *a =
    add_attribute(g, n, name, TDM_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = TRUE;
  a->i = value;
}

static void
attr_float(Graph *g, TdmOnnx__NodeProto *n, const char *name, float value)
{
  TdmOnnx__AttributeProto *a =
    add_attribute(g, n, name, TDM_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  a->has_f = TRUE;
  a->f = value;
}

static void
attr_ints(Graph *g, TdmOnnx__NodeProto *n, const char *name, int count, const int64_t *values)
{
  TdmOnnx__AttributeProto *a =
    add_attribute(g, n, name, TDM_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  a->n_ints = count;
  a->ints = own(g, g_memdup2(values, count * sizeof(int64_t)));
}

static Value
unary(Graph *g, const char *op, const char *name, Value x)
{
  return (Value){add_node(g, op, name, x.name, NULL, NULL, NULL, NULL)->name, x.rank};
}

/* Shapes. */

/* Rows of features; hwc: in Tandem's order (through NHWC) rather than ONNX's CHW. */
static Value
to_rows(Graph *g, const char *name, Value x, gboolean hwc)
{
  if (x.rank == 2)
    return x;
  if (hwc) {
    TdmOnnx__NodeProto *t =
      add_node(g, "Transpose", own_printf(g, "%s.nhwc", name), x.name, NULL, NULL, NULL, NULL);
    attr_ints(g, t, "perm", 4, (const int64_t[]){0, 2, 3, 1});
    x.name = t->name;
  }
  TdmOnnx__NodeProto *f = add_node(g, "Flatten", name, x.name, NULL, NULL, NULL, NULL);
  attr_int(g, f, "axis", 1);
  return (Value){f->name, 2};
}

/* An image of 1 × 1 pixels from rows of features, for the image operators. */
static Value
to_image(Graph *g, const char *name, Value x)
{
  if (x.rank == 4)
    return x;
  const char *shape = own_printf(g, "%s.shape", name);
  add_int64s(g, shape, (const int64_t[]){0, -1, 1, 1}, 4);
  TdmOnnx__NodeProto *r = add_node(g, "Reshape", name, x.name, shape, NULL, NULL, NULL);
  return (Value){r->name, 4};
}

/* Layers. */

static Value
emit_bn(Graph *g, const char *prefix, Value x, const float *gamma, const float *beta,
        const float *mean, const float *var, int channels)
{
  const int64_t dims[1] = {channels};
  const char *names[4];
  const float *data[4] = {gamma, beta, mean, var};
  const char *suffixes[4] = {"weight", "bias", "running_mean", "running_var"};
  for (int k = 0; k < 4; k++) {
    names[k] = own_printf(g, "%s.%s", prefix, suffixes[k]);
    add_floats(g, names[k], 1, dims, data[k], channels);
  }
  TdmOnnx__NodeProto *n = add_node(g, "BatchNormalization", prefix, x.name, names[0],
                                   names[1], names[2], names[3]);
  attr_float(g, n, "epsilon", TDM_BN_EPS);
  return (Value){n->name, x.rank};
}

static Value
emit_linear(Graph *g, const TdmLayer *l, const float *params, Value x)
{
  const size_t hw = (size_t)l->in_h * l->in_w, c = l->in_c, in = hw * c;
  float *w = g_memdup2(params + l->weight_offset, l->weight_count * sizeof(float));
  if (x.rank == 4) {
    x = to_rows(g, own_printf(g, "%s.flatten", l->name), x, FALSE);
    /* Column (p, ch) of ours, p = y·W + x, is column (ch, p) of a CHW flatten. */
    if (hw > 1 && c > 1) {
      const float *ours = params + l->weight_offset;
      for (size_t o = 0; o < (size_t)l->out_c; o++)
        for (size_t p = 0; p < hw; p++)
          for (size_t ch = 0; ch < c; ch++)
            w[o * in + ch * hw + p] = ours[o * in + p * c + ch];
    }
  }
  const char *weight = own_printf(g, "%s.weight", l->name);
  add_floats_take(g, weight, 2, (const int64_t[]){l->out_c, (int64_t)in}, w, l->weight_count);
  const char *bias = NULL;
  if (l->bias_count > 0) {
    bias = own_printf(g, "%s.bias", l->name);
    add_floats(g, bias, 1, (const int64_t[]){l->out_c}, params + l->bias_offset,
               l->bias_count);
  }
  TdmOnnx__NodeProto *n = add_node(g, "Gemm", l->name, x.name, weight, bias, NULL, NULL);
  attr_int(g, n, "transB", 1);
  return (Value){n->name, 2};
}

static void
window_attributes(Graph *g, TdmOnnx__NodeProto *n, int kernel, int stride, int pad)
{
  attr_ints(g, n, "kernel_shape", 2, (const int64_t[]){kernel, kernel});
  attr_ints(g, n, "strides", 2, (const int64_t[]){stride, stride});
  attr_ints(g, n, "pads", 4, (const int64_t[]){pad, pad, pad, pad});
}

static Value
emit_conv(Graph *g, const TdmLayer *l, const float *params, Value x)
{
  x = to_image(g, own_printf(g, "%s.image", l->name), x);
  float *w = g_new(float, l->weight_count);
  tdm_layer_weight_to_torch(l, params + l->weight_offset, w);
  const char *weight = own_printf(g, "%s.weight", l->name);
  add_floats_take(g, weight, 4, (const int64_t[]){l->out_c, l->in_c, l->kernel, l->kernel}, w,
                  l->weight_count);
  const char *bias = NULL;
  if (l->bias_count > 0) {
    bias = own_printf(g, "%s.bias", l->name);
    add_floats(g, bias, 1, (const int64_t[]){l->out_c}, params + l->bias_offset,
               l->bias_count);
  }
  TdmOnnx__NodeProto *n = add_node(g, "Conv", l->name, x.name, weight, bias, NULL, NULL);
  window_attributes(g, n, l->kernel, l->stride, l->pad);
  return (Value){n->name, 4};
}

static Value
emit_pool(Graph *g, const TdmLayer *l, const char *op, const char *what, Value x)
{
  x = to_image(g, own_printf(g, "%s.image", l->name), x);
  TdmOnnx__NodeProto *n =
    add_node(g, op, own_printf(g, "%s.%s", l->name, what), x.name, NULL, NULL, NULL, NULL);
  window_attributes(g, n, l->kernel, l->stride, l->pad);
  /* Padding counts in the mean, as in PyTorch's AvgPool2d (ONNX's default leaves it
   * out). */
  if (l->kind == TDM_LAYER_AVGPOOL && l->pad > 0)
    attr_int(g, n, "count_include_pad", 1);
  return (Value){n->name, 4};
}

/* Global pooling; on rows of features (1 × 1 images in Tandem) it changes nothing. */
static Value
emit_global(Graph *g, const TdmLayer *l, const char *op, const char *what, Value x)
{
  if (x.rank == 2)
    return x;
  return unary(g, op, own_printf(g, "%s.%s", l->name, what), x);
}

static Value
emit_scale(Graph *g, const TdmLayer *l, Value x)
{
  const char *factor = own_printf(g, "%s.factor", l->name);
  add_floats(g, factor, 0, NULL, &l->factor, 1);
  TdmOnnx__NodeProto *n = add_node(g, "Mul", own_printf(g, "%s.scale", l->name), x.name,
                                   factor, NULL, NULL, NULL);
  return (Value){n->name, x.rank};
}

/* The block's output plus its input `skip`, through the 1×1 projection conv (stride
 * to match) and its bn where the shape changes. */
static Value
emit_residual(Graph *g, const TdmNetwork *net, const TdmLayer *l, const float *params,
              const float *state, Value x, Value skip)
{
  const TdmLayer *begin = &net->layers[l->partner];
  if (l->projection) {
    const char *conv = own_printf(g, "%s.0", l->name);
    const char *weight = own_printf(g, "%s.weight", conv);
    const int64_t out = l->out_c, in = begin->in_c;
    const float *w = params + l->weight_offset;
    TdmOnnx__NodeProto *n;
    if (skip.rank == 4) {
      add_floats(g, weight, 4, (const int64_t[]){out, in, 1, 1}, w, l->weight_count);
      n = add_node(g, "Conv", conv, skip.name, weight, NULL, NULL, NULL);
      window_attributes(g, n, 1, l->stride, 0);
    } else {
      add_floats(g, weight, 2, (const int64_t[]){out, in}, w, l->weight_count);
      n = add_node(g, "Gemm", conv, skip.name, weight, NULL, NULL, NULL);
      attr_int(g, n, "transB", 1);
    }
    skip = emit_bn(g, own_printf(g, "%s.1", l->name), (Value){n->name, skip.rank},
                   params + l->bias_offset, params + l->bias_offset + l->out_c,
                   state + l->state_offset, state + l->state_offset + l->out_c, l->out_c);
  }
  /* A block over 1 × 1 images may end in rows (a flatten or an fc inside it). */
  if (x.rank != skip.rank) {
    if (x.rank == 4)
      x = to_rows(g, own_printf(g, "%s.rows", x.name), x, FALSE);
    else
      skip = to_rows(g, own_printf(g, "%s.rows", skip.name), skip, FALSE);
  }
  TdmOnnx__NodeProto *n =
    add_node(g, "Add", own_printf(g, "%s.add", begin->name), x.name, skip.name, NULL, NULL,
             NULL);
  return (Value){n->name, x.rank};
}

static Value
emit_layer(Graph *g, const TdmNetwork *net, int i, const float *params, const float *state,
           Value x, const Value *inputs)
{
  const TdmLayer *l = &net->layers[i];
  switch (l->kind) {
  case TDM_LAYER_LINEAR:
    return emit_linear(g, l, params, x);
  case TDM_LAYER_CONV:
    return emit_conv(g, l, params, x);
  case TDM_LAYER_POOL:
    return emit_pool(g, l, "MaxPool", "maxpool", x);
  case TDM_LAYER_AVGPOOL:
    return emit_pool(g, l, "AveragePool", "avgpool", x);
  case TDM_LAYER_RELU:
    return unary(g, "Relu", own_printf(g, "%s.relu", l->name), x);
  case TDM_LAYER_FLATTEN:
    return to_rows(g, own_printf(g, "%s.flatten", l->name), x,
                   l->in_h * l->in_w > 1 && l->in_c > 1);
  case TDM_LAYER_BN:
    return emit_bn(g, l->name, x, params + l->weight_offset, params + l->bias_offset,
                   state + l->state_offset, state + l->state_offset + l->out_c, l->out_c);
  case TDM_LAYER_GLOBAL_AVG:
    return emit_global(g, l, "GlobalAveragePool", "gap", x);
  case TDM_LAYER_GLOBAL_MAX:
    return emit_global(g, l, "GlobalMaxPool", "gmp", x);
  case TDM_LAYER_DROPOUT:
  case TDM_LAYER_RES_BEGIN:
    /* Dropout is off in inference; a block's start computes nothing. */
    return x;
  case TDM_LAYER_SCALE:
    return emit_scale(g, l, x);
  case TDM_LAYER_RES_END:
    return emit_residual(g, net, l, params, state, x, inputs[l->partner]);
  }
  g_assert_not_reached();
}

/* The input, normalized per channel when options ask for it. */
static gboolean
emit_input(Graph *g, const TdmNetwork *net, const TdmOnnxOptions *options, const char *what,
           Value *x, GError **error)
{
  *x = (Value){"input", 4};
  if (options == NULL || (options->mean == NULL && options->std == NULL))
    return TRUE;
  const int c = net->in_c;
  const int64_t dims[4] = {1, c, 1, 1};
  for (int k = 0; options->std != NULL && k < c; k++)
    if (!(options->std[k] > 0.0f)) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_EXPORT,
                  _("%s: the normalization's standard deviation of channel %d is %g; it "
                  "must be positive"), what, k, options->std[k]);
      return FALSE;
    }
  if (options->mean != NULL) {
    add_floats(g, "normalize.mean", 4, dims, options->mean, c);
    x->name = add_node(g, "Sub", "normalize.sub", x->name, "normalize.mean", NULL, NULL, NULL)
                ->name;
  }
  if (options->std != NULL) {
    add_floats(g, "normalize.std", 4, dims, options->std, c);
    x->name = add_node(g, "Div", "normalize", x->name, "normalize.std", NULL, NULL, NULL)->name;
  }
  return TRUE;
}

/* Graph inputs and outputs: float tensors with a free batch dimension. */
static TdmOnnx__ValueInfoProto *
value_info(Graph *g, const char *name, int rank, const int64_t *dims)
{
  TdmOnnx__TensorShapeProto *shape = own(g, g_new(TdmOnnx__TensorShapeProto, 1));
  tdm_onnx__tensor_shape_proto__init(shape);
  shape->dim = own(g, g_new0(TdmOnnx__TensorShapeProto__Dimension *, rank));
  shape->n_dim = rank;
  for (int k = 0; k < rank; k++) {
    TdmOnnx__TensorShapeProto__Dimension *d =
      own(g, g_new(TdmOnnx__TensorShapeProto__Dimension, 1));
    tdm_onnx__tensor_shape_proto__dimension__init(d);
    if (k == 0) {
      d->value_case = TDM_ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d->dim_param = (char *)"batch";
    } else {
      d->value_case = TDM_ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d->dim_value = dims[k];
    }
    shape->dim[k] = d;
  }
  TdmOnnx__TypeProto__Tensor *tensor = own(g, g_new(TdmOnnx__TypeProto__Tensor, 1));
  tdm_onnx__type_proto__tensor__init(tensor);
  tensor->has_elem_type = TRUE;
  tensor->elem_type = TDM_ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  tensor->shape = shape;
  TdmOnnx__TypeProto *type = own(g, g_new(TdmOnnx__TypeProto, 1));
  tdm_onnx__type_proto__init(type);
  type->value_case = TDM_ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  type->tensor_type = tensor;
  TdmOnnx__ValueInfoProto *v = own(g, g_new(TdmOnnx__ValueInfoProto, 1));
  tdm_onnx__value_info_proto__init(v);
  v->name = own(g, g_strdup(name));
  v->type = type;
  return v;
}

static TdmOnnx__StringStringEntryProto *
metadata(Graph *g, const char *key, char *value)
{
  TdmOnnx__StringStringEntryProto *e = own(g, g_new(TdmOnnx__StringStringEntryProto, 1));
  tdm_onnx__string_string_entry_proto__init(e);
  e->key = (char *)key;
  e->value = own(g, value);
  return e;
}

static char *
class_names_json(const TdmNetwork *net, const char *const *names)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_array(b);
  for (int k = 0; k < net->classes; k++)
    json_builder_add_string_value(b, names[k]);
  json_builder_end_array(b);
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  return tdm_json_to_string(root);
}

/* How Tandem made its inputs, for a runtime to do the same (the README shows it in
 * Python): the decoding (tdm-image.c), the crop and area average, the scaling and
 * the per-channel normalization the graph itself begins with. */
static char *
preprocessing_json(const TdmNetwork *net, const TdmOnnxOptions *options)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "size");
  json_builder_begin_array(b);
  json_builder_add_int_value(b, net->in_h);
  json_builder_add_int_value(b, net->in_w);
  json_builder_end_array(b);
  tdm_json_set_string(b, "channels", net->in_c == 1 ? "grey" : "R,G,B");
  tdm_json_set_string(b, "layout", "NCHW float32");
  tdm_json_set_string(b, "jpeg", "decoded by libjpeg with the largest DCT scaling of 1/2, "
                                 "1/4 or 1/8 that keeps the shorter side at least size "
                                 "(PIL: Image.draft), islow DCT");
  tdm_json_set_string(b, "crop", "the centre square: side min(width, height), corner "
                                 "((width - side) // 2, (height - side) // 2)");
  tdm_json_set_string(b, "resize", "area average (box filter) to size x size: each output "
                                   "pixel the mean of the source area it covers, weighted "
                                   "by overlap; float32 sums, rounded half up to 8 bits");
  tdm_json_set_double(b, "scale", 1.0 / 255.0);
  gboolean normalized = options != NULL && options->mean != NULL && options->std != NULL;
  tdm_json_set_string(b, "normalization", normalized ? "(x - mean) / std, in the graph: "
                                                       "feed x = byte / 255"
                                                     : "none");
  if (normalized) {
    for (int half = 0; half < 2; half++) {
      json_builder_set_member_name(b, half ? "std" : "mean");
      json_builder_begin_array(b);
      for (int c = 0; c < net->in_c; c++)
        json_builder_add_double_value(b, half ? options->std[c] : options->mean[c]);
      json_builder_end_array(b);
    }
  }
  json_builder_end_object(b);
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  return tdm_json_to_string(root);
}

static const char input_description[] =
  "float32 [batch, channels, height, width]: grey, or R, G, B, each 8-bit value / 255 "
  "(torchvision's ToTensor)";

GBytes *
tdm_onnx_model_build(const TdmNetwork *net, const float *params, const float *state,
                     const TdmOnnxOptions *options, const char *what, GError **error)
{
  g_return_val_if_fail(net != NULL && params != NULL, NULL);
  g_return_val_if_fail(state != NULL || net->state_count == 0, NULL);
  /* The weights go in once; the rest is small. */
  if ((net->parameter_count + net->state_count) * sizeof(float) > ONNX_MAX_BYTES - (64 << 20)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_EXPORT,
                _("%s: the network's %zu parameters do not fit in one ONNX file (protobuf "
                "reads at most 2 GB)"), what, net->parameter_count);
    return NULL;
  }
  Graph g = {g_ptr_array_new_with_free_func(g_free), g_ptr_array_new(), g_ptr_array_new()};
  GBytes *bytes = NULL;
  Value x;
  Value *inputs = g_new(Value, net->layer_count);
  if (!emit_input(&g, net, options, what, &x, error))
    goto out;
  for (int i = 0; i < net->layer_count; i++) {
    inputs[i] = x;
    x = emit_layer(&g, net, i, params, state, x, inputs);
    if (net->layers[i].fused_relu)
      x = unary(&g, "Relu", own_printf(&g, "%s.relu", x.name), x);
  }
  /* The logits are the last node's output (a network ends in an fc or a scale). */
  TdmOnnx__NodeProto *last = g.nodes->len > 0 ? g.nodes->pdata[g.nodes->len - 1] : NULL;
  if (last == NULL || strcmp(last->output[0], x.name) != 0)
    last = add_node(&g, "Identity", "output", x.name, NULL, NULL, NULL, NULL);
  last->output[0] = (char *)"logits";

  TdmOnnx__GraphProto graph = TDM_ONNX__GRAPH_PROTO__INIT;
  graph.name = (char *)"tandem";
  graph.n_node = g.nodes->len;
  graph.node = (TdmOnnx__NodeProto **)g.nodes->pdata;
  graph.n_initializer = g.initializers->len;
  graph.initializer = (TdmOnnx__TensorProto **)g.initializers->pdata;
  TdmOnnx__ValueInfoProto *input =
    value_info(&g, "input", 4, (const int64_t[]){0, net->in_c, net->in_h, net->in_w});
  TdmOnnx__ValueInfoProto *output =
    value_info(&g, "logits", 2, (const int64_t[]){0, net->classes});
  input->doc_string = (char *)input_description;
  output->doc_string = (char *)"float32 [batch, classes]: logits (softmax gives probabilities)";
  graph.n_input = graph.n_output = 1;
  graph.input = &input;
  graph.output = &output;

  TdmOnnx__OperatorSetIdProto opset = TDM_ONNX__OPERATOR_SET_ID_PROTO__INIT;
  opset.domain = (char *)"";
  opset.has_version = TRUE;
  opset.version = ONNX_OPSET;
  TdmOnnx__OperatorSetIdProto *opsets[1] = {&opset};

  TdmOnnx__StringStringEntryProto *props[4];
  size_t n_props = 0;
  props[n_props++] = metadata(&g, "network", g_strdup(net->spec));
  props[n_props++] = metadata(&g, "input", g_strdup(input_description));
  props[n_props++] = metadata(&g, "preprocessing", preprocessing_json(net, options));
  if (options != NULL && options->class_names != NULL)
    props[n_props++] = metadata(&g, "class_names", class_names_json(net, options->class_names));

  TdmOnnx__ModelProto model = TDM_ONNX__MODEL_PROTO__INIT;
  model.has_ir_version = TRUE;
  model.ir_version = ONNX_IR_VERSION;
  model.producer_name = (char *)"Tandem";
  model.producer_version = (char *)TDM_VERSION;
  model.doc_string = own_printf(&g, "%s, trained with Tandem, for inference (BN with its "
                                "running statistics, no dropout)", net->spec);
  model.graph = &graph;
  model.n_opset_import = 1;
  model.opset_import = opsets;
  model.n_metadata_props = n_props;
  model.metadata_props = props;

  size_t size = tdm_onnx__model_proto__get_packed_size(&model);
  uint8_t *buffer = size <= ONNX_MAX_BYTES ? g_try_malloc(size) : NULL;
  if (buffer == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_EXPORT,
                size > ONNX_MAX_BYTES ? "%s: the model takes %zu bytes, more than one ONNX "
                                        "file holds (protobuf reads at most 2 GB)"
                                      : "%s: no memory for the model's %zu bytes",
                what, size);
    goto out;
  }
  tdm_onnx__model_proto__pack(&model, buffer);
  bytes = g_bytes_new_take(buffer, size);
out:
  g_free(inputs);
  g_ptr_array_unref(g.nodes);
  g_ptr_array_unref(g.initializers);
  g_ptr_array_unref(g.owned);
  return bytes;
}
