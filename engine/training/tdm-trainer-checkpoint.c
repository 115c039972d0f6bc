/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-trainer-checkpoint.c — what a checkpoint holds and how a run resumes from it.
 *
 * Tensors are named and shaped as PyTorch names them (fc1.weight [out, in],
 * conv1.weight [out, in, kh, kw], bn1.running_mean, layer2.0.downsample.0.weight: a
 * module of the same shape loads them with load_state_dict), BN running statistics
 * included; the optimizer's
 * state, the configuration, the iterator position and the step count go in too, so a
 * stopped run continues exactly. Not the file format (tdm-checkpoint.c).
 */
#include "tdm-trainer-private.h"
#include "tdm-i18n.h"
#include "tdm-checkpoint.h"
#include "tdm-error.h"
#include "tdm-json.h"

#include <json-glib/json-glib.h>

#include <math.h>
#include <string.h>

/* Bumped when the meaning of what is stored changes: version 2 keeps the optimizer's
 * state in the [out, kh, kw, in] order of conv weights in memory. */
#define CHECKPOINT_FORMAT "tandem-checkpoint-2"
/* How an fc after a conv stores its weight. Checkpoints written before this key said
 * "NHWC: …" hold it in (row, column, channel) order, and name a network's only fc
 * "fc1": both still resume. */
#define ACTIVATION_LAYOUT "NCHW: an fc layer after a conv is stored in PyTorch's flatten " \
                          "order (channel, row, column)"

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
  tdm_backend_download(b, t->host_params, t->reps[t->main_local]->params, n * sizeof(float));
  return tdm_backend_check(b, error);
}

/* One tensor of a checkpoint as PyTorch's state_dict names it, and where it lives:
 * the parameter buffer (conv weights permuted to [out, in, kh, kw]) or the BN state
 * buffer; num_batches_tracked is the step count, written and not read back. */
typedef enum { IN_PARAMS, IN_STATE, IS_STEP } Home;

typedef struct {
  char name[96];
  int rank;
  gint64 shape[4];
  Home home;
  size_t offset, count;
  const TdmLayer *layer;       /* a conv's or fc's weight: permuted through its layout */
} Entry;

static void
entry(Entry *e, const char *prefix, const char *suffix, Home home, size_t offset,
      size_t count, int rank, gint64 d0, gint64 d1, gint64 d2, gint64 d3)
{
  memset(e, 0, sizeof *e);
  g_snprintf(e->name, sizeof e->name, "%s.%s", prefix, suffix);
  e->home = home;
  e->offset = offset;
  e->count = count;
  e->rank = rank;
  gint64 dims[4] = {d0, d1, d2, d3};
  memcpy(e->shape, dims, sizeof dims);
}

/* BN's five tensors under prefix: gamma and beta at offset, running stats at state. */
static int
bn_entries(Entry *e, const char *prefix, size_t offset, size_t state, gint64 c)
{
  entry(&e[0], prefix, "weight", IN_PARAMS, offset, c, 1, c, 0, 0, 0);
  entry(&e[1], prefix, "bias", IN_PARAMS, offset + c, c, 1, c, 0, 0, 0);
  entry(&e[2], prefix, "running_mean", IN_STATE, state, c, 1, c, 0, 0, 0);
  entry(&e[3], prefix, "running_var", IN_STATE, state + c, c, 1, c, 0, 0, 0);
  entry(&e[4], prefix, "num_batches_tracked", IS_STEP, 0, 1, 0, 0, 0, 0, 0);
  return 5;
}

/* The tensors of layer l into e[0, 7); returns how many. */
static int
layer_entries(const TdmNetwork *net, const TdmLayer *l, Entry *e)
{
  int n = 0;
  switch (l->kind) {
  case TDM_LAYER_LINEAR:
    entry(&e[n], l->name, "weight", IN_PARAMS, l->weight_offset, l->weight_count, 2,
          l->out_c, (gint64)l->in_h * l->in_w * l->in_c, 0, 0);
    e[n++].layer = l;
    break;
  case TDM_LAYER_CONV:
    entry(&e[n], l->name, "weight", IN_PARAMS, l->weight_offset, l->weight_count, 4, l->out_c,
          l->in_c, l->kernel, l->kernel);
    e[n++].layer = l;
    break;
  case TDM_LAYER_BN:
    return bn_entries(e, l->name, l->weight_offset, l->state_offset, l->out_c);
  case TDM_LAYER_RES_END: {
    if (!l->projection)
      return 0;
    char prefix[80];
    g_snprintf(prefix, sizeof prefix, "%s.0", l->name);
    entry(&e[n++], prefix, "weight", IN_PARAMS, l->weight_offset, l->weight_count, 4, l->out_c,
          net->layers[l->partner].in_c, 1, 1);
    g_snprintf(prefix, sizeof prefix, "%s.1", l->name);
    return n + bn_entries(&e[n], prefix, l->bias_offset, l->state_offset, l->out_c);
  }
  default:
    return 0;
  }
  if (l->bias_count > 0)
    entry(&e[n++], l->name, "bias", IN_PARAMS, l->bias_offset, l->bias_count, 1, l->out_c, 0,
          0, 0);
  return n;
}

