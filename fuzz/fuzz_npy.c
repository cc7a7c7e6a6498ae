/* fuzz_npy.c: libFuzzer target for the .npy reader (core/npy.c). Each input is read
 * twice, from memory (dm_npy_parse) and as a file (dm_npy_load, through a memfd), and
 * the two must agree: same status, and when it loads, the same dtype, shape and bytes.
 * A tensor that loads is saved (dm_npy_save, into a scratch folder) and read back, and
 * must come back identical. The library is built with coverage instrumentation
 * (dm_fuzz_lib in meson.build), so the fuzzer sees npy.c and the tensor code under it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/npy.h"
#include "core/tensor.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Large enough for anything a 64 KiB input can describe, small enough to fail fast. */
#define LIMIT ((uint64_t)1 << 30)

static char scratch[64];   /* a private folder for the round trip's file */
static char save_path[96];

static void fail(const char *what) {
  fprintf(stderr, "npy property violated: %s\nlast error: %s\n", what, dm_last_error());
  __builtin_trap();
}

/* Same dtype, shape and bytes. */
static int same_tensor(const dm_tensor *a, const dm_tensor *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim || a->numel != b->numel)
    return 0;
  if (a->ndim && memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof *a->dims) != 0)
    return 0;
  size_t n = dm_tensor_nbytes(a);
  return n == 0 || memcmp(dm_tensor_data(a), dm_tensor_data(b), n) == 0;
}

static void remove_scratch(void) {
  unlink(save_path);
  rmdir(scratch);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  /* /dev/shm keeps the save's fsyncs off the disk. */
  const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(scratch, sizeof scratch, "%s/dm_fuzz_npy.XXXXXX", base);
  if (!mkdtemp(scratch)) {
    perror("fuzz_npy: mkdtemp");
    return 1;
  }
  snprintf(save_path, sizeof save_path, "%s/t.npy", scratch);
  atexit(remove_scratch);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dm_tensor *mem = dm_tensor_new(LIMIT), *file = dm_tensor_new(LIMIT), *back = dm_tensor_new(LIMIT);
  if (!mem || !file || !back)
    fail("out of memory");
  dm_status s_mem = dm_npy_parse(data, size, "fuzz.npy", mem);

  int fd = memfd_create("fuzz.npy", 0);
  if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
    fail("memfd");
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  dm_status s_file = dm_npy_load(path, file);
  close(fd);

  if (s_mem != s_file)
    fail("memory and file readers disagree on the status");
  if (s_mem == DM_OK) {
    if (!same_tensor(mem, file))
      fail("memory and file readers disagree on the tensor");
    if (dm_npy_save(save_path, mem) != DM_OK)
      fail("a tensor that loaded does not save");
    if (dm_npy_load(save_path, back) != DM_OK)
      fail("a saved tensor does not load");
    if (!same_tensor(mem, back))
      fail("save -> load changed the tensor");
    unlink(save_path);
  }
  dm_tensor_free(mem);
  dm_tensor_free(file);
  dm_tensor_free(back);
  return 0;
}
