/* tdm-pacer.c: spreads costly updates of the screen over time, one at a time.
 *
 * The state is a bit mask of marked slots, the time each slot was last handed out,
 * and where the round robin stands. The timeout is added by the first mark and
 * removes itself once nothing is marked, so an idle window does not wake up. A slot
 * marked again within its minimum period waits for a later tick instead of jumping
 * the queue, which keeps a chart fed at 20 Hz from taking every tick.
 */

#include "tdm-pacer.h"

struct _TdmPacer
{
  guint         interval_ms;
  gint64        min_period_us;
  TdmPacerFunc  func;
  gpointer      user_data;

  guint32       marked;
  gint64        last_us[TDM_PACER_MAX_SLOTS];
  guint         next;
  guint         source;
};

static gboolean
tdm_pacer_tick (gpointer data)
{
  TdmPacer *self = data;
  gint64 now = g_get_monotonic_time ();

  for (guint tried = 0; tried < TDM_PACER_MAX_SLOTS; tried++)
    {
      guint slot = (self->next + tried) % TDM_PACER_MAX_SLOTS;

      if (!(self->marked & (1u << slot)) || now - self->last_us[slot] < self->min_period_us)
        continue;

      /* Unmarked first: the callback may bring news for the same slot. */
      self->marked &= ~(1u << slot);
      self->last_us[slot] = now;
      self->next = (slot + 1) % TDM_PACER_MAX_SLOTS;
      self->func (slot, self->user_data);
      break;
    }

  if (self->marked != 0)
    return G_SOURCE_CONTINUE;

  self->source = 0;
  return G_SOURCE_REMOVE;
}

TdmPacer *
tdm_pacer_new (guint        interval_ms,
               guint        min_period_ms,
               TdmPacerFunc func,
               gpointer     user_data)
{
  TdmPacer *self;

  g_return_val_if_fail (interval_ms > 0, NULL);
  g_return_val_if_fail (func != NULL, NULL);

  self = g_new0 (TdmPacer, 1);
  self->interval_ms = interval_ms;
  self->min_period_us = (gint64) min_period_ms * 1000;
  self->func = func;
  self->user_data = user_data;

  return self;
}

void
tdm_pacer_free (TdmPacer *self)
{
  if (self == NULL)
    return;

  g_clear_handle_id (&self->source, g_source_remove);
  g_free (self);
}

static void
tdm_pacer_start (TdmPacer *self)
{
  GSource *source = g_timeout_source_new (self->interval_ms);

  g_source_set_callback (source, tdm_pacer_tick, self, NULL);
  g_source_set_static_name (source, "[tandem] pacer");
  self->source = g_source_attach (source, NULL);
  g_source_unref (source);
}

void
tdm_pacer_mark (TdmPacer *self,
                guint     slot)
{
  g_return_if_fail (self != NULL);
  g_return_if_fail (slot < TDM_PACER_MAX_SLOTS);

  self->marked |= 1u << slot;
  if (self->source == 0)
    tdm_pacer_start (self);
}

void
tdm_pacer_unmark (TdmPacer *self,
                  guint     slot)
{
  g_return_if_fail (self != NULL);
  g_return_if_fail (slot < TDM_PACER_MAX_SLOTS);

  self->marked &= ~(1u << slot);
}

gboolean
tdm_pacer_is_marked (TdmPacer *self,
                     guint     slot)
{
  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (slot < TDM_PACER_MAX_SLOTS, FALSE);

  return (self->marked & (1u << slot)) != 0;
}

gboolean
tdm_pacer_is_idle (TdmPacer *self)
{
  g_return_val_if_fail (self != NULL, TRUE);

  return self->marked == 0;
}
