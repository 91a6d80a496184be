/* Columns of a run of Kineto (Chrome trace) events, read without holding the GIL.

   scan(data) reads data, a JSON array of events ("[" ... "]", anything may follow it), and
   returns (end, events, other_gpu, tables, begin_end): end is the offset just past
   the array, tables one (names, rows) per entry of TABLES, where rows is a bytearray of
   fixed-width int64 rows (ts and ts + dur as ns: start and end) and names lists the distinct
   names the rows' name codes stand for, in first-seen order; begin_end lists user_annotation
   B/E events as (ph, name, pid, tid, ts); of the python_function events only the modules'
   ("nn.Module: ..." names) make rows; other_gpu counts the complete events of each kind of
   OTHER_GPU. scan(data, start, stop) reads the events that data[start:stop] holds, the
   inside of such an array, and its end is stop - start.

   It returns None, and the importer's msgspec/orjson path then reads the same bytes, for
   anything it does not fully vouch for: invalid JSON or UTF-8, a read field of another type
   than the plain one (a string pid, a float device, a missing name), numbers it would have to
   round differently or that the checks there refuse, deep nesting, a read field given twice.
   So every check and error message stays in one place, and what it accepts it reads exactly
   as that path would. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef unsigned char uchar;

enum { OK, DECLINE, NOMEM };

/* ------------------------------------------------------------------ JSON values */

enum { T_MISSING, T_NULL, T_BOOL, T_INT, T_NUM, T_STR, T_ARR, T_OBJ };

typedef struct {
    int type;
    int esc;           /* T_STR: has escapes */
    const uchar *s;    /* T_STR: the text between the quotes; T_NUM/T_INT: the number's text */
    size_t n;
    int64_t i;         /* T_INT */
    uint64_t m;        /* T_NUM: the digits, and the power of ten they are scaled by */
    int exp10;
    uint8_t neg, exact; /* exact: m holds every digit */
} Val;

/* A grid/block list: ok when every element is an int64 (also when there are not three). */
typedef struct {
    int ok;
    int64_t v[3];
} Dims;

#define MAX_DEPTH 64   /* deeper nesting is left to the other path and its limits */
#define MAX_NUMBER 64  /* longer number texts too: no overflow to inf can hide in what it skips */

static const uchar ws_class[256] = {[' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1};

static inline const uchar *skip_ws(const uchar *p, const uchar *end) {
    if (p < end && !ws_class[*p]) return p;
#ifdef __SSE2__
    /* indentation: one step for most runs */
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i ws = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\n'))),
                                  _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\r')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\t'))));
        unsigned other = ~(unsigned)_mm_movemask_epi8(ws) & 0xFFFF;
        if (other) return p + __builtin_ctz(other);
        p += 16;
    }
#endif
    while (p < end && ws_class[*p]) p++;
    return p;
}

static int hex4(const uchar *p, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        uchar c = p[k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return 0;
    }
    *out = v;
    return 1;
}

/* The length of the valid UTF-8 sequence at p (lead byte >= 0x80), 0 if invalid: what
   Python's strict decoder accepts (no overlongs, no surrogates, nothing past U+10FFFF). */
static size_t utf8_seq(const uchar *p, const uchar *end) {
    uchar c = p[0];
    size_t n;
    uchar lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if ((size_t)(end - p) < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t k = 2; k < n; k++)
        if (p[k] < 0x80 || p[k] > 0xBF) return 0;
    return n;
}

/* Bytes a string may hold as they are: printable ASCII but the quote and the backslash. */
static const uchar plain_class[256] = {
#define R16(x) x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x
    R16(0), R16(0), R16(1), R16(1), R16(1), R16(1), R16(1), R16(1),
    R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0),
#undef R16
    ['"'] = 0, ['\\'] = 0,
};

/* The first byte at or after p that is not plain_class: 16 bytes at a time where SSE2 is. */
static inline const uchar *skip_plain(const uchar *p, const uchar *end) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(' ');
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        /* signed: bytes >= 0x80 are below ' ' too */
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                                    _mm_cmplt_epi8(x, space));
        int mask = _mm_movemask_epi8(stop);
        if (mask) return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (p < end && plain_class[*p]) p++;
    return p;
}

/* p at the opening quote; on success p is past the closing one and v holds the text. */
static inline __attribute__((always_inline)) int scan_string(const uchar **pp, const uchar *end, Val *v) {
    const uchar *p = *pp + 1, *start = p;
    int esc = 0;
    for (;;) {
        p = skip_plain(p, end);
        if (p >= end) return 0;
        uchar c = *p;
        if (c == '"') break;
        if (c == '\\') {
            if (end - p < 2) return 0;
            esc = 1;
            switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                p += 2;
                break;
            case 'u': {
                unsigned u;
                if (end - p < 6 || !hex4(p + 2, &u)) return 0;
                if (u >= 0xD800 && u <= 0xDFFF) return 0; /* surrogates: left to the other path */
                p += 6;
                break;
            }
            default:
                return 0;
            }
        } else if (c < 0x20) {
            return 0;
        } else {
            size_t n = utf8_seq(p, end);
            if (!n) return 0;
            p += n;
        }
    }
    v->type = T_STR;
    v->esc = esc;
    v->s = start;
    v->n = (size_t)(p - start);
    *pp = p + 1;
    return 1;
}

/* The text of a string that scan_string accepted, escapes resolved, into out (cap bytes at
   least v->n: resolving never lengthens it). */
static size_t unescape(const Val *v, uchar *out) {
    const uchar *p = v->s, *end = v->s + v->n;
    uchar *o = out;
    while (p < end) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        uchar c = p[1];
        p += 2;
        switch (c) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned u;
            hex4(p, &u);
            p += 4;
            if (u < 0x80) *o++ = (uchar)u;
            else if (u < 0x800) {
                *o++ = (uchar)(0xC0 | (u >> 6));
                *o++ = (uchar)(0x80 | (u & 0x3F));
            } else {
                *o++ = (uchar)(0xE0 | (u >> 12));
                *o++ = (uchar)(0x80 | ((u >> 6) & 0x3F));
                *o++ = (uchar)(0x80 | (u & 0x3F));
            }
            break;
        }
        default: *o++ = c; /* " \ / */
        }
    }
    return (size_t)(o - out);
}

static inline int is_digit(uchar c) { return c >= '0' && c <= '9'; }

/* How many of the 8 bytes of x, lowest first, are ASCII digits before the first that is not
   (7 bits of each byte are compared at a time: no carry crosses into the next byte). */
static inline unsigned leading_digits(uint64_t x) {
    const uint64_t high = 0x8080808080808080ULL;
    uint64_t low7 = x & ~high;
    uint64_t digit = (low7 + 0x5050505050505050ULL) & ~(low7 + 0x4646464646464646ULL) & ~x & high;
    uint64_t other = ~digit & high;
    return other ? (unsigned)__builtin_ctzll(other) >> 3 : 8;
}

/* The value of eight ASCII digits, the first in the lowest byte: pairs, then fours, in lanes. */
static inline uint64_t eight_value(uint64_t x) {
    x -= 0x3030303030303030ULL;
    x = x * 10 + (x >> 8);
    x = ((x & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32)) +
         ((x >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32))) >> 32;
    return (uint32_t)x;
}

/* Past the run of digits at p, accumulated into *m (mod 2**64), a word at a time where it
   can: a run shorter than a word is shifted up and led by zeros. */
