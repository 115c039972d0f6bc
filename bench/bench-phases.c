/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-phases.c — what the per-phase timing of sampled steps costs: training
 * throughput with the step detail (PHASES and BATCH events, the forward/backward
 * hook) on against off, the same configuration run alternately, the median of each.
 * The target is ≥ 99 %. Not a test: it asserts nothing.
 *
 * Beside the wall-clock throughput it prints the process's CPU seconds (user +
 * system, every thread) per 1,000 samples, on against off: on a machine shared with
 * other work the wall figure moves by tens of percent between identical runs, while
 * the CPU a run itself burns is what the detail could add to, and moves far less.
 *
 *   bench-phases                                     mlp and cnn on cpu:2, synthetic
 *   bench-phases --devices cuda:0,cuda:0 --steps 2000
 */
#include "tdm-scaling.h"
#include "tdm-trainer.h"
#include "tdm-bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Samples per second of one run with the detail on or off; *cpu_per_k gets the CPU
 * seconds the run took per 1,000 samples (set-up included, the same both ways). */
static double
tdm_phases_run(const TdmConfig *base, long steps, gboolean detail, double *cpu_per_k)
{
  double cpu_start = tdm_bench_process_cpu_seconds();
  g_autoptr(TdmConfig) cfg = tdm_config_copy(base);
  cfg->max_steps = steps;
  g_autofree TdmScalingMeter *meter = g_new0(TdmScalingMeter, 1);
  meter->batch = cfg->batch;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, tdm_scaling_meter_event, meter);
  tdm_trainer_options(trainer)->step_detail = detail;
  g_autoptr(GError) error = NULL;
  if (!tdm_trainer_run(trainer, NULL, &error)) {
    g_printerr("bench-phases: %s\n", error->message);
    exit(1);
  }
  TdmScalingResult result;
  if (!tdm_scaling_meter_result(meter, steps, &result)) {
    g_printerr("bench-phases: %ld steps were too few to time\n", steps);
    exit(1);
  }
  *cpu_per_k = 1000 * (tdm_bench_process_cpu_seconds() - cpu_start) / ((double)steps * cfg->batch);
  return result.samples_per_second;
}

int
main(int argc, char **argv)
{
  g_autofree char *devices = NULL, *networks = NULL, *dataset = NULL;
  int steps = 600, repeat = 7, batch = 100;
  GOptionEntry entries[] = {
    {"devices", 0, 0, G_OPTION_ARG_STRING, &devices, "Devices (default cpu:2)", "LIST"},
    {"networks", 0, 0, G_OPTION_ARG_STRING, &networks, "Networks (default mlp,cnn)", "A;B"},
    {"dataset", 0, 0, G_OPTION_ARG_STRING, &dataset, "Dataset (default synthetic)", "NAME"},
    {"steps", 0, 0, G_OPTION_ARG_INT, &steps, "Steps per run (default 600)", "N"},
    {"repeat", 0, 0, G_OPTION_ARG_INT, &repeat, "Runs each way (default 7)", "N"},
    {"batch", 0, 0, G_OPTION_ARG_INT, &batch, "Global batch (default 100)", "N"},
    {NULL},
  };
  g_autoptr(GOptionContext) context = g_option_context_new(NULL);
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error) || repeat < 1 || repeat > 99) {
    g_printerr("bench-phases: %s\n", error != NULL ? error->message : "--repeat: 1 to 99");
    return 2;
  }
  g_auto(GStrv) list = g_strsplit(networks != NULL ? networks : "mlp;cnn", ";", -1);

  printf("| network | devices | batch | steps | detail on samples/s | off samples/s | on/off "
         "| CPU s per 1k samples on | off | off/on |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (int k = 0; list[k] != NULL; k++) {
    g_autoptr(TdmConfig) cfg = tdm_config_new();
    g_free(cfg->dataset);
    cfg->dataset = g_strdup(dataset != NULL ? dataset : "synthetic");
    g_free(cfg->network);
    cfg->network = g_strdup(list[k]);
    cfg->batch = batch;
    cfg->epochs = 1000000;
    /* Pinned to float32, the default before auto: the figures stay comparable on GPUs. */
    cfg->precision = TDM_PRECISION_FP32;
    if (!tdm_config_set_devices(cfg, devices != NULL ? devices : "cpu:2", &error)) {
      g_printerr("bench-phases: %s\n", error->message);
      return 2;
    }
    double on[100], off[100], cpu_on[100], cpu_off[100];
    tdm_phases_run(cfg, steps / 4 + 1, TRUE, &cpu_on[0]);   /* warm-up */
    /* Alternating, so a machine that slows down over time weighs on both alike. */
    for (int i = 0; i < repeat; i++) {
      on[i] = tdm_phases_run(cfg, steps, TRUE, &cpu_on[i]);
      off[i] = tdm_phases_run(cfg, steps, FALSE, &cpu_off[i]);
    }
    qsort(on, repeat, sizeof on[0], tdm_bench_compare_doubles);
    qsort(off, repeat, sizeof off[0], tdm_bench_compare_doubles);
    qsort(cpu_on, repeat, sizeof cpu_on[0], tdm_bench_compare_doubles);
    qsort(cpu_off, repeat, sizeof cpu_off[0], tdm_bench_compare_doubles);
    double a = on[repeat / 2], b = off[repeat / 2];
    double ca = cpu_on[repeat / 2], cb = cpu_off[repeat / 2];
    printf("| %s | %s | %d | %d | %.0f | %.0f | %.1f %% | %.4f | %.4f | %.1f %% |\n", list[k],
           devices != NULL ? devices : "cpu:2", batch, steps, a, b, 100 * a / b, ca, cb,
           100 * cb / ca);
    fflush(stdout);
  }
  return 0;
}
