/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-file.c — refuses what is not a regular file before reading from it, reads it
 * whole, mapped or by lines under the caller's limits, tells whether two paths are one
 * file, makes the locked temporaries files are replaced through, writes a buffer whole
 * and replaces a file's contents through them (tdm-file.h). Not a parser. */
#include "tdm-file.h"
#include "tdm-i18n.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static const char *
kind_of(mode_t mode)
{
  if (S_ISDIR(mode))
    return _("a folder, not a file");
  if (S_ISFIFO(mode))
    return _("a FIFO (named pipe), not a regular file");
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return _("a device, not a regular file");
  if (S_ISSOCK(mode))
    return _("a socket, not a regular file");
  return _("not a regular file");
}

static int
refuse(GError **error, TdmEngineError code, const char *label, const char *path,
       const char *why)
{
  g_set_error(error, TDM_ENGINE_ERROR, code, "%s%s: %s", label, path, why);
  return -1;
}

/* Why a link cannot be followed: a loop or a missing target, said as such. */
static int
refuse_link(GError **error, TdmEngineError code, const char *label, const char *path, int err)
{
  if (err == ELOOP)
    return refuse(error, code, label, path, _("a symbolic link loop (the link leads back to "
                                            "itself)"));
  if (err == ENOENT || err == ENOTDIR) {
    g_autofree char *target = g_file_read_link(path, NULL);
    g_autofree char *why = g_strdup_printf(_("a dangling symbolic link: its target %s does "
                                           "not exist"), target ? target : _("(unreadable)"));
    return refuse(error, code, label, path, why);
  }
  return refuse(error, code, label, path, g_strerror(err));
}

int
tdm_file_open_regular(const char *path, const char *label, TdmEngineError code,
                      struct stat *st_out, GError **error)
{
  g_return_val_if_fail(path != NULL, -1);
  if (label == NULL)
    label = "";

  struct stat link_st, st;
  if (lstat(path, &link_st) != 0) {
    if (errno == ENOENT)
      return refuse(error, code, label, path, _("missing file"));
    return refuse(error, code, label, path, g_strerror(errno));
  }
  if (S_ISLNK(link_st.st_mode)) {
    if (stat(path, &st) != 0)
      return refuse_link(error, code, label, path, errno);
  } else {
    st = link_st;
  }
  if (!S_ISREG(st.st_mode))
    return refuse(error, code, label, path, kind_of(st.st_mode));

  /* O_NONBLOCK: should a FIFO be swapped in after the look, open returns at once
   * instead of waiting for a writer; the fstat below then refuses it. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP || err == ENOENT)
      return refuse_link(error, code, label, path, err);
    g_autofree char *why = g_strdup_printf(_("cannot read: %s"), g_strerror(err));
    return refuse(error, code, label, path, why);
  }
  struct stat opened;
  if (fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode) || opened.st_dev != st.st_dev ||
      opened.st_ino != st.st_ino) {
    close(fd);
    return refuse(error, code, label, path, _("changed while being opened (no longer the "
                                            "regular file it was)"));
  }
  /* Regular files ignore O_NONBLOCK, but readers should not have to know that. */
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0)
    (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (st_out != NULL)
    *st_out = opened;
  return fd;
}

/* "1.0 MB": GLib's size with a plain space, as a message quotes it (GLib puts a
 * no-break space there). */
static char *
size_text(guint64 bytes)
{
  g_autofree char *text = g_format_size(bytes);
  GString *out = g_string_new(NULL);
  for (const char *p = text; *p != '\0'; p = g_utf8_next_char(p)) {
    if (g_utf8_get_char(p) == 0x00a0)
      g_string_append_c(out, ' ');
    else
      g_string_append_unichar(out, g_utf8_get_char(p));
  }
  return g_string_free(out, FALSE);
}

static void *
too_large(GError **error, TdmEngineError code, const char *label, const char *path,
          guint64 limit, guint64 size)
{
  g_autofree char *limit_text = size_text(limit);
  g_autofree char *actual = size_text(size);
  g_set_error(error, TDM_ENGINE_ERROR, code, _("%s%s: larger than %s (%s)"), label, path,
              limit_text, actual);
  return NULL;
}

static void *
unreadable(GError **error, TdmEngineError code, const char *label, const char *path, int err)
{
  g_set_error(error, TDM_ENGINE_ERROR, code, _("%s%s: cannot read: %s"), label, path,
              g_strerror(err));
  return NULL;
}

