/*
 * _fennec.c - the hot calls of python/fennec in C: a region's entry and exit, steps and
 * metrics, without ctypes' conversion of each argument (docs/python.md, "What a region
 * costs": 470 ns a region pair through ctypes).
 *
 * The extension does not link libfennec: python/fennec has loaded the library already
 * (or `fennec record` preloaded it) and passes its path to bind(), which looks the
 * functions up in that very object (dlopen with RTLD_NOLOAD). Linking it would load a
 * second copy when the preloaded library is another build's, whose constructor would start
 * a second session. Until bind() succeeds, every call raises.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct {
	uint32_t (*intern)(const char *);
	void (*begin_id)(uint32_t);
	void (*end)(void);
	void (*step)(void);
	void (*step_items)(uint64_t);
	void (*counter_add)(const char *, int64_t);
	void (*gauge_set)(const char *, double);
	void (*value_record)(const char *, double);
} F;

/* Metric names: the C API identifies a metric by its name's address, so each name gets one
 * copy for the life of the process (a dict from the str to a capsule of the copy). */
static PyObject *names;
/* Region names' ids, so that a region made in a loop does not hash and lock in
 * fennec_intern() each time. */
static PyObject *ids;

static int bound(void)
{
	if (F.begin_id)
		return 1;
	PyErr_SetString(PyExc_RuntimeError, "fennec._fennec: not bound to libfennec (python/fennec binds it)");
	return 0;
}

static PyObject *bind(PyObject *self, PyObject *arg)
{
	const char *path = PyUnicode_AsUTF8(arg);
	if (!path)
		return NULL;
	void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return PyErr_Format(PyExc_ImportError, "fennec._fennec: %s is not loaded: %s", path, dlerror());
	struct {
		const char *name;
		void **slot;
	} want[] = {
		{"fennec_intern", (void **)&F.intern},
		{"fennec_region_begin_id", (void **)&F.begin_id},
		{"fennec_region_end", (void **)&F.end},
		{"fennec_step", (void **)&F.step},
		{"fennec_step_items", (void **)&F.step_items},
		{"fennec_counter_add", (void **)&F.counter_add},
		{"fennec_gauge_set", (void **)&F.gauge_set},
		{"fennec_value_record", (void **)&F.value_record},
	};
	void *got[sizeof want / sizeof *want];
	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		got[i] = dlsym(h, want[i].name);
		if (!got[i]) {
			dlclose(h);
			return PyErr_Format(PyExc_ImportError, "fennec._fennec: %s has no %s", path, want[i].name);
		}
	}
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		*want[i].slot = got[i];
	/* the reference dlopen took stays: the library is the process's for good */
	Py_RETURN_NONE;
}

/* ---- regions ---- */

typedef struct {
	PyObject_HEAD
	uint32_t id;
	PyObject *name;
} Region;

static int region_init(Region *self, PyObject *args, PyObject *kwds)
{
	PyObject *name;
	if (!PyArg_ParseTuple(args, "U:Region", &name) || !bound())
		return -1;
	const char *s = PyUnicode_AsUTF8(name);
	if (!s)
		return -1;
	if (!*s) {
		PyErr_SetString(PyExc_TypeError, "fennec.region: the name must be a non-empty str, got ''");
		return -1;
	}
	PyObject *known = PyDict_GetItemWithError(ids, name);
	if (!known && PyErr_Occurred())
		return -1;
	uint32_t id = known ? (uint32_t)PyLong_AsUnsignedLong(known) : F.intern(s);
	if (!id) {
		PyErr_Format(PyExc_OSError, "fennec.region(%R): the collector's table of names is full", name);
		return -1;
	}
	if (!known) {
		PyObject *v = PyLong_FromUnsignedLong(id);
		if (!v || PyDict_SetItem(ids, name, v) < 0) {
			Py_XDECREF(v);
			return -1;
		}
		Py_DECREF(v);
	}
	self->id = id;
	Py_INCREF(name);
	Py_XSETREF(self->name, name);
	return 0;
}

