/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-finetune.c — normalization settings, frozen layers and learning-rate factors
 * (tdm-finetune.h). */
#include "tdm-finetune.h"
#include "tdm-checkpoint.h"
#include "tdm-error.h"
#include "tdm-i18n.h"
#include "tdm-file.h"

#include <math.h>
#include <string.h>

/* An option that cannot be followed: FALSE, with the message. */
#define bad(error, ...) tdm_error_set((error), TDM_ENGINE_ERROR_INVALID_OPTION, __VA_ARGS__)

/* "a,b,c" into exactly `channels` finite floats within [lo, hi]. */
static gboolean
parse_floats(const char *text, int channels, float lo, float hi, float *out)
{
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  if ((int)g_strv_length(parts) != channels)
    return FALSE;
  for (int i = 0; i < channels; i++) {
    char *end = NULL;
    const char *p = g_strstrip(parts[i]);
    double v = g_ascii_strtod(p, &end);
    if (*p == '\0' || *end != '\0' || !isfinite(v) || v < lo || v > hi)
      return FALSE;
    out[i] = (float)v;
  }
  return TRUE;
}

gboolean
tdm_normalize_resolve(const char *setting, const TdmDataset *train, int channels,
                      gboolean *enabled, float *mean, float *std, GError **error)
{
  *enabled = FALSE;
  if (setting == NULL || g_str_equal(setting, "none") || *setting == '\0')
    return TRUE;
  if (channels < 1 || channels > TDM_AFFINE_MAX_CHANNELS)
    return bad(error, "--normalize: inputs of %d channels cannot be normalized", channels);
  if (g_str_equal(setting, "imagenet")) {
    const float m[3] = TDM_IMAGENET_MEAN, s[3] = TDM_IMAGENET_STD;
    if (channels == 3) {
      memcpy(mean, m, sizeof m);
      memcpy(std, s, sizeof s);
    } else if (channels == 1) {
      /* Grey images: the mean of the three channels' statistics. */
      mean[0] = (m[0] + m[1] + m[2]) / 3.0f;
      std[0] = (s[0] + s[1] + s[2]) / 3.0f;
    } else {
      return bad(error, "--normalize imagenet: ImageNet's statistics are of RGB images, "
                        "but these inputs have %d channels (use dataset, none or given "
                        "values)", channels);
    }
  } else if (g_str_equal(setting, "dataset")) {
    if (train == NULL || train->count == 0)
      return bad(error, "--normalize dataset: the dataset has no training images");
    size_t pixels = (size_t)train->count * train->height * train->width;
    for (int ch = 0; ch < channels; ch++) {
      double sum = 0, sq = 0;
      for (size_t i = 0; i < pixels; i++) {
        double v = train->images[i * channels + ch] / 255.0;
        sum += v;
        sq += v * v;
      }
      double m = sum / (double)pixels;
      double var = MAX(0.0, sq / (double)pixels - m * m);
      mean[ch] = (float)m;
      /* A channel that never changes keeps its scale rather than dividing by 0. */
      std[ch] = var > 1e-12 ? (float)sqrt(var) : 1.0f;
    }
  } else {
    g_auto(GStrv) halves = g_strsplit(setting, "/", -1);
    if (g_strv_length(halves) != 2 || !parse_floats(halves[0], channels, -1e3f, 1e3f, mean) ||
        !parse_floats(halves[1], channels, 1e-6f, 1e3f, std))
      return bad(error, "--normalize “%s”: give dataset, imagenet, none, or %d mean%s and "
                        "%d standard deviation%s of pixel values in [0, 1] as M,…/S,… "
                        "(e.g. 0.5,0.5,0.5/0.25,0.25,0.25; deviations above 0)",
                 setting, channels, channels == 1 ? "" : "s", channels,
                 channels == 1 ? "" : "s");
  }
  *enabled = TRUE;
  return TRUE;
}

TdmChannelAffine
tdm_normalize_affine(int channels, const float *mean, const float *std)
{
  TdmChannelAffine a = {.channels = channels};
  for (int ch = 0; ch < channels; ch++) {
    a.mul[ch] = 1.0f / std[ch];
    a.add[ch] = -mean[ch] / std[ch];
  }
  return a;
}

char *
tdm_normalize_format(int channels, const float *mean, const float *std)
{
  GString *s = g_string_new(NULL);
  for (int half = 0; half < 2; half++) {
    const float *v = half ? std : mean;
    for (int ch = 0; ch < channels; ch++) {
      char number[G_ASCII_DTOSTR_BUF_SIZE];
      g_ascii_formatd(number, sizeof number, "%.9g", v[ch]);
      g_string_append_printf(s, "%s%s", ch ? "," : (half ? "/" : ""), number);
    }
  }
  return g_string_free(s, FALSE);
}

