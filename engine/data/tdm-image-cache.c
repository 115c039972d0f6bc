/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-image-cache.c — reads and writes the decoded-folder cache (tdm-image-cache.h).
 *
 * Layout, little-endian: "TDMIMGC2", the 32-byte key, then u32 fields (classes, height,
 * width, channels, train count, test count, names bytes, notice bytes, name bytes,
 * source bytes, CRC-32 of all that follows), the class names NUL-separated, the
 * notice, the set's name, the source folder, then train images, train labels, test
 * images, test labels. Reading a hit is a few large reads straight into the
 * datasets' buffers, and the CRC over them: a cache whose pixels, labels or names
 * were changed on disk is reported and rebuilt, never trained on.
 */
#include "tdm-image-cache.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-file.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define CACHE_MAGIC "TDMIMGC2"
#define CACHE_FIELDS 11
#define CACHE_CRC 10

static gboolean
read_exact(FILE *fp, void *buffer, size_t bytes)
{
  return bytes == 0 || fread(buffer, 1, bytes, fp) == bytes;
}

/* The same bytes read or written, folded into the running CRC. */
static guint32
crc_update(guint32 crc, const void *buffer, size_t bytes)
{
  return (guint32)crc32_z(crc, buffer, bytes);
}

static gboolean
read_summed(FILE *fp, void *buffer, size_t bytes, guint32 *crc)
{
  if (!read_exact(fp, buffer, bytes))
    return FALSE;
  *crc = crc_update(*crc, buffer, bytes);
  return TRUE;
}

static void
damaged(GError **error, const char *path, const char *why)
{
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
              _("the image cache %s was damaged (%s)"), path, why);
}

/* Before temporaries were locked they were named "<cache>.XXXXXX": one of those that
 * no write has touched for an hour was left by a writer that died. */
static void
remove_legacy_temps(const char *dir, const char *base)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  if (d == NULL)
    return;
  g_autofree char *prefix = g_strconcat(base, ".", NULL);
  const char *entry;
  while ((entry = g_dir_read_name(d)) != NULL) {
    const char *tail = entry + strlen(prefix);
    if (!g_str_has_prefix(entry, prefix) || strlen(tail) != 6)
      continue;
    gboolean suffix = TRUE;
    for (const char *p = tail; *p; p++)
      suffix &= g_ascii_isalnum(*p);
    g_autofree char *path = g_build_filename(dir, entry, NULL);
    struct stat st;
    if (suffix && lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_mtime < (time_t)(g_get_real_time() / G_USEC_PER_SEC) - 3600)
      (void)g_unlink(path);
  }
  g_dir_close(d);
}

