/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-cycles.c — the process's memory over many Start/Stop cycles, as the window
 * runs them: each run on a new thread (the window's worker GThread), a few steps, then
 * the next. Prints VmRSS after the first run and after every tenth, and the ratio of
 * the last to the first (memory must not grow per run). Not a test: it asserts nothing.
 *
 *   bench-cycles [--runs 200] [--network cnn] [--devices cpu:2] [--batch 100]
 */
#include "tdm-config.h"
#include "tdm-trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gint64
rss_kib(void)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/self/status", &text, NULL, NULL))
    return -1;
  const char *line = strstr(text, "VmRSS:");
  return line != NULL ? g_ascii_strtoll(line + 6, NULL, 10) : -1;
}

static gpointer
run_one(gpointer data)
{
  TdmConfig *cfg = data;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, NULL, NULL);
  g_autoptr(GError) error = NULL;
  if (!tdm_trainer_run(trainer, NULL, &error))
    fprintf(stderr, "bench-cycles: %s\n", error->message);
  return NULL;
}

int
main(int argc, char **argv)
{
  int runs = 200, batch = 100;
  const char *network = "cnn", *devices = "cpu:2";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--runs") == 0)
      runs = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--network") == 0)
      network = argv[i + 1];
    else if (strcmp(argv[i], "--devices") == 0)
      devices = argv[i + 1];
    else if (strcmp(argv[i], "--batch") == 0)
      batch = atoi(argv[i + 1]);
  }
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup("synthetic");
  g_free(cfg->network);
  cfg->network = g_strdup(network);
  cfg->batch = batch;
  cfg->epochs = 1;
  cfg->max_steps = 5;
  /* Pinned to float32, the default before auto: the figures stay comparable on GPUs. */
  cfg->precision = TDM_PRECISION_FP32;
  g_autoptr(GError) error = NULL;
  if (!tdm_config_set_devices(cfg, devices, &error)) {
    fprintf(stderr, "bench-cycles: %s\n", error->message);
    return 2;
  }
  printf("%s on %s, batch %d, %d runs of %ld steps, each on a new thread\n", network, devices,
         batch, runs, cfg->max_steps);
  printf("%6s %10s\n", "run", "VmRSS MiB");
  gint64 first = 0, last = 0, most = 0;
  for (int i = 1; i <= runs; i++) {
    GThread *thread = g_thread_new("tdm-run", run_one, cfg);
    g_thread_join(thread);
    last = rss_kib();
    most = MAX(most, last);
    if (i == 1)
      first = last;
    if (i == 1 || i % 10 == 0)
      printf("%6d %10.1f\n", i, last / 1024.0);
  }
  printf("first %.1f MiB, last %.1f MiB (%.2f×), highest %.1f MiB\n", first / 1024.0,
         last / 1024.0, (double)last / first, most / 1024.0);
  return 0;
}
