/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-network-build.c — a network from its spec, stage by stage: expand a built-in
 * network's name, parse the text into items (tdm-network-spec.c), then for each item
 * its layer, a relu fused into the layer before it, its shapes, its place in the
 * parameter and state buffers; the head checked; names and the canonical spec
 * (tdm-network-names.c). See docs/ARCHITECTURE.md, "Network specs". */
#include "tdm-network.h"
#include "tdm-error.h"
#include "tdm-i18n.h"
#include "tdm-network-catalogue.h"
#include "tdm-network-private.h"

#include <string.h>

/* The stride s with which a 1×1 conv maps in to out (in − 1) / s + 1 = out, both
 * ways; 0 when there is none. */
static int
projection_stride(int in_h, int in_w, int out_h, int out_w)
{
  for (int s = 1; s <= MAX(in_h, in_w); s++)
    if ((in_h - 1) / s + 1 == out_h && (in_w - 1) / s + 1 == out_w)
      return s;
  return 0;
}

typedef struct {
  int begin;                   /* index of the block's RES_BEGIN */
  int h, w, c;                 /* its input shape */
} OpenBlock;

/* Where the build is between two items: the current output's shape, the blocks
 * open around it, and the parameters and state laid out so far. */
typedef struct {
  int h, w, c;
  /* Whether the current output is a flat vector (after an fc, a flatten or a global
   * pool, through any bn, relu, dropout, scale or block opening since). */
  gboolean flat;
  OpenBlock open[MAX_DEPTH + 1];
  int depth;
  size_t offset, state;
} Cursor;

/* Whether a layer's output is a vector rather than an image. */
static gboolean
flat_output(const TdmLayer *l)
{
  return l->kind == TDM_LAYER_LINEAR || l->kind == TDM_LAYER_FLATTEN ||
         l->kind == TDM_LAYER_GLOBAL_AVG || l->kind == TDM_LAYER_GLOBAL_MAX;
}

static gboolean
fusable(const TdmLayer *prev)
{
  return !prev->fused_relu &&
         (prev->kind == TDM_LAYER_LINEAR || prev->kind == TDM_LAYER_CONV ||
          prev->kind == TDM_LAYER_BN || prev->kind == TDM_LAYER_RES_END);
}

/* Expand: a built-in network's name becomes its spec with a head of `classes`; an
 * empty spec, or a name that is neither a built-in network nor a spec, is refused. */
static char *
expand_spec(const char *spec, int classes, GError **error)
{
  const TdmNetworkPreset *preset = tdm_network_preset_find(spec);
  char *expanded = preset != NULL ? tdm_network_preset_spec(preset, classes) : g_strdup(spec);
  g_autofree char *probe = g_strstrip(g_strdup(expanded));
  if (*probe == '\0') {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC,
                _("network spec is empty: give mlp, cnn, resnet or layers such as "
                "fc128,relu,fc10"));
    g_free(expanded);
    return NULL;
  }
  g_autofree char *unknown = preset == NULL ? tdm_network_unknown(spec) : NULL;
  if (unknown != NULL) {
    g_set_error_literal(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC, unknown);
    g_free(expanded);
    return NULL;
  }
  return expanded;
}

/* Fuse: a relu right after a conv, fc, bn or block end is applied by that layer. */
static gboolean
fuse_relu(TdmNetwork *net, const TdmLayer *layer)
{
  if (layer->kind != TDM_LAYER_RELU || net->layer_count == 0 ||
      !fusable(&net->layers[net->layer_count - 1]))
    return FALSE;
  net->layers[net->layer_count - 1].fused_relu = TRUE;
  return TRUE;
}

/* Shapes: the layer's output shape and parameter counts from the cursor's shape,
 * the blocks opened and closed; FALSE with the error where the layer cannot take
 * its input. `before_bn`: the next item is a bn (a conv or fc then has no bias). */
