/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-network-spec.c — the spec parser: text to items (layers' tokens, blocks opened
 * and closed, repeats and built-in blocks expanded), one token to a layer's kind and
 * numbers, and the grammar as --help prints it. Errors name the item, its position
 * and why. Not the network built from the items (tdm-network-build.c) nor the numbers
 * (initial values, layouts for PyTorch: tdm-network.c). */
#include "tdm-network.h"
#include "tdm-i18n.h"
#include "tdm-network-catalogue.h"
#include "tdm-network-private.h"
#include "tdm-error.h"
#include "tdm-suggest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITEMS 4096

typedef struct {
  const char *spec;
  const char *p;
  int next_position;
  int groups;                  /* plain groups open around the item being read */
  GArray *items;               /* Item */
  GError **error;
} Parser;

gboolean
tdm_network_spec_error(GError **error, const char *token, int position, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  char *why = g_strdup_vprintf(format, args);
  va_end(args);
  /* The token may be the rest of a spec megabytes long: a message shows its start. */
  const char *end = token;
  for (int i = 0; i < 60 && *end != '\0'; i++)
    end = g_utf8_find_next_char(end, NULL);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC,
              _("network spec, layer %d “%.*s%s”: %s"), position, (int)(end - token), token,
              *end != '\0' ? "…" : "", why);
  g_free(why);
  return FALSE;
}

/* Reads a positive decimal at *p and advances; FALSE when there is none. */
static gboolean
read_number(const char **p, int *out)
{
  if (!g_ascii_isdigit(**p))
    return FALSE;
  gint64 value = 0;
  while (g_ascii_isdigit(**p)) {
    value = value * 10 + (**p - '0');
    if (value > 1 << 20)
      return FALSE;
    (*p)++;
  }
  *out = (int)value;
  return TRUE;
}

static void
skip_spaces(Parser *ps)
{
  while (g_ascii_isspace(*ps->p))
    ps->p++;
}

static void
push(Parser *ps, ItemType type, char *text, int position)
{
  Item item = {type, text, position};
  g_array_append_val(ps->items, item);
}

static gboolean parse_list(Parser *ps, int depth);

/* ResNet's blocks as items, torchvision's BasicBlock and Bottleneck (stride on the 3×3
 * conv, the 1×1 projection and its bn where the shape changes, the ReLU after the
 * sum):
 *   basicC[sS]       res(convCk3sSp1,bn,relu,convCk3p1,bn),relu
 *   bottleneckW[sS]  res(convWk1,bn,relu,convWk3sSp1,bn,relu,conv4Wk1,bn),relu
 * *out gets the text, or NULL when token is no such item. */
static gboolean
expand_block(const char *token, int position, char **out, GError **error)
{
  *out = NULL;
  gboolean basic = g_str_has_prefix(token, "basic");
  if (!basic && !g_str_has_prefix(token, "bottleneck"))
    return TRUE;
  const char *p = token + (basic ? 5 : 10);
  int width = 0, stride = 1;
  if (!read_number(&p, &width) || width < 1 || width > 65536 ||
      (*p == 's' && (p++, !read_number(&p, &stride) || stride < 1 || stride > 15)) ||
      *p != '\0')
    return tdm_network_spec_error(error, token, position,
                      basic ? "expected basicC[sS] with C channels, e.g. basic64 or basic128s2"
                            : "expected bottleneckW[sS] with a width W, e.g. bottleneck64 or "
                              "bottleneck128s2");
  if (basic)
    *out = g_strdup_printf("res(conv%dk3s%dp1,bn,relu,conv%dk3p1,bn),relu", width, stride,
                           width);
  else
    *out = g_strdup_printf("res(conv%dk1,bn,relu,conv%dk3s%dp1,bn,relu,conv%dk1,bn),relu",
                           width, width, stride, 4 * width);
  return TRUE;
}

