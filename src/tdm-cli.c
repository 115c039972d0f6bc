/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli.c — tandem-train's commands: the table of them, the command line read into
 * one, and each command's checks before its work (tdm-cli.h). */
#include "tdm-build-config.h"
#include <glib/gi18n.h>
#include "tdm-cli.h"

#include "tdm-cli-classify.h"
#include "tdm-cli-guard.h"
#include "tdm-cli-help.h"
#include "tdm-cli-runs.h"
#include "tdm-cli-train.h"
#include "tdm-base-recipe.h"
#include "tdm-choice.h"
#include "tdm-dataset-folder.h"
#include "tdm-distributed.h"
#include "tdm-error.h"
#include "tdm-file.h"
#include "tdm-network-catalogue.h"
#include "tdm-experiments-enum-types.h"
#include "tdm-trainer.h"
#include "tdm-suggest.h"

#include <stdio.h>
#include <string.h>

/* A word a command takes before a value, standing for one of its options: `runs
 * show ID` is --show-run ID. */
typedef struct {
  const char *word;
  const char *flag;
} TdmCliVerb;

struct _TdmCliCommand {
  const char *name;
  const char *words;                 /* what follows its name, for the usage line (after
                                      * each verb's word, when it has verbs) */
  const char *summary;               /* N_() */
  const char *const *run_options;    /* the run's rows it takes ("*": all), or NULL */
  const char *const *options;        /* its own rows */
  const char *const *choosers;       /* the flags that chose it before there were
                                      * commands (legacy form only) */
  const char *outside;               /* N_(): the legacy form's refusal of one of its
                                      * options given without them (%s twice: the flag) */
  int (*run) (TdmCli *cli);
  const TdmCliVerb *verbs;           /* or NULL; ends with a NULL word */
  GType (*choices) (void);           /* or NULL: its one word is a name of this GEnum,
                                      * the usage line lists them */
};

static int run_train (TdmCli *cli);
static int run_classify (TdmCli *cli);
static int run_runs (TdmCli *cli);
static int run_export (TdmCli *cli);
static int run_scaling (TdmCli *cli);
static int run_compare (TdmCli *cli);
static int run_compare_strategies (TdmCli *cli);
static int run_lr_find (TdmCli *cli);
static int run_devices (TdmCli *cli);

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

static const TdmCliVerb runs_verbs[] = {
  {"show", "show-run"},
  {"export", "export-run"},
  {NULL, NULL},
};

static const TdmCliCommand commands[] = {
  {"train", "", N_("Train a network (the command when none is named)"), LIST("*"),
   LIST("resume", "config", "print-config", "record", "run-name", "history", "tensorboard",
        "pace", "prewarm", "distributed", "json", "quiet", "version"), NULL, NULL,
   run_train},
  {"classify", "IMAGE|DIR…", N_("Classify images with a trained network"),
   LIST("network", "init", "image-size", "color", "normalize"),
   LIST("resume", "top", "json", "quiet", "version"), LIST("classify"),
   N_("%s: only with --classify"), run_classify},
  {"runs", "ID", N_("List the run history, or print one run"), NULL,
   LIST("history", "export-tensorboard", "json", "quiet", "version"),
   LIST("list-runs", "show-run", "export-run"), N_("%s: goes with runs: tandem-train runs %s …"),
   run_runs, runs_verbs},
  {"export", "FILE", N_("Write a network as an ONNX model: a checkpoint's, or weights'"),
   LIST("network", "init", "image-size", "color", "normalize"),
   LIST("resume", "quiet", "version"), LIST("export-onnx"), N_("%s: only with --export-onnx"),
   run_export},
  {"scaling", "", N_("Measure the speed-up over 1, 2, … of the devices"),
   LIST("*"),
   LIST("config", "print-config", "record", "run-name", "history", "scaling-steps", "json",
        "quiet", "version"), LIST("scaling"), N_("%s: only with --scaling"), run_scaling,
   NULL, tdm_scaling_mode_get_type},
  {"compare", "", N_("Train on every device, then on the main one alone; compare the parameters"),
   LIST("*"),
   LIST("config", "print-config", "record", "history", "compare-steps", "json", "quiet",
        "version"), NULL, NULL, run_compare},
  {"compare-strategies", "", N_("Train with main, then with allreduce; compare their steps"),
   LIST("*"),
   LIST("config", "print-config", "record", "history", "compare-steps", "json", "quiet",
        "version"), NULL, NULL, run_compare_strategies},
  {"lr-find", "", N_("Find a learning rate: Smith's range test, its points as CSV"), LIST("*"),
   LIST("config", "record", "history", "lr-find-range", "lr-find-steps", "json", "quiet",
        "version"),
   LIST("lr-find"), N_("%s: only with --lr-find"), run_lr_find},
  {"devices", "", N_("List the devices"), NULL, LIST("version"), LIST("list-devices"), NULL,
   run_devices},
};

