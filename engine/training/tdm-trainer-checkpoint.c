/* tdm-trainer-checkpoint.c — what a checkpoint holds and how a run resumes from it.
 *
 * Tensors are named and shaped as PyTorch names them (fc1.weight [out, in],
 * conv1.weight [out, in, kh, kw]), so safetensors loads them there; the optimizer's
 * state, the configuration, the iterator position and the step count go in too, so a
 * stopped run continues exactly. Not the file format (tdm-checkpoint.c).
 */
#include "tdm-trainer-private.h"
#include "tdm-checkpoint.h"
#include "tdm-error.h"

#include <string.h>

/* Bumped when the meaning of what is stored changes: version 2 keeps the optimizer's
 * state in the [out, kh, kw, in] order of conv weights in memory. */
#define CHECKPOINT_FORMAT "tandem-checkpoint-2"

gboolean
tdm_trainer_download_parameters(TdmTrainer *t, GError **error)
{
  if (t->main_local < 0)
    return TRUE;
  TdmBackend *b = t->backends[t->main_local];
  size_t n = t->net->parameter_count;
  if (t->host_params_count != n) {
    g_free(t->host_params);
    t->host_params = g_new(float, n);
    t->host_params_count = n;
  }
  b->ops->download(b, t->host_params, t->reps[t->main_local]->params, n * sizeof(float));
  return tdm_backend_check(b, error);
}

static void
add_layer_tensors(TdmCheckpoint *ckpt, const TdmNetwork *net, const float *params)
{
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    char name[64];
    if (l->kind == TDM_LAYER_LINEAR) {
      gint64 shape[2] = {l->out_c, (gint64)l->in_h * l->in_w * l->in_c};
      g_snprintf(name, sizeof name, "%s.weight", l->name);
      tdm_checkpoint_add(ckpt, name, 2, shape, params + l->weight_offset);
    } else if (l->kind == TDM_LAYER_CONV) {
      /* PyTorch's [out, in, kh, kw] in the file, ours [out, kh, kw, in] in memory. */
      gint64 shape[4] = {l->out_c, l->in_c, l->kernel, l->kernel};
      g_autofree float *torch = g_new(float, l->weight_count);
      tdm_layer_weight_to_torch(l, params + l->weight_offset, torch);
      g_snprintf(name, sizeof name, "%s.weight", l->name);
      tdm_checkpoint_add(ckpt, name, 4, shape, torch);
    } else {
      continue;
    }
    gint64 bias_shape[1] = {l->out_c};
    g_snprintf(name, sizeof name, "%s.bias", l->name);
    tdm_checkpoint_add(ckpt, name, 1, bias_shape, params + l->bias_offset);
  }
}

gboolean
tdm_trainer_save_checkpoint(TdmTrainer *t, GError **error)
{
  const TdmConfig *cfg = t->config;
  if (cfg->save_path == NULL || t->main_local < 0)
    return TRUE;
  if (!tdm_trainer_download_parameters(t, error))
    return FALSE;

  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_new();
  add_layer_tensors(ckpt, t->net, t->host_params);

  TdmOptimizer *opt = t->opts[t->main_local];
  size_t n = t->net->parameter_count;
  g_autofree float *state = g_new(float, n);
  for (int i = 0; i < opt->state_count; i++) {
    opt->backend->ops->download(opt->backend, state, opt->state[i], n * sizeof(float));
    gint64 shape[1] = {(gint64)n};
    tdm_checkpoint_add(ckpt, tdm_optimizer_state_name(opt, i), 1, shape, state);
  }
  if (!tdm_backend_check(opt->backend, error))
    return FALSE;

  g_autofree char *config_json = tdm_config_to_json(cfg);
  g_autofree char *epoch = g_strdup_printf("%d", t->it->epoch);
  g_autofree char *position = g_strdup_printf("%d", t->it->position);
  g_autofree char *step = g_strdup_printf("%ld", t->step);
  g_autofree char *opt_t = g_strdup_printf("%ld", opt->t);
  g_autofree char *params = g_strdup_printf("%zu", n);
  tdm_checkpoint_set_metadata(ckpt, "format", CHECKPOINT_FORMAT);
  tdm_checkpoint_set_metadata(ckpt, "config", config_json);
  tdm_checkpoint_set_metadata(ckpt, "network", t->net->spec);
  tdm_checkpoint_set_metadata(ckpt, "dataset", t->data->name);
  tdm_checkpoint_set_metadata(ckpt, "epoch", epoch);
  tdm_checkpoint_set_metadata(ckpt, "position", position);
  tdm_checkpoint_set_metadata(ckpt, "step", step);
  tdm_checkpoint_set_metadata(ckpt, "optimizer_t", opt_t);
  tdm_checkpoint_set_metadata(ckpt, "parameters", params);
  tdm_checkpoint_set_metadata(ckpt, "activation_layout",
                              "NHWC: an fc layer after a conv reads features in (row, "
                              "column, channel) order");
  if (!tdm_checkpoint_save(ckpt, cfg->save_path, error))
    return FALSE;
  t->saved_step = t->step;
  return TRUE;
}

