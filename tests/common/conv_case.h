/* conv_case.h: a Conv test case (shapes, strides, dilations, pads, groups, bias) and
 * its arguments spelled in every form Caffe2 accepts, shared by the reference kernel's
 * tests and the oneDNN engine's (tests/operators/test_conv.c, test_dnnl_conv.c). */
#ifndef DM_TESTS_CONV_CASE_H
#define DM_TESTS_CONV_CASE_H

#include <stdint.h>

#include "op_test_util.h"

typedef struct conv_case {
  const char *name;
  int64_t N, C, H, W, M, kh, kw;
  int64_t sh, sw, dh, dw;
  int64_t pads[4]; /* t, l, b, r */
  int64_t group;
  int bias;
} conv_case;

/* The arguments of case c, in a form that rotates with `form` so every spelling is used. */
static inline void conv_case_args(opt_op *op, const conv_case *c, int nhwc, int form) {
  int64_t k[2] = {c->kh, c->kw}, s[2] = {c->sh, c->sw}, d[2] = {c->dh, c->dw};
  if (form % 3 == 0 && c->kh == c->kw)
    opt_arg_int(op, "kernel", c->kh);
  else if (form % 3 == 1)
    opt_arg_int(op, "kernel_h", c->kh), opt_arg_int(op, "kernel_w", c->kw);
  else
    opt_arg_ints(op, "kernels", 2, k);
  if (form % 2 == 0 && c->sh == c->sw)
    opt_arg_int(op, "stride", c->sh);
  else if (form % 2 == 0)
    opt_arg_int(op, "stride_h", c->sh), opt_arg_int(op, "stride_w", c->sw);
  else
    opt_arg_ints(op, "strides", 2, s);
  if (c->dh != 1 || c->dw != 1) {
    if (c->dh == c->dw && form % 2)
      opt_arg_int(op, "dilation", c->dh);
    else
      opt_arg_ints(op, "dilations", 2, d);
  }
  const int64_t *p = c->pads;
  int sym = p[0] == p[1] && p[1] == p[2] && p[2] == p[3];
  if (form % 3 == 0 && sym)
    opt_arg_int(op, "pad", p[0]);
  else if (form % 3 == 1 || (form % 3 == 0 && !sym))
    opt_arg_int(op, "pad_t", p[0]), opt_arg_int(op, "pad_l", p[1]), opt_arg_int(op, "pad_b", p[2]),
        opt_arg_int(op, "pad_r", p[3]);
  else
    opt_arg_ints(op, "pads", 4, p);
  if (c->group != 1)
    opt_arg_int(op, "group", c->group);
  if (nhwc)
    opt_arg_string(op, "order", "NHWC");
}

#endif
