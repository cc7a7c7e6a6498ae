/* arrays.c: NumPy arrays in and out of blobs. A feed copies (the C API's feed owns its
 * data); a fetch shares the blob's storage (dm_workspace_fetch_shared) where NumPy has
 * the dtype, as a read-only array whose base is a TensorRef owning the shared tensor, so
 * the array stays valid after the blob is written again or the workspace is gone. STRING
 * blobs come back as object arrays of bytes, BFLOAT16 (which NumPy lacks) as float32. */
#include "ext.h"

#include <string.h>

/* The base object of a fetched array: owns one shared tensor. */
typedef struct dm_py_tensor_ref {
  PyObject_HEAD
  dm_tensor *t;
} dm_py_tensor_ref;

static void ref_dealloc(dm_py_tensor_ref *r) {
  dm_tensor_destroy(r->t);
  PyObject_Free(r);
}

PyTypeObject dm_py_tensor_ref_type = {
  PyVarObject_HEAD_INIT(NULL, 0)
  .tp_name = "demitasse._C.TensorRef",
  .tp_basicsize = sizeof(dm_py_tensor_ref),
  .tp_dealloc = (destructor)ref_dealloc,
  .tp_flags = Py_TPFLAGS_DEFAULT,
  .tp_doc = "Keeps a fetched blob's data alive for the NumPy array that views it.",
};

/* NumPy's type for a dtype (-1: none, BFLOAT16 and STRING are converted). */
static int npy_type_of(dm_dtype t) {
  switch (t) {
  case DM_FLOAT: return NPY_FLOAT32;
  case DM_DOUBLE: return NPY_FLOAT64;
  case DM_FLOAT16: return NPY_FLOAT16;
  case DM_INT32: return NPY_INT32;
  case DM_INT64: return NPY_INT64;
  case DM_INT16: return NPY_INT16;
  case DM_INT8: return NPY_INT8;
  case DM_UINT8: case DM_BYTE: return NPY_UINT8;
  case DM_UINT16: return NPY_UINT16;
  case DM_BOOL: return NPY_BOOL;
  default: return -1;
  }
}

/* NumPy 2 reads a descriptor's item size through an accessor; 1.x (Debian 12's) has
 * none (NumPy's own migration advice). */
#if NPY_ABI_VERSION < 0x02000000
#define PyDataType_ELSIZE(d) ((d)->elsize)
#endif

/* The dtype a NumPy array is fed as (by kind and size, so that int64 is INT64 whether
 * NumPy calls it long or longlong); DM_UNDEFINED for one the library has not. */
static dm_dtype dtype_of_descr(PyArray_Descr *d) {
  const npy_intp size = PyDataType_ELSIZE(d);
  switch (d->kind) {
  case 'b': return DM_BOOL;
  case 'f': return size == 2 ? DM_FLOAT16 : size == 4 ? DM_FLOAT
                 : size == 8 ? DM_DOUBLE : DM_UNDEFINED;
  case 'i': return size == 1 ? DM_INT8 : size == 2 ? DM_INT16 : size == 4 ? DM_INT32
                 : size == 8 ? DM_INT64 : DM_UNDEFINED;
  case 'u': return size == 1 ? DM_UINT8 : size == 2 ? DM_UINT16 : DM_UNDEFINED;
  case 'O': case 'S': case 'U': return DM_STRING;
  default: return DM_UNDEFINED;
  }
}

static int dims_of(PyArrayObject *a, int64_t *dims) {
  int nd = PyArray_NDIM(a);
  if (nd > DM_MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "a blob has at most %d dimensions; this array has %d",
                 DM_MAX_DIMS, nd);
    return -1;
  }
  for (int i = 0; i < nd; i++)
    dims[i] = (int64_t)PyArray_DIM(a, i);
  return nd;
}

