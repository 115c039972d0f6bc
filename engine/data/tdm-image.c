/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-image.c — PNG and JPEG decoding into small square samples (tdm-image.h).
 *
 * Both decoders hand rows to one resampler that crops the centre square and
 * area-averages it: every output pixel is the mean of the source area it covers,
 * weighted by how much of each source pixel falls in it. At scale 1 every weight is
 * exactly 1, so an image already of the chosen size comes out byte for byte (the test
 * that compares a folder of PNGs with IDX relies on it). JPEG's DCT scaling (1/2, 1/4,
 * 1/8) does the first part of a large reduction inside the decoder. libpng and libjpeg
 * report errors by longjmp; the jumps never cross a frame that owns GLib memory. Not a
 * folder reader.
 */
#include "tdm-image.h"
#include "tdm-i18n.h"
#include "tdm-error.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

/* An image that cannot be read: FALSE, with the message. */
#define image_error(error, ...) tdm_error_set((error), TDM_ENGINE_ERROR_DATASET, __VA_ARGS__)

/* ---- the resampler ---------------------------------------------------------- */

/* Output pixel j covers source columns [x0 + j·f, x0 + (j+1)·f); its taps are the
 * source columns it touches and their overlap, divided by f so they sum to 1. Rows
 * arrive in order, so an output row is finished as soon as a source row past it comes:
 * only the few rows still open are kept (a ring of `window` rows), not the whole
 * output in floats, which for 64 × 64 RGB was 48 KB a decoding thread. */
typedef struct {
  int size, channels;
  int src_w, src_h;
  int x0, y0;            /* the crop's corner */
  double f;              /* source pixels per output pixel */
  int *tap_first;        /* [size] */
  int *tap_count;        /* [size] */
  float *tap_weight;     /* [size × max taps] */
  int max_taps;
  float *row;            /* [size × channels]: one source row resampled across */
  float *acc;            /* [window × size × channels]: output row i in slot i % window */
  int window;
  int written;           /* output rows finished into out */
  gboolean identity;     /* the centre square is already size × size: rows are copied */
  uint8_t *out;          /* [size × size × channels] */
} Resampler;

static double
overlap(double a0, double a1, double b0, double b1)
{
  double lo = a0 > b0 ? a0 : b0;
  double hi = a1 < b1 ? a1 : b1;
  return hi > lo ? hi - lo : 0.0;
}

static void
resampler_init(Resampler *r, int src_w, int src_h, int channels, int size, uint8_t *out)
{
  int side = src_w < src_h ? src_w : src_h;
  r->size = size;
  r->channels = channels;
  r->src_w = src_w;
  r->src_h = src_h;
  r->x0 = (src_w - side) / 2;
  r->y0 = (src_h - side) / 2;
  r->f = (double)side / size;
  r->max_taps = (int)ceil(r->f) + 2;
  r->tap_first = g_new(int, size);
  r->tap_count = g_new0(int, size);
  r->tap_weight = g_new0(float, (size_t)size * r->max_taps);
  for (int j = 0; j < size; j++) {
    double a0 = j * r->f, a1 = (j + 1) * r->f;
    int first = (int)floor(a0);
    r->tap_first[j] = r->x0 + first;
    for (int s = first; s < side && s < a1 && r->tap_count[j] < r->max_taps; s++)
      r->tap_weight[(size_t)j * r->max_taps + r->tap_count[j]++] =
          (float)(overlap(a0, a1, s, s + 1) / r->f);
  }
  r->row = g_new(float, (size_t)size * channels);
  /* One source row touches at most ceil(1/f) + 1 output rows. */
  r->window = (int)MIN((double)size, ceil(1.0 / r->f) + 2);
  r->acc = g_new0(float, (size_t)r->window * size * channels);
  r->written = 0;
  r->out = out;
  r->identity = side == size;
}

static void
resampler_clear(Resampler *r)
{
  g_free(r->tap_first);
  g_free(r->tap_count);
  g_free(r->tap_weight);
  g_free(r->row);
  g_free(r->acc);
}

