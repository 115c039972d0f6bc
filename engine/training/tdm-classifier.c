/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-classifier.c — classifying images with a saved network (tdm-classifier.h).
 *
 * The replica is built over a one-sample dataset that each call overwrites, so the
 * forward pass, the uint8 → [0, 1] scaling and the layouts are exactly the trainer's:
 * a test image classified here gets the class the evaluation gave it.
 */
#include "tdm-classifier.h"
#include "tdm-i18n.h"
#include "tdm-backend.h"
#include "tdm-checkpoint.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-finetune.h"
#include "tdm-network-catalogue.h"
#include "tdm-image.h"
#include "tdm-json.h"
#include "tdm-network.h"
#include "tdm-printable.h"
#include "tdm-replica.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

struct _TdmClassifier {
  TdmNetwork *net;
  TdmBackend *backend;
  TdmReplica *replica;
  TdmDataset *input;      /* one sample; the replica holds its own copy */
  char **names;           /* classes entries */
  float *logits;
  gboolean normalized;    /* the inputs go through (x − mean) / std */
  float mean[TDM_AFFINE_MAX_CHANNELS], std[TDM_AFFINE_MAX_CHANNELS];
};

static gboolean
bad_checkpoint(GError **error, const char *path, const char *why)
{
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT, "%s: %s", path, why);
  return FALSE;
}

/* The class names saved with the run; numbers where none were saved (checkpoints
 * of older Tandems). Saved names that are not a list of `classes` non-empty UTF-8
 * strings are refused: mixing names and numbers would label predictions wrongly. */
static char **
read_names(TdmCheckpoint *ckpt, const char *path, int classes, GError **error)
{
  const char *json = tdm_checkpoint_get_metadata(ckpt, "class_names");
  g_auto(GStrv) names = g_new0(char *, classes + 1);
  if (json == NULL) {
    for (int k = 0; k < classes; k++)
      names[k] = g_strdup_printf("%d", k);
    return g_steal_pointer(&names);
  }
  g_autoptr(GError) local = NULL;
  g_autoptr(JsonNode) root = tdm_json_parse(json, -1, TDM_ENGINE_ERROR_CHECKPOINT, &local);
  if (root == NULL || !JSON_NODE_HOLDS_ARRAY(root)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("%s: metadata “class_names” is not a JSON list of names%s%s"), path,
                local != NULL ? ": " : "", local != NULL ? local->message : "");
    return NULL;
  }
  JsonArray *array = json_node_get_array(root);
  if (json_array_get_length(array) != (guint)classes) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("%s: metadata “class_names” holds %u names, but the network has %d classes"),
                path, json_array_get_length(array), classes);
    return NULL;
  }
  for (int k = 0; k < classes; k++) {
    JsonNode *e = json_array_get_element(array, k);
    const char *name = JSON_NODE_HOLDS_VALUE(e) && json_node_get_value_type(e) == G_TYPE_STRING
                           ? json_node_get_string(e)
                           : NULL;
    if (name == NULL || *name == '\0' || !g_utf8_validate(name, -1, NULL)) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                  _("%s: metadata “class_names”, entry %d: not a non-empty text"), path, k);
      return NULL;
    }
    /* Shown on a terminal: no escape sequence or newline gets there raw. */
    names[k] = tdm_printable(name);
  }
  return g_steal_pointer(&names);
}

/* The outputs of a spec's last fc (scale items may follow it), or 0. */
static int
spec_classes(const char *spec)
{
  g_auto(GStrv) items = g_strsplit(spec, ",", -1);
  for (int i = (int)g_strv_length(items) - 1; i >= 0; i--) {
    const char *item = g_strstrip(items[i]);
    if (g_str_has_prefix(item, "scale"))
      continue;
    int classes = 0;
    return sscanf(item, "fc%d", &classes) == 1 ? classes : 0;
  }
  return 0;
}

