/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-network-names.c — what a parsed network is called: its layers' module names
 * (PyTorch's, torchvision's for its ResNets: conv1, bn1, layer2.0.downsample, fc) and
 * its canonical spec, the text that parses back to it. Not the parser
 * (tdm-network-spec.c).
 */
#include "tdm-network-private.h"

#include <string.h>

/* Module names as PyTorch's ResNets have them: at each level, conv1, bn1, fc1 … by
 * kind, and blocks layerS.B where a new stage S starts at the first block and at
 * every block with a projection (a change of shape), B counting within the stage. */
typedef struct {
  char prefix[48];
  int conv, bn, fc, stage, block;
} NameLevel;

void
tdm_network_assign_names(TdmNetwork *net)
{
  /* One level per block around a layer, and the top. */
  int deepest = 0;
  for (int i = 0; i < net->layer_count; i++)
    deepest = MAX(deepest, net->layers[i].depth);
  g_autofree NameLevel *levels = g_new(NameLevel, deepest + 2);
  int depth = 0;
  memset(&levels[0], 0, sizeof levels[0]);
  /* A network's only top-level fc is "fc", as torchvision's ResNets call their head. */
  int top_fcs = 0;
  for (int i = 0; i < net->layer_count; i++)
    top_fcs += net->layers[i].kind == TDM_LAYER_LINEAR && net->layers[i].depth == 0;
  for (int i = 0; i < net->layer_count; i++) {
    TdmLayer *l = &net->layers[i];
    NameLevel *lv = &levels[depth];
    const char *dot = lv->prefix[0] ? "." : "";
    switch (l->kind) {
    case TDM_LAYER_CONV:
      g_snprintf(l->name, sizeof l->name, "%s%sconv%d", lv->prefix, dot, ++lv->conv);
      break;
    case TDM_LAYER_LINEAR:
      if (depth == 0 && top_fcs == 1)
        g_strlcpy(l->name, "fc", sizeof l->name);
      else
        g_snprintf(l->name, sizeof l->name, "%s%sfc%d", lv->prefix, dot, ++lv->fc);
      break;
    case TDM_LAYER_BN:
      g_snprintf(l->name, sizeof l->name, "%s%sbn%d", lv->prefix, dot, ++lv->bn);
      break;
    case TDM_LAYER_RES_BEGIN: {
      const TdmLayer *end = &net->layers[l->partner];
      if (lv->stage == 0 || end->projection) {
        lv->stage++;
        lv->block = 0;
      } else {
        lv->block++;
      }
      NameLevel *inner = &levels[depth + 1];
      memset(inner, 0, sizeof *inner);
      g_snprintf(inner->prefix, sizeof inner->prefix, "%s%slayer%d.%d", lv->prefix, dot,
                 lv->stage, lv->block);
      g_strlcpy(l->name, inner->prefix, sizeof l->name);
      depth++;
      break;
    }
    case TDM_LAYER_RES_END:
      g_snprintf(l->name, sizeof l->name, "%s.downsample", levels[depth].prefix);
      depth--;
      break;
    default:
      g_snprintf(l->name, sizeof l->name, "%s%s%d", lv->prefix, dot, i + 1);
      break;
    }
  }
}

static void
append_canonical(GString *s, const TdmLayer *l)
{
  switch (l->kind) {
  case TDM_LAYER_LINEAR:
    g_string_append_printf(s, "fc%d%s", l->out_c, l->no_bias ? "nb" : "");
    break;
  case TDM_LAYER_CONV:
    if (l->stride != 1)
      g_string_append_printf(s, "conv%dk%ds%dp%d", l->out_c, l->kernel, l->stride, l->pad);
    else
      g_string_append_printf(s, "conv%dk%dp%d", l->out_c, l->kernel, l->pad);
    if (l->no_bias)
      g_string_append(s, "nb");
    break;
  case TDM_LAYER_SCALE: {
    /* The shortest of %g and %.9g that reads back as the same float. */
    char factor[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_formatd(factor, sizeof factor, "%g", l->factor);
    if ((float)g_ascii_strtod(factor, NULL) != l->factor)
      g_ascii_formatd(factor, sizeof factor, "%.9g", l->factor);
    g_string_append_printf(s, "scale%s", factor);
    break;
  }
  case TDM_LAYER_POOL:
  case TDM_LAYER_AVGPOOL:
    g_string_append_printf(s, "%s%d", l->kind == TDM_LAYER_POOL ? "pool" : "avg", l->kernel);
    if (!tdm_layer_pool_tiles(l))
      g_string_append_printf(s, "s%dp%d", l->stride, l->pad);
    break;
  case TDM_LAYER_GLOBAL_AVG:
    g_string_append(s, "gap");
    break;
  case TDM_LAYER_GLOBAL_MAX:
    g_string_append(s, "gmp");
    break;
  case TDM_LAYER_RELU:
    g_string_append(s, "relu");
    break;
  case TDM_LAYER_FLATTEN:
    g_string_append(s, "flatten");
    break;
  case TDM_LAYER_BN:
    g_string_append(s, "bn");
    break;
  case TDM_LAYER_DROPOUT: {
    char rate[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_formatd(rate, sizeof rate, "%g", l->rate);
    g_string_append_printf(s, "drop%s", rate);
    break;
  }
  case TDM_LAYER_RES_BEGIN:
    g_string_append(s, "res(");
    return;
  case TDM_LAYER_RES_END:
    g_string_append_c(s, ')');
    break;
  }
  if (l->fused_relu)
    g_string_append(s, ",relu");
}

char *
tdm_network_canonical_spec(const TdmNetwork *net)
{
  GString *s = g_string_new(NULL);
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (i > 0 && l->kind != TDM_LAYER_RES_END && net->layers[i - 1].kind != TDM_LAYER_RES_BEGIN)
      g_string_append_c(s, ',');
    append_canonical(s, l);
  }
  return g_string_free(s, FALSE);
}
