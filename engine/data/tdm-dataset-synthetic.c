/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dataset-synthetic.c — the built-in image set that needs no files: ten
 * classes of 28×28 grey strokes (bars, diagonals, crosses, rings, squares,
 * triangles, blobs) drawn from a seed with jitter in position, size, angle,
 * thickness and intensity, plus noise and stray strokes. It is meant to be learnt
 * well by a small MLP in one epoch and not to be solved by a linear model on raw
 * pixels, so that training curves mean something. Every image is drawn from its
 * own splitmix64 stream seeded from (seed, split, index), so the bytes depend on
 * the seed alone. Not a model of any real data. */
#include "tdm-dataset.h"

#include <math.h>
#include <string.h>

#define TDM_SYN_SIDE 28
#define TDM_SYN_CLASSES 10

static const char *const tdm_synthetic_names[TDM_SYN_CLASSES] = {
    "horizontal bar",  "vertical bar", "ring",  "plus",   "falling diagonal",
    "rising diagonal", "blob",         "cross", "square", "triangle",
};

typedef struct {
  guint64 state;
} TdmSynRng;

static inline guint64
tdm_syn_next(TdmSynRng *r)
{
  guint64 z = (r->state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi), from the top 24 bits so the float is exact. */
static inline float
tdm_syn_uniform(TdmSynRng *r, float lo, float hi)
{
  return lo + (hi - lo) * (float)(tdm_syn_next(r) >> 40) * (1.0f / 16777216.0f);
}

typedef struct {
  float pixels[TDM_SYN_SIDE * TDM_SYN_SIDE];
} TdmSynCanvas;

/* Draws an anti-aliased stroke from (x0, y0) to (x1, y1), keeping the brighter
 * of stroke and canvas so that crossing strokes do not saturate where they meet. */
static void
tdm_syn_segment(TdmSynCanvas *c, float x0, float y0, float x1, float y1, float width,
                float value)
{
  float half = 0.5f * width;
  float reach = half + 1.0f;
  int xa = MAX(0, (int)floorf(MIN(x0, x1) - reach));
  int xb = MIN(TDM_SYN_SIDE - 1, (int)ceilf(MAX(x0, x1) + reach));
  int ya = MAX(0, (int)floorf(MIN(y0, y1) - reach));
  int yb = MIN(TDM_SYN_SIDE - 1, (int)ceilf(MAX(y0, y1) + reach));
  float dx = x1 - x0, dy = y1 - y0;
  float len2 = dx * dx + dy * dy;
  float inv = len2 > 1e-6f ? 1.0f / len2 : 0.0f;
  /* Pixels that the stroke does not reach need no root. */
  float outer2 = (half + 0.5f) * (half + 0.5f);

  /* Each row only needs the pixels inside the slab around the stroke's line,
   * which for a slanted stroke is a small part of its bounding box. */
  float len = sqrtf(len2);
  float nx = len > 1e-3f ? -dy / len : 0.0f, ny = len > 1e-3f ? dx / len : 1.0f;
  float outer = half + 0.5f;

  for (int y = ya; y <= yb; y++) {
    int xlo = xa, xhi = xb;
    if (fabsf(nx) > 0.05f) {
      float a = x0 + (-outer - ny * ((float)y - y0)) / nx;
      float b = x0 + (outer - ny * ((float)y - y0)) / nx;
      xlo = MAX(xlo, (int)floorf(MIN(a, b)));
      xhi = MIN(xhi, (int)ceilf(MAX(a, b)));
    }
    for (int x = xlo; x <= xhi; x++) {
      float px = (float)x - x0, py = (float)y - y0;
      float t = (px * dx + py * dy) * inv;
      t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
      float ex = px - t * dx, ey = py - t * dy;
      float d2 = ex * ex + ey * ey;
      if (d2 >= outer2)
        continue;
      float cover = half + 0.5f - sqrtf(d2);
      float v = value * (cover < 1.0f ? cover : 1.0f);
      float *p = &c->pixels[y * TDM_SYN_SIDE + x];
      if (v > *p)
        *p = v;
    }
  }
}

/* A ring of radius r (filled when fill is set: a blob with a soft edge). */
static void
tdm_syn_ring(TdmSynCanvas *c, float cx, float cy, float r, float width, float value,
             gboolean fill)
{
  float reach = r + 0.5f * width + 1.0f;
  int xa = MAX(0, (int)floorf(cx - reach)), xb = MIN(TDM_SYN_SIDE - 1, (int)ceilf(cx + reach));
  int ya = MAX(0, (int)floorf(cy - reach)), yb = MIN(TDM_SYN_SIDE - 1, (int)ceilf(cy + reach));
  float half = 0.5f * width;

  for (int y = ya; y <= yb; y++) {
    for (int x = xa; x <= xb; x++) {
      float dx = (float)x - cx, dy = (float)y - cy;
      float d = sqrtf(dx * dx + dy * dy) - r;
      if (fill)
        d = d < 0.0f ? 0.0f : d;
      else
        d = fabsf(d);
      float cover = half + 0.5f - d;
      if (cover <= 0.0f)
        continue;
      float v = value * (cover < 1.0f ? cover : 1.0f);
      float *p = &c->pixels[y * TDM_SYN_SIDE + x];
      if (v > *p)
        *p = v;
    }
  }
}

/* A closed polygon of n corners around (cx, cy) at radius r, turned by angle. */
static void
tdm_syn_polygon(TdmSynCanvas *c, int n, float cx, float cy, float r, float angle, float width,
                float value)
{
  float px[8], py[8];
  for (int i = 0; i < n; i++) {
    float a = angle + 2.0f * (float)G_PI * (float)i / (float)n;
    px[i] = cx + r * cosf(a);
    py[i] = cy + r * sinf(a);
  }
  for (int i = 0; i < n; i++)
    tdm_syn_segment(c, px[i], py[i], px[(i + 1) % n], py[(i + 1) % n], width, value);
}

/* A stroke of half-length h through (cx, cy) at angle a. */
static void
tdm_syn_stroke(TdmSynCanvas *c, float cx, float cy, float h, float a, float width, float value)
{
  float ux = h * cosf(a), uy = h * sinf(a);
  tdm_syn_segment(c, cx - ux, cy - uy, cx + ux, cy + uy, width, value);
}

static void
tdm_syn_draw(int label, TdmSynRng *r, guint8 *out)
{
  TdmSynCanvas c;
  memset(&c, 0, sizeof c);

  const float pi = (float)G_PI;
  float cx = tdm_syn_uniform(r, 10.0f, 18.0f);
  float cy = tdm_syn_uniform(r, 10.0f, 18.0f);
  float size = tdm_syn_uniform(r, 5.0f, 9.0f);
  float width = tdm_syn_uniform(r, 1.2f, 3.2f);
  float value = tdm_syn_uniform(r, 140.0f, 255.0f);
  /* Enough tilt to vary the pixels, too little to turn one class into another
   * (a bar tilted 45 degrees would be a diagonal). */
  float tilt = tdm_syn_uniform(r, -0.25f, 0.25f);

  switch (label) {
  case 0:
    tdm_syn_stroke(&c, cx, cy, size, tilt, width, value);
    break;
  case 1:
    tdm_syn_stroke(&c, cx, cy, size, 0.5f * pi + tilt, width, value);
    break;
  case 2:
    tdm_syn_ring(&c, cx, cy, 0.75f * size, width, value, FALSE);
    break;
  case 3:
    tdm_syn_stroke(&c, cx, cy, size, tilt, width, value);
    tdm_syn_stroke(&c, cx, cy, size, 0.5f * pi + tilt, width, value);
    break;
  case 4:
    tdm_syn_stroke(&c, cx, cy, size, 0.25f * pi + tilt, width, value);
    break;
  case 5:
    tdm_syn_stroke(&c, cx, cy, size, -0.25f * pi + tilt, width, value);
    break;
  case 6:
    tdm_syn_ring(&c, cx, cy, 0.45f * size, 2.0f, value, TRUE);
    break;
  case 7:
    tdm_syn_stroke(&c, cx, cy, size, 0.25f * pi + tilt, width, value);
    tdm_syn_stroke(&c, cx, cy, size, -0.25f * pi + tilt, width, value);
    break;
  case 8:
    tdm_syn_polygon(&c, 4, cx, cy, 0.95f * size, 0.25f * pi + tilt, width, value);
    break;
  case 9:
    tdm_syn_polygon(&c, 3, cx, cy, 0.95f * size, -0.5f * pi + tilt, width, value);
    break;
  default:
    g_assert_not_reached();
  }

  /* Stray strokes, short and fainter than the shape, so that counting lit pixels
   * or looking at one region is not enough. */
  guint64 bits = tdm_syn_next(r);
  int strays = (bits & 3) == 0 ? 2 : (bits & 3) == 1 ? 1 : 0;
  for (int i = 0; i < strays; i++)
    tdm_syn_stroke(&c, tdm_syn_uniform(r, 2.0f, 26.0f), tdm_syn_uniform(r, 2.0f, 26.0f),
                   tdm_syn_uniform(r, 1.0f, 3.0f), tdm_syn_uniform(r, 0.0f, pi),
                   tdm_syn_uniform(r, 1.0f, 2.0f), value * tdm_syn_uniform(r, 0.3f, 0.7f));

  /* Additive noise, eight pixels per draw; bytes taken by shifts, not memcpy, so
   * the images do not depend on the machine's byte order. */
  guint8 grain[TDM_SYN_SIDE * TDM_SYN_SIDE];
  for (int i = 0; i < TDM_SYN_SIDE * TDM_SYN_SIDE; i += 8) {
    guint64 n = tdm_syn_next(r);
    for (int k = 0; k < 8; k++)
      grain[i + k] = (guint8)(n >> (8 * k));
  }
  float noise = tdm_syn_uniform(r, 0.0f, 64.0f) * (1.0f / 255.0f);
  for (int i = 0; i < TDM_SYN_SIDE * TDM_SYN_SIDE; i++) {
    float v = c.pixels[i] + noise * (float)grain[i] + 0.5f;
    out[i] = (guint8)(int)(v < 255.0f ? v : 255.0f);
  }
}

static guint64
tdm_syn_mix(guint64 x)
{
  TdmSynRng r = {x};
  return tdm_syn_next(&r);
}

static TdmDataset *
tdm_syn_split(guint64 seed, int split, int count, const char *name)
{
  TdmDataset *d = tdm_dataset_new(name, count, TDM_SYN_SIDE, TDM_SYN_SIDE, 1, TDM_SYN_CLASSES);
  d->class_names = g_new0(char *, TDM_SYN_CLASSES + 1);
  for (int i = 0; i < TDM_SYN_CLASSES; i++)
    d->class_names[i] = g_strdup(tdm_synthetic_names[i]);

  guint64 base = tdm_syn_mix(seed ^ tdm_syn_mix(0x5EED0000ull + (guint64)split));

  /* Exactly balanced classes in a seeded order. */
  for (int i = 0; i < count; i++)
    d->labels[i] = (guint8)(i % TDM_SYN_CLASSES);
  TdmSynRng shuffle = {base};
  for (int i = count - 1; i > 0; i--) {
    int j = (int)((tdm_syn_next(&shuffle) >> 32) * (guint64)(i + 1) >> 32);
    guint8 t = d->labels[i];
    d->labels[i] = d->labels[j];
    d->labels[j] = t;
  }

  const int sample = tdm_dataset_sample_size(d);
  for (int i = 0; i < count; i++) {
    TdmSynRng r = {base ^ tdm_syn_mix((guint64)i)};
    tdm_syn_draw(d->labels[i], &r, d->images + (gsize)i * sample);
  }
  return d;
}

TdmDatasetPair *
tdm_dataset_synthetic(guint64 seed, int train_count, int test_count)
{
  g_return_val_if_fail(train_count > 0 && test_count > 0, NULL);

  TdmDatasetPair *pair = g_new0(TdmDatasetPair, 1);
  pair->name = g_strdup("synthetic");
  pair->source = NULL;
  pair->train = tdm_syn_split(seed, 0, train_count, "synthetic (train)");
  pair->test = tdm_syn_split(seed, 1, test_count, "synthetic (test)");
  return pair;
}
