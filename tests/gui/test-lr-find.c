/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-lr-find.c — the window's learning-rate range test: the view plots every point
 * of the runner it is handed, names the engine's suggestion and hands it on with
 * "Use This Rate"; a stopped test keeps its points; the window's action takes the
 * form's choices, starts the test with its own runner and the rate taken becomes the
 * form's setting; the test is kept in the window's run history and the History page
 * lists it as an experiment, marked, whose row opens its curve again. Under Xvfb; no
 * assertion depends on how long anything takes. */
#include <adwaita.h>
#include <math.h>
#include <string.h>

#include "tdm-chart.h"
#include "tdm-dataset-chooser.h"
#include "tdm-experiment-runner.h"
#include "tdm-history-store.h"
#include "tdm-history-view.h"
#include "tdm-lr-find-view.h"
#include "tdm-spec-entry.h"
#include "window-test-util.h"

static void
on_use_rate (TdmLrFindView *view, double rate, double *taken)
{
  *taken = rate;
}

/* The view's parts as a person meets them: the first widget under `widget` (itself
 * included) of `type`, and with a button's `label` when one is given. */
static GtkWidget *
part (GtkWidget *widget, GType type, const char *label)
{
  if (G_TYPE_CHECK_INSTANCE_TYPE (widget, type) &&
      (label == NULL || g_strcmp0 (gtk_button_get_label (GTK_BUTTON (widget)), label) == 0))
    return widget;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    {
      GtkWidget *found = part (c, type, label);

      if (found != NULL)
        return found;
    }
  return NULL;
}

static GtkWidget *
stop_button (TdmLrFindView *view)
{
  GtkWidget *button = part (GTK_WIDGET (view), GTK_TYPE_BUTTON, "_Stop");

  g_assert_nonnull (button);
  return button;
}

static GtkWidget *
use_button (TdmLrFindView *view)
{
  GtkWidget *button = part (GTK_WIDGET (view), GTK_TYPE_BUTTON, "_Use This Rate");

  g_assert_nonnull (button);
  return button;
}

/* The status line under the chart. */
static const char *
status (TdmLrFindView *view)
{
  GtkWidget *label = part (GTK_WIDGET (view), GTK_TYPE_LABEL, NULL);

  g_assert_nonnull (label);
  return gtk_label_get_text (GTK_LABEL (label));
}

/* The points on the chart: its loss series, one point a step. */
static guint
points_drawn (TdmLrFindView *view)
{
  GtkWidget *chart = part (GTK_WIDGET (view), TDM_TYPE_CHART, NULL);

  g_assert_nonnull (chart);
  return (guint) tdm_series_get_n_appended (tdm_chart_get_series (TDM_CHART (chart), 0));
}

/* Whether a test runs: it can be stopped. */
static gboolean
running (TdmLrFindView *view)
{
  return gtk_widget_get_sensitive (stop_button (view));
}

static gboolean
finished (gpointer view)
{
  return !running (view);
}

static gboolean
has_points (gpointer view)
{
  return points_drawn (view) >= 3;
}

/* The suggestion as the view hands it on, its "Use This Rate" pressed; the button
 * is there only for a suggestion, which the status line names. */
static double
use_suggestion (TdmLrFindView *view)
{
  double taken = NAN;
  gulong handler = g_signal_connect (view, "use-rate", G_CALLBACK (on_use_rate), &taken);
  g_autofree char *named = NULL;

  g_assert_true (gtk_widget_get_sensitive (use_button (view)));
  g_signal_emit_by_name (use_button (view), "clicked");
  g_signal_handler_disconnect (view, handler);
  g_assert_true (isfinite (taken));
  named = g_strdup_printf ("Suggested learning rate: %.3g,", taken);
  g_assert_nonnull (strstr (status (view), named));
  return taken;
}

static TdmConfig *
small_config (void)
{
  TdmConfig *c = tdm_config_new ();
  g_free (c->dataset);
  c->dataset = g_strdup ("synthetic");
  g_free (c->network);
  c->network = g_strdup ("fc32,relu,fc10");
  /* Momentum SGD learns this set within a hundred steps of the default range. */
  c->batch = 128;
  c->optimizer = TDM_OPTIMIZER_MOMENTUM;
  return c;
}

/* What the window does for a test (tdm-window-experiments.c) but the history: the
 * engine's test of `config` with a runner of its own, started, handed to `view`. */
