/* Cases files (schema xattn.cases/1): parsing into bench cases. The replay
 * (loading, the model totals) is in xtool_cases_replay.c. */
#include "xtool_cases_file.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_json.h"

static int xtool__cfail(char *err, size_t errlen, int line, const char *fmt, ...)
{
    if (!err || !errlen)
        return -1;
    int k = line > 0 ? snprintf(err, errlen, "line %d: ", line) : 0;
    if (k < 0 || (size_t)k >= errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

/* A string of the file as it may be printed: control characters (C0, DEL,
 * C1) and bytes that are not UTF-8 become \xHH or \u00HH escapes, so a name
 * cannot drive the terminal. */
static void xtool__printable(char *dst, size_t cap, const char *src)
{
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)src;
    if (!cap)
        return;
    for (; *p && k + 7 < cap; p++) {
        if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) { /* U+0080..U+009F */
            k += (size_t)snprintf(dst + k, cap - k, "\\u%04x", p[1]);
            p++;
        } else if (*p < 0x20 || *p == 0x7f) {
            k += (size_t)snprintf(dst + k, cap - k, "\\x%02x", *p);
        } else {
            dst[k++] = (char)*p;
        }
    }
    dst[k] = 0;
}

/* The length of the UTF-8 sequence at p (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or 0 when it is not one. */
static size_t xtool__utf8_len(const unsigned char *p, size_t left)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t n = c >= 0xc2 && c <= 0xdf   ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
    if (!n || n > left)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) || (c == 0xf0 && p[1] < 0x90) ||
        (c == 0xf4 && p[1] > 0x8f))
        return 0;
    return n;
}

/* The file is UTF-8 (RFC 8259): else the line and byte of the first bad one. */
static int xtool__check_utf8(const char *text, size_t len, char *err, size_t errlen)
{
    const unsigned char *p = (const unsigned char *)text;
    int line = 1;
    for (size_t i = 0; i < len;) {
        size_t n = xtool__utf8_len(p + i, len - i);
        if (!n)
            return xtool__cfail(err, errlen, line,
                                "byte %zu (0x%02x) is not UTF-8 (a cases file is UTF-8 text, "
                                "RFC 8259)",
                                i, p[i]);
        line += p[i] == '\n';
        i += n;
    }
    return 0;
}

/* The members a case may have; anything else is a mistake worth naming (a typo
 * such as "casual" would otherwise be ignored and the replay would differ). */
static const char *const xtool__case_keys[] = {
    "name",  "count",    "dtype",      "kv_dtype",  "batch",     "heads",  "kv_heads", "sq",
    "sk",    "head_dim", "head_dim_v", "layout",    "causal",    "window", "scale",    "softcap",
    "alibi", "bias",     "lse",        "seqlens_q", "seqlens_k", "varlen", "info"};

typedef struct xtool__cctx {
    int idx; /* the case's index in the file */
    const xtool_json *obj;
    char *err;
    size_t errlen;
} xtool__cctx;

static int xtool__int(const xtool__cctx *c, const char *key, int64_t lo, int64_t hi, int required,
                      int64_t def, int64_t *out)
{
    const xtool_json *v = xtool_json_get(c->obj, key);
    if (!v) {
        if (required)
            return xtool__cfail(c->err, c->errlen, c->obj->line,
                                "cases[%d]: the member \"%s\" is missing (an integer in "
                                "%lld..%lld)",
                                c->idx, key, (long long)lo, (long long)hi);
        *out = def;
        return 0;
    }
    if (v->type != XTOOL_JSON_NUMBER || !v->integer_ok || v->integer < lo || v->integer > hi) {
        if (v->type == XTOOL_JSON_NUMBER)
            return xtool__cfail(c->err, c->errlen, v->line,
                                "cases[%d].%s: %.17g is not an integer in %lld..%lld", c->idx, key,
                                v->number, (long long)lo, (long long)hi);
        return xtool__cfail(c->err, c->errlen, v->line,
                            "cases[%d].%s: %s, expected an integer in %lld..%lld", c->idx, key,
                            xtool_json_type_name(v->type), (long long)lo, (long long)hi);
    }
    *out = v->integer;
    return 0;
}

