/*
 * Tests of cases files (`xattn bench --cases FILE`, bench/tool/xtool_cases_file.c)
 * and of the JSON reader under them (bench/tool/xtool_json.c).
 *
 *   test_cases_file unit                  the reader on valid and broken JSON (line
 *                                         numbers in the messages), cases files into
 *                                         bench cases, merging, and bad files refused
 *                                         with the line and the field named
 *   test_cases_file check RESULTS CASES   a replay's results.json against the cases
 *                                         file it replayed: the same shapes and counts,
 *                                         every cell ok, and each total the sum of
 *                                         count x median over the cases
 *
 * Exits 0 when everything passed, 1 otherwise; ends with "N passed, N failed, N skipped".
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../xattn_test.h"
#include "xtool_cases_file.h"
#include "xtool_json.h"

/* ---- the JSON reader ------------------------------------------------------------ */

static void json_ok(void)
{
    const char *t = "\xef\xbb\xbf{\n \"a\": [1, -2.5e1, 0, 12345678901234567890],\n"
                    " \"s\": \"x\\u00e9\\ud83d\\ude00\\n\\\"\",\n"
                    " \"b\": true, \"f\": false, \"z\": null,\n"
                    " \"o\": {\"k\":\n  {}}, \"e\": []}";
    char err[256];
    xtool_json *v = xtool_json_parse(t, strlen(t), err, sizeof err);
    EXPECT(v != NULL, "parse failed: %s", err);
    if (!v)
        return;
    const xtool_json *a = xtool_json_get(v, "a");
    EXPECT(a && a->type == XTOOL_JSON_ARRAY && a->n == 4, "a");
    if (a && a->n == 4) {
        EXPECT(a->line == 2, "a's line %d", a->line);
        EXPECT(a->items[0].integer_ok && a->items[0].integer == 1, "1");
        EXPECT(!a->items[1].integer_ok && a->items[1].number == -25.0, "-2.5e1: %g",
               a->items[1].number);
        EXPECT(a->items[2].integer_ok && a->items[2].integer == 0, "0");
        EXPECT(!a->items[3].integer_ok, "an integer beyond int64 is not integer_ok");
    }
    const xtool_json *s = xtool_json_get(v, "s");
    EXPECT(s && s->type == XTOOL_JSON_STRING && !strcmp(s->string, "x\xc3\xa9\xf0\x9f\x98\x80\n\""),
           "escapes: '%s'", s && s->string ? s->string : "");
    const xtool_json *b = xtool_json_get(v, "b"), *f = xtool_json_get(v, "f");
    EXPECT(b && b->type == XTOOL_JSON_BOOL && b->boolean == 1, "true");
    EXPECT(f && f->type == XTOOL_JSON_BOOL && f->boolean == 0, "false");
    EXPECT(xtool_json_get(v, "z") && xtool_json_get(v, "z")->type == XTOOL_JSON_NULL, "null");
    const xtool_json *k = xtool_json_get(xtool_json_get(v, "o"), "k");
    EXPECT(k && k->type == XTOOL_JSON_OBJECT && k->n == 0 && k->line == 6, "nested object line %d",
           k ? k->line : -1);
    EXPECT(xtool_json_get(v, "missing") == NULL, "absent member");
    xtool_json_free(v);
}

/* A tree written back with xtool_json_write reads back the same (bench merges
 * the profiler's traces this way), and the member accessors. */
static void json_write(void)
{
    const char *t = "{\"ts\": 12.345, \"n\": -7, \"big\": 1e300, \"s\": \"a\\\"\\u00e9\\n\","
                    " \"a\": [true, false, null, [], {}], \"o\": {\"k\": \"v\"}}";
    char err[256];
    xtool_json *v = xtool_json_parse(t, strlen(t), err, sizeof err);
    EXPECT(v != NULL, "parse: %s", err);
    if (!v)
        return;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (m) {
        xtool_json_write(m, v);
        fclose(m);
    }
    EXPECT(buf && !strcmp(buf, "{\"ts\": 12.345, \"n\": -7, \"big\": 1e+300, \"s\": "
                               "\"a\\\"\xc3\xa9\\n\", \"a\": [true, false, null, [], {}], "
                               "\"o\": {\"k\": \"v\"}}"),
           "written: %s", buf ? buf : "");
    xtool_json *w = buf ? xtool_json_parse(buf, len, err, sizeof err) : NULL;
    EXPECT(w && xtool_json_num_of(w, "ts") == 12.345 && xtool_json_int_of(w, "n", 0) == -7 &&
               !strcmp(xtool_json_str_of(w, "s"), "a\"\xc3\xa9\n") &&
               !strcmp(xtool_json_str_of(xtool_json_get(w, "o"), "k"), "v"),
           "read back: %s", err);
    EXPECT(isnan(xtool_json_num_of(w, "s")) && xtool_json_int_of(w, "ts", 99) == 99 &&
               !strcmp(xtool_json_str_of(w, "n"), "") && !strcmp(xtool_json_str_of(NULL, "x"), ""),
           "accessors of the wrong type");
    xtool_json_free(w);
    xtool_json_free(v);
    free(buf);
}

