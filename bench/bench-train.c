/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-train.c — training throughput of Tandem's engine, as a table.
 *
 * For each configuration it runs one warm-up epoch, then times `--repeat` epochs
 * (median) from the first step to the last, evaluation excluded, and prints
 * samples/s and the GFLOP/s achieved (3 × the forward FLOPs per sample: forward,
 * and backward for inputs and weights). With --torch it runs bench/torch_reference.py
 * on the same data and prints the ratio. On CPU devices it also prints the process's
 * CPU seconds (every thread) over the timed epochs, and with --torch PyTorch's and the
 * ratio of the two: on a machine shared with other work the wall clock also counts
 * the waits for a core. PyTorch's OpenMP threads spin a while before they sleep, and
 * that spinning is in its CPU seconds. Not a test: it asserts nothing.
 *
 *   bench-train                          CPU table: mlp and cnn, batch 100 and 1024,
 *                                        1 and 2 workers
 *   bench-train --devices cuda:0         the same table on a GPU
 *   bench-train --network cnn --batch 100 --devices cpu:2   one configuration
 *   bench-train --network resnet --batch 512 --devices cpu:2 --steps 20 --torch
 *                                        a fixed number of steps instead of an epoch
 *                                        (the resnet preset's recipe on both sides)
 */
#include "tdm-build-config.h"
#include "tdm-backend.h"
#include "tdm-dataset.h"
#include "tdm-network.h"
#include "tdm-network-catalogue.h"
#include "tdm-trainer.h"
#include "tdm-bench.h"

#include <math.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  gint64 first_step_us, last_us;
  gint64 last_step_us;   /* when the newest step summary came */
  long last_step;        /* and its step */
  int operations_per_step;
  /* The process's CPU time (every thread, user and system) at the same moments: on a
   * machine shared with other work, the wall clock counts the time the workers wait
   * for a core, and CPU seconds do not. */
  double first_step_cpu, last_step_cpu, last_cpu;
} Clock;

static void
on_event(const TdmEvent *e, gpointer data)
{
  Clock *c = data;
  if (e->kind == TDM_EVENT_STARTED) {
    c->first_step_us = g_get_monotonic_time();
    c->first_step_cpu = tdm_bench_process_cpu_seconds();
  } else if (e->kind == TDM_EVENT_STEP) {
    c->last_step_us = g_get_monotonic_time();
    c->last_step_cpu = tdm_bench_process_cpu_seconds();
    c->last_step = e->step.step;
  } else if (e->kind == TDM_EVENT_FINISHED) {
    c->last_us = g_get_monotonic_time();
    c->last_cpu = tdm_bench_process_cpu_seconds();
  } else if (e->kind == TDM_EVENT_DEVICES) {
    c->operations_per_step = e->devices.device[0].operations_per_step;
  } else if (e->kind == TDM_EVENT_FAILED) {
    g_printerr("bench-train: %s\n", e->failed->message);
  }
}

/* Seconds for one epoch (median of `repeat`), or NAN on failure; *cpu_seconds the
 * median of the process's CPU seconds over the same stretches. */
