/* test_slot_mask.c: the one rule for reading a schema's slot masks (core/slot_mask.h):
 * bit i is slot i below 63, and bit 63 stands for slot 63 and every later one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/slot_mask.h"

static void low_slots_are_their_bits(void **state) {
  (void)state;
  uint64_t m = (1u << 0) | (1u << 3) | (UINT64_C(1) << 62);
  for (size_t k = 0; k < 63; k++)
    assert_int_equal(dm_slot_in(m, k), k == 0 || k == 3 || k == 62);
}

static void bit_63_covers_every_later_slot(void **state) {
  (void)state;
  uint64_t last = UINT64_C(1) << 63;
  assert_false(dm_slot_in(last, 62));
  assert_true(dm_slot_in(last, 63));
  assert_true(dm_slot_in(last, 64));
  assert_true(dm_slot_in(last, 1000));
  assert_true(dm_slot_in(UINT64_MAX, SIZE_MAX)); /* "every slot", as a DB reader's outputs */
  assert_false(dm_slot_in(UINT64_MAX >> 1, 200)); /* without bit 63: no rule past 62 */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(low_slots_are_their_bits),
      cmocka_unit_test(bit_63_covers_every_later_slot),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
