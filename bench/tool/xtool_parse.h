/*
 * The integer parser of the bench programs' command lines (xattn, and the
 * xattn_overhead and xattn_ukbench helpers, which do not link the tool's
 * option module). Header-only so that each program compiles its own.
 */
#ifndef XTOOL_PARSE_H
#define XTOOL_PARSE_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* *out = s as a base-10 integer in [lo, hi]: 0; -1 (and *out untouched) for
 * NULL, an empty string, trailing characters, overflow or out of range. */
static inline int xtool_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

#endif
