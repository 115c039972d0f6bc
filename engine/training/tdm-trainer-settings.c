/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-trainer-settings.c — what a caller hands a trainer and reads back from it around
 * a run beside its options (tdm-trainer-options.c): the clock, the checkpoint to
 * resume, pause, pace and single steps, a lent dataset; the parameters and statistics
 * after a run. The loop that obeys them is tdm-trainer.c.
 */
#include "tdm-trainer-private.h"

void
tdm_trainer_set_clock(TdmTrainer *t, TdmClockFunc clock, gpointer user_data)
{
  g_return_if_fail(t != NULL);
  t->clock = (TdmClock){clock, user_data};
}

void
tdm_trainer_set_span_clock(TdmTrainer *t, TdmClockFunc clock, gpointer user_data)
{
  g_return_if_fail(t != NULL);
  t->span_clock = (TdmClock){clock, user_data};
}

void
tdm_trainer_set_resume_path(TdmTrainer *t, const char *path)
{
  g_free(t->resume_path);
  t->resume_path = g_strdup(path);
}

void
tdm_trainer_set_paused(TdmTrainer *t, gboolean paused)
{
  g_mutex_lock(&t->pause_lock);
  t->paused = paused;
  g_cond_broadcast(&t->pause_cond);
  g_mutex_unlock(&t->pause_lock);
}

gboolean
tdm_trainer_get_paused(TdmTrainer *t)
{
  g_mutex_lock(&t->pause_lock);
  gboolean paused = t->paused;
  g_mutex_unlock(&t->pause_lock);
  return paused;
}

const float *
tdm_trainer_get_parameters(TdmTrainer *t, size_t *count)
{
  if (count != NULL)
    *count = t->host_params_count;
  return t->host_params;
}

const float *
tdm_trainer_get_bn_state(TdmTrainer *t, int replica, size_t *count)
{
  if (count != NULL)
    *count = t->host_state_count;
  if (t->host_states == NULL || replica < 0 || (guint)replica >= t->host_states->len)
    return NULL;
  return g_ptr_array_index(t->host_states, replica);
}

void
tdm_trainer_set_dataset(TdmTrainer *t, const TdmDatasetPair *data)
{
  g_return_if_fail(t != NULL && data != NULL && data->train != NULL && data->test != NULL);
  t->borrowed_data = data;
}

void
tdm_trainer_set_pace(TdmTrainer *t, double steps_per_second)
{
  g_return_if_fail(t != NULL);
  g_mutex_lock(&t->pause_lock);
  t->pace = steps_per_second > 0 ? CLAMP(steps_per_second, TDM_PACE_MIN, TDM_PACE_MAX) : 0.0;
  g_cond_broadcast(&t->pause_cond);
  g_mutex_unlock(&t->pause_lock);
}

double
tdm_trainer_get_pace(TdmTrainer *t)
{
  g_mutex_lock(&t->pause_lock);
  double pace = t->pace;
  g_mutex_unlock(&t->pause_lock);
  return pace;
}

void
tdm_trainer_single_step(TdmTrainer *t)
{
  g_return_if_fail(t != NULL);
  g_mutex_lock(&t->pause_lock);
  if (t->paused)
    t->single_steps++;
  g_cond_broadcast(&t->pause_cond);
  g_mutex_unlock(&t->pause_lock);
}
