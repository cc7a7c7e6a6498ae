/* train_flags.c: the training flags as dm_train_options (train_flags.h). */
#include "train_flags.h"

#include <stdio.h>

void dm_cli_train_options(const dm_optimizer_opts *opt, const dm_mp_cli *mp,
                          const dm_device_cli *dev, const dm_dist_cli *dist,
                          dm_cli_device_name *dev_name, dm_train_options *t) {
  const dm_mp_opts *m = &mp->opts;
  t->data_blobs = opt->exclude;
  t->n_data_blobs = opt->n_exclude;
  t->optimizer = opt->kind;
  t->lr = opt->lr;
  t->momentum = opt->momentum;
  t->nesterov = opt->nesterov;
  t->beta1 = opt->beta1;
  t->beta2 = opt->beta2;
  t->epsilon = opt->epsilon;
  t->weight_decay = opt->weight_decay;
  t->decay_all = opt->decay_all;
  t->lr_policy = opt->policy;
  t->stepsize = opt->stepsize;
  t->gamma = opt->gamma;
  t->power = opt->power;
  t->max_iter = opt->max_iter;
  t->warmup_iter = opt->warmup_iter;
  t->warmup_start = opt->warmup_start;
  t->multi_tensor = opt->multi_tensor;
  t->clip_norm = opt->clip_norm;
  t->precision = !mp->enabled                 ? DM_PRECISION_FP32
                 : m->target == DM_BFLOAT16 ? DM_PRECISION_BF16
                                             : DM_PRECISION_FP16;
  t->loss_scale = m->scaling;
  t->init_scale = m->init_scale;
  t->growth_interval = m->growth_interval;
  t->fp32_ops = m->force_fp32;
  t->n_fp32_ops = m->n_force_fp32;
  t->fp16_ops = m->force_fp16;
  t->n_fp16_ops = m->n_force_fp16;
  snprintf(dev_name->s, sizeof dev_name->s, "cuda:%d", dev->opts.device_id);
  t->device = dev->cuda ? dev_name->s : NULL;
  t->cpu_ops = dev->opts.force_cpu;
  t->n_cpu_ops = dev->opts.n_force_cpu;
  t->data_parallel = dist->on;
  t->dp_bucket_bytes = dist->bucket_bytes;
  t->dp_fp32 = dist->fp32;
}
