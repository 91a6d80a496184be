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

PyDoc_STRVAR(nest_sorted_doc,
"nest_sorted(start, end, parent, depth, times, state) -> int\n\n"
"Contiguous buffers of native int64. One thread's ranges (start, end: n each) sorted by\n"
"start, then end descending, where end > start: each range's parent (-1: none) and depth\n"
"into parent and depth (n each), the boundary events' times and the innermost range open\n"
"after each into times and state (2n each); returns the number of events, or -1 (outputs\n"
"undefined) where live ranges are out of that order or a range ends after the range open\n"
"around it. Ranges with end <= start take no part: parent -1, depth 0.");

static PyObject *nest_sorted(PyObject *self, PyObject *args) {
    /* Buffers of native int64, as nesting.nest makes them; only their lengths are checked. */
    Py_buffer v[6];
    if (!PyArg_ParseTuple(args, "y*y*w*w*w*w*", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5])) return NULL;
    Py_ssize_t n = v[0].len / 8, m = -2;
    int64_t *stack = NULL;
    if (v[0].len % 8 || v[1].len != v[0].len || v[2].len < v[0].len || v[3].len < v[0].len ||
        v[4].len < 2 * v[0].len || v[5].len < 2 * v[0].len) {
        PyErr_SetString(PyExc_ValueError, "start and end: n int64 each; parent, depth: n; times, state: 2n");
    } else if (!(stack = malloc((size_t)(n ? n : 1) * sizeof *stack))) {
        PyErr_NoMemory();
    } else {
        Py_BEGIN_ALLOW_THREADS
        m = walk(v[0].buf, v[1].buf, n, v[2].buf, v[3].buf, v[4].buf, v[5].buf, stack);
        Py_END_ALLOW_THREADS
    }
    free(stack);
    for (int i = 0; i < 6; i++) PyBuffer_Release(&v[i]);
    return m == -2 ? NULL : PyLong_FromSsize_t(m);
}

static PyMethodDef methods[] = {
    {"nest_sorted", nest_sorted, METH_VARARGS, nest_sorted_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_range_stack", NULL, -1, methods};

PyMODINIT_FUNC PyInit__range_stack(void) { return PyModule_Create(&module); }
