/* test_core_state.c: state core keeps for the layers above it, kept where its owner is.
 *
 * An object a workspace owns is found by its destructor and freed with the workspace
 * (the NCCL communicator is kept so, not in a static). The device-graph epoch is the
 * backend context's plus the calling thread's, never another thread's. The registry's
 * transaction: what is registered inside it is invisible until committed, and gone when
 * aborted.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/device.h"
#include "core/registry.h"
#include "core/workspace.h"

static int destroyed;
static void destroy_a(void *p) { destroyed += *(int *)p; }
static void destroy_b(void *p) { (void)p; }

static void test_find_owned(void **unused) {
  (void)unused;
  dm_workspace *ws;
  assert_int_equal(dm_workspace_new(&ws), DM_OK);
  static int a = 1, a2 = 10, b;
  assert_null(dm_workspace_find_owned(ws, destroy_a));
  assert_int_equal(dm_workspace_adopt(ws, &b, destroy_b), DM_OK);
  assert_int_equal(dm_workspace_adopt(ws, &a, destroy_a), DM_OK);
  assert_int_equal(dm_workspace_adopt(ws, &a2, destroy_a), DM_OK);
  assert_ptr_equal(dm_workspace_find_owned(ws, destroy_a), &a); /* the first adopted */
  assert_ptr_equal(dm_workspace_find_owned(ws, destroy_b), &b);
  destroyed = 0;
  dm_workspace_destroy(ws);
  assert_int_equal(destroyed, 11);
}

static unsigned long context_epoch;
static unsigned long fake_epoch(int id) { return id == 1 ? context_epoch : 0; }
static const dm_device_ops fake = {.name = "FAKE", .private_epoch = fake_epoch};

static void *other_thread(void *unused) {
  (void)unused;
  dm_device_note_private_realloc();
  return NULL;
}

static void test_epoch_per_context(void **unused) {
  (void)unused;
  unsigned long e0 = dm_device_private_epoch(&fake, 1);
  context_epoch++; /* the context of device 1 replaced its scratch */
  assert_int_equal(dm_device_private_epoch(&fake, 1), e0 + 1);
  assert_int_equal(dm_device_private_epoch(&fake, 0), e0 - context_epoch + 1);
  pthread_t t; /* another thread's kernel: this thread's graphs stay */
  assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
  pthread_join(t, NULL);
  assert_int_equal(dm_device_private_epoch(&fake, 1), e0 + 1);
  dm_device_note_private_realloc(); /* this thread's: moves every device's */
  assert_int_equal(dm_device_private_epoch(&fake, 1), e0 + 2);
  assert_int_equal(dm_device_private_epoch(NULL, 0), dm_device_private_epoch(&fake, 0));
}

static dm_status noop_infer(dm_op_ctx *ctx) {
  (void)ctx;
  return DM_OK;
}

static void test_registry_transaction(void **unused) {
  (void)unused;
  const dm_op_schema s = {.struct_size = sizeof s, .type = "TxnTestOp", .min_inputs = 1,
                          .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                          .infer = noop_infer};
  size_t n0 = dm_schema_count();
  dm_registry_begin();
  assert_int_equal(dm_register_schema(&s), DM_OK);
  assert_null(dm_schema_lookup("TxnTestOp")); /* pending */
  dm_registry_abort();
  assert_null(dm_schema_lookup("TxnTestOp"));
  assert_int_equal(dm_schema_count(), n0);
  dm_registry_begin();
  assert_int_equal(dm_register_schema(&s), DM_OK);
  assert_int_equal(dm_registry_commit(), DM_OK);
  assert_non_null(dm_schema_lookup("TxnTestOp"));
  /* outside a transaction a registration is added at once; a repeat is refused */
  assert_int_not_equal(dm_register_schema(&s), DM_OK);
  assert_int_equal(dm_schema_count(), n0 + 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_find_owned),
      cmocka_unit_test(test_epoch_per_context),
      cmocka_unit_test(test_registry_transaction),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
