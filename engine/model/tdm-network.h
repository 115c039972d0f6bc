/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-network.h — a network as a small tree of layers and residual blocks, parsed
 * from a one-line spec, with its parameter and state layout. A TdmNetwork is only the
 * description; replicas compute it. Built-ins (tdm-network-catalogue.h) expand to
 * specs with a head of the dataset's class count.
 *
 * The spec grammar and the flat tree: docs/ARCHITECTURE.md, "Network specs".
 */
#pragma once

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

#define TDM_NETWORK_MLP "fc1000,relu,fc1000,relu,fc10"
#define TDM_NETWORK_CNN "conv32k3p1,relu,pool2,conv64k3p1,relu,pool2,fc128,relu,fc10"
/* A ResNet-9-style net ("myrtle", after Myrtle.ai's fast CIFAR-10 ResNet) for 28×28
 * and 32×32 inputs: conv-bn-relu stages of 32, 64, 128 and 256 channels, each of the
 * last three halving the size with a max pool, residual blocks of two convs after
 * the 64 and 256 stages, a global max pool, then fc10 without bias scaled by 1/8
 * (a colder softmax at the start; with it the net reaches 94 % on Fashion-MNIST in
 * ten epochs at lr 0.2, seven with the preset's recipe, where the same net without
 * the scale, or h10's strided basic blocks, stay near 93 %). About 137 MFLOP a
 * sample forward on 28×28. */
#define TDM_NETWORK_RESNET                                                           \
  "conv32k3p1,bn,relu,"                                                              \
  "conv64k3p1,bn,relu,pool2,res(conv64k3p1,bn,relu,conv64k3p1,bn,relu),"             \
  "conv128k3p1,bn,relu,pool2,"                                                       \
  "conv256k3p1,bn,relu,pool2,res(conv256k3p1,bn,relu,conv256k3p1,bn,relu),"          \
  "gmp,fc10nb,scale0.125"

/* BN constants, PyTorch's defaults. */
#define TDM_BN_MOMENTUM 0.1f
#define TDM_BN_EPS 1e-5f

typedef enum {
  TDM_LAYER_LINEAR,
  TDM_LAYER_CONV,
  TDM_LAYER_POOL,          /* max pool */
  TDM_LAYER_RELU,
  TDM_LAYER_FLATTEN,
  TDM_LAYER_BN,
  TDM_LAYER_AVGPOOL,
  TDM_LAYER_GLOBAL_AVG,
  TDM_LAYER_GLOBAL_MAX,
  TDM_LAYER_DROPOUT,
  TDM_LAYER_SCALE,         /* output = factor · input */
  TDM_LAYER_RES_BEGIN,     /* marks a block's input; computes nothing */
  TDM_LAYER_RES_END,       /* output = the block's layers' output + (projected) input */
} TdmLayerKind;

typedef struct {
  TdmLayerKind kind;
  int in_h, in_w, in_c;        /* input shape per sample (NHWC) */
  int out_h, out_w, out_c;     /* output shape per sample */
  int kernel, pad, stride;     /* conv, pools; stride also a projection's */
  float rate;                  /* dropout */
  float factor;                /* scale */
  gboolean no_bias;            /* conv, fc: "nb" asked for no bias */
  gboolean fused_relu;         /* relu applied in place after this layer */
  /* Parameters in the flat buffer. conv/fc: weight, bias (bias_count 0 without one).
   * bn: weight = gamma, bias = beta. RES_END with a projection: weight = the 1×1
   * conv's [out, in], bias = the projection bn's gamma then beta (2·out_c). All of a
   * layer's parameters are [param_offset, param_offset + param_count). */
  size_t weight_offset, weight_count;
  size_t bias_offset, bias_count;
  size_t param_offset, param_count;
  /* BN running mean then running variance (2·C) in the state buffer: bn layers and
   * projections. */
  size_t state_offset, state_count;
  int partner;                 /* RES_BEGIN ↔ RES_END: the other's index; else −1 */
  int depth;                   /* blocks around this item */
  gboolean projection;         /* RES_END: the input goes through conv 1×1 + bn */
  int position;                /* the spec item it came from, 1-based (errors) */
  char name[64];               /* module path in checkpoints: "conv1", "layer2.0.bn1",
                                * "layer2.0.downsample" (projections) */
} TdmLayer;

typedef struct {
  char *spec;                  /* the expanded spec, canonical */
  int layer_count;
  TdmLayer *layers;
  int in_h, in_w, in_c, classes;
  size_t parameter_count;
  size_t state_count;          /* BN running statistics, floats */
  size_t max_activation;       /* largest per-sample activation, in floats */
  int bn_count;                /* bn layers and projections */
  gboolean has_dropout;
} TdmNetwork;

/* Parses spec (or a built-in name) for inputs of h×w×c and `classes` outputs. Errors
 * (TDM_ENGINE_ERROR_INVALID_SPEC) name the offending item, its position and why. */
TdmNetwork *tdm_network_new (const char *spec, int h, int w, int c, int classes,
                             GError **error);
void tdm_network_free (TdmNetwork *net);

/* Fills params[parameter_count] with seeded initial values: LeCun normal for conv and
 * fc weights (Chainer's default), zero biases, BN gamma 1 and beta 0. The same seed
 * gives the same values. */
void tdm_network_init_parameters (const TdmNetwork *net, guint64 seed, float *params);
/* Fills state[state_count]: running means 0, running variances 1 (PyTorch's). */
void tdm_network_init_state (const TdmNetwork *net, float *state);
/* mask[parameter_count]: 1 for conv and fc weights (projections included), 0 for
 * biases and BN parameters: what weight decay applies to when it skips those. */
void tdm_network_decay_mask (const TdmNetwork *net, uint8_t *mask);

/* A conv layer's weights are [out, kh, kw, in] in the parameter buffer (the order of
 * im2col's columns, tdm-backend.h), PyTorch's are [out, in, kh, kw]; an fc after a
 * conv reads its input as (row, column, channel) here and as (channel, row, column)
 * after PyTorch's nn.Flatten. These copy one layer's weight_count values between the
 * two; for other layers (1×1 projections included), convs of one input channel and
 * fcs of flat inputs, the layouts agree (tdm_layer_weight_permuted() says which). */
gboolean tdm_layer_weight_permuted (const TdmLayer *layer);
void tdm_layer_weight_to_torch (const TdmLayer *layer, const float *params, float *torch);
void tdm_layer_weight_from_torch (const TdmLayer *layer, const float *torch, float *params);

/* Floating-point operations of one sample's forward pass (multiply-add = 2; conv, fc
 * and projections). */
double tdm_network_forward_flops (const TdmNetwork *net);

/* Expands a built-in name to its spec (for 10 classes); other strings are returned
 * as they are. */
const char *tdm_network_expand (const char *name);

/* The grammar of specs, for --help and the window: several lines, translated, the
 * built-in networks' names from the catalogue. The one place it is written. */
const char *tdm_network_spec_help (void);

/* Whether a pool layer's windows tile its input (stride = window, no padding): the
 * pools the fused paths take; other pools run maxpool2d / avgpool2d. */
static inline gboolean
tdm_layer_pool_tiles (const TdmLayer *layer)
{
  return layer->stride == layer->kernel && layer->pad == 0;
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmNetwork, tdm_network_free)

G_END_DECLS
