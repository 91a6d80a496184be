/* Columns of a SQLite rowid table read straight from the file's b-tree pages.
 *
 * SQLite's own row stepping (the VDBE, one sqlite3_column call per value) costs about a
 * second per million Nsight Systems kernel rows; walking the table's leaf pages and decoding
 * the records' serial types directly costs a few tens of milliseconds. The page walk and the
 * decoding run without the GIL, so two tables are read at once on two threads.
 *
 * Only what can be vouched for is read: a UTF-8 database, a table b-tree whose pages, cells,
 * records and overflow chains are all well formed, INTEGER (or NULL) values in the integer
 * columns and TEXT (or NULL) in the text columns. Anything else declines (None), and the
 * caller reads the table through sqlite3, which also words the errors about damaged files.
 * The caller makes sure no journal or WAL file holds changes the main file lacks.
 *
 * File format: https://www.sqlite.org/fileformat2.html
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 40 /* a b-tree of 2^32 pages is far shallower */

typedef struct {
    int fd;
    uint32_t page_size, usable, npages;
    uint8_t *page;     /* the page being decoded */
    uint8_t *scratch;  /* a record spilled onto overflow pages, reassembled */
    size_t scratch_cap;
    uint8_t *ovfl;     /* one overflow page */
} Db;

typedef struct {
    uint32_t *pages;
    size_t n, cap;
    size_t cells;
    size_t visited;
} Leaves;

typedef struct {
    int ncols;
    const int *index;  /* column index in the record */
    const int *text;   /* 1: a TEXT column, 0: INTEGER */
    int rowid_col;     /* the INTEGER PRIMARY KEY column (stored as NULL), or -1 */
    int64_t **values;  /* per integer column */
    uint8_t **nulls;   /* per column: 1 where NULL */
    size_t *any_null;
    /* text columns: each row's index into its column's distinct values (-1: NULL) */
    int32_t **codes;
    struct Dict *dicts;
    struct Shape *shapes;  /* SHAPES of them */
    uint16_t *shape_at;    /* per shape, ncols each: where a column's value starts in the record */
    uint16_t *shape_type;  /* per shape, ncols each: its serial type */
} Out;

/* A record header already decoded: the bytes of a header give every column's type, so the
 * same bytes give the same value offsets. A table's rows come in a few dozen such shapes (a
 * kernel's grid, block and shared memory sizes set its integers' lengths), so most records
 * are decoded by looking their header up here instead of walking it column by column. */
#define SHAPES 256
#define SHAPE_BYTES 64
typedef struct Shape {
    uint64_t header[SHAPE_BYTES / 8];
    uint32_t len;   /* of header, in bytes; 0: a free slot */
    uint64_t size;  /* of the record its header describes */
} Shape;

/* Fresh memory faulted in 4 KB at a time costs as much as decoding into it; huge pages
 * (where the kernel grants them on request) a third of that. */
static void huge_pages(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
    uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, hi = ((uintptr_t)p + n) & ~(uintptr_t)4095;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#endif
}

/* The first `len` bytes of page `pgno`. */
static int read_part(Db *db, uint32_t pgno, uint8_t *buf, size_t len) {
    if (pgno < 1 || pgno > db->npages) return -1;
    off_t at = (off_t)(pgno - 1) * db->page_size;
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(db->fd, buf + got, len - got, at + (off_t)got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    return 0;
}

static int read_page(Db *db, uint32_t pgno, uint8_t *buf) { return read_part(db, pgno, buf, db->page_size); }

static inline uint32_t be16(const uint8_t *p) { return ((uint32_t)p[0] << 8) | p[1]; }
static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* A varint at p (not past end); its length, or 0 if it runs past end. */
static inline int varint(const uint8_t *p, const uint8_t *end, uint64_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) {
        if (p + i >= end) return 0;
        x = (x << 7) | (p[i] & 0x7f);
        if (!(p[i] & 0x80)) {
            *v = x;
            return i + 1;
        }
    }
    if (p + 8 >= end) return 0;
    *v = (x << 8) | p[8];
    return 9;
}