GBytes *
tdm_file_read_all(const char *path, const char *label, TdmEngineError code, gsize limit,
                  GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  if (label == NULL)
    label = "";
  struct stat st;
  int fd = tdm_file_open_regular(path, label, code, &st, error);
  if (fd < 0)
    return NULL;
  if ((guint64)st.st_size > limit) {
    close(fd);
    return too_large(error, code, label, path, limit, (guint64)st.st_size);
  }
  gsize size = (gsize)st.st_size, done = 0;
  /* One more byte: a NUL after the contents, for readers of text. */
  char *data = g_try_malloc(size + 1);
  if (data == NULL) {
    close(fd);
    return unreadable(error, code, label, path, ENOMEM);
  }
  while (done < size) {
    ssize_t n = read(fd, data + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      g_free(data);
      return unreadable(error, code, label, path, err);
    }
    if (n == 0)
      break;   /* shorter than it was a moment ago: what is there */
    done += (gsize)n;
  }
  close(fd);
  data[done] = '\0';
  return g_bytes_new_take(data, done);
}

GMappedFile *
tdm_file_map(const char *path, const char *label, TdmEngineError code, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  if (label == NULL)
    label = "";
  int fd = tdm_file_open_regular(path, label, code, NULL, error);
  if (fd < 0)
    return NULL;
  g_autoptr(GError) local = NULL;
  GMappedFile *file = g_mapped_file_new_from_fd(fd, FALSE, &local);
  close(fd);   /* the mapping keeps what it needs */
  if (file == NULL)
    g_set_error(error, TDM_ENGINE_ERROR, code, _("%s%s: cannot read: %s"), label, path,
                local->message);
  return file;
}

/* Lines. */

#define LINE_READ_CHUNK (64 * 1024)

struct _TdmLineReader {
  int fd;
  char *path, *label;
  TdmEngineError code;
  gsize max_line;
  guint64 max_file, read_total;
  char *buf;
  gsize cap, start, end;        /* the bytes not yet returned: buf[start, end) */
  gboolean eof, unterminated;
  int number;
};

TdmLineReader *
tdm_line_reader_open(const char *path, const char *label, TdmEngineError code,
                     gsize max_line, guint64 max_file, GError **error)
{
  g_return_val_if_fail(path != NULL && max_line > 0, NULL);
  if (label == NULL)
    label = "";
  struct stat st;
  int fd = tdm_file_open_regular(path, label, code, &st, error);
  if (fd < 0)
    return NULL;
  if (max_file > 0 && (guint64)st.st_size > max_file) {
    close(fd);
    return too_large(error, code, label, path, max_file, (guint64)st.st_size);
  }
  TdmLineReader *r = g_new0(TdmLineReader, 1);
  r->fd = fd;
  r->path = g_strdup(path);
  r->label = g_strdup(label);
  r->code = code;
  r->max_line = max_line;
  r->max_file = max_file;
  r->cap = MIN(max_line, LINE_READ_CHUNK) + 1;
  r->buf = g_malloc(r->cap);
  return r;
}

static const char *
line_too_long(TdmLineReader *r, GError **error)
{
  g_autofree char *limit = size_text(r->max_line);
  g_set_error(error, TDM_ENGINE_ERROR, r->code, _("%s%s: line %d is longer than %s"), r->label,
              r->path, r->number + 1, limit);
  return NULL;
}

/* More bytes after buf[end]: FALSE with an error set on failure. */
static gboolean
fill(TdmLineReader *r, GError **error)
{
  if (r->start > 0) {
    memmove(r->buf, r->buf + r->start, r->end - r->start);
    r->end -= r->start;
    r->start = 0;
  }
  /* The buffer grows to the longest line allowed, its newline and a NUL. */
  if (r->end + 1 >= r->cap) {
    gsize want = MIN(MAX(2 * r->cap, (gsize)LINE_READ_CHUNK), r->max_line + 2);
    if (want <= r->cap) {
      line_too_long(r, error);
      return FALSE;
    }
    r->buf = g_realloc(r->buf, want);
    r->cap = want;
  }
  for (;;) {
    ssize_t n = read(r->fd, r->buf + r->end, r->cap - 1 - r->end);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      unreadable(error, r->code, r->label, r->path, errno);
      return FALSE;
    }
    if (n == 0)
      r->eof = TRUE;
    r->end += (gsize)n;
    r->read_total += (guint64)n;
    /* A file appended to as fast as it is read would never end. */
    if (r->max_file > 0 && r->read_total > r->max_file) {
      too_large(error, r->code, r->label, r->path, r->max_file, r->read_total);
      return FALSE;
    }
    return TRUE;
  }
}

