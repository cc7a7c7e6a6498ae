/* cmd_make_db.c: `demitasse make-db`, MNIST IDX files -> a training and a validation LMDB.
 *
 * Records are what Caffe2's make_mnist_db (--channel_first) wrote, so Caffe2's own
 * TensorProtosDBInput reads them and ours reads Caffe2's: key "%08d" (the record's number
 * within its DB), value a serialised TensorProtos of two tensors:
 *   protos[0] image: data_type BYTE (3, Caffe2's name for UINT8), dims (1, rows, cols),
 *             the pixels in byte_data (one byte each, not one int32 each);
 *   protos[1] label: data_type INT32, no dims (a scalar), the label in int32_data.
 * The first --train images go to --out-train, the rest to --out-val.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "core/db.h"
#include "core/fileio.h"
#include "mnist_idx.h"
#include "proto/caffe2.pb-c.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: demitasse make-db --images FILE --labels FILE --out-train DIR\n"
          "                         [--out-val DIR] [--train N]\n\n"
          "Converts MNIST IDX files (gzip'd or not) into LMDBs of Caffe2 TensorProtos\n"
          "records (image UINT8 1x28x28 in byte_data, label INT32; keys %%08d), as\n"
          "Caffe2's make_mnist_db wrote them. The output directories must not exist.\n\n"
          "  -i, --images FILE    IDX3 images (e.g. t10k-images-idx3-ubyte.gz)\n"
          "  -l, --labels FILE    IDX1 labels (e.g. t10k-labels-idx1-ubyte.gz)\n"
          "  -n, --train N        the first N images train (default 8000), the rest validate\n"
          "  -t, --out-train DIR  the training LMDB\n"
          "  -v, --out-val DIR    the validation LMDB (needed unless N covers every image)\n"
          "  -h, --help           this text\n");
}

/* Writes images [lo, hi) into a fresh LMDB at `path`. */
static dm_status write_db(const char *path, const dm_idx *img, const dm_idx *lab, int64_t lo,
                          int64_t hi) {
  /* LMDB maps its lock file and writes into the map: on a full disk that is a SIGBUS,
   * not an error. Its blocks are allocated here first, so a full disk is refused. */
  size_t plen = strlen(path);
  char *lock = malloc(plen + 16);
  if (!lock)
    return DM_NOMEM("a path");
  snprintf(lock, plen + 16, "%s/lock.mdb", path);
  int fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0664);
  int err = fd < 0 ? errno : posix_fallocate(fd, 0, 64 << 10);
  if (fd >= 0)
    close(fd);
  free(lock);
  if (err)
    return dm_error(DM_ERR_IO, "db '%s': cannot create its lock file: %s", path,
                    dm_errno_text(err));
  dm_db *db = NULL;
  DM_TRY(dm_db_open_write(path, &db));
  int64_t rows = img->dims[1], cols = img->dims[2];
  int64_t dims[3] = {1, rows, cols};
  int32_t label = 0;
  Caffe2__TensorProto image_pb = CAFFE2__TENSOR_PROTO__INIT, label_pb = CAFFE2__TENSOR_PROTO__INIT;
  image_pb.n_dims = 3;
  image_pb.dims = dims;
  image_pb.has_data_type = 1;
  image_pb.data_type = CAFFE2__TENSOR_PROTO__DATA_TYPE__BYTE;
  image_pb.has_byte_data = 1;
  image_pb.byte_data.len = (size_t)(rows * cols);
  label_pb.has_data_type = 1;
  label_pb.data_type = CAFFE2__TENSOR_PROTO__DATA_TYPE__INT32;
  label_pb.n_int32_data = 1;
  label_pb.int32_data = &label;
  Caffe2__TensorProto *protos[2] = {&image_pb, &label_pb};
  Caffe2__TensorProtos rec = CAFFE2__TENSOR_PROTOS__INIT;
  rec.n_protos = 2;
  rec.protos = protos;

  dm_status s = DM_OK;
  uint8_t *buf = NULL;
  for (int64_t i = lo; i < hi && s == DM_OK; i++) {
    image_pb.byte_data.data = img->data + (size_t)(i * rows * cols);
    label = lab->data[i];
    size_t n = protobuf_c_message_get_packed_size(&rec.base);
    if (!buf && !(buf = malloc(n))) /* every record packs to the same size */
      s = DM_NOMEM("a record");
    char key[32];
    int klen = snprintf(key, sizeof key, "%08lld", (long long)(i - lo));
    if (s == DM_OK) {
      protobuf_c_message_pack(&rec.base, buf);
      s = dm_db_put(db, key, (size_t)klen, buf, n);
    }
  }
  free(buf);
  if (s == DM_OK)
    s = dm_db_commit(db);
  dm_db_close(db);
  return s;
}

/* LMDB reports a short write (a full disk) as EIO: say "disk full" when it is. */
static dm_status db_failed(dm_status s, const char *out, const char *tmp) {
  if (s == DM_ERR_IO && dm_fs_full(tmp) && !strstr(dm_last_error(), "disk full"))
    return dm_error_prefix(s, "%s: disk full", out);
  return dm_error_prefix(s, "%s", out);
}