/* Leaf pages in key order, and their cell count; -1 on anything malformed. */
static int walk(Db *db, uint32_t pgno, int depth, Leaves *lv, uint8_t *buf) {
    if (depth > MAX_DEPTH || ++lv->visited > db->npages) return -1;
    /* A leaf's header says all this pass needs: the whole page is read when decoded. */
    size_t at = pgno == 1 ? 100 : 0;
    if (read_part(db, pgno, buf, at + 8)) return -1;
    const uint8_t *h = buf + at;
    uint32_t ncells = be16(h + 3);
    if (h[0] == 0x0d) {
        if (lv->n == lv->cap) {
            size_t cap = lv->cap ? 2 * lv->cap : 1024;
            uint32_t *p = realloc(lv->pages, cap * sizeof *p);
            if (!p) return -1;
            lv->pages = p, lv->cap = cap;
        }
        lv->pages[lv->n++] = pgno;
        lv->cells += ncells;
        return 0;
    }
    if (h[0] != 0x05 || read_page(db, pgno, buf)) return -1;
    /* The children are read one by one into a copy of this page's pointers. */
    if ((size_t)(h - buf) + 12 + 2 * (size_t)ncells > db->usable) return -1;
    uint32_t *kids = malloc(((size_t)ncells + 1) * sizeof *kids);
    if (!kids) return -1;
    for (uint32_t i = 0; i < ncells; i++) {
        uint32_t c = be16(h + 12 + 2 * i);
        if (c + 4 > db->usable) {
            free(kids);
            return -1;
        }
        kids[i] = be32(buf + c);
    }
    kids[ncells] = be32(h + 8);
    int rc = 0;
    for (uint32_t i = 0; i <= ncells && rc == 0; i++) rc = walk(db, kids[i], depth + 1, lv, buf);
    free(kids);
    return rc;
}

/* The payload of a cell whose local part starts at p: in place, or reassembled from its
 * overflow chain into db->scratch. */
static const uint8_t *payload(Db *db, const uint8_t *p, const uint8_t *page_end, uint64_t size) {
    uint64_t U = db->usable, X = U - 35;
    if (size <= X) return p + size <= page_end ? p : NULL;
    /* A damaged size could be anything up to 2^64: no record outgrows the file. */
    if (size > (uint64_t)db->npages * U) return NULL;
    uint64_t M = ((U - 12) * 32 / 255) - 23;
    uint64_t K = M + ((size - M) % (U - 4));
    uint64_t local = K <= X ? K : M;
    if (p + local + 4 > page_end) return NULL;
    if (size + 8 > db->scratch_cap) {
        uint8_t *s = realloc(db->scratch, size + 8);
        if (!s) return NULL;
        db->scratch = s, db->scratch_cap = size + 8;
    }
    memcpy(db->scratch, p, local);
    uint64_t have = local;
    uint32_t next = be32(p + local);
    size_t hops = 0;
    while (have < size) {
        if (next == 0 || ++hops > db->npages || read_page(db, next, db->ovfl)) return NULL;
        uint64_t take = size - have < U - 4 ? size - have : U - 4;
        memcpy(db->scratch + have, db->ovfl + 4, take);
        have += take;
        next = be32(db->ovfl);
    }
    return db->scratch;
}

/* A text column's distinct values, in order of first appearance. NVTX range names repeat
 * every step: a million ranges hold a few hundred names, so each name becomes one Python
 * string, not one per row (which also cost the GIL while the main thread needed it). */
typedef struct Dict {
    uint8_t *bytes;     /* the values back to back */
    size_t len, cap;
    size_t *start;      /* value k spans start[k]..start[k + 1] */
    uint64_t *hash;     /* of value k */
    size_t n, cap_n;
    int32_t *slot;      /* open addressing: value index + 1, 0 for a free slot */
    size_t nslots;      /* a power of two, at least twice n */
} Dict;

static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n, v;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

static int dict_grow(Dict *d) {
    size_t nslots = d->nslots ? 2 * d->nslots : 1024;
    int32_t *slot = calloc(nslots, sizeof *slot);
    if (!slot) return -1;
    for (size_t k = 0; k < d->n; k++) {
        size_t i = d->hash[k] & (nslots - 1);
        while (slot[i]) i = (i + 1) & (nslots - 1);
        slot[i] = (int32_t)(k + 1);
    }
    free(d->slot);
    d->slot = slot, d->nslots = nslots;
    return 0;
}

