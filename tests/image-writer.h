/* SPDX-License-Identifier: GPL-3.0-or-later */
/* image-writer.h — PNG and JPEG files for the tests, written with libpng and libjpeg.
 *
 * Header-only so the image-folder test and the CLI test's helper share it. Also writes
 * the damaged files the skip policy is tested with: a PNG cut short, and a PNG whose
 * header claims 60000 × 60000 pixels with no pixels behind it.
 */
#pragma once

#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
/* jpeglib.h needs FILE from stdio.h first. */
#include <jpeglib.h>
#include <png.h>

static inline void
test_write_png(const char *path, int w, int h, int channels, const uint8_t *pixels)
{
  FILE *fp = fopen(path, "wb");
  g_assert_nonnull(fp);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  g_assert_true(setjmp(png_jmpbuf(png)) == 0);
  png_init_io(png, fp);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8,
               channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; y++)
    png_write_row(png, (png_const_bytep)(pixels + (size_t)y * w * channels));
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  fclose(fp);
}

static inline void
test_write_jpeg(const char *path, int w, int h, int channels, const uint8_t *pixels,
                int quality)
{
  FILE *fp = fopen(path, "wb");
  g_assert_nonnull(fp);
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, fp);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = channels;
  c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = (JSAMPROW)(pixels + (size_t)c.next_scanline * w * channels);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  fclose(fp);
}

/* A PNG of one flat grey level. */
static inline void
test_write_flat_png(const char *path, int w, int h, int channels, uint8_t level)
{
  uint8_t *pixels = g_malloc((size_t)w * h * channels);
  memset(pixels, level, (size_t)w * h * channels);
  test_write_png(path, w, h, channels, pixels);
  g_free(pixels);
}

/* The first `keep` bytes of a good PNG: a file that ends in the middle of its data. */
static inline void
test_write_truncated_png(const char *path, size_t keep)
{
  g_autofree char *whole = g_strconcat(path, ".whole", NULL);
  uint8_t *pixels = g_malloc(64 * 64);
  for (int i = 0; i < 64 * 64; i++)
    pixels[i] = (uint8_t)(i * 7 + i / 64);
  test_write_png(whole, 64, 64, 1, pixels);
  g_free(pixels);
  g_autofree char *bytes = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(whole, &bytes, &len, NULL));
  g_assert_cmpuint(len, >, keep);
  g_assert_true(g_file_set_contents(path, bytes, (gssize)keep, NULL));
  remove(whole);
}

/* A PNG signature and IHDR of 60000 × 60000 grey pixels, nothing after: decoding it
 * would need 3.6 GB. */
static inline void
test_write_bomb_png(const char *path)
{
  FILE *fp = fopen(path, "wb");
  g_assert_nonnull(fp);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  g_assert_true(setjmp(png_jmpbuf(png)) == 0);
  png_init_io(png, fp);
  png_set_IHDR(png, info, 60000, 60000, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_destroy_write_struct(&png, &info);
  fclose(fp);
}
