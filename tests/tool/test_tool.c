/*
 * Tests of the xattn tool (bench/): every subcommand on small CPU shapes,
 * checked on its outputs.
 *
 *   test_tool unit                      pure functions: flag parsing, --lengths,
 *                                       statistics, the noise rule, padding waste,
 *                                       roofline, and the reference check catching
 *                                       a wrong or unwritten output
 *   test_tool outputs XATTN_BIN DIR     bench (results.json against the schema,
 *                                       results.csv, chart.svg well-formed with one
 *                                       series per backend x algorithm, trace.json),
 *                                       compare (itself: no real difference; a
 *                                       slowed copy: real slowdowns), advise (padding
 *                                       waste computed by hand), run, check, devices
 *   test_tool usage XATTN_BIN DIR       bad command lines exit 2 with a message
 *   test_tool threads XATTN_BIN DIR     bench --threads 1,2: the thread column and
 *                                       fields, one chart series per thread count,
 *                                       the thread-scaling block and its JSON
 *   test_tool manual DOC [--write]      the option list of docs/tool.md is the one
 *                                       the table of options makes (--write: make it so)
 *
 * Exits 0 when everything passed, 1 otherwise; ends with "N passed, N failed,
 * N skipped". JSON is read with jansson when the build has it (the JSON checks
 * are skipped otherwise).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef XATTN_TEST_HAVE_JANSSON
#include <jansson.h>
#endif

#include "../xattn_test.h"
#include "xattn.h"
#include "xattn_writer.h"
#include "xtool_advise.h"
#include "xtool_bench.h"
#include "xtool_case.h"
#include "xtool_cli.h"
#include "xtool_cli_table.h"
#include "xtool_compare_read.h"
#include "xtool_stats.h"
#include "xtool_tune.h"

/* ---- helpers ---------------------------------------------------------------- */

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

static const char *g_bin, *g_dir;
static char g_out[8192], g_err[8192]; /* the last command's stdout/stderr (truncated) */
static char *g_out_all;               /* the last command's whole stdout */

/* Runs the tool with the given arguments (NULL-terminated), stdout and stderr
 * to files; returns the exit status (or -1), keeps the outputs in g_out/g_err. */
static int run_tool(const char *first, ...)
{
    const char *argv[64];
    int argc = 0;
    argv[argc++] = g_bin;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 63; a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    char out_path[4096], err_path[4096];
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", g_dir);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", g_dir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0)
            _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(g_bin, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0)
        return -1;
    char *o = read_all(out_path), *e = read_all(err_path);
    snprintf(g_out, sizeof g_out, "%s", o ? o : "");
    snprintf(g_err, sizeof g_err, "%s", e ? e : "");
    free(g_out_all);
    g_out_all = o;
    free(e);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- a small XML well-formedness checker ------------------------------------- */

typedef struct xml_stats {
    int elements;
    char series[32][96]; /* distinct data-series of <polyline class="series"> */
    int n_series;
    int polylines;
    int legend_items;
    int bars_faster, bars_slower, bars_noise;
    char error[256];
} xml_stats;

static int xml_name_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || c >= 0x80;
}

static int xml_name_char(int c)
{
    return xml_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* An entity reference at p ("&...;"); returns its length or 0. */
static int xml_entity(const char *p)
{
    static const char *const named[] = {"&lt;", "&gt;", "&amp;", "&quot;", "&apos;"};
    for (int i = 0; i < 5; i++)
        if (!strncmp(p, named[i], strlen(named[i])))
            return (int)strlen(named[i]);
    if (p[1] == '#') {
        int i = 2, hex = p[2] == 'x';
        if (hex)
            i++;
        int digits = 0;
        while ((hex ? strchr("0123456789abcdefABCDEF", p[i]) : strchr("0123456789", p[i])) &&
               p[i]) {
            i++;
            digits++;
        }
        if (digits && p[i] == ';')
            return i + 1;
    }
    return 0;
}

/* Checks text up to `end` (or NUL): no '<', every '&' an entity. */
static int xml_text_ok(const char *p, const char *end)
{
    for (; *p && p < end; p++) {
        if (*p == '<')
            return 0;
        if (*p == '&') {
            int n = xml_entity(p);
            if (!n)
                return 0;
            p += n - 1;
        }
    }
    return 1;
}

static void xml_unescape(const char *p, size_t n, char *out, size_t outn)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < outn; i++) {
        if (p[i] == '&') {
            if (!strncmp(p + i, "&amp;", 5)) {
                out[k++] = '&';
                i += 4;
                continue;
            }
            if (!strncmp(p + i, "&lt;", 4)) {
                out[k++] = '<';
                i += 3;
                continue;
            }
            if (!strncmp(p + i, "&gt;", 4)) {
                out[k++] = '>';
                i += 3;
                continue;
            }
            if (!strncmp(p + i, "&quot;", 6)) {
                out[k++] = '"';
                i += 5;
                continue;
            }
        }
        out[k++] = p[i];
    }
    out[k] = '\0';
}

static int xml_fail(xml_stats *s, const char *doc, const char *p, const char *what)
{
    int line = 1;
    for (const char *q = doc; q < p; q++)
        line += *q == '\n';
    snprintf(s->error, sizeof s->error, "line %d: %s", line, what);
    return -1;
}

/* Returns 0 when doc is a well-formed XML document (one root element, tags
 * nested and matched, attributes quoted and unique, entities known). */
static int xml_check(const char *doc, xml_stats *s)
{
    memset(s, 0, sizeof *s);
    const char *p = doc;
    char stack[64][64];
    int depth = 0, roots = 0;
    if (!strncmp(p, "<?xml", 5)) {
        const char *e = strstr(p, "?>");
        if (!e)
            return xml_fail(s, doc, p, "unterminated XML declaration");
        p = e + 2;
    }
    while (*p) {
        if (*p != '<') {
            const char *lt = strchr(p, '<');
            const char *end = lt ? lt : p + strlen(p);
            if (!xml_text_ok(p, end))
                return xml_fail(s, doc, p, "bad character data (raw & or unknown entity)");
            if (depth == 0)
                for (const char *q = p; q < end; q++)
                    if (!strchr(" \t\r\n", *q))
                        return xml_fail(s, doc, q, "text outside the root element");
            p = end;
            continue;
        }
        if (!strncmp(p, "<!--", 4)) {
            const char *e = strstr(p + 4, "-->");
            if (!e)
                return xml_fail(s, doc, p, "unterminated comment");
            p = e + 3;
            continue;
        }
        if (p[1] == '/') {
            const char *q = p + 2;
            char name[64];
            int n = 0;
            while (xml_name_char((unsigned char)*q) && n < 63)
                name[n++] = *q++;
            name[n] = '\0';
            while (*q == ' ' || *q == '\n' || *q == '\t')
                q++;
            if (*q != '>')
                return xml_fail(s, doc, p, "bad end tag");
            if (depth == 0 || strcmp(stack[depth - 1], name))
                return xml_fail(s, doc, p, "end tag does not match the open element");
            depth--;
            p = q + 1;
            continue;
        }
        /* start tag */
        const char *q = p + 1;
        if (!xml_name_start((unsigned char)*q))
            return xml_fail(s, doc, p, "bad element name");
        char name[64];
        int n = 0;
        while (xml_name_char((unsigned char)*q) && n < 63)
            name[n++] = *q++;
        name[n] = '\0';
        char attrs[32][64];
        int na = 0;
        int is_series = 0, is_legend = 0, is_bar = 0;
        char series[96] = "", verdict[16] = "";
        for (;;) {
            int ws = 0;
            while (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r') {
                q++;
                ws = 1;
            }
            if (*q == '>' || (*q == '/' && q[1] == '>'))
                break;
            if (!ws || !xml_name_start((unsigned char)*q))
                return xml_fail(s, doc, q, "bad attribute");
            char an[64];
            int k = 0;
            while (xml_name_char((unsigned char)*q) && k < 63)
                an[k++] = *q++;
            an[k] = '\0';
            for (int i = 0; i < na; i++)
                if (!strcmp(attrs[i], an))
                    return xml_fail(s, doc, q, "duplicate attribute");
            if (na < 32)
                snprintf(attrs[na++], sizeof attrs[0], "%s", an);
            if (*q != '=' || (q[1] != '"' && q[1] != '\''))
                return xml_fail(s, doc, q, "attribute without a quoted value");
            char quote = q[1];
            const char *v = q + 2, *ve = strchr(v, quote);
            if (!ve)
                return xml_fail(s, doc, q, "unterminated attribute value");
            if (!xml_text_ok(v, ve))
                return xml_fail(s, doc, v, "bad attribute value");
            if (!strcmp(an, "class")) {
                is_series |= (size_t)(ve - v) == 6 && !strncmp(v, "series", 6);
                is_legend |= (size_t)(ve - v) == 11 && !strncmp(v, "legend-item", 11);
                is_bar |= (size_t)(ve - v) == 3 && !strncmp(v, "bar", 3);
            }
            if (!strcmp(an, "data-series"))
                xml_unescape(v, (size_t)(ve - v), series, sizeof series);
            if (!strcmp(an, "data-verdict"))
                xml_unescape(v, (size_t)(ve - v), verdict, sizeof verdict);
            q = ve + 1;
        }
        s->elements++;
        if (is_series && !strcmp(name, "polyline")) {
            s->polylines++;
            int known = 0;
            for (int i = 0; i < s->n_series; i++)
                known |= !strcmp(s->series[i], series);
            if (!known && s->n_series < 32)
                snprintf(s->series[s->n_series++], sizeof s->series[0], "%s", series);
        }
        s->legend_items += is_legend;
        if (is_bar) {
            s->bars_faster += !strcmp(verdict, "faster");
            s->bars_slower += !strcmp(verdict, "slower");
            s->bars_noise += !strcmp(verdict, "noise");
        }
        if (depth == 0)
            roots++;
        if (roots > 1)
            return xml_fail(s, doc, p, "more than one root element");
        if (*q == '/') {
            p = q + 2;
        } else {
            if (depth == 64)
                return xml_fail(s, doc, p, "nesting too deep");
            snprintf(stack[depth++], sizeof stack[0], "%s", name);
            p = q + 1;
        }
    }
    if (depth)
        return xml_fail(s, doc, p, "elements left open");
    if (roots != 1)
        return xml_fail(s, doc, p, "no root element");
    return 0;
}

static void test_xml_checker(void)
{
    xml_stats s;
    EXPECT(xml_check("<?xml version=\"1.0\"?>\n<a x=\"1\"><b/><c y='&amp;'>t &lt; u</c></a>\n",
                     &s) == 0,
           "%s", s.error);
    EXPECT(xml_check("<a><b></a></b>", &s) != 0, "crossed tags accepted");
    EXPECT(xml_check("<a x=1/>", &s) != 0, "unquoted attribute accepted");
    EXPECT(xml_check("<a>x & y</a>", &s) != 0, "raw & accepted");
    EXPECT(xml_check("<a x=\"1\" x=\"2\"/>", &s) != 0, "duplicate attribute accepted");
    EXPECT(xml_check("<a/><b/>", &s) != 0, "two roots accepted");
    EXPECT(xml_check("<a>", &s) != 0, "open element accepted");
    EXPECT(xml_check("<svg><polyline class=\"series\" data-series=\"cpu:0 a&amp;b\"/></svg>", &s) ==
                   0 &&
               s.n_series == 1 && !strcmp(s.series[0], "cpu:0 a&b"),
           "series '%s'", s.n_series ? s.series[0] : "");
}

/* ---- unit: parsing, stats, the reference check -------------------------------- */

static int parse(xtool_cli_opts *o, char *err, size_t n, ...)
{
    char *argv[64];
    int argc = 0;
    va_list ap;
    va_start(ap, n);
    for (char *a = va_arg(ap, char *); a && argc < 63; a = va_arg(ap, char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    return xtool_cli_parse(argc, argv, o, err, n);
}

/* The one JSON/CSV writer of the library's exports and the tool's files
 * (backends/xattn_writer.c): escaping, invalid UTF-8, and numbers that read
 * back exactly in the fewest digits. */
static void expect_written(void (*write)(FILE *, const char *), const char *in, const char *want)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        EXPECT(0, "open_memstream");
        return;
    }
    write(f, in);
    fclose(f);
    EXPECT(buf && !strcmp(buf, want), "wrote [%s], expected [%s]", buf ? buf : "", want);
    free(buf);
}

static char *num_text(void (*write)(FILE *, double), double v)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f) {
        write(f, v);
        fclose(f);
    }
    return buf;
}

