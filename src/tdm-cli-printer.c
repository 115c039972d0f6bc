/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-printer.c — tandem-train's output while training: the live line (epoch,
 * progress bar, loss, accuracy, samples a second, time left) redrawn at most ten
 * times a second on a terminal, a plain line per epoch that a log keeps, the summary
 * at the end; JSON lines instead with --json (tdm-cli-json.c). */
#include "tdm-cli-printer.h"
#include <glib/gi18n.h>
#include "tdm-cli-guard.h"
#include "tdm-cli-json.h"
#include "tdm-dataset-folder.h"
#include "tdm-network-catalogue.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static void
format_count(char *out, size_t size, gint64 n)
{
  char digits[32];
  g_snprintf(digits, sizeof digits, "%" G_GINT64_FORMAT, n < 0 ? -n : n);
  size_t len = strlen(digits), o = 0;
  if (n < 0 && o + 1 < size)
    out[o++] = '-';
  for (size_t i = 0; i < len && o + 1 < size; i++) {
    if (i > 0 && (len - i) % 3 == 0 && o + 1 < size)
      out[o++] = ',';
    out[o++] = digits[i];
  }
  out[o] = '\0';
}

static void
format_duration(char *out, size_t size, double seconds)
{
  if (!isfinite(seconds) || seconds < 0)
    seconds = 0;
  long s = lround(seconds);
  if (s >= 3600)
    g_snprintf(out, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    g_snprintf(out, size, "%ld:%02ld", s / 60, s % 60);
}

/* Wall-clock time since the program began to train (set-up and evaluation
 * included): what a person reading a log counts in. */
static void
format_elapsed(const TdmCliPrinter *p, char *out, size_t size)
{
  format_duration(out, size, (g_get_monotonic_time() - p->t_start) / (double)G_USEC_PER_SEC);
}

int
tdm_cli_record_close(TdmRunRecorder *recorder, TdmHistory *history, gboolean say)
{
  g_autoptr(GError) error = NULL;
  if (!tdm_run_recorder_finish(recorder, &error)) {
    tdm_cli_line(stderr, _("tandem-train: --record: %s\n"), error->message);
    return 1;
  }
  if (say && tdm_run_recorder_get_kept(recorder))
    tdm_cli_line(stderr, _("tandem-train: recorded as run %s in %s\n"),
                 tdm_run_recorder_get_id(recorder), tdm_history_get_folder(history));
  return 0;
}

void
tdm_cli_printer_clear_bar(TdmCliPrinter *p)
{
  if (p->bar_shown) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
    p->bar_shown = FALSE;
  }
}

static int
terminal_width(void)
{
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  return 80;
}

/* The live line, as long as the terminal allows: the details give way (samples a
 * second, then loss and accuracy, then the bar) before the line would wrap, and what
 * is left is cut at the width. Every character is ASCII, one column each. */
