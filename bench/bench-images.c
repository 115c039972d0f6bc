/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-images.c — decoding image folders: Tandem against Pillow, the cache, memory.
 *
 * Writes two folders of class folders into a temporary folder: (a) 28 × 28 grey PNGs
 * (Fashion-MNIST's first training images, or the synthetic set), (b) 256 × 256 RGB
 * JPEGs of smooth shapes and noise, decoded to 64 × 64. For each it times Tandem's
 * decode on every core (cache off, median of three), bench/pillow_folder.py in one
 * process (the ImageFolder way; for JPEGs also with Pillow's draft mode), the first
 * start that writes the cache and later starts that read it (median of five), what
 * listing and stat-ing every file alone costs (a cached start must do that much to
 * see a changed file), and the peak memory of a process that only decodes, against
 * the size of the decoded set, with the pages of library files it maps in apart.
 * Not a test: it asserts nothing.
 *
 * With --memory-jpeg N (5,000 unless 0) it also measures the memory alone on N JPEGs.
 *
 *   bench-images [--png N] [--jpeg N] [--memory-jpeg N] [--python PATH]
 */
#include "../tests/image-writer.h"
#include "tdm-dataset-folder.h"
#include "tdm-dataset.h"
#include "tdm-bench.h"

#include <dirent.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

static void
remove_tree(const char *path)
{
  if (g_file_test(path, G_FILE_TEST_IS_DIR) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
    GDir *d = g_dir_open(path, 0, NULL);
    const char *name;
    while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
      g_autofree char *child = g_build_filename(path, name, NULL);
      remove_tree(child);
    }
    if (d != NULL)
      g_dir_close(d);
    g_rmdir(path);
  } else {
    g_unlink(path);
  }
}

static void
write_png_set(const char *root, int count)
{
  g_autoptr(TdmDatasetPair) pair = NULL;
  if (g_file_test(TDM_FASHION_MNIST_DIR, G_FILE_TEST_IS_DIR))
    pair = tdm_dataset_open("fashion-mnist", NULL);
  if (pair == NULL)
    pair = tdm_dataset_synthetic(3, count, 10);
  const TdmDataset *d = pair->train;
  count = MIN(count, d->count);
  for (int i = 0; i < count; i++) {
    g_autofree char *dir = g_strdup_printf("%s/%d", root, d->labels[i]);
    g_mkdir_with_parents(dir, 0755);
    g_autofree char *path = g_strdup_printf("%s/%06d.png", dir, i);
    test_write_png(path, d->width, d->height, 1, d->images + (size_t)i * tdm_dataset_sample_size(d));
  }
}

static void
write_jpeg_set(const char *root, int count)
{
  const int side = 256;
  guint8 *px = g_malloc((size_t)side * side * 3);
  GRand *rand = g_rand_new_with_seed(7);
  for (int i = 0; i < count; i++) {
    int cls = i % 4;
    double cx = g_rand_double_range(rand, 64, 192), cy = g_rand_double_range(rand, 64, 192);
    double r = g_rand_double_range(rand, 30, 90);
    for (int y = 0; y < side; y++)
      for (int x = 0; x < side; x++) {
        guint8 *p = px + ((size_t)y * side + x) * 3;
        gboolean inside = (x - cx) * (x - cx) + (y - cy) * (y - cy) < r * r;
        int noise = g_rand_int_range(rand, -12, 13);
        p[0] = (guint8)CLAMP((inside ? 60 * cls : x) + noise, 0, 255);
        p[1] = (guint8)CLAMP((inside ? 255 - 50 * cls : y) + noise, 0, 255);
        p[2] = (guint8)CLAMP((x + y) / 2 + noise, 0, 255);
      }
    g_autofree char *dir = g_strdup_printf("%s/c%d", root, cls);
    g_mkdir_with_parents(dir, 0755);
    g_autofree char *path = g_strdup_printf("%s/%06d.jpg", dir, i);
    test_write_jpeg(path, side, side, 3, px, 90);
  }
  g_rand_free(rand);
  g_free(px);
}

static double last_cpu;

static double
load_seconds(const char *folder, int size, int channels, gboolean no_cache, int *files)
{
  TdmImageOptions o = {.size = size, .channels = channels, .no_cache = no_cache};
  g_autoptr(GError) error = NULL;
  double c0 = tdm_bench_process_cpu_seconds();
  gint64 t0 = g_get_monotonic_time();
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_load_image_folder(folder, &o, NULL, NULL, NULL,
                                                                  &error);
  double s = (g_get_monotonic_time() - t0) / 1e6;
  last_cpu = tdm_bench_process_cpu_seconds() - c0;
  if (pair == NULL) {
    g_printerr("bench-images: %s\n", error->message);
    exit(1);
  }
  if (files != NULL)
    *files = pair->train->count + pair->test->count;
  return s;
}

static int
compare_doubles(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median wall seconds; *cpu gets the median CPU seconds. */
static double
median_load(const char *folder, int size, int channels, gboolean no_cache, int repeat,
            int *files, double *cpu)
{
  double t[8], c[8];
  for (int i = 0; i < repeat; i++) {
    t[i] = load_seconds(folder, size, channels, no_cache, files);
    c[i] = last_cpu;
  }
  qsort(t, repeat, sizeof(double), compare_doubles);
  qsort(c, repeat, sizeof(double), compare_doubles);
  *cpu = c[repeat / 2];
  return t[repeat / 2];
}

static double
pillow_seconds(const char *python, const char *folder, int size, int channels, gboolean draft,
               double *cpu)
{
  g_autofree char *script = g_build_filename(TDM_BENCH_DIR, "pillow_folder.py", NULL);
  g_autofree char *s_size = g_strdup_printf("%d", size);
  g_autofree char *s_ch = g_strdup_printf("%d", channels);
  const char *argv[] = {python, script, folder, s_size, s_ch, draft ? "--draft" : NULL, NULL};
  g_autofree char *out = NULL;
  g_autoptr(GError) error = NULL;
  int status = 0;
  if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, NULL,
                    &status, &error) || status != 0) {
    g_printerr("bench-images: Pillow run failed: %s\n", error ? error->message : "exit status");
    return -1;
  }
  const char *p = strstr(out, "\"seconds\": ");
  const char *q = strstr(out, "\"cpu\": ");
  *cpu = q != NULL ? g_ascii_strtod(q + 7, NULL) : -1;
  return p != NULL ? g_ascii_strtod(p + 11, NULL) : -1;
}