static void region_dealloc(Region *self)
{
	Py_XDECREF(self->name);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *region_enter(Region *self, PyObject *unused)
{
	F.begin_id(self->id);
	Py_INCREF(self);
	return (PyObject *)self;
}

static PyObject *region_exit(Region *self, PyObject *const *args, Py_ssize_t nargs)
{
	F.end();
	Py_RETURN_FALSE;
}

static PyObject *region_repr(Region *self)
{
	return PyUnicode_FromFormat("fennec.region(%R)", self->name);
}

static PyObject *region_get_name(Region *self, void *closure)
{
	Py_INCREF(self->name);
	return self->name;
}

static PyObject *region_get_id(Region *self, void *closure)
{
	return PyLong_FromUnsignedLong(self->id);
}

static PyMethodDef region_methods[] = {
	{"__enter__", (PyCFunction)region_enter, METH_NOARGS, NULL},
	{"__exit__", (PyCFunction)(void (*)(void))region_exit, METH_FASTCALL, NULL},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef region_getset[] = {
	{"name", (getter)region_get_name, NULL, "the region's name", NULL},
	{"_id", (getter)region_get_id, NULL, "the collector's id of the name", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RegionType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "fennec._fennec.Region",
	.tp_basicsize = sizeof(Region),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "A region by name, as a context manager (python/fennec's region()).",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)region_init,
	.tp_dealloc = (destructor)region_dealloc,
	.tp_repr = (reprfunc)region_repr,
	.tp_methods = region_methods,
	.tp_getset = region_getset,
};

static PyObject *begin(PyObject *self, PyObject *arg)
{
	unsigned long id = PyLong_AsUnsignedLong(arg);
	if (id == (unsigned long)-1 && PyErr_Occurred())
		return NULL;
	F.begin_id((uint32_t)id);
	Py_RETURN_NONE;
}

static PyObject *end(PyObject *self, PyObject *unused)
{
	F.end();
	Py_RETURN_NONE;
}

/* ---- steps and metrics ---- */

/*
 * The arguments of a METH_FASTCALL | METH_KEYWORDS call into out[0..nkw) by the names
 * kw[] (positional first, then by keyword), lo of them required: 0 with an exception set
 * when they do not fit. Unset ones are NULL.
 */
static int args_of(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
		   const char *const *kw, Py_ssize_t nkw, Py_ssize_t lo, PyObject **out)
{
	if (nargs > nkw) {
		PyErr_Format(PyExc_TypeError, "fennec.%s takes at most %zd arguments (%zd given)", fn, nkw, nargs);
		return 0;
	}
	for (Py_ssize_t i = 0; i < nkw; i++)
		out[i] = i < nargs ? args[i] : NULL;
	Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
	for (Py_ssize_t k = 0; k < nk; k++) {
		const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
		Py_ssize_t i = 0;
		while (name && i < nkw && strcmp(name, kw[i]))
			i++;
		if (!name || i == nkw || out[i]) {
			if (name)
				PyErr_Format(PyExc_TypeError, "fennec.%s: %s argument '%s'", fn,
					     i == nkw ? "unexpected" : "repeated", name);
			return 0;
		}
		out[i] = args[nargs + k];
	}
	for (Py_ssize_t i = 0; i < lo; i++)
		if (!out[i]) {
			PyErr_Format(PyExc_TypeError, "fennec.%s: missing argument '%s'", fn, kw[i]);
			return 0;
		}
	return 1;
}

static PyObject *step(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static const char *const kw[] = {"items"};
	PyObject *a[1];
	if (!bound() || !args_of("step", args, nargs, kwnames, kw, 1, 0, a))
		return NULL;
	if (!a[0] || a[0] == Py_None) {
		F.step();
		Py_RETURN_NONE;
	}
	PyObject *i = PyNumber_Index(a[0]); /* numpy's integers too */
	if (!i)
		return NULL;
	unsigned long long items = PyLong_AsUnsignedLongLong(i);
	Py_DECREF(i);
	if (items == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	F.step_items(items);
	Py_RETURN_NONE;
}

/* The lasting copy of a metric's name. */
static const char *metric_name(PyObject *name)
{
	if (!PyUnicode_Check(name) || PyUnicode_GET_LENGTH(name) == 0) {
		PyErr_Format(PyExc_TypeError, "fennec: a metric's name must be a non-empty str, got %R", name);
		return NULL;
	}
	PyObject *cap = PyDict_GetItemWithError(names, name);
	if (cap)
		return PyCapsule_GetPointer(cap, NULL);
	if (PyErr_Occurred())
		return NULL;
	const char *s = PyUnicode_AsUTF8(name);
	char *copy = s ? strdup(s) : NULL;
	if (!copy)
		return s ? (PyErr_NoMemory(), NULL) : NULL;
	cap = PyCapsule_New(copy, NULL, NULL); /* never freed: the collector keeps the address */
	if (!cap || PyDict_SetItem(names, name, cap) < 0) {
		Py_XDECREF(cap);
		free(copy);
		return NULL;
	}
	Py_DECREF(cap);
	return copy;
}

static PyObject *counter(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static const char *const kw[] = {"name", "delta"};
	PyObject *a[2];
	if (!bound() || !args_of("counter", args, nargs, kwnames, kw, 2, 1, a))
		return NULL;
	const char *n = metric_name(a[0]);
	if (!n)
		return NULL;
	long long d = 1;
	if (a[1]) {
		PyObject *i = PyNumber_Index(a[1]);
		if (!i)
			return NULL;
		d = PyLong_AsLongLong(i);
		Py_DECREF(i);
		if (d == -1 && PyErr_Occurred())
			return NULL;
	}
	F.counter_add(n, d);
	Py_RETURN_NONE;
}

static PyObject *set_double(const char *what, const char *const *kw, void (*fn)(const char *, double),
			    PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *a[2];
	if (!bound() || !args_of(what, args, nargs, kwnames, kw, 2, 2, a))
		return NULL;
	const char *n = metric_name(a[0]);
	if (!n)
		return NULL;
	double v = PyFloat_AsDouble(a[1]);
	if (v == -1.0 && PyErr_Occurred())
		return NULL;
	fn(n, v);
	Py_RETURN_NONE;
}

static PyObject *gauge(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static const char *const kw[] = {"name", "level"};
	return set_double("gauge", kw, F.gauge_set, args, nargs, kwnames);
}

static PyObject *value(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static const char *const kw[] = {"name", "v"};
	return set_double("value", kw, F.value_record, args, nargs, kwnames);
}

static PyMethodDef methods[] = {
	{"bind", bind, METH_O, "bind(path): use the functions of the libfennec loaded from path"},
	{"begin", begin, METH_O, "begin(id): open the region of an interned name"},
	{"end", end, METH_NOARGS, "end(): close the innermost open region"},
	{"step", (PyCFunction)(void (*)(void))step, METH_FASTCALL | METH_KEYWORDS, "step(items=None)"},
	{"counter", (PyCFunction)(void (*)(void))counter, METH_FASTCALL | METH_KEYWORDS, "counter(name, delta=1)"},
	{"gauge", (PyCFunction)(void (*)(void))gauge, METH_FASTCALL | METH_KEYWORDS, "gauge(name, level)"},
	{"value", (PyCFunction)(void (*)(void))value, METH_FASTCALL | METH_KEYWORDS, "value(name, v)"},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT, "_fennec", "fennec's hot calls in C (python/fennec uses them when built)", -1, methods,
	NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fennec(void)
{
	if (PyType_Ready(&RegionType) < 0)
		return NULL;
	PyObject *m = PyModule_Create(&module);
	if (!m)
		return NULL;
	names = PyDict_New();
	ids = PyDict_New();
	if (!names || !ids || PyModule_AddObjectRef(m, "Region", (PyObject *)&RegionType) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
