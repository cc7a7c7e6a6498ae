/* test_upload.c: asynchronous uploads from page-locked host memory (core/tensor.c,
 * core/device.h), checked on the CPU with a fake backend whose uploads really are
 * deferred.
 *
 * The fake's upload_async only queues the copy; the "device" performs queued copies in
 * order when a fence is waited for or when the host reads device memory back (as a
 * stream would have by then). So a test can see whether core waited where it must: if
 * the host wrote a buffer while its upload was still queued, the device would receive
 * the new values instead of the ones the upload was asked for.
 *
 * Checked: a small buffer is always staged and never locked; a large one is staged on
 * its first upload and locked on its second, after which uploads return before the copy
 * is done; every host write path (dm_tensor_mutable_data, dm_workspace_feed, a host copy
 * into it, freeing it) waits for the pending upload first, and only then; a freed
 * locked buffer is unlocked; a failed lock falls back to staging and is not retried;
 * large host buffers are page-aligned (two locked ranges may not share a page); the
 * storage exchange of the DB input's hand-over, with a pending upload moving along.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/tensor.h"
#include "demitasse_plugin.h"
#include "test_util.h"

/* ---- the fake backend ---------------------------------------------------------- */

typedef struct pending {
  void *dst;
  const void *src;
  size_t n;
} pending;

static pending queue[16];
static int queued;
static int staged, registered, unregistered, waits, fail_register;
static void *locked[8];

static void drain(void) { /* the "device" runs everything queued, in order */
  for (int i = 0; i < queued; i++)
    memcpy(queue[i].dst, queue[i].src, queue[i].n);
  queued = 0;
}

static dm_status fake_alloc(int id, size_t n, void **out) {
  (void)id;
  return (*out = malloc(n)) ? DM_OK : DM_NOMEM("fake device memory");
}

static void fake_free(int id, void *p) {
  (void)id;
  free(p);
}

static dm_status fake_copy(dm_device_type dst_dev, int dst_id, void *dst, dm_device_type src_dev,
                           int src_id, const void *src, size_t n) {
  (void)dst_id;
  (void)src_id;
  if (src_dev == DM_CPU && dst_dev == DM_CUDA)
    staged++;
  else
    drain(); /* a read back sees what the stream did before it */
  memcpy(dst, src, n);
  return DM_OK;
}

static int fake_usable(int id, char *why, size_t cap) {
  (void)id;
  (void)why;
  (void)cap;
  return 1;
}

static dm_status fake_synchronize(int id) {
  (void)id;
  drain();
  return DM_OK;
}

static dm_status fake_register(void *p, size_t n) {
  (void)n;
  if (fail_register)
    return dm_error(DM_ERR_DEVICE, "fake: cannot lock");
  for (int i = 0; i < 8; i++)
    if (!locked[i]) {
      locked[i] = p;
      registered++;
      return DM_OK;
    }
  return dm_error(DM_ERR_DEVICE, "fake: too many locked buffers");
}

static void fake_unregister(void *p) {
  for (int i = 0; i < 8; i++)
    if (locked[i] == p) {
      locked[i] = NULL;
      unregistered++;
      return;
    }
  fail_msg("unlocking %p, which is not locked", p);
}

static int is_locked(const void *p) {
  for (int i = 0; i < 8; i++)
    if (locked[i] && locked[i] == p)
      return 1;
  return 0;
}

static dm_status fake_upload_async(int id, void *dst, const void *src, size_t n, void **fence) {
  (void)id;
  if (!is_locked(src))
    fail_msg("upload_async from memory that is not locked");
  if (!*fence && !(*fence = malloc(1)))
    return DM_NOMEM("fence");
  if (queued == 16)
    drain();
  queue[queued++] = (pending){dst, src, n};
  return DM_OK;
}

static dm_status fake_fence_wait(void *fence) {
  (void)fence;
  waits++;
  drain();
  return DM_OK;
}

static void fake_fence_free(void *fence) { free(fence); }