/* Whether layer name lies in the module called prefix. */
static gboolean
in_module(const char *name, const char *prefix)
{
  size_t n = strlen(prefix);
  return strncmp(name, prefix, n) == 0 && (name[n] == '\0' || name[n] == '.');
}

static gboolean
has_parameters(const TdmLayer *l)
{
  return l->param_count > 0 || l->state_count > 0;
}

/* The head: the last layer with parameters (the last fc). */
static int
head_index(const TdmNetwork *net)
{
  for (int i = net->layer_count - 1; i >= 0; i--)
    if (net->layers[i].kind == TDM_LAYER_LINEAR)
      return i;
  return -1;
}

/* torchvision's file names for the presets' ImageNet weights (torchvision.models'
 * URLs), the default weights first where there are two. */
static const struct {
  const char *network;
  const char *file;
  const char *weights;   /* what torchvision.models.NAME(weights=…) calls them */
} torchvision_files[] = {
  {"resnet18", "resnet18-f37072fd.pth", "IMAGENET1K_V1"},
  {"resnet34", "resnet34-b627a593.pth", "IMAGENET1K_V1"},
  {"resnet50", "resnet50-11ad3fa6.pth", "IMAGENET1K_V2"},
  {"resnet50", "resnet50-0676ba61.pth", "IMAGENET1K_V1"},
};

char *
tdm_finetune_torch_checkpoints_folder(void)
{
  /* torch.hub.get_dir()'s rule; the environment is read each time, as torch does. */
  const char *torch_home = g_getenv("TORCH_HOME");
  if (torch_home != NULL && *torch_home != '\0')
    return g_build_filename(torch_home, "hub", "checkpoints", NULL);
  const char *cache = g_getenv("XDG_CACHE_HOME");
  if (cache != NULL && *cache != '\0')
    return g_build_filename(cache, "torch", "hub", "checkpoints", NULL);
  return g_build_filename(g_get_home_dir(), ".cache", "torch", "hub", "checkpoints", NULL);
}

char *
tdm_finetune_init_file(const char *init, const char *network, GError **error)
{
  g_return_val_if_fail(init != NULL, NULL);
  if (!g_str_equal(init, "torchvision"))
    return g_strdup(init);
  g_autofree char *folder = tdm_finetune_torch_checkpoints_folder();
  /* Where torch keeps them, then the default place (a TORCH_HOME set for another
   * reason must not hide a download already there). */
  g_autofree char *fallback =
      g_build_filename(g_get_home_dir(), ".cache", "torch", "hub", "checkpoints", NULL);
  const char *folders[] = {folder, fallback};
  int first = -1;
  for (gsize i = 0; i < G_N_ELEMENTS(torchvision_files); i++) {
    if (network == NULL || !g_str_equal(network, torchvision_files[i].network))
      continue;
    if (first < 0)
      first = (int)i;
    for (gsize f = 0; f < G_N_ELEMENTS(folders); f++) {
      char *path = g_build_filename(folders[f], torchvision_files[i].file, NULL);
      if (tdm_file_present(path))
        return path;
      g_free(path);
    }
  }
  if (first < 0) {
    bad(error, _("--init torchvision: torchvision's ImageNet weights are for the networks "
                 "resnet18, resnet34 and resnet50, not “%s” (give a file: --init FILE.pth)"),
        network != NULL ? network : "");
    return NULL;
  }
  const char *file = torchvision_files[first].file;
  bad(error, _("--init torchvision: torchvision's %s weights are not in %s: put %s there "
               "(https://download.pytorch.org/models/%s, the file "
               "torchvision.models.%s(weights=\"%s\") downloads), or give its place: "
               "--init FILE.pth"), network, folder, file, file, network,
      torchvision_files[first].weights);
  return NULL;
}

char *
tdm_finetune_init_report(const TdmNetwork *net, const char *path, GError **error)
{
  g_return_val_if_fail(net != NULL && path != NULL, NULL);
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, error);
  if (ckpt == NULL)
    return NULL;
  /* Scratch for what would be copied in: the values do not matter, the matching does. */
  g_autofree float *params = g_new0(float, MAX(1, net->parameter_count));
  g_autofree float *state = g_new0(float, MAX(1, net->state_count));
  char *report = NULL;
  if (!tdm_checkpoint_read_matching(ckpt, net, path, FALSE, params, state, &report, error))
    return NULL;
  return report;
}