static inline const uchar *digit_run(const uchar *p, const uchar *end, uint64_t *m) {
    static const uint64_t pow10_int[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
    uint64_t v = *m, x;
    for (; end - p >= 8; p += 8) {
        memcpy(&x, p, 8);
        unsigned n = leading_digits(x);
        if (n < 8) {
            if (n) v = v * pow10_int[n] + eight_value((x << (64 - 8 * n)) | (0x3030303030303030ULL >> (8 * n)));
            *m = v;
            return p + n;
        }
        v = v * 100000000 + eight_value(x);
    }
    for (; p < end && is_digit(*p); p++) v = v * 10 + (*p - '0');
    *m = v;
    return p;
}

/* JSON's number grammar; an integer that fits int64 is T_INT, any other number T_NUM, with
   its digits as a mantissa and a power of ten (exact when it has at most 19 digits). */
static inline __attribute__((always_inline)) int scan_number(const uchar **pp, const uchar *end, Val *v) {
    const uchar *p = *pp, *start = p;
    int neg = *p == '-', integer = 1, exp10 = 0;
    uint64_t m = 0; /* wraps past 19 digits, which then count as inexact */
    p += neg;
    if (p >= end) return 0;
    const uchar *digits = p;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') p = digit_run(p, end, &m);
    else return 0;
    size_t n = (size_t)(p - digits);
    if (p < end && *p == '.') {
        const uchar *q = ++p;
        p = digit_run(p, end, &m);
        if (p == q) return 0;
        n += (size_t)(p - q);
        exp10 = -(int)(p - q);
        integer = 0;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = p < end && *p == '-', e = 0;
        if (p < end && (*p == '+' || *p == '-')) p++;
        const uchar *q = p;
        for (; p < end && is_digit(*p); p++) e = e * 10 + (*p - '0');
        if (p == q || p - q > 2) return 0; /* |exponent| < 100: never inf, never 0 */
        exp10 += eneg ? -e : e;
        integer = 0;
    }
    if (p >= end || p - start > MAX_NUMBER) return 0;
    v->s = start;
    v->n = (size_t)(p - start);
    v->m = m;
    v->exp10 = exp10;
    v->neg = neg;
    v->exact = n <= 19;
    v->type = T_NUM;
    /* 19 digits or fewer cannot wrap; INT64_MAX has 19, so no longer integer fits */
    if (integer && v->exact) {
        if (!neg && m <= (uint64_t)INT64_MAX) {
            v->type = T_INT;
            v->i = (int64_t)m;
        } else if (neg && m <= (uint64_t)INT64_MAX + 1) {
            v->type = T_INT;
            v->i = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
        }
    }
    *pp = p;
    return 1;
}

static locale_t c_locale;

/* A number's value as the other path's decoders give it: correctly rounded. */
static double number(const Val *v) {
    if (v->type == T_INT) return (double)v->i;
    /* Clinger's fast path: an exact mantissa scaled by an exact power of ten, one rounding. */
    static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (v->exact && v->m <= (1ULL << 53) && v->exp10 >= -22 && v->exp10 <= 22) {
        double x = (double)v->m;
        x = v->exp10 < 0 ? x / pow10[-v->exp10] : x * pow10[v->exp10];
        return v->neg ? -x : x;
    }
    char text[MAX_NUMBER + 1];
    memcpy(text, v->s, v->n);
    text[v->n] = 0;
    return strtod_l(text, NULL, c_locale);
}

static int skip_value(const uchar **pp, const uchar *end, int depth);

static int scan_literal(const uchar **pp, const uchar *end, const char *word, size_t n) {
    if ((size_t)(end - *pp) < n || memcmp(*pp, word, n)) return 0;
    *pp += n;
    return 1;
}

/* Any value, recording its type and, for scalars, its text; containers are only validated. */
static int scan_value(const uchar **pp, const uchar *end, Val *v, int depth) {
    const uchar *p = *pp;
    switch (*p) {
    case '"':
        return scan_string(pp, end, v);
    case '{':
        v->type = T_OBJ;
        return skip_value(pp, end, depth);
    case '[':
        v->type = T_ARR;
        return skip_value(pp, end, depth);
    case 't':
        v->type = T_BOOL;
        return scan_literal(pp, end, "true", 4);
    case 'f':
        v->type = T_BOOL;
        return scan_literal(pp, end, "false", 5);
    case 'n':
        v->type = T_NULL;
        return scan_literal(pp, end, "null", 4);
    default:
        if (*p == '-' || is_digit(*p)) return scan_number(pp, end, v);
        return 0;
    }
}

/* An object or array, key by key and element by element. */
static int skip_value(const uchar **pp, const uchar *end, int depth) {
    const uchar *p = *pp;
    Val v;
    if (*p == '"') return scan_string(pp, end, &v);
    if (*p != '{' && *p != '[') return scan_value(pp, end, &v, depth);
    if (depth >= MAX_DEPTH) return 0;
    uchar close = *p == '{' ? '}' : ']';
    p = skip_ws(p + 1, end);
    if (p < end && *p == close) {
        *pp = p + 1;
        return 1;
    }
    for (;;) {
        if (p >= end) return 0;
        if (close == '}') {
            if (*p != '"' || !scan_string(&p, end, &v)) return 0;
            p = skip_ws(p, end);
            if (p >= end || *p != ':') return 0;
            p = skip_ws(p + 1, end);
            if (p >= end) return 0;
        }
        if (!skip_value(&p, end, depth + 1)) return 0;
        p = skip_ws(p, end);
        if (p >= end) return 0;
        if (*p == close) {
            *pp = p + 1;
            return 1;
        }
        if (*p != ',') return 0;
        p = skip_ws(p + 1, end);
    }
}

/* ------------------------------------------------------------------ events */

/* The fields read, as in kineto.py's _FIELDS and _ARGS. */
enum { F_PH, F_CAT, F_NAME, F_PID, F_TID, F_TS, F_DUR, F_ARGS, NF };
enum { A_CORRELATION, A_DEVICE, A_STREAM, A_BYTES, A_GRID, A_BLOCK, NA };

/* Where the generic parse of an event found its values (see ------ shapes). */
enum { ACT_END, ACT_SKIP, ACT_FIELD, ACT_ARG, ACT_ARGS_OPEN, ACT_INLINE };
#define MAX_STEPS 64

typedef struct {
    const uchar *start, *end; /* the value's bytes; ACT_ARGS_OPEN: just past the "{" */
    uint8_t action, key, depth;
} Step;

typedef struct {
    Step steps[MAX_STEPS];
    int n; /* more than MAX_STEPS: not recorded */
} Rec;

typedef struct {
    Val f[NF];
    Val a[NA];
    Dims dims[2]; /* grid, block */
    Rec *rec;     /* the generic parse records its steps here; NULL for none */
} Event;

typedef struct {
    const char *text;
    size_t n;
    uint64_t head; /* its first 8 bytes, zero-padded: compared at once */
} Key;

static Key event_keys[NF] = {{"ph", 2}, {"cat", 3}, {"name", 4}, {"pid", 3}, {"tid", 3}, {"ts", 2}, {"dur", 3}, {"args", 4}};
static Key args_keys[NA] = {{"correlation", 11}, {"device", 6}, {"stream", 6}, {"bytes", 5}, {"grid", 4}, {"block", 5}};

static uint64_t head_of(const uchar *s, size_t n) {
    uint64_t w = 0;
    memcpy(&w, s, n < 8 ? n : 8);
    return w;
}

static void key_heads(Key *keys, int nkeys) {
    for (int k = 0; k < nkeys; k++) keys[k].head = head_of((const uchar *)keys[k].text, keys[k].n);
}

/* Which of keys the key v is, or -1; escapes in a key are resolved first. */
static inline int key_index(const Val *v, const uchar *end, const Key *keys, int nkeys) {
    uchar buf[6 * 16];
    const uchar *s = v->s;
    size_t n = v->n;
    uint64_t head;
    size_t room = (size_t)(end - s); /* the key is followed by its quote and more */
    if (v->esc) {
        if (n > sizeof buf) return -1; /* 6 bytes an escape: longer than any key of interest */
        n = unescape(v, buf);
        s = buf;
        room = sizeof buf;
    }
    if (n > 16) return -1;
    if (room >= 8) {
        memcpy(&head, s, 8);
        if (n < 8) head &= (1ULL << (8 * n)) - 1;
    } else head = head_of(s, n);
    for (int k = 0; k < nkeys; k++)
        if (keys[k].head == head && keys[k].n == n && (n <= 8 || !memcmp(keys[k].text + 8, s + 8, n - 8)))
            return k;
    return -1;
}

/* A grid/block list's first three elements; ok when all of them are int64. */
static int scan_dims(const uchar **pp, const uchar *end, Val *v, Dims *d, int depth) {
    const uchar *p = skip_ws(*pp + 1, end);
    int k = 0;
    d->ok = 1;
    d->v[0] = d->v[1] = d->v[2] = 1;
    v->type = T_ARR;
    if (p < end && *p == ']') {
        *pp = p + 1;
        return 1;
    }
    for (;; k++) {
        Val e;
        if (p >= end) return 0;
        if (!scan_value(&p, end, &e, depth + 1)) return 0;
        if (e.type != T_INT) d->ok = 0;
        else if (k < 3) d->v[k] = e.i;
        p = skip_ws(p, end);
        if (p >= end) return 0;
        if (*p == ']') break;
        if (*p != ',') return 0;
        p = skip_ws(p + 1, end);
    }
    *pp = p + 1;
    return 1;
}

/* One field's value into v; a field given twice is declined (which one counts is the other
   path's business). */
static int scan_field(const uchar **pp, const uchar *end, Val *v, int depth) {
    if (v->type != T_MISSING) return 0;
    return scan_value(pp, end, v, depth);
}

static inline void record(Rec *rec, const uchar *start, const uchar *end, int action, int key, int depth) {
    if (rec->n < MAX_STEPS) rec->steps[rec->n] = (Step){start, end, (uint8_t)action, (uint8_t)(key < 0 ? 0 : key), (uint8_t)depth};
    rec->n++;
}

typedef int (*member_fn)(void *ctx, int key, const uchar **pp, const uchar *end, int depth);

/* An object's members: those whose key is one of keys go to member, the others are skipped. */
static inline __attribute__((always_inline)) int scan_object(const uchar **pp, const uchar *end, const Key *keys,
                                                             int nkeys, member_fn member,
                       void *ctx, int depth) {
    const uchar *p = skip_ws(*pp + 1, end);
    if (depth >= MAX_DEPTH) return 0;
    if (p < end && *p == '}') {
        *pp = p + 1;
        return 1;
    }
    for (;;) {
        Val k;
        if (p >= end || *p != '"' || !scan_string(&p, end, &k)) return 0;
        p = skip_ws(p, end);
        if (p >= end || *p != ':') return 0;
        p = skip_ws(p + 1, end);
        if (p >= end) return 0;
        int key = key_index(&k, end, keys, nkeys);
        Rec *rec = ((Event *)ctx)->rec;
        const uchar *value = p;
        int action = key < 0 ? ACT_SKIP : keys == event_keys ? ACT_FIELD : ACT_ARG;
        if (rec && action == ACT_FIELD && key == F_ARGS && *p == '{') {
            record(rec, p + 1, p + 1, ACT_ARGS_OPEN, key, depth + 1); /* its members follow */
            rec = NULL;
        }
        if (!(key >= 0 ? member(ctx, key, &p, end, depth + 1) : skip_value(&p, end, depth + 1))) return 0;
        if (rec) record(rec, value, p, action, key, depth + 1);
        p = skip_ws(p, end);
        if (p >= end) return 0;
        if (*p == '}') {
            *pp = p + 1;
            return 1;
        }
        if (*p != ',') return 0;
        p = skip_ws(p + 1, end);
    }
}

static int args_member(void *ctx, int key, const uchar **pp, const uchar *end, int depth) {
    Event *e = ctx;
    Val *v = &e->a[key];
    if ((key == A_GRID || key == A_BLOCK) && **pp == '[') {
        if (v->type != T_MISSING) return 0;
        return scan_dims(pp, end, v, &e->dims[key - A_GRID], depth);
    }
    return scan_field(pp, end, v, depth);
}

static int event_member(void *ctx, int key, const uchar **pp, const uchar *end, int depth) {
    Event *e = ctx;
    if (key == F_ARGS && **pp == '{') {
        if (e->f[F_ARGS].type != T_MISSING) return 0;
        e->f[F_ARGS].type = T_OBJ;
        return scan_object(pp, end, args_keys, NA, args_member, e, depth);
    }
    return scan_field(pp, end, &e->f[key], depth);
}

/* ------------------------------------------------------------------ growing buffers */

typedef struct {
    uchar *data;
    size_t n, cap;
} Buf;

static int buf_reserve(Buf *b, size_t more) {
    if (b->n + more <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more) cap *= 2;
    uchar *d = realloc(b->data, cap);
    if (!d) return 0;
    b->data = d;
    b->cap = cap;
    return 1;
}

static int buf_add(Buf *b, const void *src, size_t n) {
    if (!buf_reserve(b, n)) return 0;
    memcpy(b->data + b->n, src, n);
    b->n += n;
    return 1;
}

/* ------------------------------------------------------------------ interning */

typedef struct {
    size_t off, len;
    uint64_t hash;
} Name;

typedef struct {
    Buf text;   /* the names' bytes, one after another */
    Buf names;  /* Name per code */
    int64_t *slots; /* code + 1, or 0 for a free slot */
    size_t mask;
} Interner;

/* Names are long (kernel templates) and hashed once per event: a long one by its length and
   five words spread over it (equal hashes are told apart by comparing the names). */
static inline uint64_t mix(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
    return h ^ (h >> 32);
}

static uint64_t hash_bytes(const uchar *s, size_t n) {
    uint64_t h = n * 0x9E3779B97F4A7C15ULL, w;
    if (n >= 16) {
        size_t at[5] = {0, n / 4, n / 2, 3 * n / 4, n - 8};
        for (int k = 0; k < 5; k++) {
            memcpy(&w, s + (at[k] < n - 8 ? at[k] : n - 8), 8);
            h = mix(h, w);
        }
    } else {
        for (; n >= 8; s += 8, n -= 8) {
            memcpy(&w, s, 8);
            h = mix(h, w);
        }
        w = 0;
        memcpy(&w, s, n);
        h = mix(h, w);
    }
    h *= 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static size_t interned(const Interner *t) { return t->names.n / sizeof(Name); }

static int grow_slots(Interner *t) {
    size_t cap = t->slots ? 2 * (t->mask + 1) : 256;
    int64_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return 0;
    const Name *names = (const Name *)t->names.data;
    for (size_t c = 0; c < interned(t); c++) {
        size_t i = names[c].hash & (cap - 1);
        while (slots[i]) i = (i + 1) & (cap - 1);
        slots[i] = (int64_t)c + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->mask = cap - 1;
    return 1;
}

/* The code of s, a new one (the next) if it is new; -1 when out of memory. */
static int64_t intern(Interner *t, const uchar *s, size_t n) {
    if ((!t->slots || 2 * (interned(t) + 1) > t->mask + 1) && !grow_slots(t)) return -1;
    uint64_t h = hash_bytes(s, n);
    size_t i = h & t->mask;
    const Name *names = (const Name *)t->names.data;
    for (int64_t c; (c = t->slots[i]); i = (i + 1) & t->mask) {
        const Name *x = &names[c - 1];
        if (x->hash == h && x->len == n && !memcmp(t->text.data + x->off, s, n)) return c - 1;
    }
    Name x = {t->text.n, n, h};
    if (!buf_add(&t->text, s, n) || !buf_add(&t->names, &x, sizeof x)) return -1;
    t->slots[i] = (int64_t)interned(t);
    return (int64_t)interned(t) - 1;
}

static void interner_free(Interner *t) {
    free(t->text.data);
    free(t->names.data);
    free(t->slots);
}

/* ------------------------------------------------------------------ tables */

/* Row columns: name code, times (float64), and int64 values from the event or its args. */
enum { C_NAME, C_TS, C_DUR, C_PID, C_TID, C_DEVICE, C_STREAM, C_CORRELATION, C_BYTES,
       C_GRID_X, C_GRID_Y, C_GRID_Z, C_BLOCK_X, C_BLOCK_Y, C_BLOCK_Z, C_DRIVER, C_END };

static const char *column_names[C_END] = {
    "name", "start", "end", "pid", "tid", "device", "stream", "correlation", "bytes",
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "kind",
};

enum { T_KERNELS, T_API, T_RANGES, T_CPU_OPS, T_MEMCPY, T_MEMSET, T_MODULES, NT };

#define MAX_COLUMNS 12
static const struct {
    const char *name;
    const char *name_column; /* what the rows call the name code */
    int ncols;
    int cols[MAX_COLUMNS];
} tables[NT] = {
    {"kernels", "name", 12, {C_NAME, C_TS, C_DUR, C_DEVICE, C_STREAM, C_CORRELATION,
                             C_GRID_X, C_GRID_Y, C_GRID_Z, C_BLOCK_X, C_BLOCK_Y, C_BLOCK_Z}},
    {"api", "name", 7, {C_NAME, C_TS, C_DUR, C_PID, C_TID, C_CORRELATION, C_DRIVER}},
    {"ranges", "name", 5, {C_NAME, C_TS, C_DUR, C_PID, C_TID}},
    {"cpu_ops", "name", 5, {C_NAME, C_TS, C_DUR, C_PID, C_TID}},
    {"memcpy", "kind", 7, {C_TS, C_DUR, C_DEVICE, C_STREAM, C_CORRELATION, C_BYTES, C_NAME}},
    {"memset", NULL, 6, {C_TS, C_DUR, C_DEVICE, C_STREAM, C_CORRELATION, C_BYTES}},
    {"modules", "name", 5, {C_NAME, C_TS, C_DUR, C_PID, C_TID}},
};

typedef struct {
    char ph;
    size_t name_off, name_len; /* into Scan.be_names, B only */
    int64_t pid, tid;
    double ts;
} BeginEnd;

/* A trie of the byte layouts of the events seen: a node is the literal bytes up to a value
   (whitespace, punctuation, the key) and what the generic parse did with that value. */
#define MEMO_MAX 40
#define MEMO_GIVE_UP -16

typedef struct {
    uint32_t lit, len;      /* the literal, in Shapes.text */
    int32_t child, sibling; /* node indices, -1 for none */
    uint8_t action, key, depth;
    uint8_t vlen; /* ACT_INLINE: the literal ends with the field's string value, this long */
    /* The last value read here, when short: values repeat (a kernel's grid, a constant arg),
       and the same bytes in the same place are the same value, read as before. */
    uint8_t memo_len; /* 0: none */
    int8_t memo_score; /* hits raise it, misses lower it; memos stop below MEMO_GIVE_UP */
    Val memo_val;
    Dims memo_dims;
    uchar memo[MEMO_MAX + 16]; /* padded for whole-vector compares */
} Node;

typedef struct {
    Buf nodes; /* Node */
    Buf text;  /* literals, each followed by 16 bytes of padding for whole-vector loads */
    int32_t root; /* the first node of the first level, -1 for none */
} Shapes;

#define MAX_NODES 4096
#define MAX_SHAPE_TEXT (1 << 20)

/* A table's rows column after column: each column's values one after another, cap apart
   while rows are added. Copied into the trace's columns, a column is then read once, not once
   per column of the row; and written in place, rows need no second buffer to be turned. */
typedef struct {
    int64_t *cols;
    size_t n, cap;
} Rows;

/* Device activity that makes no rows, counted per kind: events.OTHER_GPU, in its order. */
static const char *const other_gpu[] = {"gpu_user_annotation", "cuda_sync", "cuda_event", "cuda_profiler_range",
                                        "overhead", "hardware_counters", "mtia_ccp_events", "mtia_counters",
                                        "xpu_sync", "xpu_scope_profiler"};
#define N_OTHER_GPU ((int)(sizeof other_gpu / sizeof other_gpu[0]))

typedef struct {
    Rows rows[NT];
    Interner names[NT];
    Buf begin_end; /* BeginEnd */
    Buf be_names;
    Buf scratch;   /* an escaped string's text */
    Shapes shapes;
    Py_ssize_t events, other_gpu[N_OTHER_GPU];
    int cpu_ops; /* 0: cpu_op rows are checked, not kept (the trace has GPU events) */
    size_t bytes; /* of the events scanned */
} Scan;

/* ------------------------------------------------------------------ routing and checks */

enum { G_NOMEM = -2, G_NONE = -1, G_RANGES_BE = NT, G_OTHER_GPU };

/* A string field's text (escapes resolved into scratch); NULL when out of memory. */
static const uchar *text_of(Scan *s, const Val *v, size_t *n) {
    if (!v->esc) {
        *n = v->n;
        return v->s;
    }
    s->scratch.n = 0;
    if (!buf_reserve(&s->scratch, v->n + 1)) return NULL;
    *n = unescape(v, s->scratch.data);
    return s->scratch.data;
}

/* Whether the n bytes at c are word, letters compared without regard to case: Kineto's
   generations spell categories differently (Kernel, kernel). */
static int same_word(const uchar *c, size_t n, const char *word) {
    size_t k = strlen(word);
    if (n != k) return 0;
    for (size_t i = 0; i < k; i++) {
        uchar x = c[i];
        if ((x >= 'A' && x <= 'Z' ? x + ('a' - 'A') : x) != (uchar)word[i]) return 0;
    }
    return 1;
}

/* Whether an event's name (a string) starts with prefix, decided on its first bytes. */
static int name_starts(Scan *s, const Event *e, const char *prefix) {
    const size_t k = strlen(prefix);
    const Val *name = &e->f[F_NAME];
    size_t n;
    const uchar *t;
    if (name->type != T_STR || name->n < k) return 0; /* escapes only shorten the text */
    if (!name->esc) return !memcmp(name->s, prefix, k);
    if (!(t = text_of(s, name, &n))) return -1;
    return n >= k && !memcmp(t, prefix, k);
}

/* Where events._route routes the event (a table, B/E, a kind of other GPU activity,
   nowhere); *ph is its ph if that is one character. Categories are matched whatever their
   case, and 2021-era PyTorch's Runtime, Operator, Memcpy, Memset as today's names. */
static int route(Scan *s, const Event *e, char *ph, int *driver) {
    const Val *cat = &e->f[F_CAT];
    size_t n;
    const uchar *c;
    if (cat->type != T_STR || e->f[F_PH].type != T_STR) return G_NONE;
    if (!(c = text_of(s, &e->f[F_PH], &n))) return G_NOMEM;
    *ph = n == 1 ? (char)c[0] : 0;
    if (!(c = text_of(s, cat, &n))) return G_NOMEM;
    *driver = 0;
#define IS(word) same_word(c, n, word)
    if (IS("user_annotation")) return *ph == 'X' ? T_RANGES : *ph == 'B' || *ph == 'E' ? G_RANGES_BE : G_NONE;
    if (*ph != 'X') return G_NONE;
    if (IS("kernel")) return T_KERNELS;
    if (IS("cuda_runtime") || IS("runtime")) return T_API;
    if (IS("cuda_driver")) {
        *driver = 1;
        return T_API;
    }
    if (IS("cpu_op")) return T_CPU_OPS;
    if (IS("operator")) {
        /* a 2021-era op: the profiler's steps are ranges (events.STEP_PREFIX) */
        int step = name_starts(s, e, "ProfilerStep#"); /* after the last use of c: it may reuse scratch */
        return step < 0 ? G_NOMEM : step ? T_RANGES : T_CPU_OPS;
    }
    if (IS("python_function")) {
        int module = name_starts(s, e, "nn.Module: "); /* modules.PREFIX */
        return module < 0 ? G_NOMEM : module ? T_MODULES : G_NONE;
    }
    if (IS("gpu_memcpy") || IS("memcpy")) return T_MEMCPY;
    if (IS("gpu_memset") || IS("memset")) return T_MEMSET;
    for (int k = 0; k < N_OTHER_GPU; k++)
        if (IS(other_gpu[k])) return G_OTHER_GPU + k;
#undef IS
    return G_NONE;
}

static const double MAX_US = (double)(1ULL << 62) / 1000.0; /* kineto._MAX_US */

/* A time as the checks there take it: a finite number below _MAX_US in magnitude. */
static int time_of(const Val *v, double *out) {
    if (v->type != T_INT && v->type != T_NUM) return 0;
    double x = number(v);
    if (!isfinite(x) || fabs(x) >= MAX_US) return 0;
    *out = x;
    return 1;
}

/* An id as kineto._ints takes it: an int, or -1 when missing or null. */
static int id_of(const Val *v, int64_t *out) {
    if (v->type == T_INT) *out = v->i;
    else if (v->type == T_MISSING || v->type == T_NULL) *out = -1;
    else return 0;
    return 1;
}

/* zlib's CRC-32 (reflected 0xEDB88320), by table: columns.ident codes a pid or tid that is a
   name ("stream 7" in 2020-2021 PyTorch's GPU events) by it. */
static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

static uint32_t crc32_of(const uchar *s, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ s[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* A pid or tid as columns.ident takes it: an id (id_of), or a string: its number where it
   is digits after a minus at most ("4093687616": 2020-2021 PyTorch's CPU threads), else
   -1 - (its CRC-32 & 0x7fffffff). Declined, for the other path to word or code: escapes,
   bytes beyond ASCII, whitespace or a control byte at either end (Python's strip), more
   than one minus, and more digits than an int64 surely holds. */
static int ident_of(const Val *v, int64_t *out) {
    if (v->type != T_STR) return id_of(v, out);
    const uchar *t = v->s;
    size_t n = v->n, minus = 0, digits = 0;
    if (v->esc || (n && (t[0] <= ' ' || t[n - 1] <= ' '))) return 0;
    for (size_t i = 0; i < n; i++)
        if (t[i] >= 0x80) return 0;
    while (minus < n && t[minus] == '-') minus++;
    while (minus + digits < n && t[minus + digits] >= '0' && t[minus + digits] <= '9') digits++;
    if (!digits || minus + digits < n) {
        *out = -1 - (int64_t)(crc32_of(t, n) & 0x7FFFFFFFu);
        return 1;
    }
    if (minus > 1 || digits > 18) return 0;
    int64_t x = 0;
    for (size_t i = minus; i < n; i++) x = 10 * x + (t[i] - '0');
    *out = minus ? -x : x;
    return 1;
}

/* Below this many ns, a time of microseconds with three decimals, read as a double and
   turned into ns by ns_of, gives its digits back: the double is within half a unit in the
   last place of the true value, 2**-11 us at most below 2**43 us, which is less than half a
   ns, and ns_of rounds to the nearest ns. */
#define NS_EXACT (1000ULL << 43)

/* Microseconds to integer ns as kineto._ns makes them: whole microseconds and the fraction
   apart, so that epoch-sized times stay exact. */
static int64_t ns_of(double us) {
    /* floor and rint without a call into libm: |us| < 2**53 here (MAX_US), and adding and
       taking away 1.5 * 2**52 rounds a fraction to nearest, ties to even, as rint does */
    int64_t whole = (int64_t)us;
    whole -= (double)whole > us;
    double frac = (us - (double)whole) * 1000.0 + 0x1.8p52;
    return whole * 1000 + (int64_t)(frac - 0x1.8p52);
}

/* One value of a table's column (ts and dur as ns); 0 to decline. */
static int column(Scan *s, int table, int col, const Event *e, int driver, int64_t *out) {
    const Val *args = &e->f[F_ARGS];
    switch (col) {
    case C_NAME: {
        size_t n;
        const uchar *t;
        if (e->f[F_NAME].type != T_STR) return 0;
        if (!(t = text_of(s, &e->f[F_NAME], &n))) return -1;
        *out = intern(&s->names[table], t, n);
        return *out < 0 ? -1 : 1;
    }
    case C_TS:
    case C_DUR: {
        const Val *v = &e->f[col == C_TS ? F_TS : F_DUR];
        double x;
        if (v->type == T_NUM && v->exp10 == -3 && v->exact && !v->neg && v->m < NS_EXACT) {
            /* microseconds with three decimals (torch.profiler's): the digits are the ns */
            *out = (int64_t)v->m;
            return 1;
        }
        if (!time_of(v, &x)) return 0;
        *out = ns_of(x);
        return 1;
    }
    case C_PID: return ident_of(&e->f[F_PID], out);
    case C_TID: return ident_of(&e->f[F_TID], out);
    case C_DRIVER: *out = driver; return 1;
    }
    /* the args' values: args must be an object, or missing or null (then so are they) */
    if (args->type != T_OBJ && args->type != T_MISSING && args->type != T_NULL) return 0;
    switch (col) {
    case C_DEVICE: return id_of(&e->a[A_DEVICE], out);
    case C_STREAM: return id_of(&e->a[A_STREAM], out);
    case C_CORRELATION: return id_of(&e->a[A_CORRELATION], out);
    case C_BYTES: return id_of(&e->a[A_BYTES], out);
    }
    /* grid and block: missing or null is -1s; a list of ints is padded with 1s to three */
    int which = col >= C_BLOCK_X, k = col - (which ? C_BLOCK_X : C_GRID_X);
    const Val *v = &e->a[which ? A_BLOCK : A_GRID];
    const Dims *d = &e->dims[which];
    if (v->type == T_MISSING || v->type == T_NULL) *out = -1;
    else if (v->type == T_ARR && d->ok) *out = d->v[k];
    else return 0;
    return 1;
}

/* Rows per byte of events of each table in the last piece this thread scanned: the pieces of
   a file are alike, so a table's room is sized by the last one's and rarely grows (growing
   copies the rows), and little room is left over to close up (what is moved into it lands on
   fresh pages, whose first touch is dear on a VM). */
static _Thread_local double rows_per_byte[NT];

static size_t rows_hint(const Scan *s, int table) {
    double rate = rows_per_byte[table] > 0 ? rows_per_byte[table] : 1.0 / 256;
    return (size_t)(rate * 1.05 * (double)s->bytes) + 64;
}

/* Room for cap rows. */
static int rows_grow(Rows *t, int ncols, size_t cap) {
    int64_t *cols = malloc(cap * ncols * sizeof(int64_t));
    if (!cols) return 0;
    for (int c = 0; c < ncols && t->n; c++) memcpy(cols + c * cap, t->cols + c * t->cap, t->n * sizeof(int64_t));
    free(t->cols);
    t->cols = cols;
    t->cap = cap;
    return 1;
}

/* An event's row; with keep 0 it is only checked as the other path checks it (a row that
   would be dropped later must still be valid, or the same error would not be raised). */
static int add_row(Scan *s, int table, const Event *e, int driver, int keep) {
    int64_t row[MAX_COLUMNS];
    for (int c = 0; c < tables[table].ncols; c++) {
        if (!keep && tables[table].cols[c] == C_NAME) {
            if (e->f[F_NAME].type != T_STR) return DECLINE;
            continue;
        }
        int r = column(s, table, tables[table].cols[c], e, driver, &row[c]);
        if (r <= 0) return r < 0 ? NOMEM : DECLINE;
        if (tables[table].cols[c] == C_DUR) row[c] += row[c - 1]; /* the end: ts comes just before */
    }
    if (!keep) return OK;
    int ncols = tables[table].ncols;
    Rows *t = &s->rows[table];
    if (t->n == t->cap && !rows_grow(t, ncols, t->cap ? 2 * t->cap : rows_hint(s, table))) return NOMEM;
    for (int c = 0; c < ncols; c++) t->cols[c * t->cap + t->n] = row[c];
    t->n++;
    return OK;
}

/* A B/E range event as kineto._begin_end takes it: int pid/tid, a time, a name for B. */
static int add_begin_end(Scan *s, const Event *e, char ph) {
    BeginEnd be = {0};
    be.ph = ph;
    if (e->f[F_PID].type != T_INT || e->f[F_TID].type != T_INT || !time_of(&e->f[F_TS], &be.ts)) return DECLINE;
    be.pid = e->f[F_PID].i;
    be.tid = e->f[F_TID].i;
    if (be.ph == 'B') {
        size_t n;
        const uchar *t;
        if (e->f[F_NAME].type != T_STR) return DECLINE;
        if (!(t = text_of(s, &e->f[F_NAME], &n))) return NOMEM;
        be.name_off = s->be_names.n;
        be.name_len = n;
        if (!buf_add(&s->be_names, t, n)) return NOMEM;
    }
    return buf_add(&s->begin_end, &be, sizeof be) ? OK : NOMEM;
}

static int add_event(Scan *s, const Event *e) {
    int driver;
    char ph;
    int g = route(s, e, &ph, &driver);
    s->events++;
    if (g == G_NONE) return OK;
    if (g == G_NOMEM) return NOMEM;
    if (g >= G_OTHER_GPU) {
        s->other_gpu[g - G_OTHER_GPU]++;
        return OK;
    }
    if (g == G_RANGES_BE) return add_begin_end(s, e, ph);
    return add_row(s, g, e, driver, g != T_CPU_OPS || s->cpu_ops);
}

/* ------------------------------------------------------------------ shapes

   Most events of a trace repeat a few byte layouts: the same keys in the same order with the
   same whitespace, only the values differ. An event that follows a layout seen before is read
   by comparing its literal bytes and parsing just its values, each with the function the
   generic parse used for that key; the result is the same because equal bytes in the same
   place of the grammar parse the same way. An event that leaves every known layout is parsed
   generically from its start, and its layout joins the trie. */

/* Whether the n bytes at p are lit (which has 16 bytes of padding after it). */
static inline int literal_at(const uchar *p, const uchar *end, const uchar *lit, size_t n) {
    if ((size_t)(end - p) < n) return 0;
#ifdef __SSE2__
    for (; n >= 16; p += 16, lit += 16, n -= 16)
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), _mm_loadu_si128((const __m128i *)lit))) != 0xFFFF)
            return 0;
    if (!n) return 1;
    if (end - p >= 16) {
        unsigned want = (1u << n) - 1;
        unsigned eq = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), _mm_loadu_si128((const __m128i *)lit)));
        return (eq & want) == want;
    }
#endif
    return !memcmp(p, lit, n);
}

