/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-session.c: TdmSession, the live run's model, driven without a display.
 *
 * Links GLib, the session library and the engine only (no GTK): events go in, and
 * the points of named series, the per-device state, the status text, the metrics
 * log and the export info that come out are checked against the events' numbers.
 */

#include <math.h>
#include <string.h>

#include "tdm-session.h"

typedef struct
{
  GArray *points;        /* of TdmSessionPoint */
  guint   started;
  guint   status_at_once, status_paced;
  guint   events;
} Recorder;

static void
on_point (TdmSession *session, const TdmSessionPoint *p, Recorder *rec)
{
  g_array_append_val (rec->points, *p);
}

static void
on_started (TdmSession *session, Recorder *rec)
{
  rec->started++;
}

static void
on_status (TdmSession *session, gboolean at_once, Recorder *rec)
{
  if (at_once)
    rec->status_at_once++;
  else
    rec->status_paced++;
}

static void
on_event (TdmSession *session, const TdmEvent *event, Recorder *rec)
{
  rec->events++;
}

/* What a foreach gives, for the tests to read. */
typedef struct
{
  guint  n;
  double x[8], loss[8], accuracy[8];
} Collected;

static void
collect (double x, double loss, double accuracy, gboolean test, gpointer user_data)
{
  Collected *c = user_data;

  g_assert_cmpuint (c->n, <, G_N_ELEMENTS (c->x));
  c->x[c->n] = x;
  c->loss[c->n] = loss;
  c->accuracy[c->n] = accuracy;
  c->n++;
}

static void
record_point (const TdmSessionPoint *p, gpointer user_data)
{
  g_array_append_val (((Recorder *) user_data)->points, *p);
}

static TdmSession *
session_new (Recorder *rec)
{
  TdmSession *session = tdm_session_new ();

  memset (rec, 0, sizeof *rec);
  rec->points = g_array_new (FALSE, FALSE, sizeof (TdmSessionPoint));
  g_signal_connect (session, "point", G_CALLBACK (on_point), rec);
  g_signal_connect (session, "started", G_CALLBACK (on_started), rec);
  g_signal_connect (session, "status-changed", G_CALLBACK (on_status), rec);
  g_signal_connect (session, "event", G_CALLBACK (on_event), rec);
  return session;
}

static void
session_free (TdmSession *session, Recorder *rec)
{
  tdm_session_end (session);
  g_assert_finalize_object (session);
  g_array_unref (rec->points);
}

/* The points of one series (and replica, −1 for any) in the order they came. */
static GArray *
points_of (Recorder *rec, TdmSessionSeries series, int replica)
{
  GArray *out = g_array_new (FALSE, FALSE, sizeof (TdmSessionPoint));

  for (guint i = 0; i < rec->points->len; i++)
    {
      TdmSessionPoint *p = &g_array_index (rec->points, TdmSessionPoint, i);

      if (p->series == series && (replica < 0 || p->replica == replica))
        g_array_append_val (out, *p);
    }
  return out;
}

static void
send_started (TdmSession *session, const char *const *devices, int main_replica)
{
  TdmEvent e = { .kind = TDM_EVENT_STARTED };

  TdmDeviceId ids[TDM_MAX_REPLICAS];
  int n = 0;

  for (; devices[n] != NULL; n++)
    g_assert_true (tdm_device_id_parse (devices[n], &ids[n]));
  tdm_started_event_set_devices (&e.started, ids, n);
  e.started.main_replica = main_replica;
  e.started.batch = 128;
  e.started.epochs = 3;
  e.started.steps_per_epoch = 40;
  e.started.total_steps = 120;
  tdm_session_handle_event (session, &e);
}

static void
send_step (TdmSession *session, long step, double loss, double accuracy)
{
  TdmEvent e = { .kind = TDM_EVENT_STEP };

  e.step.step = step;
  e.step.epoch = (int) (step / 40);
  e.step.epoch_float = step / 40.0;
  e.step.fraction = step / 120.0;
  e.step.train_loss = loss;
  e.step.train_accuracy = accuracy;
  e.step.samples_per_second = 1000.0 + step;
  e.step.elapsed = step * 0.5;
  e.step.eta = (120 - step) * 0.5;
  tdm_session_handle_event (session, &e);
}

