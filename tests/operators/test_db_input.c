/* test_db_input.c: `demitasse make-db` on the vendored MNIST and TensorProtosDBInput.
 *
 * make-db: 8,000 + 2,000 records; the record layout (BYTE 1x28x28 in byte_data, INT32
 * scalar label, keys %08d); labels and pixels checked against the IDX files as Python's
 * gzip module reads them (an independent reader; skipped without /usr/bin/python3);
 * strict IDX errors. DB input on small DBs built here: batches in order and scaled, the
 * shuffle a permutation per epoch (also for batches that straddle epochs), batches
 * chosen by `iter` identical after reopening and after jumps, the batch handed to the
 * output without a copy (and seen by a view of the output), and errors naming the
 * DB and the key of a corrupt or misshapen record.
 */
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "core/db.h"
#include "op_test_util.h"
#include "proto/caffe2.pb-c.h"
#include "tools/mnist_idx.h"

#ifndef DM_DEMITASSE
#define DM_DEMITASSE "demitasse"
#endif
#ifndef DM_SOURCE_ROOT
#define DM_SOURCE_ROOT "."
#endif
#define MNIST_IMAGES DM_SOURCE_ROOT "/models/mnist/data/t10k-images-idx3-ubyte.gz"
#define MNIST_LABELS DM_SOURCE_ROOT "/models/mnist/data/t10k-labels-idx1-ubyte.gz"

typedef struct fixture {
  char dir[64];
} fixture;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f)
    return 1;
  strcpy(f->dir, "/tmp/dm_db_input_XXXXXX");
  if (!mkdtemp(f->dir))
    return 1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(f);
  return 0;
}

/* ---- make-db and IDX --------------------------------------------------------------- */

/* Runs a shell command; returns its exit status. */
static int sh(const char *fmt, ...) DM_PRINTF(1, 2);
static int sh(const char *fmt, ...) {
  char cmd[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static Caffe2__TensorProtos *get_record(dm_db *db, const char *key) {
  const void *v;
  size_t n;
  if (dm_db_get(db, key, &v, &n) != DM_OK)
    fail_msg("%s", dm_last_error());
  Caffe2__TensorProtos *r = caffe2__tensor_protos__unpack(NULL, n, v);
  assert_non_null(r);
  return r;
}

static void test_make_db_mnist(void **state) {
  fixture *f = *state;
  char tr[128], va[128];
  snprintf(tr, sizeof tr, "%s/train", f->dir);
  snprintf(va, sizeof va, "%s/val", f->dir);
  assert_int_equal(sh("'%s' make-db --images '%s' --labels '%s' --out-train '%s' --out-val '%s' "
                      ">/dev/null",
                      DM_DEMITASSE, MNIST_IMAGES, MNIST_LABELS, tr, va),
                   0);
  dm_db *t = NULL, *v = NULL;
  assert_int_equal(dm_db_open_read(tr, &t), DM_OK);
  assert_int_equal(dm_db_open_read(va, &v), DM_OK);
  assert_int_equal(dm_db_count(t), 8000);
  assert_int_equal(dm_db_count(v), 2000);

  /* The independent reading: labels 0..4 and 8000..8004, pixel sums of images 0, 8000. */
  int want[12] = {0}, have_python = access("/usr/bin/python3", X_OK) == 0;
  if (have_python) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import gzip; l=gzip.open('%s').read()[8:]; "
             "i=gzip.open('%s').read()[16:]; "
             "print(*[l[k] for k in (0,1,2,3,4,8000,8001,8002,8003,8004)], "
             "sum(i[:784]), sum(i[8000*784:8001*784]))\"",
             MNIST_LABELS, MNIST_IMAGES);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    for (int k = 0; k < 12; k++)
      assert_int_equal(fscanf(p, "%d", &want[k]), 1);
    assert_int_equal(pclose(p), 0);
  } else {
    fprintf(stderr, "no /usr/bin/python3: layout checked, values not cross-checked\n");
  }
  for (int k = 0; k < 10; k++) {
    char key[16];
    snprintf(key, sizeof key, "%08d", k % 5);
    Caffe2__TensorProtos *r = get_record(k < 5 ? t : v, key);
    assert_int_equal(r->n_protos, 2);
    const Caffe2__TensorProto *img = r->protos[0], *lab = r->protos[1];
    assert_int_equal(img->data_type, CAFFE2__TENSOR_PROTO__DATA_TYPE__BYTE);
    assert_int_equal(img->n_dims, 3);
    assert_int_equal(img->dims[0], 1);
    assert_int_equal(img->dims[1], 28);
    assert_int_equal(img->dims[2], 28);
    assert_int_equal(img->byte_data.len, 784);
    assert_int_equal(lab->data_type, CAFFE2__TENSOR_PROTO__DATA_TYPE__INT32);
    assert_int_equal(lab->n_dims, 0);
    assert_int_equal(lab->n_int32_data, 1);
    if (have_python)
      assert_int_equal(lab->int32_data[0], want[k]);
    if (have_python && k % 5 == 0) {
      int sum = 0;
      for (int i = 0; i < 784; i++)
        sum += img->byte_data.data[i];
      assert_int_equal(sum, want[10 + k / 5]);
    }
    caffe2__tensor_protos__free_unpacked(r, NULL);
  }
  dm_db_close(t);
  dm_db_close(v);
  /* The outputs must be new. */
  assert_int_equal(sh("'%s' make-db --images '%s' --labels '%s' --out-train '%s' --out-val "
                      "'%s/v2' 2>/dev/null >/dev/null",
                      DM_DEMITASSE, MNIST_IMAGES, MNIST_LABELS, tr, f->dir),
                   1);
}

