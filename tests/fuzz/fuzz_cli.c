/*
 * libFuzzer target over the xattn tool's command-line parsers (bench/
 * xtool_cli_opts.c): xtool_cli_parse, for every subcommand, and
 * xtool_cli_parse_lengths, the parser of --lengths files. Both are pure
 * functions, so the target only checks what they promise: no crash, no read
 * beyond the inputs (ASan), a status of 0 or 2, a message whenever the status
 * is 2, and no change to the caller's argv.
 *
 * Input layout: byte 0 picks the subcommand; the rest is split on NUL or
 * newline into argv[1..] (at most 64 words); the same bytes, as text, are
 * also given to the lengths parser.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_cli.h"

#define XATTN_FUZZ_MAX_ARGS 64

static void xattn__fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_cli: oracle broken: %s\n", what);
    abort(); /* a fuzz target reports a broken oracle by crashing */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const cmds[] = {"devices", "run",    "bench", "check",
                                       "compare", "advise", "nope"};
    if (size == 0)
        return 0;
    char *text = malloc(size); /* data[1..] plus a terminating NUL */
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';

    /* argv[1..]: words of text, split on NUL or newline. */
    char *copy = malloc(size);
    char *argv[XATTN_FUZZ_MAX_ARGS + 2];
    char *saved[XATTN_FUZZ_MAX_ARGS + 2];
    if (!copy) {
        free(text);
        return 0;
    }
    memcpy(copy, data + 1, size - 1);
    copy[size - 1] = '\0';
    int argc = 0;
    argv[argc++] = (char *)cmds[data[0] % (sizeof cmds / sizeof cmds[0])];
    size_t i = 0;
    while (i < size - 1 && argc <= XATTN_FUZZ_MAX_ARGS) {
        argv[argc++] = copy + i;
        while (i < size - 1 && copy[i] != '\0' && copy[i] != '\n')
            i++;
        if (i < size - 1)
            copy[i++] = '\0';
    }
    argv[argc] = NULL;
    memcpy(saved, argv, sizeof(char *) * (size_t)(argc + 1));

    xtool_cli_opts opts;
    char err[512];
    err[0] = '\0';
    int rc = xtool_cli_parse(argc, argv, &opts, err, sizeof err);
    if (rc != 0 && rc != 2)
        xattn__fuzz_fail("xtool_cli_parse returned neither 0 nor 2");
    if (rc == 2 && err[0] == '\0')
        xattn__fuzz_fail("xtool_cli_parse failed without a message");
    if (memcmp(saved, argv, sizeof(char *) * (size_t)(argc + 1)) != 0)
        xattn__fuzz_fail("xtool_cli_parse permuted the caller's argv");

    int32_t lq[256], lk[256];
    int n = -1;
    err[0] = '\0';
    rc = xtool_cli_parse_lengths(text, lq, lk, 256, &n, err, sizeof err);
    if (rc != 0 && rc != 2)
        xattn__fuzz_fail("xtool_cli_parse_lengths returned neither 0 nor 2");
    if (rc == 2 && err[0] == '\0')
        xattn__fuzz_fail("xtool_cli_parse_lengths failed without a message");
    if (rc == 0 && (n < 0 || n > 256))
        xattn__fuzz_fail("xtool_cli_parse_lengths gave a count outside [0, cap]");
    for (int k = 0; rc == 0 && k < n; k++)
        if (lk[k] < 0 || lq[k] < -1)
            xattn__fuzz_fail("xtool_cli_parse_lengths accepted a negative length");

    free(copy);
    free(text);
    return 0;
}