static inline Node *node_at(const Shapes *t, int32_t i) { return (Node *)t->nodes.data + i; }

/* The first child of parent (-1: the first level). */
static inline int32_t *children(Shapes *t, int32_t parent) {
    return parent < 0 ? &t->root : &node_at(t, parent)->child;
}

/* The child of parent with this literal and action, added if there is none; -1 when the
   trie is full or out of memory (the layout is then just not remembered). */
static int32_t shape_node(Shapes *t, int32_t parent, const uchar *lit, size_t len, const Step *step) {
    for (int32_t i = *children(t, parent); i >= 0; i = node_at(t, i)->sibling) {
        const Node *n = node_at(t, i);
        if (n->len == len && n->action == step->action && n->key == step->key && n->depth == step->depth &&
            !memcmp(t->text.data + n->lit, lit, len))
            return i;
    }
    size_t count = t->nodes.n / sizeof(Node);
    if (count >= MAX_NODES || t->text.n + len + 16 > MAX_SHAPE_TEXT) return -1;
    Node n = {.lit = (uint32_t)t->text.n, .len = (uint32_t)len, .child = -1, .sibling = *children(t, parent),
              .action = step->action, .key = step->key, .depth = step->depth,
              .vlen = step->action == ACT_INLINE ? (uint8_t)(step->end - step->start) : 0};
    static const uchar pad[16];
    /* adding moves the nodes: parent is linked by index afterwards */
    if (!buf_add(&t->text, lit, len) || !buf_add(&t->text, pad, 16) || !buf_add(&t->nodes, &n, sizeof n)) return -1;
    *children(t, parent) = (int32_t)count;
    return (int32_t)count;
}

