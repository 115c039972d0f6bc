/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-file.c — refuses what is not a regular file before reading from it, and the
 * locked temporaries files are replaced through (tdm-file.h). Not a reader and not a
 * writer. */
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