TdmCli *
tdm_cli_new(void)
{
  TdmCli *cli = g_new0(TdmCli, 1);
  guint n;
  cli->defaults = tdm_config_new();
  tdm_cli_settings_init(&cli->settings);
  tdm_cli_settings_init(&cli->settings_defaults);
  const TdmField *run_fields = tdm_config_fields(&n);
  cli->run_flags = tdm_cli_flags_new(run_fields, n, cli->defaults);
  const TdmField *fields = tdm_cli_settings_fields(&n);
  cli->flags = tdm_cli_flags_new(fields, n, &cli->settings_defaults);
  return cli;
}

void
tdm_cli_free(TdmCli *cli)
{
  if (cli == NULL)
    return;
  tdm_config_free(cli->defaults);
  tdm_cli_settings_clear(&cli->settings);
  tdm_cli_settings_clear(&cli->settings_defaults);
  tdm_cli_flags_free(cli->run_flags);
  tdm_cli_flags_free(cli->flags);
  g_strfreev(cli->words);
  g_free(cli);
}

int
tdm_cli_fail(int status, const char *flag, const char *message)
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

static const TdmCliCommand *
find_command(const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++)
    if (g_str_equal(commands[i].name, name))
      return &commands[i];
  return NULL;
}

/* What follows the command's name on its usage line (the shell completion reads its
 * lower-case words there) and in its messages: "strong|weak", the engine's names, for
 * a word that is a choice; "[show ID | export ID]" for verbs; else the table's words. */
static char *
command_words(const TdmCliCommand *command)
{
  if (command->choices != NULL) {
    g_autofree const char **names = tdm_choice_names(command->choices());
    return g_strjoinv("|", (char **)names);
  }
  if (command->verbs != NULL) {
    GString *text = g_string_new("[");
    for (const TdmCliVerb *verb = command->verbs; verb->word != NULL; verb++)
      g_string_append_printf(text, "%s%s %s", verb == command->verbs ? "" : " | ", verb->word,
                             command->words);
    g_string_append_c(text, ']');
    return g_string_free(text, FALSE);
  }
  return g_strdup(command->words);
}

/* The command's verb called `word`, or NULL. */
static const TdmCliVerb *
find_verb(const TdmCliCommand *command, const char *word)
{
  for (const TdmCliVerb *verb = command->verbs; verb != NULL && verb->word != NULL; verb++)
    if (g_str_equal(verb->word, word))
      return verb;
  return NULL;
}

static gboolean
listed(const char *const *list, const char *name)
{
  return list != NULL && g_strv_contains(list, name);
}

/* The options of `command` (NULL: every command's, the legacy form) as GOption
 * entries; the legacy form also has --classify, whose values are files. */
static GArray *
entries_for(TdmCli *cli, const TdmCliCommand *command, char ***classify)
{
  GArray *entries = g_array_new(TRUE, TRUE, sizeof(GOptionEntry));
  if (command == NULL || listed(command->run_options, "*"))
    tdm_cli_flags_add_entries(cli->run_flags, entries, NULL);
  else if (command->run_options != NULL)
    tdm_cli_flags_add_entries(cli->run_flags, entries, command->run_options);
  tdm_cli_flags_add_entries(cli->flags, entries, command != NULL ? command->options : NULL);
  if (command == NULL) {
    GOptionEntry entry = {"classify", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, classify,
                          _("Classify images with the --resume checkpoint and exit: files, or "
                            "every PNG and JPEG under a folder (repeat or list after)"),
                          "IMAGE|DIR"};
    g_array_append_val(entries, entry);
  }
  return entries;
}

