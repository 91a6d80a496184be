/* numpy.searchsorted for queries that mostly rise, as trace columns do.
 *
 * A binary search costs a mispredicted branch per halving: 10M kernels looked up among 20M
 * API calls took 0.45 s, almost all of it stalls. Queries in rising order (kernels' launch
 * times, their correlation ids) each start where the one before ended and gallop forward: a
 * few well-predicted steps apiece. A query lower than the one before is binary-searched
 * over the positions below, so any order gives numpy's answer.
 *
 * The trace model asks two more questions on the way: where each kernel's correlation id is
 * among the (strictly rising) ids of the API calls (FIND), and which range is innermost at
 * each launch time (STATE). Both are answered in the same pass as the search: numpy
 * needs an array of positions, then a gather and a mask over it (80 MB and two passes more
 * each for 10M kernels).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

/* First position in a[lo..hi) whose value is > q (right) or >= q (left); hi if none. */
static inline Py_ssize_t bisect(const int64_t *a, Py_ssize_t lo, Py_ssize_t hi, int64_t q, int right) {
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (right ? a[mid] <= q : a[mid] < q)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* What each query's answer is made of its position `pos` (numpy's, on the side asked for). */
enum { LEFT, RIGHT, FIND, STATE };

static void search(const int64_t *a, Py_ssize_t n, const int64_t *q, Py_ssize_t m, int mode, const int64_t *state,
                   int64_t *out) {
    int right = mode == RIGHT || mode == STATE;
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        int64_t v = q[i];
        if (i && v < q[i - 1]) {
            pos = bisect(a, 0, pos, v, right);
        } else {
            /* The answer is at pos or after: double the step until it is passed. */
            Py_ssize_t lo = pos, step = 1;
            while (lo + step <= n && (right ? a[lo + step - 1] <= v : a[lo + step - 1] < v)) {
                lo += step;
                step *= 2;
            }
            pos = bisect(a, lo, lo + step <= n ? lo + step : n, v, right);
        }
        /* FIND: where v is (a rises strictly), -1 if absent; STATE: the state after the last
         * time at or before v, -1 before the first. */
        out[i] = mode == FIND ? (pos < n && a[pos] == v ? pos : -1) : mode == STATE ? (pos ? state[pos - 1] : -1) : pos;
    }
}

static int int64_buffer(PyObject *obj, Py_buffer *view, const char *what, int writable) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (view->itemsize != 8 || (strcmp(f, "q") && strcmp(f, "l"))) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous buffer of int64", what);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(lookup_doc,
"lookup(a, q, out, mode, state) -> bool\n\n"
"a: ascending int64; q: int64 queries (fastest when mostly rising); out: int64 of q's length,\n"
"all C-contiguous. By mode, out[i] is numpy.searchsorted(a, q[i], side) for mode 0 (left) or\n"
"1 (right); 2: the position of q[i] in a, -1 where a lacks it, for a rising strictly (else\n"
"False is returned, out untouched); 3: state[searchsorted(a, q[i], 'right') - 1], the state\n"
"in force at each time, -1 before a[0] (state: int64 of a's length; None for other modes).");

static PyObject *lookup(PyObject *self, PyObject *args) {
    PyObject *objs[4];
    int mode;
    if (!PyArg_ParseTuple(args, "OOOiO", &objs[0], &objs[1], &objs[2], &mode, &objs[3])) return NULL;
    if (mode < LEFT || mode > STATE || (mode == STATE) == (objs[3] == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "mode: 0-3; state: given for mode 3 only");
        return NULL;
    }
    static const char *names[] = {"a", "q", "out", "state"};
    Py_buffer v[4];
    int n_views = mode == STATE ? 4 : 3, got = 0, rising = 1;
    while (got < n_views && int64_buffer(objs[got], &v[got], names[got], got == 2) == 0) got++;
    int failed = got < n_views;
    if (!failed && (v[2].len != v[1].len || (mode == STATE && v[3].len != v[0].len))) {
        PyErr_SetString(PyExc_ValueError, "out and q, or state and a, differ in length");
        failed = 1;
    }
    if (!failed) {
        const int64_t *a = v[0].buf;
        Py_ssize_t n = v[0].len / 8;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 1; mode == FIND && rising && i < n; i++) rising = a[i] > a[i - 1];
        if (rising) search(a, n, v[1].buf, v[1].len / 8, mode, mode == STATE ? v[3].buf : NULL, v[2].buf);
        Py_END_ALLOW_THREADS
    }
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    return failed ? NULL : PyBool_FromLong(rising);
}

static PyMethodDef methods[] = {
    {"lookup", lookup, METH_VARARGS, lookup_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sorted_search", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sorted_search(void) { return PyModule_Create(&module); }