/* Whether the trie branches on a step's value, taking it as part of the literal: ph and cat
   strings without escapes. A kind of event then has nodes of its own from its start, whose
   remembered values (pid, tid, ...) hold, where events of several kinds sharing a node would
   change them all the time. */
static int inlinable(const Step *step) {
    size_t n = (size_t)(step->end - step->start);
    return step->action == ACT_FIELD && (step->key == F_PH || step->key == F_CAT) && n >= 2 && n <= 40 &&
           step->start[0] == '"' && step->end[-1] == '"' && !memchr(step->start + 1, '\\', n - 2);
}

/* Adds the layout of the event at [start, end) whose values rec holds. */
static void shape_add(Shapes *t, const Rec *rec, const uchar *start, const uchar *end) {
    if (rec->n > MAX_STEPS) return;
    int32_t parent = -1;
    const uchar *at = start;
    for (int k = 0; k <= rec->n; k++) {
        Step last = {end, end, ACT_END, 0, 0}, inlined;
        const Step *step = k < rec->n ? &rec->steps[k] : &last;
        if (inlinable(step)) {
            inlined = *step;
            inlined.action = ACT_INLINE;
            step = &inlined;
        }
        parent = shape_node(t, parent, at, (size_t)((step->action == ACT_INLINE ? step->end : step->start) - at), step);
        if (parent < 0) return;
        at = step->end;
    }
}