/* Which command the flags of the legacy form choose, and by which flag. */
static const TdmCliCommand *
legacy_command(TdmCli *cli, gboolean classify, const char **chosen_by)
{
  const TdmCliSettings *s = &cli->settings;
  struct {
    gboolean given;
    const char *flag, *command;
  } choosers[] = {
    {s->list_devices, "--list-devices", "devices"},
    {s->export_onnx != NULL, "--export-onnx", "export"},
    {s->list_runs, "--list-runs", "runs"},
    {s->show_run != NULL, "--show-run", "runs"},
    {s->export_run != NULL, "--export-run", "runs"},
    {classify, "--classify", "classify"},
    {tdm_cli_flags_given(cli->flags, "scaling"), "--scaling", "scaling"},
    {s->lr_find, "--lr-find", "lr-find"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(choosers); i++)
    if (choosers[i].given) {
      *chosen_by = choosers[i].flag;
      return find_command(choosers[i].command);
    }
  *chosen_by = NULL;
  return find_command("train");
}

/* The legacy form takes every flag: one the command chosen does not take is refused,
 * naming the flag that chose the command, or the one that would take it. */
static gboolean
check_legacy_flags(TdmCli *cli, gboolean classify, GError **error)
{
  const TdmCliCommand *command = cli->command;
  g_autofree char *outside = NULL;
  if (!listed(command->run_options, "*"))
    outside = tdm_cli_flags_given_outside(cli->run_flags, command->run_options);
  if (outside == NULL) {
    g_autoptr(GStrvBuilder) own = g_strv_builder_new();
    g_strv_builder_addv(own, (const char **)command->options);
    if (command->choosers != NULL)
      g_strv_builder_addv(own, (const char **)command->choosers);
    g_auto(GStrv) accepted = g_strv_builder_end(own);
    outside = tdm_cli_flags_given_outside(cli->flags, (const char *const *)accepted);
  }
  if (outside == NULL && classify && !g_str_equal(command->name, "classify"))
    outside = g_strdup("--classify");
  if (outside == NULL)
    return TRUE;
  if (cli->chosen_by != NULL)
    return tdm_cli_bad_option(error, _("%s: cannot be combined with %s"), cli->chosen_by,
                              outside);
  /* The train command: the flag belongs to another, which says how it goes. */
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++)
    if (commands[i].outside != NULL && listed(commands[i].options, outside + 2))
      return tdm_cli_bad_option(error, _(commands[i].outside), outside, outside);
  return tdm_cli_bad_option(error, _("%s: not an option of tandem-train %s"), outside,
                            command->name);
}

/* After GOption refused an unknown option: the first unknown "--name" of `argv` (as
 * it was before parsing), with the nearest of the `entries` when one is near ("did you
 * mean --epochs?"), and where the options are listed. */
static void
explain_unknown_option(GArray *entries, int argc, char **argv, GError **error)
{
  g_autoptr(GPtrArray) names = g_ptr_array_new();
  for (guint i = 0; i < entries->len; i++)
    g_ptr_array_add(names, (gpointer)g_array_index(entries, GOptionEntry, i).long_name);
  g_ptr_array_add(names, (gpointer) "help");
  g_ptr_array_add(names, (gpointer) "help-all");
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (g_str_equal(arg, "--"))
      break;
    if (!g_str_has_prefix(arg, "--") || arg[2] == '\0')
      continue;
    g_autofree char *name = g_strndup(arg + 2, strcspn(arg + 2, "="));
    gboolean known = FALSE;
    for (guint k = 0; k < names->len && !known; k++)
      known = g_str_equal(name, g_ptr_array_index(names, k));
    if (known)
      continue;
    const char *near = tdm_suggest(name, (const char *const *)names->pdata, (int)names->len);
    g_clear_error(error);
    if (near != NULL)
      tdm_cli_bad_option(error, _("unknown option --%s; did you mean --%s? (--help lists every "
                                  "option)"), name, near);
    else
      tdm_cli_bad_option(error, _("unknown option --%s (--help lists every option)"), name);
    return;
  }
}

