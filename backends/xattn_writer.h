/*
 * JSON and CSV text written to a FILE: the one writer of the library's
 * profiler exports (xattn_export.c) and of the xattn tool's result files,
 * which compiles this file into itself (bench/CMakeLists.txt). It needs
 * nothing but the C library: no library state, no internal header.
 *
 * It includes only the public header, for the one object every JSON file of
 * the project shares: a device's ceilings.
 *
 * Numbers are written in the shortest form that reads back to the same
 * double (integers without a fraction), for the "C" locale: a caller that
 * may run under another locale switches to "C" around the writing, as
 * xattn_profiler_export does. Strings are escaped; bytes that are not
 * well-formed UTF-8 become U+FFFD, so that the output is always valid.
 */
#ifndef XATTN_WRITER_H
#define XATTN_WRITER_H

#include <stddef.h>
#include <stdio.h>

#include "xattn.h"

/* The length of the well-formed UTF-8 sequence at s (1 to 4; 1 for ASCII),
 * or 0 when s does not start one (overlong forms and surrogates included). */
int xattn__utf8_len(const unsigned char *s);

/* A JSON string literal: quotes, backslashes and control characters escaped
 * (\n, \r, \t or \u00XX, DEL too); NULL writes "". */
void xattn__json_str(FILE *f, const char *s);
/* A JSON number: the shortest of 15, 16 or 17 significant digits that reads
 * back exactly; null when v is not finite (JSON has no NaN or infinity). */
void xattn__json_num(FILE *f, double v);
/* `, "key": ` - a member of an object after its first; the value follows. */
void xattn__json_key(FILE *f, const char *key);

/* A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line
 * break, quotes doubled; NULL writes an empty field. */
void xattn__csv_str(FILE *f, const char *s);
/* A CSV number as xattn__json_num writes it; an empty field when v is not
 * finite. */
void xattn__csv_num(FILE *f, double v);

/* A device's ceilings as a JSON object, every field of xattn_ceilings under
 * its own name (the records' export and the tool's result files). */
void xattn__json_ceilings(FILE *f, const xattn_ceilings *c);

#endif
