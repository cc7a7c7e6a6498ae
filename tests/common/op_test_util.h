/* op_test_util.h: build a one-op net in C, run it once in a workspace, and compare
 * results; shared by the operator tests.
 *
 *     opt_op *op = opt_new("FC");
 *     opt_in(op, "X"); opt_in(op, "W"); opt_in(op, "b"); opt_out(op, "Y");
 *     opt_arg_int(op, "axis", 1);
 *     dm_status s = opt_run(op, ws);   // instantiates, runs once, frees op and net
 *
 * The OperatorDef is serialised and parsed back, so the net owns an ordinary
 * protobuf-c message, exactly as if it had come from a file.
 */
#ifndef DM_TESTS_OP_TEST_UTIL_H
#define DM_TESTS_OP_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "core/half.h"
#include "demitasse.h"

typedef struct opt_op opt_op;

opt_op *opt_new(const char *type);
void opt_in(opt_op *op, const char *blob);
void opt_out(opt_op *op, const char *blob);
/* The OperatorDef's engine ("DNNL", "REFERENCE", ...; default: none, the workspace's). */
void opt_engine(opt_op *op, const char *engine);
void opt_arg_int(opt_op *op, const char *name, int64_t v);
void opt_arg_float(opt_op *op, const char *name, float v);
void opt_arg_string(opt_op *op, const char *name, const char *v);
void opt_arg_ints(opt_op *op, const char *name, size_t n, const int64_t *v);
void opt_arg_floats(opt_op *op, const char *name, size_t n, const float *v);
void opt_arg_strings(opt_op *op, const char *name, size_t n, const char *const *v);
/* Instantiates the op as a one-op net in ws, runs it once, frees everything. Returns the
 * first failing status (dm_last_error() has the message). */
dm_status opt_run(opt_op *op, dm_workspace *ws);

/* Feeds a tensor (dims up to 8). */
void opt_feed(dm_workspace *ws, const char *name, dm_dtype t, int ndim, const int64_t *dims,
              const void *data);
/* Fetches a blob and checks its dtype and shape (cmocka assertions). */
const dm_tensor *opt_fetch(dm_workspace *ws, const char *name, dm_dtype t, int ndim,
                           const int64_t *dims);
/* Asserts s == want and that dm_last_error() contains every given fragment (NULL-ended). */
void opt_expect_error(dm_status s, dm_status want, ...);

/* Deterministic pseudo-random numbers in [lo, hi). */
double opt_uniform(uint64_t *state, double lo, double hi);

/* FP16 unit roundoff 2^-11 and FP32's 2^-24. */
#define OPT_U16 (1.0 / 2048.0)
#define OPT_U32 (1.0 / 16777216.0)
#define OPT_UBF16 (1.0 / 256.0)

/* A test's precision mode: 0 FP32, 1 FP16, 2 BF16 (the 16-bit ones as uint16_t bits). */
static inline dm_dtype opt_mode_dtype(int mode) {
  return mode == 2 ? DM_BFLOAT16 : mode ? DM_FLOAT16 : DM_FLOAT;
}
static inline const char *opt_mode_name(int mode) {
  return mode == 2 ? "BF16" : mode ? "FP16" : "FP32";
}
/* The 16-bit mode's unit roundoff, and half its smallest subnormal (the absolute error
 * of a rounding into the subnormal range). */
static inline double opt_mode_u(int mode) { return mode == 2 ? OPT_UBF16 : OPT_U16; }
static inline double opt_mode_tiny(int mode) { return mode == 2 ? 0x1p-134 : 0x1p-25; }
/* float -> the mode's 16-bit pattern (nearest even), and back (exact). */
static inline uint16_t opt_narrow(int mode, float f) {
  return mode == 2 ? dm_float_to_bf16(f) : dm_float_to_half(f);
}
static inline float opt_widen(int mode, uint16_t h) {
  return mode == 2 ? dm_bf16_to_float(h) : dm_half_to_float(h);
}

/* n values uniform in [lo, hi), rounded to the mode's dtype so a reference sees what is
 * fed (malloc'd; the caller frees). */
double *opt_draw(int64_t n, double lo, double hi, int mode, uint64_t *seed);
/* Feeds doubles as the mode's dtype (FP32, or FP16/BF16 rounded to nearest even). */
void opt_feed_mode(dm_workspace *ws, const char *name, int mode, int ndim, const int64_t *dims,
                   const double *v);

#endif
