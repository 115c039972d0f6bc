/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-history.h — what test-history.c and its parts share (test-history-compare.c,
 * test-history-experiments.c): the runs' settings on the synthetic dataset, a training
 * run recorded into a history, a history folder of its own and its removal, text
 * appended to a run file (all defined in test-history.c); and each part's registration
 * of its tests. */
#pragma once

#include "tdm-config.h"
#include "tdm-history.h"

#include <glib.h>

/* A run of fc16,relu,fc10 on the synthetic dataset's IDX files, on `devices`, one epoch
 * of at most `steps` steps (0: the whole epoch), seed 5. */
TdmConfig *config (const char *devices, long steps);
/* Trains `cfg` recording into `history`; returns the run's id. */
char *record_run (TdmHistory *history, const TdmConfig *cfg, const char *name);
/* A new empty folder under the temporary directory, and its removal with its files. */
char *temp_folder (void);
void remove_folder (const char *dir);
/* Appends `text` to the file at `path` (a crash's cut line, a hostile one). */
void append (const char *path, const char *text);

/* Registers test-history-compare.c's tests and test-history-experiments.c's. */
void test_history_add_compare (void);
void test_history_add_experiments (void);