static gboolean
metadata_long(TdmCheckpoint *ckpt, const char *path, const char *key, gint64 min, gint64 max,
              gint64 *out, GError **error)
{
  const char *text = tdm_checkpoint_get_metadata(ckpt, key);
  if (text == NULL || !g_ascii_string_to_signed(text, 10, min, max, out, NULL)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                "%s: metadata “%s” is missing or not a number in [%" G_GINT64_FORMAT
                ", %" G_GINT64_FORMAT "]",
                path, key, min, max);
    return FALSE;
  }
  return TRUE;
}

/* Puts the run where the checkpoint left it: parameters on every replica, optimizer
 * state where updates run, the iterator and the step count. */
gboolean
tdm_trainer_restore_checkpoint(TdmTrainer *t, const char *path, GError **error)
{
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, error);
  if (ckpt == NULL)
    return FALSE;
  const char *format = tdm_checkpoint_get_metadata(ckpt, "format");
  if (format == NULL || !g_str_equal(format, CHECKPOINT_FORMAT)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                "%s: not a checkpoint this version of Tandem can resume (format “%s”, "
                "expected “%s”); its weights still load into PyTorch",
                path, format ? format : "none", CHECKPOINT_FORMAT);
    return FALSE;
  }
  const char *spec = tdm_checkpoint_get_metadata(ckpt, "network");
  if (spec == NULL || !g_str_equal(spec, t->net->spec)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                "%s: the checkpoint is of network “%s”, but this run is “%s”", path,
                spec ? spec : "(none)", t->net->spec);
    return FALSE;
  }
  /* Positions and steps mean nothing on another dataset: say which two they are,
   * rather than that a number is out of range. */
  const char *dataset = tdm_checkpoint_get_metadata(ckpt, "dataset");
  if (dataset == NULL || !g_str_equal(dataset, t->data->name)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                "%s: the checkpoint was saved training on dataset “%s”, but this run uses "
                "“%s”; resume with the dataset it was saved with",
                path, dataset ? dataset : "(none)", t->data->name);
    return FALSE;
  }
  gint64 epoch, position, step, opt_t;
  const char *saved_position = tdm_checkpoint_get_metadata(ckpt, "position");
  gint64 p;
  if (saved_position != NULL &&
      g_ascii_string_to_signed(saved_position, 10, 0, G_MAXINT, &p, NULL) &&
      p > t->data->train->count) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                "%s: the checkpoint stopped at sample %" G_GINT64_FORMAT " of an epoch, but "
                "dataset “%s” now holds %d training samples: it is not the dataset the "
                "checkpoint was saved with",
                path, p, t->data->name, t->data->train->count);
    return FALSE;
  }
  if (!metadata_long(ckpt, path, "epoch", 0, G_MAXINT, &epoch, error) ||
      !metadata_long(ckpt, path, "position", 0, t->data->train->count, &position, error) ||
      !metadata_long(ckpt, path, "step", 0, G_MAXINT64, &step, error) ||
      !metadata_long(ckpt, path, "optimizer_t", 0, G_MAXINT64, &opt_t, error))
    return FALSE;

  size_t n = t->net->parameter_count;
  g_autofree float *params = g_new0(float, n);
  for (int i = 0; i < t->net->layer_count; i++) {
    const TdmLayer *l = &t->net->layers[i];
    if (l->weight_count == 0)
      continue;
    const char *suffix[2] = {"weight", "bias"};
    size_t offsets[2] = {l->weight_offset, l->bias_offset};
    size_t counts[2] = {l->weight_count, l->bias_count};
    for (int k = 0; k < 2; k++) {
      g_autofree char *name = g_strdup_printf("%s.%s", l->name, suffix[k]);
      const TdmTensor *tensor = tdm_checkpoint_get(ckpt, name);
      gint64 elements = 1;
      for (int d = 0; tensor != NULL && d < tensor->rank; d++)
        elements *= tensor->shape[d];
      if (tensor == NULL || elements != (gint64)counts[k]) {
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                    "%s: tensor “%s” is missing or has the wrong size (%zu values expected)",
                    path, name, counts[k]);
        return FALSE;
      }
      if (k == 0)
        tdm_layer_weight_from_torch(l, tensor->data, params + offsets[k]);
      else
        memcpy(params + offsets[k], tensor->data, counts[k] * sizeof(float));
    }
  }

  for (int r = 0; r < t->replicas; r++) {
    TdmBackend *b = t->backends[r];
    b->ops->upload(b, t->reps[r]->params, params, n * sizeof(float));
    TdmOptimizer *opt = t->opts[r];
    if (opt == NULL)
      continue;
    opt->t = opt_t;
    for (int i = 0; i < opt->state_count; i++) {
      const char *name = tdm_optimizer_state_name(opt, i);
      const TdmTensor *tensor = tdm_checkpoint_get(ckpt, name);
      if (tensor == NULL || tensor->rank != 1 || tensor->shape[0] != (gint64)n) {
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                    "%s: optimizer state “%s” is missing or has the wrong size", path, name);
        return FALSE;
      }
      b->ops->upload(b, opt->state[i], tensor->data, n * sizeof(float));
    }
  }
  for (int r = 0; r < t->replicas; r++)
    if (!tdm_backend_check(t->backends[r], error))
      return FALSE;
  tdm_iterator_seek(t->it, (int)epoch, (int)position);
  t->step = step;
  /* Stopping before the first step must not rewrite the file with the same state. */
  t->saved_step = step;
  return TRUE;
}