/* Takes net and names; copies params and state onto a CPU replica. */
static TdmClassifier *
classifier_new(TdmNetwork *net, const float *params, const float *state, char **names,
               const char *normalize, GError **error)
{
  TdmClassifier *cl = g_new0(TdmClassifier, 1);
  cl->net = net;
  cl->names = names;
  cl->logits = g_new0(float, net->classes);
  /* One unlabelled sample: its label space need not be the network's (ImageNet's
   * 1000 classes are more than a dataset holds). */
  cl->input = tdm_dataset_new("classify", 1, net->in_h, net->in_w, net->in_c,
                              MIN(net->classes, 256));
  float mean[TDM_AFFINE_MAX_CHANNELS], std[TDM_AFFINE_MAX_CHANNELS];
  gboolean normalized = FALSE;
  cl->backend = tdm_backend_cpu_new(error);
  if (cl->backend == NULL ||
      !tdm_normalize_resolve(normalize, NULL, net->in_c, &normalized, mean, std, error)) {
    tdm_classifier_free(cl);
    return NULL;
  }
  cl->replica = tdm_replica_new(cl->backend, net, 1, cl->input, cl->input, error);
  if (cl->replica == NULL) {
    tdm_classifier_free(cl);
    return NULL;
  }
  cl->replica->normalize = normalized;
  cl->normalized = normalized;
  if (normalized) {
    cl->replica->input_affine = tdm_normalize_affine(net->in_c, mean, std);
    memcpy(cl->mean, mean, sizeof cl->mean);
    memcpy(cl->std, std, sizeof cl->std);
  }
  cl->backend->ops->upload(cl->backend, cl->replica->params, params,
                           net->parameter_count * sizeof(float));
  if (net->state_count > 0)
    cl->backend->ops->upload(cl->backend, cl->replica->state, state,
                             net->state_count * sizeof(float));
  if (!tdm_backend_check(cl->backend, error)) {
    tdm_classifier_free(cl);
    return NULL;
  }
  return cl;
}

TdmClassifier *
tdm_classifier_load(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, error);
  if (ckpt == NULL)
    return NULL;
  const char *spec = tdm_checkpoint_get_metadata(ckpt, "network");
  const char *shape = tdm_checkpoint_get_metadata(ckpt, "input_shape");
  if (spec == NULL) {
    bad_checkpoint(error, path, _("no network in its metadata (not written by Tandem?)"));
    return NULL;
  }
  int h = 0, w = 0, c = 0;
  if (shape == NULL || sscanf(shape, "%d,%d,%d", &h, &w, &c) != 3 || h < 1 || w < 1 ||
      h > 4096 || w > 4096 || (c != 1 && c != 3)) {
    bad_checkpoint(error, path,
                   _("no usable input shape in its metadata (saved by an older Tandem: "
                   "resume it for one step with --save to add it)"));
    return NULL;
  }
  /* A network ends in an fc with one output per class (tdm-network.h). */
  int classes = spec_classes(spec);
  if (classes < 1 || classes > 256) {
    bad_checkpoint(error, path, _("its network does not end in an fc layer of 1 to 256 "
                                "outputs"));
    return NULL;
  }
  TdmNetwork *net = tdm_network_new(spec, h, w, c, classes, error);
  if (net == NULL) {
    g_prefix_error(error, "%s: ", path);
    return NULL;
  }
  /* The input shape decides the first fc's width: one that is not the run's shows as
   * a tensor of the wrong size, but it is the metadata that is wrong. */
  const char *saved = tdm_checkpoint_get_metadata(ckpt, "parameters");
  gint64 count;
  if (saved != NULL && g_ascii_string_to_signed(saved, 10, 0, G_MAXINT64, &count, NULL) &&
      count != (gint64)net->parameter_count) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("%s: metadata “input_shape” %s and “network” make %zu parameters, but "
                "the run saved %lld (metadata “parameters”): the input shape or the "
                "network is not the run's"),
                path, shape, net->parameter_count, (long long)count);
    tdm_network_free(net);
    return NULL;
  }
  g_autofree float *params = g_new0(float, MAX(1, net->parameter_count));
  g_autofree float *state = g_new0(float, MAX(1, net->state_count));
  if (!tdm_checkpoint_read_parameters(ckpt, net, path, params, state, error)) {
    tdm_network_free(net);
    return NULL;
  }
  /* Evaluated as the run evaluated: with its test-time flips and shifts, if it used
   * them, and its input normalization. */
  const char *config_json = tdm_checkpoint_get_metadata(ckpt, "config");
  g_autoptr(TdmConfig) config = config_json != NULL ? tdm_config_from_json(config_json, NULL)
                                                    : NULL;
  const char *normalize = tdm_checkpoint_get_metadata(ckpt, "normalize");
  char **names = read_names(ckpt, path, classes, error);
  if (names == NULL) {
    tdm_network_free(net);
    return NULL;
  }
  TdmClassifier *cl = classifier_new(net, params, state, names, normalize, error);
  if (cl == NULL) {
    g_prefix_error(error, "%s: ", path);
    return NULL;
  }
  cl->replica->test_flip = config != NULL && config->test_flip;
  cl->replica->test_shift = config != NULL ? config->test_shift : 0;
  return cl;
}

