/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-train.c — what tandem-train's train, scaling, export and devices commands do
 * once their input is checked (tdm-cli-train.h): the run on this thread with its
 * events printed, Ctrl-C, and the exit status and the flag a failure comes back to.
 * All training logic lives in the engine.
 */
#include "tdm-build-config.h"
#include <glib/gi18n.h>
#include "tdm-cli-train.h"

#include "tdm-checkpoint.h"
#include "tdm-cli-experiment.h"
#include "tdm-cli-guard.h"
#include "tdm-cli-lr-find.h"
#include "tdm-cli-printer.h"
#include "tdm-cli-scaling.h"
#include "tdm-device.h"
#include "tdm-distributed.h"
#include "tdm-error.h"
#include "tdm-history.h"
#include "tdm-onnx-export.h"
#include "tdm-tensorboard-run.h"
#include "tdm-trainer.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A checkpoint that cannot be written would only fail after the first epoch's
 * work; say so before any is done. The engine tries what a save does first: create
 * (and remove) the temporary file in the checkpoint's folder. */
gboolean
tdm_cli_check_save_path(const char *path, const char *flag, GError **error)
{
  if (path == NULL)
    return TRUE;
  g_autoptr(GError) local = NULL;
  if (!tdm_checkpoint_check_writable(path, &local))
    return tdm_cli_bad_option(error, "%s: %s", flag, local->message);
  return TRUE;
}

/* Ctrl-C (and SIGTERM). The handler only counts and writes a byte to a pipe (both
 * async-signal-safe); a small thread reads the pipe and cancels the run, which the
 * trainer notices within a step. The second Ctrl-C leaves at once. */

static volatile sig_atomic_t interrupts;
static int wake_pipe[2] = {-1, -1};
/* Set once the trainer reports STARTED: from then on a stop saves the run's state. */
static gint training_started;

static void
on_interrupt(int signum)
{
  int saved = errno;
  if (++interrupts >= 2) {
    static const char message[] = "\ntandem-train: interrupted\n";
    (void)!write(STDERR_FILENO, message, sizeof message - 1);
    _exit(TDM_CLI_EXIT_INTERRUPTED);
  }
  (void)!write(wake_pipe[1], "i", 1);
  errno = saved;
}

static gpointer
interrupt_watch(gpointer data)
{
  GCancellable *cancellable = data;
  char c;
  for (;;) {
    ssize_t n = read(wake_pipe[0], &c, 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0 || c == 'q')
      return NULL;
    /* Before training starts there is nothing to keep, and a stop now would have the
     * trainer save freshly initialised parameters over --save (with --resume, over
     * the very checkpoint being resumed). Leave without writing anything. */
    if (!g_atomic_int_get(&training_started)) {
      static const char message[] = "tandem-train: interrupted before training started\n";
      (void)!write(STDERR_FILENO, message, sizeof message - 1);
      _exit(TDM_CLI_EXIT_INTERRUPTED);
    }
    g_cancellable_cancel(cancellable);
  }
}

