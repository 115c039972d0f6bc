/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tandem-train.c — the headless trainer: the engine's choices as flags, a progress
 * bar on a terminal, plain epoch lines in a log, JSON lines with --json.
 *
 * It only turns flags into a TdmConfig (tdm-cli-options.c), runs tdm_trainer_run() on
 * the main thread and prints the events; all training logic lives in the engine. Exit
 * status: 0 done, 1 a failure while running, 2 bad input (options, dataset, network
 * spec, devices, a checkpoint to resume from), 130 stopped by Ctrl-C.
 */
#include "tdm-build-config.h"
#include <glib/gi18n.h>
#include "tdm-checkpoint.h"
#include "tdm-config.h"
#include "tdm-device.h"
#include "tdm-distributed.h"
#include "tdm-error.h"
#include "tdm-history.h"
#include "tdm-onnx-export.h"
#include "tdm-tensorboard-run.h"
#include "tdm-i18n.h"
#include "tdm-trainer.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <libintl.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tdm-cli-classify.h"
#include "tdm-cli-guard.h"
#include "tdm-cli-lr-find.h"
#include "tdm-cli-options.h"
#include "tdm-cli-printer.h"
#include "tdm-cli-runs.h"
#include "tdm-cli-scaling.h"

enum {
  EXIT_RUNTIME = 1,
  EXIT_BAD_INPUT = 2,
  EXIT_INTERRUPTED = 130,
};

/* A checkpoint that cannot be written would only fail after the first epoch's
 * work; say so before any is done. The engine tries what a save does first: create
 * (and remove) the temporary file in the checkpoint's folder. */
static gboolean
check_save_path(const char *path, const char *flag, GError **error)
{
  if (path == NULL)
    return TRUE;
  g_autoptr(GError) local = NULL;
  if (!tdm_checkpoint_check_writable(path, &local))
    return tdm_cli_bad_option(error, "%s: %s", flag, local->message);
  return TRUE;
}

/* find_dataset: the dataset was not given, so it is looked for where the checkpoint
 * says it was (tdm_checkpoint_find_dataset). */