/* tracked (or NULL): a frozen BN layer's own num_batches_tracked, which its frozen
 * statistics keep as they were given; every other BN layer counts the run's steps. */
static void
add_layer_tensors(TdmCheckpoint *ckpt, const TdmNetwork *net, const float *params,
                  const float *state, long step, const gint64 *tracked)
{
  for (int i = 0; i < net->layer_count; i++) {
    Entry e[8];
    int n = layer_entries(net, &net->layers[i], e);
    float steps = (float)(tracked != NULL && tracked[i] >= 0 ? tracked[i] : step);
    for (int k = 0; k < n; k++) {
      if (e[k].home == IS_STEP) {
        tdm_checkpoint_add(ckpt, e[k].name, 0, e[k].shape, &steps);
      } else if (e[k].layer != NULL) {
        /* PyTorch's [out, in, kh, kw] and (channel, row, column) in the file, ours
         * [out, kh, kw, in] and (row, column, channel) in memory. */
        g_autofree float *torch = g_new(float, e[k].count);
        tdm_layer_weight_to_torch(e[k].layer, params + e[k].offset, torch);
        tdm_checkpoint_add(ckpt, e[k].name, e[k].rank, e[k].shape, torch);
      } else {
        const float *home = e[k].home == IN_STATE ? state : params;
        tdm_checkpoint_add(ckpt, e[k].name, e[k].rank, e[k].shape, home + e[k].offset);
      }
    }
  }
}

/* The main replica's BN running statistics (every replica holds the same). */
static float *
download_state(TdmTrainer *t, GError **error)
{
  size_t n = MAX(1, t->net->state_count);
  float *state = g_new0(float, n);
  if (t->net->state_count == 0)
    return state;
  TdmBackend *b = t->backends[t->main_local];
  tdm_backend_download(b, state, t->reps[t->main_local]->state, n * sizeof(float));
  if (!tdm_backend_check(b, error))
    g_clear_pointer(&state, g_free);
  return state;
}

static char *
class_names_json(const TdmDataset *d)
{
  if (d->class_names == NULL)
    return NULL;
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_array(b);
  for (int k = 0; k < d->classes; k++)
    json_builder_add_string_value(b, d->class_names[k] != NULL ? d->class_names[k] : "");
  json_builder_end_array(b);
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  return tdm_json_to_string(root);
}

gboolean
tdm_trainer_save_checkpoint(TdmTrainer *t, GError **error)
{
  if (t->config->save_path == NULL)
    return TRUE;
  if (!tdm_trainer_save_checkpoint_to(t, t->config->save_path, FALSE, error))
    return FALSE;
  t->saved_step = t->step;
  return TRUE;
}

/* What the monitored metric's watchers carry over a resume: the best epoch, its
 * value and metrics, and the plateau schedule's state, as "%.17g" numbers. */
