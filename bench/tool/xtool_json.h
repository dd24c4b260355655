/*
 * The tool's one JSON reader, for every file it reads back (cases files,
 * compare's result files, the profiler's traces that bench merges): the text
 * becomes a tree whose every value knows the line it starts on, so that a
 * message can name the line as well as the field. Strict RFC 8259 (no
 * comments, no trailing commas, no duplicate keys, no NUL in strings), depth
 * and size bounded; a pure function of its input (no I/O), for fuzzing. A
 * tree (or a part of one) is written back with xtool_json_write.
 */
#ifndef XTOOL_JSON_READ_H
#define XTOOL_JSON_READ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum xtool_json_type {
    XTOOL_JSON_NULL = 0,
    XTOOL_JSON_BOOL,
    XTOOL_JSON_NUMBER,
    XTOOL_JSON_STRING,
    XTOOL_JSON_ARRAY,
    XTOOL_JSON_OBJECT
} xtool_json_type;

typedef struct xtool_json {
    xtool_json_type type;
    int line;       /* 1-based line of the value's first character */
    int boolean;    /* XTOOL_JSON_BOOL */
    double number;  /* XTOOL_JSON_NUMBER */
    int integer_ok; /* the number was written without fraction or exponent and fits int64 */
    int64_t integer;
    char *string;             /* XTOOL_JSON_STRING: UTF-8, NUL-terminated */
    size_t n;                 /* elements of an array, members of an object */
    struct xtool_json *items; /* the elements, or the members' values */
    char **keys;              /* the members' names (objects) */
} xtool_json;

#define XTOOL_JSON_MAX_DEPTH 64

/* Parses `len` bytes of text. Returns the tree (free with xtool_json_free), or
 * NULL with "line N: what was expected" in err. */
xtool_json *xtool_json_parse(const char *text, size_t len, char *err, size_t errlen);
void xtool_json_free(xtool_json *v);
/* The value of member `key` of an object, or NULL (absent, or v not an object). */
const xtool_json *xtool_json_get(const xtool_json *v, const char *key);
/* "null", "a boolean", "a number", "a string", "an array", "an object". */
const char *xtool_json_type_name(xtool_json_type t);

/* Convenience reads of member `key` of an object: its string ("" when absent
 * or not a string), its number (NaN when absent or not a number), its integer
 * clamped to int (dflt when absent or not an integer). */
const char *xtool_json_str_of(const xtool_json *v, const char *key);
double xtool_json_num_of(const xtool_json *v, const char *key);
int xtool_json_int_of(const xtool_json *v, const char *key, int dflt);

/* Writes v as JSON text (compact: ", " and ": " separators, no line breaks),
 * through the library's writer (xattn_writer.h): an integer as it was read,
 * other numbers in their shortest exact form. */
void xtool_json_write(FILE *f, const xtool_json *v);

#endif