static gboolean
interrupts_install(void)
{
  if (pipe(wake_pipe) != 0)
    return FALSE;
  for (int i = 0; i < 2; i++)
    fcntl(wake_pipe[i], F_SETFD, FD_CLOEXEC);
  struct sigaction sa = {0};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sa.sa_flags = SA_RESTART;
  const int signals[] = {SIGINT, SIGTERM};
  for (gsize i = 0; i < G_N_ELEMENTS(signals); i++) {
    /* A shell starts background jobs with SIGINT ignored, so that Ctrl-C leaves
     * them alone; keep it that way, as Python and most tools do. */
    struct sigaction old;
    if (sigaction(signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
      continue;
    sigaction(signals[i], &sa, NULL);
  }
  return TRUE;
}

/* The printer is told of every event; the interrupt handling needs to know when
 * training has started. */
static void
on_event(const TdmEvent *ev, gpointer user_data)
{
  if (ev->kind == TDM_EVENT_STARTED)
    g_atomic_int_set(&training_started, 1);
  tdm_cli_printer_on_event(ev, user_data);
}

/* 2 for what the person asked for, 1 for what went wrong while doing it. A checkpoint
 * error before the first step is the resumed file; after it, a failed save. */
static int
exit_status_for(const GError *e, gboolean stepped)
{
  if (e->domain != TDM_ENGINE_ERROR)
    return TDM_CLI_EXIT_RUNTIME;
  switch (e->code) {
  case TDM_ENGINE_ERROR_INVALID_OPTION:
  case TDM_ENGINE_ERROR_INVALID_SPEC:
  case TDM_ENGINE_ERROR_DATASET:
  case TDM_ENGINE_ERROR_DEVICE:
    return TDM_CLI_EXIT_BAD_INPUT;
  case TDM_ENGINE_ERROR_CHECKPOINT:
  case TDM_ENGINE_ERROR_OUT_OF_MEMORY:
    /* A run refused for memory before its first step asked for too much. */
    return stepped ? TDM_CLI_EXIT_RUNTIME : TDM_CLI_EXIT_BAD_INPUT;
  case TDM_ENGINE_ERROR_CANCELLED:
    return TDM_CLI_EXIT_INTERRUPTED;
  default:
    return TDM_CLI_EXIT_RUNTIME;
  }
}

/* The flag a failure of the engine comes back to, so the message says where to look;
 * NULL when it is no one flag's fault. */
static const char *
flag_of(const GError *e, gboolean stepped, gboolean resumed)
{
  if (e->domain != TDM_ENGINE_ERROR || g_str_has_prefix(e->message, "--"))
    return NULL;
  switch (e->code) {
  case TDM_ENGINE_ERROR_INVALID_SPEC:
    return "--network";
  case TDM_ENGINE_ERROR_DATASET:
    return "--dataset";
  case TDM_ENGINE_ERROR_DEVICE:
    return "--devices";
  case TDM_ENGINE_ERROR_CHECKPOINT:
    return resumed && !stepped ? "--resume" : NULL;
  default:
    return NULL;
  }
}

/* The work after which Ctrl-C cancels `cancellable` (nothing is saved, so it stops
 * at once): the thread that watches for it, or NULL where it could not be set up. */
static GThread *
watch_interrupts(GCancellable *cancellable)
{
  g_atomic_int_set(&training_started, 1);
  return interrupts_install() ? g_thread_new("tdm-interrupt", interrupt_watch, cancellable)
                              : NULL;
}

/* The watch ended, and the exit status of work that ended `ok` or with `error`
 * (said on stderr); `stepped`: it trained a step; `record_status`: the history's. */
static int
end_interruptible(GThread *watch, gboolean ok, const GError *error, gboolean stepped,
                  int record_status)
{
  if (watch) {
    (void)!write(wake_pipe[1], "q", 1);
    g_thread_join(watch);
  }
  if (record_status == TDM_CLI_EXIT_BAD_INPUT)
    return TDM_CLI_EXIT_BAD_INPUT;
  if (!ok) {
    int status = exit_status_for(error, stepped);
    if (status == TDM_CLI_EXIT_INTERRUPTED)
      return status;
    return tdm_cli_fail(status, flag_of(error, stepped, FALSE), error->message);
  }
  return record_status;
}

/* Like flag_of, but a value the person did not give came from the checkpoint being
 * resumed: then that is what the message names. */
char *
tdm_cli_source_of(const TdmCli *cli, const GError *e, gboolean stepped)
{
  const char *resume = cli->settings.resume;
  const char *flag = flag_of(e, stepped, resume != NULL);
  const char *what = NULL;
  if (flag == NULL || resume == NULL)
    return g_strdup(flag);
  if (g_str_equal(flag, "--network"))
    what = "network";
  else if (g_str_equal(flag, "--dataset"))
    what = "dataset";
  else if (g_str_equal(flag, "--devices"))
    what = "devices";
  if (what == NULL || tdm_cli_flags_given(cli->run_flags, what))
    return g_strdup(flag);
  return g_strdup_printf("checkpoint %s, its saved %s", resume, what);
}

int
tdm_cli_devices(void)
{
  GArray *devices = tdm_device_list();
  for (guint i = 0; i < devices->len; i++) {
    g_autofree char *line = tdm_device_describe(&g_array_index(devices, TdmDeviceInfo, i));
    printf("%s\n", line);
  }
  g_array_unref(devices);
  return 0;
}

/* Under mpirun only the rank of the main device writes checkpoints; the folder need
 * not exist on the other ranks' machines. */
gboolean
tdm_cli_saves_here(const TdmConfig *config)
{
  return !tdm_distributed_active() || config->main_replica == tdm_distributed_rank();
}

int
tdm_cli_train(TdmCli *cli, const TdmConfig *config)
{
  const TdmCliSettings *o = &cli->settings;
  g_autoptr(GCancellable) cancellable = g_cancellable_new();
  /* A log (stdout not a terminal, or one rank's output under mpirun) gets plain
   * progress lines; a person at a terminal gets the live line on stderr. */
  gboolean log = !o->json && !o->quiet && (!isatty(STDOUT_FILENO) || tdm_distributed_active());
  TdmCliPrinter printer = {
    .json = o->json,
    .quiet = o->quiet,
    .log = log,
    .bar = !log && !o->json && !o->quiet && isatty(STDERR_FILENO),
    .config = config,
    .setup_phase = -1,
    .setup_said = -1,
    .cancellable = cancellable,
  };
  printer.t_start = printer.t_epoch = g_get_monotonic_time();

  GThread *watch = NULL;
  /* Under mpirun, Ctrl-C is mpirun's: it ends every rank with SIGTERM and then
   * SIGKILL, too soon for a stop to be agreed and saved, so the default action is
   * kept (checkpoints of finished epochs stay whole: they are written atomically). */
  if (!tdm_distributed_active() && interrupts_install())
    watch = g_thread_new("tdm-interrupt", interrupt_watch, cancellable);

  g_autoptr(GError) error = NULL;
  g_autoptr(TdmHistory) history = NULL;
  g_autoptr(TdmRunRecorder) recorder = NULL;
  if (o->record && tdm_cli_saves_here(config)) {
    history = tdm_history_new(o->history);
    recorder = tdm_run_recorder_new(history, config, o->run_name, &error);
    if (recorder == NULL)
      return tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, o->history != NULL ? "--history" : "--record",
                          error->message);
    printer.recorder = recorder;
  }

  g_autoptr(TdmTensorboardRun) tensorboard = NULL;
  if (o->tensorboard != NULL && tdm_cli_saves_here(config)) {
    tensorboard = tdm_tensorboard_run_new(o->tensorboard, o->run_name, &error);
    if (tensorboard == NULL)
      return tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, "--tensorboard", error->message);
    printer.tensorboard = tensorboard;
  }

  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(config, on_event, &printer);
  if (o->resume)
    tdm_trainer_set_resume_path(trainer, o->resume);
  /* Recorded runs summarize on a step grid so that runs of one configuration overlay
   * point for point in the history. */
  if (recorder != NULL)
    tdm_trainer_options(trainer)->summary_steps = TDM_HISTORY_SUMMARY_STEPS;
  if (printer.log)
    tdm_trainer_options(trainer)->summary_parts = 10;
  tdm_trainer_set_pace(trainer, o->pace);
  tdm_trainer_options(trainer)->prewarm = o->prewarm;
  /* A default batch gives way to a small dataset; one the person chose does not. */
  tdm_trainer_options(trainer)->batch_fits = !tdm_cli_flags_given(cli->run_flags, "batch") &&
                                             o->resume == NULL && o->config == NULL;
  gboolean ok = tdm_trainer_run(trainer, cancellable, &error);
  tdm_cli_printer_clear_bar(&printer);
  int record_status = 0;
  if (recorder != NULL) {
    g_autoptr(GError) record_error = NULL;
    if (!tdm_run_recorder_finish(recorder, &record_error))
      record_status = tdm_cli_fail(TDM_CLI_EXIT_RUNTIME, "--record", record_error->message);
    else if (!o->json && !o->quiet)
      tdm_cli_line(stderr, _("tandem-train: recorded as run %s in %s\n"),
                   tdm_run_recorder_get_id(recorder), tdm_history_get_folder(history));
  }

  if (tensorboard != NULL) {
    g_autoptr(GError) tb_error = NULL;
    if (!tdm_tensorboard_run_finish(tensorboard, &tb_error))
      record_status = tdm_cli_fail(TDM_CLI_EXIT_RUNTIME, "--tensorboard", tb_error->message);
    else if (!o->json && !o->quiet)
      tdm_cli_line(stderr, _("tandem-train: TensorBoard event files in %s\n"),
                   tdm_tensorboard_run_get_folder(tensorboard));
  }

  if (watch) {
    (void)!write(wake_pipe[1], "q", 1);
    g_thread_join(watch);
  }

  if (!ok) {
    int status = exit_status_for(error, printer.stepped);
    if (status == TDM_CLI_EXIT_INTERRUPTED)
      return status;
    g_autofree char *source = tdm_cli_source_of(cli, error, printer.stepped);
    return tdm_cli_fail(status, source, error->message);
  }
  return g_cancellable_is_cancelled(cancellable) ? TDM_CLI_EXIT_INTERRUPTED : record_status;
}