static double
time_epoch(const char *dataset, int train_count, const char *network, const char *devices,
           int batch, const char *precision, int repeat, int steps, int *operations_per_step,
           double *cpu_seconds)
{
  double times[16], cpu[16];
  repeat = CLAMP(repeat, 1, 16);
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(dataset);
  g_free(cfg->network);
  cfg->network = g_strdup(network);
  /* A preset's recipe (augmentation, BN mode, optimizer) is part of its cost. */
  tdm_config_apply_preset(cfg, network);
  if (!tdm_config_set_devices(cfg, devices, NULL))
    return NAN;
  tdm_precision_from_name(precision, &cfg->precision);
  cfg->batch = batch;
  cfg->epochs = 1;
  /* One epoch of steps: training throughput alone. The run ends at the epoch's end,
   * and so evaluates the test set after its last step: the clock stops at the last
   * step's summary, which the trainer always sends. */
  cfg->max_steps = steps > 0 ? steps : (train_count + batch - 1) / batch;

  /* Run −1 is the warm-up: graph capture, page faults, caches. */
  for (int run = -1; run < repeat; run++) {
    Clock clock = {0};
    g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, on_event, &clock);
    if (!tdm_trainer_run(trainer, NULL, NULL))
      return NAN;
    const gboolean at_step = clock.last_step == cfg->max_steps;
    const gint64 end_us = at_step ? clock.last_step_us : clock.last_us;
    const double end_cpu = at_step ? clock.last_step_cpu : clock.last_cpu;
    if (run >= 0) {
      times[run] = (end_us - clock.first_step_us) / 1e6;
      cpu[run] = end_cpu - clock.first_step_cpu;
    }
    *operations_per_step = clock.operations_per_step;
  }
  qsort(times, repeat, sizeof times[0], tdm_bench_compare_doubles);
  qsort(cpu, repeat, sizeof cpu[0], tdm_bench_compare_doubles);
  *cpu_seconds = cpu[repeat / 2];
  return times[repeat / 2];
}

/* The two ceilings behind the floor: the GEMM rate (FLOP/s of a large square sgemm)
 * and the cost of one operation replayed from a graph (or issued, on the CPU). */
typedef struct {
  double gemm_flops;
  double operation_seconds;
} Ceilings;

static double
seconds_since(gint64 start_us)
{
  return (g_get_monotonic_time() - start_us) / 1e6;
}

static Ceilings
measure_ceilings(const char *device, const char *precision)
{
  Ceilings c = {NAN, NAN};
  TdmPrecision p = TDM_PRECISION_FP32;
  tdm_precision_from_name(precision, &p);
  g_autoptr(GError) error = NULL;
  TdmDeviceId id;
  TdmBackend *b = tdm_device_id_parse(device, &id) ? tdm_backend_new(id, p, &error) : NULL;
  if (b == NULL)
    return c;
  int n = b->kind == TDM_BACKEND_CUDA ? 8192 : 1024;
  size_t bytes = (size_t)n * n * sizeof(float);
  float *a = tdm_backend_alloc(b, bytes, NULL), *m = tdm_backend_alloc(b, bytes, NULL);
  float *out = tdm_backend_alloc(b, bytes, NULL);
  g_autofree float *host = g_new(float, (size_t)n * n);
  for (size_t i = 0; i < (size_t)n * n; i++)
    host[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;  /* never zeros */
  tdm_backend_upload(b, a, host, bytes);
  tdm_backend_upload(b, m, host, bytes);
  double best = G_MAXDOUBLE;
  for (int i = 0; i < 6; i++) {
    tdm_backend_synchronize(b);
    gint64 start = g_get_monotonic_time();
    tdm_backend_gemm(b, false, false, n, n, n, 1.0f, a, n, m, n, 0.0f, out, n);
    tdm_backend_synchronize(b);
    if (i > 0)
      best = MIN(best, seconds_since(start));
  }
  c.gemm_flops = 2.0 * n * n * n / best;

  /* Tiny operations: what remains is the cost of issuing one. */
  const int per_graph = 200, replays = 50;
  gboolean graphs = tdm_backend_graph_begin(b, 1);
  if (graphs) {
    for (int i = 0; i < per_graph; i++)
      tdm_backend_scale(b, out, 1.0f, 1);
    tdm_backend_graph_end(b, 1);
    tdm_backend_graph_launch(b, 1);
    tdm_backend_synchronize(b);
  }
  gint64 start = g_get_monotonic_time();
  for (int r = 0; r < replays; r++) {
    if (graphs)
      tdm_backend_graph_launch(b, 1);
    else
      for (int i = 0; i < per_graph; i++)
        tdm_backend_scale(b, out, 1.0f, 1);
  }
  tdm_backend_synchronize(b);
  c.operation_seconds = seconds_since(start) / (replays * per_graph);
  tdm_backend_release(b, a);
  tdm_backend_release(b, m);
  tdm_backend_release(b, out);
  tdm_backend_free(b);
  return c;
}

/* The PyTorch reference's samples/s for the same configuration, or NAN; *cpu_seconds
 * its CPU seconds a timed epoch (NAN when it does not say). */
static double
torch_samples_per_second(const char *python, const char *dataset, const char *network,
                         const char *device, int batch, const char *precision, int repeat,
                         int steps, int threads, double *cpu_seconds)
{
  *cpu_seconds = NAN;
  /* The source tree it was built from, or the current folder's bench/ when the build
   * was carried to another machine. */
  g_autofree char *script = g_build_filename(TDM_SOURCE_DIR, "bench", "torch_reference.py", NULL);
  if (!g_file_test(script, G_FILE_TEST_EXISTS)) {
    g_free(script);
    script = g_build_filename("bench", "torch_reference.py", NULL);
  }
  g_autofree char *batch_text = g_strdup_printf("%d", batch);
  g_autofree char *repeat_text = g_strdup_printf("%d", repeat);
  g_autofree char *steps_text = g_strdup_printf("%d", steps);
  g_autofree char *threads_text = g_strdup_printf("%d", threads);
  const char *argv[] = {python, script, "--dataset", dataset, "--network", network,
                        "--device", device, "--batch", batch_text, "--precision", precision,
                        "--repeat", repeat_text, "--steps", steps_text,
                        threads > 0 ? "--threads" : NULL, threads_text, NULL};
  g_autofree char *out = NULL;
  int status = 0;
  if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL,
                    NULL, NULL, &out, NULL, &status, NULL) ||
      !g_spawn_check_wait_status(status, NULL))
    return NAN;
  const char *cpu_line = strstr(out, "cpu_seconds_per_epoch=");
  if (cpu_line != NULL)
    *cpu_seconds = g_ascii_strtod(cpu_line + strlen("cpu_seconds_per_epoch="), NULL);
  const char *line = strstr(out, "samples_per_second=");
  return line ? g_ascii_strtod(line + strlen("samples_per_second="), NULL) : NAN;
}