/* An output DB may not exist yet (an empty directory may). */
static dm_status refuse_existing(const char *path) {
  DIR *d = opendir(path);
  if (!d)
    return errno == ENOENT ? DM_OK
                           : dm_error(DM_ERR_IO, "db '%s': %s", path, dm_errno_text(errno));
  int empty = 1;
  for (struct dirent *e; empty && (e = readdir(d));)
    empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
  closedir(d);
  return empty ? DM_OK
               : dm_error(DM_ERR_EXISTS, "db '%s' already exists (and is not an empty directory)",
                          path);
}

static dm_status make_db(const char *images, const char *labels, long train,
                         const char *out_train, const char *out_val) {
  dm_idx img, lab;
  DM_TRY(dm_idx_read(images, &img));
  dm_status s = dm_idx_read(labels, &lab);
  if (s != DM_OK) {
    dm_idx_free(&img);
    return s;
  }
  int64_t n = img.dims[0];
  if (img.ndim != 3)
    s = dm_error(DM_ERR_SHAPE, "%s: images must be 3-D (count, rows, cols), not %d-D", images,
                 img.ndim);
  else if (lab.ndim != 1)
    s = dm_error(DM_ERR_SHAPE, "%s: labels must be 1-D (count), not %d-D", labels, lab.ndim);
  else if (lab.dims[0] != n)
    s = dm_error(DM_ERR_SHAPE, "%s has %lld images but %s has %lld labels", images,
                 (long long)n, labels, (long long)lab.dims[0]);
  else if (train > n)
    s = dm_error(DM_ERR_INVALID, "--train %ld is more than the %lld images", train,
                 (long long)n);
  else if (train < n && !out_val)
    s = dm_error(DM_ERR_INVALID, "%lld images are left for validation but --out-val is not set",
                 (long long)(n - train));
  /* Each DB is built in a temporary directory beside its target and renamed into place
   * when both are complete (core/fileio.h): a failed make-db (a full disk) leaves what
   * was there before and no half-written DB. */
  int val = train < n;
  char *tmp_train = NULL, *tmp_val = NULL;
  if (s == DM_OK)
    s = refuse_existing(out_train);
  if (s == DM_OK && val)
    s = refuse_existing(out_val);
  if (s == DM_OK)
    s = dm_atomic_dir_create(out_train, &tmp_train);
  if (s == DM_OK && val)
    s = dm_atomic_dir_create(out_val, &tmp_val);
  if (s == DM_OK && (s = write_db(tmp_train, &img, &lab, 0, train)) != DM_OK)
    s = db_failed(s, out_train, tmp_train);
  if (s == DM_OK && val && (s = write_db(tmp_val, &img, &lab, train, n)) != DM_OK)
    s = db_failed(s, out_val, tmp_val);
  if (s == DM_OK && (s = dm_atomic_dir_commit(tmp_train, out_train)) == DM_OK) {
    free(tmp_train);
    tmp_train = NULL;
  }
  if (s == DM_OK && val && (s = dm_atomic_dir_commit(tmp_val, out_val)) == DM_OK) {
    free(tmp_val);
    tmp_val = NULL;
  }
  if (s == DM_OK) {
    printf("wrote %ld records to %s\n", train, out_train);
    if (val)
      printf("wrote %lld records to %s\n", (long long)(n - train), out_val);
  }
  dm_atomic_dir_remove(tmp_train);
  dm_atomic_dir_remove(tmp_val);
  free(tmp_train);
  free(tmp_val);
  dm_idx_free(&img);
  dm_idx_free(&lab);
  return s;
}

int dm_cmd_make_db(int argc, char **argv) {
  static const struct option opts[] = {
      {"images", required_argument, NULL, 'i'},    {"labels", required_argument, NULL, 'l'},
      {"train", required_argument, NULL, 'n'},     {"out-train", required_argument, NULL, 't'},
      {"out-val", required_argument, NULL, 'v'},   {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *images = NULL, *labels = NULL, *out_train = NULL, *out_val = NULL;
  long train = 8000;
  int c;
  optind = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "i:l:n:t:v:h", opts, NULL)) != -1) {
    switch (c) {
    case 'i': images = optarg; break;
    case 'l': labels = optarg; break;
    case 't': out_train = optarg; break;
    case 'v': out_val = optarg; break;
    case 'n':
      if (!dm_cli_parse_long(optarg, 1, 1L << 31, &train))
        return dm_cli_usage_error("make-db", "--train wants a positive integer");
      break;
    case 'h': help(stdout); return DM_EXIT_OK;
    default: return dm_cli_bad_option("make-db", argv);
    }
  }
  if (!images || !labels || !out_train || optind != argc)
    return dm_cli_usage_error("make-db", "needs --images, --labels and --out-train");
  return make_db(images, labels, train, out_train, out_val) == DM_OK ? DM_EXIT_OK
                                                                     : dm_cli_fail();
}
