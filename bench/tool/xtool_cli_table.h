/*
 * The command line of the xattn tool as data: one table of commands and one
 * table of options (xtool_cli_table.c). The parser (xtool_cli_opts.c), the
 * --help texts and the manual's option list (xtool_cli_help.c) all read the
 * same rows, so that an option is added in one place: one row (two where a
 * command takes it with another default or meaning), and a parse function
 * only when its value is not one of the common kinds below.
 */
#ifndef XTOOL_CLI_TABLE_H
#define XTOOL_CLI_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "xtool_cli.h"

/* The bit of a command in xtool_opt_def.cmds and .one_value. */
#define XTOOL_CMD_BIT(cmd) (1u << (cmd))

typedef enum xtool_arg_kind {
    XTOOL_ARG_FLAG,   /* no value: sets the int field to .ival */
    XTOOL_ARG_INT,    /* an integer in [ilo, ihi] into an int field */
    XTOOL_ARG_U64,    /* an integer in [ilo, ihi] into a uint64_t field */
    XTOOL_ARG_NUM,    /* a finite number in [dlo, dhi] into a double field */
    XTOOL_ARG_FLOAT,  /* a finite number in [dlo, dhi] into a float field */
    XTOOL_ARG_LIST,   /* integers in [ilo, ihi], "a,b,c" or "a..b" (doubling), into an
                       * xtool_cli_ilist */
    XTOOL_ARG_CHOICE, /* one of .choices (NULL-terminated) into an int field: its index */
    XTOOL_ARG_TEXT,   /* a non-empty string (a file, a name) into a const char * field; it
                       * points into argv */
    XTOOL_ARG_CUSTOM  /* .parse reads the value (optional when .optional_value) */
} xtool_arg_kind;

/* Where an option is listed in --help and in the manual, in this order. */
typedef enum xtool_opt_section {
    XTOOL_SEC_WHERE,   /* where to run: backends, devices, algorithms, threads */
    XTOOL_SEC_CASE,    /* the attention case */
    XTOOL_SEC_CASES,   /* bench's cases: presets, cases files, scale */
    XTOOL_SEC_MATRIX,  /* check's matrix */
    XTOOL_SEC_MEASURE, /* measurement and the reference */
    XTOOL_SEC_OUTPUT,  /* outputs */
    XTOOL_SEC_AB,      /* bench --ab */
    XTOOL_SEC_GENERAL, /* --help */
    XTOOL_SEC_COUNT
} xtool_opt_section;

struct xtool_opt_def;

/* Reads arg (NULL for an optional value left out) into o; 0, or
 * XTOOL_EXIT_USAGE with a message naming the flag and the value. */
typedef int (*xtool_opt_parse_fn)(xtool_cli_opts *o, const struct xtool_opt_def *d, const char *arg,
                                  char *err, size_t errlen);

typedef struct xtool_opt_def {
    const char *name;          /* "sq": the flag --sq */
    unsigned cmds;             /* XTOOL_CMD_BIT of every command that takes it (this row) */
    xtool_opt_section section; /* where help and the manual list it */
    xtool_arg_kind kind;
    const char *arg;            /* the value in help and the manual ("N", "FILE"); NULL: none */
    const char *arg_list;       /* LIST and list-valued CUSTOM: the value where a command takes a
                                 * list ("LIST"); arg where it takes one (.one_value) */
    size_t off;                 /* offsetof(xtool_cli_opts, the field); FLAG..TEXT kinds */
    int64_t ilo, ihi;           /* INT, U64, LIST: the range */
    double dlo, dhi;            /* NUM, FLOAT: the range */
    int ival;                   /* FLAG: the value it sets; TEXT: 1 when "" is allowed */
    const char *const *choices; /* CHOICE: the accepted words */
    unsigned given;             /* XTOOL_GIVEN_* set when the command line gives it */
    unsigned one_value;         /* LIST and list-valued CUSTOM: commands that take one value */
    const char *dflt;           /* the default, applied through the same parser before the
                                 * command line (and shown); NULL: none */
    const char *dflt_note;      /* the default in words where it is not a value ("every
                                 * device"); shown only */
    const char *expected;       /* what a bad value is told it should be ("a device index
                                 * (0..1023)"); NULL: said from the kind and range */
    const char *help;           /* what it does, one sentence (help wraps it) */
    const char *refused;        /* not NULL: the commands of this row refuse the flag with
                                 * this reason (a hint for a flag of another command); such a
                                 * row is in no help and not in the manual */
    xtool_opt_parse_fn parse;   /* CUSTOM: reads the value */
    int optional_value;         /* CUSTOM: the value may be left out (--causal[=ALIGN]) */
} xtool_opt_def;

#define XTOOL_OPT_MAX_DEFS 128 /* rows in the table, at most (checked where it is defined) */
extern const xtool_opt_def xtool_opt_defs[];
extern const size_t xtool_opt_ndefs;

/* A command: what --help says around its options. */
typedef struct xtool_cmd_def {
    const char *name;      /* "bench" */
    const char *usage;     /* "[--preset NAME] [options]" after "xattn bench" */
    const char *summary;   /* one line, for 'xattn --help' */
    const char *about;     /* --help's paragraph before the options */
    const char *exit_text; /* the exit statuses */
} xtool_cmd_def;

/* Indexed by xtool_cli_cmd (XTOOL_CLI_NONE's row is empty). */
extern const xtool_cmd_def xtool_cmd_defs[XTOOL_CLI_CMD_COUNT];

/* The titles of the sections, indexed by xtool_opt_section. */
extern const char *const xtool_opt_section_titles[XTOOL_SEC_COUNT];

/* The custom parsers of the table (xtool_cli_opts.c). */
int xtool_opt_parse_backend(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                            size_t errlen);
int xtool_opt_parse_algo(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                         size_t errlen);
int xtool_opt_parse_dtype(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                          size_t errlen);
int xtool_opt_parse_kv_dtype(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                             size_t errlen);
int xtool_opt_parse_causal(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                           size_t errlen);
int xtool_opt_parse_window(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                           size_t errlen);
int xtool_opt_parse_threads(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                            size_t errlen);
int xtool_opt_parse_force(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                          size_t errlen);

/* A bad command line: the message into err (when there is room); returns
 * XTOOL_EXIT_USAGE. */
int xtool_cli_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The default of option `name` for a command, as its row gives it (NULL when
 * the command's row has none). */
const char *xtool_opt_default(xtool_cli_cmd cmd, const char *name);

#endif
