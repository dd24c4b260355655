/*
 * libFuzzer target over the readers of the on-disk caches' files: the
 * ceilings-file parser (xattn__ceil_parse) and the program-cache entry parser
 * (xattn__prog_entry_parse), which take the file's bytes from memory
 * (backends/xattn_file.h). Both run on every input.
 *
 * Input layout: byte 0 is the key's length k, bytes 1..k the key the reader
 * expects (cut at a NUL), the rest the file, copied into a buffer of exactly
 * its size so that AddressSanitizer sees any read past its end.
 *
 * Oracles (a broken one aborts):
 *   ceilings  an accepted file has finite figures, FMA f32, read and copy > 0
 *             and the others >= 0; writing them back (xattn__ceil_format) and
 *             parsing that gives the same figures, bit for bit;
 *   program   an accepted entry's binary lies inside the file and is not
 *             empty, and the entry rebuilt from (key, binary) by the writer's
 *             own header function is the file, byte for byte (nothing the
 *             writer would not write is accepted); a refusal gives a reason.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_file.h"

static void xattn__fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_cache: oracle broken: %s\n", what);
    abort(); /* a fuzz target reports a broken oracle by crashing */
}

static int xattn__same_bits(double a, double b)
{
    return !memcmp(&a, &b, sizeof a);
}

static void xattn__fuzz_ceilings(const char *file, size_t n, const char *key)
{
    xattn_ceilings c;
    if (!xattn__ceil_parse(file, n, key, &c))
        return;
    const double all[7] = {c.fma_f32_gflops, c.fma_f16_gflops, c.fma_bf16_gflops, c.read_gbps,
                           c.copy_gbps,      c.mma_f16_gflops, c.mma_bf16_gflops};
    for (int i = 0; i < 7; i++)
        if (!isfinite(all[i]) || all[i] < 0)
            xattn__fuzz_fail("ceilings: a figure that is not finite or is negative accepted");
    if (!(c.fma_f32_gflops > 0 && c.read_gbps > 0 && c.copy_gbps > 0))
        xattn__fuzz_fail("ceilings: a zero FMA, read or copy figure accepted");
    if (c.from_cache || c.cache_path[0])
        xattn__fuzz_fail("ceilings: the parser set from_cache or cache_path");
    char text[4096];
    size_t len = xattn__ceil_format(text, sizeof text, key, &c);
    xattn_ceilings back;
    if (!len || !xattn__ceil_parse(text, len, key, &back))
        xattn__fuzz_fail("ceilings: the formatted entry does not parse back");
    const double again[7] = {back.fma_f32_gflops, back.fma_f16_gflops, back.fma_bf16_gflops,
                             back.read_gbps,      back.copy_gbps,      back.mma_f16_gflops,
                             back.mma_bf16_gflops};
    for (int i = 0; i < 7; i++)
        if (!xattn__same_bits(all[i], again[i]))
            xattn__fuzz_fail("ceilings: a figure changed through format and parse");
}

static void xattn__fuzz_program(const unsigned char *file, size_t n, const char *key)
{
    size_t off = 0, len = 0;
    const char *reason = NULL;
    int rc = xattn__prog_entry_parse(file, n, key, &off, &len, &reason);
    if (rc != XATTN__FILE_OK) {
        if (rc != XATTN__FILE_SKIP || !reason || !reason[0])
            xattn__fuzz_fail("program: a refusal without a reason");
        return;
    }
    if (len == 0 || off > n || len > n - off)
        xattn__fuzz_fail("program: the binary is empty or outside the file");
    unsigned char head[XATTN__PROG_HEAD_MAX], tail[8];
    size_t hlen = xattn__prog_entry_head(head, tail, key, file + off, len);
    if (hlen != off || memcmp(head, file, hlen) != 0 || n - off - len != 8 ||
        memcmp(tail, file + off + len, 8) != 0)
        xattn__fuzz_fail("program: an entry the writer would not write was accepted");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t k = data[0];
    if (k > size - 1)
        k = size - 1;
    char key[256];
    memcpy(key, data + 1, k);
    key[k] = '\0';
    size_t n = size - 1 - k;
    unsigned char *file = malloc(n ? n : 1);
    if (!file)
        return 0;
    memcpy(file, data + 1 + k, n);
    xattn__fuzz_ceilings((const char *)file, n, key);
    xattn__fuzz_program(file, n, key);
    free(file);
    return 0;
}
