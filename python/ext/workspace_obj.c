/* workspace_obj.c: demitasse._C.Workspace (one dm_workspace) and demitasse._C.Net (a net
 * created in one). Runs and net creations release the GIL; calls on one workspace from
 * several Python threads take turns on its lock. */
#include "ext.h"

void dm_py_lock(dm_py_workspace *w) {
  if (PyThread_acquire_lock(w->lock, NOWAIT_LOCK))
    return;
  Py_BEGIN_ALLOW_THREADS
  PyThread_acquire_lock(w->lock, WAIT_LOCK);
  Py_END_ALLOW_THREADS
}

void dm_py_unlock(dm_py_workspace *w) { PyThread_release_lock(w->lock); }

static PyObject *ws_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  if (!PyArg_ParseTuple(args, ":Workspace") || (kwds && PyDict_Size(kwds))) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "Workspace() takes no arguments");
    return NULL;
  }
  dm_py_workspace *w = (dm_py_workspace *)type->tp_alloc(type, 0);
  if (!w)
    return NULL;
  w->lock = PyThread_allocate_lock();
  if (!w->lock) {
    Py_DECREF(w);
    return PyErr_NoMemory();
  }
  dm_status s = dm_workspace_create(&w->ws);
  if (s != DM_OK) {
    Py_DECREF(w);
    return dm_py_raise(s);
  }
  return (PyObject *)w;
}

static void ws_dealloc(dm_py_workspace *w) {
  /* No net object is left (each holds a reference), and no call is inside: free. */
  dm_workspace_destroy(w->ws);
  if (w->lock)
    PyThread_free_lock(w->lock);
  Py_TYPE(w)->tp_free((PyObject *)w);
}

static PyObject *ws_feed(dm_py_workspace *w, PyObject *args) {
  PyObject *name_obj, *value, *keep = NULL;
  if (!PyArg_ParseTuple(args, "OO:feed", &name_obj, &value))
    return NULL;
  const char *name = dm_py_name(name_obj, "the blob name", &keep);
  if (!name)
    return NULL;
  PyObject *r = dm_py_feed(w, name, value);
  Py_DECREF(keep);
  return r;
}

static PyObject *ws_fetch(dm_py_workspace *w, PyObject *arg) {
  PyObject *keep = NULL;
  const char *name = dm_py_name(arg, "the blob name", &keep);
  if (!name)
    return NULL;
  PyObject *r = dm_py_fetch(w, name);
  Py_DECREF(keep);
  return r;
}

static PyObject *ws_has_blob(dm_py_workspace *w, PyObject *arg) {
  PyObject *keep = NULL;
  const char *name = dm_py_name(arg, "the blob name", &keep);
  if (!name)
    return NULL;
  dm_py_lock(w);
  int has = dm_workspace_has_blob(w->ws, name);
  dm_py_unlock(w);
  Py_DECREF(keep);
  return PyBool_FromLong(has);
}

static PyObject *ws_blobs(dm_py_workspace *w, PyObject *unused) {
  dm_py_lock(w);
  size_t n = dm_workspace_blob_count(w->ws);
  PyObject *list = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; list && i < n; i++) {
    PyObject *s = PyUnicode_FromString(dm_workspace_blob_name(w->ws, i));
    if (!s) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)i, s);
  }
  dm_py_unlock(w);
  return list;
}

/* Instantiates a serialized NetDef; the GIL is released while the library works. */
static dm_status create_net(dm_py_workspace *w, Py_buffer *b, dm_net **net) {
  dm_status s;
  dm_py_lock(w);
  Py_BEGIN_ALLOW_THREADS
  s = dm_workspace_create_net_bytes(w->ws, b->buf, (size_t)b->len, 0, net);
  Py_END_ALLOW_THREADS
  dm_py_unlock(w);
  return s;
}

static PyObject *ws_create_net(dm_py_workspace *w, PyObject *args) {
  Py_buffer b;
  if (!PyArg_ParseTuple(args, "y*:create_net", &b))
    return NULL;
  dm_py_net *n = PyObject_New(dm_py_net, &dm_py_net_type);
  if (!n) {
    PyBuffer_Release(&b);
    return NULL;
  }
  n->net = NULL;
  Py_INCREF(w);
  n->owner = w;
  dm_status s = create_net(w, &b, &n->net);
  PyBuffer_Release(&b);
  if (s != DM_OK) {
    Py_DECREF(n);
    return dm_py_raise(s);
  }
  return (PyObject *)n;
}