/* One item: [N*] (res( list ) | ( list ) | token). */
static gboolean
parse_item(Parser *ps, int depth)
{
  skip_spaces(ps);
  const char *start = ps->p;
  int repeat = 1;
  const char *q = ps->p;
  if (read_number(&q, &repeat) && *q == '*') {
    if (repeat < 1 || repeat > 64) {
      g_autofree char *what = g_strndup(start, q + 1 - start);
      return tdm_network_spec_error(ps->error, what, ps->next_position,
                        _("a repeat count must be between 1 and 64"));
    }
    ps->p = q + 1;
    skip_spaces(ps);
  } else {
    repeat = 1;
  }

  const char *body = ps->p;
  int first_position = ps->next_position;
  for (int copy = 0; copy < repeat; copy++) {
    /* Each copy parses the same text again, with the same positions. */
    ps->p = body;
    ps->next_position = first_position;
    if (*ps->p == '(') {
      /* A plain group, for repeats: 2*(res(…),relu). */
      int position = ps->next_position;
      /* Every "(" recurses: groups nest no deeper than blocks may. */
      if (++ps->groups > MAX_DEPTH)
        return tdm_network_spec_error(ps->error, "(", position, _("groups nest deeper than %d"), MAX_DEPTH);
      ps->p++;
      if (!parse_list(ps, depth))
        return FALSE;
      if (*ps->p != ')')
        return tdm_network_spec_error(ps->error, "(", position, _("its “(” is not closed"));
      ps->p++;
      ps->groups--;
    } else if (g_str_has_prefix(ps->p, "res(")) {
      int position = ps->next_position++;
      if (depth + 1 > MAX_DEPTH)
        return tdm_network_spec_error(ps->error, "res(", position, _("blocks nest deeper than %d"),
                          MAX_DEPTH);
      ps->p += 4;
      push(ps, ITEM_BEGIN, NULL, position);
      skip_spaces(ps);
      if (*ps->p == ')')
        return tdm_network_spec_error(ps->error, "res()", position, _("a residual block needs layers"));
      if (!parse_list(ps, depth + 1))
        return FALSE;
      if (*ps->p != ')')
        return tdm_network_spec_error(ps->error, "res(", position,
                          _("its “(” is not closed: expected “)” after its layers"));
      ps->p++;
      push(ps, ITEM_END, NULL, position);
    } else {
      const char *end = ps->p;
      while (*end != '\0' && *end != ',' && *end != '(' && *end != ')')
        end++;
      g_autofree char *raw = g_strndup(ps->p, end - ps->p);
      char *token = g_strdup(g_strstrip(raw));
      int position = ps->next_position++;
      if (*end == '(') {
        tdm_network_spec_error(ps->error, token, position,
                   _("unknown block; blocks are res(…), e.g. res(conv32k3p1,bn)"));
        g_free(token);
        return FALSE;
      }
      if (*token == '\0') {
        g_free(token);
        return tdm_network_spec_error(ps->error, "", position, _("an empty item (two commas in a row?)"));
      }
      g_autofree char *block = NULL;
      if (!expand_block(token, position, &block, ps->error)) {
        g_free(token);
        return FALSE;
      }
      if (block != NULL) {
        /* A ResNet block item stands for its res(…): parsed as if written out. */
        g_free(token);
        ps->next_position = position;
        ps->p = block;
        if (!parse_list(ps, depth))
          return FALSE;
        if (*ps->p != '\0')
          return tdm_network_spec_error(ps->error, block, position, _("internal: unparsed block text"));
      } else {
        push(ps, ITEM_LAYER, token, position);
      }
      ps->p = end;
    }
    if (ps->items->len > MAX_ITEMS)
      return tdm_network_spec_error(ps->error, start, first_position, _("more than %d layers"), MAX_ITEMS);
  }
  skip_spaces(ps);
  return TRUE;
}

static gboolean
parse_list(Parser *ps, int depth)
{
  for (;;) {
    if (!parse_item(ps, depth))
      return FALSE;
    if (*ps->p != ',')
      return TRUE;
    ps->p++;
  }
}

/* The item a mistyped one most likely meant: its leading word replaced by the
 * nearest layer's ("cnv32k3" → "conv32k3", "rellu" → "relu"), or NULL. */