static long
status_kb(const char *field)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/self/status", &text, NULL, NULL))
    return -1;
  const char *p = strstr(text, field);
  return p != NULL ? strtol(p + strlen(field) + 1, NULL, 10) : -1;
}

/* In a child: only the decode, so the peak is the decoder's. */
static int
child_load(const char *folder, int size, int channels)
{
  long before = status_kb("VmRSS:");
  long file_before = status_kb("RssFile:");
  TdmImageOptions o = {.size = size, .channels = channels, .no_cache = TRUE};
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_load_image_folder(folder, &o, NULL, NULL, NULL,
                                                                  NULL);
  if (pair == NULL)
    return 1;
  long peak = status_kb("VmHWM:");
  double set = ((double)pair->train->count + pair->test->count) *
               tdm_dataset_sample_size(pair->train) / 1024.0;
  printf("%ld %ld %.0f %ld\n", before, peak, set, status_kb("RssFile:") - file_before);
  return 0;
}

/* *files_mb: of the peak beyond the set, the pages of files (the libraries' code and
 * tables the first decode maps in), counted as they stand when decoding ends. */
static void
memory(const char *self, const char *folder, int size, int channels, double *set_mb,
       double *extra_mb, double *files_mb)
{
  g_autofree char *s_size = g_strdup_printf("%d", size);
  g_autofree char *s_ch = g_strdup_printf("%d", channels);
  const char *argv[] = {self, "--child-load", folder, s_size, s_ch, NULL};
  g_autofree char *out = NULL;
  int status = 0;
  long before = 0, peak = 0, files = 0;
  double set = 0;
  *set_mb = *extra_mb = *files_mb = -1;
  if (g_spawn_sync(NULL, (char **)argv, NULL, 0, NULL, NULL, &out, NULL, &status, NULL) &&
      status == 0 && sscanf(out, "%ld %ld %lf %ld", &before, &peak, &set, &files) == 4) {
    *set_mb = set / 1024.0;
    *extra_mb = (peak - before - set) / 1024.0;
    *files_mb = files / 1024.0;
  }
}