static void write_gz(const char *path, const void *data, size_t n) {
  gzFile g = gzopen(path, "wb");
  assert_non_null(g);
  assert_int_equal(gzwrite(g, data, (unsigned)n), (int)n);
  gzclose(g);
}

static void expect_idx_error(const char *path, const char *frag) {
  dm_idx idx;
  dm_status s = dm_idx_read(path, &idx);
  if (s == DM_OK)
    fail_msg("%s: read without error", path);
  if (!strstr(dm_last_error(), frag) || !strstr(dm_last_error(), path))
    fail_msg("\"%s\" lacks \"%s\" or the path", dm_last_error(), frag);
  assert_null(idx.data);
}

static void test_idx_errors(void **state) {
  fixture *f = *state;
  char p[128];
  uint8_t ok[4 + 4 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9};
  snprintf(p, sizeof p, "%s/ok.gz", f->dir);
  write_gz(p, ok, sizeof ok);
  dm_idx idx;
  assert_int_equal(dm_idx_read(p, &idx), DM_OK);
  assert_int_equal(idx.ndim, 1);
  assert_int_equal(idx.dims[0], 3);
  assert_int_equal(idx.data[2], 9);
  dm_idx_free(&idx);

  uint8_t bad[sizeof ok + 1];
  memcpy(bad, ok, sizeof ok);
  bad[0] = 1;
  snprintf(p, sizeof p, "%s/magic.gz", f->dir);
  write_gz(p, bad, sizeof ok);
  expect_idx_error(p, "magic");
  memcpy(bad, ok, sizeof ok);
  bad[2] = 0x0d;
  snprintf(p, sizeof p, "%s/type.gz", f->dir);
  write_gz(p, bad, sizeof ok);
  expect_idx_error(p, "type code 0x0d");
  memcpy(bad, ok, sizeof ok);
  bad[3] = 0;
  snprintf(p, sizeof p, "%s/ndim.gz", f->dir);
  write_gz(p, bad, sizeof ok);
  expect_idx_error(p, "0 dimensions");
  snprintf(p, sizeof p, "%s/short.gz", f->dir);
  write_gz(p, ok, sizeof ok - 1);
  expect_idx_error(p, "truncated");
  memcpy(bad, ok, sizeof ok);
  bad[sizeof ok] = 1;
  snprintf(p, sizeof p, "%s/long.gz", f->dir);
  write_gz(p, bad, sizeof ok + 1);
  expect_idx_error(p, "trailing");
  memcpy(bad, ok, sizeof ok);
  bad[7] = 0;
  snprintf(p, sizeof p, "%s/zero.gz", f->dir);
  write_gz(p, bad, sizeof ok);
  expect_idx_error(p, "dimension 0 is 0");
  snprintf(p, sizeof p, "%s/none.gz", f->dir);
  expect_idx_error(p, "cannot open");

  /* make-db: images and labels must agree. */
  char lab[128], out[128];
  snprintf(lab, sizeof lab, "%s/ok.gz", f->dir);
  snprintf(out, sizeof out, "%s/o", f->dir);
  assert_int_equal(sh("'%s' make-db --images '%s' --labels '%s' --out-train '%s' 2>'%s/err'",
                      DM_DEMITASSE, MNIST_IMAGES, lab, out, f->dir),
                   1);
  snprintf(p, sizeof p, "%s/err", f->dir);
  FILE *e = fopen(p, "r");
  char msg[512] = {0};
  assert_non_null(e);
  assert_non_null(fgets(msg, sizeof msg, e));
  fclose(e);
  if (!strstr(msg, "images must be 3-D") && !strstr(msg, "labels"))
    fail_msg("make-db said: %s", msg);
}

