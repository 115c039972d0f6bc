/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-cache.c — the convolution engine's choices on disk (tdm-backend-cuda-conv-cache.h).
 *
 * The file:
 *   tandem-conv-choices 7
 *   <key>\t<candidate>\t<milliseconds>
 * with keys of printable ASCII without tabs and the names of candidates
 * (tdm-backend-cuda-conv-name.h: any other name is damage) (version 2: choices made within
 * the workspace budget, tdm-backend-cuda-conv-budget.h; version 3: with cuDNN's plans in
 * chunks of samples, which version 2's untimed "im2col" for a bn's large input would
 * hide; version 4: with cuDNN's fused plans for a bn's input, "cudnn-fused:…", which
 * version 3's choices for those keys were made without; version 5: choices among the
 * candidates the screen kept, tdm-backend-cuda-conv-screen.h, where version 4 may hold
 * one it leaves out now — cuDNN's engine 62 for a 1×1 weight gradient written as bf16 —
 * that a choice found on disk would bring back untimed; version 6: float32 and tf32
 * choices made within a slack of their own chunk, 256 MiB, where version 5's 64 MiB
 * left out cuDNN plans that need more, e.g. engine 70 for a CNN's batch of 1024; version
 * 7: with a strided input gradient by phases, "cudnn-phases:…", which version 6's
 * choices for those keys were made without; a file of another version is ignored and
 * rebuilt). A replica's column workspace
 * after its choices is a line of the same form, "workspace <SHA-1 of the replica's
 * configuration>" for the key and the bytes for the candidate: the next run of that
 * configuration, whose choices come from this file, sizes its memory by it. It is read whole, once per
 * model, within limits (size, line count, field lengths); anything outside them and
 * the file is ignored and rebuilt from the choices this process makes. It is replaced
 * whole at each new choice through tdm_file_replace_contents: a temporary beside it,
 * renamed over it. Anything but a regular file at its place — a symbolic link, dangling
 * or not, a folder, a FIFO — is neither read nor written, so a link someone planted
 * in the cache folder cannot make a run overwrite another file. Compiled without CUDA
 * too, so its file code is tested on any machine. */
#include "tdm-backend-cuda-conv-cache.h"
#include "tdm-backend-cuda-conv-name.h"
#include "tdm-file.h"

#include <errno.h>
#include <string.h>

#define CACHE_HEADER "tandem-conv-choices 7"
#define CACHE_MAX_BYTES ((gsize)4 << 20)
#define CACHE_MAX_LINES 65536
#define CACHE_MAX_FIELD 160
#define WORKSPACE_PREFIX "workspace "

typedef struct {
  char *path;
  GHashTable *entries;         /* key → "name\tms" */
  gboolean unwritable;         /* a write failed: said once, not tried again */
} CacheFile;

static GMutex cache_lock;
static GHashTable *files;      /* model → CacheFile */

char *
tdm_conv_cache_path(const char *model)
{
  const char *env = g_getenv("TANDEM_CONV_CACHE");
  if (env != NULL && g_str_equal(env, "0"))
    return NULL;
  if (env != NULL && env[0] != '\0')
    return g_strdup(env);
  /* The model as a file name: letters, digits, '.', '-'; anything else becomes '-'. */
  g_autofree char *safe = g_strdup(model);
  for (char *p = safe; *p != '\0'; p++)
    if (!g_ascii_isalnum(*p) && *p != '.' && *p != '-')
      *p = '-';
  g_autofree char *name = g_strdup_printf("conv-%s.txt", safe);
  return g_build_filename(g_get_user_cache_dir(), "tandem", name, NULL);
}

static gboolean
field_ok(const char *f)
{
  size_t n = strlen(f);
  if (n == 0 || n > CACHE_MAX_FIELD)
    return FALSE;
  for (const char *p = f; *p != '\0'; p++)
    if (!g_ascii_isprint(*p))
      return FALSE;
  return TRUE;
}

