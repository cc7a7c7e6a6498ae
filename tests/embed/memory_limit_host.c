/* memory_limit_host.c: the workspace memory cap (dm_workspace_set_memory_limit), seen
 * from a host that has only <demitasse.h>. An op whose output would pass the cap fails,
 * naming the op, the blob and the sizes, before it takes the memory; the workspace stays
 * usable; freeing (a Free op, a blob fed smaller) makes room again; a storage shared by
 * several blobs (Reshape's view) is counted once; an op's temporary tensors (Load's)
 * count too; two workspaces count apart.
 * Sizes are multiples of 64 bytes, so the expected counts need no rounding. */
#include <demitasse.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_expect.h"

#define KIB ((size_t)1024)
#define MIB (1024 * KIB)

/* The message of the last error holds every one of the NULL-terminated words. */
static void expect_words(int line, const char *const *words) {
  for (; *words; words++)
    if (!strstr(dm_last_error(), *words)) {
      fprintf(stderr, "line %d: '%s' missing from the message '%s'\n", line, *words,
              dm_last_error());
      failures++;
    }
}
#define EXPECT_WORDS(...) expect_words(__LINE__, (const char *const[]){__VA_ARGS__, NULL})

static size_t in_use(const dm_workspace *ws) {
  size_t n = 0, peak = 0;
  if (dm_workspace_memory_usage(ws, &n, &peak) != DM_OK) {
    fprintf(stderr, "dm_workspace_memory_usage failed: %s\n", dm_last_error());
    exit(1);
  }
  return n;
}

static dm_net *net_text(dm_workspace *ws, const char *text) {
  dm_net *net = NULL;
  if (dm_workspace_create_net_bytes(ws, text, strlen(text), 1, &net) != DM_OK) {
    fprintf(stderr, "creating a net failed: %s\n%s\n", dm_last_error(), text);
    exit(1);
  }
  return net;
}

/* A FLOAT blob of `bytes` bytes, all ones. */
static dm_status feed(dm_workspace *ws, const char *name, size_t bytes) {
  int64_t dims[1] = {(int64_t)(bytes / sizeof(float))};
  float *v = malloc(bytes ? bytes : 1);
  for (size_t i = 0; v && i < bytes / sizeof(float); i++)
    v[i] = 1;
  dm_status s = v ? dm_workspace_feed(ws, name, DM_FLOAT, 1, dims, v) : DM_ERR_NOMEM;
  free(v);
  return s;
}

/* 1024 x 1024 FLOAT = 4 MiB */
static const char *big_fill =
    "name: \"fills\"\n"
    "op { type: \"ConstantFill\" name: \"small_fill\" output: \"small\"\n"
    "     arg { name: \"shape\" ints: 100 ints: 16 } arg { name: \"value\" f: 2 } }\n"
    "op { type: \"ConstantFill\" name: \"big_fill\" output: \"big\"\n"
    "     arg { name: \"shape\" ints: 1024 ints: 1024 } arg { name: \"value\" f: 1 } }\n";

/* The fill over the cap fails with the op, the blob and the three sizes; nothing is
 * taken, the workspace goes on, and without the cap the same net runs. */
static void fill_over_cap(void) {
  dm_workspace *ws = NULL;
  if (dm_workspace_create(&ws) != DM_OK)
    exit(1);
  EXPECT(in_use(ws) == 0, "a new workspace holds %zu bytes", in_use(ws));
  EXPECT(dm_workspace_set_memory_limit(ws, MIB) == DM_OK, "set_memory_limit failed");
  dm_net *net = net_text(ws, big_fill);
  dm_status s = dm_net_run(net);
  EXPECT(s == DM_ERR_LIMIT, "a 4 MiB fill under a 1 MiB cap gave %s", dm_status_name(s));
  EXPECT_WORDS("op 1", "ConstantFill", "'big_fill'",
               "allocating 4194304 bytes (4.0 MiB) for blob 'big' would exceed",
               "6400 bytes (6.2 KiB) in use", "limit 1048576 bytes (1.0 MiB)");
  /* the first op's 100 x 16 floats stay; the refused 4 MiB was never counted */
  EXPECT(in_use(ws) == 6400, "after the refused fill %zu bytes in use, want 6400", in_use(ws));
  /* still usable: feeds and runs that fit go through */
  EXPECT(feed(ws, "x", 512 * KIB) == DM_OK, "a 512 KiB feed under the cap failed");
  EXPECT(in_use(ws) == 6400 + 512 * KIB, "%zu bytes in use after the feed", in_use(ws));
  /* lifted, the same net runs, and every byte is counted */
  EXPECT(dm_workspace_set_memory_limit(ws, 0) == DM_OK, "set_memory_limit(0) failed");
  EXPECT(dm_net_run(net) == DM_OK, "with no cap the fill failed");
  EXPECT(in_use(ws) == 6400 + 512 * KIB + 4 * MIB, "%zu bytes in use with the big fill",
         in_use(ws));
  size_t peak = 0;
  EXPECT(dm_workspace_memory_usage(ws, NULL, &peak) == DM_OK && peak == in_use(ws),
         "peak %zu, in use %zu", peak, in_use(ws));
  /* a cap below what is held frees nothing; the next allocation fails, a run that
   * rewrites the same sizes in place does not */
  EXPECT(dm_workspace_set_memory_limit(ws, MIB) == DM_OK, "lowering the cap failed");
  EXPECT(dm_net_run(net) == DM_OK, "rewriting the blobs in place under a lowered cap failed");
  s = feed(ws, "y", 64);
  EXPECT(s == DM_ERR_LIMIT, "a feed over a lowered cap gave %s", dm_status_name(s));
  EXPECT_WORDS("allocating 64 bytes for blob 'y'", "limit 1048576 bytes");
  EXPECT(!dm_workspace_has_blob(ws, "y"), "the refused feed left blob y behind");
  dm_workspace_destroy(ws);
}

