/* The OTLP trace request's wire bytes, read once for the hot path (`ingest.export.flat`,
 * decision 0018).
 *
 * `spans(wire, layout)` walks an ExportTraceServiceRequest's bytes and returns, per
 * resource spans and scope spans, the spans as `Span` (name, trace_id, span_id,
 * end_time_unix_nano, values, rest, events), each event an `Event` (name, values).
 * `layout` (`flat.Layout.wire`) is (span keys, span kinds, event keys, event kinds):
 * `values` holds the last value of each of the layout's keys, in its order, as its kind
 * takes it (`flat.fix` is the same in Python: text, absent ones empty; any; bool; int;
 * number, an int as a float; strings, a string as a list of one), each value read as
 * `flat._value` reads an `AnyValue`; a span's `rest` is a dict of its other attributes
 * in the span's order (a repeated key: its first position, its last value), None when
 * it has none; an event's other attributes are not read. `values` is None where a
 * value is not of those shapes, not of its key's kind, or missing from a key of kind
 * any (what the caller compares by presence): the caller reads that span or event
 * the ordinary way.
 *
 * None for the whole request where the bytes are not read exactly the way the OTLP
 * parse reads them: a field the walk knows with another wire type, a group, a length
 * past its message, a name or key that is not UTF-8, a `KeyValue` with its `value`
 * twice (the OTLP parse merges the two). The caller then takes the pure path.
 * Every read is checked against the end of its message. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
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

/* The layout `spans` was last called with: its keys' places (dicts of str -> index),
 * and a generation that tells a cached key's places from an earlier layout's. */
static PyObject *layout_now;
static PyObject *span_places, *event_places;
static Py_ssize_t span_size, event_size;
static const char *span_kinds, *event_kinds;
static unsigned long generation;

/* The attribute keys seen, as str, with their places in the layout (-1: none): most
 * requests repeat a few dozen keys, each made, hashed and placed once here instead of
 * once per attribute. ASCII keys only (their str's bytes are their UTF-8); a slot taken
 * by another key is replaced. */
#define KEY_BITS 10
#define KEYS (1 << KEY_BITS)
#define KEY_MAX 96
typedef struct {
    PyObject *key;
    unsigned long generation;
    int span_at, event_at;
} Key;
static Key keys[KEYS];

/* Where `key` is in a layout's places: its index, -1 for none, -2 on an error. */
static int
place(PyObject *places, PyObject *key)
{
    PyObject *at = PyDict_GetItemWithError(places, key);
    if (at == NULL)
        return PyErr_Occurred() ? -2 : -1;
    return (int)PyLong_AsLong(at);
}

static int
placed(PyObject *key, int *span_at, int *event_at)
{
    *span_at = place(span_places, key);
    *event_at = place(event_places, key);
    return *span_at == -2 || *event_at == -2 ? ERROR : OK;
}