static void
bar_draw(TdmCliPrinter *p, const TdmStepEvent *s)
{
  gint64 now = g_get_monotonic_time();
  if (p->bar_shown && now - p->t_draw < G_USEC_PER_SEC / 10)
    return;
  p->t_draw = now;

  double within = CLAMP(s->epoch_float - s->epoch, 0.0, 1.0);
  char rate[32], eta[32], head[64], tails[4][192];
  format_count(rate, sizeof rate, (gint64)llround(s->samples_per_second));
  if (s->eta >= 0)
    format_duration(eta, sizeof eta, s->eta);
  else
    g_strlcpy(eta, "?", sizeof eta);
  g_snprintf(head, sizeof head, "epoch %d/%d ", s->epoch + 1, p->start.epochs);
  int percent = (int)floor(within * 100);
  /* The epoch's running mean first (Keras's figure, which settles), the last steps'
   * beside it while there is room. */
  g_snprintf(tails[0], sizeof tails[0],
             " %3d%%  loss %.3f (now %.3f)  acc %.1f%% (now %.1f%%)  %s samples/s  ETA %s",
             percent, s->epoch_loss, s->train_loss, 100 * s->epoch_accuracy,
             100 * s->train_accuracy, rate, eta);
  g_snprintf(tails[1], sizeof tails[1], " %3d%%  loss %.3f  acc %.1f%%  %s samples/s  ETA %s",
             percent, s->epoch_loss, 100 * s->epoch_accuracy, rate, eta);
  g_snprintf(tails[2], sizeof tails[2], " %3d%%  loss %.3f  acc %.1f%%  ETA %s", percent,
             s->epoch_loss, 100 * s->epoch_accuracy, eta);
  g_snprintf(tails[3], sizeof tails[3], " %3d%% ETA %s", percent, eta);

  /* One column short of the width, so the cursor never wraps to a new line. */
  int columns = terminal_width() - 1;
  const int last = G_N_ELEMENTS(tails) - 1;
  const char *tail = tails[last];
  int width = 0;
  for (int k = 0; k <= last; k++) {
    int room = columns - (int)strlen(head) - (int)strlen(tails[k]) - 2;
    if (room >= 10 || k == last) {
      tail = tails[k];
      width = CLAMP(room, 0, 40);
      break;
    }
  }
  GString *line = g_string_new(NULL);
  g_string_append(line, head);
  if (width >= 5) {
    int filled = (int)floor(within * width);
    g_string_append_c(line, '[');
    for (int i = 0; i < width; i++)
      g_string_append_c(line, i < filled ? '#' : '.');
    g_string_append_c(line, ']');
  }
  g_string_append(line, tail);
  if ((int)line->len > columns)
    g_string_truncate(line, MAX(columns, 0));
  fprintf(stderr, "\r%s\033[K", line->str);
  fflush(stderr);
  g_string_free(line, TRUE);
  p->bar_shown = TRUE;
}

/* A log's progress line: at each tenth of an epoch (as the engine's step summaries
 * say, so the same run prints the same lines) and after TDM_CLI_LOG_INTERVAL_S of
 * training time without one. */
static void
log_step(TdmCliPrinter *p, const TdmStepEvent *s)
{
  double within = CLAMP(s->epoch_float - s->epoch, 0.0, 1.0);
  int tenth = (int)floor(within * 10 + 1e-9);
  gboolean new_tenth = tenth > 0 && tenth < 10 &&
                       (s->epoch != p->log_epoch || tenth != p->log_tenth);
  if (!new_tenth && s->elapsed - p->log_elapsed < TDM_CLI_LOG_INTERVAL_S)
    return;
  p->log_epoch = s->epoch;
  p->log_tenth = tenth;
  p->log_elapsed = s->elapsed;
  char rate[32], eta[32], steps[32], total[32], elapsed[32];
  format_count(rate, sizeof rate, (gint64)llround(s->samples_per_second));
  format_count(steps, sizeof steps, s->step);
  format_count(total, sizeof total, p->start.total_steps);
  if (s->eta >= 0)
    format_duration(eta, sizeof eta, s->eta);
  else
    g_strlcpy(eta, "?", sizeof eta);
  format_elapsed(p, elapsed, sizeof elapsed);
  printf(_("epoch %d/%d %3d%%  step %s/%s  loss %.3f acc %.1f%% (now %.3f, %.1f%%)  "
           "%s samples/s  elapsed %s  ETA %s\n"),
         s->epoch + 1, p->start.epochs, (int)floor(within * 100), steps, total,
         s->epoch_loss, 100 * s->epoch_accuracy, s->train_loss, 100 * s->train_accuracy, rate,
         elapsed, eta);
  fflush(stdout);
}

/* The network as the header names it: a built-in one by its name and what it is
 * (its expanded spec can run to thousands of characters), a spec whole, wrapped
 * under the header's first words. */
static char *
network_words(const TdmCliPrinter *p, const TdmStartedEvent *s)
{
  const char *asked = p->config != NULL ? p->config->network : s->network;
  const TdmNetworkPreset *preset = tdm_network_preset_find(asked);
  if (preset != NULL)
    return g_strdup_printf("%s (%s)", preset->name, preset->summary);
  GString *text = g_string_new(NULL);
  const glong width = 78, indent = 2;
  glong column = (glong)strlen("training ");
  g_auto(GStrv) items = g_strsplit(asked, ",", -1);
  for (int i = 0; items[i] != NULL; i++) {
    glong length = g_utf8_strlen(items[i], -1) + (items[i + 1] != NULL ? 1 : 0);
    if (i > 0 && column + length > width) {
      g_string_append_printf(text, "\n%*s", (int)indent, "");
      column = indent;
    }
    g_string_append(text, items[i]);
    if (items[i + 1] != NULL)
      g_string_append_c(text, ',');
    column += length;
  }
  return g_string_free(text, FALSE);
}