/* The entries of a well-formed file, or NULL (with *why) for any damage. */
static GHashTable *
parse(const char *text, gsize length, char **why)
{
  if (length > CACHE_MAX_BYTES) {
    *why = g_strdup_printf("larger than %zu bytes", (size_t)CACHE_MAX_BYTES);
    return NULL;
  }
  if (memchr(text, '\0', length) != NULL) {
    *why = g_strdup("a NUL byte");
    return NULL;
  }
  g_auto(GStrv) lines = g_strsplit(text, "\n", CACHE_MAX_LINES + 2);
  if (lines[0] == NULL || !g_str_equal(lines[0], CACHE_HEADER)) {
    *why = g_strdup("not a Tandem convolution cache (its first line)");
    return NULL;
  }
  if (g_strv_length(lines) > CACHE_MAX_LINES + 1) {
    *why = g_strdup_printf("more than %d lines", CACHE_MAX_LINES);
    return NULL;
  }
  GHashTable *entries = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  for (int i = 1; lines[i] != NULL; i++) {
    if (lines[i][0] == '\0' && lines[i + 1] == NULL)
      break; /* the final newline */
    g_auto(GStrv) f = g_strsplit(lines[i], "\t", 4);
    char *end = NULL;
    double ms = 0.0;
    if (g_strv_length(f) == 3) {
      errno = 0;
      ms = g_ascii_strtod(f[2], &end);
    }
    if (g_strv_length(f) != 3 || !field_ok(f[0]) || !field_ok(f[1]) || end == f[2] ||
        end == NULL || *end != '\0' || errno != 0 || !(ms >= 0.0 && ms < 1e9)) {
      *why = g_strdup_printf("line %d is not “key, candidate, milliseconds”", i + 1);
      g_hash_table_destroy(entries);
      return NULL;
    }
    /* A choice names a candidate (tdm-backend-cuda-conv-name.h); a workspace line, bytes. */
    if (!g_str_has_prefix(f[0], WORKSPACE_PREFIX) && !tdm_conv_candidate_name_valid(f[1])) {
      *why = g_strdup_printf("line %d names no candidate", i + 1);
      g_hash_table_destroy(entries);
      return NULL;
    }
    g_hash_table_replace(entries, g_strdup(f[0]), g_strdup_printf("%s\t%s", f[1], f[2]));
  }
  return entries;
}

static void
cache_file_free(gpointer data)
{
  CacheFile *file = data;
  g_free(file->path);
  g_hash_table_destroy(file->entries);
  g_free(file);
}

/* The model's table, as its file was read (once), under cache_lock; a table of this
 * process's choices alone when the cache is off. */
static CacheFile *
file_of(const char *model)
{
  if (files == NULL)
    files = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, cache_file_free);
  CacheFile *file = g_hash_table_lookup(files, model);
  if (file != NULL)
    return file;
  file = g_new0(CacheFile, 1);
  file->path = tdm_conv_cache_path(model);
  /* Only a regular file (or nothing) at the cache's place is read and replaced: a link,
   * even to a regular file, a folder, a FIFO are left alone, said in one line. */
  g_autoptr(GError) error = NULL;
  if (file->path != NULL &&
      !tdm_file_check_replaceable(file->path, "", TDM_ENGINE_ERROR_BACKEND, &error)) {
    g_message("The convolution cache %s: left alone, the choices stay in this process",
              error->message);
    file->unwritable = TRUE;
  }
  /* Through the one reader: a file swapped for a FIFO or /dev/zero since the look is
   * refused, not waited on or read for ever. A file not there yet is the usual first
   * run. */
  g_autoptr(GBytes) bytes = !file->unwritable && file->path != NULL &&
                            tdm_file_present(file->path)
      ? tdm_file_read_all(file->path, "", TDM_ENGINE_ERROR_BACKEND, CACHE_MAX_BYTES, &error)
      : NULL;
  if (error != NULL && !file->unwritable)
    g_message("The convolution cache is unreadable (%s): ignored, and written anew",
              error->message);
  if (bytes != NULL) {
    g_autofree char *why = NULL;
    gsize length = 0;
    const char *text = g_bytes_get_data(bytes, &length);
    file->entries = parse(text != NULL ? text : "", length, &why);
    if (file->entries == NULL)
      g_message("The convolution cache %s is damaged (%s): ignored, and written anew",
                file->path, why);
  }
  if (file->entries == NULL)
    file->entries = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_hash_table_insert(files, g_strdup(model), file);
  return file;
}

