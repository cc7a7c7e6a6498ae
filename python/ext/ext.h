/* ext.h: what the files of the extension module demitasse._C share (internal to it).
 *
 * The extension sees only the public C API (demitasse.h, and demitasse_plugin.h for
 * dm_schema_lookup) and links libdemitasse.so, whose exports are exactly that API: what
 * Python can do, a C host can do too. Every argument a Python caller controls is checked
 * here and refused with a Python exception; the library's own failures come back as
 * DemitasseError carrying dm_last_error()'s message (net, op index/type/name, blob).
 */
#ifndef DM_PY_EXT_H
#define DM_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <demitasse.h>

/* The NumPy C API table is filled in module.c (import_array) and shared by the files. */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL demitasse_ARRAY_API
#ifndef DM_PY_MODULE_C
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

/* demitasse.DemitasseError (a RuntimeError); `status` is the DM_ERR_* name. */
extern PyObject *dm_py_error;
/* Raises DemitasseError for `s` with dm_last_error(), and returns NULL. */
PyObject *dm_py_raise(dm_status s);
/* The same with a message of the extension's own. */
PyObject *dm_py_raise_msg(dm_status s, const char *msg);

/* A Python object holding one dm_workspace. Calls on it are serialised by `lock`: a
 * Python thread that finds another thread inside waits (with the GIL released) rather
 * than getting DM_ERR_BUSY, which the C API gives a caller that cannot wait. */
typedef struct dm_py_workspace {
  PyObject_HEAD
  dm_workspace *ws;
  PyThread_type_lock lock;
} dm_py_workspace;

/* A net created in a workspace; holds a reference to the workspace object, so the
 * workspace (which owns the dm_net) goes only after its last net object. */
typedef struct dm_py_net {
  PyObject_HEAD
  dm_py_workspace *owner;
  dm_net *net;
} dm_py_net;

extern PyTypeObject dm_py_workspace_type;
extern PyTypeObject dm_py_net_type;
extern PyTypeObject dm_py_tensor_ref_type;

/* Takes the workspace's lock: at once if free, else with the GIL released. */
void dm_py_lock(dm_py_workspace *w);
void dm_py_unlock(dm_py_workspace *w);

/* A blob name or an op type from a Python str (or an object whose str() is one, such as
 * a BlobReference): UTF-8, non-empty, no NUL. Borrowed from *keep, which the caller
 * releases (Py_XDECREF) after use. NULL with a Python exception otherwise. */
const char *dm_py_name(PyObject *obj, const char *what, PyObject **keep);

/* arrays.c: NumPy <-> tensors. Feeds `value` (anything np.asarray takes) into blob `name`. */
PyObject *dm_py_feed(dm_py_workspace *w, const char *name, PyObject *value);
/* The blob as a NumPy array: no copy where NumPy has the dtype (a read-only array whose
 * base owns a shared tensor, which outlives the workspace); a copy for STRING (an object
 * array of bytes) and BFLOAT16 (float32). */
PyObject *dm_py_fetch(dm_py_workspace *w, const char *name);

#endif