static void test_writer(void)
{
    expect_written(xattn__json_str, "a\"b\\c\n\t\r\x01\x7f",
                   "\"a\\\"b\\\\c\\n\\t\\r\\u0001\\u007f\"");
    expect_written(xattn__json_str, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                   "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    /* a stray byte, an overlong '/', a surrogate, a truncated sequence */
    expect_written(xattn__json_str, "\xff|\xc0\xaf|\xed\xa0\x80|\xe2\x82",
                   "\"\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd\"");
    expect_written(xattn__json_str, NULL, "\"\"");
    expect_written(xattn__csv_str, "plain", "plain");
    expect_written(xattn__csv_str, "a,b", "\"a,b\"");
    expect_written(xattn__csv_str, "say \"x\"\nnow", "\"say \"\"x\"\"\nnow\"");
    const struct {
        double v;
        const char *json, *csv;
    } nums[] = {{0.1, "0.1", "0.1"},
                {3, "3", "3"},
                {-0.5, "-0.5", "-0.5"},
                {1e300, "1e+300", "1e+300"},
                {0.1 + 0.2, "0.30000000000000004", "0.30000000000000004"},
                {NAN, "null", ""},
                {INFINITY, "null", ""}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        char *j = num_text(xattn__json_num, nums[i].v), *c = num_text(xattn__csv_num, nums[i].v);
        EXPECT(j && c && !strcmp(j, nums[i].json) && !strcmp(c, nums[i].csv),
               "%g: json [%s] csv [%s], expected [%s] [%s]", nums[i].v, j ? j : "", c ? c : "",
               nums[i].json, nums[i].csv);
        free(j);
        free(c);
    }
    /* any double reads back exactly, in at most 17 digits */
    uint64_t seed = 7;
    for (int i = 0; i < 2000; i++) {
        uint64_t bits = xattn_test_rng_next(&seed);
        double v;
        memcpy(&v, &bits, sizeof v);
        if (!isfinite(v))
            continue;
        char *j = num_text(xattn__json_num, v);
        EXPECT(j && strtod(j, NULL) == v && strlen(j) <= 24, "%.17g written as [%s]", v,
               j ? j : "");
        free(j);
    }
}

static void test_parse(void)
{
    xtool_cli_opts o;
    char err[512];
    EXPECT(parse(&o, err, sizeof err, "run", NULL) == 0 && o.cmd == XTOOL_CLI_RUN && o.reps == 5 &&
               o.device == 0 && o.check == 1,
           "defaults: %s", err);
    EXPECT(parse(&o, err, sizeof err, "bench", "--sq", "64..1024", "--dtype", "f32,bf16", "--algo",
                 "flash", "--causal=top-left", "--window", "8,-3", "--out", "d", NULL) == 0,
           "%s", err);
    EXPECT(o.sq.n == 5 && o.sq.v[0] == 64 && o.sq.v[4] == 1024, "range: n %d", o.sq.n);
    EXPECT(o.n_dtypes == 2 && o.dtypes[1] == XATTN_DTYPE_BF16, "dtypes");
    EXPECT(o.n_algos == 1 && o.algos[0] == XATTN_ALGO_FLASH, "algo");
    EXPECT(o.causal && o.align == XATTN_ALIGN_TOP_LEFT, "causal");
    EXPECT(o.window_left == 8 && o.window_right == -1, "window %lld,%lld", (long long)o.window_left,
           (long long)o.window_right);
    EXPECT(o.device == -1 && !strcmp(o.out_dir, "d"), "bench device default / out");
    EXPECT(parse(&o, err, sizeof err, "bench", "--sq", "16,64..256", NULL) == 0 && o.sq.n == 4 &&
               o.sq.v[0] == 16 && o.sq.v[3] == 256,
           "mixed list: %s", err);
    /* The caller's argv is not permuted. */
    char a0[] = "compare", a1[] = "x.json", a2[] = "--svg", a3[] = "c.svg", a4[] = "y.json";
    char *av[] = {a0, a1, a2, a3, a4, NULL};
    EXPECT(xtool_cli_parse(5, av, &o, err, sizeof err) == 0 && o.n_files == 2 &&
               !strcmp(o.svg_path, "c.svg") && av[1] == a1 && av[2] == a2 && av[4] == a4,
           "compare: %s", err);

    struct {
        const char *args[8];
        const char *expect; /* a word of the message */
    } bad[] = {
        {{"run", "--foo"}, "--foo"},
        {{"run", "--sq", "abc"}, "--sq"},
        {{"run", "--sq", "-1"}, "--sq"},
        {{"run", "--head-dim", "300"}, "--head-dim"},
        {{"run", "--heads", "6", "--kv-heads", "4"}, "multiple"},
        {{"run", "--sq", "1,2"}, "one value"},
        {{"run", "--dtype", "f64"}, "f64"},
        {{"run", "--window", "5"}, "--window"},
        {{"run", "--causal=left"}, "--causal"},
        {{"run", "--scale", "2"}, "--softmax-scale"},
        {{"run", "--varlen"}, "--lengths"},
        {{"run", "unexpected"}, "unexpected"},
        {{"run", "--sq"}, "needs a value"},
        {{"bench", "--max-spread", "x"}, "--max-spread"},
        {{"bench", "--sq", "1024..64"}, "--sq"},
        {{"bench", "--chart", "pie"}, "--chart"},
        {{"bench", "--alibi=1"}, "takes no value"},
        {{"bench", "--threads", "-1"}, "--threads"},
        {{"bench", "--threads", "1,"}, "--threads"},
        {{"bench", "--threads", "two"}, "--threads"},
        {{"bench", "--threads", "5000"}, "--threads"},
        {{"run", "--threads", "1,2"}, "one value"},
        {{"check", "--threads", "1,2"}, "one value"},
        {{"advise", "--threads", "1,2"}, "one value"},
        {{"compare", "a.json"}, "two"},
        {{"bench", "--ab-rounds", "0", "--ab", "x"}, "--ab-rounds"},
        {{"bench", "--ab-rounds", "7"}, "--ab OLD_XATTN"},
        {{"bench", "--passes", "0"}, "--passes"},
        {{"bench", "--passes", "2", "--ab", "x"}, "--passes and --budget do not apply to --ab"},
        {{"bench", "--budget", "-1"}, "--budget"},
        {{"run", "--passes", "2"}, "--passes"},
        {{"run", "--ab", "x"}, "--ab"},
        {{"advise", "--algo", "flash"}, "--algo"},
        {{"devices", "--sq", "5"}, "--sq"},
        {{"nope"}, "not a command"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[9];
        int argc = 0;
        while (argc < 8 && bad[i].args[argc]) {
            argv[argc] = (char *)bad[i].args[argc];
            argc++;
        }
        argv[argc] = NULL;
        err[0] = '\0';
        int rc = xtool_cli_parse(argc, argv, &o, err, sizeof err);
        EXPECT(rc == XTOOL_EXIT_USAGE && strstr(err, bad[i].expect),
               "case %zu (%s %s): rc %d, message '%s'", i, bad[i].args[0],
               bad[i].args[1] ? bad[i].args[1] : "", rc, err);
    }
    /* --threads: a list for bench (a sweep axis), one value elsewhere. */
    EXPECT(parse(&o, err, sizeof err, "bench", "--threads", "1,2", NULL) == 0 &&
               o.thread_list.n == 2 && o.thread_list.v[0] == 1 && o.thread_list.v[1] == 2 &&
               o.threads == 1,
           "bench --threads 1,2: %s (n %d)", err, o.thread_list.n);
    EXPECT(parse(&o, err, sizeof err, "bench", "--threads", "1..8", NULL) == 0 &&
               o.thread_list.n == 4 && o.thread_list.v[3] == 8,
           "bench --threads 1..8: %s", err);
    EXPECT(parse(&o, err, sizeof err, "bench", "--threads", "1,0", NULL) == 0 &&
               o.thread_list.n == 2 && o.thread_list.v[1] == 0,
           "bench --threads 1,0 (0 = all): %s", err);
    EXPECT(parse(&o, err, sizeof err, "bench", NULL) == 0 && o.thread_list.n == 0 && o.threads == 0,
           "bench: no --threads");
    EXPECT(parse(&o, err, sizeof err, "run", "--threads", "3", NULL) == 0 && o.threads == 3 &&
               o.thread_list.n == 1,
           "run --threads 3: %s", err);
    /* --cpu-simd: the XATTN_OPT_CPU_SIMD values by name. */
    EXPECT(parse(&o, err, sizeof err, "run", "--cpu-simd", "avx2", NULL) == 0 && o.cpu_simd == 2,
           "run --cpu-simd avx2: %s (%d)", err, o.cpu_simd);
    EXPECT(parse(&o, err, sizeof err, "run", NULL) == 0 && o.cpu_simd == 0, "run: cpu_simd %d",
           o.cpu_simd);
    EXPECT(parse(&o, err, sizeof err, "bench", "--cpu-simd", "sse4", NULL) == XTOOL_EXIT_USAGE &&
               strstr(err, "--cpu-simd: 'sse4'"),
           "--cpu-simd sse4: '%s'", err);
    EXPECT(!strcmp(xtool_cli_simd_name(3), "avx512") && !strcmp(xtool_cli_simd_name(9), "?"),
           "xtool_cli_simd_name");
    EXPECT(parse(&o, err, sizeof err, "bench", "--threads", "2", "--preset", "cpu-targets", NULL) ==
                   0 &&
               (o.given & XTOOL_GIVEN_THREADS) && !(o.given & XTOOL_GIVEN_CASE_MASK),
           "--threads is not a case flag: %s", err);

    /* --help wins over validation, and every command has a help text. */
    EXPECT(parse(&o, err, sizeof err, "compare", "--help", NULL) == 0 && o.help, "help");
    for (int c = XTOOL_CLI_DEVICES; c < XTOOL_CLI_CMD_COUNT; c++)
        EXPECT(strstr(xtool_cli_help_text((xtool_cli_cmd)c), "usage: xattn") != NULL, "help %d", c);
}

/* The table of options drives the parser and --help: every row's flag is
 * accepted by each of its commands and listed in its help, nothing else is
 * listed, two rows never give one command the same flag, and a refusal row
 * refuses with its reason. */
static const char *sample_value(const xtool_opt_def *d)
{
    static const struct {
        const char *name, *value;
    } custom[] = {{"backend", "cpu"},   {"algo", "flash"}, {"dtype", "f16"},
                  {"kv-dtype", "bf16"}, {"window", "4,0"}, {"threads", "1"}};
    static char num[64];
    if (d->kind == XTOOL_ARG_FLAG || !d->arg || d->optional_value)
        return NULL;
    if (d->dflt)
        return d->dflt;
    switch (d->kind) {
    case XTOOL_ARG_INT:
    case XTOOL_ARG_U64:
    case XTOOL_ARG_LIST:
        snprintf(num, sizeof num, "%lld", (long long)(d->ilo ? d->ilo : 1));
        return num;
    case XTOOL_ARG_NUM:
    case XTOOL_ARG_FLOAT: snprintf(num, sizeof num, "%g", d->dlo > 0 ? d->dlo : 1.0); return num;
    case XTOOL_ARG_CHOICE: return d->choices[0];
    case XTOOL_ARG_TEXT: return "x";
    default: break;
    }
    for (size_t i = 0; i < sizeof custom / sizeof custom[0]; i++)
        if (!strcmp(custom[i].name, d->name))
            return custom[i].value;
    return "?";
}

static void test_opt_table(void)
{
    for (size_t i = 0; i < xtool_opt_ndefs; i++) {
        const xtool_opt_def *d = &xtool_opt_defs[i];
        for (size_t j = i + 1; j < xtool_opt_ndefs; j++)
            EXPECT(strcmp(d->name, xtool_opt_defs[j].name) || !(d->cmds & xtool_opt_defs[j].cmds),
                   "--%s: two rows for one command", d->name);
        for (int c = XTOOL_CLI_DEVICES; c < XTOOL_CLI_CMD_COUNT; c++) {
            if (!(d->cmds & XTOOL_CMD_BIT(c)))
                continue;
            char flag[64], err[512];
            snprintf(flag, sizeof flag, "--%s", d->name);
            char *argv[8] = {(char *)xtool_cli_cmd_name((xtool_cli_cmd)c), flag};
            int argc = 2;
            const char *v = d->refused ? NULL : sample_value(d);
            if (v)
                argv[argc++] = (char *)v;
            /* what another option of the rule needs */
            if (c == XTOOL_CLI_COMPARE)
                argv[argc++] = "a.json", argv[argc++] = "b.json";
            if (!strcmp(d->name, "varlen"))
                argv[argc++] = "--lengths=x";
            if (!strcmp(d->name, "ab-rounds"))
                argv[argc++] = "--ab=x";
            xtool_cli_opts o;
            int rc = xtool_cli_parse(argc, argv, &o, err, sizeof err);
            const char *help = xtool_cli_help_text((xtool_cli_cmd)c);
            char listed[80];
            snprintf(listed, sizeof listed, "\n  --%s", d->name);
            if (d->refused) {
                EXPECT(rc == XTOOL_EXIT_USAGE && strstr(err, d->refused) && !strstr(help, listed),
                       "%s --%s: refused with '%s', listed %d", argv[0], d->name, err,
                       strstr(help, listed) != NULL);
                continue;
            }
            EXPECT(rc == 0, "%s --%s %s: %s", argv[0], d->name, v ? v : "", err);
            EXPECT(strstr(help, listed) != NULL, "%s --help lacks --%s", argv[0], d->name);
        }
    }
    /* every flag a help lists is a row of that command */
    for (int c = XTOOL_CLI_DEVICES; c < XTOOL_CLI_CMD_COUNT; c++) {
        const char *help = xtool_cli_help_text((xtool_cli_cmd)c);
        for (const char *p = strstr(help, "\n  --"); p; p = strstr(p + 1, "\n  --")) {
            char name[64];
            size_t len = strcspn(p + 5, " [\n");
            snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), p + 5);
            int row = 0;
            for (size_t i = 0; i < xtool_opt_ndefs; i++)
                row |= !xtool_opt_defs[i].refused && (xtool_opt_defs[i].cmds & XTOOL_CMD_BIT(c)) &&
                       !strcmp(xtool_opt_defs[i].name, name);
            EXPECT(row, "%s --help lists --%s, which is no row of it",
                   xtool_cli_cmd_name((xtool_cli_cmd)c), name);
        }
    }
}

/* The manual's option list (docs/tool.md, between its options markers) is
 * the one the table makes; with --write it is made so. */
static void test_manual(const char *doc, int write)
{
    char *text = read_all(doc);
    EXPECT(text != NULL, "cannot read %s", doc);
    if (!text)
        return;
    const char *begin = strstr(text, "<!-- BEGIN options");
    const char *body = begin ? strstr(begin, "-->\n") : NULL;
    const char *end = body ? strstr(body, "<!-- END options -->") : NULL;
    EXPECT(begin && body && end, "%s: no <!-- BEGIN options ... --> ... <!-- END options --> block",
           doc);
    char *gen = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&gen, &len);
    if (m) {
        xtool_cli_manual_print(m);
        fclose(m);
    }
    if (begin && body && end && gen) {
        body += 4;
        size_t have = (size_t)(end - body);
        int same = have == len && !memcmp(body, gen, len);
        if (!same && write) {
            FILE *f = fopen(doc, "w");
            if (f) {
                fwrite(text, 1, (size_t)(body - text), f);
                fputs(gen, f);
                fputs(end, f);
                same = fclose(f) == 0;
            }
            printf("%s: the option list %s\n", doc, same ? "rewritten" : "NOT written");
        }
        size_t k = 0;
        while (k < have && k < len && body[k] == gen[k])
            k++;
        EXPECT(same,
               "%s: the option list is not the table's (first difference at byte %zu: \"%.60s\" "
               "where the table gives \"%.60s\"); run 'test_tool manual %s --write'",
               doc, k, body + k, gen + (k < len ? k : len), doc);
    }
    free(gen);
    free(text);
}

static void test_lengths(void)
{
    int32_t lq[8], lk[8];
    int n;
    char err[256];
    EXPECT(xtool_cli_parse_lengths("# batch\n4\n\n37 90  # q and k\n 1\n", lq, lk, 8, &n, err,
                                   sizeof err) == 0 &&
               n == 3 && lq[0] == -1 && lk[0] == 4 && lq[1] == 37 && lk[1] == 90 && lk[2] == 1,
           "%s", err);
    EXPECT(xtool_cli_parse_lengths("4\nfive\n", lq, lk, 8, &n, err, sizeof err) == 2 &&
               strstr(err, "line 2"),
           "bad line: '%s'", err);
    EXPECT(xtool_cli_parse_lengths("1 2 3\n", lq, lk, 8, &n, err, sizeof err) == 2,
           "three numbers");
    EXPECT(xtool_cli_parse_lengths("# nothing\n", lq, lk, 8, &n, err, sizeof err) == 2, "empty");
    EXPECT(xtool_cli_parse_lengths("1\n2\n3\n", lq, lk, 2, &n, err, sizeof err) == 2, "over cap");
    EXPECT(xtool_cli_parse_lengths("-3\n", lq, lk, 8, &n, err, sizeof err) == 2, "negative");
}

static void test_stats(void)
{
    xtool_stats s;
    const double v[] = {5, 1, 4, 2, 3, 100, 2, 3, 4, 1};
    EXPECT(xtool_stats_compute(v, 10, &s) == 0, "compute");
    /* sorted: 1 1 2 2 3 3 4 4 5 100 -> median 3, p90 = x[ceil(9)-1] = x[8] = 5, min 1 */
    EXPECT(s.median == 3 && s.min == 1 && s.max == 100 && s.p90 == 5, "median %g p90 %g", s.median,
           s.p90);
    /* |x - 3|: 2 2 1 1 0 0 1 1 2 97 -> sorted 0 0 1 1 1 1 2 2 2 97 -> MAD 1 */
    EXPECT(s.mad == 1 && fabs(s.spread - 1.0 / 3) < 1e-12, "mad %g spread %g", s.mad, s.spread);
    double r;
    EXPECT(xtool_stats_verdict(1, 1.1, 1.2, 0.02, 1, 1.1, 1.2, 0.02, &r) == XTOOL_VERDICT_NOISE &&
               r == 1.0,
           "itself");
    EXPECT(xtool_stats_verdict(1, 1.1, 1.2, 0.02, 2, 2.2, 2.4, 0.02, &r) == XTOOL_VERDICT_SLOWER,
           "slower");
    EXPECT(xtool_stats_verdict(2, 2.2, 2.4, 0.02, 1, 1.1, 1.2, 0.02, &r) == XTOOL_VERDICT_FASTER,
           "faster");
    /* overlapping intervals: noise however far the medians */
    EXPECT(xtool_stats_verdict(1, 1.1, 3, 0.02, 1.5, 2.2, 4, 0.02, &r) == XTOOL_VERDICT_NOISE,
           "overlap");
    /* disjoint intervals but a change within the spreads: noise */
    EXPECT(xtool_stats_verdict(1, 1.0, 1.01, 0.2, 1.02, 1.05, 1.06, 0.2, &r) == XTOOL_VERDICT_NOISE,
           "within spread");

    /* The median's order-statistic interval (docs/measurement.md). n = 10: l = 2
     * (P(B <= 1) = 11/1024, coverage 1 - 22/1024; l = 3 would give 1 - 112/1024 < 0.95). */
    EXPECT(s.ci_low == 1 && s.ci_high == 5 && fabs(s.ci_level - (1 - 22.0 / 1024)) < 1e-12,
           "n 10: [%g, %g] level %.17g", s.ci_low, s.ci_high, s.ci_level);
    /* n = 5: too few for 95%: [min, max] at 1 - 2^-4 = 0.9375 */
    const double five[5] = {3, 1, 2, 5, 4};
    EXPECT(xtool_stats_compute(five, 5, &s) == 0 && s.ci_low == 1 && s.ci_high == 5 &&
               s.ci_level == 0.9375 && xtool_stats_ci_narrow(&s, 10) &&
               !xtool_stats_ci_narrow(&s, 0.5) && !xtool_stats_ci_narrow(&s, 0.0),
           "n 5: [%g, %g] level %g", s.ci_low, s.ci_high, s.ci_level);
    /* n = 6: [min, max] at 1 - 2/64 (l = 2 would be 1 - 14/64) */
    const double six[6] = {1, 2, 3, 4, 5, 6};
    EXPECT(xtool_stats_compute(six, 6, &s) == 0 && s.ci_low == 1 && s.ci_high == 6 &&
               s.ci_level == 1 - 2.0 / 64,
           "n 6: [%g, %g] level %g", s.ci_low, s.ci_high, s.ci_level);
    /* n = 1 and 2: [min, max], coverage 0 and 0.5 */
    EXPECT(xtool_stats_compute(six, 1, &s) == 0 && s.ci_low == 1 && s.ci_high == 1 &&
               s.ci_level == 0,
           "n 1: level %g", s.ci_level);
    /* n = 20: l = 6 (P(B <= 5) = 21700/2^20: coverage 0.9586; l = 7: 0.8847) */
    double twenty[20];
    for (int i = 0; i < 20; i++)
        twenty[i] = 100 + (double)((i * 7) % 20); /* 100..119, shuffled */
    EXPECT(xtool_stats_compute(twenty, 20, &s) == 0 && s.ci_low == 105 && s.ci_high == 114 &&
               fabs(s.ci_level - (1 - 2 * 21700.0 / 1048576)) < 1e-12,
           "n 20: [%g, %g] level %.17g", s.ci_low, s.ci_high, s.ci_level);
    /* converged: n >= 5 and width / median <= 2 * target: 9 / 109.5 = 0.082 */
    EXPECT(xtool_stats_ci_narrow(&s, 0.05) && !xtool_stats_ci_narrow(&s, 0.04) &&
               fabs(xtool_stats_ci_halfwidth(&s) - 4.5 / 109.5) < 1e-12,
           "narrow at 5%%, not at 4%%");
    /* The one verdict rule: only separated intervals make a verdict. */
    EXPECT(xtool_stats_verdict_ci(9.5, 10, 10.5, 6.8, 7, 7.3, &r) == XTOOL_VERDICT_FASTER &&
               fabs(r - 0.7) < 1e-12,
           "ci faster %g", r);
    EXPECT(xtool_stats_verdict_ci(6.8, 7, 7.3, 9.5, 10, 10.5, &r) == XTOOL_VERDICT_SLOWER,
           "ci slower");
    EXPECT(xtool_stats_verdict_ci(9.5, 10, 10.5, 10.5, 11, 12, &r) == XTOOL_VERDICT_NOISE,
           "ci touching: noise");
    EXPECT(xtool_stats_verdict_ci(9.5, 10, 10.5, NAN, 11, 12, &r) == XTOOL_VERDICT_NOISE,
           "ci unknown: noise");
    /* The load: busy above the CPUs - 0.5 at either end. */
    const double l1[3] = {1.4, 0, 0}, l2[3] = {1.6, 0, 0}, ln[3] = {NAN, NAN, NAN};
    EXPECT(!xtool_load_busy(2, l1, l1) && xtool_load_busy(2, l1, l2) &&
               xtool_load_busy(2, l2, ln) && !xtool_load_busy(0, l2, l2),
           "load busy rule");

    /* The paired ratios of bench --ab (fixed inputs, verdicts by hand). 5 pairs:
     * the interval is [min, max], coverage 1 - 2/32 = 0.9375. */
    xtool_paired pr;
    const double fast[5] = {0.5, 0.52, 0.49, 0.51, 0.5};
    EXPECT(xtool_stats_paired(fast, 5, 0.01, &pr) == 0 && pr.n == 5 && pr.median == 0.5 &&
               pr.lo == 0.49 && pr.hi == 0.52 && pr.confidence == 0.9375 &&
               pr.verdict == XTOOL_VERDICT_FASTER,
           "paired faster: median %g [%g, %g] conf %g verdict %d", pr.median, pr.lo, pr.hi,
           pr.confidence, pr.verdict);
    const double slow[5] = {1.1, 1.2, 1.15, 1.12, 1.3};
    EXPECT(xtool_stats_paired(slow, 5, 0.01, &pr) == 0 && pr.median == 1.15 &&
               pr.verdict == XTOOL_VERDICT_SLOWER,
           "paired slower: %d", pr.verdict);
    /* one pair on the other side of 1: the interval holds 1 */
    const double mixed[5] = {1.2, 0.8, 1.1, 1.15, 1.05};
    EXPECT(xtool_stats_paired(mixed, 5, 0.01, &pr) == 0 && pr.lo == 0.8 && pr.hi == 1.2 &&
               pr.verdict == XTOOL_VERDICT_NOISE,
           "paired mixed: %d", pr.verdict);
    /* the median well below 1, but one pair above: the interval holds 1 */
    const double most[5] = {0.8, 0.85, 0.9, 0.95, 1.1};
    EXPECT(xtool_stats_paired(most, 5, 0.01, &pr) == 0 && pr.median == 0.9 &&
               pr.verdict == XTOOL_VERDICT_NOISE,
           "paired most: %d", pr.verdict);
    /* every pair above 1, but by less than the 1% floor */
    const double tiny[5] = {1.005, 1.003, 1.004, 1.002, 1.006};
    EXPECT(xtool_stats_paired(tiny, 5, 0.01, &pr) == 0 && pr.lo > 1 &&
               pr.verdict == XTOOL_VERDICT_NOISE,
           "paired tiny: %d", pr.verdict);
    /* 4 pairs cannot reach 90% (1 - 2/16 = 0.875): no interval, no verdict */
    EXPECT(xtool_stats_paired(fast, 4, 0.01, &pr) == 0 && pr.confidence == 0 && isnan(pr.lo) &&
               pr.verdict == XTOOL_VERDICT_NOISE,
           "paired 4: conf %g", pr.confidence);
    /* 10 pairs: k = 2 (1 - 2 * 11/1024 = 0.978515625; k = 3 gives 0.89): [x(2), x(9)] */
    const double ten[10] = {0.9, 0.7, 0.8, 0.95, 0.85, 0.75, 1.02, 0.6, 0.88, 0.92};
    EXPECT(xtool_stats_paired(ten, 10, 0.01, &pr) == 0 && pr.lo == 0.7 && pr.hi == 0.95 &&
               fabs(pr.confidence - 0.978515625) < 1e-12 && pr.verdict == XTOOL_VERDICT_FASTER,
           "paired 10: [%g, %g] conf %.12g", pr.lo, pr.hi, pr.confidence);
    const double bad[2] = {1.0, -1.0};
    EXPECT(xtool_stats_paired(bad, 2, 0.01, &pr) != 0 && xtool_stats_paired(bad, 0, 0.01, &pr) != 0,
           "paired: bad input accepted");

    /* Padding waste by hand: lengths 4, 8, 2, 6 padded to 8 x 8:
     * pairs 16 + 64 + 4 + 36 = 120 of 4 * 64 = 256 -> waste 1 - 120/256 = 0.53125;
     * tokens 20 of 32 -> 0.375. */
    const int32_t l[4] = {4, 8, 2, 6};
    xtool_waste w;
    EXPECT(xtool_padding_waste(l, l, 4, 8, 8, &w) == 0 && w.pair_waste == 0.53125 &&
               w.token_waste == 0.375 && w.pairs_useful == 120 && w.pairs_padded == 256,
           "waste %g %g", w.pair_waste, w.token_waste);
    const int32_t q[2] = {1, 1}, k[2] = {100, 50};
    EXPECT(xtool_padding_waste(q, k, 2, 1, 100, &w) == 0 && w.pair_waste == 0.25 &&
               w.token_waste == 0,
           "decode waste %g", w.pair_waste);
    EXPECT(xtool_padding_waste(l, l, 0, 8, 8, &w) != 0, "empty batch");

    xtool_roofline rf;
    EXPECT(xtool_roofline_place(1000, 100, 100, 10, &rf) == 0 && rf.intensity == 10 &&
               rf.ridge == 10 && rf.compute_bound && rf.attainable_gflops == 100,
           "roofline at the ridge");
    EXPECT(xtool_roofline_place(100, 100, 100, 10, &rf) == 0 && !rf.compute_bound &&
               rf.attainable_gflops == 10,
           "memory-bound");
    EXPECT(xtool_roofline_place(100, 0, 100, 10, &rf) != 0, "no bytes");
}

