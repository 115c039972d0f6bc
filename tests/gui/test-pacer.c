/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-pacer.c: TdmPacer hands out one marked slot per tick, round robin, none of
 * them more often than its minimum period, and goes quiet once nothing is marked.
 * Plain GLib main loop: no window is made. Rates are checked on an injected clock
 * that moves on by a fixed amount at every reading, never on wall-clock time.
 */

#include <glib.h>

#include "tdm-pacer.h"

#define CLOCK_STEP_US (10 * 1000)

typedef struct {
  TdmPacer *pacer;
  gint64 now_us;            /* the injected clock's last reading */
  guint calls[TDM_PACER_MAX_SLOTS];
  guint total;
  gint64 last_us[TDM_PACER_MAX_SLOTS];
  gint64 shortest_gap_us;   /* between two calls for one slot */
  gint64 last_call_us;
  gint64 shortest_tick_us;  /* between two calls for any slots */
  gboolean remark;          /* mark the slot again from its callback */
} Counter;

static gint64
read_clock(gpointer data)
{
  Counter *c = data;

  c->now_us += CLOCK_STEP_US;
  return c->now_us;
}

static void
on_slot(guint slot, gpointer data)
{
  Counter *c = data;
  gint64 now = c->now_us;   /* the reading the tick was made at */

  if (c->calls[slot] > 0)
    c->shortest_gap_us = MIN(c->shortest_gap_us, now - c->last_us[slot]);
  if (c->last_call_us != 0)
    c->shortest_tick_us = MIN(c->shortest_tick_us, now - c->last_call_us);
  c->calls[slot]++;
  c->total++;
  c->last_us[slot] = now;
  c->last_call_us = now;
  if (c->remark)
    tdm_pacer_mark(c->pacer, slot);
}

/* Turns the main loop until the condition holds. The bound only keeps a broken
 * pacer from hanging the test; nothing is asserted on time. */
static gboolean
iterate_until(gboolean (*cond)(Counter *), Counter *c)
{
  gint64 give_up = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;

  while (!cond(c) && g_get_monotonic_time() < give_up)
    g_main_context_iteration(NULL, TRUE);
  return cond(c);
}

static gboolean
thirty_calls(Counter *c)
{
  return c->total >= 30;
}

static gboolean
pacer_idle(Counter *c)
{
  return tdm_pacer_is_idle(c->pacer);
}

static void
test_pacer_rate(void)
{
  Counter c = {.shortest_gap_us = G_MAXINT64, .shortest_tick_us = G_MAXINT64, .remark = TRUE};

  /* Three slots with news all the time: ticks every 10 ms, each slot every 50 ms. */
  c.pacer = tdm_pacer_new(10, 50, on_slot, &c);
  tdm_pacer_set_clock(c.pacer, read_clock, &c);
  for (guint slot = 0; slot < 3; slot++)
    tdm_pacer_mark(c.pacer, slot);
  g_assert_true(iterate_until(thirty_calls, &c));
  g_clear_pointer(&c.pacer, tdm_pacer_free);

  /* Round robin: the three share the calls evenly. */
  for (guint slot = 0; slot < 3; slot++) {
    g_test_message("slot %u: %u calls", slot, c.calls[slot]);
    g_assert_cmpuint(c.calls[slot], >=, 9);
    g_assert_cmpuint(c.calls[slot], <=, 11);
  }
  /* No slot within its minimum period, and one slot per tick, never two in one go. */
  g_assert_cmpint(c.shortest_gap_us, >=, 50 * 1000);
  g_assert_cmpint(c.shortest_tick_us, >=, CLOCK_STEP_US);
}

static void
test_pacer_idle(void)
{
  Counter c = {.shortest_gap_us = G_MAXINT64, .shortest_tick_us = G_MAXINT64};

  c.pacer = tdm_pacer_new(5, 0, on_slot, &c);
  g_assert_true(tdm_pacer_is_idle(c.pacer));

  /* Marks before a tick come as one call; an unmarked slot gets none. */
  tdm_pacer_mark(c.pacer, 2);
  tdm_pacer_mark(c.pacer, 2);
  tdm_pacer_mark(c.pacer, 7);
  tdm_pacer_unmark(c.pacer, 7);
  g_assert_true(tdm_pacer_is_marked(c.pacer, 2));
  g_assert_false(tdm_pacer_is_marked(c.pacer, 7));
  g_assert_false(tdm_pacer_is_idle(c.pacer));
  g_assert_true(iterate_until(pacer_idle, &c));
  g_assert_cmpuint(c.calls[2], ==, 1);
  g_assert_cmpuint(c.calls[7], ==, 0);

  /* Nothing marked: no timeout left behind to wake the loop. */
  g_assert_false(g_main_context_pending(NULL));

  tdm_pacer_mark(c.pacer, 31);
  g_assert_true(iterate_until(pacer_idle, &c));
  g_assert_cmpuint(c.calls[31], ==, 1);
  g_assert_cmpuint(c.total, ==, 2);

  /* Freed while marked: its timeout goes with it. */
  tdm_pacer_mark(c.pacer, 0);
  g_clear_pointer(&c.pacer, tdm_pacer_free);
  g_assert_false(g_main_context_pending(NULL));
  g_assert_cmpuint(c.calls[0], ==, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);

  g_test_add_func("/pacer/rate", test_pacer_rate);
  g_test_add_func("/pacer/idle", test_pacer_idle);

  return g_test_run();
}