/* The event at *pp read along a known layout; 0 when it follows none (e is then dirty). */
static int shape_event(Shapes *t, Event *e, const uchar **pp, const uchar *end) {
    const uchar *p = *pp;
    const uchar *text = t->text.data;
    int32_t *head = &t->root;
    for (;;) {
        Node *n;
        int32_t *link = head, *before = NULL; /* the links to this sibling and the one before */
        for (;; before = link, link = &n->sibling) {
            if (*link < 0) return 0;
            n = node_at(t, *link);
            if (literal_at(p, end, text + n->lit, n->len)) break;
        }
        if (before) {
            /* one place forward: the siblings taken most often come to be tried first */
            int32_t i = *link, prev = *before;
            *link = n->sibling;
            n->sibling = prev;
            *before = i;
        }
        head = &n->child;
        p += n->len;
        if (n->action == ACT_END) {
            *pp = p;
            return 1;
        }
        if (n->action == ACT_INLINE) {
            Val *v = &e->f[n->key];
            if (v->type != T_MISSING) return 0; /* given twice: declined, as there */
            *v = (Val){.type = T_STR, .s = p - n->vlen + 1, .n = (size_t)n->vlen - 2};
        } else if (n->action == ACT_ARGS_OPEN) {
            if (e->f[F_ARGS].type != T_MISSING) return 0;
            e->f[F_ARGS].type = T_OBJ;
        } else {
            if (p >= end) return 0;
            /* A string or number goes where the member function would put it (a field given
               twice is declined there too); other values take the member function itself. */
            int skip = n->action == ACT_SKIP;
            Val skipped, *v = skip ? &skipped : n->action == ACT_FIELD ? &e->f[n->key] : &e->a[n->key];
            Dims *d = n->action == ACT_ARG && (n->key == A_GRID || n->key == A_BLOCK) ? &e->dims[n->key - A_GRID] : NULL;
            if (skip) skipped.type = T_MISSING;
            else if (v->type != T_MISSING) return 0;
            if (n->memo_len && literal_at(p, end, n->memo, n->memo_len)) {
                n->memo_score += n->memo_score < 64;
                /* a number's end is certain too: what follows a value is never a digit */
                if (!skip) {
                    *v = n->memo_val;
                    v->s = p + (v->type == T_STR);
                    if (d) *d = n->memo_dims;
                }
                p += n->memo_len;
            } else {
                const uchar *value = p;
                int ok = *p == '"'                   ? scan_string(&p, end, v)
                         : *p == '-' || is_digit(*p) ? scan_number(&p, end, v)
                         : n->action == ACT_SKIP     ? skip_value(&p, end, n->depth)
                         : n->action == ACT_FIELD    ? event_member(e, n->key, &p, end, n->depth)
                                                     : args_member(e, n->key, &p, end, n->depth);
                if (!ok) return 0;
                if (n->memo_score > MEMO_GIVE_UP) {
                    size_t len = (size_t)(p - value);
                    n->memo_score -= 2;
                    n->memo_len = len <= MEMO_MAX && n->memo_score > MEMO_GIVE_UP ? (uint8_t)len : 0;
                    if (n->memo_len) {
                        memcpy(n->memo, value, len);
                        n->memo_val = *v;
                        if (d) n->memo_dims = *d;
                    }
                }
            }
        }
    }
}