static void
watch_to_metadata(TdmTrainer *t, TdmCheckpoint *ckpt)
{
  char a[G_ASCII_DTOSTR_BUF_SIZE], b[G_ASCII_DTOSTR_BUF_SIZE], c[G_ASCII_DTOSTR_BUF_SIZE],
      d[G_ASCII_DTOSTR_BUF_SIZE];
  if (t->best_epoch > 0) {
    g_autofree char *best = g_strdup_printf("%d", t->best_epoch);
    tdm_checkpoint_set_metadata(ckpt, "best_epoch", best);
    tdm_checkpoint_set_metadata(ckpt, "best_value",
                                g_ascii_dtostr(a, sizeof a, t->best_value));
    g_autofree char *metrics = g_strdup_printf(
        "%s,%s,%s,%s", g_ascii_dtostr(a, sizeof a, t->best_metrics[0]),
        g_ascii_dtostr(b, sizeof b, t->best_metrics[1]),
        g_ascii_dtostr(c, sizeof c, t->best_metrics[2]),
        g_ascii_dtostr(d, sizeof d, t->best_metrics[3]));
    tdm_checkpoint_set_metadata(ckpt, "best_metrics", metrics);
  }
  if (t->config->schedule == TDM_SCHEDULE_PLATEAU) {
    g_autofree char *plateau = g_strdup_printf(
        "%s,%s,%d", g_ascii_dtostr(a, sizeof a, t->plateau_scale),
        g_ascii_dtostr(b, sizeof b, t->plateau_best), t->plateau_bad);
    tdm_checkpoint_set_metadata(ckpt, "plateau", plateau);
  }
}

/* "a,b,…" into out[n]; FALSE unless there are n numbers (nan included). */
static gboolean
read_numbers(const char *text, double *out, int n)
{
  if (text == NULL)
    return FALSE;
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  if ((int)g_strv_length(parts) != n)
    return FALSE;
  for (int i = 0; i < n; i++) {
    char *end = NULL;
    out[i] = g_ascii_strtod(parts[i], &end);
    if (end == parts[i] || *end != '\0')
      return FALSE;
  }
  return TRUE;
}

/* The best so far, so a resumed run keeps the best checkpoint only when it does
 * better than the epochs before the stop, and the plateau schedule where it was.
 * Checkpoints from before the monitor hold the best validation accuracy alone. */
static void
watch_from_metadata(TdmTrainer *t, TdmCheckpoint *ckpt)
{
  const char *best_epoch = tdm_checkpoint_get_metadata(ckpt, "best_epoch");
  const char *best_value = tdm_checkpoint_get_metadata(ckpt, "best_value");
  const char *best_accuracy = tdm_checkpoint_get_metadata(ckpt, "best_accuracy");
  gint64 be;
  double value;
  if (best_epoch != NULL && g_ascii_string_to_signed(best_epoch, 10, 1, G_MAXINT, &be, NULL) &&
      (read_numbers(best_value, &value, 1) || read_numbers(best_accuracy, &value, 1))) {
    t->best_epoch = (int)be;
    t->best_value = value;
    if (!read_numbers(tdm_checkpoint_get_metadata(ckpt, "best_metrics"), t->best_metrics, 4))
      t->best_metrics[1] = value;
  }
  double plateau[3];
  if (read_numbers(tdm_checkpoint_get_metadata(ckpt, "plateau"), plateau, 3) &&
      plateau[0] > 0 && isfinite(plateau[0]) && plateau[2] >= 0 && plateau[2] <= G_MAXINT) {
    t->plateau_scale = plateau[0];
    t->plateau_best = plateau[1];
    t->plateau_bad = (int)plateau[2];
  }
}

