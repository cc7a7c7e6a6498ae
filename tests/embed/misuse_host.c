/* misuse_host.c: a host that misuses the public API (<demitasse.h> only) the ways a
 * careless caller does: NULL for every pointer argument of every call, failed feeds,
 * failed net creations, empty blob names and paths. The library must not crash, must say which
 * function and argument, and a failed call must leave the workspace as it was. */
#include <demitasse.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_expect.h"

/* The call failed with `want` and a message that names `fn` and `arg`. */
static void expect_refused(dm_status s, dm_status want, const char *fn, const char *arg,
                           int line) {
  const char *e = dm_last_error();
  if (s != want || !strstr(e, fn) || (arg && !strstr(e, arg))) {
    fprintf(stderr, "line %d: %s (%s) gave %s, message '%s'\n", line, fn, arg ? arg : "",
            dm_status_name(s), e);
    failures++;
  }
}
#define REFUSED(call, want, fn, arg) expect_refused((call), (want), (fn), (arg), __LINE__)

static const char *good_net = "name: \"good\"\n"
                              "op { type: \"Relu\" input: \"x\" output: \"y\" }\n";

/* The blob list, joined, for comparing before and after. */
static char *blob_list(const dm_workspace *ws) {
  size_t n = dm_workspace_blob_count(ws), len = 1;
  for (size_t i = 0; i < n; i++)
    len += strlen(dm_workspace_blob_name(ws, i)) + 1;
  char *s = calloc(len, 1);
  for (size_t i = 0; s && i < n; i++) {
    strcat(s, dm_workspace_blob_name(ws, i));
    strcat(s, ",");
  }
  return s;
}