static void event_clear(Event *e, Rec *rec) {
    for (int k = 0; k < NF; k++) e->f[k].type = T_MISSING;
    for (int k = 0; k < NA; k++) e->a[k].type = T_MISSING;
    e->rec = rec;
    if (rec) rec->n = 0;
}

/* The event at *pp, along a known layout or else generically (then its layout is learnt). */
static int scan_event(Scan *s, Event *e, Rec *rec, const uchar **pp, const uchar *end) {
    const uchar *start = *pp;
    event_clear(e, NULL);
    if (shape_event(&s->shapes, e, pp, end)) return 1;
    *pp = start;
    event_clear(e, rec);
    if (!scan_object(pp, end, event_keys, NF, event_member, e, 1)) return 0;
    shape_add(&s->shapes, rec, start, *pp);
    return 1;
}

/* The array at data, or with bare the events from data to end and nothing after them (what
   the array "[" data "]" would hold): its events into s; *end_out is the offset past it. */
static int scan_events(Scan *s, const uchar *data, const uchar *end, int bare, Py_ssize_t *end_out) {
    const uchar *p = data;
    if (!bare) {
        if (p >= end || *p != '[') return DECLINE;
        p = skip_ws(p + 1, end);
        if (p < end && *p == ']') {
            *end_out = p + 1 - data;
            return OK;
        }
    } else p = skip_ws(p, end);
    Rec rec;
    for (;;) {
        Event e;
        if (p >= end || *p != '{') return DECLINE;
        if (!scan_event(s, &e, &rec, &p, end)) return DECLINE;
        int r = add_event(s, &e);
        if (r != OK) return r;
        p = skip_ws(p, end);
        if (bare && p == end) {
            *end_out = end - data;
            return OK;
        }
        if (p >= end) return DECLINE;
        if (!bare && *p == ']') {
            *end_out = p + 1 - data;
            return OK;
        }
        if (*p != ',') return DECLINE;
        p = skip_ws(p + 1, end);
    }
}