/* advise's recommendation from figures made by hand (no timing). */
static void advice_for(xtool_advise_dev *d, const xtool_case *c, const double ms[3], int best)
{
    memset(d, 0, sizeof *d);
    static const xattn_algo al[3] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};
    for (int i = 0; i < 3; i++) {
        d->a[i].algo = al[i];
        d->a[i].ok = 1;
        d->a[i].cell.t.median = ms[i];
        d->a[i].cell.t.spread = 0.02;
        d->a[i].cell.pct_fma = -1;
    }
    d->best = best;
    xtool_waste w;
    memset(&w, 0, sizeof w);
    xtool_advise_text(c, &w, 0, d);
}

static void test_advice(void)
{
    xtool_case c;
    xtool_case_defaults(&c);
    xtool_advise_dev d;
    /* Sq = 505: split-KV ahead of flash by 1.08x is not the decode case, and small. */
    c.sq = c.sk = 505;
    const double near[3] = {2.0, 1.08, 1.0};
    advice_for(&d, &c, near, 2);
    EXPECT(strstr(d.advice, "Use split-KV: ") && !strstr(d.advice, "few query rows") &&
               strstr(d.advice, "not for the decode reason: at Sq = 505") &&
               strstr(d.advice, "treat the two as equal"),
           "Sq 505, 1.08x: %s", d.advice);
    const double far[3] = {2.0, 1.5, 1.0};
    advice_for(&d, &c, far, 2);
    EXPECT(strstr(d.advice, "by 1.50x, but not for the decode reason") &&
               !strstr(d.advice, "treat the two as equal"),
           "Sq 505, 1.5x: %s", d.advice);
    /* Decode: few query rows, many keys. */
    c.sq = 1;
    c.sk = 4096;
    advice_for(&d, &c, far, 2);
    EXPECT(strstr(d.advice, "few query rows (Sq = 1) for 4096 keys") &&
               !strstr(d.advice, "decode reason"),
           "decode: %s", d.advice);
    /* A share of the FMA ceiling above 100% is not quoted as a figure. */
    c.sq = c.sk = 256;
    const double fl[3] = {2.0, 1.0, 1.5};
    advice_for(&d, &c, fl, 1);
    d.a[1].cell.pct_fma = 125.3;
    d.roof_ok = 1;
    d.roof.compute_bound = 1;
    d.roof.intensity = 20;
    d.roof.ridge = 4;
    xtool_waste w;
    memset(&w, 0, sizeof w);
    xtool_advise_text(&c, &w, 0, &d);
    EXPECT(
        strstr(d.advice, "125% of the FMA ceiling: above 100%, an error of the accounting model") &&
            !strstr(d.advice, "runs at 125"),
        "model error in the advice: %s", d.advice);
    /* Above 100% with the shape's useful FLOPs alone faster than the ceiling
     * (a decode on a busy machine: 59.4 GFLOP/s useful against a ceiling
     * measured at 41.0): the ceiling was measured low, not the work
     * over-counted, and the advice says so and how to measure it again. */
    c.sq = 1;
    c.sk = 256;
    d.a[1].cell.pct_fma = 145.2;
    d.a[1].cell.fma_ceiling = 41.0;
    d.a[1].cell.gflops_useful = 59.4;
    d.a[1].cell.gflops_executed = 59.5;
    d.roof.compute_bound = 0;
    xtool_advise_text(&c, &w, 0, &d);
    EXPECT(xtool_advise_ceiling_low(&d.a[1].cell) &&
               strstr(d.advice, "It ran at 59.4 GFLOP/s of useful work alone") &&
               strstr(d.advice, "FMA ceiling of 41.0 GFLOP/s measured for this device: that "
                                "ceiling was measured low") &&
               strstr(d.advice, "devices --measure") && !strstr(d.advice, "accounting model") &&
               !strstr(d.advice, "runs at 145"),
           "a ceiling measured low in the advice: %s", d.advice);
    /* The same share with the useful work below the ceiling: only the
     * executed count can be wrong, and that stays a model error. */
    d.a[1].cell.gflops_useful = 40.0;
    xtool_advise_text(&c, &w, 0, &d);
    EXPECT(
        !xtool_advise_ceiling_low(&d.a[1].cell) &&
            strstr(d.advice, "145% of the FMA ceiling: above 100%, an error of the accounting") &&
            !strstr(d.advice, "measured low"),
        "executed work above the ceiling, useful below: %s", d.advice);
}

/* The check that bench/run/check rely on must fail on a wrong or unwritten output. */
static void test_case_check(void)
{
    xattn_ctx *ctx = NULL;
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx) != XATTN_STATUS_OK) {
        SKIP("no CPU context");
        return;
    }
    xtool_case c;
    xtool_case_defaults(&c);
    c.batch = 2;
    c.heads = 4;
    c.kv_heads = 2;
    c.sq = 20;
    c.sk = 33;
    c.causal = 1;
    c.lse = 1;
    c.algo = XATTN_ALGO_FLASH;
    xtool_case_run r;
    xtool_case_ref ref;
    xtool_case_error e;
    EXPECT(xtool_case_setup(ctx, &c, &r) == XATTN_STATUS_OK, "setup: %s", xattn_last_error());
    EXPECT(xattn_attention(ctx, &r.desc, NULL) == XATTN_STATUS_OK, "run: %s", xattn_last_error());
    EXPECT(xtool_case_ref_compute(&r, 1e18, &ref) == XATTN_STATUS_OK && ref.mode == XTOOL_REF_FULL,
           "reference");
    EXPECT(xtool_case_check(&r, &ref, &e) == XATTN_STATUS_OK && e.pass && e.checked &&
               e.rel_l2 < 1e-5,
           "correct output: rel %g", e.rel_l2);
    /* a wrong element */
    float x;
    xattn_buffer_read(r.o, 4 * 100, &x, 4);
    x += 0.5f;
    xattn_buffer_write(r.o, 4 * 100, &x, 4);
    EXPECT(xtool_case_check(&r, &ref, &e) == XATTN_STATUS_OK && !e.pass, "wrong element passed");
    /* an unwritten (NaN-poisoned) element */
    float nan = NAN;
    xattn_attention(ctx, &r.desc, NULL);
    xattn_buffer_write(r.o, 4 * 7, &nan, 4);
    EXPECT(xtool_case_check(&r, &ref, &e) == XATTN_STATUS_OK && !e.pass && e.nan_mismatch == 1,
           "NaN element passed");
    /* a wrong LSE */
    xattn_attention(ctx, &r.desc, NULL);
    xattn_buffer_read(r.lse, 4 * 3, &x, 4);
    x += 0.01f;
    xattn_buffer_write(r.lse, 4 * 3, &x, 4);
    EXPECT(xtool_case_check(&r, &ref, &e) == XATTN_STATUS_OK && !e.pass && e.lse_mismatch,
           "wrong LSE passed");
    xtool_case_ref_free(&ref);

    /* A sub-batch reference: sequence 0 and the 2 query heads of KV head 0. */
    xattn_attention(ctx, &r.desc, NULL);
    double full = 2.0 * 2 * 4 * 20 * 33 * 128, part = full / 4;
    EXPECT(xtool_case_ref_compute(&r, part, &ref) == XATTN_STATUS_OK && ref.mode == XTOOL_REF_SUB &&
               ref.cost_flops == part,
           "sub-batch: mode %d cost %g", ref.mode, ref.cost_flops);
    EXPECT(xtool_case_check(&r, &ref, &e) == XATTN_STATUS_OK && e.pass, "sub-batch check");
    /* an error outside the sub-batch is not seen; inside it is */
    xattn_buffer_read(r.o, 4 * 64, &x, 4); /* row 0, head 1: inside */
    x += 1.0f;
    xattn_buffer_write(r.o, 4 * 64, &x, 4);
    EXPECT(xtool_case_check(&r, &ref, &e) == XATTN_STATUS_OK && !e.pass, "sub-batch missed error");
    xtool_case_ref_free(&ref);
    EXPECT(xtool_case_ref_compute(&r, 10, &ref) == XATTN_STATUS_OK &&
               ref.mode == XTOOL_REF_SKIPPED && strstr(ref.note, "not checked"),
           "skip");
    EXPECT(xtool_case_check(&r, &ref, &e) == XATTN_STATUS_OK && e.pass && !e.checked,
           "skipped check");
    xtool_case_ref_free(&ref);
    xtool_case_teardown(&r);
    xattn_ctx_destroy(ctx);
}

/* A paged case with an append and sinks: the pool and block table the tool
 * builds hold every sequence's keys. The reference of the paged descriptor
 * must equal the reference of the same keys gathered into a contiguous cache,
 * and the sub-batch reference (sequence 0, KV head 0) must keep the pool. This
 * runs on the reference alone, so it holds before the backends read pages. */
static void test_case_paged(void)
{
    xattn_ctx *ctx = NULL;
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx) != XATTN_STATUS_OK) {
        SKIP("no CPU context");
        return;
    }
    static const int32_t lq[3] = {2, 2, 1}, lk[3] = {23, 9, 17};
    xtool_case c;
    xtool_case_defaults(&c);
    c.batch = 3;
    c.heads = 4;
    c.kv_heads = 2;
    c.head_dim = c.head_dim_v = 8;
    c.sq = 2;
    c.sk = 23;
    c.seqlens_q = lq;
    c.seqlens_k = lk;
    c.causal = 1;
    c.sinks = 1;
    c.page_size = 5;
    c.append = 1;
    xtool_case_run r;
    EXPECT(xtool_case_setup(ctx, &c, &r) == XATTN_STATUS_OK, "paged setup: %s", xattn_last_error());
    if (!r.block_table) {
        xattn_ctx_destroy(ctx);
        return;
    }
    /* 5 + 2 + 4 pages, each used once, max 5 a row; cache lengths before the append */
    const int64_t pages = r.desc.k.shape[0], mp = r.desc.max_pages_per_seq;
    EXPECT(pages == 11 && mp == 5 && r.desc.k.shape[1] == 5, "pool %lld pages, %lld a row",
           (long long)pages, (long long)mp);
    int seen[11] = {0}, in_order = 1;
    for (int b = 0; b < 3; b++) {
        EXPECT(r.desc.seqlens_k[b] == lk[b] - 1, "cache length %d of sequence %d",
               r.desc.seqlens_k[b], b);
        for (int g = 0; g < (lk[b] + 4) / 5; g++) {
            int32_t pg = r.block_table[b * mp + g];
            EXPECT(pg >= 0 && pg < 11 && !seen[pg], "page %d of sequence %d: %d", g, b, pg);
            if (pg >= 0 && pg < 11)
                seen[pg] = 1;
            in_order &= b > 0 || pg == g;
        }
    }
    EXPECT(!in_order, "the pages are not shuffled");
    EXPECT(r.desc.k_new.shape[0] == 3 && r.desc.k_new.shape[1] == 1 && r.sinks, "k_new, sinks");

    /* The same keys, contiguous: gather the pages through the table. */
    const int64_t D = 8, H = 2, row = H * D;
    float *pool_k = malloc((size_t)(pages * 5 * row) * 4),
          *pool_v = malloc((size_t)(pages * 5 * row) * 4);
    float *ck = calloc((size_t)(3 * 23 * row), 4), *cv = calloc((size_t)(3 * 23 * row), 4);
    xattn_buffer *bk = NULL, *bv = NULL;
    xtool_case_ref paged, flat, sub;
    memset(&paged, 0, sizeof paged);
    memset(&flat, 0, sizeof flat);
    memset(&sub, 0, sizeof sub);
    if (pool_k && pool_v && ck && cv &&
        xattn_buffer_read(r.k, 0, pool_k, (size_t)(pages * 5 * row) * 4) == XATTN_STATUS_OK &&
        xattn_buffer_read(r.v, 0, pool_v, (size_t)(pages * 5 * row) * 4) == XATTN_STATUS_OK) {
        for (int b = 0; b < 3; b++)
            for (int j = 0; j < lk[b] - 1; j++) {
                int64_t src = ((int64_t)r.block_table[b * mp + j / 5] * 5 + j % 5) * row;
                memcpy(ck + (b * 23 + j) * row, pool_k + src, (size_t)row * 4);
                memcpy(cv + (b * 23 + j) * row, pool_v + src, (size_t)row * 4);
            }
        xattn_buffer_alloc(ctx, (size_t)(3 * 23 * row) * 4, &bk);
        xattn_buffer_alloc(ctx, (size_t)(3 * 23 * row) * 4, &bv);
        xattn_buffer_write(bk, 0, ck, (size_t)(3 * 23 * row) * 4);
        xattn_buffer_write(bv, 0, cv, (size_t)(3 * 23 * row) * 4);
        xattn_attn_desc paged_desc = r.desc;
        xattn_status st = xtool_case_ref_compute(&r, 1e18, &paged);
        EXPECT(st == XATTN_STATUS_OK && paged.mode == XTOOL_REF_FULL, "paged reference: %s",
               xattn_last_error());
        r.desc.block_table = NULL;
        r.desc.max_pages_per_seq = 0;
        r.desc.k = xattn_tensor_bshd(bk, 0, XATTN_DTYPE_F32, 3, 23, H, D);
        r.desc.v = xattn_tensor_bshd(bv, 0, XATTN_DTYPE_F32, 3, 23, H, D);
        EXPECT(xtool_case_ref_compute(&r, 1e18, &flat) == XATTN_STATUS_OK,
               "contiguous reference: %s", xattn_last_error());
        r.desc = paged_desc;
        double part = 2.0 * 2 * 23 * 2 * 16; /* sequence 0, 2 query heads, D + Dv = 16 */
        EXPECT(xtool_case_ref_compute(&r, part, &sub) == XATTN_STATUS_OK &&
                   sub.mode == XTOOL_REF_SUB,
               "paged sub-batch reference: mode %d: %s", sub.mode, xattn_last_error());
        if (paged.o && flat.o) {
            double worst = 0;
            for (size_t i = 0; i < (size_t)(3 * 2 * 4 * D); i++)
                worst = fmax(worst, fabs(paged.o[i] - flat.o[i]));
            EXPECT(worst == 0, "paged and contiguous references differ by %g", worst);
        }
        if (paged.o && sub.o) { /* sub: [1, 2, 2, D]; full: [3, 2, 4, D] */
            double worst = 0;
            for (int i = 0; i < 2; i++)
                for (int h = 0; h < 2; h++)
                    for (int d = 0; d < D; d++)
                        worst = fmax(
                            worst, fabs(sub.o[(i * 2 + h) * D + d] - paged.o[(i * 4 + h) * D + d]));
            EXPECT(worst == 0, "paged sub-batch reference differs by %g", worst);
        }
    } else {
        EXPECT(0, "paged: host copies");
    }

    /* A packed batch with a page size is refused (the library takes paged
     * caches with padded batches only), freeing what setup had allocated. */
    xtool_case_run rv;
    xtool_case cv2 = c;
    cv2.varlen = 1;
    EXPECT(xtool_case_setup(ctx, &cv2, &rv) == XATTN_STATUS_UNSUPPORTED && !rv.cu_q && !rv.cu_k,
           "paged varlen setup");
    xtool_case_ref_free(&paged);
    xtool_case_ref_free(&flat);
    xtool_case_ref_free(&sub);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    free(pool_k);
    free(pool_v);
    free(ck);
    free(cv);
    xtool_case_teardown(&r);
    xattn_ctx_destroy(ctx);
}

/* ---- serving: --sinks, --append, --page-size through run, its record and exports - */