static char *
layer_meant(const char *token)
{
  static const char *const words[] = {
    "fc", "conv", "pool", "avg", "gap", "gmp", "bn", "relu", "drop", "dropout", "scale",
    "flatten", "basic", "bottleneck", "res",
  };
  size_t letters = strspn(token, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ");
  if (letters == 0)
    return NULL;
  g_autofree char *word = g_ascii_strdown(token, (gssize)letters);
  const char *near = tdm_suggest(word, words, G_N_ELEMENTS(words));
  if (near == NULL)
    return NULL;
  return g_strconcat(near, token + letters, NULL);
}

/* A spec of one word that names no layer is a network's name: the nearest
 * built-in's, and the list of them. NULL when `spec` is not such a word. */
char *
tdm_network_unknown(const char *spec)
{
  g_autofree char *word = g_strstrip(g_strdup(spec));
  if (strpbrk(word, ",()* ") != NULL || tdm_network_preset_find(word) != NULL)
    return NULL;
  int count = 0;
  const TdmNetworkPreset *presets = tdm_network_presets(&count);
  g_autofree const char **names = g_new0(const char *, count + 1);
  for (int i = 0; i < count; i++)
    names[i] = presets[i].name;
  const char *near = tdm_suggest(word, names, count);
  /* "fc10" or "conv32k3" is a (short) spec: its own parse says what is wrong. */
  if (near == NULL && strpbrk(word, "0123456789") != NULL)
    return NULL;
  g_autofree char *list = g_strjoinv(", ", (char **)names);
  /* A word may be a megabyte long: the message shows its start, as spec_error does. */
  const char *end = word;
  for (int i = 0; i < 60 && *end != '\0'; i++)
    end = g_utf8_find_next_char(end, NULL);
  g_autofree char *shown = g_strdup_printf("%.*s%s", (int)(end - word), word,
                                           *end != '\0' ? "…" : "");
  if (near != NULL)
    return g_strdup_printf(_("unknown network “%s”: did you mean %s? The built-in networks "
                             "are %s; a spec lists layers, e.g. fc128,relu,fc10"),
                           shown, near, list);
  return g_strdup_printf(_("unknown network “%s”: the built-in networks are %s; a spec lists "
                           "layers, e.g. fc128,relu,fc10"), shown, list);
}

/* Parses one layer token into layer->kind and its numbers; shapes come later. */
gboolean
tdm_network_parse_token(const char *token, int position, TdmLayer *layer, int *features, GError **error)
{
  const char *p = token;
  if (g_str_equal(token, "relu")) {
    layer->kind = TDM_LAYER_RELU;
    return TRUE;
  }
  if (g_str_equal(token, "flatten")) {
    layer->kind = TDM_LAYER_FLATTEN;
    return TRUE;
  }
  if (g_str_equal(token, "bn")) {
    layer->kind = TDM_LAYER_BN;
    return TRUE;
  }
  if (g_str_equal(token, "gap")) {
    layer->kind = TDM_LAYER_GLOBAL_AVG;
    return TRUE;
  }
  if (g_str_equal(token, "gmp")) {
    layer->kind = TDM_LAYER_GLOBAL_MAX;
    return TRUE;
  }
  if (g_str_has_prefix(token, "fc")) {
    p += 2;
    layer->kind = TDM_LAYER_LINEAR;
    if (!read_number(&p, features) || *features < 1)
      return tdm_network_spec_error(error, token, position,
                        _("expected fcN with N output features, e.g. fc128"));
    if (g_str_equal(p, "nb"))
      layer->no_bias = TRUE;
    else if (*p != '\0')
      return tdm_network_spec_error(error, token, position,
                        _("unexpected “%s” at its end (fcN, or fcNnb without bias)"), p);
    return TRUE;
  }
  if (g_str_has_prefix(token, "conv")) {
    p += 4;
    layer->kind = TDM_LAYER_CONV;
    if (!read_number(&p, features) || *features < 1)
      return tdm_network_spec_error(error, token, position,
                        _("expected convNkK[sS][pP] with N output channels, e.g. conv32k3p1"));
    if (*p != 'k' || (p++, !read_number(&p, &layer->kernel)) || layer->kernel < 1 ||
        layer->kernel > 15)
      return tdm_network_spec_error(error, token, position,
                        _("expected a kernel size kK between 1 and 15 after the channels, "
                        "e.g. conv32k3p1"));
    layer->pad = 0;
    layer->stride = 1;
    gboolean seen_s = FALSE, seen_p = FALSE;
    while (*p == 's' || *p == 'p') {
      if (*p == 's') {
        p++;
        if (seen_s || !read_number(&p, &layer->stride) || layer->stride < 1 ||
            layer->stride > 15)
          return tdm_network_spec_error(error, token, position,
                            _("expected one stride sS between 1 and 15, e.g. conv64k3s2p1"));
        seen_s = TRUE;
      } else {
        p++;
        if (seen_p || !read_number(&p, &layer->pad))
          return tdm_network_spec_error(error, token, position,
                            _("expected one padding pP, e.g. conv32k3p1"));
        seen_p = TRUE;
      }
    }
    if (g_str_equal(p, "nb"))
      layer->no_bias = TRUE;
    else if (*p != '\0')
      return tdm_network_spec_error(error, token, position,
                        _("unexpected “%s” at its end (nb, for no bias, is the only suffix "
                        "after kK, sS and pP)"), p);
    if (layer->pad >= layer->kernel)
      return tdm_network_spec_error(error, token, position,
                        _("padding %d must be smaller than the kernel size %d"), layer->pad,
                        layer->kernel);
    return TRUE;
  }
  if (g_str_has_prefix(token, "pool") || g_str_has_prefix(token, "avg")) {
    gboolean avg = token[0] == 'a';
    p += avg ? 3 : 4;
    layer->kind = avg ? TDM_LAYER_AVGPOOL : TDM_LAYER_POOL;
    const char *usage = avg ? "expected avgK with a window K of 2 or more, then sS and pP "
                              "for a stride and padding, e.g. avg2 or avg3s1p1"
                            : "expected poolK with a window K of 2 or more, then sS and pP "
                              "for a stride and padding, e.g. pool2 or pool3s2p1";
    if (!read_number(&p, &layer->kernel) || layer->kernel < 2)
      return tdm_network_spec_error(error, token, position, "%s", usage);
    /* poolK alone strides by its window, as before strides and padding existed. */
    layer->stride = layer->kernel;
    layer->pad = 0;
    gboolean seen_s = FALSE, seen_p = FALSE;
    while (*p == 's' || *p == 'p') {
      gboolean stride = *p == 's';
      p++;
      /* A stride up to the window is what poolK alone means (and what the canonical
       * spec then writes out), so it must read back. */
      if ((stride ? seen_s : seen_p) ||
          !read_number(&p, stride ? &layer->stride : &layer->pad) ||
          (stride && (layer->stride < 1 || layer->stride > MAX(15, layer->kernel))))
        return tdm_network_spec_error(error, token, position, "%s", usage);
      if (stride)
        seen_s = TRUE;
      else
        seen_p = TRUE;
    }
    if (*p != '\0')
      return tdm_network_spec_error(error, token, position, "%s", usage);
    if (2 * layer->pad > layer->kernel)
      return tdm_network_spec_error(error, token, position,
                        _("padding %d is more than half the window %d (PyTorch's limit: a "
                        "window must hold an input)"), layer->pad, layer->kernel);
    return TRUE;
  }
  if (g_str_has_prefix(token, "drop")) {
    p += g_str_has_prefix(token, "dropout") ? 7 : 4;
    layer->kind = TDM_LAYER_DROPOUT;
    char *end = NULL;
    double rate = g_ascii_strtod(p, &end);
    if (end == p || *end != '\0' || !(rate >= 0.0 && rate < 1.0))
      return tdm_network_spec_error(error, token, position,
                        _("expected dropP with a rate P in [0, 1), e.g. drop0.25"));
    layer->rate = (float)rate;
    return TRUE;
  }
  if (g_str_has_prefix(token, "scale")) {
    p += 5;
    layer->kind = TDM_LAYER_SCALE;
    char *end = NULL;
    double factor = g_ascii_strtod(p, &end);
    /* strtod also reads "inf", "nan" and hex; only plain decimals are a spec. */
    gboolean plain = end != p && *end == '\0' && strspn(p, "0123456789.-+eE") == strlen(p);
    if (!plain || !(fabs(factor) >= 1e-6 && fabs(factor) <= 1e6))
      return tdm_network_spec_error(error, token, position,
                        _("expected scaleS with a factor S between 1e-6 and 1e6 in size, "
                        "e.g. scale0.125"));
    layer->factor = (float)factor;
    return TRUE;
  }
  g_autofree char *meant = layer_meant(token);
  if (meant != NULL)
    return tdm_network_spec_error(error, token, position, _("unknown layer; did you mean %s?"), meant);
  return tdm_network_spec_error(error, token, position,
                    _("unknown layer; layers are fcN, convNkK[sS][pP], poolK[sS][pP], "
                    "avgK[sS][pP], gap, gmp, "
                    "bn, relu, dropP, scaleS, flatten and res(…)"));
}

static void
item_clear(gpointer data)
{
  g_free(((Item *)data)->text);
}

GArray *
tdm_network_parse_items(const char *expanded, GError **error)
{
  Parser ps = {expanded, expanded, 1, 0, g_array_new(FALSE, TRUE, sizeof(Item)), error};
  g_array_set_clear_func(ps.items, item_clear);
  gboolean parsed = parse_list(&ps, 0);
  if (parsed && *ps.p != '\0') {
    if (*ps.p == ')')
      tdm_network_spec_error(error, ")", ps.next_position, _("a “)” with no res( open before it"));
    else
      tdm_network_spec_error(error, ps.p, ps.next_position, _("unexpected text"));
    parsed = FALSE;
  }
  if (!parsed)
    g_clear_pointer(&ps.items, g_array_unref);
  return ps.items;
}

/* The grammar, written once: --help prints it, the window's spec entry shows it. */
static const char *const grammar = N_(
  "Layers, separated by commas:\n"
  "  fcN              fully connected, N outputs (flattens its input)\n"
  "  convNkK[sS][pP]  convolution: N channels, K×K kernel, stride S, padding P\n"
  "  poolK, avgK      max or average pooling, K×K window and stride\n"
  "  poolKsSpP, avgKsSpP  the same with stride S and padding P (pool3s2p1)\n"
  "  gap, gmp         global average or max pooling\n"
  "  bn               batch normalization (a conv or fc before it has no bias)\n"
  "  relu, dropP      ReLU; dropout with rate P (e.g. drop0.25)\n"
  "  scaleS           multiply by S (e.g. scale0.125 after the last fc)\n"
  "  flatten          explicit flatten (fc flattens anyway)\n"
  "  nb               after fcN or a conv: no bias (fc10nb)\n"
  "  res(…)           residual block: its layers plus its input (through a 1×1\n"
  "                   conv and bn where the shape changes)\n"
  "  basicC[sS]       ResNet's basic block: res(convCk3sSp1,bn,relu,convCk3p1,bn),relu\n"
  "  bottleneckW[sS]  ResNet's bottleneck: 1×1 W, 3×3 W (stride S), 1×1 4W, each\n"
  "                   with bn, projected where the shape changes, then relu\n"
  "  N*item, N*(…)    N copies of an item or of a group of items\n"
  "The last layer is fcC, C = the number of classes, followed at most by scale items.\n"
  "Example: conv32k3p1,bn,relu,2*(res(conv32k3p1,bn,relu,conv32k3p1,bn),relu),"
  "res(conv64k3s2p1,bn,relu,conv64k3p1,bn),relu,gap,fc10\n"
  "Built in (their last fc follows the dataset's class count): %s");

const char *
tdm_network_spec_help(void)
{
  static gsize once;
  static char *help;
  if (g_once_init_enter(&once)) {
    int count = 0;
    const TdmNetworkPreset *presets = tdm_network_presets(&count);
    g_autoptr(GString) names = g_string_new(NULL);
    for (int i = 0; i < count; i++)
      g_string_append_printf(names, "%s%s", i ? ", " : "", presets[i].name);
    help = g_strdup_printf(_(grammar), names->str);
    g_once_init_leave(&once, 1);
  }
  return help;
}