static TdmExperimentRunner *
start_test (TdmLrFindView   *view,
            const TdmConfig *config)
{
  g_autoptr(GError) error = NULL;
  TdmExperiment *experiment = tdm_experiment_new_lr_find (config, NULL, &error);
  TdmExperimentRunner *runner;

  g_assert_no_error (error);
  runner = tdm_experiment_runner_new (experiment);
  g_assert_true (tdm_experiment_runner_start (runner, &error));
  g_assert_no_error (error);
  tdm_lr_find_view_show_runner (view, runner);
  return runner;
}

static void
test_view (void)
{
  g_autoptr(TdmConfig) config = small_config ();
  TdmLrFindView *view;
  GtkWindow *window = tdm_lr_find_view_window_new (NULL, &view);
  g_autoptr(TdmExperimentRunner) runner = NULL;
  g_autoptr(TdmExperimentRunner) replaced = NULL;

  gtk_window_present (window);
  runner = start_test (view, config);
  g_assert_true (running (view));
  g_assert_false (gtk_widget_get_sensitive (use_button (view)));
  g_assert_true (wait_for (finished, view, 300));
  g_assert_cmpuint (points_drawn (view), >=, 10);
  /* The button hands the engine's suggestion on, the one the status line names. */
  g_assert_cmpfloat (use_suggestion (view), ==,
                     tdm_experiment_get_lr_suggestion (tdm_experiment_runner_get_experiment (runner)));

  /* Stopped after a few points (its Stop button): they stay, the test ends. */
  g_clear_object (&runner);
  runner = start_test (view, config);
  g_assert_true (wait_for (has_points, view, 300));
  g_signal_emit_by_name (stop_button (view), "clicked");
  g_assert_true (wait_for (finished, view, 300));
  g_assert_cmpuint (points_drawn (view), >=, 3);

  /* Replaced while it runs: the first test's points and end are dropped, the second
   * runs to its suggestion, and nothing of the first is left behind (the sanitizer
   * pass's leak check: the view held the first test's cancellable for ever). Its
   * owner stops the first. */
  g_clear_object (&runner);
  replaced = start_test (view, config);
  g_assert_true (wait_for (has_points, view, 300));
  runner = start_test (view, config);
  tdm_experiment_runner_stop (replaced);
  g_clear_object (&replaced);
  g_assert_cmpuint (points_drawn (view), ==, 0);
  g_assert_true (running (view));
  g_assert_true (wait_for (finished, view, 300));
  use_suggestion (view);
  gtk_window_destroy (window);
  g_clear_object (&runner);
  drain ();
}

/* The open windows whose child is a TdmLrFindView, the newest last. */
static TdmLrFindView *
newest_lr_find_view (void)
{
  GListModel *toplevels = gtk_window_get_toplevels ();
  TdmLrFindView *view = NULL;

  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr (GtkWindow) w = g_list_model_get_item (toplevels, i);
      GtkWidget *child = gtk_window_get_child (w);

      if (child != NULL && TDM_IS_LR_FIND_VIEW (child))
        view = TDM_LR_FIND_VIEW (child);
    }
  return view;
}

/* The learning-rate tests the History page lists, but those in `known` (may be
 * NULL): a new reference, or NULL when there is none; how many there are in `n`. */
static TdmRunItem *
lr_find_listed (TdmHistoryStore *store,
                GHashTable      *known,
                guint           *n)
{
  TdmRunItem *found = NULL;

  *n = 0;
  for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (store)); i++)
    {
      g_autoptr (TdmRunItem) item = g_list_model_get_item (G_LIST_MODEL (store), i);

      if (!tdm_run_item_is_lr_find (item) ||
          (known != NULL && g_hash_table_contains (known, tdm_run_item_get_id (item))))
        continue;
      (*n)++;
      g_clear_object (&found);
      found = g_steal_pointer (&item);
    }
  return found;
}

/* The ids of every record the History page lists now, once it has read the history. */
static GHashTable *
listed_ids (TdmHistoryStore *store)
{
  GHashTable *ids = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  g_assert_true (wait_for (not_loading, store, 30));
  for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (store)); i++)
    {
      g_autoptr (TdmRunItem) item = g_list_model_get_item (G_LIST_MODEL (store), i);

      g_hash_table_add (ids, g_strdup (tdm_run_item_get_id (item)));
    }
  return ids;
}

static guint
lr_finds_listed (TdmHistoryStore *store)
{
  guint n;
  g_autoptr (TdmRunItem) item = lr_find_listed (store, NULL, &n);

  return n;
}

/* What lr_finds_listed() waits for. */
static guint lr_finds_wanted;

static gboolean
lr_finds_listed_as_wanted (gpointer store)
{
  return lr_finds_listed (store) == lr_finds_wanted;
}

