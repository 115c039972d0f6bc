/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-conv-names.c — the convolution engine's candidate names
 * (tdm-backend-cuda-conv-name.h), on any machine: each field of a cuDNN candidate's
 * name read back (a plan run in chunks of samples, ":n25", among them), every name
 * spelt one way (a fused plan's, "cudnn-fused:…", too), and damaged names refused — a
 * field missing or out of order, a sign, a leading zero, a chunk of no samples, a number
 * past its type, trailing text, a fused plan or phases padded or in chunks. A strided
 * input gradient by phases ("cudnn-phases:…", and over dy's pre-padded copy,
 * "cudnn-phases:…:hp") is read back and spelt one way too; no other kind is pre-padded. */
#include "tdm-backend-cuda-conv-name.h"

static void
test_read_back(void)
{
  TdmCudnnName n;
  g_assert_true(tdm_cudnn_name_parse("cudnn:e62:r0:h", &n));
  g_assert_cmpint(n.engine, ==, 62);
  g_assert_cmpint(n.rank, ==, 0);
  g_assert_cmpint(n.out, ==, 'h');
  g_assert_false(n.padded);
  g_assert_cmpint(n.chunk, ==, 0);
  g_assert_true(tdm_cudnn_name_parse("cudnn:e7:r12:f:c8", &n));
  g_assert_cmpint(n.engine, ==, 7);
  g_assert_cmpint(n.rank, ==, 12);
  g_assert_cmpint(n.out, ==, 'f');
  g_assert_true(n.padded);
  g_assert_cmpint(n.chunk, ==, 0);
  g_assert_true(tdm_cudnn_name_parse("cudnn:e62:r0:h:n25", &n));
  g_assert_cmpint(n.chunk, ==, 25);
  g_assert_false(n.padded);
  g_assert_true(tdm_cudnn_name_parse("cudnn:e0:r5:f:c8:n64", &n));
  g_assert_cmpint(n.engine, ==, 0);
  g_assert_true(n.padded);
  g_assert_cmpint(n.chunk, ==, 64);
  g_assert_true(tdm_cudnn_name_parse("cudnn:e9223372036854775807:r2147483647:f:n2147483647",
                                     &n));
  g_assert_cmpint(n.engine, ==, G_MAXINT64);
  g_assert_cmpint(n.rank, ==, G_MAXINT);
  g_assert_cmpint(n.chunk, ==, G_MAXINT);
  g_assert_false(n.fused);
  g_assert_true(tdm_cudnn_name_parse("cudnn-fused:e3:r1:h", &n));
  g_assert_true(n.fused);
  g_assert_cmpint(n.engine, ==, 3);
  g_assert_cmpint(n.rank, ==, 1);
  g_assert_cmpint(n.out, ==, 'h');
  g_assert_false(n.padded);
  g_assert_cmpint(n.chunk, ==, 0);
  g_assert_true(tdm_cudnn_name_parse("cudnn-fused:e0:r0:f", &n));
  g_assert_true(n.fused);
  g_assert_cmpint(n.out, ==, 'f');
  g_assert_true(tdm_conv_candidate_name_valid("cudnn-fused:e3:r1:h"));
  g_assert_false(n.phases);
  g_assert_true(tdm_cudnn_name_parse("cudnn-phases:e49:r2:h", &n));
  g_assert_true(n.phases);
  g_assert_false(n.fused);
  g_assert_cmpint(n.engine, ==, 49);
  g_assert_cmpint(n.rank, ==, 2);
  g_assert_cmpint(n.out, ==, 'h');
  g_assert_false(n.padded);
  g_assert_cmpint(n.chunk, ==, 0);
  g_assert_true(tdm_conv_candidate_name_valid("cudnn-phases:e0:r0:f"));
  g_assert_false(n.prepadded);
  g_assert_true(tdm_cudnn_name_parse("cudnn-phases:e49:r7:hp", &n));
  g_assert_true(n.phases);
  g_assert_true(n.prepadded);
  g_assert_cmpint(n.engine, ==, 49);
  g_assert_cmpint(n.rank, ==, 7);
  g_assert_cmpint(n.out, ==, 'h');
  g_assert_true(tdm_cudnn_name_parse("cudnn-phases:e0:r0:fp", &n));
  g_assert_true(n.prepadded);
  g_assert_cmpint(n.out, ==, 'f');
}

/* Every combination formatted and read back to itself. */
static void
test_round_trip(void)
{
  const gint64 engines[] = {0, 1, 62, 1234567890123};
  const int ranks[] = {0, 3, 255};
  const int chunks[] = {0, 1, 24, 25, 100000};
  for (size_t e = 0; e < G_N_ELEMENTS(engines); e++)
    for (size_t r = 0; r < G_N_ELEMENTS(ranks); r++)
      for (int out = 0; out < 2; out++)
        for (int padded = 0; padded < 2; padded++)
          for (size_t c = 0; c < G_N_ELEMENTS(chunks); c++) {
            TdmCudnnName want = {engines[e], ranks[r], out ? 'h' : 'f', padded, chunks[c],
                                 FALSE};
            g_autofree char *name = tdm_cudnn_name_format(&want);
            TdmCudnnName got;
            g_assert_true(tdm_cudnn_name_parse(name, &got));
            g_assert_cmpint(got.engine, ==, want.engine);
            g_assert_cmpint(got.rank, ==, want.rank);
            g_assert_cmpint(got.out, ==, want.out);
            g_assert_cmpint(got.padded, ==, want.padded);
            g_assert_cmpint(got.chunk, ==, want.chunk);
            g_assert_true(tdm_conv_candidate_name_valid(name));
          }
  for (size_t e = 0; e < G_N_ELEMENTS(engines); e++)
    for (size_t r = 0; r < G_N_ELEMENTS(ranks); r++)
      for (int out = 0; out < 2; out++) {
        TdmCudnnName want = {engines[e], ranks[r], out ? 'h' : 'f', FALSE, 0, TRUE};
        g_autofree char *name = tdm_cudnn_name_format(&want);
        g_assert_true(g_str_has_prefix(name, "cudnn-fused:e"));
        TdmCudnnName got;
        g_assert_true(tdm_cudnn_name_parse(name, &got));
        g_assert_true(got.fused);
        g_assert_cmpint(got.engine, ==, want.engine);
        g_assert_cmpint(got.rank, ==, want.rank);
        g_assert_cmpint(got.out, ==, want.out);
        g_assert_true(tdm_conv_candidate_name_valid(name));
      }
  for (size_t e = 0; e < G_N_ELEMENTS(engines); e++)
    for (size_t r = 0; r < G_N_ELEMENTS(ranks); r++)
      for (int out = 0; out < 2; out++)
        for (int prepadded = 0; prepadded < 2; prepadded++) {
          TdmCudnnName want = {engines[e], ranks[r], out ? 'h' : 'f', FALSE, 0, FALSE, TRUE,
                               prepadded};
          g_autofree char *name = tdm_cudnn_name_format(&want);
          g_assert_true(g_str_has_prefix(name, "cudnn-phases:e"));
          TdmCudnnName got;
          g_assert_true(tdm_cudnn_name_parse(name, &got));
          g_assert_true(got.phases);
          g_assert_false(got.fused);
          g_assert_cmpint(got.engine, ==, want.engine);
          g_assert_cmpint(got.rank, ==, want.rank);
          g_assert_cmpint(got.out, ==, want.out);
          g_assert_cmpint(got.prepadded, ==, want.prepadded);
          g_assert_true(tdm_conv_candidate_name_valid(name));
        }
  TdmCudnnName phases = {49, 0, 'h', FALSE, 0, FALSE, TRUE};
  g_autofree char *phases_name = tdm_cudnn_name_format(&phases);
  g_assert_cmpstr(phases_name, ==, "cudnn-phases:e49:r0:h");
  TdmCudnnName prepadded = {49, 3, 'f', FALSE, 0, FALSE, TRUE, TRUE};
  g_autofree char *prepadded_name = tdm_cudnn_name_format(&prepadded);
  g_assert_cmpstr(prepadded_name, ==, "cudnn-phases:e49:r3:fp");
  TdmCudnnName chunked = {62, 0, 'h', FALSE, 32, FALSE};
  g_autofree char *name = tdm_cudnn_name_format(&chunked);
  g_assert_cmpstr(name, ==, "cudnn:e62:r0:h:n32");
  TdmCudnnName fused = {62, 0, 'h', FALSE, 0, TRUE};
  g_autofree char *fused_name = tdm_cudnn_name_format(&fused);
  g_assert_cmpstr(fused_name, ==, "cudnn-fused:e62:r0:h");
}

static void
test_damaged(void)
{
  const char *damaged[] = {
    "",
    "cudnn:",
    "cudnn:e62",
    "cudnn:e62:r0",
    "cudnn:e62:r0:",
    "cudnn:e62:r0:x",
    "cudnn:e62:r0:hh",
    "cudnn:e62:r:h",
    "cudnn:e:r0:h",
    "cudnn:e-1:r0:h",
    "cudnn:e+62:r0:h",
    "cudnn:e062:r0:h",
    "cudnn:e62:r00:h",
    "cudnn:e62:r-1:h",
    "cudnn:e62:r2147483648:h",
    "cudnn:e9223372036854775808:r0:h",
    "cudnn:e62:r0:h:n",
    "cudnn:e62:r0:h:n0",
    "cudnn:e62:r0:h:n-3",
    "cudnn:e62:r0:h:n032",
    "cudnn:e62:r0:h:n2147483648",
    "cudnn:e62:r0:h:n32:c8",
    "cudnn:e62:r0:h:c4",
    "cudnn:e62:r0:h:c8:c8",
    "cudnn:e62:r0:h:n32:n32",
    "cudnn:e62:r0:h ",
    " cudnn:e62:r0:h",
    "cudnn:e62:r0:h:n32x",
    "cudnn:e 62:r0:h",
    "CUDNN:e62:r0:h",
    "cudnn:e62:r0:F",
    "im2col:n32",
    "own:bwd",
    "own:fwd ",
    "own:wgrad:n32",
    "cudnn-fused:",
    "cudnn-fused:e62",
    "cudnn-fused:e62:r0",
    "cudnn-fused:e062:r0:h",
    "cudnn-fused:e62:r0:h:c8",
    "cudnn-fused:e62:r0:h:n32",
    "cudnn-fused:e62:r0:h ",
    "cudnn_fused:e62:r0:h",
    "cudnn-fused:62:r0:h",
    "cudnn:fused:e62:r0:h",
    "cudnn-phases:",
    "cudnn-phases:e49",
    "cudnn-phases:e49:r0",
    "cudnn-phases:e049:r0:h",
    "cudnn-phases:e49:r0:h:c8",
    "cudnn-phases:e49:r0:h:n32",
    "cudnn-phases:e49:r0:h ",
    "cudnn-phase:e49:r0:h",
    "cudnn-phases-fused:e49:r0:h",
    "cudnn-phases:e49:r0:pp",
    "cudnn-phases:e49:r0:hpp",
    "cudnn-phases:e49:r0:hP",
    "cudnn-phases:e49:r0:h:p",
    "cudnn-phases:e49:r0:hp:c8",
    "cudnn-phases:e49:r0:hp:n32",
    "cudnn-phases:e49:r0:hp ",
    "cudnn:e62:r0:hp",
    "cudnn:e62:r0:fp:c8",
    "cudnn-fused:e62:r0:hp",
  };
  for (size_t i = 0; i < G_N_ELEMENTS(damaged); i++) {
    TdmCudnnName n;
    g_test_message("%s", damaged[i]);
    g_assert_false(tdm_cudnn_name_parse(damaged[i], &n));
    g_assert_false(tdm_conv_candidate_name_valid(damaged[i]));
  }
  g_assert_false(tdm_conv_candidate_name_valid(NULL));
  g_assert_true(tdm_conv_candidate_name_valid("im2col"));
  g_assert_true(tdm_conv_candidate_name_valid("own:dgrad"));
  g_assert_true(tdm_conv_candidate_name_valid("own:fwd"));
  g_assert_true(tdm_conv_candidate_name_valid("own:wgrad"));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/conv-names/read-back", test_read_back);
  g_test_add_func("/conv-names/round-trip", test_round_trip);
  g_test_add_func("/conv-names/damaged", test_damaged);
  return g_test_run();
}
