/* The OTLP trace request's wire bytes, read once for the hot path (`ingest.export.flat`,
 * decision 0018).
 *
 * `spans(wire)` walks an ExportTraceServiceRequest's bytes and returns, per resource
 * spans and scope spans, the spans as `Span` (name, trace_id, span_id,
 * end_time_unix_nano, attributes, partial, events), each event an `Event` (name,
 * attributes, partial). `attributes` is a dict in the span's order (a repeated key:
 * its first position, its last value, as `ingest.export.decode.attributes`), each
 * value read as `flat._value` reads an `AnyValue` (a key without a value: None). Where
 * a value is not of those shapes, `attributes` is None and `partial` the dict with
 * `UNREAD` for it (the caller reads that span or event the ordinary way, or picks the
 * values it can); else `partial` is None.
 *
 * None for the whole request where the bytes are not read exactly the way the OTLP
 * parse reads them: a field the walk knows with another wire type, a group, a length
 * past its message, a name or key that is not UTF-8, a `KeyValue` with its `value`
 * twice (the OTLP parse merges the two). The caller then takes the pure path.
 * Every read is checked against the end of its message. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyTypeObject *SpanType;
static PyTypeObject *EventType;

/* The outcome of a step: read, not read the way the OTLP parse reads it (the request
 * or the value falls back), or a Python error (memory). */
#define OK 1
#define FALLBACK 0
#define ERROR (-1)

#define MAX_DEPTH 100

/* The digest of this source it was built from (setup.py): `flat` checks it. */
#ifndef WIRE_SOURCE
#define WIRE_SOURCE ""
#endif

typedef const uint8_t *ptr;

/* A varint of at most ten bytes at *p, before end. *lost: bits past 64 (a tenth byte
 * above 1). 0 when it runs past end or is longer. */
static int
varint(ptr *p, ptr end, uint64_t *out, int *lost)
{
    uint64_t value = 0;
    ptr at = *p;
    for (int shift = 0; shift < 70; shift += 7) {
        if (at >= end)
            return 0;
        uint8_t byte = *at++;
        if (shift == 63 && (byte & 0x7F) > 1)
            *lost = 1;
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *out = value;
            *p = at;
            return 1;
        }
    }
    return 0;
}

/* A length-delimited field's bytes: [*start, *stop) after the length at *p. */
static int
delimited(ptr *p, ptr end, ptr *start, ptr *stop)
{
    uint64_t size;
    int lost = 0;
    if (!varint(p, end, &size, &lost) || lost || size > (uint64_t)(end - *p))
        return 0;
    *start = *p;
    *stop = *p + size;
    *p = *stop;
    return 1;
}

/* The next field's number and wire type. */
static int
tag(ptr *p, ptr end, uint32_t *number, int *type)
{
    uint64_t value;
    int lost = 0;
    if (!varint(p, end, &value, &lost) || lost || value > UINT32_MAX || (value >> 3) == 0)
        return 0;
    *number = (uint32_t)(value >> 3);
    *type = (int)(value & 7);
    return 1;
}

/* Past a field the walk does not read (its tag read). Groups are not skipped. */
static int
skip(ptr *p, ptr end, int type)
{
    uint64_t value;
    int lost = 0;
    ptr start, stop;
    switch (type) {
    case 0:
        return varint(p, end, &value, &lost);
    case 1:
        if (end - *p < 8)
            return 0;
        *p += 8;
        return 1;
    case 2:
        return delimited(p, end, &start, &stop);
    case 5:
        if (end - *p < 4)
            return 0;
        *p += 4;
        return 1;
    default:
        return 0;
    }
}

/* A string; FALLBACK (no error left) when it is not UTF-8. */
static int
text(ptr start, ptr stop, PyObject **out)
{
    PyObject *value = PyUnicode_DecodeUTF8((const char *)start, stop - start, NULL);
    if (value == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return FALLBACK;
        }
        return ERROR;
    }
    *out = value;
    return OK;
}

