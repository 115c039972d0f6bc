/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu-bn.c — part of test-backend-cpu: a bn's statistics in one operation
 * (bn_moments_stats, what a bn not synchronized over replicas runs) give the bits of
 * bn_moments into slot 0 of 1 then bn_stats of it, in saved, the slot and the running
 * averages (or with none), for float32 and bf16 inputs of odd shapes; and the rule the
 * CUDA moments' finish uses for it (its slot merged back with rows for the count, which
 * another thread stores) gives bn_stats's bits from the same slot. The CPU backend has
 * no bn_moments_stats of its own: the front door's two calls are what it runs.
 */
#include "test-backend-cpu.h"
#include "tdm-network.h" /* TDM_BN_EPS, TDM_BN_MOMENTUM */

/* Every output poisoned with NaN, so a value left unwritten shows. */
typedef struct {
  float *saved, *slot, *running;
} BnOut;

static BnOut
bn_out_new(TdmBackend *b, int c, const float *running)
{
  BnOut o = {dev_floats(b, 2 * (size_t)c), dev_floats(b, TDM_BN_SLOT_FLOATS(c)),
             dev_floats(b, 2 * (size_t)c)};
  poison(o.saved, 2 * (size_t)c);
  poison(o.slot, TDM_BN_SLOT_FLOATS(c));
  memcpy(o.running, running, 2 * (size_t)c * sizeof(float));
  return o;
}

static void
bn_out_release(TdmBackend *b, BnOut *o)
{
  tdm_backend_release(b, o->saved);
  tdm_backend_release(b, o->slot);
  tdm_backend_release(b, o->running);
}

static void
assert_same_out(const BnOut *got, const BnOut *want, int c)
{
  g_assert_cmpmem(got->slot, TDM_BN_SLOT_FLOATS(c) * 4, want->slot, TDM_BN_SLOT_FLOATS(c) * 4);
  g_assert_cmpmem(got->saved, 2 * (size_t)c * 4, want->saved, 2 * (size_t)c * 4);
  g_assert_cmpmem(got->running, 2 * (size_t)c * 4, want->running, 2 * (size_t)c * 4);
}

static void
moments_stats_case(TdmBackend *b, int rows, int c, TdmDtype x_type, bool running)
{
  const size_t count = (size_t)rows * c;
  float *x = dev_floats(b, MAX(count, 1));
  uint16_t *x16 = dev_alloc(b, MAX(count, 1) * 2);
  fill_random(x, count, -3, 7); /* a mean away from 0, as a conv's output has */
  for (size_t i = 0; i < count; i++)
    x16[i] = tdm_bf16_round(x[i]);
  const void *xa = x_type == TDM_DTYPE_BF16 ? (const void *)x16 : x;
  float *start = g_new(float, 2 * (size_t)c);
  fill_random(start, 2 * (size_t)c, 0.5, 2);
  BnOut want = bn_out_new(b, c, start), got = bn_out_new(b, c, start);
  float *want_rm = running ? want.running : NULL, *want_rv = running ? want.running + c : NULL;
  float *rm = running ? got.running : NULL, *rv = running ? got.running + c : NULL;

  tdm_backend_bn_moments(b, want.slot, xa, x_type, rows, c, 0, 1);
  tdm_backend_bn_stats(b, want.saved, want.slot, 1, c, TDM_BN_EPS, TDM_BN_MOMENTUM, want_rm,
                       want_rv);
  tdm_backend_bn_moments_stats(b, got.saved, got.slot, xa, x_type, rows, c, TDM_BN_EPS,
                               TDM_BN_MOMENTUM, rm, rv);
  g_assert_true(tdm_backend_check(b, NULL));
  assert_written(want.saved, 2 * (size_t)c);
  assert_same_out(&got, &want, c);

  /* The CUDA finish's rule on the host: the slot read back, rows for its count. */
  poison(got.saved, 2 * (size_t)c);
  memcpy(got.running, start, 2 * (size_t)c * sizeof(float));
  for (int ch = 0; ch < c; ch++) {
    double n = 0.0, mean = 0.0, m2 = 0.0;
    tdm_bnm_merge_slot(want.slot, rows, c, ch, &n, &mean, &m2);
    tdm_bnm_stats(got.saved, c, ch, n, mean, m2, TDM_BN_EPS, TDM_BN_MOMENTUM, rm, rv);
  }
  assert_same_out(&got, &want, c);

  bn_out_release(b, &want);
  bn_out_release(b, &got);
  tdm_backend_release(b, x);
  tdm_backend_release(b, x16);
  g_free(start);
}

static void
test_bn_moments_stats(void)
{
  TdmBackend *b = new_backend();
  static const int rows[] = {1, 7, 1000}, channels[] = {1, 3, 64, 100};
  for (guint i = 0; i < G_N_ELEMENTS(rows); i++)
    for (guint j = 0; j < G_N_ELEMENTS(channels); j++) {
      moments_stats_case(b, rows[i], channels[j], TDM_DTYPE_F32, true);
      moments_stats_case(b, rows[i], channels[j], TDM_DTYPE_BF16, true);
    }
  moments_stats_case(b, 7, 3, TDM_DTYPE_F32, false); /* no running averages */
  moments_stats_case(b, 0, 3, TDM_DTYPE_F32, true);  /* no rows: an empty slot */
  free_backend(b);
}

void
test_backend_cpu_add_bn(void)
{
  g_test_add_func("/backend-cpu/bn-moments-stats", test_bn_moments_stats);
}