static void null_arguments(void) {
  REFUSED(dm_workspace_create(NULL), DM_ERR_INVALID, "dm_workspace_create", "out");
  dm_workspace *ws = NULL;
  if (dm_workspace_create(&ws) != DM_OK)
    exit(1);
  dm_net *net = NULL;
  const dm_tensor *t = NULL;
  int64_t dims[1] = {2};
  float v[2] = {1, 2};
  dm_workspace_destroy(NULL);
  dm_workspace_set_tensor_limit(NULL, 1);
  REFUSED(dm_workspace_set_memory_limit(NULL, 1), DM_ERR_INVALID,
          "dm_workspace_set_memory_limit", "ws");
  REFUSED(dm_workspace_memory_usage(NULL, NULL, NULL), DM_ERR_INVALID,
          "dm_workspace_memory_usage", "ws");
  REFUSED(dm_plugin_load(NULL), DM_ERR_INVALID, "dm_plugin_load", "path");
  REFUSED(dm_workspace_run_net_file(NULL, "x.pbtxt"), DM_ERR_INVALID,
          "dm_workspace_run_net_file", "ws");
  REFUSED(dm_workspace_run_net_file(ws, NULL), DM_ERR_INVALID, "dm_workspace_run_net_file",
          "path");
  REFUSED(dm_workspace_create_net_file(NULL, "x.pbtxt", &net), DM_ERR_INVALID,
          "dm_workspace_create_net_file", "ws");
  REFUSED(dm_workspace_create_net_file(ws, NULL, &net), DM_ERR_INVALID,
          "dm_workspace_create_net_file", "path");
  REFUSED(dm_workspace_create_net_file(ws, "x.pbtxt", NULL), DM_ERR_INVALID,
          "dm_workspace_create_net_file", "out");
  REFUSED(dm_workspace_create_net_bytes(NULL, good_net, strlen(good_net), 1, &net),
          DM_ERR_INVALID, "dm_workspace_create_net_bytes", "ws");
  REFUSED(dm_workspace_create_net_bytes(ws, NULL, 10, 1, &net), DM_ERR_INVALID,
          "dm_workspace_create_net_bytes", "data");
  REFUSED(dm_workspace_create_net_bytes(ws, good_net, strlen(good_net), 1, NULL),
          DM_ERR_INVALID, "dm_workspace_create_net_bytes", "out");
  REFUSED(dm_net_run(NULL), DM_ERR_INVALID, "dm_net_run", "net");
  EXPECT(strcmp(dm_net_name(NULL), "") == 0, "dm_net_name(NULL) is not \"\"");
  REFUSED(dm_workspace_feed(NULL, "a", DM_FLOAT, 1, dims, v), DM_ERR_INVALID,
          "dm_workspace_feed", "ws");
  REFUSED(dm_workspace_feed(ws, NULL, DM_FLOAT, 1, dims, v), DM_ERR_INVALID,
          "dm_workspace_feed", "name");
  REFUSED(dm_workspace_feed(ws, "a", DM_FLOAT, 1, NULL, v), DM_ERR_INVALID,
          "dm_workspace_feed", "dims");
  REFUSED(dm_workspace_feed(ws, "a", DM_FLOAT, 1, dims, NULL), DM_ERR_INVALID,
          "dm_workspace_feed", "data");
  REFUSED(dm_workspace_feed(ws, "s", DM_STRING, 1, dims, NULL), DM_ERR_INVALID,
          "dm_workspace_feed", "data");
  REFUSED(dm_workspace_fetch(NULL, "a", &t), DM_ERR_INVALID, "dm_workspace_fetch", "ws");
  REFUSED(dm_workspace_fetch(ws, NULL, &t), DM_ERR_INVALID, "dm_workspace_fetch", "name");
  REFUSED(dm_workspace_fetch(ws, "a", NULL), DM_ERR_INVALID, "dm_workspace_fetch", "out");
  EXPECT(dm_workspace_has_blob(NULL, "a") == 0, "has_blob(NULL ws)");
  EXPECT(dm_workspace_has_blob(ws, NULL) == 0, "has_blob(NULL name)");
  EXPECT(dm_workspace_blob_count(NULL) == 0, "blob_count(NULL)");
  EXPECT(dm_workspace_blob_name(NULL, 0) == NULL, "blob_name(NULL)");
  EXPECT(dm_workspace_blob_count(ws) == 0, "the NULL calls created blobs");
  REFUSED(dm_train_options_init_sized(NULL, sizeof(dm_train_options)), DM_ERR_INVALID,
          "dm_train_options_init", "options");
  REFUSED(dm_workspace_create_train_net(NULL, "x.pbtxt", NULL, &net), DM_ERR_INVALID,
          "dm_workspace_create_train_net", "ws");
  REFUSED(dm_workspace_create_train_net(ws, NULL, NULL, &net), DM_ERR_INVALID,
          "dm_workspace_create_train_net", "net_path");
  REFUSED(dm_workspace_create_train_net(ws, "x.pbtxt", NULL, NULL), DM_ERR_INVALID,
          "dm_workspace_create_train_net", "out");
  REFUSED(dm_rewrite_train_net(NULL, NULL, "o.pbtxt", NULL), DM_ERR_INVALID,
          "dm_rewrite_train_net", "net_path");
  REFUSED(dm_rewrite_train_net("x.pbtxt", NULL, NULL, NULL), DM_ERR_INVALID,
          "dm_rewrite_train_net", "out_net_path");
  /* Enum fields out of range are named, before any file is read. */
  dm_train_options bad;
  dm_train_options_init(&bad);
  bad.multi_tensor = (dm_switch)7;
  REFUSED(dm_rewrite_train_net("x.pbtxt", &bad, "o.pbtxt", NULL), DM_ERR_INVALID,
          "dm_train_options.multi_tensor", "unknown value 7");
  dm_train_options_init(&bad);
  bad.layout = (dm_train_layout)-1;
  REFUSED(dm_rewrite_train_net("x.pbtxt", &bad, "o.pbtxt", NULL), DM_ERR_INVALID,
          "dm_train_options.layout", "unknown value -1");
  /* Tensors: NULL (a failed fetch's) reads as an empty tensor. */
  EXPECT(dm_tensor_dtype(NULL) == DM_UNDEFINED, "dtype(NULL)");
  EXPECT(dm_tensor_ndim(NULL) == 0, "ndim(NULL)");
  EXPECT(dm_tensor_dims(NULL) == NULL, "dims(NULL)");
  EXPECT(dm_tensor_numel(NULL) == 0, "numel(NULL)");
  EXPECT(dm_tensor_nbytes(NULL) == 0, "nbytes(NULL)");
  EXPECT(dm_tensor_data(NULL) == NULL, "data(NULL)");
  EXPECT(dm_status_name((dm_status)999) != NULL, "status_name(999)");
  EXPECT(dm_dtype_name((dm_dtype)999) != NULL, "dtype_name(999)");
  EXPECT(dm_last_error() != NULL, "last_error");
  dm_workspace_destroy(ws);
}