static dm_status feed_locked(dm_py_workspace *w, const char *name, dm_dtype t, int nd,
                             const int64_t *dims, const void *data) {
  dm_status s;
  dm_py_lock(w);
  Py_BEGIN_ALLOW_THREADS
  s = dm_workspace_feed(w->ws, name, t, nd, dims, data);
  Py_END_ALLOW_THREADS
  dm_py_unlock(w);
  return s;
}

/* Strings: each element bytes (as is) or str (UTF-8), without NUL characters. */
static PyObject *feed_strings(dm_py_workspace *w, const char *name, PyObject *value) {
  PyArrayObject *a = (PyArrayObject *)PyArray_FROM_OTF(value, NPY_OBJECT, NPY_ARRAY_IN_ARRAY);
  if (!a)
    return NULL;
  PyObject *result = NULL, *encoded = NULL;
  const char **ptrs = NULL;
  int64_t dims[DM_MAX_DIMS];
  int nd = dims_of(a, dims);
  if (nd < 0)
    goto cleanup;
  npy_intp n = PyArray_SIZE(a);
  encoded = PyList_New(n);
  ptrs = PyMem_Calloc((size_t)n + 1, sizeof *ptrs);
  if (!encoded || !ptrs) {
    PyErr_NoMemory();
    goto cleanup;
  }
  PyObject **items = (PyObject **)PyArray_DATA(a);
  for (npy_intp i = 0; i < n; i++) {
    PyObject *it = items[i], *b = NULL;
    if (PyBytes_Check(it)) {
      Py_INCREF(it);
      b = it;
    } else if (PyUnicode_Check(it)) {
      b = PyUnicode_AsUTF8String(it);
    } else {
      PyErr_Format(PyExc_TypeError,
                   "blob '%s': a string tensor's elements must be bytes or str; element %zd "
                   "is %.80s", name, (Py_ssize_t)i, it ? Py_TYPE(it)->tp_name : "NULL");
      goto cleanup;
    }
    if (!b)
      goto cleanup;
    PyList_SET_ITEM(encoded, i, b);
    if ((size_t)PyBytes_GET_SIZE(b) != strlen(PyBytes_AS_STRING(b))) {
      PyErr_Format(PyExc_ValueError, "blob '%s': string element %zd holds a NUL character, "
                   "which a STRING tensor cannot keep", name, (Py_ssize_t)i);
      goto cleanup;
    }
    ptrs[i] = PyBytes_AS_STRING(b);
  }
  dm_status s = feed_locked(w, name, DM_STRING, nd, dims, ptrs);
  if (s != DM_OK)
    dm_py_raise(s);
  else
    result = Py_NewRef(Py_None);
cleanup:
  PyMem_Free(ptrs);
  Py_XDECREF(encoded);
  Py_DECREF(a);
  return result;
}

PyObject *dm_py_feed(dm_py_workspace *w, const char *name, PyObject *value) {
  if (PyBytes_Check(value) || PyUnicode_Check(value))
    return feed_strings(w, name, value);
  PyArrayObject *any = (PyArrayObject *)PyArray_FROM_O(value);
  if (!any)
    return NULL;
  dm_dtype t = dtype_of_descr(PyArray_DESCR(any));
  if (t == DM_STRING) {
    Py_DECREF(any);
    return feed_strings(w, name, value);
  }
  if (t == DM_UNDEFINED) {
    PyErr_Format(PyExc_TypeError,
                 "blob '%s': NumPy dtype %R has no Demitasse type (float16/32/64, int8/16/32/"
                 "64, uint8/16, bool, or strings)", name, (PyObject *)PyArray_DESCR(any));
    Py_DECREF(any);
    return NULL;
  }
  /* Native byte order, aligned, C-contiguous: a copy only where the array is not. */
  PyArrayObject *a = (PyArrayObject *)PyArray_FromAny(
      (PyObject *)any, PyArray_DescrFromType(npy_type_of(t)), 0, 0, NPY_ARRAY_IN_ARRAY, NULL);
  Py_DECREF(any);
  if (!a)
    return NULL;
  int64_t dims[DM_MAX_DIMS];
  int nd = dims_of(a, dims);
  PyObject *result = NULL;
  if (nd >= 0) {
    dm_status s = feed_locked(w, name, t, nd, dims, PyArray_DATA(a));
    result = s == DM_OK ? Py_NewRef(Py_None) : dm_py_raise(s);
  }
  Py_DECREF(a);
  return result;
}