static TdmConfig *
config_from_checkpoint(const char *path, gboolean find_dataset, GError **error)
{
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, error);
  if (ckpt == NULL)
    return NULL;
  const char *json = tdm_checkpoint_get_metadata(ckpt, "config");
  if (json == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("checkpoint %s: no run configuration in its metadata (not written by "
                "Tandem?)"), path);
    return NULL;
  }
  g_autoptr(GError) local = NULL;
  g_autoptr(TdmConfig) c = tdm_config_from_json(json, &local);
  if (c == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("checkpoint %s: %s"), path, local->message);
    return NULL;
  }
  /* Checked before the flags apply, so a bad saved value is blamed on the file and
   * its key, not on a flag the person never gave. */
  g_autofree char *source = g_strdup_printf("checkpoint %s", path);
  if (!tdm_config_validate_saved(c, source, error))
    return NULL;
  if (find_dataset && !tdm_checkpoint_find_dataset(ckpt, path, c, error))
    return NULL;
  return g_steal_pointer(&c);
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
    _exit(EXIT_INTERRUPTED);
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
      _exit(EXIT_INTERRUPTED);
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
    return EXIT_RUNTIME;
  switch (e->code) {
  case TDM_ENGINE_ERROR_INVALID_OPTION:
  case TDM_ENGINE_ERROR_INVALID_SPEC:
  case TDM_ENGINE_ERROR_DATASET:
  case TDM_ENGINE_ERROR_DEVICE:
    return EXIT_BAD_INPUT;
  case TDM_ENGINE_ERROR_CHECKPOINT:
  case TDM_ENGINE_ERROR_OUT_OF_MEMORY:
    /* A run refused for memory before its first step asked for too much. */
    return stepped ? EXIT_RUNTIME : EXIT_BAD_INPUT;
  case TDM_ENGINE_ERROR_CANCELLED:
    return EXIT_INTERRUPTED;
  default:
    return EXIT_RUNTIME;
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

/* Like flag_of, but a value the person did not give came from the checkpoint being
 * resumed: then that is what the message names. */
static char *
source_of(const GError *e, gboolean stepped, const TdmCliOptions *o)
{
  const char *flag = flag_of(e, stepped, o->resume != NULL);
  const char *given = NULL, *what = NULL;
  if (flag == NULL || o->resume == NULL)
    return g_strdup(flag);
  if (g_str_equal(flag, "--network"))
    given = o->network, what = "network";
  else if (g_str_equal(flag, "--dataset"))
    given = o->dataset, what = "dataset";
  else if (g_str_equal(flag, "--devices"))
    given = o->devices, what = "devices";
  if (what == NULL || given != NULL)
    return g_strdup(flag);
  return g_strdup_printf("checkpoint %s, its saved %s", o->resume, what);
}

static int
fail(int status, const char *flag, const char *message)
{
  /* Under mpirun the lines of every rank arrive mixed: say whose this is. */
  char rank[32] = "";
  if (tdm_distributed_active())
    g_snprintf(rank, sizeof rank, "rank %d: ", tdm_distributed_rank());
  /* Messages quote file and dataset names: tdm_cli_line escapes what they hold. */
  if (flag != NULL)
    tdm_cli_line(stderr, _("tandem-train: %s%s: %s\n"), rank, flag, message);
  else
    tdm_cli_line(stderr, _("tandem-train: %s%s\n"), rank, message);
  return status;
}

/* Under mpirun only the rank of the main device writes checkpoints; the folder need
 * not exist on the other ranks' machines. */
static gboolean
saves_here(const TdmConfig *config)
{
  return !tdm_distributed_active() || config->main_replica == tdm_distributed_rank();
}

static int
list_devices(void)
{
  GArray *devices = tdm_device_list();
  for (guint i = 0; i < devices->len; i++) {
    g_autofree char *line = tdm_device_describe(&g_array_index(devices, TdmDeviceInfo, i));
    printf("%s\n", line);
  }
  g_array_unref(devices);
  return 0;
}

static int
run(const TdmConfig *config, const TdmCliOptions *o)
{
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
  double pace = 0;
  if (!tdm_cli_parse_double("--pace", o->pace, &pace, &error) ||
      ((pace < 0 || (pace > 0 && (pace < TDM_PACE_MIN || pace > TDM_PACE_MAX))) &&
       !tdm_cli_bad_option(&error, _("--pace: %g is not a number of steps a second from %g to %g "
                   "(0: no limit)"), pace, TDM_PACE_MIN, TDM_PACE_MAX)))
    return fail(EXIT_BAD_INPUT, NULL, error->message);
  TdmPrewarm prewarm = TDM_PREWARM_AUTO;
  if (o->prewarm != NULL && !tdm_prewarm_from_name(o->prewarm, &prewarm)) {
    tdm_cli_bad_option(&error, _("--prewarm: unknown value “%s” (choose auto, on or off)"), o->prewarm);
    return fail(EXIT_BAD_INPUT, NULL, error->message);
  }
  g_autoptr(TdmHistory) history = NULL;
  g_autoptr(TdmRunRecorder) recorder = NULL;
  if (o->record && saves_here(config)) {
    history = tdm_history_new(o->history);
    recorder = tdm_run_recorder_new(history, config, o->run_name, &error);
    if (recorder == NULL)
      return fail(EXIT_BAD_INPUT, o->history != NULL ? "--history" : "--record", error->message);
    printer.recorder = recorder;
  }

  g_autoptr(TdmTensorboardRun) tensorboard = NULL;
  if (o->tensorboard != NULL && saves_here(config)) {
    tensorboard = tdm_tensorboard_run_new(o->tensorboard, o->run_name, &error);
    if (tensorboard == NULL)
      return fail(EXIT_BAD_INPUT, "--tensorboard", error->message);
    printer.tensorboard = tensorboard;
  }

  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(config, on_event, &printer);
  if (o->resume)
    tdm_trainer_set_resume_path(trainer, o->resume);
  /* Recorded runs summarize on a step grid so that runs of one configuration overlay
   * point for point in the history. */
  if (recorder != NULL)
    tdm_trainer_set_summary_steps(trainer, TDM_HISTORY_SUMMARY_STEPS);
  if (printer.log)
    tdm_trainer_set_summary_parts(trainer, 10);
  tdm_trainer_set_pace(trainer, pace);
  /* A default batch gives way to a small dataset; one the person chose does not. */
  tdm_trainer_set_batch_fits(trainer, o->batch == NULL && o->resume == NULL && o->config == NULL);
  tdm_trainer_set_prewarm(trainer, prewarm);
  gboolean ok = tdm_trainer_run(trainer, cancellable, &error);
  tdm_cli_printer_clear_bar(&printer);
  int record_status = 0;
  if (recorder != NULL) {
    g_autoptr(GError) record_error = NULL;
    if (!tdm_run_recorder_finish(recorder, &record_error))
      record_status = fail(EXIT_RUNTIME, "--record", record_error->message);
    else if (!o->json && !o->quiet)
      tdm_cli_line(stderr, _("tandem-train: recorded as run %s in %s\n"),
              tdm_run_recorder_get_id(recorder), tdm_history_get_folder(history));
  }

  if (tensorboard != NULL) {
    g_autoptr(GError) tb_error = NULL;
    if (!tdm_tensorboard_run_finish(tensorboard, &tb_error))
      record_status = fail(EXIT_RUNTIME, "--tensorboard", tb_error->message);
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
    if (status == EXIT_INTERRUPTED)
      return status;
    g_autofree char *source = source_of(error, printer.stepped, o);
    return fail(status, source, error->message);
  }
  return g_cancellable_is_cancelled(cancellable) ? EXIT_INTERRUPTED : record_status;
}

/* --export-onnx: the --resume checkpoint's network, or a network with someone's
 * weights (--network N --init FILE, as --classify takes them), as an ONNX model; the
 * engine writes it (tdm-onnx-export.h), nothing is trained. */
static int
export_onnx(const TdmCliOptions *o)
{
  if (o->resume == NULL && (o->init == NULL || o->network == NULL))
    return fail(EXIT_BAD_INPUT, "--export-onnx", _("needs --resume CHECKPOINT (a trained run) "
                                                 "or --network NAME --init FILE (weights)"));
  if (o->classify != NULL)
    return fail(EXIT_BAD_INPUT, "--export-onnx", _("cannot be combined with --classify"));
  g_autoptr(GError) error = NULL;
  gboolean ok;
  const char *source = "--resume";
  if (o->resume != NULL) {
    ok = tdm_onnx_export_checkpoint(o->resume, o->export_onnx, &error);
  } else {
    gint64 size = 0;
    int channels = 0;
    if (o->image_size != NULL && !g_ascii_string_to_signed(o->image_size, 10, 1, 4096, &size, NULL))
      return fail(EXIT_BAD_INPUT, "--image-size", _("expected a whole number from 1 to 4096"));
    if (o->color != NULL && !tdm_color_from_name(o->color, &channels))
      return fail(EXIT_BAD_INPUT, "--color", _("expected auto, grey or rgb"));
    source = "--init";
    ok = tdm_onnx_export_weights(o->network, o->init, (int)size, channels, o->normalize,
                                 o->export_onnx, &error);
  }
  if (!ok) {
    if (g_error_matches(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_EXPORT))
      source = "--export-onnx";
    else if (g_str_has_prefix(error->message, "--"))
      source = NULL;
    return fail(EXIT_BAD_INPUT, source, error->message);
  }
  if (!o->quiet) {
    g_autofree char *display = g_filename_display_name(o->export_onnx);
    tdm_cli_line(stderr, _("tandem-train: wrote %s\n"), display);
  }
  return 0;
}

/* --scaling: the options that make no sense with it are refused before anything runs. */
static gboolean
scaling_options(const TdmCliOptions *o, const TdmConfig *config, TdmCliScaling *out, GError **error)
{
  memset(out, 0, sizeof *out);
  if (!tdm_scaling_mode_parse(o->scaling, &out->mode))
    return tdm_cli_bad_option(error, _("--scaling: “%s” is not a kind of scaling: strong or weak"),
                      o->scaling);
  gint64 steps = 200;
  if (o->scaling_steps != NULL &&
      !g_ascii_string_to_signed(o->scaling_steps, 10, 1, 1000000, &steps, NULL))
    return tdm_cli_bad_option(error, _("--scaling-steps: “%s” is not a whole number from 1 to 1000000"),
                      o->scaling_steps);
  if (o->resume != NULL || o->distributed || o->pace != NULL)
    return tdm_cli_bad_option(error, _("--scaling: cannot be combined with %s"),
                      o->resume != NULL ? "--resume" : o->distributed ? "--distributed" : "--pace");
  if (tdm_config_replica_count(config) < 2)
    return tdm_cli_bad_option(error, _("--scaling: needs two devices or more (--devices cpu:2, or two "
                             "GPUs), to run on 1, 2, … of them"));
  out->steps = steps;
  out->json = o->json;
  out->quiet = o->quiet;
  out->record = o->record;
  out->history = o->history;
  out->name = o->run_name;
  return TRUE;
}

static int
scaling_run(const TdmConfig *config, const TdmCliScaling *scaling)
{
  g_autoptr(GCancellable) cancellable = g_cancellable_new();
  GThread *watch = NULL;
  /* Nothing is saved: Ctrl-C ends the scaling run at once, keeping the points so far. */
  g_atomic_int_set(&training_started, 1);
  if (interrupts_install())
    watch = g_thread_new("tdm-interrupt", interrupt_watch, cancellable);
  g_autoptr(GError) error = NULL;
  int points = 0, record_status = 0;
  gboolean ok = tdm_cli_scaling(config, scaling, cancellable, &points, &record_status, &error);
  if (watch) {
    (void)!write(wake_pipe[1], "q", 1);
    g_thread_join(watch);
  }
  if (record_status == EXIT_BAD_INPUT)
    return EXIT_BAD_INPUT;
  if (!ok) {
    int status = exit_status_for(error, points > 0);
    if (status == EXIT_INTERRUPTED)
      return status;
    return fail(status, flag_of(error, points > 0, FALSE), error->message);
  }
  return record_status;
}

/* --lr-find: the options that make no sense with it are refused before anything runs;
 * Ctrl-C ends the test with the points so far. */
static int
lr_find_run(const TdmConfig *config, const TdmCliOptions *o)
{
  g_autoptr(GError) error = NULL;
  double first, last;
  int steps;
  if (!tdm_cli_lr_find_options(o, &first, &last, &steps, &error))
    return fail(EXIT_BAD_INPUT, NULL, error->message);
  if (o->resume != NULL || o->distributed || o->scaling != NULL || o->record)
    return fail(EXIT_BAD_INPUT, "--lr-find",
                o->resume != NULL ? _("cannot be combined with --resume (it tests a fresh start)")
                : o->record       ? _("cannot be combined with --record (it is not a run to keep)")
                : o->distributed  ? _("cannot be combined with --distributed")
                                  : _("cannot be combined with --scaling"));
  g_autoptr(GCancellable) cancellable = g_cancellable_new();
  GThread *watch = NULL;
  g_atomic_int_set(&training_started, 1);
  if (interrupts_install())
    watch = g_thread_new("tdm-interrupt", interrupt_watch, cancellable);
  gboolean ok = tdm_cli_lr_find(config, first, last, steps, o->json, o->quiet, cancellable,
                                &error);
  if (watch) {
    (void)!write(wake_pipe[1], "q", 1);
    g_thread_join(watch);
  }
  if (!ok) {
    int status = exit_status_for(error, FALSE);
    return status == EXIT_INTERRUPTED ? status
                                      : fail(status, flag_of(error, FALSE, FALSE), error->message);
  }
  return g_cancellable_is_cancelled(cancellable) ? EXIT_INTERRUPTED : 0;
}

int
main(int argc, char **argv)
{
  tdm_cli_check_stdout_at_exit(EXIT_RUNTIME);
  setlocale(LC_ALL, "");
  /* Decimal points in flags, logs and JSON are '.', whatever the locale. */
  setlocale(LC_NUMERIC, "C");
  /* The program's messages; the engine binds its own domain itself. */
  tdm_i18n_bind(GETTEXT_PACKAGE, "po");
  textdomain(GETTEXT_PACKAGE);

  TdmCliOptions o = {0};
  g_autoptr(GError) error = NULL;
  GOptionContext *context = tdm_cli_options_context(&o);
  g_auto(GStrv) given = g_strdupv(argv);
  gboolean parsed = g_option_context_parse(context, &argc, &argv, &error);
  g_option_context_free(context);
  if (!parsed) {
    tdm_cli_options_clear(&o);
    g_autofree char *unknown = g_error_matches(error, G_OPTION_ERROR, G_OPTION_ERROR_UNKNOWN_OPTION)
                               ? tdm_cli_unknown_option(given) : NULL;
    if (unknown != NULL)
      return fail(EXIT_BAD_INPUT, NULL, unknown);
    g_autofree char *flag =
        error->domain == G_CONVERT_ERROR ? tdm_cli_undecodable_option(argc, argv) : NULL;
    if (flag != NULL)
      return fail(EXIT_BAD_INPUT, flag, _("its value is not valid text in the system's "
                                        "encoding (UTF-8 expected)"));
    return fail(EXIT_BAD_INPUT, NULL, error->message);
  }
  /* tandem-train runs: the history, as --list-runs. */
  if (o.classify == NULL && argc == 2 && g_str_equal(argv[1], "runs")) {
    o.list_runs = TRUE;
    argc = 1;
  }
  /* --classify a.png b.png: the names after the first are arguments too. */
  if (o.classify != NULL && argc > 1) {
    GStrvBuilder *all = g_strv_builder_new();
    g_strv_builder_addv(all, (const char **)o.classify);
    for (int i = 1; i < argc; i++)
      g_strv_builder_add(all, argv[i]);
    g_strfreev(o.classify);
    o.classify = g_strv_builder_end(all);
    g_strv_builder_unref(all);
    argc = 1;
  }
  if (argc > 1) {
    g_autofree char *message = g_strdup_printf(_("unexpected argument “%s” (see --help)"),
                                               argv[1]);
    tdm_cli_options_clear(&o);
    return fail(EXIT_BAD_INPUT, NULL, message);
  }

  int status = 0;
  const char *launcher = NULL;
  if (o.resume != NULL && o.init != NULL) {
    status = fail(EXIT_BAD_INPUT, "--init", _("cannot be combined with --resume (a resumed "
                                            "run's weights come from its checkpoint)"));
  } else if (o.classify == NULL && o.top != NULL) {
    status = fail(EXIT_BAD_INPUT, "--top", _("only with --classify"));
  } else if (o.classify != NULL && o.image_size != NULL && o.resume != NULL) {
    status = fail(EXIT_BAD_INPUT, "--image-size", _("not with --classify: images are resized "
                                                  "to the checkpoint's input size"));
  } else if (o.version) {
    printf("tandem-train %s\n", TDM_VERSION);
  } else if (o.list_devices) {
    status = list_devices();
  } else if (o.export_onnx != NULL) {
    status = export_onnx(&o);
  } else if (o.export_tensorboard != NULL) {
    status = o.list_runs ? tdm_cli_runs_export_tensorboard(o.history, o.export_tensorboard, o.quiet)
                         : fail(EXIT_BAD_INPUT, "--export-tensorboard",
                                _("goes with runs: tandem-train runs --export-tensorboard DIR"));
  } else if (o.list_runs) {
    status = tdm_cli_runs_list(o.history, o.json);
  } else if (o.show_run != NULL) {
    status = tdm_cli_runs_show(o.history, o.show_run, o.json);
  } else if (o.export_run != NULL) {
    status = tdm_cli_runs_export(o.history, o.export_run);
  } else if (o.config != NULL && o.resume != NULL) {
    status = fail(EXIT_BAD_INPUT, "--config", _("cannot be combined with --resume (a resumed "
                                              "run's settings come from its checkpoint)"));
  } else if (o.classify != NULL) {
    gint64 top = 3, size = 0;
    int channels = 0;
    if (o.resume == NULL && (o.init == NULL || o.network == NULL))
      status = fail(EXIT_BAD_INPUT, "--classify", _("needs --resume CHECKPOINT (a trained run) "
                                                  "or --network NAME --init FILE (weights)"));
    else if (o.top != NULL && !g_ascii_string_to_signed(o.top, 10, 1, 1000, &top, NULL))
      status = fail(EXIT_BAD_INPUT, "--top", _("expected a whole number from 1 to 1000"));
    else if (o.resume == NULL && o.image_size != NULL &&
             !g_ascii_string_to_signed(o.image_size, 10, 1, 4096, &size, NULL))
      status = fail(EXIT_BAD_INPUT, "--image-size", _("expected a whole number from 1 to 4096"));
    else if (o.resume == NULL && o.color != NULL && !tdm_color_from_name(o.color, &channels))
      status = fail(EXIT_BAD_INPUT, "--color", _("expected auto, grey or rgb"));
    else if (o.resume == NULL)
      status = tdm_cli_classify_weights(o.network, o.init, (int)size, channels, o.normalize,
                                        (const char *const *)o.classify, (int)top, o.json);
    else
      status = tdm_cli_classify(o.resume, (const char *const *)o.classify, (int)top, o.json);
  } else if (!o.distributed && tdm_cli_launched_by_mpi(&launcher) > 1) {
    g_autofree char *message = g_strdup_printf(
        _("started by mpirun as one of %d processes (%s) without --distributed: each would "
          "train a copy of its own; add --distributed to train one run across them"),
        tdm_cli_launched_by_mpi(NULL), launcher);
    status = fail(EXIT_BAD_INPUT, NULL, message);
  } else if (o.distributed && !tdm_distributed_init(&argc, &argv, &error)) {
    status = fail(EXIT_RUNTIME, "--distributed", error->message);
  } else {
    /* Under mpirun, "cuda" is each rank's own GPU, counted from GPU 0. */
    if (o.distributed && g_strcmp0(o.devices, "cuda") == 0) {
      g_free(o.devices);
      o.devices = g_strdup("cuda:0");
    }
    g_autoptr(TdmConfig) config = o.resume   ? config_from_checkpoint(o.resume, o.dataset == NULL, &error)
                                  : o.config ? tdm_cli_config_load(o.config, &error)
                                             : tdm_config_new();
    if (config == NULL || !tdm_cli_options_apply(&o, config, &error) ||
        !tdm_distributed_resolve_devices(config, &error) ||
        !tdm_config_validate(config, &error) ||
        !check_save_path(saves_here(config) ? config->save_path : NULL,
                         o.save || !o.resume ? "--save" : "--resume", &error) ||
        !check_save_path(saves_here(config) ? config->save_best_path : NULL, "--save-best",
                         &error) ||
        !tdm_cli_options_check(&o, config, &error)) {
      g_autofree char *source = config == NULL && o.config != NULL ? g_strdup("--config")
                                : error != NULL ? source_of(error, FALSE, &o)
                                                : NULL;
      status = fail(EXIT_BAD_INPUT, source, error->message);
    } else if (o.print_config) {
      g_autofree char *json = tdm_config_to_json(config);
      printf("%s\n", json);
    } else if (o.scaling != NULL) {
      TdmCliScaling scaling;
      if (!scaling_options(&o, config, &scaling, &error))
        status = fail(EXIT_BAD_INPUT, NULL, error->message);
      else
        status = scaling_run(config, &scaling);
    } else if (o.scaling_steps != NULL) {
      status = fail(EXIT_BAD_INPUT, "--scaling-steps", _("only with --scaling"));
    } else if (o.lr_find) {
      status = lr_find_run(config, &o);
    } else if (o.lr_find_range != NULL || o.lr_find_steps != NULL) {
      status = fail(EXIT_BAD_INPUT, o.lr_find_range != NULL ? "--lr-find-range"
                                                             : "--lr-find-steps",
                    _("only with --lr-find"));
    } else
      status = run(config, &o);
  }
  tdm_cli_options_clear(&o);
  if (tdm_distributed_active()) {
    /* A rank that failed ends the others, which may be waiting for it in a
     * collective; when all went well they all get here and finish together. */
    if (status != 0 && status != EXIT_INTERRUPTED)
      tdm_distributed_abort(status);
    tdm_distributed_finalize();
  }
  return status;
}
