/* tdm-network-catalogue.c — the table of built-in networks (tdm-network-catalogue.h).
 * torchvision's ResNets are written with the basic and bottleneck items the parser
 * expands, so that their modules come out with torchvision's names (conv1, bn1,
 * layer1.0.conv1, layer2.0.downsample, fc).
 */
#include "tdm-network-catalogue.h"
#include "tdm-network.h"

#include <string.h>

#define TV_STEM "conv64k7s2p3,bn,relu,pool3s2p1,"
/* Marks the titles for xgettext (po/POTFILES.in): the window translates them, the
 * engine never does. */
#define N_(text) text

static const TdmNetworkPreset presets[] = {
  {"mlp", N_("Multi-layer perceptron"), "Chainer's MNIST example: 784-1000-1000-10",
   TDM_NETWORK_MLP, 0, TDM_RECIPE_NONE},
  {"cnn", N_("Convolutional network"), "Two convolutions, two pools, two fully connected "
   "layers", TDM_NETWORK_CNN, 0, TDM_RECIPE_NONE},
  {"resnet", N_("Residual network (ResNet)"), "A small ResNet-9-style BN network with its "
   "fast recipe", TDM_NETWORK_RESNET, 0, TDM_RECIPE_RESNET9},
  {"resnet18", N_("ResNet-18 (torchvision)"), "torchvision's ResNet-18 (224 px, its "
   "state_dict names)",
   TV_STEM "2*basic64,basic128s2,basic128,basic256s2,basic256,basic512s2,basic512,gap,fc10",
   224, TDM_RECIPE_TORCHVISION},
  {"resnet34", N_("ResNet-34 (torchvision)"), "torchvision's ResNet-34 (224 px, its "
   "state_dict names)",
   TV_STEM "3*basic64,basic128s2,3*basic128,basic256s2,5*basic256,basic512s2,2*basic512,"
           "gap,fc10",
   224, TDM_RECIPE_TORCHVISION},
  {"resnet50", N_("ResNet-50 (torchvision)"), "torchvision's ResNet-50 (224 px, its "
   "state_dict names)",
   TV_STEM "3*bottleneck64,bottleneck128s2,3*bottleneck128,bottleneck256s2,5*bottleneck256,"
           "bottleneck512s2,2*bottleneck512,gap,fc10",
   224, TDM_RECIPE_TORCHVISION},
};

const TdmNetworkPreset *
tdm_network_presets(int *count)
{
  *count = G_N_ELEMENTS(presets);
  return presets;
}

const TdmNetworkPreset *
tdm_network_preset_find(const char *name)
{
  g_return_val_if_fail(name != NULL, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++)
    if (g_str_equal(presets[i].name, name))
      return &presets[i];
  return NULL;
}

char *
tdm_network_preset_spec(const TdmNetworkPreset *preset, int classes)
{
  g_return_val_if_fail(preset != NULL && classes > 0, NULL);
  /* Every preset's head is its last "fcN" item. */
  const char *spec = preset->spec;
  const char *head = NULL;
  for (const char *p = strstr(spec, "fc"); p != NULL; p = strstr(p + 2, "fc"))
    if ((p == spec || p[-1] == ',') && g_ascii_isdigit(p[2]))
      head = p;
  g_assert(head != NULL);
  const char *rest = head + 2;
  while (g_ascii_isdigit(*rest))
    rest++;
  return g_strdup_printf("%.*sfc%d%s", (int)(head - spec), spec, classes, rest);
}