/* Each broken document fails with a message that names its line. */
static void json_bad(void)
{
    static const struct {
        const char *text, *expect;
    } cases[] = {
        {"", "line 1: expected a value, found the end"},
        {"[1,\n2,\n]", "line 3: expected a value, found ']'"},
        {"{\"a\": 1,\n \"a\": 2}", "line 2: duplicate member \"a\""},
        {"{\"a\" 1}", "line 1: expected ':'"},
        {"\"abc", "line 1: a string is not closed"},
        {"\"a\tb\"", "control character 0x09"},
        {"\"\\ud800x\"", "surrogate pair"},
        {"\"\\udc00\"", "lone low surrogate"},
        {"\"\\u0000\"", "NUL"},
        {"\"\\q\"", "unknown escape"},
        {"01", "unexpected '1' after the document"},
        {"-", "a number needs a digit"},
        {"1.", "a digit after '.'"},
        {"1e+", "a digit in its exponent"},
        {"1e999", "out of range"},
        {"{} x", "line 1: unexpected 'x'"},
        {"[tru]", "expected a value, found 't'"},
        {"{\n\n1:2}", "line 3: expected a member name"},
        {"[1 2]", "expected ',' or ']'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[256] = "";
        xtool_json *v = xtool_json_parse(cases[i].text, strlen(cases[i].text), err, sizeof err);
        EXPECT(v == NULL && strstr(err, cases[i].expect), "'%s': got '%s', expected '%s'",
               cases[i].text, err, cases[i].expect);
        xtool_json_free(v);
    }
    /* Nesting deeper than the bound is refused, not followed down the stack. */
    char deep[200];
    memset(deep, '[', sizeof deep);
    char err[256];
    xtool_json *v = xtool_json_parse(deep, sizeof deep, err, sizeof err);
    EXPECT(v == NULL && strstr(err, "nested deeper"), "deep: '%s'", err);
    /* No text at all: refused before any pointer is formed from it (NULL + len
     * is undefined behaviour, which UBSan reports in the sanitizer build). */
    v = xtool_json_parse(NULL, 16, err, sizeof err);
    EXPECT(v == NULL && strstr(err, "no text"), "NULL text: '%s'", err);
    /* A NUL byte inside the text is a character the grammar does not allow. */
    const char nul[] = "[1,\0 2]";
    v = xtool_json_parse(nul, sizeof nul - 1, err, sizeof err);
    EXPECT(v == NULL && strstr(err, "byte 0x00"), "NUL byte: '%s'", err);
}

/* ---- cases files ------------------------------------------------------------------ */

static const char good[] =
    "{\"schema\": \"xattn.cases/1\", \"model\": \"m\", \"extra\": {\"ignored\": 1},\n"
    " \"cases\": [\n"
    "  {\"name\": \"enc.{0..5}\", \"count\": 6, \"dtype\": \"f32\", \"batch\": 3, \"heads\": 4,\n"
    "   \"sq\": 10, \"sk\": 10, \"head_dim\": 32, \"layout\": \"bhsd\",\n"
    "   \"seqlens_q\": [10, 4, 7], \"seqlens_k\": [10, 4, 7], \"info\": {\"calls\": [0]}},\n"
    "  {\"name\": \"dec\", \"count\": 30, \"dtype\": \"bf16\", \"batch\": 1, \"heads\": 9,\n"
    "   \"kv_heads\": 3, \"sq\": 1, \"sk\": 17, \"head_dim\": 64, \"causal\": \"bottom-right\",\n"
    "   \"window\": [8, -5], \"scale\": 0.5, \"bias\": {\"shape\": [1, 1, 1, 17]}, \"lse\": "
    "true},\n"
    "  {\"name\": \"enc.again\", \"count\": 2, \"dtype\": \"f32\", \"batch\": 3, \"heads\": 4,\n"
    "   \"sq\": 10, \"sk\": 10, \"head_dim\": 32, \"layout\": \"bhsd\", \"causal\": false,\n"
    "   \"seqlens_q\": [10, 4, 7], \"seqlens_k\": [10, 4, 7]}\n"
    " ]}\n";

static void cases_ok(void)
{
    xtool_bench_case bc[8];
    xtool_cases_file cf;
    char err[512];
    int n = xtool_cases_parse(good, strlen(good), 7, bc, 8, &cf, err, sizeof err);
    EXPECT(n == 2, "n = %d (%s)", n, err);
    if (n != 2)
        return;
    EXPECT(!strcmp(cf.model, "m"), "model '%s'", cf.model);
    EXPECT(cf.n == 2 && cf.n_file_cases == 3 && cf.calls == 38, "n %d, file cases %d, calls %lld",
           cf.n, cf.n_file_cases, (long long)cf.calls);
    /* the third case is the first one again: merged, counts added, names joined */
    EXPECT(cf.entries[0].count == 8, "merged count %lld", (long long)cf.entries[0].count);
    EXPECT(!strcmp(cf.entries[0].name, "enc.{0..5} + enc.again"), "merged name '%s'",
           cf.entries[0].name);
    EXPECT(cf.entries[0].line == 3 && cf.entries[1].line == 6, "lines %d %d", cf.entries[0].line,
           cf.entries[1].line);
    const xtool_case *a = &bc[0].c, *b = &bc[1].c;
    EXPECT(a->batch == 3 && a->heads == 4 && a->kv_heads == 4 && a->sq == 10 && a->sk == 10 &&
               a->head_dim == 32 && a->head_dim_v == 32 && a->bhsd == 1 && !a->causal &&
               a->seed == 7,
           "case 0 fields");
    EXPECT(a->seqlens_q && a->seqlens_k && a->seqlens_q[1] == 4 && a->seqlens_k[2] == 7,
           "case 0 lengths");
    EXPECT(b->dtype == XATTN_DTYPE_BF16 && b->kv_dtype == XATTN_DTYPE_BF16 && b->kv_heads == 3 &&
               b->causal && b->align == XATTN_ALIGN_BOTTOM_RIGHT && b->window_left == 8 &&
               b->window_right == -1 && b->scale == 0.5f && b->bias == 1 && b->lse == 1 &&
               !b->seqlens_q,
           "case 1 fields");
    EXPECT(strstr(bc[0].key, "padded21/21") && strstr(bc[1].key, "B1 H9/3 Sq1 Sk17 D64 bf16"),
           "keys '%s' '%s'", bc[0].key, bc[1].key);
    EXPECT(!strncmp(bc[1].family, "m: ", 3), "family '%s'", bc[1].family);
    for (int i = 0; i < n; i++) {
        free(bc[i].lq);
        free(bc[i].lk);
    }
    xtool_cases_file_free(&cf);
}

/* Replaces the first occurrence of `from` in the good file by `to`. */
static void with(const char *from, const char *to, char *out, size_t n)
{
    const char *p = strstr(good, from);
    if (!p) {
        snprintf(out, n, "%s", good);
        return;
    }
    snprintf(out, n, "%.*s%s%s", (int)(p - good), good, to, p + strlen(from));
}

static void cases_bad(void)
{
    static const struct {
        const char *from, *to, *expect;
    } cases[] = {
        {"\"xattn.cases/1\"", "\"xattn.cases/2\"", "line 1: schema: expected \"xattn.cases/1\""},
        {"\"count\": 6", "\"count\": 0", "line 3: cases[0].count: 0 is not an integer in 1.."},
        {"\"count\": 6, ", "", "line 3: cases[0]: the member \"count\" is missing"},
        {"\"heads\": 9", "\"heads\": 8",
         "cases[1].kv_heads: 8 query heads are not a multiple of 3"},
        {"\"head_dim\": 64", "\"head_dim\": 300", "line 7: cases[1].head_dim: 300"},
        {"\"dtype\": \"bf16\"", "\"dtype\": \"f64\"",
         "line 6: cases[1].dtype: expected \"f32\", "
         "\"f16\" or \"bf16\", found \"f64\""},
        {"\"causal\": \"bottom-right\"", "\"casual\": true",
         "line 7: cases[1]: unknown member "
         "\"casual\""},
        {"\"causal\": \"bottom-right\"", "\"causal\": true", "cases[1].causal: expected false"},
        {"[10, 4, 7], \"seqlens_k\"", "[10, 4], \"seqlens_k\"",
         "line 5: cases[0].seqlens_q: expected an array of 3 lengths"},
        {"[10, 4, 7], \"info\"", "[10, 4, 11], \"info\"",
         "line 5: cases[0].seqlens_k[2]: expected an integer in 0..10"},
        {"\"window\": [8, -5]", "\"window\": [8]", "cases[1].window: expected [left, right]"},
        {"\"scale\": 0.5", "\"scale\": \"big\"", "cases[1].scale: expected a number"},
        {"\"lse\": true", "\"lse\": 1", "cases[1].lse: a number, expected true or false"},
        {"\"layout\": \"bhsd\"", "\"layout\": \"sbhd\"", "cases[0].layout"},
        {"\"bias\": {\"shape\": [1, 1, 1, 17]}", "\"bias\": 3",
         "line 8: cases[1].bias: a number, expected null, a boolean or an object"},
        {" \"cases\": [\n", " \"cases\": [7,\n", "line 2: cases[0]: a number, expected an object"},
        {"\"sq\": 1,", "\"sq\": 1.5,", "cases[1].sq: 1.5 is not an integer"},
        {"\"info\": {\"calls\": [0]}", "\"info\": 3",
         "cases[0].info: a number, expected an object"},
        {"\"name\": \"dec\"", "\"name\": 5", "cases[1].name: a number, expected a string"},
        {"]}\n", "]\n", "not JSON: line 12: expected ',' or '}' in an object, found ']'"},
        /* the schema's dtypes only: no 8-bit K/V cache from a cases file */
        {"\"dtype\": \"bf16\"", "\"dtype\": \"fp8e4m3\"",
         "line 6: cases[1].dtype: expected \"f32\", \"f16\" or \"bf16\", found \"fp8e4m3\""},
        {"\"dtype\": \"bf16\"", "\"dtype\": \"bf16\", \"kv_dtype\": \"q8_0\"",
         "line 6: cases[1].kv_dtype: expected \"f32\", \"f16\" or \"bf16\", found \"q8_0\""},
        {"\"dtype\": \"bf16\"", "\"dtype\": \"bf16\", \"kv_dtype\": \"fp8e5m2\"",
         "cases[1].kv_dtype: expected"},
        /* a number f32 cannot hold is refused, never replayed as another */
        {"\"scale\": 0.5", "\"scale\": 1e-50",
         "line 8: cases[1].scale: 1e-50 is below f32's smallest normal number"},
        {"\"scale\": 0.5", "\"scale\": -1e-40", "cases[1].scale: -1e-40 is below f32's"},
        {"\"scale\": 0.5", "\"softcap\": 1e-45", "cases[1].softcap: 1e-45 is below f32's"},
        /* UTF-8 text only (RFC 8259): a stray byte, an overlong form, a surrogate */
        {"\"name\": \"dec\"", "\"name\": \"d\xff\"", "line 6: byte "},
        {"\"name\": \"dec\"", "\"name\": \"d\xc0\xaf\"", "(0xc0) is not UTF-8"},
        {"\"name\": \"dec\"", "\"name\": \"d\xed\xa0\x80\"", "(0xed) is not UTF-8"},
        {"\"model\": \"m\"", "\"model\": \"m\xe2\x82\"", "line 1: byte 39 (0xe2) is not UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[4096], err[512] = "";
        with(cases[i].from, cases[i].to, text, sizeof text);
        EXPECT(strcmp(text, good) != 0, "case %zu: the substitution '%s' did not apply", i,
               cases[i].from);
        xtool_bench_case bc[8];
        memset(bc, 0, sizeof bc);
        xtool_cases_file cf;
        int n = xtool_cases_parse(text, strlen(text), 1, bc, 8, &cf, err, sizeof err);
        EXPECT(n == -1 && strstr(err, cases[i].expect), "case %zu: n = %d, got '%s', expected '%s'",
               i, n, err, cases[i].expect);
        EXPECT(cf.entries == NULL, "case %zu: entries left allocated", i);
        for (int k = 0; k < 8; k++)
            EXPECT(bc[k].lq == NULL && bc[k].lk == NULL, "case %zu: lengths of %d left allocated",
                   i, k);
    }
    /* structural problems of the document itself */
    static const struct {
        const char *text, *expect;
    } docs[] = {
        {"[]", "the document is an array, expected an object"},
        {"{\"cases\": []}", "schema: expected"},
        {"{\"schema\": \"xattn.cases/1\"}", "cases: expected a non-empty array of cases (the "
                                            "member is missing)"},
        {"{\"schema\": \"xattn.cases/1\",\n\"cases\": []}", "line 2: cases: expected a non-empty"},
    };
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        char err[512] = "";
        xtool_bench_case bc[2];
        xtool_cases_file cf;
        int n =
            xtool_cases_parse(docs[i].text, strlen(docs[i].text), 1, bc, 2, &cf, err, sizeof err);
        EXPECT(n == -1 && strstr(err, docs[i].expect), "doc %zu: got '%s', expected '%s'", i, err,
               docs[i].expect);
    }
    /* names keep their UTF-8 but never reach the terminal as control
     * characters (ESC, DEL, C1 CSI); a small normal scale is kept as given */
    {
        char text[4096] = "";
        with("\"name\": \"dec\"", "\"name\": \"d\\u001b[31m\xc3\xa9\\u007f\\u009b2J\"", text,
             sizeof text);
        char t2[4096] = "";
        const char *sc = strstr(text, "\"scale\": 0.5");
        if (sc)
            snprintf(t2, sizeof t2, "%.*s\"scale\": 3e-38%s", (int)(sc - text), text, sc + 12);
        char err2[512] = "";
        xtool_bench_case bc2[8];
        xtool_cases_file cf2;
        int n2 = xtool_cases_parse(t2, strlen(t2), 1, bc2, 8, &cf2, err2, sizeof err2);
        EXPECT(n2 == 2, "escaped name: n = %d (%s)", n2, err2);
        if (n2 == 2) {
            EXPECT(!strcmp(cf2.entries[1].name, "d\\x1b[31m\xc3\xa9\\x7f\\u009b2J"),
                   "the name is printed as '%s'", cf2.entries[1].name);
            EXPECT(bc2[1].c.scale == 3e-38f, "scale 3e-38 replayed as %g", (double)bc2[1].c.scale);
            for (int i = 0; i < n2; i++) {
                free(bc2[i].lq);
                free(bc2[i].lk);
            }
            xtool_cases_file_free(&cf2);
        }
    }
    /* more cases than the caller has room for */
    char err[512] = "";
    xtool_bench_case bc[1];
    xtool_cases_file cf;
    int n = xtool_cases_parse(good, strlen(good), 1, bc, 1, &cf, err, sizeof err);
    EXPECT(n == -1 && strstr(err, "cases: 3 cases, at most 1"), "cap: '%s'", err);
}

/* ---- a replay's results against its cases file ------------------------------------ */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *len = (size_t)n;
    }
    return buf;
}