static int xtool__num(const xtool__cctx *c, const char *key, double lo, double hi, double def,
                      double *out)
{
    const xtool_json *v = xtool_json_get(c->obj, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (v->type != XTOOL_JSON_NUMBER || !isfinite(v->number) || v->number < lo || v->number > hi)
        return xtool__cfail(
            c->err, c->errlen, v->line, "cases[%d].%s: expected a number in %g..%g, found %s",
            c->idx, key, lo, hi,
            v->type == XTOOL_JSON_NUMBER ? "one outside" : xtool_json_type_name(v->type));
    /* The replay passes it as an f32: a value f32 cannot hold as a normal
     * number would turn into another (1e-50 into 0, which means the default). */
    if (v->number != 0 && fabs(v->number) < FLT_MIN)
        return xtool__cfail(c->err, c->errlen, v->line,
                            "cases[%d].%s: %g is below f32's smallest normal number (%g): it "
                            "would not be replayed as given (0 is %s)",
                            c->idx, key, v->number, (double)FLT_MIN,
                            strcmp(key, "scale") ? "off" : "the default 1/sqrt(head_dim)");
    *out = v->number;
    return 0;
}

static int xtool__bool(const xtool__cctx *c, const char *key, int *out)
{
    const xtool_json *v = xtool_json_get(c->obj, key);
    *out = 0;
    if (!v || v->type == XTOOL_JSON_NULL)
        return 0;
    if (v->type != XTOOL_JSON_BOOL)
        return xtool__cfail(c->err, c->errlen, v->line, "cases[%d].%s: %s, expected true or false",
                            c->idx, key, xtool_json_type_name(v->type));
    *out = v->boolean;
    return 0;
}

static int xtool__dtype_of(const xtool__cctx *c, const char *key, int required, xattn_dtype def,
                           xattn_dtype *out)
{
    const xtool_json *v = xtool_json_get(c->obj, key);
    if (!v) {
        if (required)
            return xtool__cfail(c->err, c->errlen, c->obj->line,
                                "cases[%d]: the member \"%s\" is missing (\"f32\", \"f16\" or "
                                "\"bf16\")",
                                c->idx, key);
        *out = def;
        return 0;
    }
    /* The schema's dtypes, for q/o and k/v alike: the 8-bit K/V caches (fp8,
     * q8_0) are not replayed from a cases file. */
    static const xattn_dtype allowed[3] = {XATTN_DTYPE_F32, XATTN_DTYPE_F16, XATTN_DTYPE_BF16};
    if (v->type == XTOOL_JSON_STRING)
        for (int d = 0; d < 3; d++)
            if (!strcmp(v->string, xattn_dtype_name(allowed[d]))) {
                *out = allowed[d];
                return 0;
            }
    char found[160];
    xtool__printable(found, sizeof found, v->type == XTOOL_JSON_STRING ? v->string : "");
    return xtool__cfail(c->err, c->errlen, v->line,
                        "cases[%d].%s: expected \"f32\", \"f16\" or \"bf16\"%s%.40s%s", c->idx, key,
                        v->type == XTOOL_JSON_STRING ? ", found \"" : "", found,
                        v->type == XTOOL_JSON_STRING ? "\"" : "");
}

/* seqlens_q / seqlens_k: null, or `batch` integers in 0..max. *out malloc'd or NULL. */
static int xtool__lengths(const xtool__cctx *c, const char *key, int64_t batch, int64_t max,
                          int32_t **out)
{
    *out = NULL;
    const xtool_json *v = xtool_json_get(c->obj, key);
    if (!v || v->type == XTOOL_JSON_NULL)
        return 0;
    if (v->type != XTOOL_JSON_ARRAY || (int64_t)v->n != batch)
        return xtool__cfail(c->err, c->errlen, v->line,
                            "cases[%d].%s: expected an array of %lld lengths (one per sequence of "
                            "the batch), found %s%s",
                            c->idx, key, (long long)batch, xtool_json_type_name(v->type),
                            v->type == XTOOL_JSON_ARRAY ? " of another size" : "");
    int32_t *a = malloc((size_t)(batch ? batch : 1) * sizeof *a);
    if (!a)
        return xtool__cfail(c->err, c->errlen, v->line, "out of memory");
    for (int64_t i = 0; i < batch; i++) {
        const xtool_json *e = &v->items[i];
        if (e->type != XTOOL_JSON_NUMBER || !e->integer_ok || e->integer < 0 || e->integer > max) {
            free(a);
            return xtool__cfail(c->err, c->errlen, e->line,
                                "cases[%d].%s[%lld]: expected an integer in 0..%lld (the %s)",
                                c->idx, key, (long long)i, (long long)max,
                                key[8] == 'q' ? "sq of the case" : "sk of the case");
        }
        a[i] = (int32_t)e->integer;
    }
    *out = a;
    return 0;
}

/* Every member of the case is one the schema knows. */
static int xtool__case_members(const xtool__cctx *c)
{
    const xtool_json *o = c->obj;
    if (o->type != XTOOL_JSON_OBJECT)
        return xtool__cfail(c->err, c->errlen, o->line, "cases[%d]: %s, expected an object", c->idx,
                            xtool_json_type_name(o->type));
    for (size_t i = 0; i < o->n; i++) {
        int known = 0;
        char key[100];
        for (size_t k = 0; k < sizeof xtool__case_keys / sizeof *xtool__case_keys; k++)
            known |= !strcmp(o->keys[i], xtool__case_keys[k]);
        if (!known)
            xtool__printable(key, sizeof key, o->keys[i]);
        if (!known)
            return xtool__cfail(c->err, c->errlen, o->items[i].line,
                                "cases[%d]: unknown member \"%.64s\" (schema %s; free-form data "
                                "goes under \"info\")",
                                c->idx, key, XTOOL_CASES_SCHEMA);
    }
    return 0;
}

/* The count, the dtypes and the shape (heads a multiple of kv_heads). */
static int xtool__case_shape(const xtool__cctx *c, xtool_case *cs, int64_t *count)
{
    int64_t b, h, hkv, sq, sk, d, dv;
    if (xtool__int(c, "count", 1, INT64_C(1) << 40, 1, 0, count) ||
        xtool__dtype_of(c, "dtype", 1, XATTN_DTYPE_F32, &cs->dtype) ||
        xtool__dtype_of(c, "kv_dtype", 0, cs->dtype, &cs->kv_dtype) ||
        xtool__int(c, "batch", 1, 65536, 1, 0, &b) || xtool__int(c, "heads", 1, 4096, 1, 0, &h) ||
        xtool__int(c, "kv_heads", 1, 4096, 0, h, &hkv) ||
        xtool__int(c, "sq", 0, 1 << 22, 1, 0, &sq) || xtool__int(c, "sk", 0, 1 << 22, 1, 0, &sk) ||
        xtool__int(c, "head_dim", 1, 256, 1, 0, &d) ||
        xtool__int(c, "head_dim_v", 1, 256, 0, d, &dv))
        return -1;
    if (h % hkv) {
        const xtool_json *v = xtool_json_get(c->obj, "kv_heads");
        return xtool__cfail(c->err, c->errlen, v ? v->line : c->obj->line,
                            "cases[%d].kv_heads: %lld query heads are not a multiple of %lld KV "
                            "heads (GQA needs heads = g * kv_heads)",
                            c->idx, (long long)h, (long long)hkv);
    }
    cs->batch = b;
    cs->heads = h;
    cs->kv_heads = hkv;
    cs->sq = sq;
    cs->sk = sk;
    cs->head_dim = d;
    cs->head_dim_v = dv;
    return 0;
}

/* The layout, the causal mask and its alignment, the window. */
static int xtool__case_masks(const xtool__cctx *c, xtool_case *cs)
{
    const xtool_json *v = xtool_json_get(c->obj, "layout");
    if (v &&
        (v->type != XTOOL_JSON_STRING || (strcmp(v->string, "bshd") && strcmp(v->string, "bhsd"))))
        return xtool__cfail(c->err, c->errlen, v->line,
                            "cases[%d].layout: expected \"bshd\" or \"bhsd\"", c->idx);
    cs->bhsd = v && !strcmp(v->string, "bhsd");
    v = xtool_json_get(c->obj, "causal");
    if (v && !(v->type == XTOOL_JSON_BOOL && !v->boolean) && v->type != XTOOL_JSON_NULL) {
        if (v->type != XTOOL_JSON_STRING ||
            (strcmp(v->string, "top-left") && strcmp(v->string, "bottom-right")))
            return xtool__cfail(c->err, c->errlen, v->line,
                                "cases[%d].causal: expected false, \"top-left\" or "
                                "\"bottom-right\"",
                                c->idx);
        cs->causal = 1;
        cs->align = strcmp(v->string, "top-left") ? XATTN_ALIGN_BOTTOM_RIGHT : XATTN_ALIGN_TOP_LEFT;
    }
    v = xtool_json_get(c->obj, "window");
    if (v && v->type != XTOOL_JSON_NULL) {
        if (v->type != XTOOL_JSON_ARRAY || v->n != 2 || v->items[0].type != XTOOL_JSON_NUMBER ||
            !v->items[0].integer_ok || v->items[1].type != XTOOL_JSON_NUMBER ||
            !v->items[1].integer_ok || v->items[0].integer > (1 << 30) ||
            v->items[1].integer > (1 << 30))
            return xtool__cfail(c->err, c->errlen, v->line,
                                "cases[%d].window: expected [left, right], integers up to 2^30 "
                                "(negative = unbounded)",
                                c->idx);
        cs->window_left = v->items[0].integer < 0 ? -1 : v->items[0].integer;
        cs->window_right = v->items[1].integer < 0 ? -1 : v->items[1].integer;
    }
    return 0;
}

/* The score's scale and softcap, ALiBi, the LSE, packing, the bias, "info". */
static int xtool__case_options(const xtool__cctx *c, xtool_case *cs)
{
    double scale = 0, cap = 0;
    if (xtool__num(c, "scale", -1e30, 1e30, 0, &scale) ||
        xtool__num(c, "softcap", 0, 1e30, 0, &cap) || xtool__bool(c, "alibi", &cs->alibi) ||
        xtool__bool(c, "lse", &cs->lse) || xtool__bool(c, "varlen", &cs->varlen))
        return -1;
    cs->scale = (float)scale;
    cs->softcap = (float)cap;
    /* The bias: true, or its description {"shape": [...], "dtype": ...} (the replay
     * uses the tool's f32 [1, Hq, Sq, Sk] bias: the file carries no tensor data). */
    const xtool_json *v = xtool_json_get(c->obj, "bias");
    if (v && v->type == XTOOL_JSON_OBJECT)
        cs->bias = 1;
    else if (v && v->type == XTOOL_JSON_BOOL)
        cs->bias = v->boolean;
    else if (v && v->type != XTOOL_JSON_NULL)
        return xtool__cfail(c->err, c->errlen, v->line,
                            "cases[%d].bias: %s, expected null, a boolean or an object", c->idx,
                            xtool_json_type_name(v->type));
    v = xtool_json_get(c->obj, "info");
    if (v && v->type != XTOOL_JSON_OBJECT && v->type != XTOOL_JSON_NULL)
        return xtool__cfail(c->err, c->errlen, v->line, "cases[%d].info: %s, expected an object",
                            c->idx, xtool_json_type_name(v->type));
    return 0;
}

/* The per-sequence lengths (malloc'd; the side not given at its full length). */
static int xtool__case_seqlens(const xtool__cctx *c, xtool_case *cs, int32_t **plq, int32_t **plk)
{
    int32_t *lq = NULL, *lk = NULL;
    int64_t b = cs->batch;
    if (xtool__lengths(c, "seqlens_q", b, cs->sq, &lq) ||
        xtool__lengths(c, "seqlens_k", b, cs->sk, &lk)) {
        free(lq);
        return -1;
    }
    if (cs->varlen && !lq && !lk)
        return xtool__cfail(c->err, c->errlen, xtool_json_get(c->obj, "varlen")->line,
                            "cases[%d].varlen: a packed batch needs seqlens_q or seqlens_k",
                            c->idx);
    if ((lq || lk) && (!lq || !lk)) { /* the other side at its full length */
        int32_t *full = malloc((size_t)b * sizeof *full);
        if (!full) {
            free(lq);
            free(lk);
            return xtool__cfail(c->err, c->errlen, c->obj->line, "out of memory");
        }
        for (int64_t i = 0; i < b; i++)
            full[i] = (int32_t)(lq ? cs->sk : cs->sq);
        if (lq)
            lk = full;
        else
            lq = full;
    }
    cs->seqlens_q = lq;
    cs->seqlens_k = lk;
    *plq = lq;
    *plk = lk;
    return 0;
}

/* One case of the file into bc (lengths owned by bc). */
static int xtool__case(const xtool__cctx *c, uint64_t seed, xtool_bench_case *bc,
                       xtool_cases_entry *ent)
{
    const xtool_json *o = c->obj;
    xtool_case cs;
    xtool_case_defaults(&cs);
    int64_t count;
    if (xtool__case_members(c) || xtool__case_shape(c, &cs, &count))
        return -1;
    const xtool_json *v = xtool_json_get(o, "name");
    if (v && v->type != XTOOL_JSON_STRING && v->type != XTOOL_JSON_NULL)
        return xtool__cfail(c->err, c->errlen, v->line, "cases[%d].name: %s, expected a string",
                            c->idx, xtool_json_type_name(v->type));
    xtool__printable(ent->name, sizeof ent->name, v && v->string ? v->string : "");
    ent->count = count;
    ent->line = o->line;
    int32_t *lq = NULL, *lk = NULL;
    if (xtool__case_masks(c, &cs) || xtool__case_options(c, &cs) ||
        xtool__case_seqlens(c, &cs, &lq, &lk))
        return -1;
    memset(bc, 0, sizeof *bc);
    cs.seed = seed;
    bc->c = cs;
    bc->lq = lq;
    bc->lk = lk;
    return 0;
}

static void xtool__free_lengths(xtool_bench_case *bc, int n)
{
    for (int i = 0; i < n; i++) {
        free(bc[i].lq);
        free(bc[i].lk);
        bc[i].lq = bc[i].lk = NULL;
    }
}

void xtool_cases_file_free(xtool_cases_file *cf)
{
    if (!cf)
        return;
    free(cf->entries);
    cf->entries = NULL;
    cf->n = 0;
}

int xtool_cases_parse(const char *text, size_t len, uint64_t seed, xtool_bench_case *out, int cap,
                      xtool_cases_file *cf, char *err, size_t errlen)
{
    memset(cf, 0, sizeof *cf);
    if (xtool__check_utf8(text, len, err, errlen))
        return -1;
    char jerr[256];
    xtool_json *root = xtool_json_parse(text, len, jerr, sizeof jerr);
    if (!root)
        return xtool__cfail(err, errlen, 0, "not JSON: %s", jerr);
    int n = -1;
    const xtool_json *schema = xtool_json_get(root, "schema");
    const xtool_json *cases = xtool_json_get(root, "cases");
    if (root->type != XTOOL_JSON_OBJECT) {
        xtool__cfail(err, errlen, root->line, "the document is %s, expected an object",
                     xtool_json_type_name(root->type));
    } else if (!schema || schema->type != XTOOL_JSON_STRING ||
               strcmp(schema->string, XTOOL_CASES_SCHEMA)) {
        char found[200];
        xtool__printable(found, sizeof found, schema && schema->string ? schema->string : "");
        xtool__cfail(err, errlen, schema ? schema->line : root->line,
                     "schema: expected \"%s\"%s%.40s%s", XTOOL_CASES_SCHEMA,
                     schema && schema->string ? ", found \"" : " (missing or not a string)", found,
                     schema && schema->string ? "\"" : "");
    } else if (!cases || cases->type != XTOOL_JSON_ARRAY || cases->n == 0) {
        xtool__cfail(err, errlen, cases ? cases->line : root->line,
                     "cases: expected a non-empty array of cases%s",
                     cases ? "" : " (the member is missing)");
    } else if ((int)cases->n > cap || cases->n > XTOOL_CASES_MAX) {
        xtool__cfail(err, errlen, cases->line, "cases: %zu cases, at most %d", cases->n,
                     cap < XTOOL_CASES_MAX ? cap : XTOOL_CASES_MAX);
    } else {
        const xtool_json *model = xtool_json_get(root, "model");
        if (model && model->type == XTOOL_JSON_STRING)
            xtool__printable(cf->model, sizeof cf->model, model->string);
        cf->entries = calloc(cases->n, sizeof *cf->entries);
        if (!cf->entries)
            xtool__cfail(err, errlen, cases->line, "out of memory");
        else
            n = 0;
        for (size_t i = 0; n >= 0 && i < cases->n; i++) {
            xtool__cctx c = {(int)i, &cases->items[i], err, errlen};
            xtool_cases_entry ent;
            memset(&ent, 0, sizeof ent);
            xtool_bench_case *bc = &out[n];
            if (xtool__case(&c, seed, bc, &ent)) {
                xtool__free_lengths(out, n);
                n = -1;
                break;
            }
            xtool_case_describe(&bc->c, bc->key, sizeof bc->key);
            char fam[200];
            xtool_case_family(&bc->c, fam, sizeof fam);
            snprintf(bc->family, sizeof bc->family, "%.60s%s%.190s", cf->model,
                     cf->model[0] ? ": " : "", fam);
            cf->calls += ent.count;
            /* A case the tool cannot tell from an earlier one: one case, both counts. */
            int dup = -1;
            for (int j = 0; j < n && dup < 0; j++)
                if (!strcmp(out[j].key, bc->key))
                    dup = j;
            if (dup >= 0) {
                xtool_cases_entry *e = &cf->entries[dup];
                e->count += ent.count;
                if (ent.name[0] && strcmp(e->name, ent.name)) {
                    size_t k = strlen(e->name);
                    snprintf(e->name + k, sizeof e->name - k, " + %s", ent.name);
                }
                xtool__free_lengths(bc, 1);
                continue;
            }
            cf->entries[n] = ent;
            n++;
        }
        cf->n = n > 0 ? n : 0;
        cf->n_file_cases = (int)cases->n;
    }
    xtool_json_free(root);
    if (n < 0)
        xtool_cases_file_free(cf);
    return n;
}
