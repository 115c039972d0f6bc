/* SPDX-License-Identifier: GPL-3.0-or-later */
/* frame-test-util.c — see frame-test-util.h. */
#include "frame-test-util.h"

/* What wait_for_rest() counts, from the frame clock's signals. */
typedef struct {
  GtkWidget *widget;
  guint frames;    /* how many frames at rest are wanted */
  guint layouts;   /* layout passes since the last paint */
  guint still;     /* frames in a row painted with the widget mapped and no layout */
} Rest;

static void
on_layout(GdkFrameClock *clock, gpointer data)
{
  ((Rest *)data)->layouts++;
}

static void
on_after_paint(GdkFrameClock *clock, gpointer data)
{
  Rest *rest = data;

  if (rest->layouts == 0 && gtk_widget_get_mapped(rest->widget))
    rest->still++;
  else
    rest->still = 0;
  rest->layouts = 0;
  /* The next frame, and the widget drawn again in it; none after the last, since
   * queuing a draw drops the widget's drawing until the next frame. */
  if (rest->still < rest->frames)
    gtk_widget_queue_draw(rest->widget);
}

static gboolean
tick(gpointer data)
{
  return G_SOURCE_CONTINUE;
}

void
wait_for_rest(GtkWidget *widget, guint frames)
{
  /* A frame comes every few turns (a turn lasts at most the 5 ms timer below); a
   * window that never settles stops here. */
  const guint most_turns = 20000;
  Rest rest = {widget, frames, 1, 0};
  GdkFrameClock *clock = NULL;
  gulong layout_id = 0, paint_id = 0;
  /* Keeps the loop from blocking when nothing is due, at a priority below GTK's
   * redraw so that it never runs in a frame's place. */
  guint source = g_timeout_add_full(G_PRIORITY_LOW, 5, tick, NULL, NULL);
  guint turns = 0;

  g_assert_cmpuint(frames, >, 0);
  while (rest.still < frames) {
    g_assert_cmpuint(++turns, <, most_turns);
    if (clock == NULL && gtk_widget_get_mapped(widget)) {
      clock = g_object_ref(gtk_widget_get_frame_clock(widget));
      layout_id = g_signal_connect(clock, "layout", G_CALLBACK(on_layout), &rest);
      paint_id = g_signal_connect(clock, "after-paint", G_CALLBACK(on_after_paint), &rest);
      gtk_widget_queue_draw(widget);
    }
    g_main_context_iteration(NULL, TRUE);
  }
  g_signal_handler_disconnect(clock, layout_id);
  g_signal_handler_disconnect(clock, paint_id);
  g_object_unref(clock);
  g_source_remove(source);
}
