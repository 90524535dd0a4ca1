/* The default output of `pylog consume` (each record's value and a newline) from the records of
 * a v2 record batch, in one pass and one bytes object.
 *
 * Optional: kafka_spark.cli.console_records has the same walk in Python and uses it when this module
 * is not built (no C compiler at install time); the two print the same bytes
 * (tests/cli/test_console_fetch.py). This loop is the whole per-record cost of a 200,000-record
 * `pylog consume`; in Python it costs more than kcat's whole run (bench/cli_throughput.py).
 *
 * Python's limited API (3.11): one build serves every CPython from 3.11 on, so the release has a
 * single abi3 wheel per platform beside the pure one (setup.py, scripts/build_dist.py).
 */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "_record_layout.h" /* the record layout's constants, from kafka_spark/common/record_batch.py */

/* A zigzag varint at *p, not past end: 0 and *p moved past it, or -1. */
static int read_varint(const unsigned char *b, Py_ssize_t *p, Py_ssize_t end, long long *out)
{
    unsigned long long result = 0;
    int shift = 0;
    while (*p < end && shift <= 63) {
        unsigned char c = b[(*p)++];
        result |= (unsigned long long)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *out = (long long)(result >> 1) ^ -(long long)(result & 1);
            return 0;
        }
        shift += 7;
    }
    return -1;
}

/* Skip a length-prefixed field (a key, a header name or value): a length, then that many bytes. */
static int skip_field(const unsigned char *b, Py_ssize_t *p, Py_ssize_t end)
{
    long long size;
    if (read_varint(b, p, end, &size))
        return -1;
    if (size > 0) {
        if (size > end - *p)
            return -1;
        *p += (Py_ssize_t)size;
    }
    return 0;
}

PyDoc_STRVAR(values_doc,
"values(buffer, start, end, limit) -> (output, records, stopped_at)\n\n"
"The values of the records in buffer[start:end] (the records section of one v2 batch), each\n"
"followed by a newline (a null value prints as an empty line), as one bytearray, at most\n"
"``limit`` records (-1: all). ``stopped_at`` is the position after the last record taken. A\n"
"record that does not parse raises ValueError naming its index.");

static PyObject *values(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t start, end, limit;
    if (!PyArg_ParseTuple(args, "y*nnn", &view, &start, &end, &limit))
        return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "the records range lies outside the buffer");
        return NULL;
    }
    const unsigned char *b = (const unsigned char *)view.buf;
    /* A record's value and newline are shorter than the record: the section bounds the output,
     * which then shrinks to the size taken. A bytearray: the limited API resizes no bytes object,
     * and a copy into one of the right size cost half again the walk's time. */
    PyObject *out = PyByteArray_FromStringAndSize(NULL, end - start);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    char *o = PyByteArray_AsString(out);
    Py_ssize_t w = 0, n = 0, p = start;
    int bad = 0;
    while (p < end && (limit < 0 || n < limit)) {
        long long length, v, headers;
        if (read_varint(b, &p, end, &length) || length < RECORD_MIN_BODY || length > end - p) {
            bad = 1;
            break;
        }
        Py_ssize_t record_end = p + (Py_ssize_t)length;
        Py_ssize_t q = p + RECORD_ATTRIBUTES_SIZE; /* past the attributes */
        if (read_varint(b, &q, record_end, &v) || read_varint(b, &q, record_end, &v) /* timestamp, offset deltas */
            || skip_field(b, &q, record_end) /* the key */
            || read_varint(b, &q, record_end, &v)) {
            bad = 1;
            break;
        }
        if (v > 0) {
            if (v > record_end - q) {
                bad = 1;
                break;
            }
            memcpy(o + w, b + q, (size_t)v);
            w += (Py_ssize_t)v;
            q += (Py_ssize_t)v;
        }
        o[w++] = '\n';
        if (read_varint(b, &q, record_end, &headers) || headers < 0) {
            bad = 1;
            break;
        }
        for (long long h = 0; h < headers; h++) {
            if (skip_field(b, &q, record_end) || skip_field(b, &q, record_end)) {
                bad = 1;
                break;
            }
        }
        if (bad)
            break;
        p = record_end;
        n++;
    }
    PyBuffer_Release(&view);
    if (bad) {
        Py_DECREF(out);
        PyErr_Format(PyExc_ValueError, "record %zd of the batch does not parse", n);
        return NULL;
    }
    if (PyByteArray_Resize(out, w) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return Py_BuildValue("Nnn", out, n, p);
}

static PyMethodDef methods[] = {
    {"values", values, METH_VARARGS, values_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_console_values",
    "The default output of `pylog consume` from a record batch, in C (see kafka_spark.cli.console_records).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__console_values(void)
{
    return PyModule_Create(&module);
}
