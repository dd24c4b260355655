/*
 * A small JSON reader for the tool's input files (cases files): the text
 * becomes a tree whose every value knows the line it starts on, so that a
 * message can name the line as well as the field. Strict RFC 8259 (no
 * comments, no trailing commas, no duplicate keys, no NUL in strings), depth
 * and size bounded; a pure function of its input (no I/O), for fuzzing.
 */
#ifndef XATTN_JSON_READ_H
#define XATTN_JSON_READ_H

#include <stddef.h>
#include <stdint.h>

typedef enum xattn_json_type {
    XATTN_JSON_NULL = 0,
    XATTN_JSON_BOOL,
    XATTN_JSON_NUMBER,
    XATTN_JSON_STRING,
    XATTN_JSON_ARRAY,
    XATTN_JSON_OBJECT
} xattn_json_type;

typedef struct xattn_json {
    xattn_json_type type;
    int line;       /* 1-based line of the value's first character */
    int boolean;    /* XATTN_JSON_BOOL */
    double number;  /* XATTN_JSON_NUMBER */
    int integer_ok; /* the number was written without fraction or exponent and fits int64 */
    int64_t integer;
    char *string;             /* XATTN_JSON_STRING: UTF-8, NUL-terminated */
    size_t n;                 /* elements of an array, members of an object */
    struct xattn_json *items; /* the elements, or the members' values */
    char **keys;              /* the members' names (objects) */
} xattn_json;

#define XATTN_JSON_MAX_DEPTH 64

/* Parses `len` bytes of text. Returns the tree (free with xattn_json_free), or
 * NULL with "line N: what was expected" in err. */
xattn_json *xattn_json_parse(const char *text, size_t len, char *err, size_t errlen);
void xattn_json_free(xattn_json *v);
/* The value of member `key` of an object, or NULL (absent, or v not an object). */
const xattn_json *xattn_json_get(const xattn_json *v, const char *key);
/* "null", "a boolean", "a number", "a string", "an array", "an object". */
const char *xattn_json_type_name(xattn_json_type t);

#endif
