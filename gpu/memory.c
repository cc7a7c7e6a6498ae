/* memory.c: placeholder, being written. */
#include <stdio.h>

#include "kernels.h"

static dm_status no_alloc(int id, size_t n, void **out) {
  (void)id; (void)n; (void)out;
  return dm_error(DM_ERR_UNSUPPORTED, "CUDA memory not written yet");
}
static void no_free(int id, void *p) { (void)id; (void)p; }
static dm_status no_copy(dm_device_type a, int b, void *c, dm_device_type d, int e, const void *f,
                         size_t n) {
  (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)n;
  return dm_error(DM_ERR_UNSUPPORTED, "CUDA copies not written yet");
}
static int no_usable(int id, char *why, size_t cap) {
  (void)id;
  snprintf(why, cap, "not written yet");
  return 0;
}
const dm_device_ops dm_cuda_device_ops = {"CUDA", no_alloc, no_free, no_copy, no_usable};