/* A failed feed leaves an existing blob bit for bit, and a missing one missing. */
static void failed_feed(void) {
  dm_workspace *ws = NULL;
  if (dm_workspace_create(&ws) != DM_OK)
    exit(1);
  int64_t dims[2] = {2, 3};
  float v[6] = {1, 2, 3, 4, 5, 6};
  EXPECT(dm_workspace_feed(ws, "a", DM_FLOAT, 2, dims, v) == DM_OK, "feed a");
  const char *words[2] = {"one", "two"};
  int64_t two[1] = {2};
  EXPECT(dm_workspace_feed(ws, "s", DM_STRING, 1, two, words) == DM_OK, "feed s");
  int64_t big[2] = {INT64_MAX, 4}, neg[1] = {-1}, other[1] = {4};
  float w[4] = {9, 9, 9, 9};
  struct {
    dm_dtype dtype;
    int ndim;
    const int64_t *dims;
    const void *data;
  } bad[] = {
      {DM_FLOAT, 1, other, NULL},            /* NULL data (resized before) */
      {DM_INT64, 1, other, NULL},            /* another dtype, NULL data */
      {(dm_dtype)99, 1, other, w},           /* no such dtype */
      {DM_UNDEFINED, 1, other, w},           /* UNDEFINED */
      {DM_FLOAT, 9, big, w},                 /* too many dims */
      {DM_FLOAT, -1, other, w},              /* negative ndim */
      {DM_FLOAT, 2, big, w},                 /* overflow */
      {DM_FLOAT, 1, neg, w},                 /* negative dim */
      {DM_STRING, 1, other, NULL},           /* string without data */
  };
  const char *names[] = {"a", "s", "missing"};
  for (size_t k = 0; k < sizeof names / sizeof *names; k++)
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
      dm_status s = dm_workspace_feed(ws, names[k], bad[i].dtype, bad[i].ndim, bad[i].dims,
                                      bad[i].data);
      EXPECT(s != DM_OK, "bad feed %zu of '%s' accepted", i, names[k]);
    }
  /* a tensor over the workspace's limit */
  dm_workspace_set_tensor_limit(ws, 8);
  EXPECT(dm_workspace_feed(ws, "a", DM_FLOAT, 1, other, w) == DM_ERR_LIMIT, "over the limit");
  EXPECT(dm_workspace_feed(ws, "missing", DM_FLOAT, 1, other, w) == DM_ERR_LIMIT,
         "over the limit (new blob)");
  dm_workspace_set_tensor_limit(ws, (uint64_t)1 << 30);
  const dm_tensor *t = NULL;
  EXPECT(dm_workspace_fetch(ws, "a", &t) == DM_OK, "fetch a");
  EXPECT(dm_tensor_dtype(t) == DM_FLOAT && dm_tensor_ndim(t) == 2 &&
             dm_tensor_dims(t)[0] == 2 && dm_tensor_dims(t)[1] == 3 && dm_tensor_numel(t) == 6 &&
             memcmp(dm_tensor_data(t), v, sizeof v) == 0,
         "a failed feed changed blob 'a'");
  EXPECT(dm_workspace_fetch(ws, "s", &t) == DM_OK, "fetch s");
  EXPECT(dm_tensor_dtype(t) == DM_STRING && dm_tensor_numel(t) == 2 &&
             strcmp(((const char *const *)dm_tensor_data(t))[0], "one") == 0 &&
             strcmp(((const char *const *)dm_tensor_data(t))[1], "two") == 0,
         "a failed feed changed blob 's'");
  EXPECT(!dm_workspace_has_blob(ws, "missing"), "a failed feed created blob 'missing'");
  EXPECT(dm_workspace_blob_count(ws) == 2, "%zu blobs after failed feeds, not 2",
         dm_workspace_blob_count(ws));
  /* And a net reading the blob a failed feed touched sees the old data. */
  dm_net *net = NULL;
  const char *relu = "op { type: \"Relu\" input: \"a\" output: \"r\" }";
  EXPECT(dm_workspace_create_net_bytes(ws, relu, strlen(relu), 1, &net) == DM_OK, "relu net");
  EXPECT(dm_workspace_feed(ws, "a", DM_FLOAT, 1, other, NULL) != DM_OK, "NULL data");
  EXPECT(net && dm_net_run(net) == DM_OK, "relu run");
  EXPECT(dm_workspace_fetch(ws, "r", &t) == DM_OK && dm_tensor_numel(t) == 6 &&
             memcmp(dm_tensor_data(t), v, sizeof v) == 0,
         "the net ran on what a failed feed left");
  dm_workspace_destroy(ws);
}

