/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-options.c — the rows of tandem-train's own options (tdm-cli-options.h). A
 * new option of the program is a member of TdmCliSettings and a row here, then the
 * command that takes it (the command table in tdm-cli.c).
 */
#include "tdm-build-config.h"
#include <glib/gi18n.h>
#include "tdm-cli-options.h"

#include "tdm-experiment.h"
#include "tdm-experiments-enum-types.h"
#include "tdm-error.h"
#include "tdm-history.h"
#include "tdm-training-enum-types.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define AT(field) offsetof(TdmCliSettings, field)
/* Every row's text is in the program's translations. */
#define ROW .domain = GETTEXT_PACKAGE

/* The history folder that --history replaces, from ~ (as a man page made from
 * --help should read on any machine). */
static char *
history_default(void)
{
  g_autoptr(TdmHistory) history = tdm_history_new(NULL);
  g_autofree char *folder = g_filename_display_name(tdm_history_get_folder(history));
  g_autofree char *home = g_filename_display_name(g_get_home_dir());
  if (g_str_has_prefix(folder, home) && folder[strlen(home)] == G_DIR_SEPARATOR)
    return g_strconcat("~", folder + strlen(home), NULL);
  return g_steal_pointer(&folder);
}

static const TdmField fields[] = {
  {ROW, .key = "resume", .flag = "resume", .type = TDM_FIELD_STRING, .offset = AT(resume),
   .flags = TDM_FIELD_FILE, .help = N_("Continue the run saved in a checkpoint"),
   .arg = "FILE"},
  {ROW, .key = "config", .flag = "config", .type = TDM_FIELD_STRING, .offset = AT(config),
   .flags = TDM_FIELD_FILE,
   .help = N_("Take the settings from FILE: --print-config's output, a run file of the "
              "history or a checkpoint (flags given override them)"), .arg = "FILE"},
  {ROW, .key = "print-config", .flag = "print-config", .type = TDM_FIELD_BOOL,
   .offset = AT(print_config),
   .help = N_("Print the run's settings as JSON (for --config) and exit")},
  {ROW, .key = "record", .flag = "record", .type = TDM_FIELD_BOOL, .offset = AT(record),
   .help = N_("Keep the run in the run history (the window lists it)")},
  {ROW, .key = "run-name", .flag = "run-name", .type = TDM_FIELD_STRING, .offset = AT(run_name),
   .help = N_("Name of the recorded run (default: its date)"), .arg = "NAME"},
  {ROW, .key = "tensorboard", .flag = "tensorboard", .type = TDM_FIELD_STRING,
   .offset = AT(tensorboard), .flags = TDM_FIELD_FILE,
   .help = N_("Write the run's scalars as TensorBoard event files, in a folder of DIR named "
              "after the run (--run-name, else its date)"), .arg = "DIR"},
  {ROW, .key = "history", .flag = "history", .type = TDM_FIELD_STRING, .offset = AT(history),
   .flags = TDM_FIELD_FILE, .default_text = history_default,
   .help = N_("Run history folder (default %s)"), .arg = "DIR"},
  {ROW, .key = "pace", .flag = "pace", .type = TDM_FIELD_DOUBLE, .offset = AT(pace),
   .min = TDM_PACE_MIN, .max = TDM_PACE_MAX,
   .flags = TDM_FIELD_ZERO_OFF | TDM_FIELD_CHECK_SAYS_VALUE,
   .check = N_("%s is not a number of steps a second from %s to %s (0: no limit)"),
   .help = N_("At most N steps a second, to watch a small network (default %s: no limit)"),
   .arg = "N"},
  {ROW, .key = "prewarm", .flag = "prewarm", .type = TDM_FIELD_CHOICE, .offset = AT(prewarm),
   .choices = tdm_prewarm_get_type, .fallback = "auto",
   .help = N_("Before the clock starts, one untimed step of each batch shape, then undone: "
              "%s (auto: on with a GPU)"), .arg = "WHEN"},
  {ROW, .key = "distributed", .flag = "distributed", .type = TDM_FIELD_BOOL,
   .offset = AT(distributed),
   .help = N_("Run as one rank of mpirun -np N, a device each (see below)")},
  {ROW, .key = "top", .flag = "top", .type = TDM_FIELD_INT, .offset = AT(top), .fallback = "3",
   .min = 1, .max = 1000, .check = N_("give a number of classes from %s to %s"),
   .help = N_("With --classify: how many classes to print per image (default %s)"),
   .arg = "N"},
  {ROW, .key = "export-onnx", .flag = "export-onnx", .type = TDM_FIELD_STRING,
   .offset = AT(export_onnx), .flags = TDM_FIELD_FILE,
   .help = N_("Write the --resume checkpoint's network (or --network's with --init's "
              "weights) as an ONNX model for inference and exit (input: float NCHW images "
              "in [0, 1]; output: logits)"), .arg = "FILE"},
  {ROW, .key = "scaling", .flag = "scaling", .type = TDM_FIELD_CHOICE, .offset = AT(scaling),
   .choices = tdm_scaling_mode_get_type,
   .help = N_("Instead of training: a scaling run over the first 1, 2, … of the devices, "
              "%s (strong: the same global batch; weak: the same batch per device); "
              "--record keeps it"), .arg = "MODE"},
  {ROW, .key = "scaling-steps", .flag = "scaling-steps", .type = TDM_FIELD_LONG,
   .offset = AT(scaling_steps), .fallback = "200", .min = 1, .max = 1000000,
   .check = N_("give a whole number from %s to %s"),
   .help = N_("With --scaling: steps a run at each device count (default %s; 3–5 runs, one "
              "BLAS thread per CPU worker, the median with min–max)"), .arg = "N"},
  {ROW, .key = "compare-steps", .flag = "compare-steps", .type = TDM_FIELD_LONG,
   .offset = AT(compare_steps), .fallback = G_STRINGIFY(TDM_COMPARE_STEPS), .min = 1,
   .max = 1000000, .check = N_("give a whole number from %s to %s"),
   .help = N_("With compare and compare-strategies: steps each of the two runs trains "
              "(default %s)"), .arg = "N"},
  {ROW, .key = "lr-find", .flag = "lr-find", .type = TDM_FIELD_BOOL, .offset = AT(lr_find),
   .help = N_("Instead of training: a learning-rate range test (Smith's); prints each step's "
              "rate and loss as CSV and suggests a rate")},
  {ROW, .key = "lr-find-range", .flag = "lr-find-range", .type = TDM_FIELD_NUMBERS,
   .offset = AT(lr_find_range), .count = 2, .fallback = "1e-7,10", .min = 0, .max = 1e6,
   .flags = TDM_FIELD_MIN_OPEN,
   .check = N_("give the first and last rate, 0 < A < B ≤ 1e6, e.g. 1e-7,10"),
   .help = N_("With --lr-find: the first and last rate, growing exponentially (default %s)"),
   .arg = "A,B"},
  {ROW, .key = "lr-find-steps", .flag = "lr-find-steps", .type = TDM_FIELD_INT,
   .offset = AT(lr_find_steps), .fallback = "100", .min = 5, .max = 100000,
   .check = N_("give a whole number from %s to %s"),
   .help = N_("With --lr-find: steps from the first rate to the last (default %s)"),
   .arg = "N"},
  {ROW, .key = "list-runs", .flag = "list-runs", .type = TDM_FIELD_BOOL, .offset = AT(list_runs),
   .help = N_("List the run history (as \"tandem-train runs\") and exit")},
  {ROW, .key = "show-run", .flag = "show-run", .type = TDM_FIELD_STRING, .offset = AT(show_run),
   .help = N_("Print a run of the history: settings, epochs, outcome"), .arg = "ID"},
  {ROW, .key = "export-run", .flag = "export-run", .type = TDM_FIELD_STRING,
   .offset = AT(export_run),
   .help = N_("Print a run of the history as CSV (the window's export)"), .arg = "ID"},
  {ROW, .key = "export-tensorboard", .flag = "export-tensorboard", .type = TDM_FIELD_STRING,
   .offset = AT(export_tensorboard), .flags = TDM_FIELD_FILE,
   .help = N_("With runs: write every run of the history as TensorBoard event files, a "
              "folder of DIR each, and exit"), .arg = "DIR"},
  {ROW, .key = "list-devices", .flag = "list-devices", .type = TDM_FIELD_BOOL,
   .offset = AT(list_devices), .help = N_("List the devices and exit")},
  {ROW, .key = "json", .flag = "json", .type = TDM_FIELD_BOOL, .offset = AT(json),
   .help = N_("Print each event as a JSON line on stdout")},
  {ROW, .key = "quiet", .flag = "quiet", .short_flag = 'q', .type = TDM_FIELD_BOOL,
   .offset = AT(quiet), .help = N_("Print only errors (and JSON lines with --json)")},
  {ROW, .key = "version", .flag = "version", .type = TDM_FIELD_BOOL, .offset = AT(version),
   .help = N_("Print the version and exit")},
};

const TdmField *
tdm_cli_settings_fields(guint *count)
{
  *count = G_N_ELEMENTS(fields);
  return fields;
}

void
tdm_cli_settings_init(TdmCliSettings *s)
{
  tdm_fields_init(fields, G_N_ELEMENTS(fields), s);
}

void
tdm_cli_settings_clear(TdmCliSettings *s)
{
  tdm_fields_clear(fields, G_N_ELEMENTS(fields), s);
}