static gboolean
parse_context(TdmCli *cli, const TdmCliCommand *command, int *argc, char ***argv,
              char ***classify, GError **error)
{
  g_autoptr(GArray) entries = entries_for(cli, command, classify);
  g_autofree char *words = command != NULL ? command_words(command) : NULL;
  const char *usage = words != NULL && words[0] != '\0' ? words : NULL;
  GOptionContext *context = g_option_context_new(command != NULL ? usage : "[COMMAND]");
  g_option_context_set_translation_domain(context, GETTEXT_PACKAGE);
  g_autofree char *summary = tdm_cli_help_summary(command != NULL ? command->summary : NULL);
  g_option_context_set_summary(context, summary);
  g_autoptr(GString) list = g_string_new(NULL);
  for (guint i = 0; command == NULL && i < G_N_ELEMENTS(commands); i++)
    /* A name too long for the column goes on a line of its own, as GOption does. */
    g_string_append_printf(list, strlen(commands[i].name) > 9 ? "  %s\n            %s\n"
                                                              : "  %-9s %s\n",
                           commands[i].name, _(commands[i].summary));
  g_autofree char *description = tdm_cli_help_description(command != NULL ? command->name
                                                                            : NULL,
                                                          list->str, cli->defaults);
  g_option_context_set_description(context, description);
  g_option_context_add_main_entries(context, (GOptionEntry *)entries->data, NULL);
  g_autofree char **given = g_memdup2(*argv, (*argc + 1) * sizeof(char *));
  int given_count = *argc;
  gboolean ok = g_option_context_parse(context, argc, argv, error);
  g_option_context_free(context);
  if (!ok && g_error_matches(*error, G_OPTION_ERROR, G_OPTION_ERROR_UNKNOWN_OPTION))
    explain_unknown_option(entries, given_count, given, error);
  return ok;
}

/* The words after a command's options: what each command takes. */
static gboolean
take_words(TdmCli *cli, int argc, char **argv, char **classify, GError **error)
{
  const char *name = cli->command->name;
  g_autoptr(GStrvBuilder) words = g_strv_builder_new();
  /* --classify's files, unless another flag chose another command (refused then). */
  if (classify != NULL && g_str_equal(name, "classify"))
    g_strv_builder_addv(words, (const char **)classify);
  for (int i = 1; i < argc; i++)
    g_strv_builder_add(words, argv[i]);
  cli->words = g_strv_builder_end(words);
  guint n = g_strv_length(cli->words);
  const TdmCliVerb *verb = n > 0 ? find_verb(cli->command, cli->words[0]) : NULL;
  if (cli->chosen_by == NULL && g_str_equal(name, "export") && n == 1)
    return tdm_cli_flags_set(cli->flags, "export-onnx", cli->words[0]);
  /* The word of a choice is its option's value, checked as the option's. */
  if (cli->chosen_by == NULL && cli->command->choices != NULL && n == 1)
    return tdm_cli_flags_set(cli->flags, name, cli->words[0]);
  if (cli->chosen_by == NULL && verb != NULL && n == 2)
    return tdm_cli_flags_set(cli->flags, verb->flag, cli->words[1]);
  if (g_str_equal(name, "classify") && n > 0)
    return TRUE;
  if (n == 0 && !(cli->chosen_by == NULL && (g_str_equal(name, "export") ||
                                             cli->command->choices != NULL ||
                                             g_str_equal(name, "classify"))))
    return TRUE;
  if (n == 0 || (verb != NULL && n == 1)) {
    g_autofree char *wanted = command_words(cli->command);
    return tdm_cli_bad_option(error, _("%s: give %s (see tandem-train %s --help)"), name,
                              wanted, name);
  }
  return tdm_cli_bad_option(error, _("unexpected argument “%s” (see --help)"), cli->words[0]);
}

gboolean
tdm_cli_parse(TdmCli *cli, int argc, char **argv, GError **error)
{
  g_return_val_if_fail(cli != NULL && argv != NULL, FALSE);
  cli->argc = argc;
  cli->argv = argv;
  const TdmCliCommand *command =
      argc > 1 && argv[1][0] != '-' ? find_command(argv[1]) : NULL;
  g_auto(GStrv) classify = NULL;
  /* GOption takes its own copy of argv's pointers out as it parses. */
  g_autofree char **args = g_new0(char *, argc + 1);
  int n = 0;
  for (int i = 0; i < argc; i++)
    if (!(command != NULL && i == 1))
      args[n++] = argv[i];
  char **rest = args;
  if (command != NULL) {
    g_autofree char *prgname = g_strdup_printf("tandem-train %s", command->name);
    g_set_prgname(prgname);
  }
  gboolean parsed = parse_context(cli, command, &n, &rest, &classify, error);
  g_set_prgname("tandem-train");
  if (!parsed) {
    if ((*error)->domain == G_CONVERT_ERROR) {
      g_autofree char *flag = tdm_cli_undecodable_option(argc, argv);
      if (flag != NULL) {
        g_clear_error(error);
        return tdm_cli_bad_option(error, _("%s: its value is not valid text in the system's "
                                           "encoding (UTF-8 expected)"), flag);
      }
    }
    return FALSE;
  }
  if (!tdm_cli_flags_apply(cli->flags, &cli->settings, error))
    return FALSE;
  cli->command = command != NULL ? command : legacy_command(cli, classify != NULL,
                                                            &cli->chosen_by);
  if (!take_words(cli, n, rest, classify, error))
    return FALSE;
  /* A command's word is one of its options given another way: applied again. */
  if (!tdm_cli_flags_apply(cli->flags, &cli->settings, error))
    return FALSE;
  guint count;
  const TdmField *fields = tdm_cli_settings_fields(&count);
  if (!tdm_fields_check(fields, count, &cli->settings, error))
    return FALSE;
  if (command == NULL && !cli->settings.version &&
      !check_legacy_flags(cli, classify != NULL, error))
    return FALSE;
  return TRUE;
}