/* run_net_once(netdef_bytes): instantiated, run once and freed; the blobs stay. */
static PyObject *ws_run_net_once(dm_py_workspace *w, PyObject *args) {
  Py_buffer b;
  if (!PyArg_ParseTuple(args, "y*:run_net_once", &b))
    return NULL;
  dm_status s;
  dm_py_lock(w);
  Py_BEGIN_ALLOW_THREADS
  dm_net *net = NULL;
  s = dm_workspace_create_net_bytes(w->ws, b.buf, (size_t)b.len, 0, &net);
  if (s == DM_OK) {
    s = dm_net_run(net);
    dm_status d = dm_net_destroy(net);
    if (s == DM_OK)
      s = d;
  }
  Py_END_ALLOW_THREADS
  dm_py_unlock(w);
  PyBuffer_Release(&b);
  if (s != DM_OK)
    return dm_py_raise(s);
  Py_RETURN_NONE;
}

static PyObject *ws_set_engine(dm_py_workspace *w, PyObject *arg) {
  if (arg != Py_None && !PyUnicode_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "the engine must be a str or None, not %.80s",
                 Py_TYPE(arg)->tp_name);
    return NULL;
  }
  const char *engine = arg == Py_None ? NULL : PyUnicode_AsUTF8(arg);
  if (arg != Py_None && !engine)
    return NULL;
  dm_py_lock(w);
  dm_status s = dm_workspace_set_engine(w->ws, engine);
  dm_py_unlock(w);
  if (s != DM_OK)
    return dm_py_raise(s);
  Py_RETURN_NONE;
}

#define METHOD(name, fn, flags, doc) {name, (PyCFunction)(void (*)(void))fn, flags, doc}
static PyMethodDef ws_methods[] = {
  METHOD("feed", ws_feed, METH_VARARGS, "feed(name, value): copies a NumPy array into a blob."),
  METHOD("fetch", ws_fetch, METH_O, "fetch(name): the blob as a NumPy array (no copy)."),
  METHOD("has_blob", ws_has_blob, METH_O, "has_blob(name)"),
  METHOD("blobs", ws_blobs, METH_NOARGS, "The blob names, sorted."),
  METHOD("create_net", ws_create_net, METH_VARARGS,
         "create_net(netdef_bytes): a Net instantiated in this workspace."),
  METHOD("run_net_once", ws_run_net_once, METH_VARARGS,
         "run_net_once(netdef_bytes): instantiates, runs and frees a net."),
  METHOD("set_engine", ws_set_engine, METH_O,
         "set_engine(list or None): the engine of ops that name none (e.g. 'REFERENCE')."),
  {NULL, NULL, 0, NULL},
};

PyTypeObject dm_py_workspace_type = {
  PyVarObject_HEAD_INIT(NULL, 0)
  .tp_name = "demitasse._C.Workspace",
  .tp_basicsize = sizeof(dm_py_workspace),
  .tp_dealloc = (destructor)ws_dealloc,
  .tp_flags = Py_TPFLAGS_DEFAULT,
  .tp_doc = "One Demitasse workspace: blobs by name, and the nets created in it.",
  .tp_methods = ws_methods,
  .tp_new = ws_new,
};

/* Net ---------------------------------------------------------------------------- */

static void net_dealloc(dm_py_net *n) {
  if (n->net) {
    dm_py_lock(n->owner);
    dm_net_destroy(n->net); /* a net of a live workspace: cannot fail */
    dm_py_unlock(n->owner);
  }
  Py_XDECREF(n->owner);
  PyObject_Free(n);
}

static PyObject *net_run(dm_py_net *n, PyObject *args) {
  long iters = 1;
  if (!PyArg_ParseTuple(args, "|l:run", &iters))
    return NULL;
  if (iters < 0) {
    PyErr_Format(PyExc_ValueError, "num_iter must be >= 0, not %ld", iters);
    return NULL;
  }
  dm_status s = DM_OK;
  dm_py_lock(n->owner);
  Py_BEGIN_ALLOW_THREADS
  for (long i = 0; i < iters && s == DM_OK; i++)
    s = dm_net_run(n->net);
  Py_END_ALLOW_THREADS
  dm_py_unlock(n->owner);
  if (s != DM_OK)
    return dm_py_raise(s);
  Py_RETURN_NONE;
}

static PyObject *net_get_name(dm_py_net *n, void *unused) {
  return PyUnicode_FromString(dm_net_name(n->net));
}

static PyMethodDef net_methods[] = {
  METHOD("run", net_run, METH_VARARGS, "run(num_iter=1): runs every op, num_iter times."),
  {NULL, NULL, 0, NULL},
};

static PyGetSetDef net_getset[] = {
  {"name", (getter)net_get_name, NULL, "The NetDef's name.", NULL},
  {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject dm_py_net_type = {
  PyVarObject_HEAD_INIT(NULL, 0)
  .tp_name = "demitasse._C.Net",
  .tp_basicsize = sizeof(dm_py_net),
  .tp_dealloc = (destructor)net_dealloc,
  .tp_flags = Py_TPFLAGS_DEFAULT,
  .tp_doc = "A net instantiated in a Workspace (Workspace.create_net).",
  .tp_methods = net_methods,
  .tp_getset = net_getset,
};
