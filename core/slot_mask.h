/* slot_mask.h: how a schema's slot mask (dm_op_schema's fp32_*, nonfloat_*, host_inputs,
 * reused_outputs, layout_*) is read, in one place: bit i is slot i for slots 0..62, and
 * bit 63 is slot 63 and every later one, so that UINT64_MAX means "every slot" for an op
 * with any number of inputs or outputs (a DB reader's outputs, a Sum's inputs). */
#ifndef DM_CORE_SLOT_MASK_H
#define DM_CORE_SLOT_MASK_H

#include <stddef.h>
#include <stdint.h>

static inline int dm_slot_in(uint64_t mask, size_t slot) {
  return (int)((mask >> (slot < 63 ? slot : 63)) & 1u);
}

#endif
