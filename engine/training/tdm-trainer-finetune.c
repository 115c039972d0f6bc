/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-trainer-finetune.c — the trainer's part in starting from weights: the input
 * normalization every replica applies, --init's tensors over the seeded parameters
 * (and its BN statistics on every replica), frozen layers (their BN in inference
 * mode, backward stopping above them, the optimizer leaving them alone) and
 * learning-rate factors as optimizer groups. The rules are tdm-finetune.h's; loading
 * is tdm_checkpoint_read_matching()'s.
 */
#include "tdm-trainer-private.h"
#include "tdm-i18n.h"
#include "tdm-checkpoint.h"
#include "tdm-finetune.h"
#include "tdm-optimizer.h"
#include "tdm-replica.h"

#include <string.h>

/* A resumed run's weights come from its checkpoint: the file it started from is not
 * read again (it may have moved since), and nothing of it would be used. */
static gboolean
setup_init(TdmTrainer *t, GError **error)
{
  const TdmConfig *cfg = t->config;
  const TdmNetwork *net = t->net;
  /* A resumed run takes every parameter and statistic from its checkpoint: the
   * weights it started from are not read again (they may have moved since). */
  if (cfg->init_path == NULL || t->resume_path != NULL)
    return TRUE;
  g_autofree char *file = tdm_finetune_init_file(cfg->init_path, cfg->network, error);
  if (file == NULL)
    return FALSE;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(file, error);
  if (ckpt == NULL) {
    g_prefix_error(error, _("--init: "));
    return FALSE;
  }
  /* What the file lacks keeps its seeded value: start from those. */
  t->init_params = g_new(float, MAX(1, net->parameter_count));
  t->init_state = g_new(float, MAX(1, net->state_count));
  tdm_network_init_parameters(net, cfg->seed, t->init_params);
  tdm_network_init_state(net, t->init_state);
  if (!tdm_checkpoint_read_matching(ckpt, net, file, FALSE, t->init_params,
                                    t->init_state, &t->init_report, error)) {
    g_prefix_error(error, _("--init: "));
    return FALSE;
  }
  if (t->bn_tracked != NULL) {
    g_autofree gint64 *given = g_new(gint64, net->layer_count);
    tdm_checkpoint_read_tracked(ckpt, net, given);
    for (int i = 0; i < net->layer_count; i++)
      if (t->bn_tracked[i] >= 0)
        t->bn_tracked[i] = MAX(0, given[i]);
  }
  return TRUE;
}

/* Frozen BN layers run in inference mode, as PyTorch's frozen modules do, and so keep
 * their num_batches_tracked: 0 unless --init or the resumed checkpoint says more. */
static void
setup_tracked(TdmTrainer *t)
{
  const TdmNetwork *net = t->net;
  gboolean any = FALSE;
  t->bn_tracked = g_new(gint64, net->layer_count);
  for (int i = 0; i < net->layer_count; i++) {
    gboolean frozen_bn = t->frozen[i] && net->layers[i].state_count > 0;
    t->bn_tracked[i] = frozen_bn ? 0 : -1;
    any |= frozen_bn;
  }
  if (!any)
    g_clear_pointer(&t->bn_tracked, g_free);
}

gboolean
tdm_trainer_finetune_setup(TdmTrainer *t, GError **error)
{
  const TdmConfig *cfg = t->config;
  const TdmNetwork *net = t->net;
  float mean[TDM_AFFINE_MAX_CHANNELS], std[TDM_AFFINE_MAX_CHANNELS];
  if (!tdm_normalize_resolve(cfg->normalize, t->data->train, net->in_c, &t->normalize, mean,
                             std, error))
    return FALSE;
  if (t->normalize) {
    t->affine = tdm_normalize_affine(net->in_c, mean, std);
    t->normalize_text = tdm_normalize_format(net->in_c, mean, std);
  }
  t->first_trained = 0;
  if (tdm_finetune_active(cfg)) {
    t->layer_scales = g_new(float, net->layer_count);
    if (!tdm_finetune_layer_scales(net, cfg, t->layer_scales, &t->first_trained, error))
      return FALSE;
    t->frozen = g_new0(uint8_t, net->layer_count);
    for (int i = 0; i < net->layer_count; i++)
      t->frozen[i] = t->layer_scales[i] == 0.0f &&
                     (net->layers[i].param_count > 0 || net->layers[i].state_count > 0);
    setup_tracked(t);
  }
  return setup_init(t, error);
}

void
tdm_trainer_finetune_replica(TdmTrainer *t, int r)
{
  TdmReplica *rep = t->reps[r];
  rep->normalize = t->normalize;
  rep->input_affine = t->affine;
  if (t->layer_scales == NULL)
    return;
  rep->frozen = t->frozen;
  rep->backward_stop = t->first_trained;
  TdmOptimizer *opt = t->opts[r];
  if (opt == NULL)
    return;
  /* Runs of layers of one factor, frozen ones left out. */
  const TdmNetwork *net = t->net;
  g_autofree size_t *offset = g_new(size_t, net->layer_count);
  g_autofree size_t *size = g_new(size_t, net->layer_count);
  g_autofree float *scale = g_new(float, net->layer_count);
  int groups = 0;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    float s = t->layer_scales[i];
    if (l->param_count == 0 || s == 0.0f)
      continue;
    if (groups > 0 && scale[groups - 1] == s &&
        offset[groups - 1] + size[groups - 1] == l->param_offset) {
      size[groups - 1] += l->param_count;
      continue;
    }
    offset[groups] = l->param_offset;
    size[groups] = l->param_count;
    scale[groups] = s;
    groups++;
  }
  tdm_optimizer_set_groups(opt, groups, offset, size, scale);
}

void
tdm_trainer_finetune_parameters(TdmTrainer *t, float *params)
{
  const TdmNetwork *net = t->net;
  if (t->init_params == NULL)
    return;
  memcpy(params, t->init_params, net->parameter_count * sizeof(float));
  if (net->state_count == 0)
    return;
  /* BN statistics are state on every replica, not parameters that are broadcast. */
  for (int r = 0; r < t->replicas; r++) {
    TdmBackend *b = t->backends[r];
    b->ops->upload(b, t->reps[r]->state, t->init_state, net->state_count * sizeof(float));
    b->ops->synchronize(b);
  }
}

void
tdm_trainer_finetune_teardown(TdmTrainer *t)
{
  g_clear_pointer(&t->normalize_text, g_free);
  g_clear_pointer(&t->init_params, g_free);
  g_clear_pointer(&t->init_state, g_free);
  g_clear_pointer(&t->init_report, g_free);
  g_clear_pointer(&t->layer_scales, g_free);
  g_clear_pointer(&t->frozen, g_free);
  g_clear_pointer(&t->bn_tracked, g_free);
  t->normalize = FALSE;
  t->first_trained = 0;
}