/* tool_serving: runs that every backend supports now. */
static void test_serving(void)
{
    char json[4096], csv[4096];
    snprintf(json, sizeof json, "%s/serving.json", g_dir);
    snprintf(csv, sizeof csv, "%s/serving.csv", g_dir);
    int rc = run_tool("run", "--backend", "cpu", "--sq", "1", "--sk", "90", "--heads", "4",
                      "--kv-heads", "2", "--sinks", "--window", "16,0", "--lse", "--reps", "2",
                      "--json", json, "--csv", csv, NULL);
    EXPECT(rc == 0 && strstr(g_out, "case     B1 H4/2 Sq1 Sk90 D64 f32 win16,0 lse sinks\n") &&
               strstr(g_out, "  cache      sinks 1, page size 0") && strstr(g_out, "PASS"),
           "run --sinks: exit %d\n%s%s", rc, g_out, g_err);
    char *j = read_all(json), *cs = read_all(csv);
    EXPECT(j && strstr(j, "\"has_sinks\": true") && strstr(j, "\"page_size\": 0") &&
               strstr(j, "\"append_tokens\": 0"),
           "run --sinks --json: %s", j ? j : "(none)");
    EXPECT(cs && strstr(cs, ",has_sinks,page_size,append_tokens,append_ms,append_bytes\n"),
           "run --csv header");
    free(j);
    free(cs);

    /* An append of 2 tokens: 2 x B2 x Hkv 2 x (D + Dv) 128 x 4 bytes written */
    rc = run_tool("run", "--backend", "cpu", "--batch", "2", "--sq", "2", "--sk", "50", "--heads",
                  "4", "--kv-heads", "2", "--causal", "--append", "2", "--sinks", "--reps", "2",
                  "--json", json, "--csv", csv, NULL);
    EXPECT(rc == 0 && strstr(g_out, " causal-br sinks append2\n") &&
               strstr(g_out, "append 2 tokens (4.0 KiB written") && strstr(g_out, "PASS"),
           "run --append 2: exit %d\n%s%s", rc, g_out, g_err);
    j = read_all(json);
    cs = read_all(csv);
    EXPECT(j && strstr(j, "\"append_tokens\": 2") && strstr(j, "\"append_bytes\": 4096"),
           "run --append --json: %s", j ? j : "(none)");
    EXPECT(cs && strstr(cs, ",1,0,2,"), "run --append --csv: sinks 1, page 0, append 2:\n%s",
           cs ? cs : "(none)");
    free(j);
    free(cs);

    /* A q8_0 cache, paged, with an append: checked against the reference, and the append's
     * bytes are 34 per 32 values (2 tokens x B2 x Hkv 2 x 4 blocks of 34 bytes x K and V). */
    rc = run_tool("run", "--backend", "cpu", "--batch", "2", "--sq", "1", "--sk", "90", "--heads",
                  "4", "--kv-heads", "2", "--kv-dtype", "q8_0", "--page-size", "16", "--append",
                  "2", "--reps", "2", "--json", json, NULL);
    EXPECT(rc == 0 && strstr(g_out, "PASS") && strstr(g_out, "q8_0"),
           "run --kv-dtype q8_0: exit %d\n%s%s", rc, g_out, g_err);
    j = read_all(json);
    EXPECT(j && strstr(j, "\"kv_dtype\": \"q8_0\"") && strstr(j, "\"append_bytes\": 1088"),
           "run --kv-dtype q8_0 --json: %s", j ? j : "(none)");
    free(j);

    /* bench says them in the case key (results.csv) */
    char out[2048], path[4096];
    snprintf(out, sizeof out, "%s/serving-bench", g_dir);
    rc = run_tool("bench", "--backend", "cpu", "--sq", "2", "--sk", "40", "--heads", "2",
                  "--append", "1", "--sinks", "--algo", "flash", "--cell-budget", "0.02",
                  "--max-reps", "5", "--no-progress", "--out", out, NULL);
    snprintf(path, sizeof path, "%s/results.csv", out);
    cs = read_all(path);
    EXPECT(rc == 0 && cs && strstr(cs, " sinks append1") && strstr(cs, ",pass,"),
           "bench --append 1 --sinks: exit %d\n%s%s", rc, g_out, cs ? cs : "");
    free(cs);

    /* usage errors: an append longer than the keys, or with a packed batch */
    rc = run_tool("run", "--backend", "cpu", "--sk", "8", "--append", "9", NULL);
    EXPECT(rc == 2 && strstr(g_err, "--append 9"), "--append 9 > --sk 8: exit %d %s", rc, g_err);
    snprintf(path, sizeof path, "%s/serving-lengths.txt", g_dir);
    write_text(path, "30\n12\n");
    rc = run_tool("run", "--backend", "cpu", "--lengths", path, "--varlen", "--page-size", "16",
                  NULL);
    EXPECT(rc == 2 && strstr(g_err, "--varlen"), "--page-size --varlen: exit %d %s", rc, g_err);
}

/* tool_paged: a paged KV cache through run (--page-size 16, ragged lengths,
 * with an append): a successful run, checked against the reference. */
static void test_paged(void)
{
    char json[4096], path[4096];
    snprintf(json, sizeof json, "%s/paged.json", g_dir);
    snprintf(path, sizeof path, "%s/paged-lengths.txt", g_dir);
    write_text(path, "1 70\n1 16\n1 33\n");
    int rc = run_tool("run", "--backend", "cpu", "--lengths", path, "--heads", "4", "--kv-heads",
                      "2", "--page-size", "16", "--reps", "2", "--json", json, NULL);
    EXPECT(rc == 0 && strstr(g_out, " page16 padded3/119#") && strstr(g_out, "page size 16") &&
               strstr(g_out, "PASS"),
           "run --page-size 16: exit %d\n%s%s", rc, g_out, g_err);
    char *j = read_all(json);
    EXPECT(j && strstr(j, "\"page_size\": 16"), "run --page-size --json: %s", j ? j : "(none)");
    free(j);
    rc = run_tool("run", "--backend", "cpu", "--lengths", path, "--heads", "4", "--kv-heads", "2",
                  "--page-size", "16", "--append", "1", "--sinks", "--causal", "--algo", "splitkv",
                  "--reps", "2", NULL);
    EXPECT(rc == 0 && strstr(g_out, " sinks page16 append1 ") && strstr(g_out, "PASS"),
           "run --page-size 16 --append 1: exit %d\n%s%s", rc, g_out, g_err);
}

/* ---- outputs: the subcommands on small CPU shapes ------------------------------- */

#ifdef XATTN_TEST_HAVE_JANSSON
static const char *jstr(json_t *v)
{
    const char *s = json_string_value(v);
    return s ? s : "";
}

/* Checks that obj has key of the given jansson type ('s' string, 'n' number,
 * 'i' integer, 'b' boolean, 'o' object, 'a' array; upper case: or null). */
static int has_key(json_t *obj, const char *key, char type)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (type >= 'A' && type <= 'Z') {
        if (json_is_null(v))
            return 1;
        type = (char)(type - 'A' + 'a');
    }
    switch (type) {
    case 's': return json_is_string(v);
    case 'n': return json_is_number(v);
    case 'i': return json_is_integer(v);
    case 'b': return json_is_boolean(v);
    case 'o': return json_is_object(v);
    case 'a': return json_is_array(v);
    }
    return 0;
}

/* results.json against the schema of docs/tool.md (required keys and types). */
static int check_bench_schema(json_t *doc, int expect_results)
{
    int ok = 1;
    static const struct {
        const char *k;
        char t;
    } top[] = {{"schema", 's'},       {"xattn_version", 's'}, {"created_utc", 's'},
               {"command_line", 's'}, {"host", 'o'},          {"preset", 'S'},
               {"length_scale", 'n'}, {"settings", 'o'},      {"devices", 'a'},
               {"results", 'a'},      {"summary", 'o'},       {"load", 'O'}};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) {
        int h = has_key(doc, top[i].k, top[i].t);
        EXPECT(h, "results.json: top-level key %s (%c)", top[i].k, top[i].t);
        ok &= h;
    }
    EXPECT(!strcmp(jstr(json_object_get(doc, "schema")), "xattn.bench/1"), "schema name");
    json_t *load = json_object_get(doc, "load");
    if (json_is_object(load)) /* /proc/loadavg at the start and the end */
        EXPECT(has_key(load, "cpus", 'i') && json_array_size(json_object_get(load, "start")) == 3 &&
                   json_array_size(json_object_get(load, "end")) == 3 &&
                   json_number_value(json_array_get(json_object_get(load, "start"), 0)) >= 0,
               "results.json: load");
    static const struct {
        const char *k;
        char t;
    } set[] = {
        {"warmup", 'i'},        {"min_reps", 'i'}, {"max_reps", 'i'},          {"max_spread", 'n'},
        {"cell_budget_s", 'n'}, {"check", 'b'},    {"check_limit_flops", 'n'}, {"threads", 'i'},
        {"seed", 'i'}};
    json_t *s = json_object_get(doc, "settings");
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        EXPECT(has_key(s, set[i].k, set[i].t), "settings.%s", set[i].k);
    EXPECT(has_key(json_object_get(doc, "host"), "hostname", 's') &&
               has_key(json_object_get(doc, "host"), "os", 's'),
           "host");
    static const struct {
        const char *k;
        char t;
    } dev[] = {{"backend", 's'},          {"device", 'i'},         {"name", 's'},
               {"vendor", 's'},           {"driver_version", 's'}, {"platform", 's'},
               {"description", 's'},      {"device_type", 's'},    {"compute_units", 'i'},
               {"global_mem_bytes", 'i'}, {"cpu_features", 's'},   {"compute_capability", 'i'},
               {"opened", 'b'},           {"error", 'S'},          {"ceilings", 'O'}};
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(doc, "devices"), i, d)
    {
        for (size_t j = 0; j < sizeof dev / sizeof dev[0]; j++)
            EXPECT(has_key(d, dev[j].k, dev[j].t), "devices[%zu].%s", i, dev[j].k);
    }
    static const struct {
        const char *k;
        char t;
    } res[] = {{"backend", 's'},
               {"device", 'i'},
               {"device_name", 's'},
               {"algo", 's'},
               {"algo_chosen", 'S'},
               {"case", 's'},
               {"family", 's'},
               {"batch", 'i'},
               {"heads", 'i'},
               {"kv_heads", 'i'},
               {"sq", 'i'},
               {"sk", 'i'},
               {"head_dim", 'i'},
               {"head_dim_v", 'i'},
               {"dtype", 's'},
               {"kv_dtype", 's'},
               {"layout", 's'},
               {"causal", 'b'},
               {"align", 's'},
               {"window_left", 'i'},
               {"window_right", 'i'},
               {"softcap", 'n'},
               {"alibi", 'b'},
               {"bias", 'b'},
               {"lse", 'b'},
               {"padded", 'b'},
               {"varlen", 'b'},
               {"num_splits", 'i'},
               {"status", 's'},
               {"error", 'S'},
               {"reps", 'i'},
               {"converged", 'b'},
               {"median_ms", 'N'},
               {"min_ms", 'N'},
               {"p90_ms", 'N'},
               {"max_ms", 'N'},
               {"mean_ms", 'N'},
               {"mad_ms", 'N'},
               {"spread", 'N'},
               {"elapsed_s", 'N'},
               {"build_ms", 'N'},
               {"flops_dense", 'N'},
               {"flops_useful", 'N'},
               {"flops_executed", 'N'},
               {"bytes_min", 'N'},
               {"bytes_actual", 'N'},
               {"padding_waste", 'N'},
               {"gflops_useful", 'N'},
               {"gflops_executed", 'N'},
               {"gbytes_per_s", 'N'},
               {"pct_fma_ceiling", 'N'},
               {"pct_bw_ceiling", 'N'},
               {"intensity", 'N'},
               {"workspace_bytes", 'I'},
               {"peak_bytes", 'I'},
               {"check", 's'},
               {"check_scope", 's'},
               {"check_note", 'S'},
               {"rel_l2", 'N'},
               {"max_abs", 'N'},
               {"rel_l2_bound", 'N'}};
    json_t *results = json_object_get(doc, "results");
    EXPECT((int)json_array_size(results) == expect_results, "results: %zu, expected %d",
           json_array_size(results), expect_results);
    json_t *r;
    json_array_foreach(results, i, r)
    {
        for (size_t j = 0; j < sizeof res / sizeof res[0]; j++) {
            int h = has_key(r, res[j].k, res[j].t);
            EXPECT(h, "results[%zu].%s (%c)", i, res[j].k, res[j].t);
            ok &= h;
        }
        EXPECT(!strcmp(jstr(json_object_get(r, "status")), "ok"), "results[%zu] status %s: %s", i,
               jstr(json_object_get(r, "status")), json_string_value(json_object_get(r, "error")));
        EXPECT(!strcmp(jstr(json_object_get(r, "check")), "pass"), "results[%zu] check", i);
        double med = json_number_value(json_object_get(r, "median_ms"));
        double mn = json_number_value(json_object_get(r, "min_ms"));
        double p90 = json_number_value(json_object_get(r, "p90_ms"));
        EXPECT(mn > 0 && mn <= med && med <= p90, "results[%zu] min %g median %g p90 %g", i, mn,
               med, p90);
        EXPECT(json_integer_value(json_object_get(r, "reps")) >= 2, "results[%zu] reps", i);
    }
    json_t *sum = json_object_get(doc, "summary");
    EXPECT(has_key(sum, "cells", 'i') && has_key(sum, "failed", 'i') && has_key(sum, "wall_s", 'n'),
           "summary");
    return ok;
}
#endif

/* Shares of a ceiling above 100% are flagged wherever bench writes them: the
 * table, results.json and results.csv, on a report made by hand (a real run's
 * shares depend on the ceilings measured on the machine). */
static void test_model_errors(const char *dir)
{
    char a[16], b[16], c[16], d[16];
    EXPECT(!strcmp(xtool_fmt_pct(-1, a, sizeof a), "-") &&
               !strcmp(xtool_fmt_pct(41.25, b, sizeof b), "41.2") &&
               !strcmp(xtool_fmt_pct(100.0, c, sizeof c), "100.0") &&
               !strcmp(xtool_fmt_pct(125.3, d, sizeof d), "125.3!"),
           "xtool_fmt_pct: '%s' '%s' '%s' '%s'", a, b, c, d);
    char *argv[] = {"bench", NULL};
    xtool_cli_opts o;
    char err[256];
    xtool_cli_parse(1, argv, &o, err, sizeof err);
    xtool_bench_device dev;
    memset(&dev, 0, sizeof dev);
    dev.t.backend = XATTN_BACKEND_CPU;
    snprintf(dev.t.info.name, sizeof dev.t.info.name, "made by hand");
    dev.t.info.compute_units = 2;
    dev.opened = 1;
    xtool_bench_case bc;
    memset(&bc, 0, sizeof bc);
    xtool_case_defaults(&bc.c);
    xtool_case_describe(&bc.c, bc.key, sizeof bc.key);
    xtool_case_family(&bc.c, bc.family, sizeof bc.family);
    xtool_bench_result res[2];
    memset(res, 0, sizeof res);
    for (int i = 0; i < 2; i++) {
        xtool_bench_result *r = &res[i];
        r->algo = XATTN_ALGO_FLASH;
        r->threads = 2;
        r->compute_units = 2;
        r->pct_fma_per_thread = -1;
        xtool_cell *cl = &r->cell;
        static double t[5] = {1.0, 1.1, 1.2, 1.0, 1.05};
        static double cpu[5] = {2.0, 2.2, 2.4, 2.0, 2.1};
        xtool_stats_compute(t, 5, &cl->t);
        cl->converged = i == 0; /* the second cell: not converged */
        if (i == 0) {           /* the samples kept, in their order; CPU time beside */
            r->samples = t;
            r->cpu_samples = cpu;
            r->passes = 1;
            xtool_stats_compute(cpu, 5, &cl->cpu);
        }
        cl->has_rec = 1;
        cl->rec.flops_executed = cl->rec.flops_useful = 1e9;
        cl->rec.bytes_actual = cl->rec.bytes_min = 1e8;
        cl->gflops_useful = cl->gflops_executed = 950;
        cl->pct_fma = i ? 125.3 : 40;
        cl->pct_bw = 20;
        cl->fma_ceiling = i ? 758.2 : 2375;
        snprintf(cl->rec.kernel, sizeof cl->rec.kernel, "%s", i ? "avx2" : "avx512");
        cl->rec.work_counted = i;
    }
    xtool_bench_report rep;
    memset(&rep, 0, sizeof rep);
    rep.o = &o;
    rep.devices = &dev;
    rep.n_devices = 1;
    rep.cases = &bc;
    rep.n_cases = 1;
    rep.results = res;
    rep.n_results = 2;
    for (int i = 0; i < 3; i++)
        rep.load_start[i] = rep.load_end[i] = NAN;

    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    xtool_bench_table_row(m, &rep, &res[0], 40);
    xtool_bench_table_row(m, &rep, &res[1], 40);
    xtool_bench_table_notes(m, &rep);
    fclose(m);
    const char *row1 = text ? strchr(text, '\n') : NULL;
    EXPECT(text && strstr(text, " 40.0 ") && !strstr(text, "40.0!") && row1 &&
               strstr(row1, "125.3!") && !strstr(text, "125.3 ") && strstr(text, " avx512 ") &&
               strstr(row1, " avx2 "),
           "table rows:\n%s", text ? text : "");
    EXPECT(text &&
               strstr(text, "!        1 figure marked '!': a share of a ceiling above 100% is "
                            "not a real figure") &&
               strstr(text, "work     1 of 2 cells: executed work") &&
               strstr(text, "+-CI     half the width of the median's confidence interval") &&
               strstr(text, "CPU ms: the process's CPU time per call") &&
               strstr(text, "~        1 cell not converged"),
           "table notes:\n%s", text ? text : "");
    /* +-CI: [1.0, 1.2] around 1.05 -> 9.5%; the second row marked ~; CPU ms 2.1 */
    EXPECT(text && strstr(text, "   9.5%  ") && row1 && strstr(row1, "   9.5%~") &&
               strstr(text, "     2.1000 ") && strstr(row1, "          - "),
           "table +-CI and CPU ms:\n%s", text ? text : "");
    free(text);

    char path[4096];
    snprintf(path, sizeof path, "%s/model-errors.csv", dir);
    EXPECT(xtool_bench_write_csv(&rep, path, err, sizeof err) == 0, "csv: %s", err);
    char *csv = read_all(path);
    EXPECT(csv &&
               strstr(csv, ",pct_fma_ceiling,pct_bw_ceiling,model_errors,kernel,matrix_units,"
                           "work_counted,intensity,") &&
               strstr(csv, ",125.3,20,pct_fma_ceiling,avx2,0,1,") &&
               strstr(csv, ",40,20,,avx512,0,0,"),
           "csv:\n%s", csv ? csv : "");
    free(csv);
#ifdef XATTN_TEST_HAVE_JANSSON
    snprintf(path, sizeof path, "%s/model-errors.json", dir);
    EXPECT(xtool_bench_write_json(&rep, path, err, sizeof err) == 0, "json: %s", err);
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    json_t *r0 = json_array_get(json_object_get(doc, "results"), 0);
    json_t *r1 = json_array_get(json_object_get(doc, "results"), 1);
    json_t *e0 = json_object_get(r0, "model_errors"), *e1 = json_object_get(r1, "model_errors");
    EXPECT(doc && json_is_array(e0) && json_array_size(e0) == 0 && json_array_size(e1) == 1 &&
               !strcmp(jstr(json_array_get(e1, 0)), "pct_fma_ceiling") &&
               json_number_value(json_object_get(r1, "pct_fma_ceiling")) == 125.3 &&
               json_integer_value(
                   json_object_get(json_object_get(doc, "summary"), "model_errors")) == 1,
           "results.json model_errors: %s", doc ? "" : je.text);
    EXPECT(!strcmp(jstr(json_object_get(r1, "kernel")), "avx2") &&
               json_is_true(json_object_get(r1, "work_counted")) &&
               json_is_false(json_object_get(r0, "work_counted")) &&
               json_is_false(json_object_get(r0, "matrix_units")),
           "results.json kernel, work_counted, matrix_units");
    json_t *smp = json_object_get(r0, "samples"), *cpu0 = json_object_get(r0, "cpu_time");
    EXPECT(json_array_size(smp) == 5 && json_number_value(json_array_get(smp, 1)) == 1.1 &&
               json_number_value(json_array_get(smp, 4)) == 1.05 &&
               json_number_value(json_object_get(r0, "ci_low")) == 1.0 &&
               json_number_value(json_object_get(r0, "ci_high")) == 1.2 &&
               json_number_value(json_object_get(r0, "ci_level")) == 0.9375 &&
               !strcmp(jstr(json_object_get(r0, "clock")), "device") &&
               json_is_true(json_object_get(r0, "converged")) &&
               json_is_false(json_object_get(r1, "converged")) &&
               json_array_size(json_object_get(r1, "samples")) == 0,
           "results.json samples and interval");
    EXPECT(json_is_object(cpu0) && json_integer_value(json_object_get(cpu0, "n")) == 5 &&
               json_number_value(json_object_get(cpu0, "median")) == 2.1 &&
               json_number_value(json_object_get(cpu0, "ci_high")) == 2.4 &&
               json_array_size(json_object_get(cpu0, "samples")) == 5 &&
               json_is_null(json_object_get(r1, "cpu_time")),
           "results.json cpu_time");
    json_decref(doc);
#endif
}

