/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-pacer.c: spreads costly updates of the screen over time, one at a time.
 *
 * The state is a bit mask of marked slots, the time each slot was last handed out,
 * and where the round robin stands. The timeout is one-shot: the first mark adds it,
 * and each tick adds the next for when the earliest marked slot is due (at least
 * `interval_ms` on), so an idle window does not wake up, and one whose slots all wait
 * out their minimum period sleeps until the first may go instead of ticking through
 * it: on a machine whose every core trains, each wake-up takes a core from training.
 * A slot marked again within its minimum period waits for a later tick instead of
 * jumping the queue, which keeps a chart fed at 20 Hz from taking every tick.
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
  gint64        source_due_us;  /* when the source fires */

  TdmPacerClock clock;
  gpointer      clock_data;
};

static gint64
tdm_pacer_now (TdmPacer *self)
{
  return self->clock != NULL ? self->clock (self->clock_data) : g_get_monotonic_time ();
}

static void tdm_pacer_schedule (TdmPacer *self,
                                gint64    now);

static gboolean
tdm_pacer_tick (gpointer data)
{
  TdmPacer *self = data;
  gint64 now = tdm_pacer_now (self);

  self->source = 0;

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

  if (self->marked != 0 && self->source == 0)
    tdm_pacer_schedule (self, now);

  return G_SOURCE_REMOVE;
}

/* When the earliest marked slot may go: not before one interval from now. */
static gint64
tdm_pacer_next_due (TdmPacer *self,
                    gint64    now)
{
  gint64 due = G_MAXINT64;

  for (guint slot = 0; slot < TDM_PACER_MAX_SLOTS; slot++)
    if (self->marked & (1u << slot))
      due = MIN (due, self->last_us[slot] + self->min_period_us);

  return MAX (due, now + (gint64) self->interval_ms * 1000);
}

static void
tdm_pacer_schedule (TdmPacer *self,
                    gint64    now)
{
  gint64 due = tdm_pacer_next_due (self, now);
  GSource *source;

  g_clear_handle_id (&self->source, g_source_remove);
  /* Rounded up: a tick that comes early finds nothing due and sleeps again. */
  source = g_timeout_source_new ((guint) ((due - now + 999) / 1000));
  g_source_set_callback (source, tdm_pacer_tick, self, NULL);
  g_source_set_static_name (source, "[tandem] pacer");
  self->source = g_source_attach (source, NULL);
  self->source_due_us = due;
  g_source_unref (source);
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

void
tdm_pacer_set_clock (TdmPacer     *self,
                     TdmPacerClock clock,
                     gpointer      user_data)
{
  g_return_if_fail (self != NULL);

  self->clock = clock;
  self->clock_data = user_data;
}

void
tdm_pacer_mark (TdmPacer *self,
                guint     slot)
{
  gint64 now;

  g_return_if_fail (self != NULL);
  g_return_if_fail (slot < TDM_PACER_MAX_SLOTS);

  if (self->marked & (1u << slot))
    return;

  self->marked |= 1u << slot;
  now = tdm_pacer_now (self);
  /* A slot due before the tick that waits for others gets an earlier one. */
  if (self->source == 0 || tdm_pacer_next_due (self, now) < self->source_due_us)
    tdm_pacer_schedule (self, now);
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