/* An image folder's samples as decoded: their size and colours, and whether they
 * were chosen or read from the images. */
static void
print_image_choice(const TdmConfig *c, const TdmStartedEvent *s)
{
  const char *colour = s->channels == 1 ? _("grey") : _("RGB");
  if (c->image_size > 0 && c->image_channels > 0)
    printf(_("images: %d×%d %s (--image-size, --color)\n"), s->width, s->height, colour);
  else if (c->image_size > 0)
    printf(_("images: %d×%d (--image-size), %s as the images are (--color to choose)\n"),
           s->width, s->height, colour);
  else if (c->image_channels > 0)
    printf(_("images: %d×%d as the images are (--image-size to choose), %s (--color)\n"),
           s->width, s->height, colour);
  else
    printf(_("images: %d×%d %s, as the images are (--image-size and --color choose)\n"),
           s->width, s->height, colour);
}

static void
print_started(TdmCliPrinter *p, const TdmStartedEvent *s)
{
  char params[32];
  format_count(params, sizeof params, (gint64)s->parameters);
  GString *devices = g_string_new(NULL);
  for (int i = 0; i < s->replicas; i++)
    g_string_append_printf(devices, "%s%s%s", i ? ", " : "", s->device[i],
                           i == s->main_replica && s->replicas > 1 ? _(" (main)") : "");
  g_autofree char *network = network_words(p, s);
  tdm_cli_line(stdout, _("training %s, %s parameters, on %s (%d train, %d test)\n"), network,
               params, s->dataset, s->train_count, s->test_count);
  if (p->config != NULL && tdm_dataset_is_image_folder(p->config->dataset))
    print_image_choice(p->config, s);
  if (s->batch_asked > 0)
    printf(_("batch %d: the default %d is more than the %d training samples allow; "
             "--batch chooses another\n"),
           s->batch, s->batch_asked, s->train_count);
  printf(_("devices: %s; batch %d = "), devices->str, s->batch);
  for (int i = 0; i < s->replicas; i++)
    printf("%s%d", i ? " + " : "", s->shard[i]);
  printf("\n");
  /* What the run computes in, after auto is resolved; the recipe below says what was
   * asked. */
  if (s->precision_auto)
    printf(_("precision: %s (auto: %s)\n"), tdm_precision_name(s->precision), s->precision_why);
  else
    printf(_("precision: %s\n"), tdm_precision_name(s->precision));
  if (p->config != NULL) {
    /* The recipe as the engine names its settings, after what the lines above say. */
    g_auto(GStrv) pairs = tdm_config_describe(p->config);
    GString *recipe = g_string_new(_("recipe:"));
    gboolean after_batch = FALSE;
    for (int i = 0; pairs[i] != NULL && pairs[i + 1] != NULL; i += 2) {
      if (after_batch)
        g_string_append_printf(recipe, " %s %s,", pairs[i], pairs[i + 1]);
      after_batch = after_batch || g_str_equal(pairs[i], "batch");
    }
    if (recipe->str[recipe->len - 1] == ',')
      g_string_truncate(recipe, recipe->len - 1);
    printf("%s\n", recipe->str);
    g_string_free(recipe, TRUE);
  }
  printf(ngettext("%d epoch of %d steps", "%d epochs of %d steps", s->epochs), s->epochs,
         s->steps_per_epoch);
  if (p->config != NULL && p->config->max_steps > 0 && p->config->max_steps < s->total_steps)
    printf(_(", stopping at step %ld (--max-steps)"), p->config->max_steps);
  printf("\n");
  if (s->start_step > 0 && s->steps_per_epoch > 0)
    printf(_("resuming at step %ld (epoch %ld of %d)\n"), s->start_step,
           s->start_step / s->steps_per_epoch + 1, s->epochs);
  fflush(stdout);
  g_string_free(devices, TRUE);
}