static double num(const xtool_json *o, const char *key)
{
    const xtool_json *v = xtool_json_get(o, key);
    return v && v->type == XTOOL_JSON_NUMBER ? v->number : NAN;
}

static const char *str(const xtool_json *o, const char *key)
{
    const xtool_json *v = xtool_json_get(o, key);
    return v && v->type == XTOOL_JSON_STRING ? v->string : "";
}

static int check_replay(const char *results_path, const char *cases_path)
{
    size_t rl = 0, cl = 0;
    char *rt = slurp(results_path, &rl), *ct = slurp(cases_path, &cl);
    EXPECT(rt && ct, "cannot read %s or %s", results_path, cases_path);
    if (!rt || !ct) {
        free(rt);
        free(ct);
        return 1;
    }
    char err[512];
    static xtool_bench_case bc[XTOOL_CASES_MAX];
    xtool_cases_file cf;
    int n = xtool_cases_parse(ct, cl, 42, bc, XTOOL_CASES_MAX, &cf, err, sizeof err);
    EXPECT(n > 0, "the cases file: %s", err);
    xtool_json *r = xtool_json_parse(rt, rl, err, sizeof err);
    EXPECT(r != NULL, "results.json: %s", err);
    if (n <= 0 || !r) {
        free(rt);
        free(ct);
        xtool_json_free(r);
        return 1;
    }
    const xtool_json *blk = xtool_json_get(r, "cases_file");
    const xtool_json *cases = xtool_json_get(blk, "cases");
    const xtool_json *results = xtool_json_get(r, "results");
    EXPECT(blk && cases && cases->type == XTOOL_JSON_ARRAY && (int)cases->n == n,
           "cases_file.cases: %zu cases, the file has %d", cases ? cases->n : 0, n);
    EXPECT(!strcmp(str(blk, "model"), cf.model), "model '%s' vs '%s'", str(blk, "model"), cf.model);
    EXPECT(num(blk, "calls") == (double)cf.calls, "calls %g vs %lld", num(blk, "calls"),
           (long long)cf.calls);
    for (int i = 0; cases && i < n && i < (int)cases->n; i++) {
        const xtool_json *c = &cases->items[i];
        const xtool_case *e = &bc[i].c;
        EXPECT(num(c, "count") == (double)cf.entries[i].count && num(c, "batch") == e->batch &&
                   num(c, "heads") == e->heads && num(c, "kv_heads") == e->kv_heads &&
                   num(c, "sq") == e->sq && num(c, "sk") == e->sk &&
                   num(c, "head_dim") == e->head_dim && num(c, "head_dim_v") == e->head_dim_v &&
                   !strcmp(str(c, "dtype"), xattn_dtype_name(e->dtype)) &&
                   !strcmp(str(c, "case"), bc[i].key) &&
                   !strcmp(str(c, "name"), cf.entries[i].name),
               "case %d (%s) differs from the file's", i, bc[i].key);
    }
    /* every cell ran, and matches one case of the file */
    int cells = 0;
    for (size_t i = 0; results && i < results->n; i++) {
        const xtool_json *x = &results->items[i];
        int found = -1;
        for (int k = 0; k < n && found < 0; k++)
            if (!strcmp(str(x, "case"), bc[k].key))
                found = k;
        EXPECT(found >= 0, "result %zu: case '%s' is not in the file", i, str(x, "case"));
        EXPECT(!strcmp(str(x, "status"), "ok") && strcmp(str(x, "check"), "fail"),
               "result %zu (%s %s): status %s, check %s", i, str(x, "algo"), str(x, "case"),
               str(x, "status"), str(x, "check"));
        if (found >= 0)
            EXPECT(num(x, "batch") == bc[found].c.batch && num(x, "sk") == bc[found].c.sk,
                   "result %zu: shape", i);
        cells++;
    }
    EXPECT(cells > 0, "no results");
    /* each total: sum over the cases of count x the median of that device and algorithm */
    const xtool_json *totals = xtool_json_get(blk, "totals");
    EXPECT(totals && totals->n > 0, "no totals");
    for (size_t t = 0; totals && t < totals->n; t++) {
        const xtool_json *x = &totals->items[t];
        const char *algo = str(x, "algo");
        double want = 0;
        int64_t calls = 0;
        for (int k = 0; k < n; k++) {
            double best = -1;
            for (size_t i = 0; results && i < results->n; i++) {
                const xtool_json *c = &results->items[i];
                if (strcmp(str(c, "case"), bc[k].key) ||
                    strcmp(str(c, "backend"), str(x, "backend")) ||
                    (strcmp(algo, "best") && strcmp(str(c, "algo"), algo)))
                    continue;
                double m = num(c, "median_ms");
                if (!isnan(m) && (best < 0 || m < best))
                    best = m;
            }
            want += best * (double)cf.entries[k].count;
            calls += cf.entries[k].count;
        }
        double got = num(x, "ms_per_forward");
        EXPECT(num(x, "missing_cases") == 0 && fabs(got - want) <= 1e-9 * want &&
                   num(x, "calls") == (double)calls,
               "total %s %s: %g ms for %g calls, expected %g ms for %lld", str(x, "backend"), algo,
               got, num(x, "calls"), want, (long long)calls);
    }
    for (int i = 0; i < n; i++) {
        free(bc[i].lq);
        free(bc[i].lk);
    }
    xtool_cases_file_free(&cf);
    xtool_json_free(r);
    free(rt);
    free(ct);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "unit")) {
        json_ok();
        json_write();
        json_bad();
        cases_ok();
        cases_bad();
    } else if (argc == 4 && !strcmp(argv[1], "check")) {
        check_replay(argv[2], argv[3]);
    } else {
        fprintf(stderr, "usage: test_cases_file unit | check RESULTS.json CASES.json\n");
        return 2;
    }
    return xattn_test_summary();
}