gboolean
tdm_trainer_save_checkpoint_to(TdmTrainer *t, const char *path, gboolean best,
                               GError **error)
{
  const TdmConfig *cfg = t->config;
  if (t->main_local < 0)
    return TRUE;
  if (!tdm_trainer_download_parameters(t, error))
    return FALSE;

  g_autofree float *bn_state = download_state(t, error);
  if (bn_state == NULL)
    return FALSE;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_new();
  add_layer_tensors(ckpt, t->net, t->host_params, bn_state, t->step, t->bn_tracked);

  TdmOptimizer *opt = t->opts[t->main_local];
  size_t n = t->net->parameter_count;
  g_autofree float *state = g_new(float, n);
  for (int i = 0; i < opt->state_count; i++) {
    tdm_backend_download(opt->backend, state, opt->state[i], n * sizeof(float));
    gint64 shape[1] = {(gint64)n};
    tdm_checkpoint_add(ckpt, tdm_optimizer_state_name(opt, i), 1, shape, state);
  }
  if (!tdm_backend_check(opt->backend, error))
    return FALSE;

  /* What the run asked for, auto where it was (the run's own configuration holds what
   * auto resolved to: resolve_precision() in tdm-trainer-setup.c). */
  g_autoptr(TdmConfig) asked = tdm_config_copy(cfg);
  asked->precision = t->precision.asked;
  g_autofree char *config_json = tdm_config_to_json(asked);
  g_autofree char *epoch = g_strdup_printf("%d", t->it->epoch);
  g_autofree char *position = g_strdup_printf("%d", t->it->position);
  g_autofree char *step = g_strdup_printf("%ld", t->step);
  g_autofree char *opt_t = g_strdup_printf("%ld", opt->t);
  g_autofree char *params = g_strdup_printf("%zu", n);
  tdm_checkpoint_set_metadata(ckpt, "format", CHECKPOINT_FORMAT);
  tdm_checkpoint_set_metadata(ckpt, "config", config_json);
  tdm_checkpoint_set_metadata(ckpt, "network", t->net->spec);
  tdm_checkpoint_set_metadata(ckpt, "dataset", t->data->name);
  tdm_checkpoint_set_dataset_place(ckpt, path, cfg->dataset);
  tdm_checkpoint_set_dataset_content(ckpt, t->data->train);
  tdm_checkpoint_set_metadata(ckpt, "epoch", epoch);
  tdm_checkpoint_set_metadata(ckpt, "position", position);
  tdm_checkpoint_set_metadata(ckpt, "step", step);
  tdm_checkpoint_set_metadata(ckpt, "optimizer_t", opt_t);
  tdm_checkpoint_set_metadata(ckpt, "parameters", params);
  watch_to_metadata(t, ckpt);
  /* What a classifier needs besides the weights: the input it was trained on and the
   * names of its outputs. */
  g_autofree char *shape = g_strdup_printf("%d,%d,%d", t->net->in_h, t->net->in_w,
                                           t->net->in_c);
  tdm_checkpoint_set_metadata(ckpt, "input_shape", shape);
  g_autofree char *names = class_names_json(t->data->train);
  if (names != NULL)
    tdm_checkpoint_set_metadata(ckpt, "class_names", names);
  tdm_checkpoint_set_metadata(ckpt, "activation_layout", ACTIVATION_LAYOUT);
  if (t->normalize_text != NULL)
    tdm_checkpoint_set_metadata(ckpt, "normalize", t->normalize_text);
  if (!tdm_checkpoint_save(ckpt, path, error))
    return FALSE;
  TdmEvent e = {.kind = TDM_EVENT_SAVED};
  e.saved.step = t->step;
  e.saved.epoch = t->it->epoch;
  e.saved.best = best;
  e.saved.monitor = cfg->monitor;
  e.saved.value = best ? t->best_value : NAN;
  g_strlcpy(e.saved.path, path, sizeof e.saved.path);
  tdm_trainer_emit(t, &e);
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

/* Whether ckpt was written by a Tandem from before PyTorch's fc layout: written by
 * Tandem (it has a format) without the current layout key. */
static gboolean
legacy_layout(TdmCheckpoint *ckpt)
{
  const char *layout = tdm_checkpoint_get_metadata(ckpt, "activation_layout");
  return tdm_checkpoint_get_metadata(ckpt, "format") != NULL &&
         (layout == NULL || g_str_has_prefix(layout, "NHWC"));
}

/* The tensor for entry e, its values not read yet; in a legacy checkpoint a network's
 * only fc was "fc1". */
static const TdmTensor *
find_tensor(TdmCheckpoint *ckpt, const Entry *e, gboolean legacy)
{
  const TdmTensor *tensor = tdm_checkpoint_find(ckpt, e->name);
  if (tensor == NULL && legacy && g_str_has_prefix(e->name, "fc.")) {
    g_autofree char *old = g_strdup_printf("fc1.%s", e->name + 3);
    tensor = tdm_checkpoint_find(ckpt, old);
  }
  return tensor;
}

static gboolean
bad_value(GError **error, const char *path, const char *name, const char *why, float v,
          gint64 at)
{
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
              _("%s: tensor “%s” holds %s (%g at index %lld)"), path, name, why, (double)v,
              (long long)at);
  return FALSE;
}

/* The values of a tensor that comes from outside, read and checked: float32 (an int64
 * read into a weight would be a counter or an index, not a weight), finite, within
 * ±TDM_CHECKPOINT_MAX_VALUE, and never below zero where a variance is meant to be.
 * A NaN or a 3e38 stored in a weight would train a few steps and then look like a
 * divergence, or classify everything at "nan %": the file and the tensor are named
 * instead. */