static gboolean
shape_layer(TdmNetwork *net, Cursor *at, TdmLayer *layer, int features, gboolean before_bn,
            const char *token, int position, GError **error)
{
  int cur_h = at->h, cur_w = at->w, cur_c = at->c;
  layer->in_h = layer->out_h = cur_h;
  layer->in_w = layer->out_w = cur_w;
  layer->in_c = layer->out_c = cur_c;
  layer->depth = at->depth;
  switch (layer->kind) {
  case TDM_LAYER_LINEAR: {
    size_t in = (size_t)cur_h * cur_w * cur_c;
    layer->out_h = layer->out_w = 1;
    layer->out_c = features;
    layer->weight_count = in * features;
    layer->bias_count = before_bn || layer->no_bias ? 0 : (size_t)features;
    break;
  }
  case TDM_LAYER_CONV:
    /* A 1×1 image is fine (ResNet's last stage on small inputs), a flat vector not,
     * whatever comes between them (fc16,basic8 opens a block first). */
    if (at->flat)
      return tdm_network_spec_error(error, token, position,
                        _("a convolution needs an image, but its input is a flat vector of %d "
                        "features"),
                        cur_c);
    if (cur_h + 2 * layer->pad < layer->kernel || cur_w + 2 * layer->pad < layer->kernel)
      return tdm_network_spec_error(error, token, position, _("a %d×%d kernel does not fit its %d×%d input"),
                        layer->kernel, layer->kernel, cur_h, cur_w);
    layer->out_h = (cur_h + 2 * layer->pad - layer->kernel) / layer->stride + 1;
    layer->out_w = (cur_w + 2 * layer->pad - layer->kernel) / layer->stride + 1;
    layer->out_c = features;
    if (layer->stride > cur_h + 2 * layer->pad || layer->stride > cur_w + 2 * layer->pad)
      return tdm_network_spec_error(error, token, position,
                        _("stride %d is larger than its padded %d×%d input: it leaves nothing "
                        "to convolve"),
                        layer->stride, cur_h + 2 * layer->pad, cur_w + 2 * layer->pad);
    layer->weight_count = (size_t)features * cur_c * layer->kernel * layer->kernel;
    layer->bias_count = before_bn || layer->no_bias ? 0 : (size_t)features;
    break;
  case TDM_LAYER_POOL:
  case TDM_LAYER_AVGPOOL:
    if (cur_h + 2 * layer->pad < layer->kernel || cur_w + 2 * layer->pad < layer->kernel)
      return tdm_network_spec_error(error, token, position, _("a %d×%d window does not fit its %d×%d input"),
                        layer->kernel, layer->kernel, cur_h, cur_w);
    layer->out_h = (cur_h + 2 * layer->pad - layer->kernel) / layer->stride + 1;
    layer->out_w = (cur_w + 2 * layer->pad - layer->kernel) / layer->stride + 1;
    break;
  case TDM_LAYER_GLOBAL_AVG:
  case TDM_LAYER_GLOBAL_MAX:
    layer->out_h = layer->out_w = 1;
    break;
  case TDM_LAYER_FLATTEN:
    layer->out_h = layer->out_w = 1;
    layer->out_c = cur_h * cur_w * cur_c;
    break;
  case TDM_LAYER_BN:
    if (net->layer_count == 0)
      return tdm_network_spec_error(error, token, position,
                        _("bn before any layer: it normalizes the output of a conv or fc, so "
                        "put it after one (e.g. conv32k3p1,bn)"));
    layer->weight_count = layer->bias_count = (size_t)cur_c;
    layer->state_count = 2 * (size_t)cur_c;
    break;
  case TDM_LAYER_DROPOUT:
    net->has_dropout = TRUE;
    break;
  case TDM_LAYER_SCALE:
  case TDM_LAYER_RELU:
    break;
  case TDM_LAYER_RES_BEGIN:
    at->open[at->depth] = (OpenBlock){net->layer_count, cur_h, cur_w, cur_c};
    at->depth++;
    layer->depth = at->depth;
    break;
  case TDM_LAYER_RES_END: {
    at->depth--;
    const OpenBlock *ob = &at->open[at->depth];
    layer->depth = at->depth + 1;
    layer->partner = ob->begin;
    net->layers[ob->begin].partner = net->layer_count;
    if (ob->h != cur_h || ob->w != cur_w || ob->c != cur_c) {
      int s = projection_stride(ob->h, ob->w, cur_h, cur_w);
      if (s == 0)
        return tdm_network_spec_error(error, "res(", position,
                          _("the block turns its %d×%d×%d input into %d×%d×%d, which no 1×1 "
                          "projection with a stride can match (a block may keep or shrink the "
                          "size, not grow it)"),
                          ob->h, ob->w, ob->c, cur_h, cur_w, cur_c);
      layer->projection = TRUE;
      layer->stride = s;
      layer->weight_count = (size_t)cur_c * ob->c;
      layer->bias_count = 2 * (size_t)cur_c;
      layer->state_count = 2 * (size_t)cur_c;
    }
    break;
  }
  }
  size_t activation = (size_t)layer->out_h * layer->out_w * layer->out_c;
  if (activation > ((size_t)1 << 26))
    return tdm_network_spec_error(error, token, position,
                      _("its output of %zu values per sample is too large"), activation);
  net->max_activation = MAX(net->max_activation, activation);
  at->h = layer->out_h;
  at->w = layer->out_w;
  at->c = layer->out_c;
  if (flat_output(layer))
    at->flat = TRUE;
  else if (layer->kind == TDM_LAYER_CONV || layer->kind == TDM_LAYER_POOL ||
           layer->kind == TDM_LAYER_AVGPOOL)
    at->flat = FALSE;
  return TRUE;
}