/* Rounds the finished output rows below `until` into out and empties their slots. */
static void
resampler_flush(Resampler *r, int until)
{
  size_t n = (size_t)r->size * r->channels;
  for (; r->written < until && r->written < r->size; r->written++) {
    float *acc = r->acc + (size_t)(r->written % r->window) * n;
    uint8_t *out = r->out + (size_t)r->written * n;
    for (size_t k = 0; k < n; k++) {
      float v = acc[k] + 0.5f;
      out[k] = v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
      acc[k] = 0.0f;
    }
  }
}

/* Source row y (0 ≤ y < src_h) of channels bytes a pixel. */
static void
resampler_add_row(Resampler *r, int y, const uint8_t *pixels)
{
  int rel = y - r->y0;
  int side_h = r->src_w < r->src_h ? r->src_w : r->src_h;
  if (rel < 0 || rel >= side_h)
    return;
  const int c = r->channels;
  if (r->identity) {
    /* Every weight is exactly 1 at scale 1, so the average is the byte itself; the
     * float pass was a sixth of decoding 28 × 28 PNGs kept at their size. */
    memcpy(r->out + (size_t)rel * r->size * c, pixels + (size_t)r->x0 * c, (size_t)r->size * c);
    return;
  }
  for (int j = 0; j < r->size; j++) {
    const float *w = r->tap_weight + (size_t)j * r->max_taps;
    const uint8_t *p = pixels + (size_t)r->tap_first[j] * c;
    for (int k = 0; k < c; k++) {
      float sum = 0.0f;
      for (int t = 0; t < r->tap_count[j]; t++)
        sum += w[t] * p[(size_t)t * c + k];
      r->row[j * c + k] = sum;
    }
  }
  /* Later source rows start at i_first or below it: rows above are finished. */
  int i_first = (int)floor(rel / r->f);
  resampler_flush(r, i_first);
  for (int i = i_first; i < r->size; i++) {
    double a0 = i * r->f, a1 = (i + 1) * r->f;
    if (a0 >= rel + 1)
      break;
    float wy = (float)(overlap(a0, a1, rel, rel + 1) / r->f);
    if (wy <= 0.0f)
      continue;
    float *dst = r->acc + (size_t)(i % r->window) * r->size * c;
    for (int k = 0; k < r->size * c; k++)
      dst[k] += wy * r->row[k];
  }
}

static void
resampler_finish(Resampler *r)
{
  if (!r->identity)
    resampler_flush(r, r->size);
}

void
tdm_image_resample(const uint8_t *pixels, int w, int h, int stride, int channels, int size,
                   uint8_t *out)
{
  g_return_if_fail(pixels != NULL && out != NULL && w > 0 && h > 0 && size > 0);
  Resampler r;
  resampler_init(&r, w, h, channels, size, out);
  for (int y = 0; y < h; y++)
    resampler_add_row(&r, y, pixels + (size_t)y * stride);
  resampler_finish(&r);
  resampler_clear(&r);
}

/* ---- files ----------------------------------------------------------------- */

/* Files up to this size are read whole with one read: for a small image the system
 * calls of a stream (two fcntl, and a read and a seek for each look at the header)
 * were a quarter of its decoding. Larger files are streamed, so memory stays at a few
 * rows whatever the image's size. */
#define WHOLE_FILE_BYTES (256 * 1024)

typedef struct {
  FILE *fp;              /* a large file, streamed */
  uint8_t *data;         /* or a small one, read whole */
  size_t len;
} Source;

static void
source_close(Source *src)
{
  if (src->fp != NULL)
    fclose(src->fp);
  g_free(src->data);
}

/* Opens without blocking (a FIFO would block an ordinary open) and refuses anything
 * but a regular file; O_NONBLOCK does nothing to a regular file's reads. */
static gboolean
source_open(Source *src, const char *path, GError **error)
{
  memset(src, 0, sizeof *src);
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return image_error(error, _("cannot open: %s"), g_strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return image_error(error, _("not a regular file"));
  }
  if (st.st_size <= WHOLE_FILE_BYTES) {
    src->data = g_malloc((size_t)st.st_size + 1);
    while (src->len < (size_t)st.st_size) {
      ssize_t got = read(fd, src->data + src->len, (size_t)st.st_size - src->len);
      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0) {
        int saved = errno;
        close(fd);
        return image_error(error, _("cannot read: %s"), g_strerror(saved));
      }
      if (got == 0)
        break;   /* cut short since fstat: what is there is decoded, and found truncated */
      src->len += (size_t)got;
    }
    close(fd);
    return TRUE;
  }
  src->fp = fdopen(fd, "rb");
  if (src->fp == NULL) {
    int saved = errno;
    close(fd);
    return image_error(error, _("cannot open: %s"), g_strerror(saved));
  }
  return TRUE;
}