static const float *
checked_values(TdmCheckpoint *ckpt, const TdmTensor *tensor, gint64 count, gboolean variance,
               const char *path, GError **error)
{
  if (tensor->type != TDM_TENSOR_F32) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("%s: tensor “%s” holds int64 values; weights and statistics are float32 "
                "(only num_batches_tracked counters may be int64)"), path, tensor->name);
    return NULL;
  }
  const float *v = tdm_checkpoint_values(ckpt, tensor, error);
  if (v == NULL) {
    g_prefix_error(error, "%s: ", path);
    return NULL;
  }
  for (gint64 j = 0; j < count; j++) {
    if (!isfinite(v[j]))
      return bad_value(error, path, tensor->name, _("a value that is not a finite number"),
                       v[j], j), NULL;
    if (fabsf(v[j]) > TDM_CHECKPOINT_MAX_VALUE)
      return bad_value(error, path, tensor->name,
                       _("a value beyond ±1e12, which no training makes"), v[j], j), NULL;
    if (variance && v[j] < 0)
      return bad_value(error, path, tensor->name, _("a negative variance"), v[j], j), NULL;
  }
  return v;
}

static gboolean
is_variance(const char *name)
{
  return g_str_has_suffix(name, ".running_var") || g_str_has_suffix(name, ".adam.v");
}

static gboolean
copy_in(TdmCheckpoint *ckpt, const Entry *e, const TdmTensor *tensor, gboolean legacy,
        float *params, float *state, const char *path, GError **error)
{
  const float *v = checked_values(ckpt, tensor, (gint64)e->count, is_variance(e->name), path,
                                  error);
  if (v == NULL)
    return FALSE;
  if (e->layer != NULL && !(legacy && e->layer->kind == TDM_LAYER_LINEAR))
    tdm_layer_weight_from_torch(e->layer, v, params + e->offset);
  else
    memcpy((e->home == IN_STATE ? state : params) + e->offset, v, e->count * sizeof(float));
  return TRUE;
}

void
tdm_checkpoint_read_tracked(TdmCheckpoint *ckpt, const TdmNetwork *net, gint64 *tracked)
{
  for (int i = 0; i < net->layer_count; i++) {
    Entry e[8];
    int count = layer_entries(net, &net->layers[i], e);
    tracked[i] = -1;
    for (int k = 0; k < count; k++) {
      if (e[k].home != IS_STEP)
        continue;
      const TdmTensor *t = tdm_checkpoint_find(ckpt, e[k].name);
      const float *v = t != NULL && t->rank == 0 ? tdm_checkpoint_values(ckpt, t, NULL) : NULL;
      /* A count is a whole number; anything else is left to the run's own. */
      if (v != NULL && isfinite(v[0]) && v[0] >= 0 && v[0] <= 0x1p53 && v[0] == floorf(v[0]))
        tracked[i] = (gint64)v[0];
    }
  }
}

gboolean
tdm_checkpoint_read_parameters(TdmCheckpoint *ckpt, const TdmNetwork *net, const char *path,
                               float *params, float *state, GError **error)
{
  gboolean legacy = legacy_layout(ckpt);
  for (int i = 0; i < net->layer_count; i++) {
    Entry e[8];
    int count = layer_entries(net, &net->layers[i], e);
    for (int k = 0; k < count; k++) {
      if (e[k].home == IS_STEP)
        continue;
      const TdmTensor *tensor = find_tensor(ckpt, &e[k], legacy);
      gint64 elements = 1;
      for (int d = 0; tensor != NULL && d < tensor->rank; d++)
        elements *= tensor->shape[d];
      if (tensor == NULL || elements != (gint64)e[k].count) {
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                    _("%s: tensor “%s” is missing or has the wrong size (%zu values expected)"),
                    path, e[k].name, e[k].count);
        return FALSE;
      }
      if (!copy_in(ckpt, &e[k], tensor, legacy, params, state, path, error))
        return FALSE;
    }
  }
  return TRUE;
}

static char *
shape_text(int rank, const gint64 *shape)
{
  GString *s = g_string_new("[");
  for (int d = 0; d < rank; d++)
    g_string_append_printf(s, "%s%" G_GINT64_FORMAT, d ? ", " : "", shape[d]);
  g_string_append_c(s, ']');
  return g_string_free(s, FALSE);
}

static gboolean
same_shape(const Entry *e, const TdmTensor *t)
{
  if (t->rank != e->rank)
    return FALSE;
  for (int d = 0; d < e->rank; d++)
    if (t->shape[d] != e->shape[d])
      return FALSE;
  return TRUE;
}