static gboolean
rate_set (gpointer settings)
{
  return fabs (g_settings_get_double (settings, "learning-rate") - 0.00123) < 1e-12;
}

static void
test_window_action (void)
{
  reset_settings ();
  TdmWindow *window = tdm_window_new (NULL);
  g_autoptr(GSettings) settings = g_settings_new ("io.github.tandem.Tandem");

  gtk_window_present (GTK_WINDOW (window));
  tdm_dataset_chooser_set_source (window_child (window, "dataset_chooser"), "synthetic");
  adw_combo_row_set_selected (window_child (window, "network_dropdown"), window_custom_network ());
  tdm_spec_entry_set_text (window_child (window, "spec_entry"), "fc16,relu,fc10");
  g_assert_true (wait_for (can_start, window, 60));
  g_autoptr (GHashTable) before = listed_ids (tdm_window_get_history (window));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.lr-find", NULL));
  /* The test's window is the newest toplevel; taking a rate closes it and sets the
   * form's setting. */
  TdmLrFindView *view = newest_lr_find_view ();
  g_assert_nonnull (view);
  g_assert_true (wait_for (has_points, view, 300));
  g_signal_emit_by_name (stop_button (view), "clicked");
  g_assert_true (wait_for (finished, view, 300));
  guint n_points = points_drawn (view);
  g_assert_cmpuint (n_points, >=, 3);
  /* Stopped, it is kept with its points, and the History page lists it. */
  g_assert_nonnull (strstr (status (view), "stopped"));
  guint listed = 0;
  g_autoptr (TdmRunItem) item = lr_find_listed (tdm_window_get_history (window), before,
                                                &listed);
  g_assert_cmpuint (listed, ==, 1);
  g_assert_nonnull (item);
  g_assert_true (tdm_run_item_is_experiment (item));
  g_assert_true (tdm_run_item_is_lr_find (item));
  g_assert_cmpuint (tdm_run_item_get_record (item)->experiment.lr_points->len, ==, n_points);
  {
    g_autofree char *what = tdm_run_item_describe (item);

    g_assert_true (g_str_has_prefix (what, "learning-rate test · cpu"));
    g_assert_nonnull (strstr (what, "stopped"));
  }
  GtkWidget *history_view = tdm_window_get_history_view (window);
  GtkWidget *row = history_row (history_view, item);
  g_assert_nonnull (row);
  g_assert_true (gtk_widget_has_css_class (row, "lr-find"));
  g_signal_emit_by_name (view, "use-rate", 0.00123);
  g_assert_true (wait_for (rate_set, settings, 10));
  drain ();
  g_assert_null (newest_lr_find_view ());

  /* Its row opens its curve again, as the test left it. */
  g_assert_true (gtk_widget_activate_action (row, "run.open", NULL));
  drain ();
  TdmLrFindView *kept = newest_lr_find_view ();
  g_assert_nonnull (kept);
  g_assert_false (running (kept));
  g_assert_cmpuint (points_drawn (kept), ==, n_points);
  g_assert_nonnull (strstr (status (kept), "stopped"));
  gtk_window_destroy (GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (kept))));

  /* A test's window closed while it runs: the window that started it stops it, and
   * lists it on the History page with what it measured. */
  {
    TdmHistoryStore *store = tdm_window_get_history (window);
    g_autoptr (GHashTable) known = listed_ids (store);
    g_autoptr (TdmRunItem) closed = NULL;
    guint n;

    lr_finds_wanted = lr_finds_listed (store) + 1;
    g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.lr-find", NULL));
    view = newest_lr_find_view ();
    g_assert_nonnull (view);
    g_assert_true (wait_for (has_points, view, 300));
    gtk_window_destroy (GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (view))));
    drain ();
    g_assert_null (newest_lr_find_view ());
    g_assert_true (wait_for (lr_finds_listed_as_wanted, store, 300));
    closed = lr_find_listed (store, known, &n);
    g_assert_cmpuint (n, ==, 1);
    g_assert_cmpuint (tdm_run_item_get_record (closed)->experiment.lr_points->len, >=, 3);
    g_assert_true (tdm_run_item_get_record (closed)->finished);
    g_assert_true (tdm_run_item_get_record (closed)->final.stopped);
    g_assert_true (tdm_history_delete (tdm_history_store_get_history (store),
                                       tdm_run_item_get_id (closed), NULL));
  }
  gtk_window_destroy (GTK_WINDOW (window));
  drain ();
}

int
main (int argc, char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  g_test_add_func ("/lr-find/view", test_view);
  g_test_add_func ("/lr-find/window-action", test_window_action);
  return g_test_run ();
}
