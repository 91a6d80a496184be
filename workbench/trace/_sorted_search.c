/* numpy.searchsorted for queries that mostly rise, as trace columns do.
 *
 * A binary search costs a mispredicted branch per halving: 10M kernels looked up among 20M
 * API calls took 0.45 s, almost all of it stalls. Queries in rising order (kernels' launch
 * times, their correlation ids) each start where the one before ended and gallop forward: a
 * few well-predicted steps apiece. A query lower than the one before is binary-searched
 * over the positions below, so any order gives numpy's answer.
 *
 * The trace model asks two more questions on the way: where each kernel's correlation id is
 * among the (strictly rising) ids of the API calls (`find`), and which range is innermost at
 * each launch time (`state_at`). Both are answered in the same pass as the search: numpy
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

/* The buffers of one call: an answer per query. */
typedef struct {
    Py_buffer a, q, out, state;
    int n_views;
} Views;

static void release(Views *v) {
    Py_buffer *all[] = {&v->a, &v->q, &v->out, &v->state};
    for (int i = 0; i < v->n_views; i++) PyBuffer_Release(all[i]);
}

/* Takes a, q, out (and state when given); 0 on success, -1 with an exception. */
static int views(Views *v, PyObject *a, PyObject *q, PyObject *out, PyObject *state) {
    PyObject *objs[] = {a, q, out, state};
    Py_buffer *all[] = {&v->a, &v->q, &v->out, &v->state};
    const char *names[] = {"a", "q", "out", "state"};
    v->n_views = 0;
    for (int i = 0; i < 4 && (i < 3 || state); i++) {
        if (int64_buffer(objs[i], all[i], names[i], i == 2) < 0) {
            release(v);
            return -1;
        }
        v->n_views++;
    }
    if (v->out.len != v->q.len || (state && v->state.len != v->a.len)) {
        release(v);
        PyErr_SetString(PyExc_ValueError, state ? "out and q, or state and a, differ in length" : "out and q differ in length");
        return -1;
    }
    return 0;
}

static void run(Views *v, int mode) {
    Py_BEGIN_ALLOW_THREADS
    search(v->a.buf, v->a.len / 8, v->q.buf, v->q.len / 8, mode, v->n_views > 3 ? v->state.buf : NULL, v->out.buf);
    Py_END_ALLOW_THREADS
}

PyDoc_STRVAR(searchsorted_doc,
"searchsorted(a, q, right, out) -> None\n\n"
"out[:] = numpy.searchsorted(a, q, side='right' if right else 'left'); a: ascending int64,\n"
"q: int64 (fastest when mostly rising), out: int64 of q's length, all C-contiguous buffers.");

static PyObject *searchsorted(PyObject *self, PyObject *args) {
    PyObject *a, *q, *out;
    int right;
    Views v;
    if (!PyArg_ParseTuple(args, "OOpO", &a, &q, &right, &out) || views(&v, a, q, out, NULL) < 0) return NULL;
    run(&v, right ? RIGHT : LEFT);
    release(&v);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(find_doc,
"find(a, q, out) -> bool\n\n"
"Where a rises strictly: out[i] = the position of q[i] in a, -1 where a lacks it, and True.\n"
"False (out untouched) where a does not rise strictly. Buffers as for searchsorted.");

static PyObject *find(PyObject *self, PyObject *args) {
    PyObject *a, *q, *out;
    Views v;
    if (!PyArg_ParseTuple(args, "OOO", &a, &q, &out) || views(&v, a, q, out, NULL) < 0) return NULL;
    const int64_t *x = v.a.buf;
    Py_ssize_t n = v.a.len / 8, i = 1;
    Py_BEGIN_ALLOW_THREADS
    while (i < n && x[i] > x[i - 1]) i++;
    Py_END_ALLOW_THREADS
    int rising = i >= n;
    if (rising) run(&v, FIND);
    release(&v);
    return PyBool_FromLong(rising);
}

PyDoc_STRVAR(state_at_doc,
"state_at(times, state, t, out) -> None\n\n"
"out[i] = state[numpy.searchsorted(times, t[i], side='right') - 1], or -1 where t[i] is\n"
"before times[0]: the state in force at each time. times: ascending, state: as long.");

static PyObject *state_at(PyObject *self, PyObject *args) {
    PyObject *times, *state, *t, *out;
    Views v;
    if (!PyArg_ParseTuple(args, "OOOO", &times, &state, &t, &out) || views(&v, times, t, out, state) < 0) return NULL;
    run(&v, STATE);
    release(&v);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"searchsorted", searchsorted, METH_VARARGS, searchsorted_doc},
    {"find", find, METH_VARARGS, find_doc},
    {"state_at", state_at, METH_VARARGS, state_at_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sorted_search", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sorted_search(void) { return PyModule_Create(&module); }