/* What a cached start cannot go below while it looks at every file: reading each
 * class folder and one fstatat per entry (median of five). */
static double
scan_floor(const char *folder, double *cpu)
{
  double t[5], c[5];
  g_autoptr(GPtrArray) classes = g_ptr_array_new_with_free_func(g_free);
  GDir *top = g_dir_open(folder, 0, NULL);
  const char *name;
  while (top != NULL && (name = g_dir_read_name(top)) != NULL)
    g_ptr_array_add(classes, g_build_filename(folder, name, NULL));
  if (top != NULL)
    g_dir_close(top);
  for (int r = 0; r < 5; r++) {
    double c0 = tdm_bench_process_cpu_seconds();
    gint64 t0 = g_get_monotonic_time();
    long seen = 0;
    for (guint k = 0; k < classes->len; k++) {
      DIR *d = opendir(g_ptr_array_index(classes, k));
      struct dirent *de;
      while (d != NULL && (de = readdir(d)) != NULL) {
        struct stat st;
        if (de->d_name[0] != '.' && fstatat(dirfd(d), de->d_name, &st, 0) == 0)
          seen += st.st_size > 0;
      }
      if (d != NULL)
        closedir(d);
    }
    t[r] = (g_get_monotonic_time() - t0) / 1e6;
    c[r] = tdm_bench_process_cpu_seconds() - c0;
    (void)seen;
  }
  qsort(t, 5, sizeof(double), compare_doubles);
  qsort(c, 5, sizeof(double), compare_doubles);
  *cpu = c[2];
  return t[2];
}

static void
print_memory(double set_mb, double extra_mb, double files_mb)
{
  if (set_mb >= 0)
    printf("  memory while decoding: decoded set %.1f MB, peak beyond it %.2f MB (%.1f %%); "
           "of it, library pages mapped in %.2f MB, the rest %.2f MB (%.1f %%)\n",
           set_mb, extra_mb, 100.0 * extra_mb / set_mb, files_mb, extra_mb - files_mb,
           100.0 * (extra_mb - files_mb) / set_mb);
}

