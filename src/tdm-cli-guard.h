/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-guard.h — tandem-train's checks on its own input and output: the option
 * whose value is not text, a start by mpirun that --distributed did not ask for, stdout
 * checked once at exit, and lines that quote names from outside printed safely. Not
 * the option parsing (tdm-cli-options.c).
 */
#pragma once

#include <glib.h>
#include <stdio.h>

/* The option whose value GOption could not convert to UTF-8: "--name" of the first
 * argument that is not valid text (as --name=VALUE, or the word after --name); NULL
 * when none is found. Free with g_free. */
char *tdm_cli_undecodable_option (int argc, char **argv);

/* Registers, with atexit, the check of every write to stdout: a failed write (a
 * full disk, a closed pipe) ends the process with `status` and one message, not a
 * silent 0. */
void tdm_cli_check_stdout_at_exit (int status);

/* Prints one line to out: the text of format (a trailing newline optional), every
 * control character and non-UTF-8 byte in it escaped (tdm_printable), then a newline.
 * For every line that may quote a file, folder, class or run name: an escape sequence
 * or a newline in a name reaches the terminal as text, never as a command or a forged
 * line. */
void tdm_cli_line (FILE *out, const char *format, ...) G_GNUC_PRINTF (2, 3);
/* The number of processes an MPI launcher (mpirun, mpiexec, Hydra, MVAPICH) started
 * this one among, from the variable it sets (named in *variable), or 0 outside one:
 * without --distributed each of them would train a copy of its own. */
int tdm_cli_launched_by_mpi (const char **variable);
