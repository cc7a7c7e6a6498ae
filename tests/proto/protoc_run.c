/* protoc_run.c: spawning protoc for the tests, with temporary files for its stdin,
 * stdout and stderr (no pipes, so no deadlock on large outputs). */
#include "protoc_run.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const char *pt_protoc(void) {
  const char *p = getenv("DM_PROTOC");
  return p && *p ? p : NULL;
}

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  if (!f)
    return NULL;
  for (;;) {
    if (cap - n < 4097) {
      uint8_t *nb = realloc(buf, cap = cap * 2 + 8192);
      if (!nb) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0)
      break;
  }
  fclose(f);
  buf[n] = '\0';
  if (len)
    *len = n;
  return buf;
}

uint8_t *pt_read_data(const char *name, size_t *len) {
  const char *dir = getenv("DM_TEST_DATA");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", name);
  return slurp(path, len);
}

static int tmpfile_path(char *buf, size_t n, const char *tag) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, n, "%s/dm_protoc_%s_XXXXXX", dir && *dir ? dir : "/tmp", tag);
  int fd = mkstemp(buf);
  if (fd < 0)
    return -1;
  close(fd);
  return 0;
}

int pt_protoc_run(const char *mode, const char *type, const void *in, size_t in_len, uint8_t **out,
                  size_t *out_len, char **err) {
  char pin[512], pout[512], perr[512], flag[256], inc[4096];
  const char *protoc = pt_protoc(), *dir = getenv("DM_PROTO_DIR");
  int rc = -1, status = 0;
  pid_t pid;
  posix_spawn_file_actions_t fa;
  *out = NULL;
  *err = NULL;
  if (!protoc || !dir)
    return -1;
  if (tmpfile_path(pin, sizeof pin, "in") || tmpfile_path(pout, sizeof pout, "out") ||
      tmpfile_path(perr, sizeof perr, "err"))
    return -1;
  FILE *f = fopen(pin, "wb");
  if (!f || fwrite(in, 1, in_len, f) != in_len) {
    if (f)
      fclose(f);
    goto cleanup;
  }
  fclose(f);
  snprintf(flag, sizeof flag, "--%s=%s", mode, type);
  snprintf(inc, sizeof inc, "-I%s", dir);
  char *argv[] = {(char *)protoc, flag, inc, "caffe2.proto", NULL};
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, pin, O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, pout, O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_addopen(&fa, 2, perr, O_WRONLY | O_TRUNC, 0);
  int sp = posix_spawn(&pid, protoc, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (sp != 0 || waitpid(pid, &status, 0) != pid)
    goto cleanup;
  *out = slurp(pout, out_len);
  *err = (char *)slurp(perr, NULL);
  rc = WIFEXITED(status) && WEXITSTATUS(status) == 0 && *out ? 0 : -1;
cleanup:
  unlink(pin);
  unlink(pout);
  unlink(perr);
  return rc;
}