/* export (--export-onnx): the --resume checkpoint's network as an ONNX model; the engine
 * writes it (tdm-onnx-export.h), nothing is trained. */
int
tdm_cli_export(TdmCli *cli, const TdmConfig *weights)
{
  const TdmCliSettings *o = &cli->settings;
  g_autoptr(GError) error = NULL;
  gboolean ok = weights == NULL
                    ? tdm_onnx_export_checkpoint(o->resume, o->export_onnx, &error)
                    : tdm_onnx_export_weights(weights->network, weights->init_path,
                                              weights->image_size, weights->image_channels,
                                              weights->normalize, o->export_onnx, &error);
  if (!ok) {
    const char *source = weights == NULL ? "--resume" : "--init";
    if (g_error_matches(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_EXPORT))
      source = "--export-onnx";
    else if (g_str_has_prefix(error->message, "--"))
      source = NULL;
    return tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, source, error->message);
  }
  if (!o->quiet) {
    g_autofree char *display = g_filename_display_name(o->export_onnx);
    tdm_cli_line(stderr, _("tandem-train: wrote %s\n"), display);
  }
  return 0;
}

/* lr-find: the range test of the run's settings; Ctrl-C ends it with the points so
 * far. */
int
tdm_cli_lr_find_run(TdmCli *cli, const TdmConfig *config)
{
  const TdmCliSettings *o = &cli->settings;
  const TdmLrFindOptions range = {o->lr_find_range[0], o->lr_find_range[1], o->lr_find_steps};
  g_autoptr(GError) error = NULL;
  if (!tdm_lr_find_check(&range, &error))
    return tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, "--lr-find-range", error->message);
  g_autoptr(TdmExperiment) experiment = tdm_experiment_new_lr_find(config, &range, &error);
  if (experiment == NULL)
    return tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, NULL, error->message);
  const TdmCliExperiment options = {
    .json = o->json,
    .quiet = o->quiet,
    .record = o->record,
    .history = o->history,
  };
  g_autoptr(GCancellable) cancellable = g_cancellable_new();
  GThread *watch = watch_interrupts(cancellable);
  int record_status = 0;
  gboolean ok = tdm_cli_lr_find(experiment, &options, cancellable, &record_status, &error);
  int status = end_interruptible(watch, ok, error, FALSE, record_status);
  /* A stopped test keeps its points and says so by its status. */
  return status == 0 && g_cancellable_is_cancelled(cancellable) ? TDM_CLI_EXIT_INTERRUPTED
                                                                : status;
}