static void
test_before_started (void)
{
  Recorder rec;
  TdmSession *session = session_new (&rec);
  double fraction = -1;

  send_step (session, 5, 1.0, 0.5);
  g_assert_cmpuint (rec.points->len, ==, 0);
  g_assert_cmpuint (rec.events, ==, 0);
  g_assert_null (tdm_session_get_started (session));
  g_assert_cmpint (tdm_session_get_n_replicas (session), ==, 0);
  g_assert_cmpuint (tdm_metrics_log_get_n_rows (tdm_session_get_log (session)), ==, 0);
  g_assert_null (tdm_session_dup_status (session, &fraction));
  g_assert_cmpfloat (fraction, ==, 0);

  session_free (session, &rec);
}

static void
test_training_points (void)
{
  static const char *const devices[] = { "cpu", "cpu", NULL };
  Recorder rec;
  TdmSession *session = session_new (&rec);
  g_autoptr(GArray) loss = NULL;
  g_autoptr(GArray) accuracy = NULL;
  g_autoptr(GArray) throughput = NULL;
  g_autoptr(GArray) test_loss = NULL;
  g_autoptr(GArray) test_accuracy = NULL;
  TdmEvent epoch = { .kind = TDM_EVENT_EPOCH };
  Collected c = { 0 };

  send_started (session, devices, 0);
  g_assert_cmpuint (rec.started, ==, 1);
  g_assert_cmpint (tdm_session_get_n_replicas (session), ==, 2);
  send_step (session, 10, 2.0, 0.25);
  send_step (session, 20, 1.5, 0.5);
  g_assert_cmpuint (rec.status_paced, ==, 2);

  epoch.epoch.epoch = 1;
  epoch.epoch.step = 40;
  epoch.epoch.test_loss = 1.25;
  epoch.epoch.test_accuracy = 0.625;
  epoch.epoch.elapsed = 20;
  tdm_session_handle_event (session, &epoch);

  loss = points_of (&rec, TDM_SESSION_LOSS_TRAIN, -1);
  accuracy = points_of (&rec, TDM_SESSION_ACCURACY_TRAIN, -1);
  throughput = points_of (&rec, TDM_SESSION_THROUGHPUT, -1);
  test_loss = points_of (&rec, TDM_SESSION_LOSS_TEST, -1);
  test_accuracy = points_of (&rec, TDM_SESSION_ACCURACY_TEST, -1);
  g_assert_cmpuint (loss->len, ==, 2);
  g_assert_cmpuint (accuracy->len, ==, 2);
  g_assert_cmpuint (throughput->len, ==, 2);
  g_assert_cmpuint (test_loss->len, ==, 1);
  g_assert_cmpuint (test_accuracy->len, ==, 1);

  /* Against epochs by default: steps 10 and 20 of 40 a epoch. */
  g_assert_cmpfloat (g_array_index (loss, TdmSessionPoint, 0).x, ==, 0.25);
  g_assert_cmpfloat (g_array_index (loss, TdmSessionPoint, 1).y, ==, 1.5);
  g_assert_cmpint (g_array_index (loss, TdmSessionPoint, 0).replica, ==, -1);
  g_assert_cmpfloat (g_array_index (accuracy, TdmSessionPoint, 1).x, ==, 0.5);
  g_assert_cmpfloat (g_array_index (accuracy, TdmSessionPoint, 1).y, ==, 50.0);
  /* Throughput is the engine's figure against training time. */
  g_assert_cmpfloat (g_array_index (throughput, TdmSessionPoint, 1).x, ==, 10.0);
  g_assert_cmpfloat (g_array_index (throughput, TdmSessionPoint, 1).y, ==, 1020.0);
  g_assert_cmpfloat (g_array_index (test_loss, TdmSessionPoint, 0).x, ==, 1.0);
  g_assert_cmpfloat (g_array_index (test_loss, TdmSessionPoint, 0).y, ==, 1.25);
  g_assert_cmpfloat (g_array_index (test_accuracy, TdmSessionPoint, 0).y, ==, 62.5);

  /* The same points again, against steps. */
  tdm_session_set_x_axis (session, TDM_SESSION_X_STEP);
  tdm_session_foreach_live_point (session, collect, &c);
  g_assert_cmpuint (c.n, ==, 3);
  g_assert_cmpfloat (c.x[0], ==, 10);
  g_assert_cmpfloat (c.x[1], ==, 20);
  g_assert_cmpfloat (c.x[2], ==, 40);
  g_assert_cmpfloat (c.loss[2], ==, 1.25);

  /* The log keeps every event after STARTED for the CSV export. */
  g_assert_cmpuint (tdm_metrics_log_get_n_rows (tdm_session_get_log (session)), ==, 3);
  g_assert_cmpuint (rec.events, ==, 4);

  session_free (session, &rec);
}

