/* test-pacer.c: TdmPacer hands out one marked slot per tick, round robin, none of
 * them more often than its minimum period, and goes quiet once nothing is marked.
 * Plain GLib main loop: no window is made.
 */

#include <glib.h>

#include "tdm-pacer.h"

typedef struct {
  TdmPacer *pacer;
  guint calls[TDM_PACER_MAX_SLOTS];
  gint64 last_us[TDM_PACER_MAX_SLOTS];
  gint64 shortest_gap_us;   /* between two calls for one slot */
  gint64 last_call_us;
  gint64 shortest_tick_us;  /* between two calls for any slots */
  gboolean remark;          /* mark the slot again from its callback */
} Counter;

static void
on_slot(guint slot, gpointer data)
{
  Counter *c = data;
  gint64 now = g_get_monotonic_time();

  if (c->calls[slot] > 0)
    c->shortest_gap_us = MIN(c->shortest_gap_us, now - c->last_us[slot]);
  if (c->last_call_us != 0)
    c->shortest_tick_us = MIN(c->shortest_tick_us, now - c->last_call_us);
  c->calls[slot]++;
  c->last_us[slot] = now;
  c->last_call_us = now;
  if (c->remark)
    tdm_pacer_mark(c->pacer, slot);
}

static gboolean
quit_loop(gpointer data)
{
  g_main_loop_quit(data);
  return G_SOURCE_REMOVE;
}

static void
run_for(guint ms)
{
  g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);

  g_timeout_add(ms, quit_loop, loop);
  g_main_loop_run(loop);
}

static void
test_pacer_rate(void)
{
  Counter c = {.shortest_gap_us = G_MAXINT64, .shortest_tick_us = G_MAXINT64, .remark = TRUE};

  /* Three slots with news all the time: ticks every 10 ms, each slot every 50 ms. */
  c.pacer = tdm_pacer_new(10, 50, on_slot, &c);
  for (guint slot = 0; slot < 3; slot++)
    tdm_pacer_mark(c.pacer, slot);
  run_for(400);
  g_clear_pointer(&c.pacer, tdm_pacer_free);

  for (guint slot = 0; slot < 3; slot++) {
    g_test_message("slot %u: %u calls", slot, c.calls[slot]);
    g_assert_cmpuint(c.calls[slot], >=, 3);
    g_assert_cmpuint(c.calls[slot], <=, 400 / 50 + 1);
  }
  g_assert_cmpint(c.shortest_gap_us, >=, 50 * 1000);
  /* One slot per tick, never two in one go. */
  g_assert_cmpint(c.shortest_tick_us, >=, 5 * 1000);
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
  run_for(50);
  g_assert_cmpuint(c.calls[2], ==, 1);
  g_assert_cmpuint(c.calls[7], ==, 0);
  g_assert_true(tdm_pacer_is_idle(c.pacer));

  /* Nothing marked: no timeout left behind to wake the loop. */
  g_assert_false(g_main_context_pending(NULL));

  tdm_pacer_mark(c.pacer, 31);
  run_for(50);
  g_assert_cmpuint(c.calls[31], ==, 1);

  /* Freed while marked: its timeout goes with it. */
  tdm_pacer_mark(c.pacer, 0);
  g_clear_pointer(&c.pacer, tdm_pacer_free);
  run_for(30);
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