static const dm_device_ops fake_ops = {
    .name = "FAKE",
    .alloc = fake_alloc,
    .free = fake_free,
    .copy = fake_copy,
    .usable = fake_usable,
    .synchronize = fake_synchronize,
    .host_register = fake_register,
    .host_unregister = fake_unregister,
    .upload_async = fake_upload_async,
    .fence_wait = fake_fence_wait,
    .fence_free = fake_fence_free,
};

static int setup(void **unused) {
  (void)unused;
  if (dm_init() != DM_OK)
    return -1;
  dm_device_register(DM_CUDA, &fake_ops); /* replaces whatever the build registered */
  return 0;
}

static void reset_counts(void) {
  staged = registered = unregistered = waits = fail_register = 0;
}

/* ---- helpers ----------------------------------------------------------------- */

#define BIG ((int64_t)1 << 19) /* floats: 2 MiB, above the locking threshold */

static dm_tensor *host_filled(int64_t n, float v) {
  dm_tensor *t = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  assert_non_null(t);
  assert_ok(dm_tensor_resize(t, DM_FLOAT, 1, &n));
  float *p = dm_tensor_mutable_data(t);
  for (int64_t i = 0; i < n; i++)
    p[i] = v;
  return t;
}

/* Every element of device tensor d (read after the queue has run) equals v. */
static void assert_device_all(const dm_tensor *d, float v) {
  drain();
  const float *p = d->storage->data;
  for (int64_t i = 0; i < d->numel; i++)
    if (p[i] != v)
      fail_msg("device element %lld is %g, wanted %g", (long long)i, p[i], v);
}

/* ---- tests ------------------------------------------------------------------- */

static void test_small_buffers_are_staged(void **unused) {
  (void)unused;
  reset_counts();
  dm_tensor *h = host_filled(1000, 1), *d = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  for (int i = 0; i < 3; i++)
    assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, h));
  assert_int_equal(staged, 3);
  assert_int_equal(registered, 0);
  assert_int_equal(queued, 0);
  assert_device_all(d, 1);
  dm_tensor_free(h);
  dm_tensor_free(d);
}

static void test_second_upload_locks_and_writes_wait(void **unused) {
  (void)unused;
  reset_counts();
  dm_tensor *h = host_filled(BIG, 1), *d = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  assert_true(((uintptr_t)dm_tensor_data(h) & 4095) == 0);
  assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, h)); /* once: staged */
  assert_int_equal(staged, 1);
  assert_int_equal(registered, 0);
  assert_device_all(d, 1);

  float *p = dm_tensor_mutable_data(h);
  p[0] = 2;
  p[BIG - 1] = 2;
  assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, h)); /* twice: locked, queued */
  assert_int_equal(registered, 1);
  assert_int_equal(staged, 1);
  assert_int_equal(queued, 1); /* returned before the copy ran */
  assert_int_equal(waits, 0);

  /* the host writes: first the upload must finish, so the device gets the 2s */
  p = dm_tensor_mutable_data(h);
  assert_int_equal(waits, 1);
  assert_int_equal(queued, 0);
  p[0] = 3;
  assert_float_equal(((float *)d->storage->data)[0], 2, 0);
  assert_float_equal(((float *)d->storage->data)[BIG - 1], 2, 0);
  /* nothing pending now: a second access does not wait again */
  (void)dm_tensor_mutable_data(h);
  assert_int_equal(waits, 1);
  /* reads never wait */
  assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, h));
  (void)dm_tensor_data(h);
  assert_int_equal(waits, 1);
  assert_float_equal(((float *)d->storage->data)[0], 2, 0); /* still queued */

  /* a host-to-host copy into it waits too */
  dm_tensor *other = host_filled(BIG, 5);
  assert_ok(dm_tensor_copy_to(h, DM_CPU, 0, other));
  assert_int_equal(waits, 2);
  assert_float_equal(((float *)d->storage->data)[0], 3, 0);
  assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, h));
  assert_device_all(d, 5);
  assert_int_equal(staged, 1); /* everything after the first went by DMA */

  /* freeing it with an upload queued: waits, then unlocks */
  assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, other)); /* other: first upload, staged */
  assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, h));
  assert_int_equal(queued, 1);
  int w = waits;
  dm_tensor_free(h);
  assert_int_equal(waits, w + 1);
  assert_int_equal(unregistered, 1);
  assert_device_all(d, 5);
  dm_tensor_free(other);
  dm_tensor_free(d);
}

