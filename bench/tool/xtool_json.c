/* The tool's strict, line-aware JSON reader, and its tree writer (xtool_json.h). */
#include "xtool_json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_writer.h"

typedef struct xtool__jp {
    const char *p, *end;
    int line;
    char *err;
    size_t errlen;
    int failed;
} xtool__jp;

static void xtool__jfail(xtool__jp *jp, const char *fmt, ...)
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

static void xtool__jws(xtool__jp *jp)
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
static const char *xtool__jwhat(const xtool__jp *jp, char *buf, size_t n)
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

static int xtool__jvalue(xtool__jp *jp, xtool_json *out, int depth);

static int xtool__hex4(const char *p, unsigned *out)
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

static size_t xtool__utf8_put(char *o, unsigned cp)
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
static int xtool__jstring(xtool__jp *jp, char **out)
{
    const char *s = ++jp->p;
    const char *q = s;
    while (q < jp->end && *q != '"')
        q += (*q == '\\' && q + 1 < jp->end) ? 2 : 1;
    if (q >= jp->end) {
        xtool__jfail(jp, "a string is not closed (missing '\"')");
        return -1;
    }
    char *buf = malloc((size_t)(q - s) + 1);
    if (!buf) {
        xtool__jfail(jp, "out of memory");
        return -1;
    }
    size_t n = 0;
    while (jp->p < q) {
        unsigned char c = (unsigned char)*jp->p;
        if (c < 0x20) {
            xtool__jfail(jp, "control character 0x%02x inside a string (escape it)", c);
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
            if (q - jp->p < 4 || xtool__hex4(jp->p, &cp)) {
                xtool__jfail(jp, "\\u needs four hexadecimal digits");
                free(buf);
                return -1;
            }
            jp->p += 4;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (q - jp->p < 6 || jp->p[0] != '\\' || jp->p[1] != 'u' ||
                    xtool__hex4(jp->p + 2, &lo) || lo < 0xdc00 || lo > 0xdfff) {
                    xtool__jfail(jp, "\\u%04x is half of a surrogate pair without its other half",
                                 cp);
                    free(buf);
                    return -1;
                }
                jp->p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                xtool__jfail(jp, "\\u%04x is a lone low surrogate", cp);
                free(buf);
                return -1;
            }
            if (cp == 0) {
                xtool__jfail(jp, "\\u0000 (NUL) inside a string");
                free(buf);
                return -1;
            }
            n += xtool__utf8_put(buf + n, cp);
            break;
        }
        default:
            xtool__jfail(jp, "unknown escape '\\%c' in a string", e >= 0x20 && e < 0x7f ? e : '?');
            free(buf);
            return -1;
        }
    }
    buf[n] = '\0';
    jp->p = q + 1;
    *out = buf;
    return 0;
}

static int xtool__jnumber(xtool__jp *jp, xtool_json *out)
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
        xtool__jfail(jp, "a number needs a digit here");
        return -1;
    }
    if (p < jp->end && *p == '.') {
        integral = 0;
        p++;
        if (p >= jp->end || *p < '0' || *p > '9') {
            xtool__jfail(jp, "a number needs a digit after '.'");
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
            xtool__jfail(jp, "a number needs a digit in its exponent");
            return -1;
        }
        while (p < jp->end && *p >= '0' && *p <= '9')
            p++;
    }
    char tmp[64];
    size_t len = (size_t)(p - s);
    if (len >= sizeof tmp) {
        xtool__jfail(jp, "a number of more than %zu characters", sizeof tmp - 1);
        return -1;
    }
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    out->type = XTOOL_JSON_NUMBER;
    errno = 0;
    out->number = strtod(tmp, NULL);
    if (errno == ERANGE && (out->number > 1 || out->number < -1)) {
        xtool__jfail(jp, "the number %s is out of range", tmp);
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

static int xtool__jword(xtool__jp *jp, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(jp->end - jp->p) < n || memcmp(jp->p, w, n))
        return -1;
    jp->p += n;
    return 0;
}