static PyObject *
empty_text(void)
{
    return PyUnicode_New(0, 0);
}

/* The attribute keys seen, as str: most requests repeat a few dozen keys, each made
 * and hashed once here instead of once per attribute. ASCII keys only (their str's
 * bytes are their UTF-8); a slot taken by another key is replaced. */
#define KEYS 1024
#define KEY_MAX 96
static PyObject *keys[KEYS];

static int
key_text(ptr start, ptr stop, PyObject **out)
{
    Py_ssize_t size = stop - start;
    uint64_t hash = 14695981039346656037ULL;
    if (size > KEY_MAX)
        return text(start, stop, out);
    for (ptr p = start; p < stop; p++) {
        if (*p >= 0x80)
            return text(start, stop, out);
        hash = (hash ^ *p) * 1099511628211ULL;
    }
    PyObject **slot = &keys[(hash ^ (hash >> 32)) & (KEYS - 1)];
    PyObject *seen = *slot;
    if (seen != NULL && PyUnicode_GET_LENGTH(seen) == size &&
        memcmp(PyUnicode_1BYTE_DATA(seen), start, size) == 0) {
        *out = Py_NewRef(seen);
        return OK;
    }
    int got = text(start, stop, out);
    if (got == OK) {
        if (PyObject_Hash(*out) == -1) {
            Py_CLEAR(*out);
            return ERROR;
        }
        Py_XSETREF(*slot, Py_NewRef(*out));
    }
    return got;
}

/* The `AnyValue` of [at, end) as `flat._value` reads it: one field, nothing after it
 * (FALLBACK otherwise: the reference reads it). */
static int
any_value(ptr at, ptr end, int depth, PyObject **out)
{
    uint64_t size, number;
    int lost = 0;
    ptr p;
    if (at == end) {
        *out = Py_NewRef(Py_None);
        return OK;
    }
    switch (*at) {
    case 0x0A: /* string_value */
        p = at + 1;
        if (!varint(&p, end, &size, &lost) || lost || size != (uint64_t)(end - p))
            return FALLBACK;
        return text(p, end, out);
    case 0x18: /* int_value: the bits past 64 dropped, as the OTLP parse does */
        p = at + 1;
        if (!varint(&p, end, &number, &lost) || p != end)
            return FALLBACK;
        *out = PyLong_FromLongLong((long long)(int64_t)number);
        return *out ? OK : ERROR;
    case 0x21: /* double_value */
        if (end - at != 9)
            return FALLBACK;
        {
            double value = PyFloat_Unpack8((const char *)at + 1, 1);
            if (value == -1.0 && PyErr_Occurred())
                return ERROR;
            *out = PyFloat_FromDouble(value);
        }
        return *out ? OK : ERROR;
    case 0x10: /* bool_value */
        if (end - at != 2 || at[1] > 1)
            return FALLBACK;
        *out = Py_NewRef(at[1] ? Py_True : Py_False);
        return OK;
    case 0x2A: /* array_value: ArrayValue { repeated AnyValue values = 1 } */
        if (depth >= MAX_DEPTH)
            return FALLBACK;
        p = at + 1;
        if (!varint(&p, end, &size, &lost) || lost || size != (uint64_t)(end - p))
            return FALLBACK;
        {
            PyObject *values = PyList_New(0);
            if (values == NULL)
                return ERROR;
            while (p < end) {
                ptr item, stop;
                PyObject *value;
                int got;
                if (*p != 0x0A)
                    goto unread;
                p++;
                if (!varint(&p, end, &size, &lost) || lost || size > (uint64_t)(end - p))
                    goto unread;
                item = p;
                stop = p + size;
                p = stop;
                got = any_value(item, stop, depth + 1, &value);
                if (got != OK) {
                    Py_DECREF(values);
                    return got;
                }
                got = PyList_Append(values, value);
                Py_DECREF(value);
                if (got < 0) {
                    Py_DECREF(values);
                    return ERROR;
                }
            }
            *out = values;
            return OK;
        unread:
            Py_DECREF(values);
            return FALLBACK;
        }
    default: /* kvlist_value, bytes_value, several fields, unknown fields */
        return FALLBACK;
    }
}