/* Layout: the layer's parameters after those before it in the flat buffer, its BN
 * state likewise in the state buffer. */
static void
place_layer(TdmNetwork *net, Cursor *at, TdmLayer *layer)
{
  if (layer->weight_count + layer->bias_count > 0) {
    layer->param_offset = at->offset;
    layer->weight_offset = at->offset;
    at->offset += layer->weight_count;
    layer->bias_offset = at->offset;
    at->offset += layer->bias_count;
    layer->param_count = layer->weight_count + layer->bias_count;
  }
  if (layer->state_count > 0) {
    layer->state_offset = at->state;
    at->state += layer->state_count;
    net->bn_count++;
  }
}

/* The layers of `items` on an h×w×c input, each parsed, fused, shaped and placed. */
static gboolean
build_layers(TdmNetwork *net, const GArray *items, GError **error)
{
  const Item *item = (const Item *)(const void *)items->data;
  int n_items = (int)items->len;
  Cursor at = {.h = net->in_h, .w = net->in_w, .c = net->in_c};

  net->layers = g_new0(TdmLayer, n_items);
  for (int i = 0; i < n_items; i++) {
    const Item *it = &item[i];
    TdmLayer layer = {.partner = -1, .position = it->position, .stride = 1};
    int features = 0;
    const char *token = it->text ? it->text : (it->type == ITEM_BEGIN ? "res(" : ")");
    if (it->type == ITEM_BEGIN)
      layer.kind = TDM_LAYER_RES_BEGIN;
    else if (it->type == ITEM_END)
      layer.kind = TDM_LAYER_RES_END;
    else if (!tdm_network_parse_token(it->text, it->position, &layer, &features, error))
      return FALSE;
    if (fuse_relu(net, &layer))
      continue;
    gboolean before_bn = i + 1 < n_items && item[i + 1].type == ITEM_LAYER &&
                         g_str_equal(item[i + 1].text, "bn");
    if (!shape_layer(net, &at, &layer, features, before_bn, token, it->position, error))
      return FALSE;
    place_layer(net, &at, &layer);
    net->layers[net->layer_count++] = layer;
  }
  net->parameter_count = at.offset;
  net->state_count = at.state;
  return TRUE;
}

/* The logits come from the last fc, scaled or not, one output a class; and the
 * parameters stay within Tandem's limit. */
static gboolean
check_head(const TdmNetwork *net, GError **error)
{
  int last_index = net->layer_count - 1;
  while (last_index > 0 && net->layers[last_index].kind == TDM_LAYER_SCALE)
    last_index--;
  const TdmLayer *last = &net->layers[last_index];
  if (last->kind != TDM_LAYER_LINEAR || last->fused_relu) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC,
                _("network spec must end with fc%d (one output per class, then scaleS if "
                "wanted), without a relu"),
                net->classes);
    return FALSE;
  }
  if (last->out_c != net->classes) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC,
                _("network spec ends with fc%d but the dataset has %d classes: end with fc%d"),
                last->out_c, net->classes, net->classes);
    return FALSE;
  }
  if (net->parameter_count > ((size_t)1 << 31)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC,
                _("network has %zu parameters; Tandem's limit is 2³¹"), net->parameter_count);
    return FALSE;
  }
  return TRUE;
}

/* The stages in order: expand, parse, then per item fuse, shape and place, check the
 * head, and name the parameters (tdm-network-names.c) and the canonical spec. */
TdmNetwork *
tdm_network_new(const char *spec, int h, int w, int c, int classes, GError **error)
{
  g_return_val_if_fail(spec != NULL, NULL);
  g_return_val_if_fail(h > 0 && w > 0 && c > 0 && classes > 0, NULL);

  g_autofree char *expanded = expand_spec(spec, classes, error);
  if (expanded == NULL)
    return NULL;
  g_autoptr(GArray) items = tdm_network_parse_items(expanded, error);
  if (items == NULL)
    return NULL;
  g_autoptr(TdmNetwork) net = g_new0(TdmNetwork, 1);
  net->in_h = h;
  net->in_w = w;
  net->in_c = c;
  net->classes = classes;
  net->max_activation = (size_t)h * w * c;
  if (!build_layers(net, items, error) || !check_head(net, error))
    return NULL;
  tdm_network_assign_names(net);
  net->spec = tdm_network_canonical_spec(net);
  return g_steal_pointer(&net);
}

