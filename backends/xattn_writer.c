/* JSON and CSV text: the one writer of the library and the tool (xattn_writer.h). */
#include "xattn_writer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int xattn__utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    int n = (c >= 0xc2 && c <= 0xdf)   ? 2
            : (c >= 0xe0 && c <= 0xef) ? 3
            : (c >= 0xf0 && c <= 0xf4) ? 4
                                       : 0;
    for (int k = 1; k < n; k++)
        if ((s[k] & 0xc0) != 0x80)
            return 0;
    if (n == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0)))
        return 0; /* overlong, or a surrogate */
    if (n == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90)))
        return 0; /* overlong, or beyond U+10FFFF */
    return n;
}

void xattn__json_str(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    fputc('"', f);
    while (*p) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\r') {
            fputs("\\r", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
        } else {
            int n = xattn__utf8_len(p);
            if (n == 0) {
                fputs("\\ufffd", f);
            } else {
                fwrite(p, 1, (size_t)n, f);
                p += n;
                continue;
            }
        }
        p++;
    }
    fputc('"', f);
}

/* The shortest of 15..17 significant digits that reads back to v. */
static void xattn__fmt_num(char *buf, size_t n, double v)
{
    if (v == floor(v) && fabs(v) < 9e15) {
        snprintf(buf, n, "%.0f", v);
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

void xattn__json_num(FILE *f, double v)
{
    if (!isfinite(v)) {
        fputs("null", f);
        return;
    }
    char buf[40];
    xattn__fmt_num(buf, sizeof buf, v);
    fputs(buf, f);
}

void xattn__json_key(FILE *f, const char *key)
{
    fputs(", ", f);
    xattn__json_str(f, key);
    fputs(": ", f);
}

void xattn__csv_str(FILE *f, const char *s)
{
    s = s ? s : "";
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void xattn__json_ceilings(FILE *f, const xattn_ceilings *c)
{
    fputs("{\"fma_f32_gflops\": ", f);
    xattn__json_num(f, c->fma_f32_gflops);
    const struct {
        const char *key;
        double v;
    } nums[] = {{"fma_f16_gflops", c->fma_f16_gflops}, {"fma_bf16_gflops", c->fma_bf16_gflops},
                {"mma_f16_gflops", c->mma_f16_gflops}, {"mma_bf16_gflops", c->mma_bf16_gflops},
                {"read_gbps", c->read_gbps},           {"copy_gbps", c->copy_gbps}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        xattn__json_key(f, nums[i].key);
        xattn__json_num(f, nums[i].v);
    }
    xattn__json_key(f, "from_cache");
    fputs(c->from_cache ? "true" : "false", f);
    xattn__json_key(f, "cache_path");
    xattn__json_str(f, c->cache_path);
    fputc('}', f);
}

void xattn__csv_num(FILE *f, double v)
{
    if (!isfinite(v))
        return;
    char buf[40];
    xattn__fmt_num(buf, sizeof buf, v);
    fputs(buf, f);
}
