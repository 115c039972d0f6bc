/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-name.c — the convolution engine's candidate names
 * (tdm-backend-cuda-conv-name.h). Compiled without CUDA too. */
#include "tdm-backend-cuda-conv-name.h"

#include <errno.h>
#include <string.h>

/* The kind's word before ":e". */
static const char *
prefix(const TdmCudnnName *n)
{
  return n->fused ? "cudnn-fused" : n->phases ? "cudnn-phases" : "cudnn";
}

char *
tdm_cudnn_name_format(const TdmCudnnName *n)
{
  g_autofree char *chunk = n->chunk > 0 ? g_strdup_printf(":n%d", n->chunk) : g_strdup("");
  return g_strdup_printf("%s:e%" G_GINT64_FORMAT ":r%d:%c%s%s%s", prefix(n), n->engine,
                         n->rank, n->out, n->prepadded ? "p" : "", n->padded ? ":c8" : "",
                         chunk);
}

/* The decimal digits at *p (at least one), as a number in [0, most]; *p past them. */
static gboolean
number(const char **p, gint64 most, gint64 *value)
{
  if (!g_ascii_isdigit(**p))
    return FALSE;
  char *end = NULL;
  errno = 0;
  guint64 v = g_ascii_strtoull(*p, &end, 10);
  if (errno != 0 || end == *p || v > (guint64)most)
    return FALSE;
  *p = end;
  *value = (gint64)v;
  return TRUE;
}

gboolean
tdm_cudnn_name_parse(const char *name, TdmCudnnName *n)
{
  memset(n, 0, sizeof *n);
  if (name == NULL)
    return FALSE;
  n->fused = g_str_has_prefix(name, "cudnn-fused:e");
  n->phases = g_str_has_prefix(name, "cudnn-phases:e");
  if (!n->fused && !n->phases && !g_str_has_prefix(name, "cudnn:e"))
    return FALSE;
  const char *p = name + strlen(prefix(n)) + 2;
  gint64 rank = 0, chunk = 0;
  if (!number(&p, G_MAXINT64, &n->engine) || !g_str_has_prefix(p, ":r"))
    return FALSE;
  p += 2;
  if (!number(&p, G_MAXINT, &rank) || p[0] != ':' || (p[1] != 'f' && p[1] != 'h'))
    return FALSE;
  n->rank = (int)rank;
  n->out = p[1];
  p += 2;
  if (*p == 'p') {
    n->prepadded = TRUE;
    p++;
  }
  if (g_str_has_prefix(p, ":c8")) {
    n->padded = TRUE;
    p += 3;
  }
  if (g_str_has_prefix(p, ":n")) {
    p += 2;
    if (!number(&p, G_MAXINT, &chunk) || chunk < 1)
      return FALSE;
    n->chunk = (int)chunk;
  }
  /* A fused plan reads the caller's input itself, and phases the whole dy: never padded,
   * never in chunks; only phases read a pre-padded copy. */
  if (*p != '\0' || ((n->fused || n->phases) && (n->padded || n->chunk > 0)) ||
      (n->prepadded && !n->phases))
    return FALSE;
  /* One spelling: no leading zeros (the numbers read back as written). */
  g_autofree char *again = tdm_cudnn_name_format(n);
  return g_str_equal(again, name);
}

gboolean
tdm_conv_candidate_name_valid(const char *name)
{
  TdmCudnnName n;
  return name != NULL && (g_str_equal(name, "im2col") || g_str_equal(name, "own:dgrad") ||
                          g_str_equal(name, "own:fwd") || g_str_equal(name, "own:wgrad") ||
                          tdm_cudnn_name_parse(name, &n));
}
