/* tdm-network.c — parses network specs into layer lists with shapes and a flat
 * parameter layout, and draws seeded initial parameters. It computes nothing on a
 * device: tdm-replica.c does. */
#include "tdm-network.h"
#include "tdm-error.h"

#include <math.h>
#include <string.h>

const char *
tdm_network_expand(const char *name)
{
  if (g_str_equal(name, "mlp"))
    return TDM_NETWORK_MLP;
  if (g_str_equal(name, "cnn"))
    return TDM_NETWORK_CNN;
  return name;
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

static gboolean
spec_error(GError **error, const char *token, int position, const char *format, ...)
    G_GNUC_PRINTF(4, 5);

static gboolean
spec_error(GError **error, const char *token, int position, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  char *why = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC,
              "network spec, layer %d “%s”: %s", position, token, why);
  g_free(why);
  return FALSE;
}

/* Parses one token into layer->kind and its numbers; shapes come later. */
static gboolean
parse_token(const char *token, int position, TdmLayer *layer, int *features, GError **error)
{
  const char *p = token;
  memset(layer, 0, sizeof *layer);

  if (g_str_equal(token, "relu")) {
    layer->kind = TDM_LAYER_RELU;
    return TRUE;
  }
  if (g_str_equal(token, "flatten")) {
    layer->kind = TDM_LAYER_FLATTEN;
    return TRUE;
  }
  if (g_str_has_prefix(token, "fc")) {
    p += 2;
    layer->kind = TDM_LAYER_LINEAR;
    if (!read_number(&p, features) || *features < 1 || *p != '\0')
      return spec_error(error, token, position,
                        "expected fcN with N output features, e.g. fc128");
    return TRUE;
  }
  if (g_str_has_prefix(token, "conv")) {
    p += 4;
    layer->kind = TDM_LAYER_CONV;
    if (!read_number(&p, features) || *features < 1)
      return spec_error(error, token, position,
                        "expected convNkKpP with N output channels, e.g. conv32k3p1");
    if (*p != 'k' || (p++, !read_number(&p, &layer->kernel)) || layer->kernel < 1 ||
        layer->kernel > 15)
      return spec_error(error, token, position,
                        "expected a kernel size kK between 1 and 15 after the channels, "
                        "e.g. conv32k3p1");
    layer->pad = 0;
    if (*p == 'p' && (p++, !read_number(&p, &layer->pad)))
      return spec_error(error, token, position, "expected a padding pP, e.g. conv32k3p1");
    if (*p != '\0')
      return spec_error(error, token, position, "unexpected “%s” at its end", p);
    if (layer->pad >= layer->kernel)
      return spec_error(error, token, position,
                        "padding %d must be smaller than the kernel size %d", layer->pad,
                        layer->kernel);
    return TRUE;
  }
  if (g_str_has_prefix(token, "pool")) {
    p += 4;
    layer->kind = TDM_LAYER_POOL;
    if (!read_number(&p, &layer->kernel) || layer->kernel < 2 || *p != '\0')
      return spec_error(error, token, position,
                        "expected poolK with a window K of 2 or more, e.g. pool2");
    return TRUE;
  }
  return spec_error(error, token, position,
                    "unknown layer; layers are fcN, convNkKpP, poolK, relu and flatten");
}

