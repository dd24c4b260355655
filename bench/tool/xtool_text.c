/* Text the tool prints and writes: a JSON member, XML text of the SVG charts,
 * byte counts, shares of a ceiling, the command line (xtool.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "xtool.h"

const char *xtool_prog = "xattn";

void xtool_json_field(FILE *f, const char *key, double v)
{
    xattn__json_key(f, key);
    xattn__json_num(f, v);
}

void xtool_json_field_or_null(FILE *f, const char *key, double v)
{
    xattn__json_key(f, key);
    if (v < 0 || !isfinite(v))
        fputs("null", f);
    else
        xattn__json_num(f, v);
}

void xtool_json_str_or_null(FILE *f, const char *s)
{
    if (s && *s)
        xattn__json_str(f, s);
    else
        fputs("null", f);
}

void xtool_xml_text(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        switch (*p) {
        case '<':
            fputs("&lt;", f);
            p++;
            break;
        case '>':
            fputs("&gt;", f);
            p++;
            break;
        case '&':
            fputs("&amp;", f);
            p++;
            break;
        case '"':
            fputs("&quot;", f);
            p++;
            break;
        case '\'':
            fputs("&apos;", f);
            p++;
            break;
        default: {
            if (*p < 0x20 && *p != '\t' && *p != '\n') { /* not allowed in XML 1.0 */
                fputc(' ', f);
                p++;
                break;
            }
            int len = xattn__utf8_len(p);
            if (len == 0) {
                fputs("&#xFFFD;", f);
                p++;
            } else {
                fwrite(p, 1, (size_t)len, f);
                p += len;
            }
        }
        }
    }
}

void xtool_fmt_bytes(double b, char *out, size_t n)
{
    if (b >= 1099511627776.0 * 10)
        snprintf(out, n, "%.0f TiB", b / 1099511627776.0);
    else if (b >= 1073741824.0)
        snprintf(out, n, "%.2f GiB", b / 1073741824.0);
    else if (b >= 1048576.0)
        snprintf(out, n, "%.1f MiB", b / 1048576.0);
    else if (b >= 1024.0)
        snprintf(out, n, "%.1f KiB", b / 1024.0);
    else
        snprintf(out, n, "%.0f B", b);
}

const char *xtool_fmt_pct(double v, char *out, size_t n)
{
    if (!(v >= 0) || !isfinite(v))
        snprintf(out, n, "-");
    else
        snprintf(out, n, "%.1f%s", v, xtool_stats_over_ceiling(v) ? "!" : "");
    return out;
}

void xtool_command_line(int argc, char **argv, char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    k += (size_t)snprintf(out, n, "%s", xtool_prog);
    for (int i = 0; i < argc && k < n; i++) {
        const char *a = argv[i];
        int plain = *a != '\0';
        for (const char *p = a; *p; p++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+@%",
                        *p))
                plain = 0;
        if (plain) {
            k += (size_t)snprintf(out + k, n - k, " %s", a);
            continue;
        }
        k += (size_t)snprintf(out + k, n - k, " '");
        for (const char *p = a; *p && k < n; p++)
            k += (size_t)(*p == '\'' ? snprintf(out + k, n - k, "'\\''")
                                     : snprintf(out + k, n - k, "%c", *p));
        if (k < n)
            k += (size_t)snprintf(out + k, n - k, "'");
    }
}
