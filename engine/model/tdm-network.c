/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-network.c — the numbers of a parsed network: seeded initial parameters, BN
 * state, the weight-decay mask, PyTorch's weight layouts and the FLOP count. The
 * parser is tdm-network-spec.c; computing is tdm-replica.c's. */
#include "tdm-network.h"
#include "tdm-network-catalogue.h"
#include "tdm-error.h"

#include <math.h>
#include <string.h>

const char *
tdm_network_expand(const char *name)
{
  const TdmNetworkPreset *preset = tdm_network_preset_find(name);
  return preset != NULL ? preset->spec : name;
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
    if (l->kind == TDM_LAYER_BN) {
      for (size_t j = 0; j < l->weight_count; j++)
        params[l->weight_offset + j] = 1.0f;
      continue;
    }
    if (l->kind == TDM_LAYER_RES_END && l->projection)
      for (int j = 0; j < l->out_c; j++)
        params[l->bias_offset + j] = 1.0f; /* the projection bn's gamma */
    if (l->weight_count == 0)
      continue;
    /* LeCun normal, Chainer's default for Linear and Convolution2D. Each layer's
     * stream depends on the seed and the layer alone. */
    size_t fan_in = l->weight_count / l->out_c;
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

void
tdm_network_init_state(const TdmNetwork *net, float *state)
{
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    size_t channels = l->state_count / 2;
    for (size_t j = 0; j < channels; j++) {
      state[l->state_offset + j] = 0.0f;
      state[l->state_offset + channels + j] = 1.0f;
    }
  }
}

void
tdm_network_decay_mask(const TdmNetwork *net, uint8_t *mask)
{
  memset(mask, 0, net->parameter_count);
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->kind == TDM_LAYER_LINEAR || l->kind == TDM_LAYER_CONV || l->kind == TDM_LAYER_RES_END)
      memset(mask + l->weight_offset, 1, l->weight_count);
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

/* An fc over an image reads it as (row, column, channel) here, as (channel, row,
 * column) after PyTorch's flatten: element (o, ch, p) of [out, c, pixels] is element
 * (o, p, ch) of ours. */
static void
permute_fc(const TdmLayer *l, const float *src, float *dst, gboolean to_torch)
{
  const size_t c = l->in_c, pixels = (size_t)l->in_h * l->in_w;
  for (size_t o = 0; o < (size_t)l->out_c; o++)
    for (size_t ch = 0; ch < c; ch++)
      for (size_t p = 0; p < pixels; p++) {
        size_t torch = (o * c + ch) * pixels + p, ours = (o * pixels + p) * c + ch;
        if (to_torch)
          dst[torch] = src[ours];
        else
          dst[ours] = src[torch];
      }
}

gboolean
tdm_layer_weight_permuted(const TdmLayer *l)
{
  if (l->kind == TDM_LAYER_CONV)
    return l->in_c > 1 && l->kernel > 1;
  return l->kind == TDM_LAYER_LINEAR && l->in_c > 1 && l->in_h * l->in_w > 1;
}

void
tdm_layer_weight_to_torch(const TdmLayer *l, const float *params, float *torch)
{
  if (l->kind == TDM_LAYER_CONV)
    permute_conv(l, params, torch, TRUE);
  else if (tdm_layer_weight_permuted(l))
    permute_fc(l, params, torch, TRUE);
  else
    memcpy(torch, params, l->weight_count * sizeof(float));
}

void
tdm_layer_weight_from_torch(const TdmLayer *l, const float *torch, float *params)
{
  if (l->kind == TDM_LAYER_CONV)
    permute_conv(l, torch, params, FALSE);
  else if (tdm_layer_weight_permuted(l))
    permute_fc(l, torch, params, FALSE);
  else
    memcpy(params, torch, l->weight_count * sizeof(float));
}

double
tdm_network_forward_flops(const TdmNetwork *net)
{
  double flops = 0;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->kind == TDM_LAYER_LINEAR || l->kind == TDM_LAYER_CONV ||
        (l->kind == TDM_LAYER_RES_END && l->projection))
      flops += 2.0 * l->weight_count * l->out_h * l->out_w;
  }
  return flops;
}