/* Room for one more element (and member name, for objects). */
static int xtool__jgrow(xtool__jp *jp, xtool_json *out, size_t *cap, int with_keys)
{
    if (out->n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 8;
    xtool_json *ni = realloc(out->items, nc * sizeof *ni);
    if (!ni) {
        xtool__jfail(jp, "out of memory");
        return -1;
    }
    out->items = ni;
    if (with_keys) {
        char **nk = realloc(out->keys, nc * sizeof *nk);
        if (!nk) {
            xtool__jfail(jp, "out of memory");
            return -1;
        }
        out->keys = nk;
    }
    *cap = nc;
    return 0;
}

/* After an element: 1 at ',' (another one follows), 0 at the closing character,
 * -1 (with the message) at anything else. */
static int xtool__jafter(xtool__jp *jp, char close, const char *container)
{
    xtool__jws(jp);
    if (jp->p < jp->end && (*jp->p == ',' || *jp->p == close))
        return *jp->p++ == ',';
    char w[16];
    xtool__jfail(jp, "expected ',' or '%c' in %s, found %s", close, container,
                 xtool__jwhat(jp, w, sizeof w));
    return -1;
}

static int xtool__jarray(xtool__jp *jp, xtool_json *out, int depth)
{
    out->type = XTOOL_JSON_ARRAY;
    jp->p++;
    size_t cap = 0;
    xtool__jws(jp);
    if (jp->p < jp->end && *jp->p == ']') {
        jp->p++;
        return 0;
    }
    for (;;) {
        if (xtool__jgrow(jp, out, &cap, 0))
            return -1;
        xtool_json *e = &out->items[out->n];
        memset(e, 0, sizeof *e);
        out->n++;
        if (xtool__jvalue(jp, e, depth + 1))
            return -1;
        int more = xtool__jafter(jp, ']', "an array");
        if (more <= 0)
            return more;
    }
}

static int xtool__jobject(xtool__jp *jp, xtool_json *out, int depth)
{
    out->type = XTOOL_JSON_OBJECT;
    jp->p++;
    size_t cap = 0;
    xtool__jws(jp);
    if (jp->p < jp->end && *jp->p == '}') {
        jp->p++;
        return 0;
    }
    for (;;) {
        char w[16];
        xtool__jws(jp);
        if (jp->p >= jp->end || *jp->p != '"') {
            xtool__jfail(jp, "expected a member name (a string) in an object, found %s",
                         xtool__jwhat(jp, w, sizeof w));
            return -1;
        }
        if (xtool__jgrow(jp, out, &cap, 1))
            return -1;
        char *key = NULL;
        int key_line = jp->line;
        if (xtool__jstring(jp, &key))
            return -1;
        for (size_t i = 0; i < out->n; i++)
            if (!strcmp(out->keys[i], key)) {
                jp->line = key_line;
                xtool__jfail(jp, "duplicate member \"%.64s\"", key);
                free(key);
                return -1;
            }
        xtool_json *e = &out->items[out->n];
        memset(e, 0, sizeof *e);
        out->keys[out->n] = key;
        out->n++;
        xtool__jws(jp);
        if (jp->p >= jp->end || *jp->p != ':') {
            xtool__jfail(jp, "expected ':' after the member name \"%.64s\", found %s", key,
                         xtool__jwhat(jp, w, sizeof w));
            return -1;
        }
        jp->p++;
        if (xtool__jvalue(jp, e, depth + 1))
            return -1;
        int more = xtool__jafter(jp, '}', "an object");
        if (more <= 0)
            return more;
    }
}

static int xtool__jvalue(xtool__jp *jp, xtool_json *out, int depth)
{
    if (depth > XTOOL_JSON_MAX_DEPTH) {
        xtool__jfail(jp, "nested deeper than %d levels", XTOOL_JSON_MAX_DEPTH);
        return -1;
    }
    xtool__jws(jp);
    out->line = jp->line;
    char w[16];
    if (jp->p >= jp->end) {
        xtool__jfail(jp, "expected a value, found the end of the file");
        return -1;
    }
    switch (*jp->p) {
    case '{': return xtool__jobject(jp, out, depth);
    case '[': return xtool__jarray(jp, out, depth);
    case '"': out->type = XTOOL_JSON_STRING; return xtool__jstring(jp, &out->string);
    case 't':
    case 'f':
    case 'n':
        if (!xtool__jword(jp, "true")) {
            out->type = XTOOL_JSON_BOOL;
            out->boolean = 1;
            return 0;
        }
        if (!xtool__jword(jp, "false")) {
            out->type = XTOOL_JSON_BOOL;
            return 0;
        }
        if (!xtool__jword(jp, "null")) {
            out->type = XTOOL_JSON_NULL;
            return 0;
        }
        break;
    default:
        if (*jp->p == '-' || (*jp->p >= '0' && *jp->p <= '9'))
            return xtool__jnumber(jp, out);
        break;
    }
    xtool__jfail(jp, "expected a value, found %s", xtool__jwhat(jp, w, sizeof w));
    return -1;
}

static void xtool__jclear(xtool_json *v)
{
    if (!v)
        return;
    free(v->string);
    for (size_t i = 0; i < v->n; i++) {
        if (v->items)
            xtool__jclear(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

void xtool_json_free(xtool_json *v)
{
    xtool__jclear(v);
    free(v);
}

xtool_json *xtool_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    /* text + len is only formed for a text: NULL + len is undefined behaviour */
    xtool__jp jp = {text, text ? text + len : text, 1, err, errlen, 0};
    if (!text) {
        xtool__jfail(&jp, "no text");
        return NULL;
    }
    xtool_json *root = calloc(1, sizeof *root);
    if (!root) {
        xtool__jfail(&jp, "out of memory");
        return NULL;
    }
    /* A UTF-8 byte order mark is tolerated, as editors write one. */
    if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3))
        jp.p += 3;
    if (xtool__jvalue(&jp, root, 0) == 0) {
        xtool__jws(&jp);
        if (jp.p < jp.end) {
            char w[16];
            xtool__jfail(&jp, "unexpected %s after the document's value",
                         xtool__jwhat(&jp, w, sizeof w));
        }
    }
    if (jp.failed) {
        xtool_json_free(root);
        return NULL;
    }
    return root;
}

const xtool_json *xtool_json_get(const xtool_json *v, const char *key)
{
    if (!v || v->type != XTOOL_JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (!strcmp(v->keys[i], key))
            return &v->items[i];
    return NULL;
}

const char *xtool_json_type_name(xtool_json_type t)
{
    switch (t) {
    case XTOOL_JSON_NULL: return "null";
    case XTOOL_JSON_BOOL: return "a boolean";
    case XTOOL_JSON_NUMBER: return "a number";
    case XTOOL_JSON_STRING: return "a string";
    case XTOOL_JSON_ARRAY: return "an array";
    default: return "an object";
    }
}

const char *xtool_json_str_of(const xtool_json *v, const char *key)
{
    const xtool_json *m = xtool_json_get(v, key);
    return m && m->type == XTOOL_JSON_STRING ? m->string : "";
}

double xtool_json_num_of(const xtool_json *v, const char *key)
{
    const xtool_json *m = xtool_json_get(v, key);
    return m && m->type == XTOOL_JSON_NUMBER ? m->number : NAN;
}

int xtool_json_int_of(const xtool_json *v, const char *key, int dflt)
{
    const xtool_json *m = xtool_json_get(v, key);
    if (!m || m->type != XTOOL_JSON_NUMBER || !m->integer_ok)
        return dflt;
    return m->integer < INT_MIN ? INT_MIN : m->integer > INT_MAX ? INT_MAX : (int)m->integer;
}

void xtool_json_write(FILE *f, const xtool_json *v)
{
    switch (v->type) {
    case XTOOL_JSON_NULL: fputs("null", f); return;
    case XTOOL_JSON_BOOL: fputs(v->boolean ? "true" : "false", f); return;
    case XTOOL_JSON_NUMBER:
        if (v->integer_ok)
            fprintf(f, "%lld", (long long)v->integer);
        else
            xattn__json_num(f, v->number);
        return;
    case XTOOL_JSON_STRING: xattn__json_str(f, v->string); return;
    case XTOOL_JSON_ARRAY:
        fputc('[', f);
        for (size_t i = 0; i < v->n; i++) {
            if (i)
                fputs(", ", f);
            xtool_json_write(f, &v->items[i]);
        }
        fputc(']', f);
        return;
    case XTOOL_JSON_OBJECT:
        fputc('{', f);
        for (size_t i = 0; i < v->n; i++) {
            if (i)
                fputs(", ", f);
            xattn__json_str(f, v->keys[i]);
            fputs(": ", f);
            xtool_json_write(f, &v->items[i]);
        }
        fputc('}', f);
        return;
    }
}