/* The key of [start, stop) as str, and its places in the layout. */
static int
key_text(ptr start, ptr stop, PyObject **out, int *span_at, int *event_at)
{
    Py_ssize_t size = stop - start;
    uint64_t hash = (uint64_t)size * 0x9E3779B97F4A7C15ULL, word;
    int got;
    if (size > KEY_MAX)
        goto uncached;
    for (ptr p = start; p < stop; p++)
        if (*p >= 0x80)
            goto uncached;
    /* The last 16 bytes: the keys of a request share their first ones. */
    if (size >= 8) {
        memcpy(&word, stop - 8, 8);
        hash = (hash ^ word) * 0xFF51AFD7ED558CCDULL;
        memcpy(&word, start + (size >= 16 ? size - 16 : 0), 8);
        hash = (hash ^ word) * 0xC4CEB9FE1A85EC53ULL;
    }
    else
        for (ptr p = start; p < stop; p++)
            hash = (hash ^ *p) * 1099511628211ULL;
    /* The top bits: a product's low bits never see its operands' high ones (the last
     * bytes of a key would not reach the slot). */
    Key *slot = &keys[hash >> (64 - KEY_BITS)];
    PyObject *seen = slot->key;
    if (seen != NULL && PyUnicode_GET_LENGTH(seen) == size &&
        memcmp(PyUnicode_1BYTE_DATA(seen), start, size) == 0) {
        if (slot->generation != generation) {
            if (placed(seen, &slot->span_at, &slot->event_at) != OK)
                return ERROR;
            slot->generation = generation;
        }
        *out = Py_NewRef(seen);
        *span_at = slot->span_at;
        *event_at = slot->event_at;
        return OK;
    }
    got = text(start, stop, out);
    if (got != OK)
        return got;
    if (PyObject_Hash(*out) == -1 || placed(*out, span_at, event_at) != OK) {
        Py_CLEAR(*out);
        return ERROR;
    }
    Py_XSETREF(slot->key, Py_NewRef(*out));
    slot->generation = generation;
    slot->span_at = *span_at;
    slot->event_at = *event_at;
    return OK;
uncached:
    got = text(start, stop, out);
    if (got == OK && placed(*out, span_at, event_at) != OK) {
        Py_CLEAR(*out);
        return ERROR;
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

/* What a value not read (or not of its kind) is in a span's or event's values or
 * `rest`, while they are read: its key's last value is for the reference reader. */
static PyObject *Unread;

/* A value as its key's kind takes it (a new reference in *out; `flat.fix`), from the
 * value as read (stolen); FALLBACK: not of the kind. */
static int
as_kind(char kind, PyObject *value, PyObject **out)
{
    int got = FALLBACK;
    switch (kind) {
    case 't': /* text: None is empty */
        if (value == Py_None) {
            Py_DECREF(value);
            *out = PyUnicode_New(0, 0);
            return *out ? OK : ERROR;
        }
        got = PyUnicode_CheckExact(value) ? OK : FALLBACK;
        break;
    case 'a': /* any, but a key without a value: its presence is what is compared */
        got = value != Py_None ? OK : FALLBACK;
        break;
    case 'b':
        got = value == Py_None || PyBool_Check(value) ? OK : FALLBACK;
        break;
    case 'i':
        got = value == Py_None || PyLong_CheckExact(value) ? OK : FALLBACK;
        break;
    case 'n': /* a finite number, as a float */
        if (PyLong_CheckExact(value)) {
            double number = PyLong_AsDouble(value);
            Py_DECREF(value);
            if (number == -1.0 && PyErr_Occurred())
                return ERROR;
            *out = PyFloat_FromDouble(number);
            return *out ? OK : ERROR;
        }
        got = value == Py_None ||
                      (PyFloat_CheckExact(value) && isfinite(PyFloat_AS_DOUBLE(value)))
                  ? OK
                  : FALLBACK;
        break;
    case 's': /* strings: None none, a string one */
        if (value == Py_None) {
            Py_DECREF(value);
            *out = PyList_New(0);
            return *out ? OK : ERROR;
        }
        if (PyUnicode_CheckExact(value)) {
            *out = PyList_New(1);
            if (*out == NULL) {
                Py_DECREF(value);
                return ERROR;
            }
            PyList_SET_ITEM(*out, 0, value);
            return OK;
        }
        if (PyList_CheckExact(value)) {
            got = OK;
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++)
                if (!PyUnicode_CheckExact(PyList_GET_ITEM(value, i)))
                    got = FALLBACK;
        }
        break;
    }
    if (got == OK)
        *out = value;
    else
        Py_DECREF(value);
    return got;
}

/* A value's default for its kind, where its key is absent. */
static PyObject *
absent(char kind)
{
    if (kind == 't')
        return PyUnicode_New(0, 0);
    if (kind == 's')
        return PyList_New(0);
    return Py_NewRef(Py_None);
}

/* What one span's or event's attributes are read into: `values` in the layout's
 * places (kinds `kinds`; NULL: absent so far; `Unread`: not read, or not as its kind
 * takes it), `rest` (NULL: none yet; never for an event, whose other attributes are
 * not read); `unread`: `Unread` put in either (a repeated key's last value counts). */
typedef struct {
    PyObject *values;
    const char *kinds;
    PyObject *rest;
    int is_span;
    int unread;
} Into;

/* One `KeyValue` of [p, end) into `into`. */
static int
key_value(ptr p, ptr end, Into *into)
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
    int span_at = -1, event_at = -1, got;
    if (key)
        got = key_text(key, key_end, &name, &span_at, &event_at);
    else {
        name = empty_text();
        got = name == NULL ? ERROR : placed(name, &span_at, &event_at);
        if (got != OK)
            Py_XDECREF(name);
    }
    if (got != OK)
        return got;
    int at = into->is_span ? span_at : event_at;
    if (at < 0 && !into->is_span) { /* an event's other attributes: not read */
        Py_DECREF(name);
        return OK;
    }
    if (value == NULL) /* no value: None, as an empty one (the reference's) */
        value = value_end = key_end;
    got = any_value(value, value_end, 0, &read);
    if (at >= 0) { /* its place: the value as its kind takes it, else `Unread` */
        Py_DECREF(name);
        if (got == OK)
            got = as_kind(into->kinds[at], read, &read);
        if (got == FALLBACK) {
            read = Py_NewRef(Unread);
            into->unread = 1;
            got = OK;
        }
        if (got == OK)
            Py_XSETREF(PyTuple_GET_ITEM(into->values, at), read);
        return got;
    }
    if (got == FALLBACK) {
        read = Py_NewRef(Unread);
        into->unread = 1;
        got = OK;
    }
    if (got == OK) {
        if (into->rest == NULL && (into->rest = PyDict_New()) == NULL)
            got = ERROR;
        else
            got = PyDict_SetItem(into->rest, name, read) < 0 ? ERROR : OK;
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

static int
start_into(Into *into, Py_ssize_t size, const char *kinds, int is_span)
{
    into->values = PyTuple_New(size); /* its items NULL: absent so far */
    into->kinds = kinds;
    into->rest = NULL;
    into->is_span = is_span;
    into->unread = 0;
    return into->values ? OK : ERROR;
}

/* The values as read (None: not as their kinds take them, or not read), absent ones
 * their kinds' defaults; a new reference. `rest` is dropped where the values are. */
static PyObject *
end_into(Into *into)
{
    int odd = 0;
    if (into->unread) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(into->values); i++)
            odd |= PyTuple_GET_ITEM(into->values, i) == Unread;
        odd |= into->rest != NULL && partial(into->rest);
    }
    if (odd) {
        Py_CLEAR(into->values);
        Py_CLEAR(into->rest);
        return Py_NewRef(Py_None);
    }
    PyObject *values = into->values;
    into->values = NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(values); i++)
        if (PyTuple_GET_ITEM(values, i) == NULL) {
            PyObject *value = absent(into->kinds[i]);
            if (value == NULL) {
                Py_DECREF(values);
                return NULL;
            }
            PyTuple_SET_ITEM(values, i, value);
        }
    return values;
}

