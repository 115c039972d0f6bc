/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-event-json.c — one serializer for events: a recorded run's file holds, for
 * each event it keeps whole (started, step, epoch, finished, failed), the JSON that
 * tandem-train --json prints for that event (tdm_event_to_json_line), and reading the
 * file back still gives the run's points. A second writer drifting fails here. */
#include "tdm-event-json.h"
#include "tdm-history.h"
#include "tdm-trainer.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

typedef struct {
  TdmRunRecorder *recorder;
  GPtrArray *lines;        /* what --json would print, one event a line */
} Both;

static void
both_sink(const TdmEvent *event, gpointer data)
{
  Both *both = data;
  g_ptr_array_add(both->lines, tdm_event_to_json_line(event));
  tdm_run_recorder_add(event, both->recorder);
}

static const char *
line_type(const char *line)
{
  static char type[32];
  g_autoptr(JsonNode) node = json_from_string(line, NULL);
  g_assert_nonnull(node);
  const char *t = json_object_get_string_member_with_default(json_node_get_object(node),
                                                             "type", "");
  g_strlcpy(type, t, sizeof type);
  return type;
}

static gboolean
shared_type(const char *type)
{
  return g_str_equal(type, "started") || g_str_equal(type, "step") ||
         g_str_equal(type, "epoch") ||
         g_str_equal(type, "finished") || g_str_equal(type, "failed");
}

static void
test_run_file_is_json_lines(void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp("tandem-event-json-XXXXXX", &error);
  g_assert_no_error(error);
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup("synthetic");
  g_free(cfg->network);
  cfg->network = g_strdup("fc16,relu,fc10");
  cfg->epochs = 2;
  cfg->batch = 4000;      /* 15 steps an epoch: whole epochs, each with its line */
  cfg->seed = 3;
  g_assert_true(tdm_config_set_devices(cfg, "cpu:2", &error));

  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  Both both = {tdm_run_recorder_new(history, cfg, "json", &error),
               g_ptr_array_new_with_free_func(g_free)};
  g_assert_no_error(error);
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, both_sink, &both);
  tdm_trainer_options(trainer)->summary_steps = 4;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  g_assert_true(tdm_run_recorder_finish(both.recorder, &error));
  g_assert_no_error(error);
  g_autofree char *id = g_strdup(tdm_run_recorder_get_id(both.recorder));
  tdm_run_recorder_free(both.recorder);

  /* The --json lines of the kinds the file keeps, in order. */
  g_autoptr(GPtrArray) want = g_ptr_array_new();
  for (guint i = 0; i < both.lines->len; i++)
    if (shared_type(line_type(both.lines->pdata[i])))
      g_ptr_array_add(want, both.lines->pdata[i]);

  g_autofree char *name = g_strconcat(id, ".jsonl", NULL);
  g_autofree char *path = g_build_filename(dir, name, NULL);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, &error));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  guint matched = 0, steps = 0, epochs = 0;
  for (guint i = 0; lines[i] != NULL; i++) {
    if (lines[i][0] == '\0' || !shared_type(line_type(lines[i])))
      continue;
    g_assert_cmpuint(matched, <, want->len);
    g_assert_cmpstr(lines[i], ==, want->pdata[matched]);
    steps += g_str_equal(line_type(lines[i]), "step");
    epochs += g_str_equal(line_type(lines[i]), "epoch");
    matched++;
  }
  g_assert_cmpuint(matched, ==, want->len);
  g_assert_cmpuint(steps, >, 0);
  g_assert_cmpuint(epochs, >, 0);

  /* Read back as before: the steps' points with their fractional epochs. */
  TdmRunRecord *record = tdm_history_load(history, id, &error);
  g_assert_no_error(error);
  g_assert_nonnull(record);
  g_assert_cmpuint(record->points->len, ==, steps);
  const TdmHistoryPoint *last = &g_array_index(record->points, TdmHistoryPoint,
                                                record->points->len - 1);
  g_assert_cmpfloat(last->epoch, >, 0.0);
  g_assert_cmpfloat(last->epoch, <=, (double)cfg->epochs);
  g_assert_true(record->finished);
  tdm_run_record_free(record);

  g_ptr_array_unref(both.lines);
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  for (const char *f; d != NULL && (f = g_dir_read_name(d)) != NULL;) {
    g_autofree char *file = g_build_filename(dir, f, NULL);
    g_unlink(file);
  }
  g_rmdir(dir);
}

/* Which replicas share a GPU is the engine's to say, in the started event and its
 * JSON, so that no reader parses "cuda:N". */
static void
test_started_gpus(void)
{
  const TdmDeviceId devices[] = {TDM_DEVICE_GPU(0), TDM_DEVICE_GPU(0), TDM_DEVICE_GPU(1),
                                 TDM_DEVICE_CPU, TDM_DEVICE_GPU(0)};
  static const char *const names[] = {"cuda:0", "cuda:0", "cuda:1", "cpu", "cuda:0"};
  TdmEvent e = {.kind = TDM_EVENT_STARTED};
  tdm_started_event_set_devices(&e.started, devices, G_N_ELEMENTS(devices));
  g_assert_cmpint(e.started.replicas, ==, G_N_ELEMENTS(devices));
  const int gpu[] = {0, 0, 1, -1, 0}, sharing[] = {3, 3, 1, 0, 3};
  for (guint r = 0; r < G_N_ELEMENTS(devices); r++) {
    g_assert_cmpstr(e.started.device[r], ==, names[r]);
    g_assert_cmpint(e.started.gpu[r], ==, gpu[r]);
    g_assert_cmpint(e.started.gpu_replicas[r], ==, sharing[r]);
  }
  g_autofree char *line = tdm_event_to_json_line(&e);
  g_assert_nonnull(strstr(line, "\"gpus\":[0,0,1,null,0]"));

  /* A zeroed event (CPU replicas) reads as no GPU. */
  TdmEvent cpu = {.kind = TDM_EVENT_STARTED};
  cpu.started.replicas = 2;
  g_autofree char *cpu_line = tdm_event_to_json_line(&cpu);
  g_assert_nonnull(strstr(cpu_line, "\"gpus\":[null,null]"));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/event-json/run-file", test_run_file_is_json_lines);
  g_test_add_func("/event-json/started-gpus", test_started_gpus);
  return g_test_run();
}