static void
send_devices (TdmSession *session, int replicas, double elapsed, double base)
{
  TdmEvent e = { .kind = TDM_EVENT_DEVICES };

  e.devices.elapsed = elapsed;
  e.devices.replicas = replicas;
  for (int r = 0; r < replicas; r++)
    {
      e.devices.device[r].compute_ms = base + r;
      e.devices.device[r].comm_ms = 1.0;
      e.devices.device[r].wait_ms = 1.0 + r;
      e.devices.device[r].tandem_bytes = 1000 * (r + 1);
      e.devices.device[r].used_bytes = -1;
      e.devices.device[r].total_bytes = -1;
      e.devices.device[r].utilization = -1;
    }
  tdm_session_handle_event (session, &e);
}

static void
test_cpu_devices (void)
{
  static const char *const devices[] = { "cpu", "cpu", "cpu", NULL };
  Recorder rec;
  TdmSession *session = session_new (&rec);
  g_autoptr(GArray) memory = NULL;
  g_autoptr(GArray) load = NULL;
  g_autoptr(GArray) capacity = NULL;
  g_autoptr(GArray) compute = NULL;
  g_autofree char *label = NULL;

  send_started (session, devices, 1);
  for (int r = 0; r < 3; r++)
    {
      g_assert_true (tdm_session_replica_has_line (session, r));
      g_assert_false (tdm_session_replica_has_capacity (session, r));
      g_assert_cmpint (tdm_session_get_gpu (session, r), ==, -1);
    }
  label = tdm_session_dup_line_label (session, 2);
  g_assert_cmpstr (label, ==, "cpu 3");
  g_assert_cmpint (tdm_session_get_step_replica (session), ==, 1);

  send_devices (session, 3, 1.0, 2.0);
  send_devices (session, 3, 2.0, 6.0);

  memory = points_of (&rec, TDM_SESSION_MEMORY, -1);
  load = points_of (&rec, TDM_SESSION_LOAD, 2);
  capacity = points_of (&rec, TDM_SESSION_CAPACITY, -1);
  g_assert_cmpuint (memory->len, ==, 6);
  g_assert_cmpuint (capacity->len, ==, 0);
  /* A CPU worker's memory is what Tandem holds; its load the compute share. */
  g_assert_cmpint (g_array_index (memory, TdmSessionPoint, 2).replica, ==, 2);
  g_assert_cmpfloat (g_array_index (memory, TdmSessionPoint, 2).y, ==, 3000);
  g_assert_cmpuint (load->len, ==, 2);
  g_assert_cmpfloat (g_array_index (load, TdmSessionPoint, 0).x, ==, 1.0);
  g_assert_cmpfloat_with_epsilon (g_array_index (load, TdmSessionPoint, 0).y,
                                  100.0 * 4 / (4 + 1 + 3), 1e-9);

  /* Step time: the main replica's, until another is picked; then its history. */
  compute = points_of (&rec, TDM_SESSION_STEP_COMPUTE, -1);
  g_assert_cmpuint (compute->len, ==, 2);
  g_assert_cmpint (g_array_index (compute, TdmSessionPoint, 1).replica, ==, 1);
  g_assert_cmpfloat (g_array_index (compute, TdmSessionPoint, 1).y, ==, 7.0);

  g_assert_false (tdm_session_set_step_replica (session, 3));
  g_assert_false (tdm_session_set_step_replica (session, 1));
  g_assert_true (tdm_session_set_step_replica (session, 2));
  g_array_set_size (rec.points, 0);
  tdm_session_replay_step_time (session, record_point, &rec);
  g_assert_cmpuint (rec.points->len, ==, 6);
  g_assert_cmpint (g_array_index (rec.points, TdmSessionPoint, 3).series, ==,
                   TDM_SESSION_STEP_COMPUTE);
  g_assert_cmpint (g_array_index (rec.points, TdmSessionPoint, 3).replica, ==, 2);
  g_assert_cmpfloat (g_array_index (rec.points, TdmSessionPoint, 3).x, ==, 2.0);
  g_assert_cmpfloat (g_array_index (rec.points, TdmSessionPoint, 3).y, ==, 8.0);
  g_assert_cmpfloat (g_array_index (rec.points, TdmSessionPoint, 5).y, ==, 3.0);

  session_free (session, &rec);
}

