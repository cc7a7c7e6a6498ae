/* infer_api.c: inference nets. dm_pipeline_opts_from_infer (net/infer.h) translates the
 * public dm_infer_options into the one pipeline's options, with the training passes off;
 * `demitasse run`, `demitasse rewrite` and the public dm_workspace_create_infer_net
 * (demitasse.h) all call it, then dm_infer_pipeline, so all make the same net. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "demitasse.h"

#include "api.h"
#include "core/device.h"
#include "core/workspace.h"
#include "net/infer.h"
#include "net/netdef_build.h"
#include "net/passes/pipeline.h"
#include "net/sized_options.h"

dm_status dm_infer_pipeline(Caffe2__NetDef *net, const dm_pipeline_opts *p,
                            Caffe2__NetDef **init_add, dm_gpu_state *gpu) {
  *init_add = NULL;
  dm_pipeline_result r;
  dm_status s = dm_pipeline_run(net, p, init_add, &r);
  if (s == DM_OK && gpu) { /* handed over */
    *gpu = r.gpu;
    r.gpu = (dm_gpu_state){0};
  }
  dm_pipeline_result_free(&r);
  /* The mixed-precision pass always makes an addition; an empty one is not handed back. */
  if (*init_add && ((*init_add)->n_op == 0 || s != DM_OK)) {
    protobuf_c_message_free_unpacked(&(*init_add)->base, NULL);
    *init_add = NULL;
  }
  if (*init_add) { /* it holds the casts, not an optimizer's state: say so */
    char *name = strdup(DM_INFER_INIT_NAME);
    if (!name) {
      protobuf_c_message_free_unpacked(&(*init_add)->base, NULL);
      *init_add = NULL;
      return DM_NOMEM("a net name");
    }
    free((*init_add)->name);
    (*init_add)->name = name;
  }
  return s;
}

dm_status dm_infer_require_finite(dm_net *net, dm_precision precision,
                                  const char *const *outputs, size_t n, const char *option) {
  if (precision != DM_PRECISION_FP16 && precision != DM_PRECISION_BF16)
    return DM_OK;
  if (n == 0) {
    const Caffe2__NetDef *d = net->def;
    outputs = (const char *const *)d->external_output;
    n = d->n_external_output;
    if (n == 0 && d->n_op) {
      outputs = (const char *const *)d->op[d->n_op - 1]->output;
      n = d->op[d->n_op - 1]->n_output;
    }
  }
  char hint[256];
  if (precision == DM_PRECISION_FP16)
    snprintf(hint, sizeof hint,
             "the model's values overflow FP16 (largest finite 65504); run it in BF16, which "
             "has FP32's range (%s bf16), or in FP32", option);
  else
    snprintf(hint, sizeof hint,
             "BF16 has FP32's range, so the model's values exceed FP32's or lost too much "
             "precision in BF16; run it in FP32 (%s fp32) to tell", option);
  return dm_net_require_finite(net, outputs, n, hint);
}

/* The public options ----------------------------------------------------------- */

static const char *const default_data[] = {"data"};

/* The first layout's size (nothing smaller is valid), as for dm_train_options. */
static const dm_sized_layout layout = {
    "dm_infer_options", offsetof(dm_infer_options, n_cpu_ops) + sizeof(size_t),
    sizeof(dm_infer_options)};

static void defaults(dm_infer_options *o) {
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->precision = DM_PRECISION_FP32;
  o->data_blobs = default_data;
  o->n_data_blobs = 1;
}

dm_status dm_infer_options_init_sized(dm_infer_options *o, size_t size) {
  dm_infer_options d;
  defaults(&d);
  return dm_sized_init(&layout, o, size, &d);
}

/* The caller's options over the defaults; a newer (larger) struct only with the fields
 * this library does not know left zero. */
static dm_status take_options(const dm_infer_options *in, dm_infer_options *o) {
  defaults(o);
  return dm_sized_take(&layout, in, o);
}

static dm_status check_names(const char *field, const char *const *v, size_t n) {
  return dm_sized_check_names(&layout, field, v, n);
}

static dm_status check_precision(dm_precision v) {
  if (v != DM_PRECISION_FP32 && v != DM_PRECISION_FP16 && v != DM_PRECISION_BF16)
    return dm_error(DM_ERR_INVALID, "dm_infer_options.precision: unknown value %d", (int)v);
  return DM_OK;
}

static dm_status check_layout(dm_train_layout v) {
  if (v != DM_TRAIN_LAYOUT_AUTO && v != DM_TRAIN_LAYOUT_NCHW && v != DM_TRAIN_LAYOUT_NHWC)
    return dm_error(DM_ERR_INVALID, "dm_infer_options.layout: unknown value %d", (int)v);
  return DM_OK;
}

/* The painting in inference mode: no gradients to scale; the fetched blobs read back
 * FP32. */
static void precision_opts(const dm_infer_options *o, dm_pipeline_opts *p) {
  p->mixed_precision = o->precision != DM_PRECISION_FP32;
  p->mp.target = o->precision == DM_PRECISION_BF16 ? DM_BFLOAT16 : DM_FLOAT16;
  p->mp.scaling = DM_LOSS_SCALE_NONE;
  p->mp.inference = 1;
  p->mp.fp32_outputs = o->outputs;
  p->mp.n_fp32_outputs = o->outputs ? o->n_outputs : 0;
}

/* The fusion pass: the fetched blobs never fused away, the fed ones not weights. */
static void fusion_opts(const dm_infer_options *o, dm_pipeline_opts *p) {
  p->fuse = o->fuse != 0;
  p->fuse_opts.keep = o->outputs;
  p->fuse_opts.n_keep = o->outputs ? o->n_outputs : 0;
  p->fuse_opts.fed = o->data_blobs;
  p->fuse_opts.n_fed = o->data_blobs ? o->n_data_blobs : 0;
  p->fuse_opts.post_ops = p->fuse && !p->device; /* the fused ops have CPU kernels only */
}