/* One line: the host's needs, and each GPU's (CPU workers are host memory). */
static void
print_memory(const TdmMemoryEvent *m)
{
  g_autofree char *host = g_format_size_full(m->host_total, G_FORMAT_SIZE_IEC_UNITS);
  GString *line = g_string_new(NULL);
  g_string_append_printf(line, _("memory estimate: host %s"), host);
  if (m->host_available != G_MAXUINT64) {
    g_autofree char *avail = g_format_size_full(m->host_available, G_FORMAT_SIZE_IEC_UNITS);
    g_string_append_printf(line, _(" (%s available"), avail);
    if (m->largest_batch >= 0)
      g_string_append_printf(line, _(", batch up to %d fits"), m->largest_batch);
    g_string_append(line, ")");
  }
  for (int i = 0; i < m->replicas; i++) {
    if (m->device[i].host)
      continue;
    g_autofree char *dev = g_format_size_full(m->device[i].total, G_FORMAT_SIZE_IEC_UNITS);
    g_string_append_printf(line, "; %s %s", m->device[i].device, dev);
  }
  printf("%s\n", line->str);
  fflush(stdout);
  g_string_free(line, TRUE);
}

static void
print_epoch(TdmCliPrinter *p, const TdmEpochEvent *e)
{
  gint64 now = g_get_monotonic_time();
  double seconds = (now - p->t_epoch) / (double)G_USEC_PER_SEC;
  p->t_epoch = now;
  tdm_cli_printer_clear_bar(p);
  printf(_("epoch %d/%d  train loss %.3f acc %.1f%%  "), e->epoch, p->start.epochs,
         e->train_loss, 100 * e->train_accuracy);
  if (isfinite(e->val_accuracy))
    printf(_("val loss %.3f acc %.1f%%  "), e->val_loss, 100 * e->val_accuracy);
  printf(_("test loss %.3f acc %.1f%%  %.1f s\n"), e->test_loss, 100 * e->test_accuracy, seconds);
  fflush(stdout);
}

/* "val_loss 0.200" or "val_accuracy 97.5%": a monitored metric and its value. */
static char *
monitored(int monitor, double value)
{
  const char *name = tdm_monitor_name((TdmMonitor)monitor);
  if (monitor == TDM_MONITOR_VAL_ACCURACY || monitor == TDM_MONITOR_TEST_ACCURACY)
    return g_strdup_printf("%s %.1f%%", name, 100 * value);
  return g_strdup_printf("%s %.3f", name, value);
}

static void
print_saved(TdmCliPrinter *p, const TdmSavedEvent *v)
{
  g_autofree char *display = g_filename_display_name(v->path);
  tdm_cli_printer_clear_bar(p);
  g_autofree char *value = v->best ? monitored(v->monitor, v->value) : NULL;
  if (v->best)
    tdm_cli_line(stdout, _("saved %s (the best so far: %s, epoch %d, step %ld)\n"), display,
                 value, v->epoch, v->step);
  else if (p->start.steps_per_epoch > 0 && v->step % p->start.steps_per_epoch == 0)
    tdm_cli_line(stdout, _("saved %s (epoch %d, step %ld)\n"), display, v->epoch,
                 v->step);
  else
    tdm_cli_line(stdout, _("saved %s (step %ld)\n"), display, v->step);
  fflush(stdout);
}

/* The phases outside the training steps: a line when a set-up phase begins, the
 * decoding's count and rate every TDM_CLI_LOG_INTERVAL_S (each time on a terminal),
 * and what it took; an evaluation (which the engine reports only once it is slow)
 * likewise, with the time since the run began. */