static void
test_shared_gpu (void)
{
  static const char *const devices[] = { "cuda:0", "cuda:0", "cuda:1", NULL };
  Recorder rec;
  TdmSession *session = session_new (&rec);
  TdmEvent e = { .kind = TDM_EVENT_DEVICES };
  g_autoptr(GArray) memory = NULL;
  g_autoptr(GArray) capacity = NULL;
  g_autoptr(GArray) load = NULL;
  g_autofree char *shared = NULL;
  g_autofree char *alone = NULL;
  g_autofree char *total = NULL;

  send_started (session, devices, 0);
  g_assert_cmpint (tdm_session_get_gpu (session, 1), ==, 0);
  g_assert_cmpint (tdm_session_get_gpu (session, 2), ==, 1);
  /* One line and one capacity per GPU, the first replica's. */
  g_assert_true (tdm_session_replica_has_line (session, 0));
  g_assert_false (tdm_session_replica_has_line (session, 1));
  g_assert_true (tdm_session_replica_has_line (session, 2));
  g_assert_true (tdm_session_replica_has_capacity (session, 0));
  g_assert_false (tdm_session_replica_has_capacity (session, 1));
  g_assert_true (tdm_session_replica_has_capacity (session, 2));
  shared = tdm_session_dup_line_label (session, 0);
  alone = tdm_session_dup_line_label (session, 2);
  total = tdm_session_dup_capacity_label (session, 2);
  g_assert_cmpstr (shared, ==, "cuda:0 · 2 replicas");
  g_assert_cmpstr (alone, ==, "cuda:1");
  g_assert_cmpstr (total, ==, "cuda:1 capacity");

  e.devices.elapsed = 3.0;
  e.devices.replicas = 3;
  for (int r = 0; r < 3; r++)
    {
      e.devices.device[r].compute_ms = 1;
      e.devices.device[r].tandem_bytes = 100;
      e.devices.device[r].used_bytes = 5000 + r;
      e.devices.device[r].total_bytes = 80000;
      e.devices.device[r].utilization = 40 + r;
    }
  tdm_session_handle_event (session, &e);

  /* A GPU's memory is the device's in use, not Tandem's share; its load NVML's. */
  memory = points_of (&rec, TDM_SESSION_MEMORY, -1);
  capacity = points_of (&rec, TDM_SESSION_CAPACITY, -1);
  load = points_of (&rec, TDM_SESSION_LOAD, -1);
  g_assert_cmpuint (memory->len, ==, 2);
  g_assert_cmpint (g_array_index (memory, TdmSessionPoint, 1).replica, ==, 2);
  g_assert_cmpfloat (g_array_index (memory, TdmSessionPoint, 1).y, ==, 5002);
  g_assert_cmpuint (capacity->len, ==, 2);
  g_assert_cmpfloat (g_array_index (capacity, TdmSessionPoint, 0).y, ==, 80000);
  g_assert_cmpuint (load->len, ==, 2);
  g_assert_cmpfloat (g_array_index (load, TdmSessionPoint, 1).y, ==, 42);

  session_free (session, &rec);
}