static int count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; p && *p; p++)
        n += *p == '\n';
    return n;
}

static void test_outputs(void)
{
    char out[2048], path[4096], path2[4096];
    snprintf(out, sizeof out, "%s/bench", g_dir);
    /* 2 lengths x 2 algorithms on the CPU: 4 cells, 2 series. */
    int rc = run_tool("bench", "--backend", "cpu", "--sq", "32,64", "--heads", "2", "--head-dim",
                      "32", "--algo", "naive,flash", "--cell-budget", "0.05", "--max-reps", "20",
                      "--no-progress", "--out", out, NULL);
    EXPECT(rc == 0, "bench: exit %d\n%s\n%s", rc, g_out, g_err);
    EXPECT(strstr(g_out, "4 cells: 4 ok") != NULL, "bench summary line:\n%s", g_out);
    EXPECT(strstr(g_out, "median ms") && strstr(g_out, "cpu:0     naive"), "bench table:\n%s",
           g_out);

    snprintf(path, sizeof path, "%s/results.csv", out);
    char *csv = read_all(path);
    EXPECT(csv && !strncmp(csv, "backend,device,device_name,algo,algo_chosen,case,", 49),
           "csv header");
    EXPECT(csv && count_lines(csv) == 5, "csv: %d lines, expected a header and 4 rows",
           count_lines(csv));
    EXPECT(csv && strstr(csv, "\ncpu,0,") && strstr(csv, ",pass,full,"), "csv rows");
    free(csv);

    snprintf(path, sizeof path, "%s/chart.svg", out);
    char *svg = read_all(path);
    xml_stats xs;
    EXPECT(svg && xml_check(svg, &xs) == 0, "chart.svg not well-formed: %s", svg ? xs.error : "");
    EXPECT(svg && xs.n_series == 2 && xs.polylines == 2 && xs.legend_items == 2,
           "chart.svg: %d series, %d polylines, %d legend items (expected 2 each)", xs.n_series,
           xs.polylines, xs.legend_items);
    int s_naive = 0, s_flash = 0;
    for (int i = 0; i < xs.n_series; i++) {
        s_naive |= !strcmp(xs.series[i], "cpu:0 naive");
        s_flash |= !strcmp(xs.series[i], "cpu:0 flash");
    }
    EXPECT(s_naive && s_flash, "chart.svg series names");
    free(svg);

    snprintf(path, sizeof path, "%s/results.json", out);
#ifdef XATTN_TEST_HAVE_JANSSON
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    EXPECT(doc != NULL, "results.json: %s", je.text);
    if (doc)
        check_bench_schema(doc, 4);
    snprintf(path2, sizeof path2, "%s/trace.json", out);
    json_t *trace = json_load_file(path2, 0, &je);
    EXPECT(trace && json_array_size(json_object_get(trace, "traceEvents")) > 10, "trace.json: %s",
           trace ? "few events" : je.text);
    json_decref(trace);
#else
    SKIP("results.json and trace.json schema: no jansson in this build");
#endif

    /* compare: a file with itself shows no real difference. */
    snprintf(path2, sizeof path2, "%s/self.svg", g_dir);
    rc = run_tool("compare", path, path, "--svg", path2, "--fail-on-slower", NULL);
    EXPECT(rc == 0, "compare itself: exit %d\n%s%s", rc, g_out, g_err);
    EXPECT(strstr(g_out, "4 matched: 0 faster, 0 slower, 4 within noise") != NULL,
           "compare itself:\n%s", g_out);
    svg = read_all(path2);
    EXPECT(svg && xml_check(svg, &xs) == 0 && xs.bars_noise == 4 && xs.bars_faster == 0 &&
               xs.bars_slower == 0,
           "compare svg: %s, %d noise bars", svg ? xs.error : "missing", xs.bars_noise);
    free(svg);

    /* Real slowdowns and speed-ups are checked on fixed files (test_compare):
     * a verdict between two real runs depends on the machine's load. */
#ifdef XATTN_TEST_HAVE_JANSSON
    json_decref(doc);
#endif

    /* advise on a padded lengths file: the waste computed by hand (test_stats):
     * lengths 4, 8, 2, 6 -> 53.125% of the pairs, 37.5% of the tokens. */
    snprintf(path, sizeof path, "%s/lengths.txt", g_dir);
    write_text(path, "# four sequences\n4\n8\n2\n6\n");
    snprintf(path2, sizeof path2, "%s/advise.json", g_dir);
    rc = run_tool("advise", "--backend", "cpu", "--lengths", path, "--heads", "4", "--kv-heads",
                  "2", "--head-dim", "32", "--cell-budget", "0.02", "--json", path2, NULL);
    EXPECT(rc == 0, "advise: exit %d\n%s%s", rc, g_out, g_err);
    EXPECT(strstr(g_out, "53.1% of the attention pairs") && strstr(g_out, "37.5% of the query"),
           "advise waste:\n%s", g_out);
    EXPECT(strstr(g_out, "advice   Use ") != NULL, "advise recommendation:\n%s", g_out);
    EXPECT(strstr(g_out, "packed ") != NULL, "advise packed run:\n%s", g_out);
    /* A memory-bound call (where ceilings are known) is told what an fp8 or q8_0 cache saves:
     * f32 K/V, of which fp8 keeps a quarter and q8_0 34/128. */
    if (strstr(g_out, "memory-bound"))
        EXPECT(strstr(g_out, "an fp8 cache") && strstr(g_out, "75% fewer bytes") &&
                   strstr(g_out, "a q8_0 cache") && strstr(g_out, "73% fewer"),
               "advise on fp8 and q8_0 caches (q8_0: 34 of 128 bytes):\n%s", g_out);
#ifdef XATTN_TEST_HAVE_JANSSON
    json_t *adv = json_load_file(path2, 0, &je);
    json_t *pad = adv ? json_object_get(adv, "padding") : NULL;
    EXPECT(pad && json_number_value(json_object_get(pad, "pair_waste")) == 0.53125 &&
               json_number_value(json_object_get(pad, "token_waste")) == 0.375 &&
               json_integer_value(json_object_get(pad, "tokens_q")) == 20,
           "advise.json padding");
    json_t *devs = adv ? json_object_get(adv, "devices") : NULL;
    EXPECT(json_array_size(devs) == 1 &&
               json_array_size(json_object_get(json_array_get(devs, 0), "algos")) == 3,
           "advise.json devices");
    json_decref(adv);
#endif

    /* run: the full record, the reference check, the exports. */
    snprintf(path, sizeof path, "%s/run.json", g_dir);
    snprintf(path2, sizeof path2, "%s/run.trace.json", g_dir);
    rc = run_tool("run", "--backend", "cpu", "--sq", "40", "--sk", "70", "--heads", "4",
                  "--kv-heads", "1", "--causal", "--lse", "--json", path, "--trace", path2, NULL);
    EXPECT(rc == 0, "run: exit %d\n%s%s", rc, g_out, g_err);
    /* which figures are the median's and which the last call's */
    EXPECT(strstr(g_out, "GFLOP/s useful at the median\n") &&
               strstr(g_out, " ms (the last call)\n") &&
               strstr(g_out, "(the last call: its own time and figures, not the median's)"),
           "run says which figures are the median's:\n%s", g_out);
    EXPECT(strstr(g_out, "\ntime     median ") && strstr(g_out, "GFLOP/s useful") &&
               strstr(g_out, "\nrecord   #") && strstr(g_out, "  work       FLOPs dense") &&
               strstr(g_out, "\nerror    rel L2") && strstr(g_out, "PASS"),
           "run output:\n%s", g_out);
#ifdef XATTN_TEST_HAVE_JANSSON
    json_t *rj = json_load_file(path, 0, &je);
    EXPECT(rj && !strcmp(jstr(json_object_get(rj, "schema")), "xattn.records/1") &&
               json_array_size(json_object_get(rj, "records")) == 6,
           "run --json: %s", rj ? "records" : je.text);
    json_decref(rj);
    json_t *rt = json_load_file(path2, 0, &je);
    EXPECT(rt && json_is_array(json_object_get(rt, "traceEvents")), "run --trace");
    json_decref(rt);
#endif

    /* run with a padded batch from a lengths file, then the same batch packed */
    snprintf(path, sizeof path, "%s/lengths2.txt", g_dir);
    write_text(path, "30\n12 40\n1\n");
    rc = run_tool("run", "--backend", "cpu", "--lengths", path, "--causal", "--reps", "2", NULL);
    EXPECT(rc == 0 && strstr(g_out, "B3 ") && strstr(g_out, "padded") && strstr(g_out, "PASS"),
           "run --lengths: exit %d\n%s%s", rc, g_out, g_err);
    /* lengths 30, 12/40 and 1: 43 query and 71 key tokens; the key's label explained */
    EXPECT(strstr(g_out, " padded43/71#") &&
               strstr(g_out, ": 3 sequences padded to the longest, 43 query and 71 key tokens in "
                             "all (the sums of their lengths); #"),
           "run --lengths: the label explained:\n%s", g_out);
    snprintf(out, sizeof out, "%s/bench-lengths", g_dir);
    rc = run_tool("bench", "--backend", "cpu", "--lengths", path, "--algo", "flash",
                  "--cell-budget", "0.02", "--no-progress", "--out", out, NULL);
    EXPECT(rc == 0 && strstr(g_out, "\nlengths  padded43/71#") && strstr(g_out, "tokens in all"),
           "bench --lengths: the label explained: exit %d\n%s", rc, g_out);
    rc = run_tool("run", "--backend", "cpu", "--lengths", path, "--varlen", "--reps", "2", NULL);
    EXPECT(rc == 0 && strstr(g_out, "varlen") && strstr(g_out, "PASS"),
           "run --varlen: exit %d\n%s%s", rc, g_out, g_err);

    /* check: the quick matrix on the CPU */
    snprintf(path, sizeof path, "%s/check.json", g_dir);
    rc = run_tool("check", "--backend", "cpu", "--quick", "--json", path, NULL);
    EXPECT(rc == 0 && strstr(g_out, "0 failed, 0 errors"), "check: exit %d\n%s%s", rc, g_out,
           g_err);
#ifdef XATTN_TEST_HAVE_JANSSON
    json_t *cj = json_load_file(path, 0, &je);
    json_t *cs = cj ? json_object_get(cj, "summary") : NULL;
    EXPECT(cs && json_integer_value(json_object_get(cs, "passed")) > 20 &&
               json_integer_value(json_object_get(cs, "failed")) == 0,
           "check.json summary");
    json_decref(cj);
#endif

    rc = run_tool("run", "--backend", "cpu", "--sq", "16", "--cpu-simd", "portable", NULL);
    EXPECT(rc == 0 && strstr(g_out, "(portable kernels)"), "run --cpu-simd portable: exit %d\n%s",
           rc, g_out);
    rc = run_tool("devices", NULL);
    EXPECT(rc == 0 && strstr(g_out, "cpu     1 device"), "devices: exit %d\n%s", rc, g_out);
    rc = run_tool("bench", "--list-presets", NULL);
    static const char *const presets[] = {"default",
                                          "llama3-8b-prefill",
                                          "llama3-8b-decode",
                                          "mistral-7b-swa",
                                          "gemma2-softcap",
                                          "bert-base-padded",
                                          "vit-b16",
                                          "cpu-targets",
                                          "gpt-oss-20b-decode",
                                          "llama3-8b-paged-decode"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        EXPECT(rc == 0 && strstr(g_out, presets[i]), "preset %s listed", presets[i]);
    for (int c = XTOOL_CLI_DEVICES; c < XTOOL_CLI_CMD_COUNT; c++) {
        rc = run_tool(xtool_cli_cmd_name((xtool_cli_cmd)c), "--help", NULL);
        EXPECT(rc == 0 && strstr(g_out, "usage: xattn"), "%s --help: exit %d",
               xtool_cli_cmd_name((xtool_cli_cmd)c), rc);
    }
}

/* ---- compare: generated large files ------------------------------------------------ */

/* A bench result file of n cells (the keys compare reads), file 'a' or 'b' of
 * a pair whose verdicts are known: cell i of b is twice as slow as a's for
 * i % 4 == 0 (slower), half as slow for 1 (faster), the same for 2 (within
 * noise), and another case for 3 (one cell only in a, one only in b). */
static void gen_results(FILE *f, int n, char which)
{
    fprintf(f, "{\"schema\": \"xattn.bench/1\", \"created_utc\": \"generated\", "
               "\"host\": {\"hostname\": \"gen\"}, \"devices\": [], \"results\": [");
    for (int i = 0; i < n; i++) {
        double t = 1.0;
        if (which == 'b')
            t = i % 4 == 0 ? 2.0 : i % 4 == 1 ? 0.5 : 1.0;
        fprintf(f,
                "%s\n{\"backend\": \"cpu\", \"device\": 0, \"algo\": \"flash\", "
                "\"case\": \"B1 H8/8 Sq%d Sk%d D64 f32%s\", \"threads\": 2, \"status\": "
                "\"ok\", \"median_ms\": %g, \"min_ms\": %g, \"p90_ms\": %g, \"spread\": 0}",
                i ? "," : "", i, i, which == 'b' && i % 4 == 3 ? " b" : "", t, t, t);
    }
    fprintf(f, "\n]}\n");
}

/* Matching two files of n cells looks at O(n) cells (a hash table), not
 * O(n^2): counted, not timed. */
static void test_cmp_index(void)
{
    const int n = 40000;
    xtool_cmp_file f[2];
    for (int k = 0; k < 2; k++) {
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        gen_results(m, n, k ? 'b' : 'a');
        fclose(m);
        char err[256] = "";
        int rc = xtool_cmp_parse(text, len, k ? "b" : "a", &f[k], err, sizeof err);
        EXPECT(rc == 0 && f[k].n == n, "parse of %d generated cells: rc %d, %d cells, %s", n, rc,
               f[k].n, err);
        free(text);
    }
    long long probes = 0;
    int found = 0, right = 0;
    for (int i = 0; i < f[0].n; i++) {
        const xtool_cmp_cell *c = xtool_cmp_find(&f[1], &f[0].cells[i], &probes);
        found += c != NULL;
        right += c && !strcmp(c->label, f[0].cells[i].label) && c->threads == 2;
    }
    for (int i = 0; i < f[1].n; i++)
        found += xtool_cmp_find(&f[0], &f[1].cells[i], &probes) != NULL;
    EXPECT(found == 2 * (3 * n / 4) && right == 3 * n / 4, "matches: %d found, %d right", found,
           right);
    EXPECT(probes <= 3LL * 2 * n,
           "matching 2 x %d cells looked at %lld cells (at most %d expected)", n, probes, 6 * n);
    xtool_cmp_free(&f[0]);
    xtool_cmp_free(&f[1]);
}

/* ---- compare: fixed files with known verdicts ----------------------------------------- */

/* The table line that starts with the device ("cpu:0 t2"), then the algorithm,
 * and holds the case label; copied into line. NULL when there is none. */
static const char *cmp_line(const char *out, const char *device, const char *algo,
                            const char *label, char *line, size_t n)
{
    for (const char *p = out; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        size_t dl = strlen(device), al = strlen(algo);
        if (len < n && !strncmp(p, device, dl) && p[dl] == ' ') {
            const char *r = p + dl;
            while (*r == ' ')
                r++;
            memcpy(line, p, len);
            line[len] = '\0';
            if (!strncmp(r, algo, al) && r[al] == ' ' && strstr(line, label))
                return line;
        }
        p = e ? e + 1 : NULL;
    }
    return NULL;
}

static void test_compare(const char *data)
{
    char a[4096], b[4096], csvp[4096], svgp[4096];
    snprintf(a, sizeof a, "%s/compare-a.json", data);
    snprintf(b, sizeof b, "%s/compare-b.json", data);
    snprintf(csvp, sizeof csvp, "%s/fixed.csv", g_dir);
    snprintf(svgp, sizeof svgp, "%s/fixed.svg", g_dir);
    int rc = run_tool("compare", a, b, "--csv", csvp, "--svg", svgp, NULL);
    const char *out = g_out_all ? g_out_all : "";
    EXPECT(rc == 0, "compare fixed: exit %d\n%s%s", rc, out, g_err);
    /* tests/tool/data/README.md lists the cells and why each gets its verdict. */
    /* Each file's load, and that the drift between separate runs is not measured. */
    EXPECT(strstr(out, "load 0.52 at the start, 0.61 at the end (1-minute average, 2 CPUs)") &&
               strstr(out, "load 6.10 at the start, 7.40 at the end") &&
               strstr(out, "not the machine's drift between them (and the loads above differ)") &&
               strstr(out, "xattn bench --ab OLD_XATTN"),
           "compare: loads and the drift note:\n%s", out);
    EXPECT(strstr(out, "B vs A: 8 matched: 2 faster, 1 slower, 5 within noise;") &&
               strstr(out, "1 only in A, 1 only in B, 1 without a result in one of them"),
           "summary of the fixed files:\n%s", out);
    static const struct {
        const char *device, *algo, *label, *ratio, *verdict;
    } want[] = {
        {"cpu:0 t2", "flash", "Sq256 Sk256 D64 f32 causal-br", "0.500x", "faster"},
        {"cpu:0 t2", "naive", "Sq256 Sk256 D64 f32 causal-br", "2.000x", "slower"},
        {"cpu:0 t2", "splitkv", "Sq256 Sk256 D64 f32 causal-br", "1.136x", "within noise"},
        {"cpu:0 t2", "splitkv", "Sq1 Sk4096", "1.050x", "within noise"},
        {"opencl:0", "flash", "Sq256 Sk256 D64 f32 causal-br", "0.294x", "faster"},
        {"cpu:0 t1", "flash", "Sq64 Sk64 D32", "1.000x", "within noise"},
        {"cpu:0 t2", "flash", "Sq64 Sk64 D32", "1.000x", "within noise"},
        {"cpu:0 t2", "naive", "Sq64 Sk64 D32", "1.000x", "within noise"},
    };
    char line[1024];
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *l =
            cmp_line(out, want[i].device, want[i].algo, want[i].label, line, sizeof line);
        EXPECT(l && strstr(l, want[i].ratio) && strstr(l, want[i].verdict),
               "cell %zu (%s %s %s): '%s', expected %s %s", i, want[i].device, want[i].algo,
               want[i].label, l ? l : "(no line)", want[i].ratio, want[i].verdict);
    }
    /* B's naive Sq64 cell reports 125.3% of the FMA ceiling: flagged, never shown as a
     * figure, with the note; its kernel changed from avx2 to avx512. */
    const char *l = cmp_line(out, "cpu:0 t2", "naive", "Sq64 Sk64 D32", line, sizeof line);
    EXPECT(l && strstr(l, "within noise)  !  (kernel avx2 -> avx512)"), "flagged cell: '%s'",
           l ? l : "(no line)");
    l = cmp_line(out, "cpu:0 t2", "flash", "Sq256 Sk256 D64 f32 causal-br", line, sizeof line);
    EXPECT(l && !strchr(l, '!') && !strstr(l, "kernel"), "unflagged cell: '%s'", l ? l : "");
    EXPECT(strstr(out, "!        1 matched cell marked '!' reports a share of a ceiling above "
                       "100% in one of the files: ") &&
               !strstr(out, "125.3"),
           "compare's model-error note:\n%s", out);
    char *csv = read_all(csvp);
    EXPECT(csv && count_lines(csv) == 9 && strstr(csv, ",0.5,") && strstr(csv, ",faster,0,") &&
               strstr(csv, ",slower,0,") && strstr(csv, ",noise,1,avx2,avx512,,,,,min-p90\n") &&
               strstr(csv, ",verdict,model_error,a_kernel,b_kernel,a_ci_low,a_ci_high,b_ci_low,"
                           "b_ci_high,rule\n"),
           "compare --csv: %d lines\n%s", csv ? count_lines(csv) : -1, csv ? csv : "");
    free(csv);
    char *svg = read_all(svgp);
    xml_stats xs;
    EXPECT(svg && xml_check(svg, &xs) == 0 && xs.bars_faster == 2 && xs.bars_slower == 1 &&
               xs.bars_noise == 5,
           "compare --svg: %s, bars %d faster %d slower %d noise", svg ? xs.error : "missing",
           xs.bars_faster, xs.bars_slower, xs.bars_noise);
    /* The 0.294x bar stays on the axis: it reaches 0.25x, and every bar lies within it. */
    double ax0 = -1, ax1 = -1;
    const char *axl = svg ? strstr(svg, "<line class=\"axis\" x1=\"") : NULL;
    if (axl)
        sscanf(axl, "<line class=\"axis\" x1=\"%lf\" y1=\"%*[^\"]\" x2=\"%lf\"", &ax0, &ax1);
    int bars = 0, inside = 0;
    for (const char *p = svg; p && (p = strstr(p, "<rect class=\"ratio\" x=\"")); p++) {
        double x = 0, w = 0;
        if (sscanf(p, "<rect class=\"ratio\" x=\"%lf\" y=\"%*[^\"]\" width=\"%lf\"", &x, &w) == 2) {
            bars++;
            inside += x >= ax0 - 0.05 && x + w <= ax1 + 0.05;
        }
    }
    EXPECT(svg && strstr(svg, ">0.25x</text>") && ax1 > ax0 && ax0 > 0 && bars == 8 && inside == 8,
           "compare --svg axis %g..%g: %d of %d bars inside, tick 0.25x %s", ax0, ax1, inside, bars,
           svg && strstr(svg, ">0.25x</text>") ? "present" : "missing");
    free(svg);

    rc = run_tool("compare", a, b, "--fail-on-slower", NULL);
    EXPECT(rc == 1, "compare --fail-on-slower with a real slowdown: exit %d", rc);
    rc = run_tool("compare", b, a, NULL);
    out = g_out_all ? g_out_all : "";
    EXPECT(rc == 0 && strstr(out, "B vs A: 8 matched: 1 faster, 2 slower, 5 within noise;"),
           "compare reversed:\n%s", out);
    rc = run_tool("compare", a, a, "--fail-on-slower", NULL);
    out = g_out_all ? g_out_all : "";
    EXPECT(rc == 0 && strstr(out, "B vs A: 10 matched: 0 faster, 0 slower, 10 within noise;"),
           "compare a file with itself:\n%s", out);
    EXPECT(strstr(out, "drift between them, so") != NULL, "the same load: no remark:\n%s", out);

    /* Two generated files of 40000 cells: the verdicts are known (gen_results);
     * bench/dev/compare_scale.sh times the same comparison. */
    char ga[4096], gb[4096];
    snprintf(ga, sizeof ga, "%s/gen-a.json", g_dir);
    snprintf(gb, sizeof gb, "%s/gen-b.json", g_dir);
    FILE *fa = fopen(ga, "w"), *fb = fopen(gb, "w");
    if (fa && fb) {
        gen_results(fa, 40000, 'a');
        gen_results(fb, 40000, 'b');
    }
    EXPECT(fa && fb && fclose(fa) == 0 && fclose(fb) == 0, "writing the generated files");
    rc = run_tool("compare", ga, gb, NULL);
    out = g_out_all ? g_out_all : "";
    EXPECT(rc == 0 && strstr(out, "B vs A: 30000 matched: 10000 faster, 10000 slower, 10000 within "
                                  "noise; geometric mean ratio 1.000; 10000 only in A, 10000 "
                                  "only in B, 0 without"),
           "compare of 2 x 40000 generated cells: exit %d\n%.2000s", rc,
           strstr(out, "B vs A:") ? strstr(out, "B vs A:") : out);
}