gboolean
tdm_trainer_check_resume_dataset(TdmTrainer *t, const char *path, GError **error)
{
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, error);
  return ckpt != NULL && tdm_checkpoint_same_dataset(ckpt, path, t->data, error);
}

gboolean
tdm_checkpoint_read_matching(TdmCheckpoint *ckpt, const TdmNetwork *net, const char *path,
                             gboolean require_all, float *params, float *state,
                             char **report, GError **error)
{
  gboolean legacy = legacy_layout(ckpt);
  int head = net->layer_count - 1;
  while (head > 0 && net->layers[head].kind != TDM_LAYER_LINEAR)
    head--;
  int loaded = 0, wanted = 0;
  g_autoptr(GString) skipped = g_string_new(NULL);
  int skipped_count = 0;
  g_autoptr(GHashTable) used = g_hash_table_new(g_str_hash, g_str_equal);
  for (int i = 0; i < net->layer_count; i++) {
    Entry e[8];
    int count = layer_entries(net, &net->layers[i], e);
    for (int k = 0; k < count; k++) {
      const TdmTensor *tensor = find_tensor(ckpt, &e[k], legacy);
      if (tensor != NULL)
        g_hash_table_add(used, tensor->name);
      if (e[k].home == IS_STEP)
        continue;
      wanted++;
      const char *why = NULL;
      g_autofree char *why_text = NULL;
      if (tensor == NULL) {
        why = "missing";
      } else if (!same_shape(&e[k], tensor)) {
        g_autofree char *theirs = shape_text(tensor->rank, tensor->shape);
        g_autofree char *ours = shape_text(e[k].rank, e[k].shape);
        if (i == head && !require_all && tensor->rank >= 1 &&
            (e[k].rank < 2 || tensor->shape[1] == e[k].shape[1])) {
          /* Another class count: the head keeps its fresh initial values. */
          why = why_text = g_strdup_printf("head re-initialized: %" G_GINT64_FORMAT
                                           " classes in the file, %d here",
                                           tensor->shape[0], net->classes);
        } else if (i == head) {
          g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                      _("%s: tensor “%s” is %s, but the network's head is %s (%d classes)%s"),
                      path, e[k].name, theirs, ours, net->classes,
                      require_all ? _(": it was trained for another class count") : "");
          return FALSE;
        } else {
          g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                      _("%s: tensor “%s” is %s, but the network's is %s: the file is of "
                      "another architecture (or input size)"),
                      path, e[k].name, theirs, ours);
          return FALSE;
        }
      } else {
        if (!copy_in(ckpt, &e[k], tensor, legacy, params, state, path, error))
          return FALSE;
        loaded++;
        continue;
      }
      if (require_all) {
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                    _("%s: tensor “%s” is missing: the network cannot run without it"), path,
                    e[k].name);
        return FALSE;
      }
      /* The first few by name (the head's re-initialization comes last and is
       * always said); the rest counted. */
      if (skipped_count < 8 || i == head)
        g_string_append_printf(skipped, "%s%s (%s)", skipped->len ? ", " : "", e[k].name,
                               why);
      skipped_count++;
    }
  }
  int unused = 0;
  for (int i = 0; i < tdm_checkpoint_count(ckpt); i++)
    unused += !g_hash_table_contains(used, tdm_checkpoint_nth_name(ckpt, i));
  if (loaded == 0) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("%s: none of its %d tensors matches the network's names and shapes (it "
                "wants names such as “%s.weight”): not weights for this network"),
                path, tdm_checkpoint_count(ckpt), net->layers[0].name);
    return FALSE;
  }
  if (report != NULL) {
    GString *r = g_string_new(NULL);
    g_string_append_printf(r, "loaded %d of the network's %d tensors", loaded, wanted);
    if (skipped_count > 0)
      g_string_append_printf(r, "; skipped %d: %s%s", skipped_count, skipped->str,
                             skipped_count > 8 ? " …" : "");
    if (unused > 0)
      g_string_append_printf(r, "; %d of the file's tensors unused", unused);
    *report = g_string_free(r, FALSE);
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
                _("%s: not a checkpoint this version of Tandem can resume (format “%s”, "
                "expected “%s”); its weights still load into PyTorch"),
                path, format ? format : "none", CHECKPOINT_FORMAT);
    return FALSE;
  }
  const char *spec = tdm_checkpoint_get_metadata(ckpt, "network");
  if (spec == NULL || !g_str_equal(spec, t->net->spec)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("%s: the checkpoint is of network “%s”, but this run is “%s”"), path,
                spec ? spec : "(none)", t->net->spec);
    return FALSE;
  }
  if (!tdm_checkpoint_same_dataset(ckpt, path, t->data, error))
    return FALSE;
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
      !metadata_long(ckpt, path, "position", 0, t->train_used, &position, error) ||
      !metadata_long(ckpt, path, "step", 0, G_MAXINT64, &step, error) ||
      !metadata_long(ckpt, path, "optimizer_t", 0, G_MAXINT64, &opt_t, error))
    return FALSE;

  size_t n = t->net->parameter_count;
  size_t ns = t->net->state_count;
  g_autofree float *params = g_new0(float, MAX(1, n));
  g_autofree float *state = g_new0(float, MAX(1, ns));
  if (!tdm_checkpoint_read_parameters(ckpt, t->net, path, params, state, error))
    return FALSE;
  /* Frozen BN layers keep counting what the checkpoint says they had. */
  if (t->bn_tracked != NULL) {
    g_autofree gint64 *saved = g_new(gint64, t->net->layer_count);
    tdm_checkpoint_read_tracked(ckpt, t->net, saved);
    for (int i = 0; i < t->net->layer_count; i++)
      if (t->bn_tracked[i] >= 0)
        t->bn_tracked[i] = MAX(0, saved[i]);
  }

  for (int r = 0; r < t->replicas; r++) {
    TdmBackend *b = t->backends[r];
    tdm_backend_upload(b, t->reps[r]->params, params, n * sizeof(float));
    if (ns > 0)
      tdm_backend_upload(b, t->reps[r]->state, state, ns * sizeof(float));
    TdmOptimizer *opt = t->opts[r];
    if (opt == NULL)
      continue;
    opt->t = opt_t;
    for (int i = 0; i < opt->state_count; i++) {
      const char *name = tdm_optimizer_state_name(opt, i);
      const TdmTensor *tensor = tdm_checkpoint_find(ckpt, name);
      if (tensor == NULL || tensor->rank != 1 || tensor->shape[0] != (gint64)n) {
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                    _("%s: optimizer state “%s” is missing or has the wrong size"), path, name);
        return FALSE;
      }
      const float *values = checked_values(ckpt, tensor, (gint64)n, is_variance(name), path,
                                           error);
      if (values == NULL)
        return FALSE;
      tdm_backend_upload(b, opt->state[i], values, n * sizeof(float));
    }
  }
  for (int r = 0; r < t->replicas; r++)
    if (!tdm_backend_check(t->backends[r], error))
      return FALSE;
  watch_from_metadata(t, ckpt);
  tdm_iterator_seek(t->it, (int)epoch, (int)position);
  t->step = step;
  /* Stopping before the first step must not rewrite the file with the same state. */
  t->saved_step = step;
  return TRUE;
}

