/* tdm-network.h — a network as a sequence of layers, parsed from a one-line spec.
 *
 * Specs read left to right: "conv32k3p1,relu,pool2,fc128,relu,fc10". Layers:
 *   fcN          Linear to N features (flattens its input)
 *   convNkKpP    Conv2d to N channels, K×K kernel, padding P (stride 1); pP optional
 *   poolK        MaxPool2d K×K, stride K
 *   relu         ReLU (fused into the layer before it where that one has a bias)
 *   flatten      explicit flatten (fc flattens anyway)
 * The built-ins "mlp" and "cnn" expand to Chainer's MNIST MLP and a small CNN. The
 * last layer must be an fc with as many outputs as the dataset has classes.
 * A TdmNetwork is only the description and parameter layout; replicas compute it.
 */
#pragma once

#include <glib.h>
#include <stddef.h>

G_BEGIN_DECLS

#define TDM_NETWORK_MLP "fc1000,relu,fc1000,relu,fc10"
#define TDM_NETWORK_CNN "conv32k3p1,relu,pool2,conv64k3p1,relu,pool2,fc128,relu,fc10"

typedef enum {
  TDM_LAYER_LINEAR,
  TDM_LAYER_CONV,
  TDM_LAYER_POOL,
  TDM_LAYER_RELU,
  TDM_LAYER_FLATTEN,
} TdmLayerKind;

typedef struct {
  TdmLayerKind kind;
  int in_h, in_w, in_c;        /* input shape per sample (NHWC) */
  int out_h, out_w, out_c;     /* output shape per sample */
  int kernel, pad;             /* conv, pool */
  gboolean fused_relu;         /* linear/conv followed by relu, applied in place */
  size_t weight_offset, weight_count;   /* into the flat parameter buffer */
  size_t bias_offset, bias_count;
  char name[32];               /* "fc1", "conv2": tensor names in checkpoints */
} TdmLayer;

typedef struct {
  char *spec;                  /* the expanded spec */
  int layer_count;
  TdmLayer *layers;
  int in_h, in_w, in_c, classes;
  size_t parameter_count;
  size_t max_activation;       /* largest per-sample activation, in floats */
} TdmNetwork;

/* Parses spec (or "mlp"/"cnn") for inputs of h×w×c and `classes` outputs. Errors name
 * the offending token and its position. */
TdmNetwork *tdm_network_new (const char *spec, int h, int w, int c, int classes,
                             GError **error);
void tdm_network_free (TdmNetwork *net);

/* Fills params[parameter_count] with seeded initial values (LeCun normal for
 * weights, as Chainer's default; zero biases). The same seed gives the same values. */
void tdm_network_init_parameters (const TdmNetwork *net, guint64 seed, float *params);

/* A conv layer's weights are [out, kh, kw, in] in the parameter buffer (the order of
 * im2col's columns, tdm-backend.h), PyTorch's are [out, in, kh, kw]. These copy one
 * layer's weight_count values between the two; for other layers, and for convs of
 * one input channel, the layouts agree and they copy as they are. */
void tdm_layer_weight_to_torch (const TdmLayer *layer, const float *params, float *torch);
void tdm_layer_weight_from_torch (const TdmLayer *layer, const float *torch, float *params);

/* Floating-point operations of one sample's forward pass (multiply-add = 2). */
double tdm_network_forward_flops (const TdmNetwork *net);

/* Expands "mlp"/"cnn" to their specs; other strings are returned as they are. */
const char *tdm_network_expand (const char *name);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmNetwork, tdm_network_free)

G_END_DECLS