TdmNetwork *
tdm_network_new(const char *spec, int h, int w, int c, int classes, GError **error)
{
  g_return_val_if_fail(spec != NULL, NULL);
  g_return_val_if_fail(h > 0 && w > 0 && c > 0 && classes > 0, NULL);

  const char *expanded = tdm_network_expand(spec);
  g_auto(GStrv) tokens = g_strsplit(expanded, ",", -1);
  int n_tokens = g_strv_length(tokens);
  if (n_tokens == 0 || (n_tokens == 1 && *g_strstrip(tokens[0]) == '\0')) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC,
                "network spec is empty: give mlp, cnn or layers such as fc128,relu,fc10");
    return NULL;
  }

  TdmNetwork *net = g_new0(TdmNetwork, 1);
  net->layers = g_new0(TdmLayer, n_tokens);
  net->in_h = h;
  net->in_w = w;
  net->in_c = c;
  net->classes = classes;

  int cur_h = h, cur_w = w, cur_c = c;
  int linear_index = 0, conv_index = 0;
  size_t offset = 0;
  net->max_activation = (size_t)h * w * c;

  for (int i = 0; i < n_tokens; i++) {
    char *token = g_strstrip(tokens[i]);
    TdmLayer layer;
    int features = 0;
    if (!parse_token(token, i + 1, &layer, &features, error))
      goto fail;

    if (layer.kind == TDM_LAYER_RELU && net->layer_count > 0) {
      TdmLayer *prev = &net->layers[net->layer_count - 1];
      if ((prev->kind == TDM_LAYER_LINEAR || prev->kind == TDM_LAYER_CONV) &&
          !prev->fused_relu) {
        prev->fused_relu = TRUE;
        continue;
      }
    }

    layer.in_h = cur_h;
    layer.in_w = cur_w;
    layer.in_c = cur_c;
    switch (layer.kind) {
    case TDM_LAYER_LINEAR: {
      size_t in = (size_t)cur_h * cur_w * cur_c;
      layer.out_h = layer.out_w = 1;
      layer.out_c = features;
      layer.weight_offset = offset;
      layer.weight_count = in * features;
      offset += layer.weight_count;
      layer.bias_offset = offset;
      layer.bias_count = features;
      offset += layer.bias_count;
      g_snprintf(layer.name, sizeof layer.name, "fc%d", ++linear_index);
      break;
    }
    case TDM_LAYER_CONV:
      if (cur_h == 1 && cur_w == 1 && i > 0) {
        spec_error(error, token, i + 1, "a convolution needs an image, but its input is "
                                        "a flat vector of %d features", cur_c);
        goto fail;
      }
      layer.out_h = cur_h + 2 * layer.pad - layer.kernel + 1;
      layer.out_w = cur_w + 2 * layer.pad - layer.kernel + 1;
      layer.out_c = features;
      if (layer.out_h < 1 || layer.out_w < 1) {
        spec_error(error, token, i + 1, "a %d×%d kernel does not fit its %d×%d input",
                   layer.kernel, layer.kernel, cur_h, cur_w);
        goto fail;
      }
      layer.weight_offset = offset;
      layer.weight_count = (size_t)features * cur_c * layer.kernel * layer.kernel;
      offset += layer.weight_count;
      layer.bias_offset = offset;
      layer.bias_count = features;
      offset += layer.bias_count;
      g_snprintf(layer.name, sizeof layer.name, "conv%d", ++conv_index);
      break;
    case TDM_LAYER_POOL:
      if (cur_h < layer.kernel || cur_w < layer.kernel) {
        spec_error(error, token, i + 1, "a %d×%d window does not fit its %d×%d input",
                   layer.kernel, layer.kernel, cur_h, cur_w);
        goto fail;
      }
      layer.out_h = cur_h / layer.kernel;
      layer.out_w = cur_w / layer.kernel;
      layer.out_c = cur_c;
      g_snprintf(layer.name, sizeof layer.name, "pool%d", i + 1);
      break;
    case TDM_LAYER_RELU:
      layer.out_h = cur_h;
      layer.out_w = cur_w;
      layer.out_c = cur_c;
      g_snprintf(layer.name, sizeof layer.name, "relu%d", i + 1);
      break;
    case TDM_LAYER_FLATTEN:
      layer.out_h = layer.out_w = 1;
      layer.out_c = cur_h * cur_w * cur_c;
      g_snprintf(layer.name, sizeof layer.name, "flatten%d", i + 1);
      break;
    }
    size_t activation = (size_t)layer.out_h * layer.out_w * layer.out_c;
    if (activation > ((size_t)1 << 26)) {
      spec_error(error, token, i + 1, "its output of %zu values per sample is too large",
                 activation);
      goto fail;
    }
    net->max_activation = MAX(net->max_activation, activation);
    cur_h = layer.out_h;
    cur_w = layer.out_w;
    cur_c = layer.out_c;
    net->layers[net->layer_count++] = layer;
  }

  TdmLayer *last = &net->layers[net->layer_count - 1];
  if (last->kind != TDM_LAYER_LINEAR || last->fused_relu) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC,
                "network spec must end with fc%d (one output per class), without a relu",
                classes);
    goto fail;
  }
  if (last->out_c != classes) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC,
                "network spec ends with fc%d but the dataset has %d classes: end with fc%d",
                last->out_c, classes, classes);
    goto fail;
  }
  if (offset > ((size_t)1 << 31)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC,
                "network has %zu parameters; Tandem's limit is 2³¹", offset);
    goto fail;
  }

  net->parameter_count = offset;
  /* The expanded spec, with relus written back where they were fused. */
  GString *canonical = g_string_new(NULL);
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (i > 0)
      g_string_append_c(canonical, ',');
    switch (l->kind) {
    case TDM_LAYER_LINEAR:
      g_string_append_printf(canonical, "fc%d", l->out_c);
      break;
    case TDM_LAYER_CONV:
      g_string_append_printf(canonical, "conv%dk%dp%d", l->out_c, l->kernel, l->pad);
      break;
    case TDM_LAYER_POOL:
      g_string_append_printf(canonical, "pool%d", l->kernel);
      break;
    case TDM_LAYER_RELU:
      g_string_append(canonical, "relu");
      break;
    case TDM_LAYER_FLATTEN:
      g_string_append(canonical, "flatten");
      break;
    }
    if (l->fused_relu)
      g_string_append(canonical, ",relu");
  }
  net->spec = g_string_free(canonical, FALSE);
  return net;