/* What a value not read is in a dict of attributes (`UNREAD`): its key's last value
 * is for the reference reader. */
static PyObject *Unread;

/* One `KeyValue` of [p, end) into attrs, `Unread` for a value not read (*unread set). */
static int
key_value(ptr p, ptr end, PyObject *attrs, int *unread)
{
    ptr key = NULL, key_end = NULL, value = NULL, value_end = NULL;
    int values = 0;
    while (p < end) {
        uint32_t number;
        int type;
        if (!tag(&p, end, &number, &type))
            return FALLBACK;
        if (number == 1 || number == 2) {
            ptr start, stop;
            if (type != 2 || !delimited(&p, end, &start, &stop))
                return FALLBACK;
            if (number == 1) {
                key = start;
                key_end = stop;
            }
            else {
                value = start;
                value_end = stop;
                values++;
            }
        }
        else if (!skip(&p, end, type))
            return FALLBACK;
    }
    if (values > 1) /* merged by the OTLP parse */
        return FALLBACK;
    PyObject *name, *read = NULL;
    int got = key ? key_text(key, key_end, &name) : (name = empty_text()) ? OK : ERROR;
    if (got != OK)
        return got;
    if (value == NULL) /* no value: None, as an empty one (the reference's) */
        value = value_end = key_end;
    got = any_value(value, value_end, 0, &read);
    if (got == FALLBACK) {
        read = Py_NewRef(Unread);
        *unread = 1;
        got = OK;
    }
    if (got == OK) {
        got = PyDict_SetItem(attrs, name, read) < 0 ? ERROR : OK;
        Py_DECREF(read);
    }
    Py_DECREF(name);
    return got;
}

/* Whether a dict of attributes has a value not read (a repeated key's last counts). */
static int
partial(PyObject *attrs)
{
    PyObject *key, *value;
    Py_ssize_t at = 0;
    while (PyDict_Next(attrs, &at, &key, &value))
        if (value == Unread)
            return 1;
    return 0;
}

/* attributes and partial of a span or event: the dict as `attributes` when every
 * value was read, else as `partial` (and `attributes` None). */
static void
set_attributes(PyObject *item, Py_ssize_t at, PyObject *attrs, int unread)
{
    if (unread && partial(attrs)) {
        PyStructSequence_SET_ITEM(item, at, Py_NewRef(Py_None));
        PyStructSequence_SET_ITEM(item, at + 1, attrs);
    }
    else {
        PyStructSequence_SET_ITEM(item, at, attrs);
        PyStructSequence_SET_ITEM(item, at + 1, Py_NewRef(Py_None));
    }
}

