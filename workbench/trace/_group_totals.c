/* Per-range totals of the kernels attributed to ranges, in one pass.
 *
 * model.attribute counts each range's kernels, sums their GPU time and counts those CUDA
 * graphs launched. numpy needs a pass per total, a duration array, a mask of the kernels in
 * a range and a float copy for the weighted bincount: 0.5 s for 10M kernels on the project's
 * VM. Here each kernel is read once and its range's three totals are added to in place, in
 * exact int64 arithmetic (wrapping as numpy's int64 does, never past 2**63 ns in practice).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

/* 0, or -1 where a key is below -1 or not below m (the totals are then incomplete). */
static int add(const int64_t *key, const int64_t *start, const int64_t *end, const uint8_t *flag, Py_ssize_t n,
               Py_ssize_t m, int64_t *count, uint64_t *time, int64_t *flagged) {
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t k = key[i];
        if (k < 0) {
            if (k == -1) continue;
            return -1;
        }
        if (k >= m) return -1;
        count[k]++;
        time[k] += (uint64_t)end[i] - (uint64_t)start[i];
        if (flag && flag[i]) flagged[k]++;
    }
    return 0;
}

PyDoc_STRVAR(totals_doc,
"totals(key, start, end, flag, count, time, flagged) -> bool\n\n"
"For each row i with key[i] >= 0: count[key[i]] += 1, time[key[i]] += end[i] - start[i],\n"
"flagged[key[i]] += flag[i]. key, start, end: n native int64 each; flag: n bytes (0/1), or\n"
"None for none; count, time, flagged: m int64 each, added to. False where a key is below -1\n"
"or not below m (the totals are then incomplete).");

static PyObject *totals(PyObject *self, PyObject *args) {
    Py_buffer key, start, end, count, time, flagged, flag = {0};
    PyObject *flag_obj;
    if (!PyArg_ParseTuple(args, "y*y*y*Ow*w*w*", &key, &start, &end, &flag_obj, &count, &time, &flagged)) return NULL;
    int ok = -2;
    Py_ssize_t n = key.len / 8, m = count.len / 8;
    if (flag_obj != Py_None && PyObject_GetBuffer(flag_obj, &flag, PyBUF_SIMPLE) < 0) {
        flag.obj = NULL;
    } else if (key.len % 8 || start.len != key.len || end.len != key.len || (flag.obj && flag.len != n) ||
               count.len % 8 || time.len != count.len || flagged.len != count.len) {
        PyErr_SetString(PyExc_ValueError, "key, start, end: n int64 each; flag: n bytes; count, time, flagged: m int64 each");
    } else {
        Py_BEGIN_ALLOW_THREADS
        ok = add(key.buf, start.buf, end.buf, flag.obj ? flag.buf : NULL, n, m, count.buf, time.buf, flagged.buf);
        Py_END_ALLOW_THREADS
    }
    if (flag.obj) PyBuffer_Release(&flag);
    PyBuffer_Release(&key), PyBuffer_Release(&start), PyBuffer_Release(&end);
    PyBuffer_Release(&count), PyBuffer_Release(&time), PyBuffer_Release(&flagged);
    return ok == -2 ? NULL : PyBool_FromLong(ok == 0);
}

static PyMethodDef methods[] = {
    {"totals", totals, METH_VARARGS, totals_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_group_totals", NULL, -1, methods};

PyMODINIT_FUNC PyInit__group_totals(void) { return PyModule_Create(&module); }