/* A span's event (Event: name = 2, attributes = 3) appended to events. */
static int
event(ptr p, ptr end, PyObject *events)
{
    PyObject *name = empty_text(), *values = NULL, *item;
    Into into;
    int got = start_into(&into, event_size, event_kinds, 0);
    if (name == NULL)
        got = ERROR;
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
                got = key_value(start, stop, &into);
        }
        else if (!skip(&p, end, type))
            got = FALLBACK;
    }
    if (got != OK)
        goto done;
    values = end_into(&into);
    item = values ? PyStructSequence_New(EventType) : NULL;
    if (item == NULL) {
        got = ERROR;
        goto done;
    }
    PyStructSequence_SET_ITEM(item, 0, name);
    PyStructSequence_SET_ITEM(item, 1, values);
    name = values = NULL;
    got = PyList_Append(events, item) < 0 ? ERROR : OK;
    Py_DECREF(item);
done:
    Py_XDECREF(name);
    Py_XDECREF(values);
    Py_XDECREF(into.values);
    return got;
}

/* A span (its fields the walk reads; the others skipped) appended to spans. */
static int
span(ptr p, ptr end, PyObject *spans)
{
    enum { NAME, TRACE_ID, SPAN_ID, END, VALUES, REST, EVENTS, FIELDS };
    PyObject *field[FIELDS] = {NULL};
    PyObject *item;
    uint64_t end_time = 0;
    Into into;
    int got = start_into(&into, span_size, span_kinds, 1);
    field[NAME] = empty_text();
    field[TRACE_ID] = PyBytes_FromStringAndSize(NULL, 0);
    field[SPAN_ID] = PyBytes_FromStringAndSize(NULL, 0);
    field[EVENTS] = PyList_New(0);
    if (!field[NAME] || !field[TRACE_ID] || !field[SPAN_ID] || !field[EVENTS])
        got = ERROR;
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
                got = key_value(start, stop, &into);
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
    field[VALUES] = end_into(&into);
    field[REST] = into.rest ? into.rest : Py_NewRef(Py_None);
    into.rest = NULL;
    if (field[END] == NULL || field[VALUES] == NULL) {
        got = ERROR;
        goto done;
    }
    item = PyStructSequence_New(SpanType);
    if (item == NULL) {
        got = ERROR;
        goto done;
    }
    for (int i = 0; i < FIELDS; i++) {
        PyStructSequence_SET_ITEM(item, i, field[i]);
        field[i] = NULL;
    }
    got = PyList_Append(spans, item) < 0 ? ERROR : OK;
    Py_DECREF(item);
done:
    for (int i = 0; i < FIELDS; i++)
        Py_XDECREF(field[i]);
    Py_XDECREF(into.values);
    Py_XDECREF(into.rest);
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

/* The places of `keys` (a tuple of str) as a dict, their kinds (bytes) checked. */
static PyObject *
places(PyObject *keys, PyObject *kinds)
{
    if (!PyTuple_Check(keys) || !PyBytes_Check(kinds) ||
        PyBytes_GET_SIZE(kinds) != PyTuple_GET_SIZE(keys)) {
        PyErr_SetString(PyExc_TypeError, "a layout's keys are a tuple, its kinds bytes as long");
        return NULL;
    }
    PyObject *out = PyDict_New();
    for (Py_ssize_t i = 0; out != NULL && i < PyTuple_GET_SIZE(keys); i++) {
        PyObject *key = PyTuple_GET_ITEM(keys, i), *at;
        if (!PyUnicode_CheckExact(key) || !strchr("tabins", PyBytes_AS_STRING(kinds)[i]) ||
            PyBytes_AS_STRING(kinds)[i] == 0 || PyDict_Contains(out, key) != 0) {
            PyErr_SetString(PyExc_ValueError, "a layout's keys are distinct str of kinds tabins");
            Py_CLEAR(out);
            break;
        }
        at = PyLong_FromSsize_t(i);
        if (at == NULL || PyDict_SetItem(out, key, at) < 0)
            Py_CLEAR(out);
        Py_XDECREF(at);
    }
    return out;
}

/* Read with `layout` from now on (the same object again: nothing to do). */
static int
use_layout(PyObject *layout)
{
    PyObject *span_at, *event_at;
    if (layout == layout_now)
        return 0;
    if (!PyTuple_CheckExact(layout) || PyTuple_GET_SIZE(layout) != 4) {
        PyErr_SetString(PyExc_TypeError, "a layout is (span keys, kinds, event keys, kinds)");
        return -1;
    }
    span_at = places(PyTuple_GET_ITEM(layout, 0), PyTuple_GET_ITEM(layout, 1));
    event_at = span_at ? places(PyTuple_GET_ITEM(layout, 2), PyTuple_GET_ITEM(layout, 3)) : NULL;
    if (event_at == NULL) {
        Py_XDECREF(span_at);
        return -1;
    }
    Py_XSETREF(span_places, span_at);
    Py_XSETREF(event_places, event_at);
    Py_XSETREF(layout_now, Py_NewRef(layout));
    span_size = PyTuple_GET_SIZE(PyTuple_GET_ITEM(layout, 0));
    event_size = PyTuple_GET_SIZE(PyTuple_GET_ITEM(layout, 2));
    span_kinds = PyBytes_AS_STRING(PyTuple_GET_ITEM(layout, 1));
    event_kinds = PyBytes_AS_STRING(PyTuple_GET_ITEM(layout, 3));
    generation++;
    return 0;
}

static PyObject *
spans(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    PyObject *out;
    int got;
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "spans(wire, layout)");
        return NULL;
    }
    if (use_layout(args[1]) < 0 || PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
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

/* Whether `list` holds only strings (nothing that can refer to anything). */
static int
strings_only(PyObject *list)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++)
        if (!PyUnicode_CheckExact(PyList_GET_ITEM(list, i)))
            return 0;
    return 1;
}

