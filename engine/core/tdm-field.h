/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-field.h — settings described as rows of a table, and everything done with them
 * done once, by row: the default, reading a value typed by a person, the range check,
 * JSON both ways, the text for people, the help line.
 *
 * A table describes the fields of one struct (each row has its offset): the run's
 * configuration (tdm-config-fields.c, tdm_config_fields()) and the CLI's own options
 * use the same rows, so a new option is one row plus its meaning. Not the rules that
 * tie fields together (tdm_config_validate()) nor what a value does.
 */
#pragma once

#include <glib-object.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef enum {
  TDM_FIELD_STRING,        /* char *: a name, a spec, a file; NULL: none */
  TDM_FIELD_LIST,          /* char **: "a,b" or the flag repeated; NULL: empty */
  TDM_FIELD_DEVICES,       /* TdmDeviceId[TDM_MAX_REPLICAS] and the int count after it
                            * (`count_offset`) */
  TDM_FIELD_INT,           /* int; or a GEnum's value, by name, with `choices` */
  TDM_FIELD_LONG,          /* long */
  TDM_FIELD_SEED,          /* guint64 (JSON: a string past G_MAXINT64) */
  TDM_FIELD_SIZE,          /* size_t */
  TDM_FIELD_DOUBLE,        /* double */
  TDM_FIELD_NUMBERS,       /* double[count]: "a,b" (a range, a triple); each in the
                            * row's range; JSON: an array */
  TDM_FIELD_BOOL,          /* gboolean: --flag sets it (--no_flag clears it); with
                            * `choices`, a two-valued GEnum's name sets it */
  TDM_FIELD_CHOICE,        /* an enum (int-sized), named by its GEnum's nicks */
} TdmFieldType;

typedef enum {
  TDM_FIELD_MIN_OPEN = 1 << 0,     /* the value must be above min, not at it */
  TDM_FIELD_MAX_OPEN = 1 << 1,     /* below max */
  TDM_FIELD_ZERO_OFF = 1 << 2,     /* 0 (off, automatic) is allowed besides the range */
  TDM_FIELD_REQUIRED = 1 << 3,     /* a string that must be given (not NULL) */
  TDM_FIELD_NULL_NONE = 1 << 4,    /* a NULL string is written "none" */
  TDM_FIELD_FILE = 1 << 12,        /* a string that is a file name (not necessarily UTF-8) */
  TDM_FIELD_CHECK_SAYS_VALUE = 1 << 13, /* the check names the value itself, first:
                                         * "--pace: 1e-09 is not …", three %s */
  TDM_FIELD_ONE_FOR_ALL = 1 << 14,  /* NUMBERS: one number given stands for each */
  /* JSON: by default written always and optional when read (absent: the default). */
  TDM_FIELD_JSON_REQUIRED = 1 << 5, /* must be present when read */
  TDM_FIELD_JSON_WHEN_SET = 1 << 6, /* written only when not the default */
  TDM_FIELD_JSON_NULLABLE = 1 << 7, /* a string that may be null */
  TDM_FIELD_JSON_NUMBER = 1 << 8,   /* an INT with choices: a number in JSON, not a name */
  TDM_FIELD_NOT_SAVED = 1 << 9,     /* how a run is executed, not what it computes */
  /* The description for people (tdm_fields_describe()). */
  TDM_FIELD_DESCRIBE = 1 << 10,
  TDM_FIELD_DESCRIBE_WHEN_SET = 1 << 11,
} TdmFieldFlags;

typedef struct _TdmField TdmField;