/* A span's event (Event: name = 2, attributes = 3) appended to events. */
static int
event(ptr p, ptr end, PyObject *events)
{
    PyObject *name = empty_text(), *attrs = PyDict_New(), *item;
    int got = OK, unread = 0;
    if (name == NULL || attrs == NULL) {
        got = ERROR;
        goto done;
    }
    while (p < end && got == OK) {
        uint32_t number;
        int type;
        ptr start, stop;
        if (!tag(&p, end, &number, &type)) {
            got = FALLBACK;
        }
        else if (number == 2 || number == 3) {
            if (type != 2 || !delimited(&p, end, &start, &stop))
                got = FALLBACK;
            else if (number == 2) {
                PyObject *value;
                got = text(start, stop, &value);
                if (got == OK)
                    Py_SETREF(name, value);
            }
            else
                got = key_value(start, stop, attrs, &unread);
        }
        else if (!skip(&p, end, type))
            got = FALLBACK;
    }
    if (got != OK)
        goto done;
    item = PyStructSequence_New(EventType);
    if (item == NULL) {
        got = ERROR;
        goto done;
    }
    PyStructSequence_SET_ITEM(item, 0, name);
    set_attributes(item, 1, attrs, unread);
    name = attrs = NULL;
    got = PyList_Append(events, item) < 0 ? ERROR : OK;
    Py_DECREF(item);
done:
    Py_XDECREF(name);
    Py_XDECREF(attrs);
    return got;
}
/* A span (its fields the walk reads; the others skipped) appended to spans. */
static int
span(ptr p, ptr end, PyObject *spans)
{
    enum { NAME, TRACE_ID, SPAN_ID, END, ATTRS, PARTIAL, EVENTS, FIELDS };
    PyObject *field[FIELDS] = {NULL};
    PyObject *item;
    uint64_t end_time = 0;
    int got = OK, unread = 0;
    field[NAME] = empty_text();
    field[TRACE_ID] = PyBytes_FromStringAndSize(NULL, 0);
    field[SPAN_ID] = PyBytes_FromStringAndSize(NULL, 0);
    field[ATTRS] = PyDict_New();
    field[EVENTS] = PyList_New(0);
    if (!field[NAME] || !field[TRACE_ID] || !field[SPAN_ID] || !field[ATTRS] || !field[EVENTS]) {
        got = ERROR;
        goto done;
    }
    while (p < end && got == OK) {
        uint32_t number;
        int type;
        ptr start, stop;
        PyObject *value;
        if (!tag(&p, end, &number, &type)) {
            got = FALLBACK;
            continue;
        }
        switch (number) {
        case 1: /* trace_id */
        case 2: /* span_id */
        case 5: /* name */
        case 9: /* attributes */
        case 11: /* events */
            if (type != 2 || !delimited(&p, end, &start, &stop)) {
                got = FALLBACK;
                break;
            }
            if (number == 9)
                got = key_value(start, stop, field[ATTRS], &unread);
            else if (number == 11)
                got = event(start, stop, field[EVENTS]);
            else if (number == 5) {
                got = text(start, stop, &value);
                if (got == OK)
                    Py_SETREF(field[NAME], value);
            }
            else {
                value = PyBytes_FromStringAndSize((const char *)start, stop - start);
                if (value == NULL)
                    got = ERROR;
                else
                    Py_SETREF(field[number == 1 ? TRACE_ID : SPAN_ID], value);
            }
            break;
        case 8: /* end_time_unix_nano: fixed64 */
            if (type != 1 || end - p < 8) {
                got = FALLBACK;
                break;
            }
            end_time = 0;
            for (int i = 7; i >= 0; i--)
                end_time = end_time << 8 | p[i];
            p += 8;
            break;
        default:
            if (!skip(&p, end, type))
                got = FALLBACK;
        }
    }
    if (got != OK)
        goto done;
    field[END] = PyLong_FromUnsignedLongLong(end_time);
    if (field[END] == NULL) {
        got = ERROR;
        goto done;
    }
    item = PyStructSequence_New(SpanType);
    if (item == NULL) {
        got = ERROR;
        goto done;
    }
    set_attributes(item, ATTRS, field[ATTRS], unread);
    field[ATTRS] = NULL;
    for (int i = 0; i < FIELDS; i++) {
        if (i != ATTRS && i != PARTIAL)
            PyStructSequence_SET_ITEM(item, i, field[i]);
        field[i] = NULL;
    }
    got = PyList_Append(spans, item) < 0 ? ERROR : OK;
    Py_DECREF(item);
done:
    for (int i = 0; i < FIELDS; i++)
        Py_XDECREF(field[i]);
    return got;
}

typedef int (*reader)(ptr, ptr, PyObject *);

