/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli.h — tandem-train's commands: train (the default), classify, runs, export,
 * scaling and devices, each with the options it takes and its checks in one place.
 *
 * `tandem-train COMMAND [OPTION…] [WORD…]` names the command; the flags that chose a
 * mode before there were commands (--classify, --list-runs, --show-run, --export-run,
 * --export-onnx, --scaling, --list-devices) still do, and a flag that the mode does
 * not take is refused by name. The run's options are the engine's field table
 * (tdm_config_fields()), the program's own are tdm-cli-options.h's. Not what a
 * command does once its input is checked (tdm-cli-train.c, tdm-cli-classify.c,
 * tdm-cli-runs.c, tdm-cli-scaling.c).
 */
#pragma once

#include <glib.h>

#include "tdm-cli-flags.h"
#include "tdm-cli-options.h"
#include "tdm-config.h"

G_BEGIN_DECLS

enum {
  TDM_CLI_EXIT_RUNTIME = 1,
  TDM_CLI_EXIT_BAD_INPUT = 2,
  TDM_CLI_EXIT_INTERRUPTED = 130,
};

typedef struct _TdmCliCommand TdmCliCommand;

typedef struct {
  const TdmCliCommand *command;
  const char *chosen_by;       /* the flag that chose it ("--classify"), or NULL */
  TdmConfig *defaults;         /* the engine's, which help names */
  TdmCliSettings settings;     /* the program's options, as given */
  TdmCliSettings settings_defaults;
  TdmCliFlags *run_flags;      /* the run's options as given */
  TdmCliFlags *flags;          /* the program's */
  char **words;                /* the command's words: images, a run's id, a file */
  int argc;                    /* the command line, for mpirun's set-up */
  char **argv;
} TdmCli;

TdmCli *tdm_cli_new (void);
void tdm_cli_free (TdmCli *cli);

/* Reads the command line into `cli`: the command, its options and words, each
 * option converted and checked against its row. FALSE with the message to print
 * (TDM_ENGINE_ERROR_INVALID_OPTION, or GOption's own). */
gboolean tdm_cli_parse (TdmCli *cli, int argc, char **argv, GError **error);

/* Runs the command parsed; the exit status. */
int tdm_cli_run (TdmCli *cli);

/* Prints "tandem-train: [rank N: ][FLAG: ]MESSAGE" on stderr; returns `status`. */
int tdm_cli_fail (int status, const char *flag, const char *message);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmCli, tdm_cli_free)

G_END_DECLS
