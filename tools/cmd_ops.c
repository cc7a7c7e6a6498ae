/* cmd_ops.c: `demitasse ops`, the registered operator types (built-ins and plugins). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "core/registry.h"

static void help(FILE *f) {
  fprintf(f, "usage: demitasse ops [--plugin lib.so]... [--verbose]\n\n"
             "Lists the registered operator types with their arity and precision class.\n\n"
             "  -p, --plugin LIB  load an operator plugin first (repeatable)\n"
             "  -v, --verbose     also print each op's documentation line\n"
             "  -h, --help        this text\n");
}

static const char *precision_name(dm_precision_class p) {
  switch (p) {
  case DM_PREC_FOLLOW: return "follow";
  case DM_PREC_FP16: return "fp16";
  case DM_PREC_FP32: return "fp32";
  case DM_PREC_NONE: return "none";
  }
  return "?";
}

static const char *arity(int lo, int hi, char *buf, size_t cap) {
  if (hi < 0)
    snprintf(buf, cap, "%d+", lo);
  else if (lo == hi)
    snprintf(buf, cap, "%d", lo);
  else
    snprintf(buf, cap, "%d-%d", lo, hi);
  return buf;
}

int dm_cmd_ops(int argc, char **argv) {
  static const struct option opts[] = {{"plugin", required_argument, NULL, 'p'},
                                       {"verbose", no_argument, NULL, 'v'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  dm_strlist plugins = {0};
  int verbose = 0, c, rc = DM_EXIT_OK;
  optind = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "p:vh", opts, NULL)) != -1) {
    switch (c) {
    case 'p':
      if (!dm_strlist_push(&plugins, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case 'v': verbose = 1; break;
    case 'h': help(stdout); goto done;
    default: rc = dm_cli_bad_option("ops", argv); goto done;
    }
  }
  if (rc != DM_EXIT_OK)
    goto done;
  if (optind < argc) {
    rc = dm_cli_usage_error("ops", "unexpected argument '%s'", argv[optind]);
    goto done;
  }
  if (dm_init() != DM_OK) {
    rc = dm_cli_fail();
    goto done;
  }
  for (size_t i = 0; i < plugins.n; i++)
    if (dm_plugin_load(plugins.items[i]) != DM_OK) {
      rc = dm_cli_fail();
      goto done;
    }
  size_t n = dm_schema_count();
  printf("%-28s %-7s %-7s %s\n", "type", "inputs", "outputs", "precision");
  for (size_t i = 0; i < n; i++) {
    const dm_op_schema *s = dm_schema_at(i);
    char a[16], b[16];
    printf("%-28s %-7s %-7s %s\n", s->type, arity(s->min_inputs, s->max_inputs, a, sizeof a),
           arity(s->min_outputs, s->max_outputs, b, sizeof b), precision_name(s->precision));
    if (verbose && s->doc && *s->doc) {
      const char *nl = strchr(s->doc, '\n');
      printf("    %.*s\n", nl ? (int)(nl - s->doc) : (int)strlen(s->doc), s->doc);
    }
  }
  printf("%zu op types\n", n);
done:
  dm_strlist_free(&plugins);
  return rc;
}