TdmDatasetPair *
tdm_image_cache_read(const char *path, const guint8 key[TDM_IMAGE_CACHE_KEY_BYTES],
                     GError **error)
{
  /* A write killed or interrupted left its temporary (hundreds of MB): whichever
   * start comes next removes it, a hit as much as a miss. */
  g_autofree char *dir = g_path_get_dirname(path);
  g_autofree char *base = g_path_get_basename(path);
  tdm_file_remove_stale_temps(dir, base);
  remove_legacy_temps(dir, base);
  /* Only a regular file, opened without blocking: a FIFO put in its place would hang
   * every start. Anything else is a miss. */
  int fd = tdm_file_open_regular(path, "", TDM_ENGINE_ERROR_DATASET, NULL, NULL);
  FILE *fp = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (fp == NULL) {
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  TdmDatasetPair *pair = NULL;
  /* Declared before the first jump to miss, so every cleanup sees NULL or its value. */
  char *names = NULL, *notice = NULL, *name = NULL, *source = NULL;
  char **class_names = NULL;
  char magic[8];
  guint8 stored[TDM_IMAGE_CACHE_KEY_BYTES];
  guint32 f[CACHE_FIELDS];
  guint32 crc = (guint32)crc32_z(0, NULL, 0);
  const char *why = NULL;   /* set once the file is known to be this folder's cache */
  /* Another magic is another version's layout, another key another folder: misses. */
  if (!read_exact(fp, magic, 8) || memcmp(magic, CACHE_MAGIC, 8) != 0 ||
      !read_exact(fp, stored, sizeof stored) || memcmp(stored, key, sizeof stored) != 0)
    goto miss;
  why = "its header is malformed";
  if (!read_exact(fp, f, sizeof f))
    goto miss;
  for (int i = 0; i < CACHE_FIELDS; i++)
    f[i] = GUINT32_FROM_LE(f[i]);
  guint32 classes = f[0], h = f[1], w = f[2], c = f[3], train_n = f[4], test_n = f[5];
  guint32 names_bytes = f[6], notice_bytes = f[7], name_bytes = f[8], source_bytes = f[9];
  if (classes < 2 || classes > 256 || h == 0 || h > 4096 || w == 0 || w > 4096 ||
      (c != 1 && c != 3) || train_n == 0 || test_n == 0 || train_n > G_MAXINT / 2 || test_n > G_MAXINT / 2 ||
      names_bytes > (1u << 20) || notice_bytes > (1u << 20) || name_bytes > 4096 ||
      source_bytes > 65536)
    goto miss;
  /* Everything promised must be in the file before anything is allocated. */
  struct stat st;
  guint64 sample = (guint64)h * w * c;
  guint64 expect = 8 + sizeof stored + sizeof f + (guint64)names_bytes + notice_bytes +
                   name_bytes + source_bytes + ((guint64)train_n + test_n) * (sample + 1);
  if (fstat(fileno(fp), &st) != 0 || (guint64)st.st_size != expect) {
    why = "its size does not match its header";
    goto miss;
  }
  why = "its contents do not match their checksum";

  names = g_malloc0(names_bytes + 1);
  notice = g_malloc0(notice_bytes + 1);
  name = g_malloc0(name_bytes + 1);
  source = g_malloc0(source_bytes + 1);
  if (!read_summed(fp, names, names_bytes, &crc) ||
      !read_summed(fp, notice, notice_bytes, &crc) ||
      !read_summed(fp, name, name_bytes, &crc) || !read_summed(fp, source, source_bytes, &crc))
    goto miss;
  /* Exactly one NUL after each of the class names. */
  guint32 nuls = 0;
  for (guint32 i = 0; i < names_bytes; i++)
    nuls += names[i] == '\0';
  if (nuls != classes || names_bytes == 0 || names[names_bytes - 1] != '\0')
    goto miss;
  class_names = g_new0(char *, classes + 1);
  const char *p = names;
  for (guint32 k = 0; k < classes; k++) {
    class_names[k] = g_strdup(p);
    p += strlen(p) + 1;
  }

  pair = g_new0(TdmDatasetPair, 1);
  pair->name = g_strdup(name);
  pair->source = g_strdup(source);
  pair->notice = notice_bytes > 0 ? g_strdup(notice) : NULL;
  guint32 counts[2] = {train_n, test_n};
  const char *which[2] = {"train", "test"};
  for (int s = 0; s < 2; s++) {
    g_autofree char *split = g_strdup_printf("%s (%s)", name, which[s]);
    /* Not zeroed first: every byte is read over, and zeroing a set the size of the
     * file was a tenth of a cached start once freed memory was being reused. */
    TdmDataset *d = tdm_dataset_new_take(split, (int)counts[s], (int)h, (int)w, (int)c,
                                         (int)classes, g_malloc((size_t)counts[s] * sample),
                                         g_malloc(counts[s]));
    d->class_names = g_strdupv(class_names);
    if (s == 0)
      pair->train = d;
    else
      pair->test = d;
    if (!read_summed(fp, d->images, (size_t)counts[s] * sample, &crc) ||
        !read_summed(fp, d->labels, counts[s], &crc))
      goto miss;
    for (guint32 i = 0; i < counts[s]; i++)
      if (d->labels[i] >= classes)
        goto miss;
  }
  if (crc != f[CACHE_CRC])
    goto miss;
  goto out;

miss:
  g_clear_pointer(&pair, tdm_dataset_pair_free);
  if (why != NULL)
    damaged(error, path, why);
out:
  g_strfreev(class_names);
  g_free(names);
  g_free(notice);
  g_free(name);
  g_free(source);
  fclose(fp);
  return pair;
}

static gboolean
write_exact(FILE *fp, const void *buffer, size_t bytes)
{
  return bytes == 0 || fwrite(buffer, 1, bytes, fp) == bytes;
}

gboolean
tdm_image_cache_write(const char *path, const guint8 key[TDM_IMAGE_CACHE_KEY_BYTES],
                      const TdmDatasetPair *pair, GError **error)
{
  g_autofree char *dir = g_path_get_dirname(path);
  if (g_mkdir_with_parents(dir, 0700) != 0) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: cannot create the cache folder: %s"), dir, g_strerror(errno));
    return FALSE;
  }
  g_autofree char *base = g_path_get_basename(path);
  tdm_file_remove_stale_temps(dir, base);
  g_autofree char *tmp = NULL;
  int fd = tdm_file_create_temp(dir, base, &tmp);
  if (fd < 0) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: cannot write the cache: %s"), dir, g_strerror(errno));
    return FALSE;
  }
  FILE *fp = fdopen(fd, "wb");
  const TdmDataset *train = pair->train, *test = pair->test;
  GString *names = g_string_new(NULL);
  for (int k = 0; k < train->classes; k++)
    g_string_append_len(names, train->class_names[k], (gssize)strlen(train->class_names[k]) + 1);
  const char *notice = pair->notice != NULL ? pair->notice : "";
  const char *source = pair->source != NULL ? pair->source : "";
  guint32 f[CACHE_FIELDS] = {
      (guint32)train->classes, (guint32)train->height, (guint32)train->width,
      (guint32)train->channels, (guint32)train->count, (guint32)test->count,
      (guint32)names->len, (guint32)strlen(notice), (guint32)strlen(pair->name),
      (guint32)strlen(source), 0,
  };
  size_t sample = (size_t)tdm_dataset_sample_size(train);
  guint32 crc = (guint32)crc32_z(0, NULL, 0);
  crc = crc_update(crc, names->str, names->len);
  crc = crc_update(crc, notice, strlen(notice));
  crc = crc_update(crc, pair->name, strlen(pair->name));
  crc = crc_update(crc, source, strlen(source));
  crc = crc_update(crc, train->images, (size_t)train->count * sample);
  crc = crc_update(crc, train->labels, (size_t)train->count);
  crc = crc_update(crc, test->images, (size_t)test->count * sample);
  crc = crc_update(crc, test->labels, (size_t)test->count);
  f[CACHE_CRC] = crc;
  for (int i = 0; i < CACHE_FIELDS; i++)
    f[i] = GUINT32_TO_LE(f[i]);
  gboolean ok = fp != NULL && write_exact(fp, CACHE_MAGIC, 8) &&
                write_exact(fp, key, TDM_IMAGE_CACHE_KEY_BYTES) && write_exact(fp, f, sizeof f) &&
                write_exact(fp, names->str, names->len) &&
                write_exact(fp, notice, strlen(notice)) &&
                write_exact(fp, pair->name, strlen(pair->name)) &&
                write_exact(fp, source, strlen(source)) &&
                write_exact(fp, train->images, (size_t)train->count * sample) &&
                write_exact(fp, train->labels, (size_t)train->count) &&
                write_exact(fp, test->images, (size_t)test->count * sample) &&
                write_exact(fp, test->labels, (size_t)test->count) && fflush(fp) == 0 &&
                fsync(fileno(fp)) == 0;
  int saved = errno;
  g_string_free(names, TRUE);
  if (fp != NULL)
    fclose(fp);
  else
    close(fd);
  if (!ok || g_rename(tmp, path) != 0) {
    if (ok)
      saved = errno;
    g_unlink(tmp);
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: cannot write the cache: %s"), path, g_strerror(saved));
    return FALSE;
  }
  return TRUE;
}
