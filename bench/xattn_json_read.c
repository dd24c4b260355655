/* A strict, line-aware JSON reader (xattn_json_read.h). */
#include "xattn_json_read.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct xattn__jp {
    const char *p, *end;
    int line;
    char *err;
    size_t errlen;
    int failed;
} xattn__jp;

static void xattn__jfail(xattn__jp *jp, const char *fmt, ...)
{
    if (jp->failed)
        return;
    jp->failed = 1;
    if (!jp->err || !jp->errlen)
        return;
    int k = snprintf(jp->err, jp->errlen, "line %d: ", jp->line);
    if (k < 0 || (size_t)k >= jp->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(jp->err + k, jp->errlen - (size_t)k, fmt, ap);
    va_end(ap);
}

static void xattn__jws(xattn__jp *jp)
{
    while (jp->p < jp->end) {
        char c = *jp->p;
        if (c == '\n')
            jp->line++;
        else if (c != ' ' && c != '\t' && c != '\r')
            break;
        jp->p++;
    }
}

/* What the text holds at p, for messages: "end of file", or the character. */
static const char *xattn__jwhat(const xattn__jp *jp, char *buf, size_t n)
{
    if (jp->p >= jp->end)
        return "the end of the file";
    unsigned char c = (unsigned char)*jp->p;
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, n, "'%c'", c);
    else
        snprintf(buf, n, "byte 0x%02x", c);
    return buf;
}

static int xattn__jvalue(xattn__jp *jp, xattn_json *out, int depth);

static int xattn__hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t xattn__utf8_put(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string at p (the opening quote); *out malloc'd. The decoded text is never
 * longer than the escaped one, so one allocation of the raw length suffices. */
static int xattn__jstring(xattn__jp *jp, char **out)
{
    const char *s = ++jp->p;
    const char *q = s;
    while (q < jp->end && *q != '"')
        q += (*q == '\\' && q + 1 < jp->end) ? 2 : 1;
    if (q >= jp->end) {
        xattn__jfail(jp, "a string is not closed (missing '\"')");
        return -1;
    }
    char *buf = malloc((size_t)(q - s) + 1);
    if (!buf) {
        xattn__jfail(jp, "out of memory");
        return -1;
    }
    size_t n = 0;
    while (jp->p < q) {
        unsigned char c = (unsigned char)*jp->p;
        if (c < 0x20) {
            xattn__jfail(jp, "control character 0x%02x inside a string (escape it)", c);
            free(buf);
            return -1;
        }
        if (c != '\\') {
            buf[n++] = (char)c;
            jp->p++;
            continue;
        }
        char e = jp->p[1];
        jp->p += 2;
        switch (e) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (q - jp->p < 4 || xattn__hex4(jp->p, &cp)) {
                xattn__jfail(jp, "\\u needs four hexadecimal digits");
                free(buf);
                return -1;
            }
            jp->p += 4;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (q - jp->p < 6 || jp->p[0] != '\\' || jp->p[1] != 'u' ||
                    xattn__hex4(jp->p + 2, &lo) || lo < 0xdc00 || lo > 0xdfff) {
                    xattn__jfail(jp, "\\u%04x is half of a surrogate pair without its other half",
                                 cp);
                    free(buf);
                    return -1;
                }
                jp->p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                xattn__jfail(jp, "\\u%04x is a lone low surrogate", cp);
                free(buf);
                return -1;
            }
            if (cp == 0) {
                xattn__jfail(jp, "\\u0000 (NUL) inside a string");
                free(buf);
                return -1;
            }
            n += xattn__utf8_put(buf + n, cp);
            break;
        }
        default:
            xattn__jfail(jp, "unknown escape '\\%c' in a string", e >= 0x20 && e < 0x7f ? e : '?');
            free(buf);
            return -1;
        }
    }
    buf[n] = '\0';
    jp->p = q + 1;
    *out = buf;
    return 0;
}