int
tdm_cli_run(TdmCli *cli)
{
  if (cli->settings.version) {
    printf("tandem-train %s\n", TDM_VERSION);
    return 0;
  }
  return cli->command->run(cli);
}

/* Train and scaling ------------------------------------------------------------ */

/* The flags given over `c` (the defaults, a --config file or a resumed run). */
static gboolean
apply_run_flags(TdmCli *cli, TdmConfig *c, GError **error)
{
  const TdmCliFlags *given = cli->run_flags;
  const char *resume = cli->settings.resume;
  const char *network = tdm_cli_flags_text(given, "network");
  if (tdm_cli_flags_given(given, "exact-chunk") && !tdm_cli_flags_given(given, "exact") &&
      !c->exact)
    return tdm_cli_bad_option(error, _("--exact-chunk: only with --exact"));
  /* A built-in network's recipe, under whatever else was given. A resumed run keeps
   * the recipe it was started with. */
  if (network != NULL && resume == NULL) {
    /* The recipe differs for a folder of photos: the dataset goes first. */
    const char *dataset = tdm_cli_flags_text(given, "dataset");
    if (dataset != NULL) {
      g_free(c->dataset);
      c->dataset = g_strdup(dataset);
    }
    g_free(c->network);
    c->network = g_strdup(network);
    tdm_config_apply_preset(c, network);
  }
  TdmOptimizerKind optimizer_before = c->optimizer;
  if (!tdm_cli_flags_apply(given, c, error))
    return FALSE;
  if (tdm_cli_flags_given(given, "resized-crop-ratio") && c->crop_scale[0] <= 0)
    return tdm_cli_bad_option(error, _("--resized-crop-ratio: only with --resized-crop"));
  /* Another optimizer named without --lr starts from its own usual rate, as in the
   * window. */
  if (!tdm_cli_flags_given(given, "lr") && c->optimizer != optimizer_before)
    c->lr = tdm_base_recipe_lr(c->optimizer);
  /* A limit counts steps in all, so an inherited one would end the resumed run
   * before it began; going on with a run means going on saving it where it was
   * found. */
  if (resume != NULL && !tdm_cli_flags_given(given, "max-steps"))
    c->max_steps = 0;
  if (resume != NULL && !tdm_cli_flags_given(given, "save")) {
    g_free(c->save_path);
    c->save_path = g_strdup(resume);
  }
  return TRUE;
}

typedef struct {
  const char *flag, *path;
} NamedPath;

/* An output must not be an input: compared by device and inode, so "./val/../val/b.st"
 * is val/b.st and a link is its target (the two outputs are one another's in
 * tdm_config_validate). Going on with a run saves it where it was found (--save is
 * --resume): that one pair is the point. */
static gboolean
check_paths(TdmCli *cli, const TdmConfig *c, GError **error)
{
  const TdmCliSettings *s = &cli->settings;
  const NamedPath outputs[] = {{"--save", c->save_path}, {"--save-best", c->save_best_path}};
  const NamedPath inputs[] = {{"--config", s->config},
                              {"--init", tdm_cli_flags_text(cli->run_flags, "init")},
                              {"--resume", s->resume}};
  for (gsize i = 0; i < G_N_ELEMENTS(outputs); i++) {
    if (outputs[i].path == NULL)
      continue;
    for (gsize k = 0; k < G_N_ELEMENTS(inputs); k++) {
      if (inputs[k].path == NULL || (i == 0 && g_str_equal(inputs[k].flag, "--resume")))
        continue;
      if (tdm_file_same(outputs[i].path, inputs[k].path))
        return tdm_cli_bad_option(error, _("%s %s: the same file as %s %s, which it would "
                                           "overwrite"), outputs[i].flag, outputs[i].path,
                                  inputs[k].flag, inputs[k].path);
    }
  }
  return TRUE;
}