/* A failed net creation leaves the blob list as it was. */
static void failed_net(void) {
  dm_workspace *ws = NULL;
  if (dm_workspace_create(&ws) != DM_OK)
    exit(1);
  int64_t dims[1] = {3};
  float v[3] = {1, -2, 3};
  EXPECT(dm_workspace_feed(ws, "x", DM_FLOAT, 1, dims, v) == DM_OK, "feed x");
  char *before = blob_list(ws);
  const char *bad[] = {
      /* the second op's type is unknown: the first op's blobs were created */
      "op { type: \"Relu\" input: \"x\" output: \"fresh1\" }\n"
      "op { type: \"NoSuchOp\" input: \"fresh1\" output: \"fresh2\" }\n",
      /* an empty output name, after a new input */
      "op { type: \"Relu\" input: \"fresh3\" output: \"\" }\n",
      /* an empty input name */
      "op { type: \"Relu\" input: \"x\" output: \"fresh4\" }\n"
      "op { type: \"Relu\" input: \"\" output: \"fresh5\" }\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    dm_net *net = NULL;
    dm_status s = dm_workspace_create_net_bytes(ws, bad[i], strlen(bad[i]), 1, &net);
    EXPECT(s != DM_OK && net == NULL, "bad net %zu accepted", i);
    if (i > 0)
      EXPECT(strstr(dm_last_error(), "empty") && strstr(dm_last_error(), "Relu"),
             "net %zu: the error does not name the op and the empty name", i);
    char *after = blob_list(ws);
    EXPECT(before && after && strcmp(before, after) == 0,
           "bad net %zu left blobs: before '%s', after '%s'", i, before, after);
    free(after);
  }
  free(before);
  /* The workspace still works. */
  dm_net *net = NULL;
  EXPECT(dm_workspace_create_net_bytes(ws, good_net, strlen(good_net), 1, &net) == DM_OK &&
             dm_net_run(net) == DM_OK,
         "a good net after failed ones");
  EXPECT(strcmp(dm_net_name(net), "good") == 0, "net name");
  dm_workspace_destroy(ws);
}

static void empty_names(void) {
  dm_workspace *ws = NULL;
  if (dm_workspace_create(&ws) != DM_OK)
    exit(1);
  int64_t dims[1] = {1};
  float v[1] = {1};
  const dm_tensor *t = NULL;
  REFUSED(dm_workspace_feed(ws, "", DM_FLOAT, 1, dims, v), DM_ERR_INVALID, "dm_workspace_feed",
          "empty");
  REFUSED(dm_workspace_fetch(ws, "", &t), DM_ERR_INVALID, "dm_workspace_fetch", "empty");
  EXPECT(dm_workspace_blob_count(ws) == 0, "an empty name made a blob");
  EXPECT(!dm_workspace_has_blob(ws, ""), "has_blob(\"\")");
  /* An empty path names no file: dlopen("") would hand back the host program itself. */
  dm_net *net = NULL;
  REFUSED(dm_plugin_load(""), DM_ERR_INVALID, "dm_plugin_load", "empty path");
  REFUSED(dm_workspace_run_net_file(ws, ""), DM_ERR_INVALID, "dm_workspace_run_net_file",
          "empty path");
  REFUSED(dm_workspace_create_net_file(ws, "", &net), DM_ERR_INVALID,
          "dm_workspace_create_net_file", "empty path");
  EXPECT(net == NULL, "a refused net creation set *out");
  /* An empty net, as the CLI refuses a 0-byte net file: binary or text, a NULL or a real
   * pointer, refused alike (protobuf would read 0 bytes as a net of no ops). */
  REFUSED(dm_workspace_create_net_bytes(ws, "", 0, 0, &net), DM_ERR_PARSE,
          "dm_workspace_create_net_bytes", "0 bytes");
  REFUSED(dm_workspace_create_net_bytes(ws, "", 0, 1, &net), DM_ERR_PARSE,
          "dm_workspace_create_net_bytes", "0 bytes");
  REFUSED(dm_workspace_create_net_bytes(ws, NULL, 0, 1, &net), DM_ERR_PARSE,
          "dm_workspace_create_net_bytes", "0 bytes");
  EXPECT(net == NULL, "a refused empty net set *out");
  dm_workspace_destroy(ws);
}

int main(void) {
  null_arguments();
  failed_feed();
  failed_net();
  empty_names();
  if (failures) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  printf("ok: misuse of the API refused, failed calls leave the workspace as it was\n");
  return 0;
}