/* ---- DB input ------------------------------------------------------------------------ */

/* n records: image UINT8 (1, 2, 2) all = i % 256 (record `bad_shape`: (1, 3, 2)), label
 * INT32 i; record `corrupt` gets bytes that do not parse. */
static void make_small_db(const char *path, int n, int corrupt, int bad_shape) {
  dm_db *db = NULL;
  assert_int_equal(dm_db_open_write(path, &db), DM_OK);
  for (int i = 0; i < n; i++) {
    uint8_t px[6];
    int64_t dims[3] = {1, i == bad_shape ? 3 : 2, 2};
    int32_t label = i;
    memset(px, i % 256, sizeof px);
    Caffe2__TensorProto img = CAFFE2__TENSOR_PROTO__INIT, lab = CAFFE2__TENSOR_PROTO__INIT;
    img.n_dims = 3, img.dims = dims;
    img.has_data_type = 1, img.data_type = CAFFE2__TENSOR_PROTO__DATA_TYPE__BYTE;
    img.has_byte_data = 1, img.byte_data.data = px;
    img.byte_data.len = (size_t)(dims[1] * dims[2]);
    lab.has_data_type = 1, lab.data_type = CAFFE2__TENSOR_PROTO__DATA_TYPE__INT32;
    lab.n_int32_data = 1, lab.int32_data = &label;
    Caffe2__TensorProto *ps[2] = {&img, &lab};
    Caffe2__TensorProtos rec = CAFFE2__TENSOR_PROTOS__INIT;
    rec.n_protos = 2, rec.protos = ps;
    uint8_t buf[256];
    size_t len = caffe2__tensor_protos__pack(&rec, buf);
    if (i == corrupt)
      memcpy(buf, "\x0a\xff\xff\x0f", len = 4);
    char key[16];
    snprintf(key, sizeof key, "%08d", i);
    assert_int_equal(dm_db_put(db, key, 8, buf, len), DM_OK);
  }
  assert_int_equal(dm_db_commit(db), DM_OK);
  dm_db_close(db);
}