/* A resumed run's weights, like its settings, come from its checkpoint: FALSE, having
 * said so, when --init is given beside --resume. */
static gboolean
check_init_with_resume(TdmCli *cli)
{
  if (cli->settings.resume == NULL || !tdm_cli_flags_given(cli->run_flags, "init"))
    return TRUE;
  tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, "--init",
               _("cannot be combined with --resume (a resumed run's weights come from its "
                 "checkpoint)"));
  return FALSE;
}

/* Flags that only mean something for some runs are refused, not ignored. */
static gboolean
check_run(TdmCli *cli, const TdmConfig *c, GError **error)
{
  const TdmCliSettings *s = &cli->settings;
  if (!check_paths(cli, c, error))
    return FALSE;
  if (!tdm_cli_check_save_path(tdm_cli_saves_here(c) ? c->save_path : NULL,
                               tdm_cli_flags_given(cli->run_flags, "save") || s->resume == NULL
                                   ? "--save"
                                   : "--resume",
                               error) ||
      !tdm_cli_check_save_path(tdm_cli_saves_here(c) ? c->save_best_path : NULL, "--save-best", error))
    return FALSE;
  if (s->history != NULL && !s->record)
    return tdm_cli_bad_option(error, _("--history: only with --record (the run history to keep "
                                       "the run in)"));
  if (tdm_cli_flags_given(cli->run_flags, "image-size") && !tdm_dataset_is_image_folder(c->dataset))
    return tdm_cli_bad_option(error, _("--image-size: only for a folder of images; dataset “%s” "
                                       "is not one"), c->dataset);
  return TRUE;
}

/* The run's configuration for train and scaling: from --resume's checkpoint, a
 * --config file or the defaults, with the flags given applied over it, resolved for
 * mpirun, and checked. NULL after saying why (the status in *status). */
static TdmConfig *
tdm_cli_build_config(TdmCli *cli, int *status)
{
  const TdmCliSettings *s = &cli->settings;
  g_autoptr(GError) error = NULL;
  *status = TDM_CLI_EXIT_BAD_INPUT;
  if (!check_init_with_resume(cli))
    return NULL;
  if (s->config != NULL && s->resume != NULL) {
    tdm_cli_fail(*status, "--config", _("cannot be combined with --resume (a resumed run's "
                                        "settings come from its checkpoint)"));
    return NULL;
  }
  /* A resumed run without --dataset looks for its dataset where the checkpoint says. */
  gboolean find_dataset = !tdm_cli_flags_given(cli->run_flags, "dataset");
  g_autoptr(TdmConfig) config =
      s->resume   ? tdm_trainer_checkpoint_config(s->resume, find_dataset, NULL, &error)
      : s->config ? tdm_cli_config_load(s->config, &error)
                  : tdm_config_new();
  if (config == NULL || !apply_run_flags(cli, config, &error) ||
      !tdm_distributed_resolve_devices(config, &error) ||
      !tdm_config_validate(config, &error) || !check_run(cli, config, &error)) {
    g_autofree char *source = config == NULL && s->config != NULL
                                  ? g_strdup("--config")
                                  : tdm_cli_source_of(cli, error, FALSE);
    tdm_cli_fail(*status, source, error->message);
    return NULL;
  }
  *status = 0;
  return g_steal_pointer(&config);
}

static int
print_config_or(TdmCli *cli, int (*run)(TdmCli *, const TdmConfig *))
{
  int status;
  g_autoptr(TdmConfig) config = tdm_cli_build_config(cli, &status);
  if (config == NULL)
    return status;
  if (cli->settings.print_config) {
    g_autofree char *json = tdm_config_to_json(config);
    printf("%s\n", json);
    return 0;
  }
  return run(cli, config);
}