/* ------------------------------------------------------------------ results */

static void scan_free(Scan *s) {
    for (int t = 0; t < NT; t++) {
        free(s->rows[t].cols);
        interner_free(&s->names[t]);
    }
    free(s->begin_end.data);
    free(s->be_names.data);
    free(s->scratch.data);
    free(s->shapes.nodes.data);
    free(s->shapes.text.data);
}

static PyObject *names_list(const Interner *t) {
    size_t n = interned(t);
    const Name *names = (const Name *)t->names.data;
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t c = 0; out && c < n; c++) {
        PyObject *s = PyUnicode_DecodeUTF8((const char *)t->text.data + names[c].off, names[c].len, "strict");
        if (!s) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, c, s);
    }
    return out;
}

static PyObject *begin_end_list(const Scan *s) {
    size_t n = s->begin_end.n / sizeof(BeginEnd);
    const BeginEnd *be = (const BeginEnd *)s->begin_end.data;
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t k = 0; out && k < n; k++) {
        PyObject *name = be[k].ph == 'B'
            ? PyUnicode_DecodeUTF8((const char *)s->be_names.data + be[k].name_off, be[k].name_len, "strict")
            : Py_NewRef(Py_None);
        PyObject *t = name ? Py_BuildValue("(s#NLLd)", &be[k].ph, (Py_ssize_t)1, name, (long long)be[k].pid,
                                           (long long)be[k].tid, be[k].ts)
                           : NULL;
        if (!t) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, k, t);
    }
    return out;
}

