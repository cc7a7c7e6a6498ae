/* module.c: the extension module demitasse._C: DemitasseError, the library-wide calls
 * (version, which op types exist, the gradient pass on a serialized NetDef) and the
 * module's initialisation. The workspace and net objects are in workspace_obj.c, the
 * NumPy conversions in arrays.c. */
#define DM_PY_MODULE_C
#include "ext.h"

#include <demitasse_plugin.h>
#include <string.h>

PyObject *dm_py_error;

PyObject *dm_py_raise(dm_status s) { return dm_py_raise_msg(s, dm_last_error()); }

PyObject *dm_py_raise_msg(dm_status s, const char *msg) {
  PyObject *exc = PyObject_CallFunction(dm_py_error, "s", msg && *msg ? msg : dm_status_name(s));
  if (!exc)
    return NULL;
  /* The status name lets a caller tell a missing blob from a bad net without parsing
   * the message. */
  if (PyObject_SetAttrString(exc, "status", PyUnicode_FromString(dm_status_name(s))) == 0)
    PyErr_SetObject(dm_py_error, exc);
  Py_DECREF(exc);
  return NULL;
}

const char *dm_py_name(PyObject *obj, const char *what, PyObject **keep) {
  *keep = NULL;
  if (PyBytes_Check(obj)) {
    *keep = PyUnicode_FromEncodedObject(obj, "utf-8", "strict");
  } else if (PyUnicode_Check(obj)) {
    Py_INCREF(obj);
    *keep = obj;
  } else if (obj == Py_None || PyNumber_Check(obj)) {
    /* str(None) or str(3) would name a blob "None" or "3": surely a mistake */
    PyErr_Format(PyExc_TypeError, "%s must be a str (or a BlobReference), not %.80s", what,
                 Py_TYPE(obj)->tp_name);
    return NULL;
  } else {
    *keep = PyObject_Str(obj);
  }
  if (!*keep)
    return NULL;
  Py_ssize_t n = 0;
  const char *s = PyUnicode_AsUTF8AndSize(*keep, &n);
  if (!s) {
    Py_CLEAR(*keep);
    return NULL;
  }
  if (n == 0 || (size_t)n != strlen(s)) {
    PyErr_Format(PyExc_ValueError, "%s must be a non-empty name without NUL characters, not %R",
                 what, *keep);
    Py_CLEAR(*keep);
    return NULL;
  }
  return s;
}

static PyObject *py_version(PyObject *self, PyObject *unused) {
  return PyUnicode_FromString(dm_version_string());
}

/* has_op(type): whether an op type is registered (built in or from a loaded plugin). */
static PyObject *py_has_op(PyObject *self, PyObject *arg) {
  PyObject *keep = NULL;
  const char *type = dm_py_name(arg, "an op type", &keep);
  if (!type)
    return NULL;
  dm_status s = dm_init();
  int found = s == DM_OK && dm_schema_lookup(type) != NULL;
  Py_DECREF(keep);
  if (s != DM_OK)
    return dm_py_raise(s);
  return PyBool_FromLong(found);
}

/* add_gradient(netdef_bytes, losses) -> netdef_bytes with the backward ops appended. */
static PyObject *py_add_gradient(PyObject *self, PyObject *args) {
  Py_buffer net;
  PyObject *losses_obj;
  if (!PyArg_ParseTuple(args, "y*O:add_gradient", &net, &losses_obj))
    return NULL;
  PyObject *result = NULL, *seq = NULL, **keeps = NULL;
  const char **names = NULL;
  Py_ssize_t n = 0;
  seq = PySequence_Fast(losses_obj, "add_gradient: losses must be a list of blob names");
  if (!seq)
    goto cleanup;
  n = PySequence_Fast_GET_SIZE(seq);
  keeps = PyMem_Calloc((size_t)n + 1, sizeof *keeps);
  names = PyMem_Calloc((size_t)n + 1, sizeof *names);
  if (!keeps || !names) {
    PyErr_NoMemory();
    goto cleanup;
  }
  for (Py_ssize_t i = 0; i < n; i++)
    if (!(names[i] = dm_py_name(PySequence_Fast_GET_ITEM(seq, i), "a loss blob", &keeps[i])))
      goto cleanup;
  void *out = NULL;
  size_t out_size = 0;
  dm_status s;
  Py_BEGIN_ALLOW_THREADS
  s = dm_netdef_add_gradient(net.buf, (size_t)net.len, names, (size_t)n, &out, &out_size);
  Py_END_ALLOW_THREADS
  if (s != DM_OK) {
    dm_py_raise(s);
    goto cleanup;
  }
  result = PyBytes_FromStringAndSize(out, (Py_ssize_t)out_size);
  dm_free(out);
cleanup:
  for (Py_ssize_t i = 0; keeps && i < n; i++)
    Py_XDECREF(keeps[i]);
  PyMem_Free(keeps);
  PyMem_Free(names);
  Py_XDECREF(seq);
  PyBuffer_Release(&net);
  return result;
}

static PyMethodDef module_methods[] = {
  {"version", py_version, METH_NOARGS, "The library's version, e.g. '0.1.0'."},
  {"has_op", py_has_op, METH_O, "has_op(type): whether the op type is registered."},
  {"add_gradient", py_add_gradient, METH_VARARGS,
   "add_gradient(netdef_bytes, losses): the NetDef with its gradient ops appended."},
  {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
  PyModuleDef_HEAD_INIT, "demitasse._C",
  "Demitasse's C API for Python: workspaces, nets, NumPy in and out.", -1, module_methods,
  NULL, NULL, NULL, NULL,
};

static int add_type(PyObject *m, const char *name, PyTypeObject *t) {
  if (PyType_Ready(t) < 0)
    return -1;
  Py_INCREF(t);
  if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
    Py_DECREF(t);
    return -1;
  }
  return 0;
}

PyMODINIT_FUNC PyInit__C(void);
PyMODINIT_FUNC PyInit__C(void) {
  import_array();
  PyObject *m = PyModule_Create(&module_def);
  if (!m)
    return NULL;
  dm_py_error = PyErr_NewExceptionWithDoc(
      "demitasse.DemitasseError",
      "A Demitasse call failed; the message is the library's (net, op, blob), `status` "
      "the DM_ERR_* name.",
      PyExc_RuntimeError, NULL);
  if (!dm_py_error || PyModule_AddObject(m, "DemitasseError", dm_py_error) < 0 ||
      add_type(m, "Workspace", &dm_py_workspace_type) < 0 ||
      add_type(m, "Net", &dm_py_net_type) < 0 || PyType_Ready(&dm_py_tensor_ref_type) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  Py_INCREF(dm_py_error); /* the module's reference and ours */
  return m;
}