/* ---- threads: the thread axis and the scaling block ------------------------------ */

/* ---- compare: profile.json (data/profile-*.json, verdicts known) -------------------- */

/* The line of out that starts with prefix, or NULL (a static copy). */
static const char *line_of(const char *out, const char *prefix)
{
    static char line[1024];
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, prefix, strlen(prefix))) {
            const char *e = strchr(p, '\n');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            snprintf(line, sizeof line, "%.*s", (int)n, p);
            return line;
        }
    return NULL;
}

static void test_compare_profiles(const char *data)
{
    char a[4096], b[4096], o[4096], m[4096], r[4096], bad[4096];
    snprintf(a, sizeof a, "%s/profile-a.json", data);
    snprintf(b, sizeof b, "%s/profile-b.json", data);
    snprintf(o, sizeof o, "%s/profile-old.json", data);
    snprintf(m, sizeof m, "%s/profile-other-model.json", data);
    snprintf(r, sizeof r, "%s/compare-a.json", data);
    int rc = run_tool("compare", a, b, NULL);
    EXPECT(rc == 0, "compare profiles: exit %d\n%s%s", rc, g_out, g_err);
    const struct {
        const char *row, *ratio, *verdict;
    } want[] = {
        {"attention ms per forward", "0.700x", "faster"},
        {"attention share of the forward", "0.975x", "~ (within noise)"},
        {"layer encoder.layer.0 ms", "0.700x", "faster"},
        {"layer encoder.layer.1 ms", "1.010x", "~ (within noise)"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *l = line_of(g_out, want[i].row);
        EXPECT(l && strstr(l, want[i].ratio) && strstr(l, want[i].verdict), "profile row %s: '%s'",
               want[i].row, l ? l : "(missing)");
    }
    EXPECT(strstr(g_out, "B vs A: 2 layers matched: 1 faster, 0 slower, 1 within noise, 0 not "
                         "compared; 1 only in A, 1 only in B"),
           "profile summary:\n%s", g_out);
    rc = run_tool("compare", b, a, "--fail-on-slower", NULL);
    EXPECT(rc == 1, "profiles reversed, --fail-on-slower: exit %d\n%s", rc, g_out);
    rc = run_tool("compare", a, a, "--fail-on-slower", NULL);
    EXPECT(rc == 0 && strstr(g_out, "0 faster, 0 slower, 3 within noise"),
           "a profile against itself: exit %d\n%s", rc, g_out);
    /* An older profile: intervals from its samples ('s'), else [min, p90] ('p'). */
    rc = run_tool("compare", a, o, NULL);
    const char *l0 = line_of(g_out, "attention ms per forward"), *l1;
    EXPECT(rc == 0 && l0 && strstr(l0, "[9.8, 10.3]s") && strstr(l0, "within noise"),
           "older profile, samples: '%s'\n%s", l0 ? l0 : "", g_out);
    l1 = line_of(g_out, "layer encoder.layer.0 ms");
    EXPECT(l1 && strstr(l1, "[5.5, 6.4]p") && strstr(l1, "1.200x  slower"),
           "older profile, [min, p90]: '%s'", l1 ? l1 : "");
    EXPECT(strstr(g_out, "computed here from the file's samples") &&
               strstr(g_out, "[min, p90] stands in for the interval"),
           "the fallbacks said:\n%s", g_out);
    /* Refusals: another model, a mix with a bench result file, a partial file. */
    rc = run_tool("compare", a, m, NULL);
    EXPECT(rc == 2 && strstr(g_err, "different models") && !strstr(g_out, "vs A"),
           "other model: exit %d: %s", rc, g_err);
    rc = run_tool("compare", a, r, NULL);
    EXPECT(rc == 2 && strstr(g_err, "give files of one kind"), "profile + results: exit %d: %s", rc,
           g_err);
    rc = run_tool("compare", r, a, NULL);
    EXPECT(rc == 2 && strstr(g_err, "give files of one kind"), "results + profile: exit %d: %s", rc,
           g_err);
    snprintf(bad, sizeof bad, "%s/partial-profile.json", g_dir);
    FILE *f = fopen(bad, "w");
    if (f) {
        fputs("{\"schema\": \"xattn.profile/1\", \"model\": \"fixture-model\", \"forward\": "
              "{\"attention_ms\": {\"median\": \"x\"}}, \"layers\": {\"rows\": [1, {}, "
              "{\"layer\": \"encoder.layer.0\", \"attention_ms\": {\"median\": 3, \"ci_low\": 4, "
              "\"ci_high\": 5}}]}}\n",
              f);
        fclose(f);
    }
    rc = run_tool("compare", a, bad, NULL);
    l0 = line_of(g_out, "attention ms per forward");
    EXPECT(rc == 0 && l0 && strstr(l0, "not compared: no median in B"),
           "partial profile: exit %d '%s'\n%s%s", rc, l0 ? l0 : "", g_out, g_err);
    l1 = line_of(g_out, "layer encoder.layer.0 ms");
    EXPECT(l1 && strstr(l1, "not compared: an interval that does not hold its median"),
           "interval without its median: '%s'", l1 ? l1 : "");
    f = fopen(bad, "w");
    if (f) {
        fputs("{\"schema\": \"xattn.profile/1\", \"forward\": []}", f);
        fclose(f);
    }
    rc = run_tool("compare", a, bad, NULL);
    EXPECT(rc == 2 && strstr(g_err, "no \"forward\" object"), "no forward: exit %d: %s", rc, g_err);
    rc = run_tool("compare", a, b, "--csv", bad, NULL);
    EXPECT(rc == 2 && strstr(g_err, "not for profile.json"), "--csv with profiles: exit %d: %s", rc,
           g_err);
}

/* Hostile files: a median of 0 or below is said, never a ratio such as
 * "-5.000x faster"; control characters in names (ESC, DEL, C1 CSI, a byte that
 * is not UTF-8) are printed escaped and never reach the terminal. */
static void test_compare_hostile(void)
{
    char a[4096], b[4096], pa[4096], pb[4096];
    snprintf(a, sizeof a, "%s/hostile-a.json", g_dir);
    snprintf(b, sizeof b, "%s/hostile-b.json", g_dir);
    static const char head[] =
        "{\"schema\": \"xattn.bench/1\", \"created_utc\": "
        "\"t\\u001b]0;owned\\u0007\", \"host\": {\"hostname\": "
        "\"h\\u009b2J\"}, \"devices\": [{\"backend\": \"cpu\", \"device\": 0, "
        "\"name\": \"c\\u007fpu\"}], \"results\": [";
    static const char cell[] = "{\"backend\": \"cpu\", \"device\": 0, \"algo\": \"flash\", "
                               "\"case\": \"%s\", \"status\": \"ok\", \"median_ms\": %g, "
                               "\"min_ms\": %g, \"p90_ms\": %g, \"spread\": 0}";
    char text[4096];
    for (int k = 0; k < 2; k++) {
        int n = snprintf(text, sizeof text, "%s", head);
        double t = k ? -5 : 1, z = k ? 0 : 2;
        n += snprintf(text + n, sizeof text - (size_t)n, cell, "neg case", t, t, t);
        text[n++] = ',';
        n += snprintf(text + n, sizeof text - (size_t)n, cell, "zero case", z, z, z);
        text[n++] = ',';
        n += snprintf(text + n, sizeof text - (size_t)n, cell,
                      "esc\\u001b[31mred\\u001b[0m \xff\xc3\xa9", 1.0, 1.0, 1.0);
        snprintf(text + n, sizeof text - (size_t)n, "]}\n");
        write_text(k ? b : a, text);
    }
    int rc = run_tool("compare", a, b, NULL);
    char line[1024];
    const char *l = cmp_line(g_out, "cpu:0", "flash", "neg case", line, sizeof line);
    EXPECT(rc == 0 && l && strstr(l, "not compared: the B median is -5 ms, not > 0") &&
               !strstr(g_out, "-5.000x"),
           "a negative median: exit %d, '%s'\n%s%s", rc, l ? l : "", g_out, g_err);
    l = cmp_line(g_out, "cpu:0", "flash", "zero case", line, sizeof line);
    EXPECT(l && strstr(l, "not compared: the B median is 0 ms, not > 0"), "a zero median: '%s'",
           l ? l : "");
    EXPECT(strstr(g_out, "esc\\x1b[31mred\\x1b[0m \\xff\xc3\xa9") &&
               strstr(g_out, "t\\x1b]0;owned\\x07") && strstr(g_out, "h\\u009b2J") &&
               strstr(g_out, "c\\x7fpu"),
           "names escaped:\n%s", g_out);
    int raw = 0;
    for (const unsigned char *p = (const unsigned char *)g_out; *p; p++)
        raw += *p == 0x1b || *p == 0x07 || *p == 0x7f || *p == 0xff ||
               (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f);
    EXPECT(raw == 0, "%d control bytes reached the output", raw);
    /* profiles: a median of 0 or below in a stats dict is not compared */
    snprintf(pa, sizeof pa, "%s/hostile-pa.json", g_dir);
    snprintf(pb, sizeof pb, "%s/hostile-pb.json", g_dir);
    static const char prof[] =
        "{\"schema\": \"xattn.profile/1\", \"model\": \"m\\u001b[2J\", \"forward\": "
        "{\"attention_ms\": {\"median\": %g, \"ci_low\": %g, \"ci_high\": 11}}, \"layers\": "
        "{\"rows\": [{\"layer\": \"l\\u001b[1m0\", \"attention_ms\": {\"median\": 3, "
        "\"ci_low\": 2, \"ci_high\": 4}}]}}\n";
    snprintf(text, sizeof text, prof, 10.0, 9.0);
    write_text(pa, text);
    snprintf(text, sizeof text, prof, -5.0, -6.0);
    write_text(pb, text);
    rc = run_tool("compare", pa, pb, NULL);
    l = line_of(g_out, "attention ms per forward");
    EXPECT(rc == 0 && l && strstr(l, "not compared: a median of -5, not > 0 in B") &&
               !strstr(g_out, "-0.500x"),
           "a negative profile median: exit %d '%s'\n%s%s", rc, l ? l : "", g_out, g_err);
    EXPECT(line_of(g_out, "layer l\\x1b[1m0 ms") && !strchr(g_out, 0x1b) &&
               strstr(g_out, "m\\x1b[2J"),
           "profile names escaped:\n%s", g_out);
}

/* ---- docs: what FFI users and MPI users are told --------------------------------- */

/* docs/api.md's "Calling from other languages" names every `_sized` entry
 * point the header declares (an FFI gets the plain symbols, which pass the
 * 0.1 struct sizes), and docs/scale.md says that the MPI strategies refuse a
 * global Sk = 0 that one device accepts. */
static void test_docs(const char *header, const char *api, const char *scale)
{
    char *h = read_all(header), *a = read_all(api), *sc = read_all(scale);
    EXPECT(h && a && sc, "cannot read %s, %s or %s", header, api, scale);
    if (h && a && sc) {
        const char *sec = strstr(a, "\n## Calling from other languages\n");
        EXPECT(sec != NULL, "docs/api.md has no section \"Calling from other languages\"");
        const char *end = sec ? strstr(sec + 4, "\n## ") : NULL;
        size_t len = sec ? (end ? (size_t)(end - sec) : strlen(sec)) : 0;
        char *body = sec ? strndup(sec, len) : NULL;
        int n = 0;
        for (const char *p = h; body && (p = strstr(p, "XATTN_API ")) != NULL; p++) {
            const char *e = strstr(p, "_sized(");
            const char *nl = strchr(p, '(');
            if (!e || e > nl)
                continue;
            const char *b = e;
            while (b > p && (b[-1] == '_' || (b[-1] >= 'a' && b[-1] <= 'z')))
                b--;
            char name[80];
            snprintf(name, sizeof name, "`%.*s_sized`", (int)(e - b), b);
            char bare[80]; /* also accepted: the name followed by "(" inside code */
            snprintf(bare, sizeof bare, "`%.*s_sized(", (int)(e - b), b);
            n++;
            EXPECT(strstr(body, name) || strstr(body, bare),
                   "docs/api.md, \"Calling from other languages\": %s is not named", name);
        }
        EXPECT(n >= 7, "include/xattn.h: %d _sized entry points found", n);
        EXPECT(body && strstr(body, "silently") && strstr(body, "ctypes") && strstr(body, "cffi"),
               "the section says the fields are silently ignored, for ctypes and cffi");
        free(body);
        EXPECT(strstr(sc, "`sk_global = 0`") && strstr(sc, "accepts `Sk = 0`"),
               "docs/scale.md: the MPI strategies' refusal of a global Sk = 0 is not documented");
    }
    free(h);
    free(a);
    free(sc);
}

static void test_threads(void)
{
    char out[2048], path[4096];
    /* More threads than compute units: a warning, never silence (the child sees the
     * same affinity and OMP_NUM_THREADS as this process, hence the same count). */
    xattn_device_info info;
    memset(&info, 0, sizeof info);
    xattn_device_get_info(XATTN_BACKEND_CPU, 0, &info);
    char over[16], fits[16], want[128];
    snprintf(over, sizeof over, "%d", info.compute_units + 1);
    snprintf(fits, sizeof fits, "%d", info.compute_units);
    snprintf(want, sizeof want, "warning: --threads %d is more than the CPU's %d compute units",
             info.compute_units + 1, info.compute_units);
    int wrc = run_tool("run", "--backend", "cpu", "--sq", "16", "--heads", "2", "--reps", "1",
                       "--threads", over, NULL);
    EXPECT(info.compute_units > 0 && wrc == 0 && strstr(g_err, want),
           "run --threads %s: exit %d, '%s'", over, wrc, g_err);
    wrc = run_tool("run", "--backend", "cpu", "--sq", "16", "--heads", "2", "--reps", "1",
                   "--threads", fits, NULL);
    EXPECT(wrc == 0 && !strstr(g_err, "warning"), "run --threads %s: exit %d, '%s'", fits, wrc,
           g_err);

    /* A cell stopped by its budget after 2 calls is not 'converged', whatever its
     * spread (--max-spread 10 is met by any 2 calls), when --min-reps is 5. */
    snprintf(out, sizeof out, "%s/bench-budget", g_dir);
    wrc = run_tool("bench", "--backend", "cpu", "--sq", "16", "--heads", "2", "--head-dim", "32",
                   "--algo", "flash", "--cell-budget", "0", "--max-spread", "10", "--min-reps", "5",
                   "--no-check", "--no-progress", "--out", out, NULL);
    EXPECT(wrc == 0 && strstr(g_out, "     2 ") && strstr(g_out, "%~"),
           "bench --cell-budget 0: exit %d, a row with 2 reps marked ~:\n%s", wrc, g_out);
#ifdef XATTN_TEST_HAVE_JANSSON
    snprintf(path, sizeof path, "%s/results.json", out);
    json_error_t bje;
    json_t *bdoc = json_load_file(path, 0, &bje);
    json_t *br = json_array_get(json_object_get(bdoc, "results"), 0);
    EXPECT(br && json_integer_value(json_object_get(br, "reps")) == 2 &&
               json_is_false(json_object_get(br, "converged")),
           "2 calls of 5: reps %lld converged %s",
           (long long)json_integer_value(json_object_get(br, "reps")),
           json_is_true(json_object_get(br, "converged")) ? "true" : "false");
    json_decref(bdoc);
#endif
    /* --passes 3: every sample of every pass kept and pooled; the interval holds
     * the median; CPU time beside the device time on the CPU. Nothing timed is
     * asserted: only counts and orderings that hold whatever the machine does. */
    snprintf(out, sizeof out, "%s/bench-passes", g_dir);
    wrc = run_tool("bench", "--backend", "cpu", "--sq", "16", "--heads", "2", "--head-dim", "32",
                   "--algo", "flash,naive", "--passes", "3", "--max-reps", "6", "--no-check",
                   "--no-progress", "--out", out, NULL);
    EXPECT(wrc == 0 && strstr(g_out, "pass 3 of 3 done") && strstr(g_out, "passes   3 of 3") &&
               strstr(g_out, "+-CI") && strstr(g_out, "CPU ms") && strstr(g_out, "load     "),
           "bench --passes 3: exit %d\n%s%s", wrc, g_out, g_err);
#ifdef XATTN_TEST_HAVE_JANSSON
    snprintf(path, sizeof path, "%s/results.json", out);
    bdoc = json_load_file(path, 0, &bje);
    EXPECT(bdoc &&
               json_integer_value(json_object_get(json_object_get(bdoc, "settings"), "passes")) ==
                   3 &&
               json_is_boolean(json_object_get(json_object_get(bdoc, "load"), "busy")),
           "settings.passes, load.busy");
    size_t pi;
    json_t *pr;
    json_array_foreach(json_object_get(bdoc, "results"), pi, pr)
    {
        json_t *smp = json_object_get(pr, "samples"), *cpu = json_object_get(pr, "cpu_time");
        long long reps = json_integer_value(json_object_get(pr, "reps"));
        double med = json_number_value(json_object_get(pr, "median_ms"));
        double lo = json_number_value(json_object_get(pr, "ci_low"));
        double hi = json_number_value(json_object_get(pr, "ci_high"));
        double lvl = json_number_value(json_object_get(pr, "ci_level"));
        EXPECT(json_integer_value(json_object_get(pr, "passes")) == 3 && reps >= 6 && reps <= 18 &&
                   (long long)json_array_size(smp) == reps && lo <= med && med <= hi &&
                   lvl >= 0.95 && lvl < 1,
               "results[%zu]: passes %lld, reps %lld, %zu samples, [%g, %g] around %g at %g", pi,
               (long long)json_integer_value(json_object_get(pr, "passes")), reps,
               json_array_size(smp), lo, hi, med, lvl);
        EXPECT(json_is_object(cpu) && json_integer_value(json_object_get(cpu, "n")) == reps &&
                   (long long)json_array_size(json_object_get(cpu, "samples")) == reps &&
                   json_number_value(json_object_get(cpu, "ci_low")) <=
                       json_number_value(json_object_get(cpu, "median")),
               "results[%zu].cpu_time", pi);
        /* the median is the pooled samples' */
        double v[64];
        size_t nv = json_array_size(smp) < 64 ? json_array_size(smp) : 0;
        for (size_t k = 0; k < nv; k++)
            v[k] = json_number_value(json_array_get(smp, k));
        xtool_stats ps;
        EXPECT(nv > 0 && xtool_stats_compute(v, (int)nv, &ps) == 0 && ps.median == med &&
                   ps.ci_low == lo && ps.ci_high == hi,
               "results[%zu]: statistics of the pooled samples", pi);
    }
    json_decref(bdoc);
#endif
    /* --budget spent by the first pass: no later pass starts (the first always runs). */
    snprintf(out, sizeof out, "%s/bench-total-budget", g_dir);
    wrc = run_tool("bench", "--backend", "cpu", "--sq", "16", "--heads", "2", "--head-dim", "32",
                   "--algo", "flash", "--passes", "4", "--budget", "0.000001", "--max-reps", "6",
                   "--no-check", "--no-progress", "--out", out, NULL);
    EXPECT(wrc == 0 && strstr(g_out, "passes   1 of 4 (--budget spent"),
           "bench --budget: exit %d\n%s%s", wrc, g_out, g_err);

    snprintf(out, sizeof out, "%s/bench-threads", g_dir);
    /* 1 case x 2 algorithms x 2 thread counts: 4 cells, 2 scaling lines. */
    int rc =
        run_tool("bench", "--backend", "cpu", "--sq", "48", "--heads", "2", "--head-dim", "32",
                 "--algo", "naive,flash", "--threads", "1,2", "--cpu-simd", "portable",
                 "--cell-budget", "0.02", "--max-reps", "10", "--no-progress", "--out", out, NULL);
    EXPECT(rc == 0, "bench --threads 1,2: exit %d\n%s\n%s", rc, g_out, g_err);
    EXPECT(strstr(g_out, "4 cells: 4 ok") != NULL, "summary line:\n%s", g_out);
    EXPECT(strstr(g_out, " thr ") && strstr(g_out, "%BW"), "table columns thr and %%BW:\n%s",
           g_out);
    EXPECT(strstr(g_out, "\nthread scaling") && strstr(g_out, "1 -> 2"), "scaling block:\n%s",
           g_out);

    snprintf(path, sizeof path, "%s/results.csv", out);
    char *csv = read_all(path);
    EXPECT(csv && strstr(csv, ",rel_l2,max_abs,threads,pct_fma_per_thread,gbytes_min_per_s,"
                              "pct_bw_min_ceiling,ci_low_ms,ci_high_ms,ci_level,passes,"
                              "cpu_median_ms,cpu_ci_low_ms,cpu_ci_high_ms\n"),
           "csv header");
    EXPECT(csv && count_lines(csv) == 5, "csv: %d lines", csv ? count_lines(csv) : -1);
    free(csv);

    snprintf(path, sizeof path, "%s/chart.svg", out);
    char *svg = read_all(path);
    xml_stats xs;
    EXPECT(svg && xml_check(svg, &xs) == 0 && xs.n_series == 4,
           "chart.svg: one series per algorithm x thread count (%d)", svg ? xs.n_series : -1);
    free(svg);

#ifdef XATTN_TEST_HAVE_JANSSON
    snprintf(path, sizeof path, "%s/results.json", out);
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    EXPECT(doc != NULL, "results.json: %s", je.text);
    if (!doc)
        return;
    check_bench_schema(doc, 4);
    json_t *tl = json_object_get(json_object_get(doc, "settings"), "thread_list");
    EXPECT(json_array_size(tl) == 2 && json_integer_value(json_array_get(tl, 0)) == 1 &&
               json_integer_value(json_array_get(tl, 1)) == 2,
           "settings.thread_list");
    json_t *cs = json_object_get(json_object_get(doc, "settings"), "cpu_simd");
    EXPECT(json_is_string(cs) && !strcmp(json_string_value(cs), "portable"), "settings.cpu_simd");
    size_t i;
    json_t *r;
    int per[3] = {0};
    json_array_foreach(json_object_get(doc, "results"), i, r)
    {
        json_t *t = json_object_get(r, "threads");
        int th = json_is_integer(t) ? (int)json_integer_value(t) : -1;
        EXPECT(th == 1 || th == 2, "results[%zu].threads %d", i, th);
        if (th == 1 || th == 2)
            per[th]++;
        EXPECT(has_key(r, "pct_fma_per_thread", 'N') && has_key(r, "pct_bw_min_ceiling", 'N') &&
                   json_number_value(json_object_get(r, "gbytes_min_per_s")) > 0,
               "results[%zu].pct_fma_per_thread, gbytes_min_per_s, pct_bw_min_ceiling", i);
        json_t *ph = json_object_get(r, "phases");
        EXPECT(json_is_array(ph) && json_array_size(ph) >= 1, "results[%zu].phases", i);
        if (!strcmp(jstr(json_object_get(r, "algo")), "naive"))
            EXPECT(!strcmp(jstr(json_object_get(json_array_get(ph, 0), "name")), "qk") &&
                       json_number_value(json_object_get(json_array_get(ph, 0), "ms")) > 0,
                   "naive's first phase is qk");
    }
    EXPECT(per[1] == 2 && per[2] == 2, "cells per thread count: %d at 1, %d at 2", per[1], per[2]);
    json_t *sc = json_object_get(doc, "scaling");
    EXPECT(json_array_size(sc) == 2, "scaling: %zu entries, expected 2", json_array_size(sc));
    json_array_foreach(sc, i, r)
    {
        double b = json_number_value(json_object_get(r, "base_ms"));
        double m = json_number_value(json_object_get(r, "ms"));
        double sp = json_number_value(json_object_get(r, "speedup"));
        double ef = json_number_value(json_object_get(r, "efficiency"));
        EXPECT(json_integer_value(json_object_get(r, "threads_base")) == 1 &&
                   json_integer_value(json_object_get(r, "threads")) == 2,
               "scaling[%zu] threads", i);
        EXPECT(b > 0 && m > 0 && fabs(sp - b / m) <= 1e-9 * sp && fabs(ef - sp / 2) <= 1e-9 * sp,
               "scaling[%zu]: base %g ms %g speed-up %g efficiency %g", i, b, m, sp, ef);
        EXPECT(!strcmp(jstr(json_object_get(r, "backend")), "cpu") && has_key(r, "case", 's') &&
                   has_key(r, "algo", 's') && has_key(r, "pct_fma_per_thread_base", 'N') &&
                   has_key(r, "pct_fma_per_thread", 'N'),
               "scaling[%zu] keys", i);
    }
    json_decref(doc);
#else
    SKIP("results.json threads and scaling: no jansson in this build");
#endif
}

/* ---- bench --ab: the protocol and its arithmetic, not its verdicts ------------------ */

static void test_ab(void)
{
    char out[2048], path[4096];
    snprintf(out, sizeof out, "%s/ab", g_dir);
    /* The tool against itself: 2 cells x 5 rounds x 2 runs. */
    int rc = run_tool("bench", "--ab", g_bin, "--backend", "cpu", "--sq", "64", "--heads", "2",
                      "--head-dim", "32", "--algo", "flash,naive", "--threads", "1", "--min-reps",
                      "3", "--no-progress", "--out", out, NULL);
    const char *so = g_out_all ? g_out_all : "";
    EXPECT(rc == 0, "bench --ab: exit %d\n%s%s", rc, so, g_err);
    EXPECT(strstr(so, "old first in odd rounds and new first in even ones") &&
               strstr(so, "'xattn run --no-check --warmup 1 --reps 3'") &&
               strstr(so, "new vs old: 2 cells: ") && strstr(so, ", 0 failed;"),
           "bench --ab output:\n%s", so);
#ifdef XATTN_TEST_HAVE_JANSSON
    snprintf(path, sizeof path, "%s/ab.json", out);
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    EXPECT(doc && !strcmp(jstr(json_object_get(doc, "schema")), "xattn.ab/1") &&
               json_integer_value(json_object_get(doc, "rounds")) == 5 &&
               json_integer_value(json_object_get(doc, "reps")) == 3 &&
               json_is_object(json_object_get(doc, "load")),
           "ab.json: %s", doc ? "header" : je.text);
    json_t *cells = doc ? json_object_get(doc, "cells") : NULL;
    EXPECT(json_array_size(cells) == 2, "ab.json: %zu cells", json_array_size(cells));
    size_t i;
    json_t *c;
    json_array_foreach(cells, i, c)
    {
        json_t *runs = json_object_get(c, "runs"), *ratios = json_object_get(c, "ratios");
        EXPECT(!strcmp(jstr(json_object_get(c, "status")), "ok") && json_array_size(runs) == 10 &&
                   json_array_size(ratios) == 5,
               "cell %zu: status %s, %zu runs, %zu ratios", i, jstr(json_object_get(c, "status")),
               json_array_size(runs), json_array_size(ratios));
        if (json_array_size(runs) != 10 || json_array_size(ratios) != 5)
            continue;
        /* The order made: round r (1-based) old then new when r is odd, else new then old. */
        double r5[5];
        for (int r = 0; r < 5; r++) {
            json_t *x = json_array_get(runs, (size_t)(2 * r)),
                   *y = json_array_get(runs, (size_t)(2 * r + 1));
            const char *first = r % 2 == 0 ? "old" : "new", *second = r % 2 == 0 ? "new" : "old";
            EXPECT(json_integer_value(json_object_get(x, "round")) == r + 1 &&
                       json_integer_value(json_object_get(y, "round")) == r + 1 &&
                       !strcmp(jstr(json_object_get(x, "build")), first) &&
                       !strcmp(jstr(json_object_get(y, "build")), second),
                   "cell %zu round %d: %s then %s", i, r + 1, jstr(json_object_get(x, "build")),
                   jstr(json_object_get(y, "build")));
            double xo = json_number_value(json_object_get(x, "median_ms"));
            double yo = json_number_value(json_object_get(y, "median_ms"));
            double oldm = r % 2 == 0 ? xo : yo, newm = r % 2 == 0 ? yo : xo;
            double ratio = json_number_value(json_array_get(ratios, (size_t)r));
            EXPECT(oldm > 0 && newm > 0 && ratio == newm / oldm,
                   "cell %zu round %d: ratio %.17g is not new/old %g/%g", i, r + 1, ratio, newm,
                   oldm);
            r5[r] = newm / oldm;
        }
        /* The statistics from the recorded ratios, and the verdict by the rule. */
        xtool_paired want;
        EXPECT(xtool_stats_paired(r5, 5, 0.01, &want) == 0, "recomputing cell %zu", i);
        double med = json_number_value(json_object_get(c, "median_ratio"));
        double lo = json_number_value(json_object_get(c, "interval_lo"));
        double hi = json_number_value(json_object_get(c, "interval_hi"));
        double mn = r5[0], mx = r5[0];
        for (int r = 1; r < 5; r++) {
            mn = r5[r] < mn ? r5[r] : mn;
            mx = r5[r] > mx ? r5[r] : mx;
        }
        const char *v = hi < 1 && 1 - med > 0.01   ? "faster"
                        : lo > 1 && med - 1 > 0.01 ? "slower"
                                                   : "noise";
        EXPECT(med == want.median && lo == mn && hi == mx &&
                   json_number_value(json_object_get(c, "confidence")) == 0.9375 &&
                   !strcmp(jstr(json_object_get(c, "paired_verdict")), v),
               "cell %zu: median %g [%g, %g] paired verdict %s; expected %g [%g, %g] %s", i, med,
               lo, hi, jstr(json_object_get(c, "paired_verdict")), want.median, mn, mx, v);
        /* The verdict: the one rule on each build's 5 run medians ([min, max] at 93.75%). */
        double om[5], nm[5];
        for (int r = 0; r < 5; r++) {
            json_t *x = json_array_get(runs, (size_t)(2 * r)),
                   *y = json_array_get(runs, (size_t)(2 * r + 1));
            double xo = json_number_value(json_object_get(x, "median_ms"));
            double yo = json_number_value(json_object_get(y, "median_ms"));
            om[r] = r % 2 == 0 ? xo : yo;
            nm[r] = r % 2 == 0 ? yo : xo;
        }
        xtool_stats so_, sn_;
        xtool_stats_compute(om, 5, &so_);
        xtool_stats_compute(nm, 5, &sn_);
        xtool_verdict wv = xtool_stats_verdict_ci(so_.ci_low, so_.median, so_.ci_high, sn_.ci_low,
                                                  sn_.median, sn_.ci_high, NULL);
        EXPECT(!strcmp(jstr(json_object_get(c, "verdict")), xtool_verdict_name(wv)) &&
                   json_number_value(json_object_get(c, "old_ci_low")) == so_.min &&
                   json_number_value(json_object_get(c, "new_ci_high")) == sn_.max &&
                   json_number_value(json_object_get(c, "new_ci_level")) == 0.9375,
               "cell %zu: verdict %s, expected %s", i, jstr(json_object_get(c, "verdict")),
               xtool_verdict_name(wv));
    }
    json_decref(doc);
#else
    (void)path;
    SKIP("ab.json: no jansson in this build");
#endif
    /* A path that is not an xattn binary is a bad command line. */
    rc = run_tool("bench", "--ab", "/nonexistent/xattn", "--sq", "8", "--out", out, NULL);
    EXPECT(rc == 2 && strstr(g_err, "--ab"), "--ab /nonexistent: exit %d: %s", rc, g_err);
    rc = run_tool("bench", "--ab", "/bin/true", "--sq", "8", "--out", out, NULL);
    EXPECT(rc == 2 && strstr(g_err, "not an xattn binary"), "--ab /bin/true: exit %d: %s", rc,
           g_err);
}

/* ---- usage: bad command lines exit 2 with a message ---------------------------- */

static void test_usage(void)
{
    char notjson[4096], missing[4096], outdir[4096];
    snprintf(notjson, sizeof notjson, "%s/not.json", g_dir);
    write_text(notjson, "this is not json\n");
    snprintf(missing, sizeof missing, "%s/missing.json", g_dir);
    snprintf(outdir, sizeof outdir, "%s/not.json/sub", g_dir);
    struct {
        const char *args[8];
    } bad[] = {
        {{"run", "--foo"}},
        {{"run", "--sq", "abc"}},
        {{"run", "--heads", "6", "--kv-heads", "4"}},
        {{"run", "--head-dim", "0"}},
        {{"run", "--lengths", missing}},
        {{"run", "--lengths", notjson}},
        {{"bench", "--preset", "no-such-preset"}},
        {{"bench", "--sq", "64", "--scale", "0.5"}},
        {{"bench", "--backend", "cpu", "--out", outdir, "--sq", "8"}},
        {{"compare", notjson}},
        {{"compare", missing, missing}},
        {{"compare", notjson, notjson}},
        {{"advise", "--sq", "8,16"}},
        {{"check", "--filter", "no-such-feature"}},
        {{"frobnicate"}},
        {{0}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char **a = bad[i].args;
        int rc = run_tool(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], NULL);
        EXPECT(rc == 2 && strstr(g_err, "xattn") && strlen(g_err) > 20,
               "'%s %s %s': exit %d (expected 2), stderr '%s'", a[0] ? a[0] : "(none)",
               a[1] ? a[1] : "", a[2] ? a[2] : "", rc, g_err);
    }

    /* Refused before any work, with a message naming the flag or the cause:
     * output files that cannot be written, device indices that do not exist,
     * and cases that need more memory than any machine has (checked before
     * anything is allocated, so they are refused at once). */
    char nofile[4096], a_json[4096];
    snprintf(nofile, sizeof nofile, "%s/no-such-folder/out.json", g_dir);
    snprintf(a_json, sizeof a_json, "%s/a.json", g_dir);
    write_text(a_json, "{\"schema\": \"xattn.bench/1\", \"results\": []}\n");
    struct {
        const char *args[10];
        const char *expect;
    } early[] = {
        {{"run", "--backend", "cpu", "--sq", "16", "--json", nofile}, "--json"},
        {{"run", "--backend", "cpu", "--sq", "16", "--csv", nofile}, "--csv"},
        {{"run", "--backend", "cpu", "--sq", "16", "--trace", nofile}, "--trace"},
        {{"run", "--backend", "cpu", "--sq", "16", "--json", g_dir}, "is a folder"},
        {{"advise", "--backend", "cpu", "--sq", "16", "--json", nofile}, "--json"},
        {{"check", "--backend", "cpu", "--quick", "--json", nofile}, "--json"},
        {{"bench", "--backend", "cpu", "--sq", "16", "--out", "/proc"}, "--out"},
        {{"compare", a_json, a_json, "--svg", nofile}, "--svg"},
        {{"compare", a_json, a_json, "--csv", nofile}, "--csv"},
        {{"run", "--backend", "cpu", "--device", "3", "--sq", "16"}, "--device 3"},
        {{"bench", "--backend", "cpu", "--device", "3", "--sq", "16"}, "--device 3"},
        {{"advise", "--backend", "cpu", "--device", "3", "--sq", "16"}, "--device 3"},
        {{"check", "--backend", "cpu", "--device", "3"}, "--device 3"},
        /* 8 heads x 2^40 scores x 4 bytes = 32 TiB for naive's score matrix */
        {{"run", "--backend", "cpu", "--sq", "1048576", "--algo", "naive", "--no-check"},
         "naive's B*Hq*Sq*Sk*4-byte score matrix 32 TiB"},
    };
    for (size_t i = 0; i < sizeof early / sizeof early[0]; i++) {
        const char **a = early[i].args;
        int rc = run_tool(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], NULL);
        EXPECT(rc == 2 && strstr(g_err, early[i].expect) && !strstr(g_out, "\ntime ") &&
                   !strstr(g_out, "median ms"),
               "'%s %s %s %s ... %s': exit %d (expected 2 before any work), stderr '%s' (expected "
               "'%s'), stdout '%.300s'",
               a[0], a[1], a[2], a[3], a[6] ? a[6] : "", rc, g_err, early[i].expect, g_out);
    }
    EXPECT(access(nofile, F_OK) != 0, "a refused run left %s behind", nofile);

    /* bench skips a case whose inputs and outputs alone (4 x 2^22 x 4096 x 64 x 4 bytes =
     * 16 TiB, with the largest input's staging copy 20 TiB) cannot fit: nothing allocated. */
    char out[4096];
    snprintf(out, sizeof out, "%s/bench-mem", g_dir);
    int rc = run_tool("bench", "--backend", "cpu", "--sq", "4194304", "--heads", "4096", "--algo",
                      "flash,naive", "--no-check", "--no-progress", "--out", out, NULL);
    EXPECT(rc == 0 && strstr(g_out, "skipped: needs 20 TiB for its inputs and outputs, ") &&
               strstr(g_out, "2 cells: 0 ok, 0 failed, 0 unsupported, 2 skipped"),
           "bench of a case that cannot fit: exit %d\n%s%s", rc, g_out, g_err);
}