static void
test_status (void)
{
  static const char *const devices[] = { "cpu", NULL };
  Recorder rec;
  TdmSession *session = session_new (&rec);
  TdmEvent e = { 0 };
  double fraction = -1;
  char *text;

  tdm_session_set_status (session, "Loading");
  text = tdm_session_dup_status (session, NULL);
  g_assert_cmpstr (text, ==, "Loading");
  g_free (text);

  send_started (session, devices, 0);
  text = tdm_session_dup_status (session, &fraction);
  /* What the run computes in follows (a zeroed event's: float32, as it asked). */
  g_assert_cmpstr (text, ==, "Starting: 1 replica, batch 128 · Float32");
  g_assert_cmpfloat (fraction, ==, 0);
  g_free (text);

  send_step (session, 60, 1.0, 0.5);
  text = tdm_session_dup_status (session, &fraction);
  g_assert_cmpstr (text, ==, "Epoch 2 of 3 · Step 60 of 120 · 1,060 samples/s · 0:30 elapsed · 0:30 left");
  g_assert_cmpfloat (fraction, ==, 0.5);
  g_free (text);

  rec.status_at_once = 0;
  e.kind = TDM_EVENT_PAUSED;
  tdm_session_handle_event (session, &e);
  g_assert_cmpuint (rec.status_at_once, ==, 1);
  text = tdm_session_dup_status (session, NULL);
  g_assert_true (g_str_has_prefix (text, "Paused · Epoch 2 of 3"));
  g_free (text);
  e.kind = TDM_EVENT_RESUMED;
  tdm_session_handle_event (session, &e);
  text = tdm_session_dup_status (session, NULL);
  g_assert_true (g_str_has_prefix (text, "Epoch 2 of 3"));
  g_free (text);

  e.kind = TDM_EVENT_FINISHED;
  e.finished.steps = 120;
  e.finished.elapsed = 3725;
  e.finished.test_loss = 0.5;
  e.finished.test_accuracy = 0.875;
  tdm_session_handle_event (session, &e);
  text = tdm_session_dup_status (session, &fraction);
  g_assert_cmpstr (text, ==, "Finished in 1:02:05 · test accuracy 87.5 % · test loss 0.5000");
  g_assert_cmpfloat (fraction, ==, 1.0);
  g_free (text);

  /* A stopped run keeps its progress. */
  send_started (session, devices, 0);
  send_step (session, 30, 1.0, 0.5);
  e.finished.stopped = TRUE;
  e.finished.steps = 30;
  e.finished.elapsed = 15;
  tdm_session_handle_event (session, &e);
  text = tdm_session_dup_status (session, &fraction);
  g_assert_cmpstr (text, ==, "Stopped after 30 steps in 0:15");
  g_assert_cmpfloat (fraction, ==, 0.25);
  g_free (text);

  e.kind = TDM_EVENT_FAILED;
  e.failed = NULL;
  tdm_session_handle_event (session, &e);
  text = tdm_session_dup_status (session, NULL);
  g_assert_cmpstr (text, ==, "Training failed");
  g_free (text);

  /* A run that ends at a step limit (a comparison's 50 steps) counts to its own end,
   * not to the epochs'. */
  {
    TdmEvent s = { .kind = TDM_EVENT_STARTED };

    s.started.replicas = 1;
    g_strlcpy (s.started.device[0], "cpu", sizeof s.started.device[0]);
    s.started.batch = 128;
    s.started.epochs = 3;
    s.started.steps_per_epoch = 40;
    s.started.total_steps = 120;
    s.started.end_step = 50;
    tdm_session_handle_event (session, &s);
    send_step (session, 10, 1.0, 0.5);
    text = tdm_session_dup_status (session, NULL);
    g_assert_nonnull (strstr (text, "Step 10 of 50 ·"));
    g_free (text);
  }

  session_free (session, &rec);
}