static void
print_setup(TdmCliPrinter *p, const TdmSetupEvent *u)
{
  static const char *const begins[] = {N_("decoding images"), N_("setting up the network"),
                                       N_("pre-warming"), N_("evaluating the test set"),
                                       N_("evaluating the validation split")};
  static const char *const ends[] = {N_("decoded"), N_("network ready"), N_("pre-warmed"),
                                     N_("test set evaluated"),
                                     N_("validation split evaluated")};
  if (u->phase < 0 || u->phase >= (int)G_N_ELEMENTS(begins))
    return;
  gboolean evaluation = u->phase == TDM_SETUP_EVALUATION || u->phase == TDM_SETUP_VALIDATION;
  char count[32], total[32], rate[32], elapsed[32];
  format_count(count, sizeof count, u->count);
  format_count(total, sizeof total, u->total);
  format_count(rate, sizeof rate,
               u->seconds > 0 ? (gint64)llround(u->count / u->seconds) : 0);
  format_elapsed(p, elapsed, sizeof elapsed);
  gboolean first = u->phase != p->setup_phase || p->setup_said < 0;
  if (u->done) {
    tdm_cli_printer_clear_bar(p);
    if (u->phase == TDM_SETUP_DATASET)
      printf(_("decoded %s images in %.1f s (%s a second)\n"), total, u->seconds, rate);
    else if (u->phase == TDM_SETUP_PREWARM)
      printf(_("%s: %ld steps and an evaluation in %.1f s\n"), _(ends[u->phase]), u->count,
             u->seconds);
    else if (evaluation)
      printf(_("%s: %s samples in %.1f s  elapsed %s\n"), _(ends[u->phase]), total, u->seconds,
             elapsed);
    else
      printf(_("%s in %.1f s\n"), _(ends[u->phase]), u->seconds);
    fflush(stdout);
    p->setup_said = -1;
    return;
  }
  if (p->bar && u->total > 0) {
    fputs("\r", stderr);
    fprintf(stderr, _("%s: %s of %s (%s a second)"), _(begins[u->phase]), count, total, rate);
    fputs("\033[K", stderr);
    fflush(stderr);
    p->bar_shown = TRUE;
    p->setup_phase = u->phase;
    p->setup_said = u->seconds;
    return;
  }
  if (!first && u->seconds - p->setup_said < TDM_CLI_LOG_INTERVAL_S)
    return;
  tdm_cli_printer_clear_bar(p);
  if (u->total > 0)
    printf(_("%s: %s of %s (%s a second)"), _(begins[u->phase]), count, total, rate);
  else
    fputs(_(begins[u->phase]), stdout);
  if (evaluation)
    printf(_("  elapsed %s"), elapsed);
  putchar('\n');
  fflush(stdout);
  p->setup_phase = u->phase;
  p->setup_said = u->seconds;
}

/* Where a run watched a metric (early stopping, the best checkpoint): its best
 * epoch, that epoch's figures and where its parameters were kept. */
static void
print_best(const TdmCliPrinter *p, const TdmFinishedEvent *f)
{
  const TdmConfig *c = p->config;
  if (f->best_epoch <= 0 || c == NULL || (c->early_stop <= 0 && c->save_best_path == NULL))
    return;
  g_autofree char *value = monitored(f->monitor, f->best_value);
  g_autoptr(GString) line = g_string_new(NULL);
  g_string_append_printf(line, _("  best: epoch %d by %s"), f->best_epoch, value);
  if (isfinite(f->best_accuracy))
    g_string_append_printf(line, _(": val loss %.3f acc %.1f%%"), f->best_val_loss,
                           100 * f->best_accuracy);
  g_string_append_printf(line, _(", test loss %.3f acc %.1f%%"), f->best_test_loss,
                         100 * f->best_test_accuracy);
  if (c->save_best_path != NULL) {
    g_autofree char *display = g_filename_display_name(c->save_best_path);
    g_string_append_printf(line, _("; saved in %s"), display);
  } else {
    g_string_append(line, _("; not saved (--save-best FILE keeps it)"));
  }
  /* The file's name is the person's: printed as text, whatever it holds. */
  tdm_cli_line(stdout, "%s", line->str);
}