int
tdm_cli_scaling_run(TdmCli *cli, const TdmConfig *config)
{
  const TdmCliSettings *o = &cli->settings;
  if (tdm_config_replica_count(config) < 2)
    return tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, "--scaling",
                        _("needs two devices or more (--devices cpu:2, or two GPUs), to run "
                          "on 1, 2, … of them"));
  const TdmCliScaling options = {
    .mode = o->scaling,
    .steps = o->scaling_steps,
    .json = o->json,
    .quiet = o->quiet,
    .record = o->record,
    .history = o->history,
    .name = o->run_name,
  };
  g_autoptr(GCancellable) cancellable = g_cancellable_new();
  GThread *watch = watch_interrupts(cancellable);
  g_autoptr(GError) error = NULL;
  int points = 0, record_status = 0;
  gboolean ok = tdm_cli_scaling(config, &options, cancellable, &points, &record_status, &error);
  return end_interruptible(watch, ok, error, points > 0, record_status);
}

/* compare, compare-strategies: nothing is saved, so Ctrl-C ends the experiment at once. */
int
tdm_cli_experiment_run(TdmCli *cli, const TdmConfig *config, TdmExperimentKind kind)
{
  const TdmCliSettings *o = &cli->settings;
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) experiment =
    kind == TDM_EXPERIMENT_COMPARE ? tdm_experiment_new_compare(config, o->compare_steps, &error)
                                   : tdm_experiment_new_strategies(config, o->compare_steps,
                                                                   &error);
  if (experiment == NULL)
    return tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, "--devices", error->message);
  const TdmCliExperiment options = {
    .json = o->json,
    .quiet = o->quiet,
    .record = o->record,
    .history = o->history,
  };
  g_autoptr(GCancellable) cancellable = g_cancellable_new();
  GThread *watch = watch_interrupts(cancellable);
  gboolean stepped = FALSE;
  int record_status = 0;
  gboolean ok = tdm_cli_experiment(experiment, &options, cancellable, &stepped, &record_status,
                                   &error);
  return end_interruptible(watch, ok, error, stepped, record_status);
}