const char *
tdm_line_reader_next(TdmLineReader *r, gsize *length, GError **error)
{
  g_return_val_if_fail(r != NULL && length != NULL, NULL);
  gsize searched = r->start;
  for (;;) {
    char *nl = memchr(r->buf + searched, '\n', r->end - searched);
    if (nl != NULL || (r->eof && r->start < r->end)) {
      char *line = r->buf + r->start;
      gsize len = nl != NULL ? (gsize)(nl - line) : r->end - r->start;
      if (len > r->max_line)
        return line_too_long(r, error);
      r->unterminated = nl == NULL;
      line[len] = '\0';   /* the newline's place, or the byte kept free after end */
      r->start += len + (nl != NULL);
      if (nl == NULL)
        r->end = r->start;
      r->number++;
      *length = len;
      return line;
    }
    if (r->eof)
      return NULL;
    if (r->end - r->start > r->max_line)
      return line_too_long(r, error);
    gsize kept = r->end - r->start;
    if (!fill(r, error))
      return NULL;
    searched = r->start + kept;
  }
}

gboolean
tdm_line_reader_unterminated(const TdmLineReader *r)
{
  return r->unterminated;
}

int
tdm_line_reader_number(const TdmLineReader *r)
{
  return r->number;
}

void
tdm_line_reader_free(TdmLineReader *r)
{
  if (r == NULL)
    return;
  close(r->fd);
  g_free(r->path);
  g_free(r->label);
  g_free(r->buf);
  g_free(r);
}

/* Identity. */

typedef struct {
  dev_t dev;
  ino_t ino;
  char *name;                   /* NULL: the file exists and dev, ino are its own;
                                 * else the name it would get in the folder dev, ino */
} Identity;

static gboolean
identity_of(const char *path, Identity *id)
{
  struct stat st;
  id->name = NULL;
  if (stat(path, &st) == 0) {
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    return TRUE;
  }
  if (errno != ENOENT)
    return FALSE;
  g_autofree char *dir = g_path_get_dirname(path);
  if (stat(dir, &st) != 0)
    return FALSE;
  id->dev = st.st_dev;
  id->ino = st.st_ino;
  id->name = g_path_get_basename(path);
  return TRUE;
}

gboolean
tdm_file_same(const char *a, const char *b)
{
  g_return_val_if_fail(a != NULL && b != NULL, FALSE);
  Identity x, y;
  gboolean known_x = identity_of(a, &x), known_y = identity_of(b, &y);
  gboolean same;
  if (known_x && known_y) {
    same = x.dev == y.dev && x.ino == y.ino && (x.name == NULL) == (y.name == NULL) &&
           (x.name == NULL || g_str_equal(x.name, y.name));
  } else {
    /* Unreachable folders: compare what can be, the absolute spellings. */
    g_autofree char *ca = g_canonicalize_filename(a, NULL);
    g_autofree char *cb = g_canonicalize_filename(b, NULL);
    same = g_str_equal(ca, cb);
  }
  if (known_x)
    g_free(x.name);
  if (known_y)
    g_free(y.name);
  return same;
}

gboolean
tdm_file_check_not_dangling(const char *path, const char *label, TdmEngineError code,
                            GError **error)
{
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode) || stat(path, &st) == 0)
    return TRUE;
  g_autofree char *target = g_file_read_link(path, NULL);
  g_set_error(error, TDM_ENGINE_ERROR, code,
              _("%s%s: a dangling symbolic link (to %s); writing would replace the link: "
              "write to its target or another name"),
              label != NULL ? label : "", path, target != NULL ? target : _("nowhere"));
  return FALSE;
}

gboolean
tdm_file_present(const char *path)
{
  struct stat st;
  return lstat(path, &st) == 0;
}

/* mkstemp's six characters. */
static gboolean
is_temp_suffix(const char *s)
{
  if (strlen(s) != 6)
    return FALSE;
  for (; *s; s++)
    if (!g_ascii_isalnum(*s))
      return FALSE;
  return TRUE;
}

/* A temporary is stale when its writer died: a save killed mid-write. Only names of
 * our own making are looked at, and a temporary whose writer is alive is left. A
 * writer holds an exclusive flock on its temporary from creation to rename, and
 * the kernel drops it when the writer dies; so a temporary whose lock can be taken
 * has no writer left. The writer's own side of the race (a cleaner taking the lock in
 * the instant between its mkstemp and its flock) is closed in tdm_file_create_temp. */
void
tdm_file_remove_stale_temps(const char *dir, const char *base)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  if (d == NULL)
    return;
  g_autofree char *prefix = g_strdup_printf(".%s.", base);
  const char *entry;
  while ((entry = g_dir_read_name(d)) != NULL) {
    if (!g_str_has_prefix(entry, prefix) || !is_temp_suffix(entry + strlen(prefix)))
      continue;
    g_autofree char *path = g_build_filename(dir, entry, NULL);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
      continue;
    struct stat held, named;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &held) == 0 && S_ISREG(held.st_mode) &&
        held.st_nlink > 0 && lstat(path, &named) == 0 && named.st_ino == held.st_ino &&
        named.st_dev == held.st_dev)
      (void)g_unlink(path);
    close(fd);
  }
  g_dir_close(d);
}