static void
bench_set(const char *self, const char *python, const char *label, const char *folder,
          int size, int channels, gboolean jpeg)
{
  int files = 0;
  double tandem_cpu, pil_cpu = -1, draft_cpu = -1, hit_cpu;
  double tandem = median_load(folder, size, channels, TRUE, 3, &files, &tandem_cpu);
  double pil = pillow_seconds(python, folder, size, channels, FALSE, &pil_cpu);
  double pil_draft = jpeg ? pillow_seconds(python, folder, size, channels, TRUE, &draft_cpu) : -1;
  g_autofree char *cache = NULL;
  TdmImageOptions o = {.size = size, .channels = channels};
  cache = tdm_image_folder_cache_path(folder, &o);
  g_unlink(cache);
  double first = load_seconds(folder, size, channels, FALSE, NULL);
  double hit = median_load(folder, size, channels, FALSE, 5, NULL, &hit_cpu);
  double set_mb, extra_mb, files_mb;
  memory(self, folder, size, channels, &set_mb, &extra_mb, &files_mb);
  double floor_cpu = 0;
  double floor_s = scan_floor(folder, &floor_cpu);

  printf("\n%s: %d files → %d × %d × %d\n", label, files, size, size, channels);
  printf("                         wall s   files/s  ratio   CPU s (all threads)\n");
  printf("  Tandem (%u threads)    %8.3f %9.0f          %7.3f\n", g_get_num_processors(), tandem,
         files / tandem, tandem_cpu);
  if (pil > 0)
    printf("  Pillow (1 process)    %8.3f %9.0f  %5.1f×  %7.3f\n", pil, files / pil,
           pil / tandem, pil_cpu);
  if (pil_draft > 0)
    printf("  Pillow, draft mode    %8.3f %9.0f  %5.1f×  %7.3f\n", pil_draft, files / pil_draft,
           pil_draft / tandem, draft_cpu);
  printf("  first start (writes cache) %.3f s; cached start %.4f s wall, %.4f s CPU: "
         "%.0f× (wall), %.0f× (CPU) faster than decoding\n", first, hit, hit_cpu,
         tandem / hit, tandem_cpu / hit_cpu);
  printf("  of a cached start, listing and stat of every file alone: %.4f s wall, %.4f s CPU "
         "(the most it allows: %.0f× wall, %.0f× CPU)\n", floor_s, floor_cpu,
         tandem / floor_s, tandem_cpu / floor_cpu);
  print_memory(set_mb, extra_mb, files_mb);
}

/* The memory of a larger folder of the same kind of JPEGs alone: the libraries' pages
 * are about 1 MB whatever the set, so a small set shows them as a large share. */
static void
bench_memory_only(const char *self, const char *root, int count)
{
  g_autofree char *folder = g_build_filename(root, "jpeg-memory", NULL);
  write_jpeg_set(folder, count);
  double set_mb, extra_mb, files_mb;
  memory(self, folder, 64, 3, &set_mb, &extra_mb, &files_mb);
  printf("\n(b') %d × 256 × 256 RGB JPEG → 64 × 64, memory alone\n", count);
  print_memory(set_mb, extra_mb, files_mb);
}

int
main(int argc, char **argv)
{
  int png_count = 20000, jpeg_count = 1000, memory_count = 5000;
  const char *python = "/usr/bin/python3";
  if (argc == 5 && g_str_equal(argv[1], "--child-load"))
    return child_load(argv[2], atoi(argv[3]), atoi(argv[4]));
  for (int i = 1; i + 1 < argc; i += 2) {
    if (g_str_equal(argv[i], "--png"))
      png_count = atoi(argv[i + 1]);
    else if (g_str_equal(argv[i], "--jpeg"))
      jpeg_count = atoi(argv[i + 1]);
    else if (g_str_equal(argv[i], "--memory-jpeg"))
      memory_count = atoi(argv[i + 1]);
    else if (g_str_equal(argv[i], "--python"))
      python = argv[i + 1];
  }
  g_autofree char *cache = g_dir_make_tmp("tdm-bench-cache-XXXXXX", NULL);
  g_setenv("XDG_CACHE_HOME", cache, TRUE);
  g_autofree char *root = g_dir_make_tmp("tdm-bench-images-XXXXXX", NULL);
  g_autofree char *png = g_build_filename(root, "png", NULL);
  g_autofree char *jpeg = g_build_filename(root, "jpeg", NULL);
  printf("writing %d PNGs and %d JPEGs under %s …\n", png_count, jpeg_count, root);
  fflush(stdout);
  write_png_set(png, png_count);
  write_jpeg_set(jpeg, jpeg_count);
  g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);

  bench_set(self, python, "(a) 28 × 28 grey PNG", png, 28, 1, FALSE);
  bench_set(self, python, "(b) 256 × 256 RGB JPEG → 64 × 64", jpeg, 64, 3, TRUE);
  if (memory_count > 0)
    bench_memory_only(self, root, memory_count);
  remove_tree(root);
  remove_tree(cache);
  return 0;
}