/* The first `n` bytes, without consuming them; FALSE when the file is shorter. */
static gboolean
source_peek(Source *src, uint8_t *out, size_t n)
{
  if (src->fp == NULL) {
    if (src->len < n)
      return FALSE;
    memcpy(out, src->data, n);
    return TRUE;
  }
  size_t got = fread(out, 1, n, src->fp);
  rewind(src->fp);
  return got == n;
}

static TdmImageFormat
sniff(Source *src)
{
  uint8_t magic[8] = {0};
  if (source_peek(src, magic, 8) && png_sig_cmp(magic, 0, 8) == 0)
    return TDM_IMAGE_PNG;
  if (source_peek(src, magic, 3) && magic[0] == 0xFF && magic[1] == 0xD8 && magic[2] == 0xFF)
    return TDM_IMAGE_JPEG;
  return TDM_IMAGE_UNKNOWN;
}

static gboolean
check_pixels(gint64 w, gint64 h, GError **error)
{
  if (w <= 0 || h <= 0)
    return image_error(error, "the header gives a size of %" G_GINT64_FORMAT " × %" G_GINT64_FORMAT,
                       w, h);
  /* Each side is at most 2^32 − 1 in a header, so test them one by one before the
   * product, which could overflow. */
  if (w > TDM_IMAGE_MAX_PIXELS || h > TDM_IMAGE_MAX_PIXELS || w * h > TDM_IMAGE_MAX_PIXELS)
    return image_error(error,
                       "%" G_GINT64_FORMAT " × %" G_GINT64_FORMAT " pixels is above the "
                       "limit of %lld megapixels (not decoded)",
                       w, h, TDM_IMAGE_MAX_PIXELS / (1024 * 1024));
  return TRUE;
}

/* ---- PNG ------------------------------------------------------------------- */

typedef struct {
  jmp_buf jump;
  char message[160];
} PngFailure;

static void
png_on_error(png_structp png, png_const_charp message)
{
  PngFailure *failure = png_get_error_ptr(png);
  g_strlcpy(failure->message, message, sizeof failure->message);
  longjmp(failure->jump, 1);
}

static void
png_on_warning(png_structp png, png_const_charp message)
{
  (void)png;
  (void)message;   /* ancillary-chunk complaints: the pixels are still good */
}

static const char *
png_reason(const char *message)
{
  /* libpng says "Read Error" or "Not enough image data" when the file ends early. */
  if (strstr(message, "Read Error") != NULL || strstr(message, "Not enough") != NULL)
    return "truncated";
  return message;
}

/* Decodes the PNG from src; `size` 0 reads the header only into info. */
/* libpng reads a file held in memory through this; a short read is what libpng's own
 * reader reports for a file that ends early. */
typedef struct {
  const uint8_t *data;
  size_t len, pos;
} PngCursor;

static void
png_read_memory(png_structp png, png_bytep out, size_t n)
{
  PngCursor *c = png_get_io_ptr(png);
  if (n > c->len - c->pos)
    png_error(png, "Read Error");
  memcpy(out, c->data + c->pos, n);
  c->pos += n;
}