char *
tdm_conv_cache_lookup(const char *model, const char *key)
{
  g_mutex_lock(&cache_lock);
  CacheFile *file = file_of(model);
  const char *value = g_hash_table_lookup(file->entries, key);
  char *name = value != NULL ? g_strndup(value, strcspn(value, "\t")) : NULL;
  g_mutex_unlock(&cache_lock);
  return name;
}

static int
compare_keys(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *
serialize(GHashTable *entries)
{
  GString *out = g_string_new(CACHE_HEADER "\n");
  g_autofree gpointer *keys = g_hash_table_get_keys_as_array(entries, NULL);
  guint count = g_hash_table_size(entries);
  /* Sorted, so the file does not depend on the hash table's order. */
  qsort(keys, count, sizeof *keys, compare_keys);
  for (guint i = 0; i < count; i++)
    g_string_append_printf(out, "%s\t%s\n", (char *)keys[i],
                           (char *)g_hash_table_lookup(entries, keys[i]));
  return g_string_free(out, FALSE);
}

void
tdm_conv_cache_store(const char *model, const char *key, const char *name, double ms)
{
  if (!field_ok(key) || !field_ok(name) || strchr(key, '\t') != NULL ||
      strchr(name, '\t') != NULL)
    return;
  g_mutex_lock(&cache_lock);
  CacheFile *file = file_of(model);
  if (g_hash_table_size(file->entries) < CACHE_MAX_LINES) {
    char number[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_formatd(number, sizeof number, "%.6f", ms);
    g_hash_table_replace(file->entries, g_strdup(key), g_strdup_printf("%s\t%s", name, number));
  }
  if (file->path != NULL && !file->unwritable) {
    g_autofree char *text = serialize(file->entries);
    g_autofree char *folder = g_path_get_dirname(file->path);
    g_autoptr(GError) error = NULL;
    if (g_mkdir_with_parents(folder, 0755) != 0)
      g_set_error(&error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_BACKEND,
                  "the convolution cache's folder %s: %s", folder, g_strerror(errno));
    else
      tdm_file_replace_contents(file->path, text, strlen(text), "the convolution cache ",
                                TDM_ENGINE_ERROR_BACKEND, &error);
    if (error != NULL) {
      g_message("%s: the choices stay in this process", error->message);
      file->unwritable = TRUE;
    }
  }
  g_mutex_unlock(&cache_lock);
}

static char *
workspace_key(const char *plan)
{
  g_autofree char *digest = g_compute_checksum_for_string(G_CHECKSUM_SHA1, plan, -1);
  return g_strdup_printf(WORKSPACE_PREFIX "%s", digest);
}

void
tdm_conv_cache_store_workspace(const char *model, const char *plan, guint64 bytes)
{
  g_autofree char *key = workspace_key(plan);
  char number[32];
  g_snprintf(number, sizeof number, "%" G_GUINT64_FORMAT, bytes);
  tdm_conv_cache_store(model, key, number, 0.0);
}

gboolean
tdm_conv_cache_lookup_workspace(const char *model, const char *plan, guint64 *bytes)
{
  g_autofree char *key = workspace_key(plan);
  g_autofree char *value = tdm_conv_cache_lookup(model, key);
  guint64 v = 0;
  if (value == NULL || !g_ascii_string_to_unsigned(value, 10, 0, G_MAXSIZE, &v, NULL))
    return FALSE;
  *bytes = v;
  return TRUE;
}

void
tdm_conv_cache_reset(void)
{
  g_mutex_lock(&cache_lock);
  g_clear_pointer(&files, g_hash_table_destroy);
  g_mutex_unlock(&cache_lock);
}