/* What a case needs, by hand: B2 H4/2 Sq10 Sk20 D8 Dv4, f16 q/o, f32 k/v, LSE, bias. */
static void test_mem_estimate(void)
{
    xtool_case c;
    xtool_case_defaults(&c);
    c.batch = 2;
    c.heads = 4;
    c.kv_heads = 2;
    c.sq = 10;
    c.sk = 20;
    c.head_dim = 8;
    c.head_dim_v = 4;
    c.dtype = XATTN_DTYPE_F16;
    c.kv_dtype = XATTN_DTYPE_F32;
    c.lse = c.bias = 1;
    xtool_case_mem m;
    /* q 2*10*4*8*2 = 1280, k 2*20*2*8*4 = 2560, v 2*20*2*4*4 = 1280, o 2*10*4*4*2 = 640,
     * lse 2*10*4*4 = 320, bias 4*10*20*4 = 3200: 9280; staging: the largest, 3200.
     * NAIVE: 2*4*10*20*4 = 6400. */
    xtool_case_mem_estimate(&c, XATTN_ALGO_NAIVE, 0, 0, 2, &m);
    EXPECT(m.tensors == 9280 && m.staging == 3200 && m.workspace == 6400 && m.reference == 0 &&
               xtool_case_mem_peak(&m) == 9280 + 6400,
           "naive: tensors %g staging %g workspace %g reference %g", m.tensors, m.staging,
           m.workspace, m.reference);
    /* The whole reference: inputs in double (640 + 960 + 800 elements), O and LSE
     * (20*4*(4+1) = 400), and the largest raw copy (k, 2560): 8*2800 + 2560. */
    xtool_case_mem_estimate(&c, XATTN_ALGO_FLASH, 1, 1e18, 2, &m);
    EXPECT(m.workspace == 0 && m.reference == 8.0 * 2800 + 2560, "full reference %g", m.reference);
    /* Full cost 2*400*4*12 = 38400 FLOPs, sub-batch 2*200*2*12 = 9600: a limit of 1e4
     * checks sequence 0 x KV head 0: 10*4*8 + 20*2*12 + 2*10*20 = 1200 inputs, 10*2*5 = 100
     * outputs. */
    xtool_case_mem_estimate(&c, XATTN_ALGO_FLASH, 1, 1e4, 2, &m);
    EXPECT(m.reference == 8.0 * 1300 + 2560, "sub-batch reference %g", m.reference);
    xtool_case_mem_estimate(&c, XATTN_ALGO_FLASH, 1, 100, 2, &m);
    EXPECT(m.reference == 0, "no reference under the limit: %g", m.reference);
    /* SPLITKV with 3 chunks: 3 x 80 rows x (4 + 1) x 4 bytes. */
    c.num_splits = 3;
    xtool_case_mem_estimate(&c, XATTN_ALGO_SPLITKV, 0, 0, 2, &m);
    EXPECT(m.workspace == 4800, "splitkv partials %g", m.workspace);
    /* AUTO picks FLASH at Sq 10: no workspace counted. */
    xtool_case_mem_estimate(&c, XATTN_ALGO_AUTO, 0, 0, 2, &m);
    EXPECT(m.workspace == 0, "auto %g", m.workspace);
    /* 2^40 scores: nothing overflows. */
    c.sq = c.sk = 1 << 20;
    c.lse = c.bias = 0;
    xtool_case_mem_estimate(&c, XATTN_ALGO_NAIVE, 0, 0, 2, &m);
    EXPECT(m.workspace == 2.0 * 4 * 1099511627776.0 * 4, "2^40 scores: %g", m.workspace);
}