dm_status dm_pipeline_opts_from_infer(const dm_infer_options *o, dm_pipeline_opts *p) {
  dm_pipeline_opts_init(p);
  DM_TRY(check_names("data_blobs", o->data_blobs, o->n_data_blobs));
  DM_TRY(check_names("outputs", o->outputs, o->n_outputs));
  DM_TRY(check_names("cpu_ops", o->cpu_ops, o->n_cpu_ops));
  DM_TRY(check_precision(o->precision));
  DM_TRY(check_layout(o->layout));
  p->gradient = DM_SWITCH_OFF; /* no gradient, no optimizer: nothing trains */
  p->optim.exclude = o->data_blobs;   /* the pipeline's list of fed blobs (host-homed) */
  p->optim.n_exclude = o->data_blobs ? o->n_data_blobs : 0;
  DM_TRY(dm_api_parse_device("dm_infer_options.device", o->device, &p->device,
                             &p->dev.device_id));
  p->dev.force_cpu = o->cpu_ops;
  p->dev.n_force_cpu = o->cpu_ops ? o->n_cpu_ops : 0;
  precision_opts(o, p);
  fusion_opts(o, p);
  /* AUTO is as written: the pipeline's AUTO tries NHWC for training nets only */
  p->layout = o->layout == DM_TRAIN_LAYOUT_NHWC ? DM_TRAIN_LAYOUT_NHWC : DM_TRAIN_LAYOUT_NCHW;
  p->layout_opts.keep = o->outputs;
  p->layout_opts.n_keep = o->outputs ? o->n_outputs : 0;
  return DM_OK;
}

void dm_infer_set_weights(dm_pipeline_opts *p, const char *const *params, size_t n) {
  p->mp.params = params;
  p->mp.n_params = params ? n : 0;
  p->fuse_opts.params = params;
  p->fuse_opts.n_params = params ? n : 0;
}

static dm_status create_infer_net_entered(dm_workspace *ws, const char *net_path,
                                        const dm_infer_options *opts, dm_net **out) {
  if (!ws || !net_path || !out)
    return dm_error(DM_ERR_INVALID, "dm_workspace_create_infer_net: NULL %s",
                    !ws ? "ws" : !net_path ? "net_path" : "out");
  *out = NULL;
  dm_infer_options o;
  dm_pipeline_opts p;
  DM_TRY(take_options(opts, &o));
  DM_TRY(dm_pipeline_opts_from_infer(&o, &p));
  if (p.device) { /* before anything else: no GPU, no net */
    dm_status s = dm_device_check(DM_CUDA, p.dev.device_id);
    if (s != DM_OK)
      return dm_error_prefix(s, "dm_infer_options.device '%s'", o.device);
  }
  /* The weights: what the workspace holds now (the caller's init net ran), less the
   * blobs the caller feeds. */
  size_t n_ws = dm_workspace_blob_count(ws), n_params = 0;
  const char **params = malloc((n_ws + 1) * sizeof *params);
  if (!params)
    return DM_NOMEM("the weights' names");
  for (size_t i = 0; i < n_ws; i++) {
    const char *name = dm_workspace_blob_name(ws, i);
    if (!dm_str_in_list(name, o.data_blobs, o.data_blobs ? o.n_data_blobs : 0))
      params[n_params++] = name;
  }
  dm_infer_set_weights(&p, params, n_params);
  dm_workspace_mark mark = dm_workspace_get_mark(ws);
  Caffe2__NetDef *net = NULL, *init_add = NULL;
  dm_gpu_state gpu = {0};
  dm_status s = dm_netdef_read(net_path, &net);
  if (s == DM_OK)
    s = dm_infer_pipeline(net, &p, &init_add, &gpu);
  /* The weights the placed net reads on the GPU go there (the addition, placed by the
   * pipeline, puts its casts' copies there itself). */
  if (s == DM_OK && p.device)
    s = dm_api_state_to_gpu(ws, gpu.names, gpu.n, p.dev.device_id);
  if (s == DM_OK && init_add) { /* the weights' reduced copies, once */
    dm_net *init = NULL;
    s = dm_workspace_create_net(ws, init_add, "infer_init", &init); /* takes init_add */
    init_add = NULL;
    if (s == DM_OK)
      s = dm_net_run(init);
  }
  if (s == DM_OK) {
    s = dm_workspace_create_net(ws, net, net_path, out); /* takes net */
    net = NULL;
  }
  if (s == DM_OK)
    s = dm_infer_require_finite(*out, o.precision, o.outputs, o.outputs ? o.n_outputs : 0,
                                "dm_infer_options.precision");
  if (init_add)
    protobuf_c_message_free_unpacked(&init_add->base, NULL);
  if (net)
    protobuf_c_message_free_unpacked(&net->base, NULL);
  free(params);
  dm_gpu_state_free(&gpu);
  if (s != DM_OK) {
    dm_workspace_rollback(ws, mark); /* frees the net, if it was made */
    *out = NULL;
  }
  return s;
}

dm_status dm_workspace_create_infer_net(dm_workspace *ws, const char *net_path,
                                        const dm_infer_options *opts, dm_net **out) {
  if (!ws)
    return dm_error(DM_ERR_INVALID, "dm_workspace_create_infer_net: NULL ws");
  DM_TRY(dm_workspace_enter(ws, "dm_workspace_create_infer_net"));
  return dm_workspace_leave_with(ws, create_infer_net_entered(ws, net_path, opts, out));
}