/* The copies: an object array of bytes, or BFLOAT16 widened to float32 (exact). */
static PyObject *fetch_copy(dm_tensor *t, int nd, npy_intp *dims) {
  dm_dtype dt = dm_tensor_dtype(t);
  PyArrayObject *a = (PyArrayObject *)PyArray_SimpleNew(nd, dims,
                                                        dt == DM_STRING ? NPY_OBJECT : NPY_FLOAT32);
  if (!a)
    return NULL;
  int64_t n = dm_tensor_numel(t);
  if (dt == DM_STRING) {
    const char *const *src = dm_tensor_data(t);
    PyObject **dst = (PyObject **)PyArray_DATA(a);
    for (int64_t i = 0; i < n; i++) {
      PyObject *b = PyBytes_FromString(src[i] ? src[i] : "");
      if (!b) {
        Py_DECREF(a);
        return NULL;
      }
      Py_XSETREF(dst[i], b);
    }
  } else {
    const uint16_t *src = dm_tensor_data(t);
    float *dst = PyArray_DATA(a);
    for (int64_t i = 0; i < n; i++) {
      uint32_t bits = (uint32_t)src[i] << 16;
      memcpy(&dst[i], &bits, sizeof bits);
    }
  }
  return (PyObject *)a;
}

PyObject *dm_py_fetch(dm_py_workspace *w, const char *name) {
  dm_tensor *t = NULL;
  dm_py_lock(w);
  dm_status s = dm_workspace_fetch_shared(w->ws, name, &t);
  dm_py_unlock(w);
  if (s != DM_OK)
    return dm_py_raise(s);
  dm_dtype dt = dm_tensor_dtype(t);
  if (dt == DM_UNDEFINED) {
    dm_tensor_destroy(t);
    char msg[512];
    snprintf(msg, sizeof msg, "blob '%s' holds no tensor yet (created by a net, not yet "
             "written by an op or a feed)", name);
    return dm_py_raise_msg(DM_ERR_INVALID, msg);
  }
  int nd = dm_tensor_ndim(t);
  npy_intp dims[DM_MAX_DIMS];
  for (int i = 0; i < nd; i++)
    dims[i] = (npy_intp)dm_tensor_dims(t)[i];
  int type = npy_type_of(dt);
  PyObject *arr = NULL;
  if (type < 0 || dm_tensor_numel(t) == 0) {
    arr = type < 0 ? fetch_copy(t, nd, dims) : PyArray_ZEROS(nd, dims, type, 0);
    dm_tensor_destroy(t);
    return arr;
  }
  dm_py_tensor_ref *ref = PyObject_New(dm_py_tensor_ref, &dm_py_tensor_ref_type);
  if (!ref) {
    dm_tensor_destroy(t);
    return NULL;
  }
  ref->t = t;
  /* flags 0: read-only. The library may share the storage with other blobs (a Reshape
   * view), so writing through the array would change them behind the workspace. */
  arr = PyArray_NewFromDescr(&PyArray_Type, PyArray_DescrFromType(type), nd, dims, NULL,
                             (void *)dm_tensor_data(t), 0, NULL);
  if (!arr) {
    Py_DECREF(ref);
    return NULL;
  }
  if (PyArray_SetBaseObject((PyArrayObject *)arr, (PyObject *)ref) < 0) { /* ref stolen */
    Py_DECREF(arr);
    return NULL;
  }
  return arr;
}