/* The repeated message field `wanted` of [p, end), each read by `each` into a new
 * list appended to out (or, for spans, into out itself). */
static int
repeated(ptr p, ptr end, uint32_t wanted, reader each, PyObject *out)
{
    while (p < end) {
        uint32_t number;
        int type, got;
        ptr start, stop;
        if (!tag(&p, end, &number, &type))
            return FALLBACK;
        if (number != wanted) {
            if (!skip(&p, end, type))
                return FALLBACK;
            continue;
        }
        if (type != 2 || !delimited(&p, end, &start, &stop))
            return FALLBACK;
        got = each(start, stop, out);
        if (got != OK)
            return got;
    }
    return OK;
}

static int
into_list(ptr p, ptr end, PyObject *out, uint32_t wanted, reader each)
{
    PyObject *list = PyList_New(0);
    int got;
    if (list == NULL)
        return ERROR;
    got = repeated(p, end, wanted, each, list);
    if (got == OK && PyList_Append(out, list) < 0)
        got = ERROR;
    Py_DECREF(list);
    return got;
}

static int
scope_spans(ptr p, ptr end, PyObject *out) /* ScopeSpans: spans = 2 */
{
    return into_list(p, end, out, 2, span);
}

static int
resource_spans(ptr p, ptr end, PyObject *out) /* ResourceSpans: scope_spans = 2 */
{
    return into_list(p, end, out, 2, scope_spans);
}

static PyObject *
spans(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    PyObject *out;
    int got;
    (void)module;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    out = PyList_New(0);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    /* ExportTraceServiceRequest: resource_spans = 1 */
    got = repeated((ptr)view.buf, (ptr)view.buf + view.len, 1, resource_spans, out);
    PyBuffer_Release(&view);
    if (got == OK)
        return out;
    Py_DECREF(out);
    if (got == ERROR)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"spans", spans, METH_O,
     "spans(wire) -> [[[Span]]] | None: the request's spans, per resource and scope "
     "spans; None where the bytes are for the pure reader."},
    {NULL, NULL, 0, NULL},
};

static PyStructSequence_Field span_fields[] = {
    {"name", NULL}, {"trace_id", NULL}, {"span_id", NULL}, {"end_time_unix_nano", NULL},
    {"attributes", "a dict in the span's order; None where a value was not read"},
    {"partial", "where a value was not read: the dict, UNREAD for those values"},
    {"events", NULL}, {NULL, NULL},
};
static PyStructSequence_Desc span_desc = {
    "ingest.export._wire.Span", "A span as the hot path reads it.", span_fields, 7,
};
static PyStructSequence_Field event_fields[] = {
    {"name", NULL}, {"attributes", NULL}, {"partial", NULL}, {NULL, NULL},
};
static PyStructSequence_Desc event_desc = {
    "ingest.export._wire.Event", "A span's event as the hot path reads it.", event_fields, 3,
};

static int
exec_module(PyObject *module)
{
    Unread = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (Unread == NULL || PyModule_AddObjectRef(module, "UNREAD", Unread) < 0)
        return -1;
    if (PyModule_AddStringConstant(module, "SOURCE", WIRE_SOURCE) < 0)
        return -1;
    SpanType = PyStructSequence_NewType(&span_desc);
    if (SpanType == NULL || PyModule_AddObjectRef(module, "Span", (PyObject *)SpanType) < 0)
        return -1;
    EventType = PyStructSequence_NewType(&event_desc);
    if (EventType == NULL || PyModule_AddObjectRef(module, "Event", (PyObject *)EventType) < 0)
        return -1;
    return 0;
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ingest.export._wire",
    "The OTLP trace request's wire bytes read once, in C (see `ingest.export.flat`).", 0,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__wire(void)
{
    PyObject *module = PyModule_Create(&module_def);
    if (module != NULL && exec_module(module) < 0)
        Py_CLEAR(module);
    return module;
}