/* A table's rows, handed over rather than copied: a copy was made with the GIL held, into
   as much fresh memory again. */
typedef struct {
    PyObject_HEAD
    uchar *data;
    Py_ssize_t n;
} RowsObject;

static int rows_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    RowsObject *r = (RowsObject *)self;
    return PyBuffer_FillInfo(view, self, r->data, r->n, 0, flags);
}

static void rows_dealloc(PyObject *self) {
    free(((RowsObject *)self)->data);
    Py_TYPE(self)->tp_free(self);
}

static Py_ssize_t rows_len(PyObject *self) { return ((RowsObject *)self)->n; }

static PyBufferProcs rows_buffer = {rows_getbuffer, NULL};
static PySequenceMethods rows_sequence = {.sq_length = rows_len}; /* empty ones are false */

static PyTypeObject RowsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_kineto_scan.Rows",
    .tp_basicsize = sizeof(RowsObject),
    .tp_dealloc = rows_dealloc,
    .tp_as_buffer = &rows_buffer,
    .tp_as_sequence = &rows_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A table's rows from scan (a buffer).",
};

/* The columns of t side by side (the room between them dropped), *bytes long; t is left
   empty. */
static uchar *rows_close(Rows *t, int ncols, size_t *bytes) {
    for (int c = 1; c < ncols && t->n < t->cap; c++)
        memmove(t->cols + c * t->n, t->cols + c * t->cap, t->n * sizeof(int64_t));
    uchar *data = (uchar *)t->cols;
    *bytes = t->n * ncols * sizeof(int64_t);
    if (t->n < t->cap) {
        uchar *d = realloc(data, *bytes ? *bytes : 1); /* the room would be held until the trace is built */
        if (d) data = d;
    }
    t->cols = NULL;
    t->n = t->cap = 0;
    return data;
}

/* The rows of t (see rows_close) as a RowsObject that owns them. */
static PyObject *rows_of(Rows *t, int ncols) {
    RowsObject *r = PyObject_New(RowsObject, &RowsType);
    if (!r) return NULL;
    size_t bytes;
    r->data = rows_close(t, ncols, &bytes);
    r->n = (Py_ssize_t)bytes;
    return (PyObject *)r;
}

static PyObject *result(Scan *s, Py_ssize_t end) {
    PyObject *per_table = PyTuple_New(NT);
    for (int t = 0; per_table && t < NT; t++) {
        PyObject *names = tables[t].name_column ? names_list(&s->names[t]) : Py_NewRef(Py_None);
        PyObject *rows = names ? rows_of(&s->rows[t], tables[t].ncols) : NULL;
        if (!rows) {
            Py_XDECREF(names);
            Py_CLEAR(per_table);
            break;
        }
        PyTuple_SET_ITEM(per_table, t, Py_BuildValue("(NN)", names, rows));
        if (!PyTuple_GET_ITEM(per_table, t)) Py_CLEAR(per_table);
    }
    if (!per_table) return NULL;
    PyObject *be = begin_end_list(s);
    if (!be) {
        Py_DECREF(per_table);
        return NULL;
    }
    PyObject *other = PyTuple_New(N_OTHER_GPU);
    for (int k = 0; other && k < N_OTHER_GPU; k++) {
        PyObject *count = PyLong_FromSsize_t(s->other_gpu[k]);
        if (!count) Py_CLEAR(other);
        else PyTuple_SET_ITEM(other, k, count);
    }
    if (!other) {
        Py_DECREF(per_table);
        Py_DECREF(be);
        return NULL;
    }
    return Py_BuildValue("(nnNNN)", end, s->events, other, per_table, be);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Scan s;
    Py_ssize_t start = 0, stop = -1, end = 0;
    int r, cpu_ops = 1;
    if (!PyArg_ParseTuple(args, "y*|nnp", &view, &start, &stop, &cpu_ops)) return NULL;
    int bare = PyTuple_GET_SIZE(args) > 1;
    if (stop < 0) stop = view.len;
    if (start < 0 || start > stop || stop > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "start and stop must lie in the buffer, in order");
        return NULL;
    }
    memset(&s, 0, sizeof s);
    s.shapes.root = -1;
    s.cpu_ops = cpu_ops;
    s.bytes = (size_t)(stop - start);
    const uchar *data = (const uchar *)view.buf + start;
    Py_BEGIN_ALLOW_THREADS
    r = scan_events(&s, data, (const uchar *)view.buf + stop, bare, &end);
    for (int t = 0; r == OK && s.bytes && t < NT; t++)
        if (s.rows[t].n) rows_per_byte[t] = (double)s.rows[t].n / (double)s.bytes;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *out = r == OK ? result(&s, end) : r == NOMEM ? PyErr_NoMemory() : Py_NewRef(Py_None);
    scan_free(&s);
    return out;
}

/* TABLES: (table, name column or None, row columns) in the order of scan's tables. */
static PyObject *tables_spec(void) {
    PyObject *out = PyTuple_New(NT);
    for (int t = 0; out && t < NT; t++) {
        PyObject *cols = PyTuple_New(tables[t].ncols);
        for (int c = 0; cols && c < tables[t].ncols; c++) {
            int col = tables[t].cols[c];
            const char *name = col == C_NAME ? tables[t].name_column : column_names[col];
            PyObject *s = PyUnicode_FromString(name);
            if (!s) Py_CLEAR(cols);
            else PyTuple_SET_ITEM(cols, c, s);
        }
        PyObject *item = cols ? Py_BuildValue("(szN)", tables[t].name, tables[t].name_column, cols) : NULL;
        if (!item) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, t, item);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data[, start, stop[, cpu_ops]]): columns (one after another) of the JSON array of Kineto events data begins with, or "
     "with start and stop of the events data[start:stop] holds (the array's insides); None to leave them to "
     "the other path. cpu_ops false: cpu_op events are checked but give no rows."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kineto_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kineto_scan(void) {
    key_heads(event_keys, NF);
    key_heads(args_keys, NA);
    crc_init();
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (!c_locale) return PyErr_NoMemory();
    if (PyType_Ready(&RowsType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *spec = tables_spec();
    if (!spec || PyModule_AddObject(m, "TABLES", spec) < 0) {
        Py_XDECREF(spec);
        Py_DECREF(m);
        return NULL;
    }
    PyObject *kinds = PyTuple_New(N_OTHER_GPU);
    for (int k = 0; kinds && k < N_OTHER_GPU; k++) {
        PyObject *kind = PyUnicode_FromString(other_gpu[k]);
        if (!kind) Py_CLEAR(kinds);
        else PyTuple_SET_ITEM(kinds, k, kind);
    }
    if (!kinds || PyModule_AddObject(m, "OTHER_GPU", kinds) < 0) {
        Py_XDECREF(kinds);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