/* A net of one TensorProtosDBInput (with an `iter` input when with_iter). */
static dm_net *input_net(dm_workspace *ws, const char *db, int batch, int shuffle, int seed,
                         int with_iter) {
  char text[1024];
  snprintf(text, sizeof text,
           "name: \"input\" op { %s output: \"data\" output: \"label\" "
           "type: \"TensorProtosDBInput\" arg { name: \"db\" s: \"%s\" } "
           "arg { name: \"batch_size\" i: %d } arg { name: \"shuffle\" i: %d } "
           "arg { name: \"seed\" i: %d } arg { name: \"scale\" f: 0.5 } }",
           with_iter ? "input: \"iter\"" : "", db, batch, shuffle, seed);
  if (with_iter) {
    int64_t zero = 0;
    assert_int_equal(dm_workspace_feed(ws, "iter", DM_INT64, 0, NULL, &zero), DM_OK);
  }
  dm_net *net = NULL;
  if (dm_workspace_create_net_bytes(ws, text, strlen(text), 1, &net) != DM_OK)
    fail_msg("%s", dm_last_error());
  return net;
}

/* Runs the net for batch b (fed as `iter` when it has one); copies the labels out. */
static void run_batch(dm_workspace *ws, dm_net *net, int64_t b, int with_iter, int batch,
                      int32_t *labels) {
  if (with_iter)
    assert_int_equal(dm_workspace_feed(ws, "iter", DM_INT64, 0, NULL, &b), DM_OK);
  if (dm_net_run(net) != DM_OK)
    fail_msg("batch %lld: %s", (long long)b, dm_last_error());
  int64_t ddims[4] = {batch, 1, 2, 2}, ldims[1] = {batch};
  const dm_tensor *d = opt_fetch(ws, "data", DM_FLOAT, 4, ddims);
  const dm_tensor *l = opt_fetch(ws, "label", DM_INT32, 1, ldims);
  const float *pd = dm_tensor_data(d);
  const int32_t *pl = dm_tensor_data(l);
  for (int j = 0; j < batch; j++) {
    for (int k = 0; k < 4; k++)
      assert_true(pd[j * 4 + k] == (float)(pl[j] % 256) * 0.5f);
    labels[j] = pl[j];
  }
}

static void test_in_order(void **state) {
  fixture *f = *state;
  char db[128];
  snprintf(db, sizeof db, "%s/small", f->dir);
  make_small_db(db, 10, -1, -1);
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  dm_net *net = input_net(ws, db, 4, 0, 0, 0);
  const void *p[6];
  for (int b = 0; b < 6; b++) { /* 24 positions over 10 records: wraps twice */
    int32_t lab[4];
    run_batch(ws, net, b, 0, 4, lab);
    for (int j = 0; j < 4; j++)
      assert_int_equal(lab[j], (b * 4 + j) % 10);
    p[b] = dm_tensor_data(opt_fetch(ws, "data", DM_FLOAT, 4, (int64_t[]){4, 1, 2, 2}));
  }
  /* handed over without a copy: the output alternates between two buffers */
  assert_ptr_not_equal(p[0], p[1]);
  for (int b = 2; b < 6; b++)
    assert_ptr_equal(p[b], p[b - 2]);

  /* With a view of the output alive (Reshape shares its storage), the executor detaches
   * the output before the op writes it; the batch still arrives (run_batch checks it),
   * and the view, made again after it, sees it. */
  int32_t lab[4];
  const char *text = "name: \"view\" op { output: \"data\" output: \"label\" "
                     "type: \"TensorProtosDBInput\" arg { name: \"db\" s: \"%s\" } "
                     "arg { name: \"batch_size\" i: 4 } arg { name: \"scale\" f: 0.5 } } "
                     "op { input: \"data\" output: \"flat\" output: \"old_shape\" "
                     "type: \"Reshape\" arg { name: \"shape\" ints: -1 } }";
  char buf[1024];
  snprintf(buf, sizeof buf, text, db);
  dm_net *vnet = NULL;
  if (dm_workspace_create_net_bytes(ws, buf, strlen(buf), 1, &vnet) != DM_OK)
    fail_msg("%s", dm_last_error());
  for (int b = 0; b < 3; b++) {
    run_batch(ws, vnet, b, 0, 4, lab);
    assert_int_equal(lab[0], (b * 4) % 10);
    const dm_tensor *flat = opt_fetch(ws, "flat", DM_FLOAT, 1, (int64_t[]){16});
    const dm_tensor *d = opt_fetch(ws, "data", DM_FLOAT, 4, (int64_t[]){4, 1, 2, 2});
    assert_ptr_equal(dm_tensor_data(flat), dm_tensor_data(d));
  }
  dm_workspace_destroy(ws);
}

