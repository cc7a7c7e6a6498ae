/* npy_copy.c: loads .npy files with dm_npy_load and saves them with dm_npy_save, for
 * npy_numpy_check.py to compare against NumPy. Takes IN OUT pairs, so one process
 * (whose start-up loads the CUDA libraries in a CUDA build) serves a whole batch.
 * Prints "IN: STATUS: message" on stderr for each failure; exit 1 if any failed. */
#include <stdio.h>

#include "core/npy.h"

int main(int argc, char **argv) {
  if (argc < 3 || argc % 2 == 0) {
    fprintf(stderr, "usage: npy_copy IN.npy OUT.npy [IN.npy OUT.npy]...\n");
    return 2;
  }
  int failed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    dm_tensor *t = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
    if (!t)
      return 1;
    dm_status s = dm_npy_load(argv[i], t);
    if (s == DM_OK)
      s = dm_npy_save(argv[i + 1], t);
    if (s != DM_OK) {
      fprintf(stderr, "%s: %s: %s\n", argv[i], dm_status_name(s), dm_last_error());
      failed = 1;
    }
    dm_tensor_free(t);
  }
  return failed;
}
