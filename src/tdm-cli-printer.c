/* tdm-cli-printer.c — tandem-train's output while training: the live line (epoch,
 * progress bar, loss, accuracy, samples a second, time left) redrawn at most ten
 * times a second on a terminal, a plain line per epoch that a log keeps, the summary
 * at the end; JSON lines instead with --json (tdm-cli-json.c). */
#include "tdm-cli-printer.h"
#include "tdm-cli-json.h"

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
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
    return ws.ws_col;
  return 80;
}

static void
bar_draw(TdmCliPrinter *p, const TdmStepEvent *s)
{
  gint64 now = g_get_monotonic_time();
  if (p->bar_shown && now - p->t_draw < G_USEC_PER_SEC / 10)
    return;
  p->t_draw = now;

  double within = CLAMP(s->epoch_float - s->epoch, 0.0, 1.0);
  char rate[32], eta[32], head[64], tail[160];
  format_count(rate, sizeof rate, (gint64)llround(s->samples_per_second));
  if (s->eta >= 0)
    format_duration(eta, sizeof eta, s->eta);
  else
    g_strlcpy(eta, "?", sizeof eta);
  g_snprintf(head, sizeof head, "epoch %d/%d ", s->epoch + 1, p->start.epochs);
  g_snprintf(tail, sizeof tail, " %3d%%  loss %.3f  acc %.1f%%  %s samples/s  ETA %s",
             (int)floor(within * 100), s->train_loss, 100 * s->train_accuracy, rate, eta);

  /* One column short of the width, so the cursor never wraps to a new line. */
  int room = terminal_width() - 1 - (int)strlen(head) - (int)strlen(tail) - 2;
  int width = CLAMP(room, 0, 40);
  GString *line = g_string_new("\r");
  g_string_append(line, head);
  if (width >= 5) {
    int filled = (int)floor(within * width);
    g_string_append_c(line, '[');
    for (int i = 0; i < width; i++)
      g_string_append_c(line, i < filled ? '#' : '.');
    g_string_append_c(line, ']');
  }
  g_string_append(line, tail);
  g_string_append(line, "\033[K");
  fputs(line->str, stderr);
  fflush(stderr);
  g_string_free(line, TRUE);
  p->bar_shown = TRUE;
}

static void
print_started(TdmCliPrinter *p, const TdmStartedEvent *s)
{
  char params[32];
  format_count(params, sizeof params, (gint64)s->parameters);
  GString *devices = g_string_new(NULL);
  for (int i = 0; i < s->replicas; i++)
    g_string_append_printf(devices, "%s%s%s", i ? ", " : "", s->device[i],
                           i == s->main_replica && s->replicas > 1 ? " (main)" : "");
  printf("training %s, %s parameters, on %s (%d train, %d test)\n", s->network, params,
         s->dataset, s->train_count, s->test_count);
  printf("devices: %s; batch %d = ", devices->str, s->batch);
  for (int i = 0; i < s->replicas; i++)
    printf("%s%d", i ? " + " : "", s->shard[i]);
  printf("\n");
  if (s->start_step > 0 && s->steps_per_epoch > 0)
    printf("resuming at step %ld (epoch %ld of %d)\n", s->start_step,
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
  g_string_append_printf(line, "memory estimate: host %s", host);
  if (m->host_available != G_MAXUINT64) {
    g_autofree char *avail = g_format_size_full(m->host_available, G_FORMAT_SIZE_IEC_UNITS);
    g_string_append_printf(line, " (%s available", avail);
    if (m->largest_batch >= 0)
      g_string_append_printf(line, ", batch up to %d fits", m->largest_batch);
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
  printf("epoch %d/%d  train loss %.3f acc %.1f%%  test loss %.3f acc %.1f%%  %.1f s\n",
         e->epoch, p->start.epochs, e->train_loss, 100 * e->train_accuracy, e->test_loss,
         100 * e->test_accuracy, seconds);
  fflush(stdout);
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
  if (f->stopped)
    printf("stopped after %ld of %ld steps", f->steps, s->total_steps);
  else
    printf("finished");
  if (isfinite(f->test_accuracy))
    printf(": test accuracy %.1f%% (loss %.3f)\n", 100 * f->test_accuracy, f->test_loss);
  else
    printf(" before the first evaluation\n");
  printf("  %ld steps in %s, %s samples/s; %s parameters on %d device%s (", steps, time,
         samples, params, s->replicas, s->replicas == 1 ? "" : "s");
  for (int i = 0; i < s->replicas; i++)
    printf("%s%s", i ? ", " : "", s->device[i]);
  printf("), %s\n", s->replicas > 1 ? "data parallel" : "one replica");
  fflush(stdout);
}

void
tdm_cli_printer_on_event(const TdmEvent *ev, gpointer printer)
{
  TdmCliPrinter *p = printer;

  if (p->recorder != NULL)
    tdm_run_recorder_add(ev, p->recorder);
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
    if (p->bar)
      print_memory(&ev->memory);
    break;
  case TDM_EVENT_STARTED:
    /* Skipped files are said once, whether or not progress is shown. */
    if (ev->started.notice[0] != '\0')
      fprintf(stderr, "tandem-train: warning: %s\n", ev->started.notice);
    if (ev->started.init_report[0] != '\0')
      fprintf(stderr, "tandem-train: --init: %s\n", ev->started.init_report);
    if (p->bar)
      print_started(p, &ev->started);
    break;
  case TDM_EVENT_STEP:
    if (p->bar)
      bar_draw(p, &ev->step);
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

