/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-guard.c — the checks of tdm-cli-guard.h. */
#include "tdm-cli-guard.h"
#include <glib/gi18n.h>
#include "tdm-printable.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *
tdm_cli_undecodable_option(int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    g_autofree char *text = g_locale_to_utf8(argv[i], -1, NULL, NULL, NULL);
    if (text != NULL)
      continue;
    const char *eq = strchr(argv[i], '=');
    if (g_str_has_prefix(argv[i], "--") && eq != NULL)
      return g_strndup(argv[i], eq - argv[i]);
    if (i > 1 && g_str_has_prefix(argv[i - 1], "-"))
      return g_strdup(argv[i - 1]);
  }
  return NULL;
}

int
tdm_cli_launched_by_mpi(const char **variable)
{
  /* Open MPI, PMI (MPICH's Hydra, Intel MPI), PMIx, MVAPICH. */
  static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                      "MV2_COMM_WORLD_SIZE"};
  for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
    const char *value = g_getenv(names[i]);
    guint64 size;
    if (value != NULL && g_ascii_string_to_unsigned(value, 10, 1, G_MAXINT, &size, NULL)) {
      if (variable != NULL)
        *variable = names[i];
      return (int)size;
    }
  }
  return 0;
}

static int exit_status = 1;

/* Once, at exit, the way coreutils' close_stdout does: JSON lines, --classify's
 * results, --help (which GOption prints and exits on) and --list-devices alike. */
static void
check_stdout(void)
{
  errno = 0;
  gboolean flushed = fflush(stdout) == 0;
  int saved = errno;
  if (flushed && !ferror(stdout))
    return;
  /* An earlier write's failure leaves only the stream's error flag behind. */
  fprintf(stderr, _("tandem-train: cannot write to the standard output: %s\n"),
          !flushed && saved != 0 ? g_strerror(saved) : "a write failed");
  _exit(exit_status);
}

void
tdm_cli_check_stdout_at_exit(int status)
{
  exit_status = status;
  atexit(check_stdout);
}

void
tdm_cli_line(FILE *out, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *text = g_strdup_vprintf(format, args);
  va_end(args);
  gsize len = strlen(text);
  if (len > 0 && text[len - 1] == '\n')
    text[len - 1] = '\0';
  g_autofree char *safe = tdm_printable(text);
  fprintf(out, "%s\n", safe);
}