/* ---- tune: the candidate tiles ---------------------------------------------- */

/* Each algorithm has candidates for both device classes, in XATTN_CL_TILE's
 * form with known keys and values, no two alike; FLASH and SPLITKV try both
 * forms (rows = 0 and rows > 0); SPLITKV's include FLASH's; AUTO has none. */
static void test_tune_candidates(void)
{
    static const char *const keys[] = {"bq",          "bk",           "nt",         "rwg", "cwg",
                                       "naive_local", "fixed_dtypes", "fixed_dims", "rows"};
    for (int cls = 0; cls <= 1; cls++) {
        const char *flash[32];
        const int nflash = xtool_tune_candidates(XATTN_ALGO_FLASH, cls, flash, 32);
        for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
            const char *c[32];
            const int n = xtool_tune_candidates((xattn_algo)a, cls, c, 32);
            const char *an = xattn_algo_name((xattn_algo)a);
            EXPECT(n >= 3 && n < 32, "%s class %d: %d candidates", an, cls, n);
            int row_form = 0, group_form = 0;
            for (int i = 0; i < n; i++) {
                char buf[256];
                snprintf(buf, sizeof buf, "%s", c[i]);
                int ok = buf[0] != '\0';
                for (char *tok = strtok(buf, ","); tok && ok; tok = strtok(NULL, ",")) {
                    char *eq = strchr(tok, '=');
                    ok = eq && eq[1];
                    if (!ok)
                        break;
                    *eq = '\0';
                    int known = 0;
                    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
                        known |= !strcmp(tok, keys[k]);
                    char *end;
                    long v = strtol(eq + 1, &end, 10);
                    ok = known && !*end && v >= 0 && v <= 4096;
                    if (!strcmp(tok, "rows"))
                        *(v > 0 ? &row_form : &group_form) += 1;
                }
                EXPECT(ok, "%s class %d: candidate '%s'", an, cls, c[i]);
                for (int j = 0; j < i; j++)
                    EXPECT(strcmp(c[i], c[j]), "%s class %d: '%s' twice", an, cls, c[i]);
            }
            if (a != XATTN_ALGO_NAIVE)
                EXPECT(row_form > 0 && group_form > 0,
                       "%s class %d: row form %d, work-group form %d candidates", an, cls, row_form,
                       group_form);
            if (a == XATTN_ALGO_SPLITKV)
                for (int i = 0; i < nflash; i++)
                    EXPECT(i < n && !strcmp(c[i], flash[i]), "splitkv class %d: flash's '%s'", cls,
                           flash[i]);
        }
        const char *none[4];
        EXPECT(xtool_tune_candidates(XATTN_ALGO_AUTO, cls, none, 4) == 0, "auto has candidates");
        EXPECT(xtool_tune_candidates(XATTN_ALGO_FLASH, cls, none, 2) == 2, "cap not kept");
    }
}

/* The CUDA candidates: FLASH and SPLITKV have some, in XATTN_CUDA_CONFIG's
 * form (path auto or simt, waves 1..64), none twice and none the default;
 * SPLITKV tries other waves and the SIMT path; NAIVE and AUTO have none. */
static void test_tune_cuda_candidates(void)
{
    for (int a = XATTN_ALGO_AUTO; a <= XATTN_ALGO_SPLITKV; a++) {
        const char *c[32];
        const int n = xtool_tune_cuda_candidates((xattn_algo)a, c, 32);
        const char *an = xattn_algo_name((xattn_algo)a);
        if (a == XATTN_ALGO_AUTO || a == XATTN_ALGO_NAIVE) {
            EXPECT(n == 0, "%s: %d cuda candidates", an, n);
            continue;
        }
        EXPECT(n >= 1 && n < 32, "%s: %d cuda candidates", an, n);
        int simt = 0, waves = 0;
        for (int i = 0; i < n; i++) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", c[i]);
            int ok = buf[0] != '\0', set_waves = 0, set_simt = 0;
            for (char *tok = strtok(buf, ","); tok && ok; tok = strtok(NULL, ",")) {
                char *eq = strchr(tok, '=');
                ok = eq && eq[1];
                if (!ok)
                    break;
                *eq = '\0';
                if (!strcmp(tok, "path")) {
                    ok = !strcmp(eq + 1, "auto") || !strcmp(eq + 1, "simt");
                    set_simt = !strcmp(eq + 1, "simt");
                } else if (!strcmp(tok, "waves")) {
                    char *end;
                    long v = strtol(eq + 1, &end, 10);
                    ok = !*end && v >= 1 && v <= 64;
                    set_waves = v != 2;
                } else {
                    ok = 0;
                }
            }
            EXPECT(ok && (set_simt || set_waves), "%s: cuda candidate '%s' (or the default)", an,
                   c[i]);
            simt += set_simt;
            waves += set_waves;
            for (int j = 0; j < i; j++)
                EXPECT(strcmp(c[i], c[j]), "%s: '%s' twice", an, c[i]);
        }
        EXPECT(simt > 0, "%s: no SIMT candidate", an);
        if (a == XATTN_ALGO_SPLITKV)
            EXPECT(waves >= 2, "splitkv: %d candidates with other waves", waves);
    }
    const char *two[2];
    EXPECT(xtool_tune_cuda_candidates(XATTN_ALGO_SPLITKV, two, 2) == 2, "cap not kept");
}

/* ---- tune: the command on a tiny case ------------------------------------------- */

/* xattn tune on a tiny FLASH case writes an entry; xattn run of that case then
 * runs the stored tile (its kernel says "-tuned") unless XATTN_CL_TILE is set.
 * Only what was tried and stored is checked, never which tile won. */
static void test_tune_command(void)
{
    char cache[4096], sub[4200];
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    snprintf(sub, sizeof sub, "%s/opencl", cache);
    setenv("XATTN_CACHE_DIR", cache, 1);
    unsetenv("XATTN_CL_TILE");
    /* The entries of an earlier run go first: this run must write its own. */
    DIR *old = opendir(sub);
    struct dirent *oe;
    while (old && (oe = readdir(old))) {
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", sub, oe->d_name);
        if (!strncmp(oe->d_name, "tune-", 5))
            unlink(path);
    }
    if (old)
        closedir(old);
    int rc;
    /* CUDA: NAIVE has nothing to tune; without a driver or a CUDA build the
     * command says so and fails, it does not crash or pretend. */
    rc = run_tool("tune", "--backend", "cuda", "--algo", "naive", "--sq", "8", "--heads", "2",
                  "--head-dim", "16", NULL);
    EXPECT((rc == 1 && (strstr(g_err, "cuda unavailable") || strstr(g_err, "no cuda backend"))) ||
               (rc == 0 && strstr(g_out, "nothing to tune on cuda")),
           "tune --backend cuda: exit %d: %s %s", rc, g_out, g_err);
    EXPECT(run_tool("tune", "--backend", "cpu", NULL) == 2 && strstr(g_err, "not supported"),
           "tune --backend cpu: %s", g_err);
    EXPECT(run_tool("tune", "--algo", "auto", NULL) == 2 && strstr(g_err, "--algo auto"),
           "tune --algo auto: %s", g_err);
    const char *shape[] = {"--sq", "8",          "--sk", "24",         "--heads",
                           "2",    "--kv-heads", "1",    "--head-dim", "16"};
    rc = run_tool("tune", "--algo", "flash", shape[0], shape[1], shape[2], shape[3], shape[4],
                  shape[5], shape[6], shape[7], shape[8], shape[9], "--reps", "1", "--warmup", "0",
                  NULL);
    if (rc == 1 && (strstr(g_err, "OpenCL unavailable") || strstr(g_err, "no OpenCL backend"))) {
        SKIP("tune: %s", g_err);
        return;
    }
    EXPECT(rc == 0 && g_out_all, "tune: exit %d: %s %s", rc, g_out, g_err);
    if (rc != 0 || !g_out_all)
        return;
    const int cpu_class = strstr(g_out_all, "CPU-class candidates") != NULL;
    const char *c[32];
    const int n = xtool_tune_candidates(XATTN_ALGO_FLASH, cpu_class, c, 32);
    EXPECT(strstr(g_out_all, "table row"), "no table row in:\n%s", g_out_all);
    for (int i = 0; i < n; i++) {
        char line[300];
        snprintf(line, sizeof line, "\n  %s ", c[i]);
        EXPECT(strstr(g_out_all, line), "candidate '%s' not in:\n%s", c[i], g_out_all);
    }
    EXPECT(strstr(g_out_all, "stored for flash f32 D 16 Dv 16") &&
               strstr(g_out_all, "agrees with the reference"),
           "not stored:\n%s", g_out_all);
    DIR *d = opendir(sub);
    int files = 0;
    char text[4096] = "";
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, "tune-", 5))
            continue;
        files++;
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
        char *t = read_all(path);
        snprintf(text, sizeof text, "%s", t ? t : "");
        free(t);
    }
    if (d)
        closedir(d);
    EXPECT(files == 1 && strstr(text, "algo=flash\n") && strstr(text, "head_dim=16\n") &&
               strstr(text, "\ntile=bq="),
           "%d entries in %s; the last: '%s'", files, sub, text);
    /* The next context uses it, and says so; XATTN_CL_TILE overrides it. */
    rc = run_tool("run", "--backend", "opencl", "--algo", "flash", shape[0], shape[1], shape[2],
                  shape[3], shape[4], shape[5], shape[6], shape[7], shape[8], shape[9], NULL);
    EXPECT(rc == 0 && strstr(g_out, "-tuned"), "run after tune: exit %d, kernel not tuned:\n%s", rc,
           g_out);
    setenv("XATTN_CL_TILE", "rows=4", 1);
    rc = run_tool("run", "--backend", "opencl", "--algo", "flash", shape[0], shape[1], shape[2],
                  shape[3], shape[4], shape[5], shape[6], shape[7], shape[8], shape[9], NULL);
    unsetenv("XATTN_CL_TILE");
    EXPECT(rc == 0 && strstr(g_out, "kernel   cl-") && !strstr(g_out, "-tuned"),
           "run with XATTN_CL_TILE: exit %d:\n%s", rc, g_out);
    rc = run_tool("tune", "--device", "1000", NULL);
    EXPECT(rc == 2 && strstr(g_err, "--device"), "tune --device 1000: exit %d: %s", rc, g_err);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "unit";
    if (!strcmp(what, "unit")) {
        test_xml_checker();
        test_writer();
        test_parse();
        test_opt_table();
        test_lengths();
        test_stats();
        test_case_check();
        test_case_paged();
        test_mem_estimate();
        test_advice();
        test_cmp_index();
        test_tune_candidates();
        test_tune_cuda_candidates();
    } else if (!strcmp(what, "docs") && argc > 4) {
        test_docs(argv[2], argv[3], argv[4]);
    } else if (!strcmp(what, "manual") && argc > 2) {
        test_manual(argv[2], argc > 3 && !strcmp(argv[3], "--write"));
    } else if (!strcmp(what, "writers") && argc > 2) {
        if (mkdir(argv[2], 0777) && errno != EEXIST) {
            printf("cannot create %s\n", argv[2]);
            return 1;
        }
        test_model_errors(argv[2]);
    } else if (!strcmp(what, "compare") && argc > 4) {
        g_bin = argv[2];
        g_dir = argv[3];
        if (mkdir(g_dir, 0777) && errno != EEXIST) {
            printf("cannot create %s\n", g_dir);
            return 1;
        }
        test_compare(argv[4]);
        test_compare_profiles(argv[4]);
        test_compare_hostile();
    } else if ((!strcmp(what, "outputs") || !strcmp(what, "usage") || !strcmp(what, "threads") ||
                !strcmp(what, "ab") || !strcmp(what, "tune") || !strcmp(what, "serving") ||
                !strcmp(what, "paged")) &&
               argc > 3) {
        g_bin = argv[2];
        g_dir = argv[3];
        if (mkdir(g_dir, 0777) && errno != EEXIST) {
            printf("cannot create %s\n", g_dir);
            return 1;
        }
        if (!strcmp(what, "outputs"))
            test_outputs();
        else if (!strcmp(what, "ab"))
            test_ab();
        else if (!strcmp(what, "threads"))
            test_threads();
        else if (!strcmp(what, "tune"))
            test_tune_command();
        else if (!strcmp(what, "serving"))
            test_serving();
        else if (!strcmp(what, "paged"))
            test_paged();
        else
            test_usage();
    } else {
        fprintf(stderr,
                "usage: test_tool unit | manual DOC [--write] | docs HEADER API_MD SCALE_MD | "
                "outputs XATTN_BIN DIR | usage "
                "XATTN_BIN DIR | "
                "threads XATTN_BIN DIR | ab XATTN_BIN DIR | tune XATTN_BIN DIR | serving XATTN_BIN "
                "DIR | "
                "paged XATTN_BIN DIR | compare XATTN_BIN "
                "DIR DATA_DIR | "
                "writers DIR\n");
        return 2;
    }
    free(g_out_all);
    return xattn_test_summary();
}