static void
print_finished(TdmCliPrinter *p, const TdmFinishedEvent *f)
{
  const TdmStartedEvent *s = &p->start;
  long steps = f->steps - s->start_step;
  /* Training time only: evaluation and saving would make the rate look worse than
   * what the devices did. */
  double rate = p->trained > 0 && steps > 0 ? (double)steps * s->batch / p->trained : 0;
  char params[32], samples[32], time[32];
  format_count(params, sizeof params, (gint64)s->parameters);
  format_count(samples, sizeof samples, (gint64)llround(rate));
  format_duration(time, sizeof time, f->elapsed);

  tdm_cli_printer_clear_bar(p);
  g_autofree char *early = tdm_finished_early_stop_text(f, TRUE);
  if (early != NULL) {
    g_autofree char *value = monitored(f->monitor, f->best_value);
    printf(ngettext("%s: its %s was not bettered in %d epoch\n",
                    "%s: its %s was not bettered in %d epochs\n", f->epochs_done - f->best_epoch),
           early, value, f->epochs_done - f->best_epoch);
  }
  if (f->stopped)
    printf(_("stopped after %ld of %ld steps"), f->steps, s->total_steps);
  else
    printf(_("finished"));
  if (isfinite(f->test_accuracy))
    printf(_(": test accuracy %.1f%% (loss %.3f)\n"), 100 * f->test_accuracy, f->test_loss);
  else
    printf(_(" before the first evaluation\n"));
  printf(_("  %ld steps in %s, %s samples/s; %s parameters on %d device%s ("), steps, time,
         samples, params, s->replicas, s->replicas == 1 ? "" : "s");
  for (int i = 0; i < s->replicas; i++)
    printf("%s%s", i ? ", " : "", s->device[i]);
  printf("), %s\n", s->replicas > 1 ? _("data parallel") : _("one replica"));
  print_best(p, f);
  fflush(stdout);
}

void
tdm_cli_printer_on_event(const TdmEvent *ev, gpointer printer)
{
  TdmCliPrinter *p = printer;

  if (p->recorder != NULL)
    tdm_run_recorder_add(ev, p->recorder);
  if (p->tensorboard != NULL)
    tdm_tensorboard_run_add(ev, p->tensorboard);
  if (ev->kind == TDM_EVENT_STARTED) {
    p->start = ev->started;
    p->started = TRUE;
    p->t_epoch = g_get_monotonic_time();
  }
  if (ev->kind == TDM_EVENT_STEP) {
    p->stepped = TRUE;
    p->trained = MAX(p->trained, ev->step.elapsed);
  }
  if (ev->kind == TDM_EVENT_EPOCH)
    p->trained = MAX(p->trained, ev->epoch.elapsed);

  if (p->json) {
    tdm_cli_print_json_event(ev);
    return;
  }
  if (p->quiet)
    return;

  if (!p->stop_told && g_cancellable_is_cancelled(p->cancellable)) {
    tdm_cli_printer_clear_bar(p);
    fputs("tandem-train: stopping (Ctrl-C again to quit at once)\n", stderr);
    p->stop_told = TRUE;
  }

  switch (ev->kind) {
  case TDM_EVENT_MEMORY:
    if (p->bar || p->log)
      print_memory(&ev->memory);
    break;
  case TDM_EVENT_STARTED:
    /* Skipped files are said once, whether or not progress is shown. */
    if (ev->started.notice[0] != '\0')
      tdm_cli_line(stderr, _("tandem-train: warning: %s\n"), ev->started.notice);
    if (ev->started.init_report[0] != '\0')
      tdm_cli_line(stderr, _("tandem-train: --init: %s\n"), ev->started.init_report);
    if (p->bar || p->log)
      print_started(p, &ev->started);
    break;
  case TDM_EVENT_STEP:
    if (p->bar)
      bar_draw(p, &ev->step);
    else if (p->log)
      log_step(p, &ev->step);
    break;
  case TDM_EVENT_SAVED:
    print_saved(p, &ev->saved);
    break;
  case TDM_EVENT_SETUP:
    if (p->bar || p->log)
      print_setup(p, &ev->setup);
    break;
  case TDM_EVENT_EPOCH:
    print_epoch(p, &ev->epoch);
    break;
  case TDM_EVENT_FINISHED:
    print_finished(p, &ev->finished);
    break;
  case TDM_EVENT_FAILED:
    tdm_cli_printer_clear_bar(p);   /* main() prints the message itself */
    break;
  case TDM_EVENT_DEVICES:
  case TDM_EVENT_PAUSED:
  case TDM_EVENT_RESUMED:
  case TDM_EVENT_PHASES:
  case TDM_EVENT_BATCH:
  case TDM_EVENT_PREDICTIONS:
    break;
  }
}