struct _TdmField {
  const char *key;         /* JSON's and the description's name: "batch", "crop_pad" */
  const char *domain;      /* the gettext domain of check and help; NULL: the engine's */
  const char *flag;        /* the CLI's, without "--": "batch", "crop"; NULL: none */
  TdmFieldType type;
  gsize offset;            /* in the struct the table describes */
  GType (*choices) (void); /* CHOICE's GEnum; INT's and BOOL's names, if given by name */
  const char *fallback;    /* the default, as a person types it ("100", "adam",
                            * "cpu"); NULL: zero, FALSE, NULL */
  double min, max;         /* the accepted range of a number (both 0: any) */
  TdmFieldFlags flags;
  const char *check;       /* N_(): what a good value is, after "--flag VALUE: "; may
                            * name min and max with two %s, in that order */
  const char *help;        /* N_(): --help's line; one %s is the default (a choice's
                            * names, the default marked) */
  const char *arg;         /* --help's name of the value ("N", "FILE"); NULL: a switch */
  const char *no_flag;     /* BOOL: the flag that clears it ("no-test-flip"), or NULL, */
  const char *no_help;     /* and its help line, N_() */
  char short_flag;         /* a one-letter flag ('q'), or 0 */
  const char *settings;    /* the window's GSettings key that keeps it, or NULL */
  const char *label;       /* the description's name, when not `key` ("main") */
  gsize count_offset;      /* DEVICES: where the count is */
  int count;               /* NUMBERS: how many */
  /* Optional: the default's text for help when it is no one value (--lr's rate per
   * optimizer); the description's text when the value alone says too little
   * ("cuda:1 (replica 2)"); whether the description shows it at all. */
  char *(*default_text) (void);
  char *(*describe) (gconstpointer target);
  gboolean (*shown) (gconstpointer target);
};

/* The row called `key` (or whose flag is `key`), or NULL. */
const TdmField *tdm_fields_find (const TdmField *fields, guint n, const char *key);

/* Every row's default into `target` (zeroed first by the caller); strings and lists
 * are allocated. */
void tdm_fields_init (const TdmField *fields, guint n, gpointer target);
/* Frees what the rows own in `target`; copies them from `from` into `to` (the rest
 * of the struct is the caller's to copy). */
void tdm_fields_clear (const TdmField *fields, guint n, gpointer target);
void tdm_fields_copy (const TdmField *fields, guint n, gpointer to, gconstpointer from);

/* Sets the field from text as a person types it; FALSE with
 * TDM_ENGINE_ERROR_INVALID_OPTION (DEVICE for a device list) naming the flag ("--batch:
 * “abc” is not a whole number") and the field untouched. Ranges are not checked here. */
gboolean tdm_field_parse (const TdmField *field, gpointer target, const char *text,
                          GError **error);
/* A LIST's value given as "a,b", once or repeated: one list. */
gboolean tdm_field_set_list (const TdmField *field, gpointer target,
                             const char *const *given);
/* Each row's range, choice and string checks, in the table's order; the first that
 * fails sets its error: "--crop 70: give the padding in pixels, 0 (off) to 64". */
gboolean tdm_fields_check (const TdmField *fields, guint n, gconstpointer target,
                           GError **error);

/* The value as a person types it ("0.9", "adam", "cpu,cuda:0", "a,b"); NULL for an
 * unset string or list. */
char *tdm_field_text (const TdmField *field, gconstpointer target);
/* Whether the field holds what `other` (the defaults) holds. */
gboolean tdm_field_equal (const TdmField *field, gconstpointer target, gconstpointer other);

/* --help's line for the row, translated, with the default of `defaults` in it; and
 * its --no- flag's. */
char *tdm_field_help (const TdmField *field, gconstpointer defaults);
const char *tdm_field_no_help (const TdmField *field);

/* JSON: every saved row as a member of the open object, and back. Reading starts
 * from what `target` holds (the defaults); errors are INVALID_OPTION, "run
 * configuration: field “batch” must be a whole number". */
void tdm_fields_to_json (const TdmField *fields, guint n, gconstpointer target,
                         gconstpointer defaults, JsonBuilder *builder);
gboolean tdm_fields_from_json (const TdmField *fields, guint n, JsonObject *object,
                               gpointer target, GError **error);

/* The described rows as a NULL-terminated array of alternating keys and values. */
char **tdm_fields_describe (const TdmField *fields, guint n, gconstpointer target,
                            gconstpointer defaults);

/* The flags that turn `defaults` into `target`, as a command line would give them:
 * "--epochs 5 --batch 512 --test-flip". Rows without a flag are left out. */
char *tdm_fields_to_flags (const TdmField *fields, guint n, gconstpointer target,
                           gconstpointer defaults);

G_END_DECLS