static int xattn__jnumber(xattn__jp *jp, xattn_json *out)
{
    const char *s = jp->p, *p = s;
    int integral = 1;
    if (p < jp->end && *p == '-')
        p++;
    if (p < jp->end && *p == '0')
        p++;
    else if (p < jp->end && *p >= '1' && *p <= '9')
        while (p < jp->end && *p >= '0' && *p <= '9')
            p++;
    else {
        xattn__jfail(jp, "a number needs a digit here");
        return -1;
    }
    if (p < jp->end && *p == '.') {
        integral = 0;
        p++;
        if (p >= jp->end || *p < '0' || *p > '9') {
            xattn__jfail(jp, "a number needs a digit after '.'");
            return -1;
        }
        while (p < jp->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < jp->end && (*p == 'e' || *p == 'E')) {
        integral = 0;
        p++;
        if (p < jp->end && (*p == '+' || *p == '-'))
            p++;
        if (p >= jp->end || *p < '0' || *p > '9') {
            xattn__jfail(jp, "a number needs a digit in its exponent");
            return -1;
        }
        while (p < jp->end && *p >= '0' && *p <= '9')
            p++;
    }
    char tmp[64];
    size_t len = (size_t)(p - s);
    if (len >= sizeof tmp) {
        xattn__jfail(jp, "a number of more than %zu characters", sizeof tmp - 1);
        return -1;
    }
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    out->type = XATTN_JSON_NUMBER;
    errno = 0;
    out->number = strtod(tmp, NULL);
    if (errno == ERANGE && (out->number > 1 || out->number < -1)) {
        xattn__jfail(jp, "the number %s is out of range", tmp);
        return -1;
    }
    if (integral) {
        errno = 0;
        long long v = strtoll(tmp, NULL, 10);
        if (errno == 0) {
            out->integer_ok = 1;
            out->integer = v;
        }
    }
    jp->p = p;
    return 0;
}

static int xattn__jword(xattn__jp *jp, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(jp->end - jp->p) < n || memcmp(jp->p, w, n))
        return -1;
    jp->p += n;
    return 0;
}