fail:
  tdm_network_free(net);
  return NULL;
}

void
tdm_network_free(TdmNetwork *net)
{
  if (net == NULL)
    return;
  g_free(net->spec);
  g_free(net->layers);
  g_free(net);
}

/* splitmix64: small, fast and good enough to seed initial weights reproducibly. */
static guint64
splitmix64(guint64 *state)
{
  guint64 z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double
uniform01(guint64 *state)
{
  return ((splitmix64(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

void
tdm_network_init_parameters(const TdmNetwork *net, guint64 seed, float *params)
{
  memset(params, 0, net->parameter_count * sizeof(float));
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->weight_count == 0)
      continue;
    /* LeCun normal, Chainer's default for Linear and Convolution2D. Each layer's
     * stream depends on the seed and the layer alone. */
    size_t fan_in = l->weight_count / l->bias_count;
    double stddev = sqrt(1.0 / (double)fan_in);
    guint64 state = seed * 0x2545F4914F6CDD1Dull + (guint64)(i + 1) * 0x9E3779B97F4A7C15ull;
    float *w = params + l->weight_offset;
    for (size_t j = 0; j < l->weight_count; j += 2) {
      /* Box–Muller: two normals from two uniforms. */
      double u1 = uniform01(&state), u2 = uniform01(&state);
      double r = sqrt(-2.0 * log(u1));
      w[j] = (float)(stddev * r * cos(2.0 * G_PI * u2));
      if (j + 1 < l->weight_count)
        w[j + 1] = (float)(stddev * r * sin(2.0 * G_PI * u2));
    }
  }
}

/* Element (o, i, t) of [out, in, taps] is element (o, t, i) of [out, taps, in]:
 * to_torch walks the first and reads the second, from_torch the reverse. */
static void
permute_conv(const TdmLayer *l, const float *src, float *dst, gboolean to_torch)
{
  const size_t in = l->in_c, taps = (size_t)l->kernel * l->kernel;
  for (size_t o = 0; o < (size_t)l->out_c; o++)
    for (size_t i = 0; i < in; i++)
      for (size_t t = 0; t < taps; t++) {
        size_t torch = (o * in + i) * taps + t, ours = (o * taps + t) * in + i;
        if (to_torch)
          dst[torch] = src[ours];
        else
          dst[ours] = src[torch];
      }
}

void
tdm_layer_weight_to_torch(const TdmLayer *l, const float *params, float *torch)
{
  if (l->kind == TDM_LAYER_CONV)
    permute_conv(l, params, torch, TRUE);
  else
    memcpy(torch, params, l->weight_count * sizeof(float));
}

void
tdm_layer_weight_from_torch(const TdmLayer *l, const float *torch, float *params)
{
  if (l->kind == TDM_LAYER_CONV)
    permute_conv(l, torch, params, FALSE);
  else
    memcpy(params, torch, l->weight_count * sizeof(float));
}

double
tdm_network_forward_flops(const TdmNetwork *net)
{
  double flops = 0;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->kind == TDM_LAYER_LINEAR || l->kind == TDM_LAYER_CONV)
      flops += 2.0 * l->weight_count * l->out_h * l->out_w;
  }
  return flops;
}