/* The index of value p[0..n) in d, added if new; -1 when out of memory or codes. */
static int64_t dict_code(Dict *d, const uint8_t *p, size_t n) {
    if (2 * (d->n + 1) > d->nslots && dict_grow(d)) return -1;
    uint64_t h = hash_bytes(p, n);
    size_t i = h & (d->nslots - 1);
    for (; d->slot[i]; i = (i + 1) & (d->nslots - 1)) {
        size_t k = (size_t)d->slot[i] - 1;
        if (d->hash[k] == h && d->start[k + 1] - d->start[k] == n && memcmp(d->bytes + d->start[k], p, n) == 0)
            return (int64_t)k;
    }
    if (d->n >= INT32_MAX - 1) return -1;
    if (d->n + 2 > d->cap_n) {
        size_t cap = d->cap_n ? 2 * d->cap_n : 256;
        size_t *start = realloc(d->start, cap * sizeof *start);
        if (start) d->start = start;
        uint64_t *hash = realloc(d->hash, cap * sizeof *hash);
        if (hash) d->hash = hash;
        if (!start || !hash) return -1;
        d->cap_n = cap;
        if (d->n == 0) d->start[0] = 0;
    }
    if (d->len + n > d->cap) {
        size_t cap = d->cap ? d->cap : 1 << 16;
        while (cap < d->len + n) cap *= 2;
        uint8_t *b = realloc(d->bytes, cap);
        if (!b) return -1;
        d->bytes = b, d->cap = cap;
    }
    memcpy(d->bytes + d->len, p, n);
    d->len += n;
    d->hash[d->n] = h;
    d->start[++d->n] = d->len;
    d->slot[i] = (int32_t)d->n;
    return (int64_t)d->n - 1;
}

static void dict_free(Dict *d) { free(d->bytes), free(d->start), free(d->hash), free(d->slot); }

/* Serial types 0-9 (NULL, big-endian integers of 1-8 bytes, float, the constants 0 and 1):
 * their length, and how an integer is taken from the 8 bytes at its start: shifted down
 * (sign-extending), masked, plus a constant. Branch-free, as the types change from row to
 * row and mispredicted branches cost more than the rest of the decoding. */