static gboolean
png_decode(Source *src, int size, int channels, uint8_t *out, TdmImageInfo *info,
           GError **error)
{
  /* The size is in IHDR, the first chunk; libpng would read on to the first pixel
   * data before saying it, so a bomb with nothing after its header would pass as
   * merely truncated. */
  uint8_t head[24];
  if (!source_peek(src, head, sizeof head) || memcmp(head + 12, "IHDR", 4) != 0)
    return image_error(error, _("truncated"));
  if (!check_pixels(GUINT32_FROM_BE(*(guint32 *)(head + 16)),
                    GUINT32_FROM_BE(*(guint32 *)(head + 20)), error))
    return FALSE;

  PngFailure failure = {.message = ""};
  PngCursor cursor = {.data = src->data, .len = src->len};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &failure, png_on_error,
                                           png_on_warning);
  if (png == NULL)
    return image_error(error, _("out of memory"));
  png_infop pinfo = png_create_info_struct(png);
  /* Set before the jump point, freed after it: nothing allocated in between. */
  Resampler *volatile r = NULL;
  uint8_t *volatile rows = NULL;
  volatile gboolean ok = FALSE;
  if (pinfo == NULL || setjmp(failure.jump) != 0) {
    image_error(error, "%s", pinfo == NULL ? "out of memory" : png_reason(failure.message));
    goto done;
  }
  if (src->fp != NULL)
    png_init_io(png, src->fp);
  else
    png_set_read_fn(png, &cursor, png_read_memory);
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
  png_read_info(png, pinfo);
  png_uint_32 w = png_get_image_width(png, pinfo), h = png_get_image_height(png, pinfo);
  int color = png_get_color_type(png, pinfo);
  if (!check_pixels(w, h, error))
    goto done;
  if (info != NULL) {
    info->format = TDM_IMAGE_PNG;
    info->width = (int)w;
    info->height = (int)h;
    info->channels = (color & PNG_COLOR_MASK_COLOR) ? 3 : 1;
  }
  if (size == 0) {
    ok = TRUE;
    goto done;
  }
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  if (channels == 1 && (color & PNG_COLOR_MASK_COLOR))
    png_set_rgb_to_gray_fixed(png, 1, -1, -1);
  if (channels == 3 && !(color & PNG_COLOR_MASK_COLOR))
    png_set_gray_to_rgb(png);
  int passes = png_set_interlace_handling(png);
  png_read_update_info(png, pinfo);
  if (png_get_rowbytes(png, pinfo) != (size_t)w * channels) {
    image_error(error, _("unsupported PNG pixel layout"));
    goto done;
  }
  r = g_new0(Resampler, 1);
  resampler_init(r, (int)w, (int)h, channels, size, out);
  if (passes > 1) {
    /* Interlaced: every pass touches every row, so the whole image is needed. */
    rows = g_malloc((size_t)w * h * channels);
    png_bytep *pointers = g_newa(png_bytep, 1);
    for (int p = 0; p < passes; p++)
      for (png_uint_32 y = 0; y < h; y++) {
        pointers[0] = rows + (size_t)y * w * channels;
        png_read_rows(png, pointers, NULL, 1);
      }
    for (png_uint_32 y = 0; y < h; y++)
      resampler_add_row(r, (int)y, rows + (size_t)y * w * channels);
  } else {
    rows = g_malloc((size_t)w * channels);
    for (png_uint_32 y = 0; y < h; y++) {
      png_read_row(png, rows, NULL);
      resampler_add_row(r, (int)y, rows);
    }
  }
  resampler_finish(r);
  ok = TRUE;
done:
  if (r != NULL) {
    resampler_clear(r);
    g_free(r);
  }
  g_free(rows);
  png_destroy_read_struct(&png, pinfo != NULL ? &pinfo : NULL, NULL);
  return ok;
}

/* ---- JPEG ------------------------------------------------------------------ */

typedef struct {
  struct jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
} JpegFailure;

static void
jpeg_on_error(j_common_ptr cinfo)
{
  JpegFailure *failure = (JpegFailure *)cinfo->err;
  cinfo->err->format_message(cinfo, failure->message);
  longjmp(failure->jump, 1);
}

/* libjpeg only warns about a file that ends early or corrupt data and fills the rest
 * with grey; a training set must not learn from that, so warnings fail the file. */
static void
jpeg_on_message(j_common_ptr cinfo, int level)
{
  /* Stray bytes between markers are common in camera files and harm no pixel. */
  if (level >= 0 || cinfo->err->msg_code == JWRN_EXTRANEOUS_DATA)
    return;
  JpegFailure *failure = (JpegFailure *)cinfo->err;
  if (cinfo->err->msg_code == JWRN_JPEG_EOF)
    g_strlcpy(failure->message, "truncated", sizeof failure->message);
  else
    cinfo->err->format_message(cinfo, failure->message);
  longjmp(failure->jump, 1);
}