TdmConfig *
tdm_trainer_checkpoint_config(const char *path, gboolean find_dataset, TdmCheckpointPlace *place,
                              GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, error);
  if (ckpt == NULL)
    return NULL;
  const char *json = tdm_checkpoint_get_metadata(ckpt, "config");
  if (json == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("checkpoint %s: no run configuration in its metadata (not written by "
                "Tandem?)"), path);
    return NULL;
  }
  g_autoptr(GError) local = NULL;
  g_autoptr(TdmConfig) c = tdm_config_from_json(json, &local);
  if (c == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("checkpoint %s: %s"), path, local->message);
    return NULL;
  }
  /* Checked before anything is chosen over it, so a bad saved value is blamed on
   * the file and its key. */
  g_autofree char *source = g_strdup_printf("checkpoint %s", path);
  if (!tdm_config_validate_saved(c, source, error))
    return NULL;
  if (find_dataset && !tdm_checkpoint_find_dataset(ckpt, path, c, error))
    return NULL;
  if (place != NULL) {
    gint64 epoch, step;
    if (!metadata_long(ckpt, path, "epoch", 0, G_MAXINT, &epoch, error) ||
        !metadata_long(ckpt, path, "step", 0, G_MAXINT64, &step, error))
      return NULL;
    place->epoch = (int)epoch;
    place->step = (long)step;
  }
  return g_steal_pointer(&c);
}