static const uint8_t LEN[10] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0};
static const uint8_t SHIFT[10] = {0, 56, 48, 40, 32, 16, 0, 0, 0, 0};
static const int64_t KEEP[10] = {0, -1, -1, -1, -1, -1, -1, 0, 0, 0};
static const int64_t ADD[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

static inline int64_t int_value(const uint8_t *p, uint64_t type) {
    uint64_t u;
    memcpy(&u, p, 8); /* every buffer a record lies in has 8 bytes of slack */
    u = __builtin_bswap64(u);
    return (((int64_t)u >> SHIFT[type]) & KEEP[type]) | ADD[type];
}

/* The serial type at *h (advanced past it) and its value's length; -1 when malformed. */
static inline int serial_type(const uint8_t **h, const uint8_t *hend, uint64_t *type, uint64_t *len) {
    if (**h < 0x80) {
        *type = *(*h)++;
    } else {
        int k = varint(*h, hend, type);
        if (!k) return -1;
        *h += k;
    }
    if (*type < 10) {
        *len = LEN[*type];
    } else {
        if (*type < 12) return -1;
        *len = (*type - 12) / 2;
    }
    return 0;
}

/* A header of len bytes (at most SHAPE_BYTES) as the words Shape keeps, zero past its end;
 * its slot. Whole words are loaded (records lie in buffers with 8 bytes of slack): copying a
 * header's tail byte by byte and reading it back as a word stalled each record. */
static inline uint32_t shape_words(const uint8_t *header, uint64_t len, uint64_t *w) {
    uint64_t h = len;
    for (uint64_t i = 0; i < (len + 7) / 8; i++) {
        memcpy(&w[i], header + 8 * i, 8);
        if (len - 8 * i < 8) w[i] &= ((uint64_t)1 << (8 * (len - 8 * i))) - 1; /* little-endian */
        h = (h ^ w[i]) * 0x9e3779b97f4a7c15ull;
    }
    return (uint32_t)(h >> 56) & (SHAPES - 1);
}

/* Column j of a record of a known shape: its value at p, of serial type type. */
static inline int store_value(Out *o, int j, const uint8_t *p, uint64_t type, int64_t rowid, size_t row) {
    if (o->text[j]) {
        if (type == 0) {
            o->codes[j][row] = -1;
            return 0;
        }
        int64_t code = dict_code(&o->dicts[j], p, (type - 12) / 2);
        if (code < 0) return -1;
        o->codes[j][row] = (int32_t)code;
    } else if (type == 0) {
        if (o->index[j] == o->rowid_col) {
            o->values[j][row] = rowid;
        } else {
            o->values[j][row] = 0;
            o->nulls[j][row] = 1, o->any_null[j] = 1;
        }
    } else {
        o->values[j][row] = int_value(p, type);
    }
    return 0;
}

/* One record into row `row` of the outputs; -1 when malformed, -2 for a value of a type the
 * column may not hold here. */
static int decode_record(Out *o, const uint8_t *rec, uint64_t size, int64_t rowid, size_t row) {
    const uint8_t *end = rec + size;
    uint64_t hsize;
    int n = varint(rec, end, &hsize);
    if (!n || hsize > size || hsize < (uint64_t)n) return -1;
    Shape *shape = NULL;
    uint64_t words[SHAPE_BYTES / 8];
    if (hsize <= SHAPE_BYTES) {
        uint32_t slot = shape_words(rec, hsize, words);
        shape = &o->shapes[slot];
        uint64_t differ = shape->len != hsize || shape->size != size;
        for (uint64_t i = 0; i < (hsize + 7) / 8; i++) differ |= shape->header[i] ^ words[i];
        if (!differ) {
            const uint16_t *at = o->shape_at + (size_t)slot * o->ncols, *type = o->shape_type + (size_t)slot * o->ncols;
            for (int j = 0; j < o->ncols; j++)
                if (store_value(o, j, rec + at[j], type[j], rowid, row)) return -1;
            return 0;
        }
    }
    const uint8_t *h = rec + n, *hend = rec + hsize, *body = hend;
    int col = 0, want = 0;
    /* Where this record's columns lie, kept as its shape if it has one. */
    uint16_t at[o->ncols + 1], types[o->ncols + 1];
    int keep = shape != NULL;
    uint64_t type, len;
    while (want < o->ncols) {
        if (h >= hend) break;
        if (serial_type(&h, hend, &type, &len) || len > (uint64_t)(end - body)) return -1;
        if (o->index[want] == col) {
            int j = want++;
            if (o->text[j] ? type != 0 && (type < 13 || !(type & 1)) : type == 7 || type > 9) return -2;
            if (store_value(o, j, body, type, rowid, row)) return -1;
            at[j] = (uint16_t)(body - rec), types[j] = (uint16_t)type;
            keep &= type <= UINT16_MAX && body - rec <= UINT16_MAX;
        }
        body += len;
        col++;
    }
    /* The columns not read: the record is vouched for only if its columns fill it exactly
     * (a damaged type would shift every value after it; sqlite3 calls such a record
     * malformed). */
    while (h < hend) {
        if (serial_type(&h, hend, &type, &len) || len > (uint64_t)(end - body)) return -1;
        body += len;
    }
    if (body != end) return -1;
    if (keep && want == o->ncols) {  /* a record lacking columns has no offsets to keep */
        size_t slot = (size_t)(shape - o->shapes);
        memcpy(shape->header, words, sizeof words);
        shape->len = (uint32_t)hsize;
        shape->size = size;
        memcpy(o->shape_at + slot * o->ncols, at, o->ncols * sizeof *at);
        memcpy(o->shape_type + slot * o->ncols, types, o->ncols * sizeof *types);
    }
    /* Columns added after this row was written: NULL (the caller checked their default). */
    for (int j = want; j < o->ncols; j++) store_value(o, j, body, 0, rowid, row);
    return 0;
}

static int decode_leaves(Db *db, const Leaves *lv, Out *o) {
    size_t row = 0;
    int64_t last = 0;
    for (size_t i = 0; i < lv->n; i++) {
        uint32_t pgno = lv->pages[i];
        if (read_page(db, pgno, db->page)) return -1;
        const uint8_t *h = db->page + (pgno == 1 ? 100 : 0), *page_end = db->page + db->usable;
        uint32_t ncells = be16(h + 3);
        if (h[0] != 0x0d || (size_t)(h - db->page) + 8 + 2 * (size_t)ncells > db->usable) return -1;
        for (uint32_t c = 0; c < ncells; c++) {
            uint32_t at = be16(h + 8 + 2 * c);
            if (at >= db->usable || row >= lv->cells) return -1;
            const uint8_t *p = db->page + at;
            uint64_t size, rowid;
            int k = varint(p, page_end, &size);
            if (!k) return -1;
            p += k;
            k = varint(p, page_end, &rowid);
            /* A table's rowids rise along its leaves; one out of order is a damaged page. */
            if (!k || (row && (int64_t)rowid <= last)) return -1;
            last = (int64_t)rowid;
            p += k;
            const uint8_t *rec = payload(db, p, page_end, size);
            if (!rec) return -1;
            int rc = decode_record(o, rec, size, (int64_t)rowid, row);
            if (rc) return rc;
            row++;
        }
    }
    return row == lv->cells ? 0 : -1;
}

static int parse_columns(PyObject *seq, int **out, int *n) {
    PyObject *fast = PySequence_Fast(seq, "columns must be a sequence");
    if (!fast) return -1;
    *n = (int)PySequence_Fast_GET_SIZE(fast);
    *out = calloc((size_t)*n + 1, sizeof(int));
    if (!*out) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < *n; i++) (*out)[i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
    Py_DECREF(fast);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *dict_values(const Dict *d) {
    PyObject *list = PyList_New((Py_ssize_t)d->n);
    if (!list) return NULL;
    for (size_t k = 0; k < d->n; k++) {
        /* As the importer's sqlite3 connection decodes TEXT: invalid UTF-8 replaced. */
        PyObject *v = PyUnicode_DecodeUTF8((const char *)d->bytes + d->start[k],
                                           (Py_ssize_t)(d->start[k + 1] - d->start[k]), "replace");
        if (!v) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)k, v);
    }
    return list;
}