typedef struct {
  GCancellable *cancellable;
  gint64 cancelled_at;
  int after_ms;
} Stopper;

static gpointer
stop_later(gpointer data)
{
  Stopper *s = data;
  g_usleep(s->after_ms * 1000);
  s->cancelled_at = g_get_monotonic_time();
  g_cancellable_cancel(s->cancellable);
  return NULL;
}

/* How long a stop takes, from the request to tdm_trainer_run() returning, in a run
 * whose steps are long (cnn at batch 512 on the CPU: several hundred ms a step). */
static void
measure_stop_latency(const char *devices, int repeat)
{
  double ms[16];
  repeat = CLAMP(repeat, 1, 16);
  for (int i = 0; i < repeat; i++) {
    g_autoptr(TdmConfig) cfg = tdm_config_new();
    g_free(cfg->dataset);
    cfg->dataset = g_strdup("synthetic");
    g_free(cfg->network);
    cfg->network = g_strdup("cnn");
    tdm_config_set_devices(cfg, devices, NULL);
    cfg->batch = 512;
    /* Pinned to float32, the default before auto: the figures stay comparable on GPUs. */
    cfg->precision = TDM_PRECISION_FP32;
    g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, NULL, NULL);
    g_autoptr(GCancellable) cancellable = g_cancellable_new();
    Stopper s = {cancellable, 0, 1500 + 137 * i};
    GThread *thread = g_thread_new("stop", stop_later, &s);
    tdm_trainer_run(trainer, cancellable, NULL);
    gint64 returned = g_get_monotonic_time();
    g_thread_join(thread);
    ms[i] = (returned - s.cancelled_at) / 1e3;
  }
  qsort(ms, repeat, sizeof ms[0], tdm_bench_compare_doubles);
  printf("stop latency on %s, cnn batch 512: median %.0f ms, worst %.0f ms (%d stops)\n",
         devices, ms[repeat / 2], ms[repeat - 1], repeat);
}