static gboolean
jpeg_decode(Source *src, int size, int channels, uint8_t *out, TdmImageInfo *info,
            GError **error)
{
  struct jpeg_decompress_struct cinfo;
  JpegFailure failure;
  memset(&failure, 0, sizeof failure);
  cinfo.err = jpeg_std_error(&failure.mgr);
  failure.mgr.error_exit = jpeg_on_error;
  failure.mgr.emit_message = jpeg_on_message;
  Resampler *volatile r = NULL;
  uint8_t *volatile row = NULL;
  volatile gboolean ok = FALSE;
  if (setjmp(failure.jump) != 0) {
    image_error(error, "%s", failure.message);
    goto done;
  }
  jpeg_create_decompress(&cinfo);
  if (src->fp != NULL)
    jpeg_stdio_src(&cinfo, src->fp);
  else
    jpeg_mem_src(&cinfo, src->data, (unsigned long)src->len);
  jpeg_read_header(&cinfo, TRUE);
  if (!check_pixels(cinfo.image_width, cinfo.image_height, error))
    goto done;
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    image_error(error, _("CMYK JPEG is not supported"));
    goto done;
  }
  if (info != NULL) {
    info->format = TDM_IMAGE_JPEG;
    info->width = (int)cinfo.image_width;
    info->height = (int)cinfo.image_height;
    info->channels = cinfo.num_components == 1 ? 1 : 3;
  }
  if (size == 0) {
    ok = TRUE;
    goto done;
  }
  cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  /* The largest DCT reduction that keeps the centre square at least the output's
   * size: libjpeg's scaled inverse DCT is itself a low-pass reduction, and decoding
   * 4× fewer pixels is most of a JPEG's time; the area average does the rest. */
  unsigned side = cinfo.image_width < cinfo.image_height ? cinfo.image_width
                                                         : cinfo.image_height;
  cinfo.scale_num = 1;
  cinfo.scale_denom = 1;
  for (unsigned d = 8; d > 1; d /= 2)
    if (side / d >= (unsigned)size) {
      cinfo.scale_denom = d;
      break;
    }
  cinfo.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&cinfo);
  if (cinfo.output_components != channels) {
    image_error(error, _("unsupported JPEG colour layout"));
    goto done;
  }
  int w = (int)cinfo.output_width, h = (int)cinfo.output_height;
  r = g_new0(Resampler, 1);
  resampler_init(r, w, h, channels, size, out);
  row = g_malloc((size_t)w * channels);
  while (cinfo.output_scanline < cinfo.output_height) {
    int y = (int)cinfo.output_scanline;
    JSAMPROW rows[1] = {row};
    if (jpeg_read_scanlines(&cinfo, rows, 1) != 1)
      break;
    resampler_add_row(r, y, row);
  }
  jpeg_finish_decompress(&cinfo);
  resampler_finish(r);
  ok = TRUE;
done:
  if (r != NULL) {
    resampler_clear(r);
    g_free(r);
  }
  g_free(row);
  jpeg_destroy_decompress(&cinfo);
  return ok;
}

/* ---- entry points ---------------------------------------------------------- */

static gboolean
decode(const char *path, int size, int channels, uint8_t *out, TdmImageInfo *info,
       GError **error)
{
  Source src;
  if (!source_open(&src, path, error))
    return FALSE;
  gboolean ok;
  switch (sniff(&src)) {
  case TDM_IMAGE_PNG:
    ok = png_decode(&src, size, channels, out, info, error);
    break;
  case TDM_IMAGE_JPEG:
    ok = jpeg_decode(&src, size, channels, out, info, error);
    break;
  default:
    ok = image_error(error, _("not a PNG or JPEG image"));
    break;
  }
  source_close(&src);
  return ok;
}

gboolean
tdm_image_probe(const char *path, TdmImageInfo *info, GError **error)
{
  g_return_val_if_fail(path != NULL && info != NULL, FALSE);
  memset(info, 0, sizeof *info);
  return decode(path, 0, 0, NULL, info, error);
}

gboolean
tdm_image_load(const char *path, int size, int channels, uint8_t *out, GError **error)
{
  g_return_val_if_fail(path != NULL && out != NULL, FALSE);
  g_return_val_if_fail(size > 0 && (channels == 1 || channels == 3), FALSE);
  return decode(path, size, channels, out, NULL, error);
}