PyDoc_STRVAR(read_table_doc,
"read_table(path, root_page, columns, text, rowid_column) -> (values, nulls) or None\n\n"
"Every row of the rowid table whose b-tree starts at root_page, in rowid order (the order of\n"
"a full scan). columns: record indices, ascending; text: per column, true for TEXT. values:\n"
"per column, a bytearray of native int64 or, for TEXT, a pair: a bytearray of native int32\n"
"codes (-1 for NULL) and the list of distinct str they index; nulls: per column, a bytearray\n"
"of 0/1, or None when the column has no NULL or is TEXT. None when the file cannot be\n"
"vouched for (see the module comment).");

static PyObject *read_table(PyObject *self, PyObject *args) {
    const char *path;
    unsigned long root;
    PyObject *cols_obj, *text_obj;
    int rowid_col;
    if (!PyArg_ParseTuple(args, "ykOOi", &path, &root, &cols_obj, &text_obj, &rowid_col)) return NULL;
    int *index = NULL, *text = NULL, ncols = 0, ntext = 0;
    if (parse_columns(cols_obj, &index, &ncols) || parse_columns(text_obj, &text, &ntext)) {
        free(index), free(text);
        return NULL;
    }
    if (ntext != ncols) {
        free(index), free(text);
        PyErr_SetString(PyExc_ValueError, "columns and text differ in length");
        return NULL;
    }
    for (int i = 1; i < ncols; i++) {
        if (index[i] <= index[i - 1]) {
            free(index), free(text);
            PyErr_SetString(PyExc_ValueError, "columns must ascend");
            return NULL;
        }
    }

    PyObject *result = NULL;
    Db db = {.fd = -1};
    Leaves lv = {0};
    Out o = {.ncols = ncols, .index = index, .text = text, .rowid_col = rowid_col};
    PyObject **arrays = calloc((size_t)ncols + 1, sizeof *arrays);
    o.values = calloc((size_t)ncols + 1, sizeof *o.values);
    o.nulls = calloc((size_t)ncols + 1, sizeof *o.nulls);
    o.codes = calloc((size_t)ncols + 1, sizeof *o.codes);
    o.dicts = calloc((size_t)ncols + 1, sizeof *o.dicts);
    o.any_null = calloc((size_t)ncols + 1, sizeof *o.any_null);
    o.shapes = calloc(SHAPES, sizeof *o.shapes);
    o.shape_at = calloc((size_t)SHAPES * ncols + 1, sizeof *o.shape_at);
    o.shape_type = calloc((size_t)SHAPES * ncols + 1, sizeof *o.shape_type);
    uint8_t *head = NULL;
    int ok = 0, rc = 0;
    if (!arrays || !o.values || !o.nulls || !o.codes || !o.dicts || !o.any_null || !o.shapes || !o.shape_at ||
        !o.shape_type)
        goto done;

    Py_BEGIN_ALLOW_THREADS
    uint8_t hdr[100];
    db.fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (db.fd >= 0 && fstat(db.fd, &st) == 0 && pread(db.fd, hdr, 100, 0) == 100 &&
        memcmp(hdr, "SQLite format 3", 16) == 0) {
        uint32_t ps = be16(hdr + 16);
        db.page_size = ps == 1 ? 65536 : ps;
        int pow2 = db.page_size >= 512 && (db.page_size & (db.page_size - 1)) == 0;
        db.usable = db.page_size - hdr[20];
        /* UTF-8 text only; the file's length, not the header's page count, which an older
         * writer may not have kept up to date. */
        if (pow2 && db.usable >= 480 && be32(hdr + 56) == 1 && st.st_size % db.page_size == 0) {
            db.npages = (uint32_t)(st.st_size / db.page_size);
            head = malloc(db.page_size);
            db.page = calloc(db.page_size + 8, 1);
            db.ovfl = malloc(db.page_size);
            ok = head && db.page && db.ovfl && walk(&db, (uint32_t)root, 0, &lv, head) == 0;
        }
    }
    Py_END_ALLOW_THREADS
    if (!ok) goto done;

    size_t rows = lv.cells;
    for (int j = 0; j < ncols; j++) {
        if (text[j]) {
            if (!(arrays[j] = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(rows * sizeof(int32_t))))) goto done;
            o.codes[j] = (int32_t *)PyByteArray_AS_STRING(arrays[j]);
        } else {
            if (!(o.nulls[j] = calloc(rows + 1, 1))) goto nomem;
            if (!(arrays[j] = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(rows * sizeof(int64_t))))) goto done;
            o.values[j] = (int64_t *)PyByteArray_AS_STRING(arrays[j]);
            huge_pages(o.values[j], rows * sizeof(int64_t));
        }
    }
    Py_BEGIN_ALLOW_THREADS
    rc = decode_leaves(&db, &lv, &o);
    Py_END_ALLOW_THREADS
    if (rc) goto done;

    PyObject *values = PyList_New(ncols), *nulls = PyList_New(ncols);
    if (!values || !nulls) {
        Py_XDECREF(values), Py_XDECREF(nulls);
        goto done;
    }
    for (int j = 0; j < ncols; j++) {
        PyObject *v = text[j] ? Py_BuildValue("(ON)", arrays[j], dict_values(&o.dicts[j])) : Py_NewRef(arrays[j]);
        PyObject *m = o.any_null[j] ? PyByteArray_FromStringAndSize((const char *)o.nulls[j], (Py_ssize_t)rows)
                                    : Py_NewRef(Py_None);
        if (!v || !m) {
            Py_XDECREF(v), Py_XDECREF(m), Py_DECREF(values), Py_DECREF(nulls);
            goto done;
        }
        PyList_SET_ITEM(values, j, v);
        PyList_SET_ITEM(nulls, j, m);
    }
    result = Py_BuildValue("(NN)", values, nulls);
    goto done;
nomem:
    PyErr_NoMemory();
done:
    if (!result && !PyErr_Occurred()) result = Py_NewRef(Py_None);
    if (db.fd >= 0) close(db.fd);
    free(head), free(db.page), free(db.ovfl), free(db.scratch), free(lv.pages);
    for (int j = 0; j < ncols; j++) {
        if (arrays) Py_XDECREF(arrays[j]);
        if (o.nulls) free(o.nulls[j]);
        if (o.dicts) dict_free(&o.dicts[j]);
    }
    free(arrays), free(o.values), free(o.nulls), free(o.codes), free(o.dicts), free(o.any_null), free(index), free(text);
    free(o.shapes), free(o.shape_at), free(o.shape_type);
    return result;
}

static PyMethodDef methods[] = {
    {"read_table", read_table, METH_VARARGS, read_table_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sqlite_pages", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sqlite_pages(void) { return PyModule_Create(&module); }