gboolean
tdm_finetune_active(const TdmConfig *c)
{
  return (c->freeze != NULL && c->freeze[0] != NULL) || c->train_head ||
         (c->lr_scale != NULL && c->lr_scale[0] != NULL);
}

/* Which option made a layer's factor 0: said when that layer is out of order. */
typedef enum { ZERO_NONE, ZERO_LR_SCALE, ZERO_FREEZE, ZERO_HEAD } ZeroedBy;

static gboolean
out_of_order(GError **error, const TdmLayer *frozen, const TdmLayer *trained, ZeroedBy by,
             const char *item)
{
  if (by == ZERO_LR_SCALE)
    return bad(error, "--lr-scale “%s”: a factor of 0 freezes “%s”, but it comes after “%s”, "
                      "which trains; frozen layers must come before every trained one (give "
                      "the factor to layers from the input up, or a factor above 0)",
               item, frozen->name, trained->name);
  return bad(error, "--freeze: “%s” is frozen but comes after “%s”, which trains; "
                    "freeze the network from its input up (e.g. conv1,bn1,layer1)",
             frozen->name, trained->name);
}

gboolean
tdm_finetune_layer_scales(const TdmNetwork *net, const TdmConfig *c, float *scales,
                          int *first_trained, GError **error)
{
  g_autofree ZeroedBy *zeroed = g_new0(ZeroedBy, net->layer_count);
  g_autofree const char **zeroed_item = g_new0(const char *, net->layer_count);
  for (int i = 0; i < net->layer_count; i++)
    scales[i] = 1.0f;
  for (int k = 0; c->lr_scale != NULL && c->lr_scale[k] != NULL; k++) {
    const char *item = c->lr_scale[k];
    const char *eq = strrchr(item, '=');
    char *end = NULL;
    double x = eq != NULL ? g_ascii_strtod(eq + 1, &end) : NAN;
    if (eq == NULL || eq == item || end == eq + 1 || *end != '\0' || !isfinite(x) || x < 0 ||
        x > 1e3)
      return bad(error, "--lr-scale “%s”: give PREFIX=X with a module name and a factor "
                        "from 0 to 1000, e.g. layer1=0.1", item);
    g_autofree char *prefix = g_strndup(item, eq - item);
    gboolean any = FALSE;
    for (int i = 0; i < net->layer_count; i++)
      if (has_parameters(&net->layers[i]) && in_module(net->layers[i].name, prefix)) {
        scales[i] = (float)x;
        zeroed[i] = x == 0 ? ZERO_LR_SCALE : ZERO_NONE;
        zeroed_item[i] = item;
        any = TRUE;
      }
    if (!any)
      return bad(error, "--lr-scale “%s”: no module of the network is called “%s” (its "
                        "modules are named as in PyTorch: conv1, layer1.0.bn1, fc …)",
                 item, prefix);
  }
  for (int k = 0; c->freeze != NULL && c->freeze[k] != NULL; k++) {
    const char *prefix = c->freeze[k];
    gboolean any = FALSE;
    for (int i = 0; i < net->layer_count; i++)
      if (has_parameters(&net->layers[i]) && in_module(net->layers[i].name, prefix)) {
        scales[i] = 0.0f;
        zeroed[i] = ZERO_FREEZE;
        any = TRUE;
      }
    if (!any)
      return bad(error, "--freeze “%s”: no module of the network is called “%s” (its "
                        "modules are named as in PyTorch: conv1, bn1, layer1, layer2.0, "
                        "fc …)", prefix, prefix);
  }
  if (c->train_head) {
    int head = head_index(net);
    for (int i = 0; i < net->layer_count; i++)
      if (i != head) {
        scales[i] = 0.0f;
        zeroed[i] = ZERO_HEAD;
      }
  }
  /* Frozen layers must all come before the trained ones: backward then stops at the
   * first trained layer, and no gradient passes through a frozen BN (which runs with
   * its running statistics). */
  int first = -1;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (!has_parameters(l))
      continue;
    if (scales[i] != 0.0f && first < 0)
      first = i;
    else if (scales[i] == 0.0f && first >= 0)
      return out_of_order(error, l, &net->layers[first], zeroed[i], zeroed_item[i]);
  }
  if (first < 0)
    return bad(error, "--freeze: every layer is frozen, so nothing would train");
  *first_trained = first;
  return TRUE;
}