/* The classes of a network's head in a state_dict: the rows of the last fc's weight.
 * 0 with an error: the network cannot be built for this input (its own message: an
 * activation too large, a kernel that does not fit), or the file has no such head. */
static int
head_classes(TdmCheckpoint *ckpt, const char *network, const char *path, int h, int w, int c,
             GError **error)
{
  g_autoptr(TdmNetwork) probe = tdm_network_new(network, h, w, c, 1, error);
  if (probe == NULL)
    return 0;
  int head = probe->layer_count - 1;
  while (head > 0 && probe->layers[head].kind != TDM_LAYER_LINEAR)
    head--;
  g_autofree char *name = g_strdup_printf("%s.weight", probe->layers[head].name);
  const TdmTensor *t = tdm_checkpoint_find(ckpt, name);
  if (t != NULL && t->rank == 2 && t->shape[0] >= 1 && t->shape[0] <= 100000)
    return (int)t->shape[0];
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
              _("%s: no “%s” of two dimensions: not weights for network “%s”"), path, name,
              network);
  return 0;
}

TdmClassifier *
tdm_classifier_load_weights(const char *network, const char *path, int size, int channels,
                            const char *normalize, GError **error)
{
  g_return_val_if_fail(network != NULL && path != NULL, NULL);
  const TdmNetworkPreset *preset = tdm_network_preset_find(network);
  if (size <= 0)
    size = preset != NULL ? preset->input_size : 0;
  if (size <= 0) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("--image-size: network “%s” does not say its input size; give it"), network);
    return NULL;
  }
  if (channels <= 0)
    channels = 3;
  if (normalize == NULL && preset != NULL && preset->recipe == TDM_RECIPE_TORCHVISION)
    normalize = "imagenet";
  g_autofree char *file = tdm_finetune_init_file(path, network, error);
  if (file == NULL)
    return NULL;
  path = file;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, error);
  if (ckpt == NULL)
    return NULL;
  /* A preset's head follows the file; a spec says its own class count. */
  int classes = preset != NULL
                    ? head_classes(ckpt, network, path, size, size, channels, error)
                    : 0;
  if (preset != NULL && classes == 0)
    return NULL;
  if (preset == NULL) {
    classes = spec_classes(network);
    if (classes < 1) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_SPEC,
                  _("--network “%s”: to classify, a spec must end in fcN (N classes)"), network);
      return NULL;
    }
  }
  TdmNetwork *net = tdm_network_new(network, size, size, channels, classes, error);
  if (net == NULL)
    return NULL;
  g_autofree float *params = g_new0(float, MAX(1, net->parameter_count));
  g_autofree float *state = g_new0(float, MAX(1, net->state_count));
  tdm_network_init_state(net, state);
  if (!tdm_checkpoint_read_matching(ckpt, net, path, TRUE, params, state, NULL, error)) {
    tdm_network_free(net);
    return NULL;
  }
  char **names = g_new0(char *, classes + 1);
  for (int k = 0; k < classes; k++)
    names[k] = g_strdup_printf("%d", k);
  return classifier_new(net, params, state, names, normalize, error);
}