/* Room for one more element (and member name, for objects). */
static int xattn__jgrow(xattn__jp *jp, xattn_json *out, size_t *cap, int with_keys)
{
    if (out->n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 8;
    xattn_json *ni = realloc(out->items, nc * sizeof *ni);
    if (!ni) {
        xattn__jfail(jp, "out of memory");
        return -1;
    }
    out->items = ni;
    if (with_keys) {
        char **nk = realloc(out->keys, nc * sizeof *nk);
        if (!nk) {
            xattn__jfail(jp, "out of memory");
            return -1;
        }
        out->keys = nk;
    }
    *cap = nc;
    return 0;
}

/* After an element: 1 at ',' (another one follows), 0 at the closing character,
 * -1 (with the message) at anything else. */
static int xattn__jafter(xattn__jp *jp, char close, const char *container)
{
    xattn__jws(jp);
    if (jp->p < jp->end && (*jp->p == ',' || *jp->p == close))
        return *jp->p++ == ',';
    char w[16];
    xattn__jfail(jp, "expected ',' or '%c' in %s, found %s", close, container,
                 xattn__jwhat(jp, w, sizeof w));
    return -1;
}

static int xattn__jarray(xattn__jp *jp, xattn_json *out, int depth)
{
    out->type = XATTN_JSON_ARRAY;
    jp->p++;
    size_t cap = 0;
    xattn__jws(jp);
    if (jp->p < jp->end && *jp->p == ']') {
        jp->p++;
        return 0;
    }
    for (;;) {
        if (xattn__jgrow(jp, out, &cap, 0))
            return -1;
        xattn_json *e = &out->items[out->n];
        memset(e, 0, sizeof *e);
        out->n++;
        if (xattn__jvalue(jp, e, depth + 1))
            return -1;
        int more = xattn__jafter(jp, ']', "an array");
        if (more <= 0)
            return more;
    }
}

static int xattn__jobject(xattn__jp *jp, xattn_json *out, int depth)
{
    out->type = XATTN_JSON_OBJECT;
    jp->p++;
    size_t cap = 0;
    xattn__jws(jp);
    if (jp->p < jp->end && *jp->p == '}') {
        jp->p++;
        return 0;
    }
    for (;;) {
        char w[16];
        xattn__jws(jp);
        if (jp->p >= jp->end || *jp->p != '"') {
            xattn__jfail(jp, "expected a member name (a string) in an object, found %s",
                         xattn__jwhat(jp, w, sizeof w));
            return -1;
        }
        if (xattn__jgrow(jp, out, &cap, 1))
            return -1;
        char *key = NULL;
        int key_line = jp->line;
        if (xattn__jstring(jp, &key))
            return -1;
        for (size_t i = 0; i < out->n; i++)
            if (!strcmp(out->keys[i], key)) {
                jp->line = key_line;
                xattn__jfail(jp, "duplicate member \"%.64s\"", key);
                free(key);
                return -1;
            }
        xattn_json *e = &out->items[out->n];
        memset(e, 0, sizeof *e);
        out->keys[out->n] = key;
        out->n++;
        xattn__jws(jp);
        if (jp->p >= jp->end || *jp->p != ':') {
            xattn__jfail(jp, "expected ':' after the member name \"%.64s\", found %s", key,
                         xattn__jwhat(jp, w, sizeof w));
            return -1;
        }
        jp->p++;
        if (xattn__jvalue(jp, e, depth + 1))
            return -1;
        int more = xattn__jafter(jp, '}', "an object");
        if (more <= 0)
            return more;
    }
}

static int xattn__jvalue(xattn__jp *jp, xattn_json *out, int depth)
{
    if (depth > XATTN_JSON_MAX_DEPTH) {
        xattn__jfail(jp, "nested deeper than %d levels", XATTN_JSON_MAX_DEPTH);
        return -1;
    }
    xattn__jws(jp);
    out->line = jp->line;
    char w[16];
    if (jp->p >= jp->end) {
        xattn__jfail(jp, "expected a value, found the end of the file");
        return -1;
    }
    switch (*jp->p) {
    case '{': return xattn__jobject(jp, out, depth);
    case '[': return xattn__jarray(jp, out, depth);
    case '"': out->type = XATTN_JSON_STRING; return xattn__jstring(jp, &out->string);
    case 't':
    case 'f':
    case 'n':
        if (!xattn__jword(jp, "true")) {
            out->type = XATTN_JSON_BOOL;
            out->boolean = 1;
            return 0;
        }
        if (!xattn__jword(jp, "false")) {
            out->type = XATTN_JSON_BOOL;
            return 0;
        }
        if (!xattn__jword(jp, "null")) {
            out->type = XATTN_JSON_NULL;
            return 0;
        }
        break;
    default:
        if (*jp->p == '-' || (*jp->p >= '0' && *jp->p <= '9'))
            return xattn__jnumber(jp, out);
        break;
    }
    xattn__jfail(jp, "expected a value, found %s", xattn__jwhat(jp, w, sizeof w));
    return -1;
}

static void xattn__jclear(xattn_json *v)
{
    if (!v)
        return;
    free(v->string);
    for (size_t i = 0; i < v->n; i++) {
        if (v->items)
            xattn__jclear(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

void xattn_json_free(xattn_json *v)
{
    xattn__jclear(v);
    free(v);
}

xattn_json *xattn_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    xattn__jp jp = {text, text + len, 1, err, errlen, 0};
    xattn_json *root = calloc(1, sizeof *root);
    if (!root) {
        xattn__jfail(&jp, "out of memory");
        return NULL;
    }
    if (!text) {
        xattn__jfail(&jp, "no text");
        free(root);
        return NULL;
    }
    /* A UTF-8 byte order mark is tolerated, as editors write one. */
    if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3))
        jp.p += 3;
    if (xattn__jvalue(&jp, root, 0) == 0) {
        xattn__jws(&jp);
        if (jp.p < jp.end) {
            char w[16];
            xattn__jfail(&jp, "unexpected %s after the document's value",
                         xattn__jwhat(&jp, w, sizeof w));
        }
    }
    if (jp.failed) {
        xattn_json_free(root);
        return NULL;
    }
    return root;
}

const xattn_json *xattn_json_get(const xattn_json *v, const char *key)
{
    if (!v || v->type != XATTN_JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (!strcmp(v->keys[i], key))
            return &v->items[i];
    return NULL;
}

const char *xattn_json_type_name(xattn_json_type t)
{
    switch (t) {
    case XATTN_JSON_NULL: return "null";
    case XATTN_JSON_BOOL: return "a boolean";
    case XATTN_JSON_NUMBER: return "a number";
    case XATTN_JSON_STRING: return "a string";
    case XATTN_JSON_ARRAY: return "an array";
    default: return "an object";
    }
}
