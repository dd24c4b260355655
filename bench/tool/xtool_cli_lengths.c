/* The text of a --lengths file (xtool_cli_parse_lengths, xtool_cli.h): pure,
 * like the command line's parser, and fuzzed with it. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "xtool_cli.h"
#include "xtool_cli_table.h"
#include "xtool_parse.h"

int xtool_cli_parse_lengths(const char *text, int32_t *lq, int32_t *lk, int cap, int *n, char *err,
                            size_t errlen)
{
    *n = 0;
    int line = 0;
    const char *p = text;
    while (p && *p) {
        line++;
        size_t len = strcspn(p, "\n");
        char buf[128];
        if (len >= sizeof buf)
            return xtool_cli_fail(err, errlen, "line %d: too long (expected \"L\" or \"LQ LK\")",
                                  line);
        memcpy(buf, p, len);
        buf[len] = '\0';
        p += len;
        if (*p == '\n')
            p++;
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        char *tok[3] = {0};
        int nt = 0;
        for (char *s = buf; *s;) {
            while (*s == ' ' || *s == '\t' || *s == '\r' || *s == ',')
                s++;
            if (!*s)
                break;
            if (nt == 3)
                break;
            tok[nt++] = s;
            while (*s && *s != ' ' && *s != '\t' && *s != '\r' && *s != ',')
                s++;
            if (*s)
                *s++ = '\0';
        }
        if (nt == 0)
            continue;
        if (nt > 2)
            return xtool_cli_fail(err, errlen,
                                  "line %d: more than two numbers (expected \"L\" or "
                                  "\"LQ LK\")",
                                  line);
        int64_t a, b = -1;
        if (xtool_parse_i64(tok[0], 0, 1 << 22, &a) ||
            (nt == 2 && xtool_parse_i64(tok[1], 0, 1 << 22, &b)))
            return xtool_cli_fail(
                err, errlen,
                "line %d: '%s' is not a length (integers 0..4194304; \"L\" or "
                "\"LQ LK\")",
                line, nt == 2 && !xtool_parse_i64(tok[0], 0, 1 << 22, &a) ? tok[1] : tok[0]);
        if (*n >= cap)
            return xtool_cli_fail(err, errlen, "line %d: more than %d sequences", line, cap);
        if (nt == 2) {
            lq[*n] = (int32_t)a;
            lk[*n] = (int32_t)b;
        } else {
            lq[*n] = -1;
            lk[*n] = (int32_t)a;
        }
        (*n)++;
    }
    if (*n == 0)
        return xtool_cli_fail(err, errlen, "no lengths (one sequence a line: \"L\" or \"LQ LK\")");
    return 0;
}
