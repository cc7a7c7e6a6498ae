/* npy_copy.c: loads a .npy file with dm_npy_load and saves it with dm_npy_save, for
 * npy_numpy_check.py to compare against NumPy. Exit 1 with the error on stderr. */
#include <stdio.h>

#include "core/npy.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: npy_copy IN.npy OUT.npy\n");
    return 2;
  }
  dm_tensor *t = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  if (!t)
    return 1;
  dm_status s = dm_npy_load(argv[1], t);
  if (s == DM_OK)
    s = dm_npy_save(argv[2], t);
  if (s != DM_OK)
    fprintf(stderr, "npy_copy: %s: %s\n", dm_status_name(s), dm_last_error());
  dm_tensor_free(t);
  return s == DM_OK ? 0 : 1;
}
