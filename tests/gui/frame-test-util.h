/* SPDX-License-Identifier: GPL-3.0-or-later */
/* frame-test-util.h — waiting for a widget to be drawn at rest, for GUI tests that
 * read what a widget drew, its size, or what its size decided (a fold, a number of
 * columns). A count of main-loop turns does not say that a frame came: on a loaded
 * machine a test's timer can be due at every turn and run ahead of GTK's frame
 * clock. These helpers count the frame clock's frames instead, and bound the wait by
 * a count of main-loop turns (never by time). For widget tests too. */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

/* Turns the main loop until `widget` is mapped and its frame clock has painted
 * `frames` frames in a row with no layout in any of them (the sizes have converged
 * and nothing is animating them), each frame redrawing `widget` (its draw is queued
 * after every paint but the last). It returns right after the last paint, with no
 * draw of `widget` queued (a queued draw drops its drawing until the next frame): a
 * GtkWidgetPaintable made of it then paints it as it is laid out. Asserts that this happens within a bound on
 * main-loop turns, so a window that never settles fails here, not in meson's
 * timeout. */
void wait_for_rest (GtkWidget *widget, guint frames);

G_END_DECLS