/* Room comes back when memory is freed: a Free op, and a blob fed again smaller. */
static void freeing_makes_room(void) {
  dm_workspace *ws = NULL;
  if (dm_workspace_create(&ws) != DM_OK)
    exit(1);
  dm_workspace_set_memory_limit(ws, MIB);
  EXPECT(feed(ws, "a", 640 * KIB) == DM_OK, "feeding a failed");
  dm_status s = feed(ws, "b", 640 * KIB);
  EXPECT(s == DM_ERR_LIMIT, "640 KiB + 640 KiB under 1 MiB gave %s", dm_status_name(s));
  EXPECT_WORDS("allocating 655360 bytes (640.0 KiB) for blob 'b'",
               "655360 bytes (640.0 KiB) in use");
  EXPECT(!dm_workspace_has_blob(ws, "b"), "the refused feed left blob b behind");
  /* a blob fed again at the same size keeps its storage: nothing more is counted */
  EXPECT(feed(ws, "a", 640 * KIB) == DM_OK, "feeding a again at its size failed");
  EXPECT(in_use(ws) == 640 * KIB, "%zu bytes in use", in_use(ws));
  /* shrinking: the old buffer is not counted against the new one, and goes */
  EXPECT(feed(ws, "a", 64) == DM_OK, "feeding a smaller failed");
  EXPECT(in_use(ws) == 64, "after shrinking a, %zu bytes in use, want 64", in_use(ws));
  EXPECT(feed(ws, "b", 640 * KIB) == DM_OK, "b did not fit after a shrank");
  /* growing a blob past the cap fails and leaves it as it was */
  s = feed(ws, "a", 640 * KIB);
  EXPECT(s == DM_ERR_LIMIT, "growing a past the cap gave %s", dm_status_name(s));
  const dm_tensor *a = NULL;
  EXPECT(dm_workspace_fetch(ws, "a", &a) == DM_OK && dm_tensor_nbytes(a) == 64,
         "the refused feed changed a");
  /* a Free op gives b's memory back */
  dm_net *free_b = net_text(ws, "op { type: \"Free\" input: \"b\" output: \"b\" }\n");
  EXPECT(dm_net_run(free_b) == DM_OK, "Free failed");
  EXPECT(in_use(ws) == 64, "after Free, %zu bytes in use, want 64", in_use(ws));
  EXPECT(feed(ws, "a", 640 * KIB) == DM_OK, "a did not fit after b was freed");
  dm_workspace_destroy(ws);
}

/* Reshape makes its output a view of its input's storage: one buffer, counted once.
 * Counted twice, 2 x 640 KiB would pass the 1 MiB cap. */
