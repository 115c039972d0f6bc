/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-image.h — one PNG or JPEG file read into a small square sample.
 *
 * Decoding goes through libpng and libjpeg-turbo, row by row: the image is converted
 * to grey or RGB while it is decoded, its centre square is cropped and area-averaged
 * to size × size, so memory stays at a few rows whatever the image's size (a file of
 * up to 256 KiB is read whole first: one read instead of a stream's many calls). The header
 * is read first and an image above TDM_IMAGE_MAX_PIXELS is refused before any pixel is
 * decoded. Only regular files are opened (a FIFO is refused without blocking).
 * Error messages give the reason only ("truncated", "not a PNG or JPEG image"): the
 * caller names the file. Not a folder scanner (tdm-dataset-folder.c) and not a writer.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* 64 megapixels: a 8192 × 8192 photo passes, a decompression bomb does not. */
#define TDM_IMAGE_MAX_PIXELS (64LL * 1024 * 1024)

typedef enum {
  TDM_IMAGE_UNKNOWN,
  TDM_IMAGE_PNG,
  TDM_IMAGE_JPEG,
} TdmImageFormat;

typedef struct {
  TdmImageFormat format;
  int width, height;
  int channels;          /* 1 when the file is grey, 3 when it has colour */
} TdmImageInfo;

/* Reads the header only. Fails for non-images, unreadable files and sizes above the
 * pixel limit. */
gboolean tdm_image_probe (const char *path, TdmImageInfo *info, GError **error);

/* Decodes into out[size × size × channels] (HWC), channels 1 (grey) or 3 (RGB). */
gboolean tdm_image_load (const char *path, int size, int channels, uint8_t *out,
                         GError **error);

/* The same resampling on pixels already in memory (w × h × channels, rows of
 * `stride` bytes): for images that did not come from a file, and for tests. */
void tdm_image_resample (const uint8_t *pixels, int w, int h, int stride, int channels,
                         int size, uint8_t *out);

G_END_DECLS