static int
run_train(TdmCli *cli)
{
  g_autoptr(GError) error = NULL;
  const char *launcher = NULL;
  int processes = tdm_cli_launched_by_mpi(&launcher);
  if (!cli->settings.distributed && processes > 1) {
    g_autofree char *message = g_strdup_printf(
        _("started by mpirun as one of %d processes (%s) without --distributed: each would "
          "train a copy of its own; add --distributed to train one run across them"),
        processes, launcher);
    return tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, NULL, message);
  }
  if (cli->settings.distributed && !tdm_distributed_init(&cli->argc, &cli->argv, &error))
    return tdm_cli_fail(TDM_CLI_EXIT_RUNTIME, "--distributed", error->message);
  return print_config_or(cli, tdm_cli_train);
}

static int
run_scaling(TdmCli *cli)
{
  return print_config_or(cli, tdm_cli_scaling_run);
}

static int
compare(TdmCli *cli, const TdmConfig *config)
{
  return tdm_cli_experiment_run(cli, config, TDM_EXPERIMENT_COMPARE);
}

static int
compare_strategies(TdmCli *cli, const TdmConfig *config)
{
  return tdm_cli_experiment_run(cli, config, TDM_EXPERIMENT_STRATEGIES);
}

static int
run_compare(TdmCli *cli)
{
  return print_config_or(cli, compare);
}

static int
run_compare_strategies(TdmCli *cli)
{
  return print_config_or(cli, compare_strategies);
}

static int
run_lr_find(TdmCli *cli)
{
  return print_config_or(cli, tdm_cli_lr_find_run);
}

/* The others ------------------------------------------------------------------- */

/* classify's and export's network when it is not a checkpoint's: --network and --init
 * (someone's weights), with the input's --image-size, --color and --normalize, read
 * and checked as a run's would be. NULL after saying what is missing or wrong. */
static TdmConfig *
weights_config(TdmCli *cli, const char *flag)
{
  const TdmCliFlags *given = cli->run_flags;
  if (!tdm_cli_flags_given(given, "init") || !tdm_cli_flags_given(given, "network")) {
    tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, flag,
                 _("needs --resume CHECKPOINT (a trained run) or --network NAME --init FILE "
                   "(weights)"));
    return NULL;
  }
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmConfig) c = tdm_config_new();
  guint n;
  const TdmField *fields = tdm_config_fields(&n);
  if (!tdm_cli_flags_apply(given, c, &error) || !tdm_fields_check(fields, n, c, &error)) {
    tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, NULL, error->message);
    return NULL;
  }
  return g_steal_pointer(&c);
}

static int
run_classify(TdmCli *cli)
{
  const TdmCliSettings *s = &cli->settings;
  if (!check_init_with_resume(cli))
    return TDM_CLI_EXIT_BAD_INPUT;
  if (s->resume != NULL && tdm_cli_flags_given(cli->run_flags, "image-size"))
    return tdm_cli_fail(TDM_CLI_EXIT_BAD_INPUT, "--image-size",
                        _("not with --classify: images are resized to the checkpoint's input "
                          "size"));
  if (s->resume != NULL)
    return tdm_cli_classify(s->resume, (const char *const *)cli->words, s->top, s->json);
  g_autoptr(TdmConfig) c = weights_config(cli, "--classify");
  if (c == NULL)
    return TDM_CLI_EXIT_BAD_INPUT;
  return tdm_cli_classify_weights(c->network, c->init_path, c->image_size, c->image_channels,
                                  c->normalize, (const char *const *)cli->words, s->top,
                                  s->json);
}

static int
run_runs(TdmCli *cli)
{
  const TdmCliSettings *s = &cli->settings;
  if (s->export_tensorboard != NULL)
    return tdm_cli_runs_export_tensorboard(s->history, s->export_tensorboard, s->quiet);
  if (s->show_run != NULL)
    return tdm_cli_runs_show(s->history, s->show_run, s->json);
  if (s->export_run != NULL)
    return tdm_cli_runs_export(s->history, s->export_run);
  return tdm_cli_runs_list(s->history, s->json);
}

static int
run_export(TdmCli *cli)
{
  if (!check_init_with_resume(cli))
    return TDM_CLI_EXIT_BAD_INPUT;
  if (cli->settings.resume != NULL)
    return tdm_cli_export(cli, NULL);
  g_autoptr(TdmConfig) weights = weights_config(cli, "--export-onnx");
  return weights != NULL ? tdm_cli_export(cli, weights) : TDM_CLI_EXIT_BAD_INPUT;
}

static int
run_devices(TdmCli *cli)
{
  (void)cli;
  return tdm_cli_devices();
}