static void test_feed_waits(void **unused) {
  (void)unused;
  reset_counts();
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  float *v = malloc(BIG * sizeof *v);
  assert_non_null(v);
  const int64_t dims[1] = {BIG};
  for (int64_t i = 0; i < BIG; i++)
    v[i] = 7;
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 1, dims, v));
  const dm_tensor *x = NULL;
  assert_ok(dm_workspace_fetch(ws, "x", &x));
  dm_tensor *d = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, x));
  assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, x)); /* locked, queued */
  assert_int_equal(queued, 1);
  for (int64_t i = 0; i < BIG; i++)
    v[i] = 8;
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 1, dims, v)); /* same size: same storage */
  assert_int_equal(waits, 1);
  assert_float_equal(((float *)d->storage->data)[0], 7, 0);
  assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, x));
  assert_device_all(d, 8);
  dm_workspace_destroy(ws); /* frees x: unlocks it */
  assert_int_equal(unregistered, 1);
  dm_tensor_free(d);
  free(v);
}

static void test_failed_lock_stays_staged(void **unused) {
  (void)unused;
  reset_counts();
  fail_register = 1;
  dm_tensor *h = host_filled(BIG, 4), *d = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  for (int i = 0; i < 4; i++)
    assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, h));
  assert_int_equal(staged, 4);
  assert_int_equal(queued, 0);
  assert_device_all(d, 4);
  (void)dm_tensor_mutable_data(h);
  assert_int_equal(waits, 0);
  dm_tensor_free(h);
  assert_int_equal(unregistered, 0);
  dm_tensor_free(d);
}

/* The zero-copy hand-over the DB input uses: storages are exchanged only between host
 * tensors that hold theirs alone, of equal bytes; a pending upload travels with its
 * storage (the new holder's write waits for it). */
static void test_swap_storage(void **unused) {
  (void)unused;
  reset_counts();
  dm_tensor *a = host_filled(BIG, 1), *b = host_filled(BIG, 2);
  dm_tensor *d = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  dm_tensor *small = host_filled(10, 3), *view = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  const void *pa = dm_tensor_data(a), *pb = dm_tensor_data(b);
  assert_int_equal(dm_tensor_swap_storage(a, small), 0); /* sizes differ */
  dm_tensor_share(view, b);
  assert_int_equal(dm_tensor_swap_storage(a, b), 0); /* b's is shared */
  dm_tensor_reset(view);
  assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, a));
  assert_int_equal(dm_tensor_swap_storage(a, d), 0); /* d's is on the device */
  assert_ok(dm_tensor_copy_to(d, DM_CUDA, 0, a)); /* a: locked, upload queued */
  assert_int_equal(queued, 1);
  assert_int_equal(dm_tensor_swap_storage(a, b), 1);
  assert_ptr_equal(dm_tensor_data(a), pb);
  assert_ptr_equal(dm_tensor_data(b), pa);
  float *p = dm_tensor_mutable_data(b); /* now holds a's old buffer: waits for its upload */
  assert_int_equal(waits, 1);
  p[0] = 9;
  assert_device_all(d, 1);
  dm_tensor_free(a);
  dm_tensor_free(b); /* the locked buffer: unlocked on free */
  assert_int_equal(unregistered, 1);
  dm_tensor_free(d);
  dm_tensor_free(small);
  dm_tensor_free(view);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_small_buffers_are_staged),
      cmocka_unit_test(test_second_upload_locks_and_writes_wait),
      cmocka_unit_test(test_feed_waits),
      cmocka_unit_test(test_failed_lock_stays_staged),
      cmocka_unit_test(test_swap_storage),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
