/* Range nesting on one thread in one pass: the stack that the push/pop calls kept.
 *
 * nesting.nest works for ranges in any order and ranges that cross, with numpy: it sorts the
 * ends, merges them with the starts and searches each range's parent (0.07 s for the 220k
 * ranges of a million kernels, 0.7 s for ten times that). Ranges that come sorted by start
 * (longer first at equal starts) and nest properly, as the importers give them, need none of
 * it: a stack of the open ranges names each range's parent as it is pushed, and pops the ranges
 * in the order of their ends, already merged with the starts. Anything else (a range ending
 * after the range open around it, another order) declines, and numpy does the work.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>

/* Events and states as nesting._events and its walk give them, for n ranges sorted by start
 * (then end descending) among those with end > start; the count of events, or -1 where the
 * ranges are out of that order or cross. A range with end <= start is left out (parent -1). */
static Py_ssize_t walk(const int64_t *start, const int64_t *end, Py_ssize_t n, int64_t *parent, int64_t *depth,
                       int64_t *times, int64_t *state, int64_t *stack) {
    Py_ssize_t top = 0, m = 0, last = -1; /* stack[0..top): the open ranges, innermost last */
    for (Py_ssize_t i = 0; i < n; i++) {
        parent[i] = -1, depth[i] = 0;
        if (end[i] <= start[i]) continue;
        if (last >= 0 && (start[i] < start[last] || (start[i] == start[last] && end[i] > end[last]))) return -1;
        last = i;
        /* Ends before starts at one time: ranges are half-open. */
        while (top && end[stack[top - 1]] <= start[i]) {
            times[m] = end[stack[--top]];
            state[m++] = top ? stack[top - 1] : -1;
        }
        if (top) {
            if (end[i] > end[stack[top - 1]]) return -1; /* crosses the range open around it */
            parent[i] = stack[top - 1];
        }
        depth[i] = top;
        stack[top++] = i;
        times[m] = start[i];
        state[m++] = i;
    }
    while (top) {
        times[m] = end[stack[--top]];
        state[m++] = top ? stack[top - 1] : -1;
    }
    return m;
}

static int int64_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t n, const char *what, int writable) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (view->itemsize != 8 || (strcmp(f, "q") && strcmp(f, "l")) || (n >= 0 && view->len / 8 < n)) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous buffer of int64, long enough", what);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(nest_sorted_doc,
"nest_sorted(start, end, parent, depth, times, state) -> int\n\n"
"One thread's ranges (start, end: int64 of n) sorted by start, then end descending, where\n"
"end > start: each range's parent (-1: none) and depth into parent and depth (n each), the\n"
"boundary events' times and the innermost range open after each into times and state (2n\n"
"each); returns the number of events, or -1 (outputs undefined) where live ranges are out of\n"
"that order or a range ends after the range open around it. Ranges with end <= start take\n"
"no part: parent -1, depth 0.");

static PyObject *nest_sorted(PyObject *self, PyObject *args) {
    PyObject *objs[6];
    if (!PyArg_ParseTuple(args, "OOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5])) return NULL;
    static const char *names[6] = {"start", "end", "parent", "depth", "times", "state"};
    Py_buffer v[6];
    int got = 0;
    Py_ssize_t n = -1, m = -2;
    for (; got < 6; got++) {
        Py_ssize_t need = got == 0 ? -1 : got < 4 ? n : 2 * n;
        if (int64_buffer(objs[got], &v[got], need, names[got], got >= 2) < 0) goto done;
        if (got == 0) n = v[0].len / 8;
    }
    int64_t *stack = malloc((size_t)(n ? n : 1) * sizeof *stack);
    if (!stack) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    m = walk(v[0].buf, v[1].buf, n, v[2].buf, v[3].buf, v[4].buf, v[5].buf, stack);
    Py_END_ALLOW_THREADS
    free(stack);
done:
    while (got--) PyBuffer_Release(&v[got]);
    return m == -2 ? NULL : PyLong_FromSsize_t(m);
}

static PyMethodDef methods[] = {
    {"nest_sorted", nest_sorted, METH_VARARGS, nest_sorted_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_range_stack", NULL, -1, methods};

PyMODINIT_FUNC PyInit__range_stack(void) { return PyModule_Create(&module); }
