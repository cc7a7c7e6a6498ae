/* rewrite_api.c: dm_rewrite_train_net from the command line, for the byte-identity test
 * (tests/embed/pipeline_identity_test.sh): the C API's training net and init addition
 * for the options given, to compare with `demitasse rewrite` and `demitasse train
 * --save-net`. Sees only <demitasse.h>.
 * usage: rewrite_api NET OUT_NET OUT_INIT [--sgd|--adam] [--lr X] [--weight-decay W]
 *          [--policy P --stepsize N --gamma G] [--fp16|--bf16] [--loss-scale MODE]
 *          [--init-scale S] [--device DEV] [--no-free] [--fuse-train]
 *          [--multi-tensor|--no-multi-tensor] [--layout nchw|nhwc]
 */
#include <demitasse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: rewrite_api NET OUT_NET OUT_INIT [options]\n");
    return 2;
  }
  dm_train_options o;
  dm_train_options_init(&o);
  for (int i = 4; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int takes = 1;
    if (strcmp(a, "--sgd") == 0)
      o.optimizer = DM_OPTIMIZER_SGD, takes = 0;
    else if (strcmp(a, "--adam") == 0)
      o.optimizer = DM_OPTIMIZER_ADAM, takes = 0;
    else if (strcmp(a, "--fp16") == 0)
      o.precision = DM_PRECISION_FP16, takes = 0;
    else if (strcmp(a, "--bf16") == 0)
      o.precision = DM_PRECISION_BF16, takes = 0;
    else if (strcmp(a, "--no-free") == 0)
      o.memory = 0, takes = 0;
    else if (strcmp(a, "--fuse-train") == 0)
      o.fuse_train = 1, takes = 0;
    else if (strcmp(a, "--multi-tensor") == 0)
      o.multi_tensor = DM_SWITCH_ON, takes = 0;
    else if (strcmp(a, "--no-multi-tensor") == 0)
      o.multi_tensor = DM_SWITCH_OFF, takes = 0;
    else if (!v)
      takes = -1;
    else if (strcmp(a, "--lr") == 0)
      o.lr = atof(v);
    else if (strcmp(a, "--weight-decay") == 0)
      o.weight_decay = atof(v);
    else if (strcmp(a, "--policy") == 0)
      o.lr_policy = v;
    else if (strcmp(a, "--stepsize") == 0)
      o.stepsize = atoll(v);
    else if (strcmp(a, "--gamma") == 0)
      o.gamma = atof(v);
    else if (strcmp(a, "--init-scale") == 0)
      o.init_scale = atof(v);
    else if (strcmp(a, "--device") == 0)
      o.device = v;
    else if (strcmp(a, "--layout") == 0)
      o.layout = strcmp(v, "nhwc") == 0 ? DM_TRAIN_LAYOUT_NHWC : DM_TRAIN_LAYOUT_NCHW;
    else if (strcmp(a, "--loss-scale") == 0)
      o.loss_scale = strcmp(v, "static") == 0    ? DM_LOSS_SCALE_STATIC
                     : strcmp(v, "dynamic") == 0 ? DM_LOSS_SCALE_DYNAMIC
                                                 : DM_LOSS_SCALE_NONE;
    else
      takes = -1;
    if (takes < 0) {
      fprintf(stderr, "rewrite_api: bad option '%s'\n", a);
      return 2;
    }
    i += takes;
  }
  if (dm_rewrite_train_net(argv[1], &o, argv[2], argv[3]) != DM_OK) {
    fprintf(stderr, "rewrite_api: %s\n", dm_last_error());
    return 1;
  }
  return 0;
}