/* untrack(rows): the garbage collector no longer looks into each list of `rows` (a list
 * of lists), nor into their lists of strings: rows of plain values, which hold nothing
 * that holds them (no cycle can pass through them), live until their commit, and were
 * most of what each young collection walked. */
static PyObject *
untrack(PyObject *module, PyObject *rows)
{
    (void)module;
    if (!PyList_CheckExact(rows)) {
        PyErr_SetString(PyExc_TypeError, "untrack(rows): a list of lists");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rows); i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyList_CheckExact(row) || !PyObject_GC_IsTracked(row))
            continue;
        PyObject_GC_UnTrack(row);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(row); j++) {
            PyObject *item = PyList_GET_ITEM(row, j);
            if (PyList_CheckExact(item) && PyObject_GC_IsTracked(item) && strings_only(item))
                PyObject_GC_UnTrack(item);
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"spans", (PyCFunction)(void (*)(void))spans, METH_FASTCALL,
     "spans(wire, layout) -> [[[Span]]] | None: the request's spans, per resource and "
     "scope spans, their attributes as the layout places them; None where the bytes are "
     "for the pure reader."},
    {"untrack", untrack, METH_O,
     "untrack(rows): the garbage collector no longer walks the rows (lists of plain "
     "values, never in a cycle)."},
    {NULL, NULL, 0, NULL},
};

static PyStructSequence_Field span_fields[] = {
    {"name", NULL}, {"trace_id", NULL}, {"span_id", NULL}, {"end_time_unix_nano", NULL},
    {"values", "the layout's keys' values; None: read this span the ordinary way"},
    {"rest", "the other attributes, in the span's order; None for none"},
    {"events", NULL}, {NULL, NULL},
};
static PyStructSequence_Desc span_desc = {
    "ingest.export._wire.Span", "A span as the hot path reads it.", span_fields, 7,
};
static PyStructSequence_Field event_fields[] = {
    {"name", NULL},
    {"values", "the layout's event keys' values; None: read this event the ordinary way"},
    {NULL, NULL},
};
static PyStructSequence_Desc event_desc = {
    "ingest.export._wire.Event", "A span's event as the hot path reads it.", event_fields, 2,
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
