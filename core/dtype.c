/* dtype.c: names and sizes of Caffe2's data types (and our BFLOAT16). */
#include <string.h>
#include <strings.h>

#include "tensor.h"

typedef struct dtype_info {
  dm_dtype t;
  const char *name;
  size_t size;
} dtype_info;

static const dtype_info dtypes[] = {
    {DM_UNDEFINED, "UNDEFINED", 0}, {DM_FLOAT, "FLOAT", 4},     {DM_INT32, "INT32", 4},
    {DM_BYTE, "BYTE", 1},           {DM_STRING, "STRING", 0},   {DM_BOOL, "BOOL", 1},
    {DM_UINT8, "UINT8", 1},         {DM_INT8, "INT8", 1},       {DM_UINT16, "UINT16", 2},
    {DM_INT16, "INT16", 2},         {DM_INT64, "INT64", 8},     {DM_FLOAT16, "FLOAT16", 2},
    {DM_DOUBLE, "DOUBLE", 8},       {DM_BFLOAT16, "BFLOAT16", 2},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

static const dtype_info *find(int t) {
  for (size_t i = 0; i < N_DTYPES; i++)
    if ((int)dtypes[i].t == t)
      return &dtypes[i];
  return NULL;
}

const char *dm_dtype_name(dm_dtype t) {
  const dtype_info *d = find(t);
  return d ? d->name : "?";
}

size_t dm_dtype_size(dm_dtype t) {
  const dtype_info *d = find(t);
  return d ? d->size : 0;
}

int dm_dtype_is_valid(int t) { return find(t) != NULL; }

dm_status dm_dtype_from_name(const char *name, dm_dtype *out) {
  static const struct {
    const char *alias;
    dm_dtype t;
  } aliases[] = {{"half", DM_FLOAT16}, {"fp16", DM_FLOAT16}, {"float32", DM_FLOAT},
                 {"fp32", DM_FLOAT},   {"float64", DM_DOUBLE}, {"bf16", DM_BFLOAT16},
                 {"int", DM_INT32},    {"long", DM_INT64}};
  for (size_t i = 0; i < N_DTYPES; i++)
    if (strcasecmp(name, dtypes[i].name) == 0) {
      *out = dtypes[i].t == DM_BYTE ? DM_UINT8 : dtypes[i].t;
      return DM_OK;
    }
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcasecmp(name, aliases[i].alias) == 0) {
      *out = aliases[i].t;
      return DM_OK;
    }
  return dm_error(DM_ERR_TYPE, "unknown data type '%s'", name);
}