static void test_shuffle_and_resume(void **state) {
  fixture *f = *state;
  char db[128];
  snprintf(db, sizeof db, "%s/small", f->dir);
  enum { N = 10, B = 3, BATCHES = 20 }; /* 60 positions: 6 epochs, batches straddle them */
  make_small_db(db, N, -1, -1);
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  dm_net *net = input_net(ws, db, B, 1, 7, 1);
  int32_t seq[BATCHES * B];
  for (int b = 0; b < BATCHES; b++)
    run_batch(ws, net, b, 1, B, seq + b * B);
  int differs = 0;
  for (int e = 0; e < BATCHES * B / N; e++) {
    int seen[N] = {0};
    for (int r = 0; r < N; r++) {
      int32_t v = seq[e * N + r];
      assert_true(v >= 0 && v < N);
      seen[v]++;
      differs |= e > 0 && v != seq[r];
    }
    for (int r = 0; r < N; r++)
      assert_int_equal(seen[r], 1); /* each record exactly once per epoch */
  }
  assert_true(differs); /* epochs get different orders */
  int in_order = 1;
  for (int r = 0; r < N; r++)
    in_order &= seq[r] == r;
  assert_false(in_order);
  /* Jumps: the same batches again, out of order. */
  int64_t jumps[] = {13, 2, 3, 19, 0, 7};
  for (size_t i = 0; i < sizeof jumps / sizeof *jumps; i++) {
    int32_t lab[B];
    run_batch(ws, net, jumps[i], 1, B, lab);
    assert_memory_equal(lab, seq + jumps[i] * B, sizeof lab);
  }
  dm_workspace_destroy(ws);

  /* Reopened (a resumed run): batch 11 onwards as before. */
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  net = input_net(ws, db, B, 1, 7, 1);
  for (int b = 11; b < BATCHES; b++) {
    int32_t lab[B];
    run_batch(ws, net, b, 1, B, lab);
    assert_memory_equal(lab, seq + b * B, sizeof lab);
  }
  dm_workspace_destroy(ws);

  /* Another seed, another order. */
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  net = input_net(ws, db, B, 1, 8, 1);
  int32_t other[4 * B];
  for (int b = 0; b < 4; b++)
    run_batch(ws, net, b, 1, B, other + b * B);
  assert_memory_not_equal(other, seq, sizeof other);
  dm_workspace_destroy(ws);
}

