/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tandem-train.c — the headless trainer: the engine's choices as flags, a progress
 * bar on a terminal, plain epoch lines in a log, JSON lines with --json.
 *
 * It reads the command line into one of tandem-train's commands (tdm-cli.c) and runs
 * it; all training logic lives in the engine. Exit status: 0 done, 1 a failure while
 * running, 2 bad input (options, dataset, network spec, devices, a checkpoint to
 * resume from), 130 stopped by Ctrl-C.
 */
#include "tdm-build-config.h"
#include <glib/gi18n.h>
#include "tdm-distributed.h"
#include "tdm-i18n.h"

#include <libintl.h>
#include <locale.h>

#include "tdm-cli.h"
#include "tdm-cli-guard.h"

int
main(int argc, char **argv)
{
  tdm_cli_check_stdout_at_exit(TDM_CLI_EXIT_RUNTIME);
  setlocale(LC_ALL, "");
  /* Decimal points in flags, logs and JSON are '.', whatever the locale. */
  setlocale(LC_NUMERIC, "C");
  /* The program's messages; the engine binds its own domain itself. */
  tdm_i18n_bind(GETTEXT_PACKAGE, "po");
  textdomain(GETTEXT_PACKAGE);
  g_set_prgname("tandem-train");

  g_autoptr(TdmCli) cli = tdm_cli_new();
  g_autoptr(GError) error = NULL;
  int status = tdm_cli_parse(cli, argc, argv, &error)
                   ? tdm_cli_run(cli)
                   : tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, NULL, error->message);
  if (tdm_distributed_active()) {
    /* A rank that failed ends the others, which may be waiting for it in a
     * collective; when all went well they all get here and finish together. */
    if (status != 0 && status != TDM_CLI_EXIT_INTERRUPTED)
      tdm_distributed_abort(status);
    tdm_distributed_finalize();
  }
  return status;
}