void
tdm_classifier_free(TdmClassifier *cl)
{
  if (cl == NULL)
    return;
  tdm_replica_free(cl->replica);
  tdm_backend_free(cl->backend);
  tdm_dataset_free(cl->input);
  tdm_network_free(cl->net);
  g_strfreev(cl->names);
  g_free(cl->logits);
  g_free(cl);
}

int
tdm_classifier_classes(const TdmClassifier *cl)
{
  return cl->net->classes;
}

const char *
tdm_classifier_class_name(const TdmClassifier *cl, int k)
{
  g_return_val_if_fail(k >= 0 && k < cl->net->classes, NULL);
  return cl->names[k];
}

const float *
tdm_classifier_logits(const TdmClassifier *cl)
{
  return cl->logits;
}

void
tdm_classifier_input(const TdmClassifier *cl, int *height, int *width, int *channels)
{
  *height = cl->net->in_h;
  *width = cl->net->in_w;
  *channels = cl->net->in_c;
}

gboolean
tdm_classifier_run(TdmClassifier *cl, const uint8_t *sample, float *probs, GError **error)
{
  g_return_val_if_fail(cl != NULL && sample != NULL && probs != NULL, FALSE);
  TdmBackend *b = cl->backend;
  int n = tdm_dataset_sample_size(cl->input);
  b->ops->upload(b, cl->replica->test_images, sample, (size_t)n);
  tdm_replica_predict(cl->replica, 0, 1, cl->logits);
  if (!tdm_backend_check(b, error))
    return FALSE;
  int classes = cl->net->classes;
  float top = cl->logits[0];
  for (int k = 1; k < classes; k++)
    top = MAX(top, cl->logits[k]);
  double sum = 0;
  for (int k = 0; k < classes; k++)
    sum += exp((double)cl->logits[k] - top);
  for (int k = 0; k < classes; k++)
    probs[k] = (float)(exp((double)cl->logits[k] - top) / sum);
  return TRUE;
}

gboolean
tdm_classifier_run_file(TdmClassifier *cl, const char *path, float *probs, GError **error)
{
  g_return_val_if_fail(cl != NULL && path != NULL && probs != NULL, FALSE);
  if (cl->net->in_h != cl->net->in_w) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("%s: the network takes %d × %d inputs; only square inputs can be made from "
                "image files"), path, cl->net->in_h, cl->net->in_w);
    return FALSE;
  }
  g_autofree uint8_t *sample = g_malloc(tdm_dataset_sample_size(cl->input));
  GError *local = NULL;
  if (!tdm_image_load(path, cl->net->in_h, cl->net->in_c, sample, &local)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET, "%s: %s", path,
                local->message);
    g_error_free(local);
    return FALSE;
  }
  return tdm_classifier_run(cl, sample, probs, error);
}

void
tdm_classifier_rank(const float *probs, int classes, int top, int *order)
{
  /* Selection of the top few: classes are at most 256. */
  g_autofree gboolean *taken = g_new0(gboolean, classes);
  for (int r = 0; r < top && r < classes; r++) {
    int best = -1;
    for (int k = 0; k < classes; k++)
      if (!taken[k] && (best < 0 || probs[k] > probs[best]))
        best = k;
    taken[best] = TRUE;
    order[r] = best;
  }
}

const TdmNetwork *
tdm_classifier_network(const TdmClassifier *cl)
{
  g_return_val_if_fail(cl != NULL, NULL);
  return cl->net;
}

gboolean
tdm_classifier_normalization(const TdmClassifier *classifier, const float **mean,
                             const float **std)
{
  g_return_val_if_fail(classifier != NULL, FALSE);
  *mean = classifier->normalized ? classifier->mean : NULL;
  *std = classifier->normalized ? classifier->std : NULL;
  return classifier->normalized;
}

void
tdm_classifier_read_parameters(TdmClassifier *cl, float *params, float *state)
{
  g_return_if_fail(cl != NULL && params != NULL);
  TdmBackend *b = cl->backend;
  b->ops->download(b, params, cl->replica->params, cl->net->parameter_count * sizeof(float));
  if (cl->net->state_count > 0)
    b->ops->download(b, state, cl->replica->state, cl->net->state_count * sizeof(float));
}