static void test_errors(void **state) {
  fixture *f = *state;
  char db[128], shape[128];
  snprintf(db, sizeof db, "%s/corrupt", f->dir);
  make_small_db(db, 10, 5, -1);
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  dm_net *net = input_net(ws, db, 4, 0, 0, 1);
  int32_t lab[8];
  run_batch(ws, net, 0, 1, 4, lab); /* records 0..3 are fine */
  int64_t b = 1;
  assert_int_equal(dm_workspace_feed(ws, "iter", DM_INT64, 0, NULL, &b), DM_OK);
  opt_expect_error(dm_net_run(net), DM_ERR_PARSE, db, "key '00000005'", NULL);
  run_batch(ws, net, 2, 1, 4, lab); /* and it goes on with good batches */
  dm_workspace_destroy(ws);

  snprintf(shape, sizeof shape, "%s/shape", f->dir);
  make_small_db(shape, 10, -1, 9);
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  net = input_net(ws, shape, 5, 0, 0, 0);
  run_batch(ws, net, 0, 0, 5, lab);
  opt_expect_error(dm_net_run(net), DM_ERR_SHAPE, shape, "key '00000009'", NULL);
  dm_workspace_destroy(ws);

  /* Instantiation errors: a missing DB, a bad batch size, a wrong output count. */
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  opt_op *op = opt_new("TensorProtosDBInput");
  opt_out(op, "data");
  opt_out(op, "label");
  opt_arg_string(op, "db", "/nonexistent/db");
  opt_arg_int(op, "batch_size", 2);
  opt_expect_error(opt_run(op, ws), DM_ERR_NOT_FOUND, "/nonexistent/db", NULL);
  op = opt_new("TensorProtosDBInput");
  opt_out(op, "data");
  opt_arg_string(op, "db", shape);
  opt_arg_int(op, "batch_size", 2);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "2 tensors", "1 outputs", NULL);
  op = opt_new("TensorProtosDBInput");
  opt_out(op, "data");
  opt_out(op, "label");
  opt_arg_string(op, "db", shape);
  opt_arg_int(op, "batch_size", 0);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "batch_size", NULL);
  dm_workspace_destroy(ws);
}

/* A truncated data.mdb (a DB or checkpoint cut short by a full disk or a careless copy):
 * LMDB would read its pages through a map sized from the meta page, a SIGBUS past the
 * end of the file. Opening it is DM_ERR_PARSE naming the file and both sizes, for the DB
 * input op and for Load alike; a file too short for the meta pages is refused too. */
static void test_truncated(void **state) {
  fixture *f = *state;
  char db[128], data[160];
  snprintf(db, sizeof db, "%s/cut", f->dir);
  make_small_db(db, 400, -1, -1);
  snprintf(data, sizeof data, "%s/data.mdb", db);
  struct stat st;
  assert_int_equal(stat(data, &st), 0);
  assert_true(st.st_size >= 8 * 4096);
  assert_int_equal(truncate(data, st.st_size / 2), 0);
  char half[32];
  snprintf(half, sizeof half, "%lld bytes", (long long)(st.st_size / 2));

  dm_db *d = NULL;
  dm_status s = dm_db_open_read(db, &d);
  if (s == DM_OK) { /* unfixed: reading the records is what touches the missing pages */
    dm_db_iter *it = NULL;
    assert_int_equal(dm_db_iter_open(d, &it), DM_OK);
    const void *k, *v;
    size_t kl, vl;
    int done = 0;
    while (!done && dm_db_iter_next(it, &k, &kl, &v, &vl, &done) == DM_OK)
      ;
    dm_db_iter_close(it);
    dm_db_close(d);
    d = NULL;
  }
  opt_expect_error(s, DM_ERR_PARSE, data, "truncated", half, NULL);
  assert_null(d);

  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  opt_op *op = opt_new("TensorProtosDBInput");
  opt_out(op, "data");
  opt_out(op, "label");
  opt_arg_string(op, "db", db);
  opt_arg_int(op, "batch_size", 2);
  opt_expect_error(opt_run(op, ws), DM_ERR_PARSE, data, "truncated", half, NULL);
  op = opt_new("Load");
  opt_arg_string(op, "db", db);
  opt_arg_int(op, "load_all", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_PARSE, data, "truncated", half, NULL);
  dm_workspace_destroy(ws);

  /* Shorter than the two meta pages: LMDB's own check, reported as a parse error. */
  assert_int_equal(truncate(data, 100), 0);
  opt_expect_error(dm_db_open_read(db, &d), DM_ERR_PARSE, data, NULL);
  assert_null(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_make_db_mnist, setup, teardown),
      cmocka_unit_test_setup_teardown(test_idx_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_in_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shuffle_and_resume, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