static void
test_export_info (void)
{
  static const char *const devices[] = { "cpu", NULL };
  Recorder rec;
  TdmSession *session = session_new (&rec);
  TdmExportInfo *first = tdm_export_info_new ();
  TdmExportInfo *second = tdm_export_info_new ();

  tdm_export_info_add (first, "network", "mlp");
  tdm_export_info_add (second, "network", "cnn");

  /* The settings of a run apply once its STARTED event comes, until the next's. */
  tdm_session_set_export_info (session, first);
  g_assert_null (tdm_session_get_export_info (session));
  send_started (session, devices, 0);
  g_assert_true (tdm_session_get_export_info (session) == first);
  tdm_session_set_export_info (session, second);
  g_assert_cmpstr (tdm_export_info_lookup (tdm_session_get_export_info (session), "network"),
                   ==, "mlp");
  send_started (session, devices, 0);
  g_assert_cmpstr (tdm_export_info_lookup (tdm_session_get_export_info (session), "network"),
                   ==, "cnn");

  /* A run that asked for auto: its exports say what it computed in. */
  {
    TdmExportInfo *third = tdm_export_info_new ();
    TdmEvent e = { .kind = TDM_EVENT_STARTED };
    TdmDeviceId gpu = TDM_DEVICE_GPU (0);

    tdm_export_info_add (third, "precision", "auto");
    tdm_session_set_export_info (session, third);
    tdm_started_event_set_devices (&e.started, &gpu, 1);
    e.started.batch = 128;
    e.started.precision = TDM_PRECISION_BF16;
    e.started.precision_auto = TRUE;
    tdm_session_handle_event (session, &e);
    g_assert_cmpstr (tdm_export_info_lookup (tdm_session_get_export_info (session),
                                             "precision"), ==, "bf16 (auto)");
  }

  session_free (session, &rec);
}

static void
test_overlays (void)
{
  Recorder rec;
  TdmSession *session = session_new (&rec);
  g_autoptr(GPtrArray) records = g_ptr_array_new ();
  TdmRunRecord record = { .name = (char *) "earlier" };
  TdmHistoryPoint points[2] = {
    { .step = 8, .epoch = 0.2, .train_loss = 2.0, .train_accuracy = 0.25 },
    { .step = 16, .epoch = 0.4, .train_loss = 1.0, .train_accuracy = 0.5 },
  };
  Collected c = { 0 };

  record.points = g_array_new (FALSE, FALSE, sizeof (TdmHistoryPoint));
  g_array_append_vals (record.points, points, 2);
  g_ptr_array_add (records, &record);
  tdm_session_set_overlays (session, records);
  g_array_unref (record.points);   /* the session keeps its own copy */

  g_assert_cmpuint (tdm_session_get_n_overlays (session), ==, 1);
  g_assert_cmpstr (tdm_session_get_overlay_name (session, 0), ==, "earlier");
  tdm_session_set_x_axis (session, TDM_SESSION_X_STEP);
  tdm_session_foreach_overlay_point (session, 0, collect, &c);
  g_assert_cmpuint (c.n, ==, 2);
  g_assert_cmpfloat (c.x[1], ==, 16);
  g_assert_cmpfloat (c.loss[1], ==, 1.0);
  g_assert_cmpfloat (c.accuracy[1], ==, 50.0);

  tdm_session_set_overlays (session, NULL);
  g_assert_cmpuint (tdm_session_get_n_overlays (session), ==, 0);

  session_free (session, &rec);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/session/before-started", test_before_started);
  g_test_add_func ("/session/training-points", test_training_points);
  g_test_add_func ("/session/cpu-devices", test_cpu_devices);
  g_test_add_func ("/session/shared-gpu", test_shared_gpu);
  g_test_add_func ("/session/status", test_status);
  g_test_add_func ("/session/export-info", test_export_info);
  g_test_add_func ("/session/overlays", test_overlays);

  return g_test_run ();
}