int
tdm_file_create_temp(const char *dir, const char *base, char **tmp_path_out)
{
  for (int attempt = 0; attempt < 8; attempt++) {
    g_autofree char *tmp_name = g_strdup_printf(".%s.XXXXXX", base);
    g_autofree char *tmp_path = g_build_filename(dir, tmp_name, NULL);
    /* 0666 less the umask, like any file the user saves; mkstemp's 0600 would make
     * the renamed file private. */
    int fd = g_mkstemp_full(tmp_path, O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0)
      return -1;
    struct stat st;
    /* Where flock is not supported the temporary simply goes unlocked. */
    if (flock(fd, LOCK_EX) != 0 && errno != ENOLCK && errno != EOPNOTSUPP &&
        errno != EINVAL) {
      int err = errno;
      close(fd);
      g_unlink(tmp_path);
      errno = err;
      return -1;
    }
    /* Another save's cleaner may have taken the file for a leftover just before the
     * lock was ours, and removed it: start again with a fresh name. */
    if (fstat(fd, &st) == 0 && st.st_nlink == 0) {
      close(fd);
      continue;
    }
    *tmp_path_out = g_steal_pointer(&tmp_path);
    return fd;
  }
  errno = EAGAIN;
  return -1;
}

int
tdm_file_create_temp_beside(const char *path, char **tmp_path)
{
  g_autofree char *dir = g_path_get_dirname(path);
  g_autofree char *base = g_path_get_basename(path);
  tdm_file_remove_stale_temps(dir, base);
  return tdm_file_create_temp(dir, base, tmp_path);
}

int
tdm_file_commit_temp(int fd, gboolean written, const char *tmp_path, const char *path,
                     gboolean *rename_failed)
{
  int err = written ? 0 : (errno != 0 ? errno : EIO);
  if (close(fd) != 0 && err == 0)
    err = errno;
  if (err == 0 && g_rename(tmp_path, path) != 0) {
    err = errno;
    if (rename_failed != NULL)
      *rename_failed = TRUE;
  }
  if (err != 0)
    g_unlink(tmp_path);
  return err;
}

gboolean
tdm_file_write_all(int fd, const void *data, gsize bytes)
{
  const char *p = data;
  while (bytes > 0) {
    ssize_t n = write(fd, p, bytes);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      return FALSE;
    }
    p += n;
    bytes -= (gsize)n;
  }
  return TRUE;
}

gboolean
tdm_file_check_replaceable(const char *path, const char *label, TdmEngineError code,
                           GError **error)
{
  g_return_val_if_fail(path != NULL, FALSE);
  g_autofree char *why = NULL;
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT)
      return TRUE;
    why = g_strdup(g_strerror(errno));
  } else if (S_ISLNK(st.st_mode)) {
    g_autofree char *target = g_file_read_link(path, NULL);
    const char *to = target != NULL ? target : _("nowhere");
    if (stat(path, &st) != 0)
      why = g_strdup_printf(_("a dangling symbolic link (to %s), neither written through "
                              "nor replaced"), to);
    else
      why = g_strdup_printf(_("a symbolic link (to %s), neither written through nor "
                              "replaced"), to);
  } else if (!S_ISREG(st.st_mode)) {
    why = g_strdup(kind_of(st.st_mode));
  }
  if (why == NULL)
    return TRUE;
  refuse(error, code, label != NULL ? label : "", path, why);
  return FALSE;
}

gboolean
tdm_file_replace_contents(const char *path, const void *data, gsize size, const char *label,
                          TdmEngineError code, GError **error)
{
  g_return_val_if_fail(path != NULL && (data != NULL || size == 0), FALSE);
  if (label == NULL)
    label = "";
  if (!tdm_file_check_replaceable(path, label, code, error))
    return FALSE;
  g_autofree char *tmp_path = NULL;
  int fd = tdm_file_create_temp_beside(path, &tmp_path);
  if (fd < 0) {
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *text = g_strdup_printf(_("cannot create a temporary file in %s: %s"), dir,
                                            g_strerror(errno));
    refuse(error, code, label, path, text);
    return FALSE;
  }
  /* The rename replaces whatever took the name since the look above (a link included)
   * without following it. */
  int err = tdm_file_commit_temp(fd, tdm_file_write_all(fd, data, size), tmp_path, path,
                                 NULL);
  if (err != 0) {
    g_autofree char *text = g_strdup_printf(_("cannot write: %s"), g_strerror(err));
    refuse(error, code, label, path, text);
  }
  return err == 0;
}