static void shared_counted_once(void) {
  dm_workspace *ws = NULL;
  if (dm_workspace_create(&ws) != DM_OK)
    exit(1);
  dm_workspace_set_memory_limit(ws, MIB);
  EXPECT(feed(ws, "x", 640 * KIB) == DM_OK, "feeding x failed");
  dm_net *net = net_text(ws, "op { type: \"Reshape\" input: \"x\" output: \"xr\" "
                             "output: \"old_shape\" arg { name: \"shape\" ints: 1024 "
                             "ints: -1 } }\n");
  EXPECT(dm_net_run(net) == DM_OK, "a Reshape view under the cap failed");
  const dm_tensor *xr = NULL;
  EXPECT(dm_workspace_fetch(ws, "xr", &xr) == DM_OK && dm_tensor_ndim(xr) == 2 &&
             dm_tensor_dims(xr)[1] == 160,
         "the Reshape did not run");
  /* x's buffer once, and old_shape's one INT64 (8 bytes, allocated as 64) */
  EXPECT(in_use(ws) == 640 * KIB + 64, "%zu bytes in use with a view", in_use(ws));
  /* x fed anew gets its own buffer (xr keeps the old one): now both count */
  EXPECT(feed(ws, "x", 320 * KIB) == DM_OK, "feeding x anew failed");
  EXPECT(in_use(ws) == 960 * KIB + 64, "%zu bytes in use after x moved", in_use(ws));
  /* xr dropped, the old buffer's last holder is gone */
  dm_net *free_xr = net_text(ws, "op { type: \"Free\" input: \"xr\" output: \"xr\" }\n");
  EXPECT(dm_net_run(free_xr) == DM_OK, "Free failed");
  EXPECT(in_use(ws) == 320 * KIB + 64, "%zu bytes in use after freeing the view", in_use(ws));
  dm_workspace_destroy(ws);
}

/* Load builds each tensor in a temporary of the workspace and hands it to the blob: the
 * temporary is counted like the blob it becomes, so a checkpoint over the cap fails. */
static void temporaries_counted(void) {
  char dir[] = "/tmp/dm_memlimit_XXXXXX", db[64], save[256], load[256];
  if (!mkdtemp(dir))
    exit(1);
  snprintf(db, sizeof db, "%s/ckpt", dir);
  snprintf(save, sizeof save,
           "op { type: \"Save\" input: \"x\" arg { name: \"db\" s: \"%s\" } }", db);
  snprintf(load, sizeof load, "op { type: \"Load\" name: \"restore\" output: \"x\" "
           "arg { name: \"db\" s: \"%s\" } }", db);
  dm_workspace *ws = NULL;
  if (dm_workspace_create(&ws) != DM_OK)
    exit(1);
  EXPECT(feed(ws, "x", 640 * KIB) == DM_OK, "feeding x failed");
  EXPECT(dm_net_run(net_text(ws, save)) == DM_OK, "Save failed");
  dm_workspace_destroy(ws);
  if (dm_workspace_create(&ws) != DM_OK)
    exit(1);
  dm_workspace_set_memory_limit(ws, MIB);
  EXPECT(feed(ws, "y", 512 * KIB) == DM_OK, "feeding y failed");
  dm_net *net = net_text(ws, load);
  dm_status s = dm_net_run(net);
  EXPECT(s == DM_ERR_LIMIT, "loading 640 KiB beside 512 KiB under 1 MiB gave %s",
         dm_status_name(s));
  EXPECT_WORDS("Load", "'restore'", "allocating 655360 bytes (640.0 KiB) for an op's temporary",
               "524288 bytes (512.0 KiB) in use",
               "limit 1048576 bytes");
  EXPECT(in_use(ws) == 512 * KIB, "%zu bytes in use after the refused Load", in_use(ws));
  dm_workspace_set_memory_limit(ws, 2 * MIB);
  EXPECT(dm_net_run(net) == DM_OK, "Load failed under a 2 MiB cap");
  EXPECT(in_use(ws) == 1152 * KIB, "%zu bytes in use after the Load, want 1152 KiB",
         in_use(ws));
  dm_workspace_destroy(ws);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
}

/* Two workspaces count apart. */
static void workspaces_apart(void) {
  dm_workspace *a = NULL, *b = NULL;
  if (dm_workspace_create(&a) != DM_OK || dm_workspace_create(&b) != DM_OK)
    exit(1);
  dm_workspace_set_memory_limit(a, MIB);
  dm_workspace_set_memory_limit(b, MIB);
  EXPECT(feed(a, "x", 768 * KIB) == DM_OK, "feeding a failed");
  EXPECT(feed(b, "x", 768 * KIB) == DM_OK, "feeding b failed: a's blobs counted in b");
  EXPECT(in_use(a) == 768 * KIB && in_use(b) == 768 * KIB, "%zu and %zu bytes in use",
         in_use(a), in_use(b));
  dm_workspace_destroy(a);
  dm_workspace_destroy(b);
}

int main(void) {
  fill_over_cap();
  freeing_makes_room();
  shared_counted_once();
  temporaries_counted();
  workspaces_apart();
  if (failures)
    fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