int
main(int argc, char **argv)
{
  g_autofree char *devices = NULL, *network = NULL, *dataset = NULL, *python = NULL;
  g_autofree char *precision = NULL;
  int batch = 0, repeat = 3, steps = 0;
  gboolean torch = FALSE, stop_latency = FALSE;
  GOptionEntry entries[] = {
    {"devices", 0, 0, G_OPTION_ARG_STRING, &devices, "Devices (default: cpu and cpu:2)", "LIST"},
    {"network", 0, 0, G_OPTION_ARG_STRING, &network, "One network (default: mlp and cnn)", "NET"},
    {"batch", 0, 0, G_OPTION_ARG_INT, &batch, "One batch size (default: 100 and 1024)", "N"},
    {"dataset", 0, 0, G_OPTION_ARG_STRING, &dataset, "Dataset (default fashion-mnist)", "NAME"},
    {"precision", 0, 0, G_OPTION_ARG_STRING, &precision, "fp32 or tf32 (default fp32)", "P"},
    {"repeat", 0, 0, G_OPTION_ARG_INT, &repeat, "Timed epochs, median taken (default 3)", "N"},
    {"steps", 0, 0, G_OPTION_ARG_INT, &steps, "Time N steps instead of an epoch", "N"},
    {"torch", 0, 0, G_OPTION_ARG_NONE, &torch, "Also run the PyTorch reference", NULL},
    {"stop-latency", 0, 0, G_OPTION_ARG_NONE, &stop_latency,
     "Measure how long a stop takes instead", NULL},
    {"python", 0, 0, G_OPTION_ARG_STRING, &python, "Python for --torch (python3)", "PATH"},
    {NULL},
  };
  g_autoptr(GOptionContext) context = g_option_context_new("— Tandem training throughput");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    g_printerr("bench-train: %s\n", error->message);
    return 2;
  }
  if (stop_latency) {
    measure_stop_latency(devices ? devices : "cpu", repeat);
    return 0;
  }
  if (dataset == NULL)
    dataset = g_strdup(g_file_test(TDM_FASHION_MNIST_DIR, G_FILE_TEST_IS_DIR) ? "fashion-mnist"
                                                                               : "synthetic");
  if (precision == NULL)
    precision = g_strdup("fp32");
  if (python == NULL)
    python = g_strdup("python3");

  const char *networks[] = {"mlp", "cnn"};
  const int batches[] = {100, 1024};
  const char *device_sets[] = {"cpu", "cpu:2"};
  int n_networks = network ? 1 : 2, n_batches = batch ? 1 : 2, n_devices = devices ? 1 : 2;

  printf("dataset %s, Adam, %s, one epoch timed after a warm-up, median of %d\n", dataset,
         precision, repeat);
  const char *first_device = devices ? devices : "cpu";
  g_auto(GStrv) first = g_strsplit(first_device, ",", 2);
  g_autofree char *ceiling_device = g_str_has_prefix(first[0], "cpu") ? g_strdup("cpu")
                                                                     : g_strdup(first[0]);
  Ceilings ceil = measure_ceilings(ceiling_device, precision);
  printf("ceilings on %s: sgemm %.1f GFLOP/s, one operation %.2f µs%s\n\n", ceiling_device,
         ceil.gemm_flops / 1e9, ceil.operation_seconds * 1e6,
         g_str_has_prefix(ceiling_device, "cuda") ? " (replayed from a graph)" : "");
  /* On the CPU also the CPU seconds a timed epoch took (every thread), and beside
   * PyTorch's the ratio of those: the work each side does, whatever share of the cores
   * the machine's other load left it. */
  gboolean cpu_columns = g_str_has_prefix(first_device, "cpu");
  printf("| network | batch | devices | s/epoch | samples/s | GFLOP/s | ops/step | floor "
         "samples/s | of floor |%s%s\n", cpu_columns ? " CPU s/epoch |" : "",
         torch ? (cpu_columns ? " PyTorch samples/s | ratio | PyTorch CPU s/epoch | CPU ratio |"
                              : " PyTorch samples/s | ratio |")
               : "");
  printf("|---|---|---|---|---|---|---|---|---|%s%s\n", cpu_columns ? "---|" : "",
         torch ? (cpu_columns ? "---|---|---|---|" : "---|---|") : "");
  for (int i = 0; i < n_networks; i++)
    for (int j = 0; j < n_batches; j++)
      for (int k = 0; k < n_devices; k++) {
        const char *net_name = network ? network : networks[i];
        int b = batch ? batch : batches[j];
        const char *dev = devices ? devices : device_sets[k];
        g_autoptr(TdmDatasetPair) pair = tdm_dataset_open(dataset, NULL);
        if (pair == NULL)
          return 1;
        int operations = 0;
        double cpu_seconds = NAN;
        double seconds = time_epoch(dataset, pair->train->count, net_name, dev, b, precision,
                                    repeat, steps, &operations, &cpu_seconds);
        g_autoptr(TdmNetwork) net =
            tdm_network_new(net_name, pair->train->height, pair->train->width,
                            pair->train->channels, pair->train->classes, NULL);
        double samples = (steps > 0 ? (double)steps * b : pair->train->count) / seconds;
        double gflops = samples * 3 * tdm_network_forward_flops(net) / 1e9;
        /* The floor of one step: its FLOPs at the GEMM rate, or its operations at the
         * issue cost, whichever is longer. The FLOPs split over distinct devices only:
         * CPU workers share the cores the ceiling was measured on, and replicas on
         * one GPU share its rate. */
        g_auto(GStrv) replicas = g_strsplit(dev, ",", -1);
        g_autoptr(GHashTable) distinct = g_hash_table_new(g_str_hash, g_str_equal);
        for (int i = 0; replicas[i] != NULL; i++)
          g_hash_table_add(distinct, g_str_has_prefix(replicas[i], "cpu") ? "cpu" : replicas[i]);
        int devices_used = MAX(1, (int)g_hash_table_size(distinct));
        double step_flops = 3 * tdm_network_forward_flops(net) * b;
        double floor_step = MAX(step_flops / devices_used / ceil.gemm_flops,
                                operations * ceil.operation_seconds);
        double floor_samples = b / floor_step;
        printf("| %s | %d | %s | %.3f | %.0f | %.1f | %d | %.0f | %.0f%% |", net_name, b, dev,
               seconds, samples, gflops, operations, floor_samples,
               100 * samples / floor_samples);
        if (cpu_columns)
          printf(" %.2f |", cpu_seconds);
        if (torch) {
          const char *torch_device = g_str_has_prefix(dev, "cuda") ? "cuda" : "cpu";
          /* As many threads as Tandem's CPU workers have cores between them. */
          int threads = 0;
          if (g_str_has_prefix(dev, "cpu"))
            threads = MIN((int)g_get_num_processors(), g_strv_length(replicas) > 1
                                                            ? (int)g_strv_length(replicas)
                                                            : (int)g_get_num_processors());
          if (g_str_has_prefix(dev, "cpu:"))
            threads = MIN((int)g_get_num_processors(), atoi(dev + 4));
          double ref_cpu = NAN;
          double ref = torch_samples_per_second(python, dataset, net_name, torch_device, b,
                                                precision, repeat, steps, threads, &ref_cpu);
          printf(" %.0f | %.2f× |", ref, samples / ref);
          if (cpu_columns)
            printf(" %.2f | %.2f× |", ref_cpu, ref_cpu / cpu_seconds);
        }
        printf("\n");
        fflush(stdout);
      }
  return 0;
}
