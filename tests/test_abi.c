/*
 * test_abi: the structs that grow keep their promise (include/xattn.h, "ABI").
 *
 * A caller built against an older header has smaller structs. This test plays
 * that caller: each struct is allocated at a truncated size (the bytes of an
 * older layout, exactly, on the heap) and passed to the `_sized` entry point
 * with that size. The library must fill the fields the caller has, write not
 * one byte past them (AddressSanitizer, in the asan preset, reports any), and
 * say in struct_size how many bytes it filled. A caller built against a newer
 * header (a larger struct) gets its extra bytes zeroed. A descriptor from an
 * older header gets the defaults for the fields it lacks; one from a newer
 * header is accepted only while its unknown fields stay zero. The plain
 * symbols keep the 0.1 layouts.
 *
 * The last line is "N passed, N failed, N skipped".
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn.h"
#include "xattn_test.h"

enum { B = 1, SQ = 5, SK = 9, H = 2, D = 8 };

typedef struct fixture {
    xattn_ctx *ctx;
    xattn_buffer *q, *k, *v, *o;
} fixture;

static void fill(float *x, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

static int fixture_init(fixture *f)
{
    memset(f, 0, sizeof *f);
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &f->ctx) != XATTN_STATUS_OK)
        return 0;
    float hq[B * SQ * H * D], hk[B * SK * H * D];
    fill(hq, sizeof hq / sizeof hq[0], 1);
    fill(hk, sizeof hk / sizeof hk[0], 2);
    return xattn_buffer_alloc(f->ctx, sizeof hq, &f->q) == XATTN_STATUS_OK &&
           xattn_buffer_alloc(f->ctx, sizeof hk, &f->k) == XATTN_STATUS_OK &&
           xattn_buffer_alloc(f->ctx, sizeof hk, &f->v) == XATTN_STATUS_OK &&
           xattn_buffer_alloc(f->ctx, sizeof hq, &f->o) == XATTN_STATUS_OK &&
           xattn_buffer_write(f->q, 0, hq, sizeof hq) == XATTN_STATUS_OK &&
           xattn_buffer_write(f->k, 0, hk, sizeof hk) == XATTN_STATUS_OK &&
           xattn_buffer_write(f->v, 0, hk, sizeof hk) == XATTN_STATUS_OK;
}

static void fixture_free(fixture *f)
{
    xattn_buffer_free(f->q);
    xattn_buffer_free(f->k);
    xattn_buffer_free(f->v);
    xattn_buffer_free(f->o);
    xattn_ctx_destroy(f->ctx);
}

static void set_tensors(const fixture *f, xattn_attn_desc *d)
{
    d->q = xattn_tensor_bshd(f->q, 0, XATTN_DTYPE_F32, B, SQ, H, D);
    d->k = xattn_tensor_bshd(f->k, 0, XATTN_DTYPE_F32, B, SK, H, D);
    d->v = xattn_tensor_bshd(f->v, 0, XATTN_DTYPE_F32, B, SK, H, D);
    d->o = xattn_tensor_bshd(f->o, 0, XATTN_DTYPE_F32, B, SQ, H, D);
}

static int read_o(const fixture *f, float *out)
{
    return xattn_buffer_read(f->o, 0, out, sizeof(float) * B * SQ * H * D) == XATTN_STATUS_OK;
}

/* A field of a struct that is only partly there (an older caller's): read
 * through its offset, never through the full type. */
#define FIELD(T, p, f, out) memcpy(&(out), (const unsigned char *)(p) + offsetof(T, f), sizeof(out))

/* An older caller's descriptor: struct_size and the four tensors. */
typedef struct old_desc {
    size_t struct_size;
    xattn_tensor q, k, v, o;
} old_desc;

static size_t struct_size_of(const void *p)
{
    size_t n;
    memcpy(&n, p, sizeof n);
    return n;
}

/* ---- descriptors: older, newer, too small --------------------------------- */

static void test_desc(fixture *f)
{
    float ref[B * SQ * H * D], got[B * SQ * H * D];
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    set_tensors(f, &d);
    EXPECT(d.struct_size == sizeof d, "struct_size %zu after init", d.struct_size);
    EXPECT(xattn_attention(f->ctx, &d, NULL) == XATTN_STATUS_OK, "full: %s", xattn_last_error());
    EXPECT(read_o(f, ref), "read O");

    /* An older caller: only struct_size and q, k, v, o (on the heap, so that
     * ASan sees a byte written past it). */
    old_desc *od = malloc(sizeof *od);
    if (!od) {
        EXPECT(0, "out of memory");
        return;
    }
    memset(od, 0xAB, sizeof *od);
    xattn_attn_desc_init_sized((xattn_attn_desc *)od, sizeof *od);
    EXPECT(od->struct_size == sizeof *od, "older descriptor: struct_size %zu, expected %zu",
           od->struct_size, sizeof *od);
    xattn_attn_desc tmp;
    xattn_attn_desc_init(&tmp);
    set_tensors(f, &tmp);
    od->q = tmp.q;
    od->k = tmp.k;
    od->v = tmp.v;
    od->o = tmp.o;
    xattn_status st = xattn_attention(f->ctx, (xattn_attn_desc *)od, NULL);
    EXPECT(st == XATTN_STATUS_OK, "older descriptor: %s", xattn_last_error());
    EXPECT(xattn_attention_check(f->ctx, (xattn_attn_desc *)od) == XATTN_STATUS_OK,
           "older descriptor, check: %s", xattn_last_error());
    if (st == XATTN_STATUS_OK && read_o(f, got))
        EXPECT(!memcmp(ref, got, sizeof ref), "older descriptor: output differs from the full "
                                              "descriptor's (defaults not applied)");
    /* One byte short of the smallest descriptor. */
    od->struct_size = sizeof *od - 1;
    st = xattn_attention(f->ctx, (xattn_attn_desc *)od, NULL);
    EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && strstr(xattn_last_error(), "desc.struct_size"),
           "too small a descriptor: %s: %s", xattn_status_name(st), xattn_last_error());
    free(od);

    /* A newer caller: 64 bytes more, left at zero, then one of them set. */
    const size_t new_size = sizeof(xattn_attn_desc) + 64;
    unsigned char *nd = malloc(new_size);
    if (!nd) {
        EXPECT(0, "out of memory");
        return;
    }
    memset(nd, 0xAB, new_size);
    xattn_attn_desc_init_sized((xattn_attn_desc *)nd, new_size);
    int zeros = 1;
    for (size_t i = sizeof(xattn_attn_desc); i < new_size; i++)
        zeros &= nd[i] == 0;
    EXPECT(zeros, "newer descriptor: bytes past the library's not zeroed by init");
    EXPECT(struct_size_of(nd) == sizeof(xattn_attn_desc),
           "newer descriptor: struct_size %zu, expected the library's %zu", struct_size_of(nd),
           sizeof(xattn_attn_desc));
    size_t declared = new_size; /* the newer caller's header says so */
    memcpy(nd, &declared, sizeof declared);
    set_tensors(f, (xattn_attn_desc *)nd);
    st = xattn_attention(f->ctx, (xattn_attn_desc *)nd, NULL);
    EXPECT(st == XATTN_STATUS_OK, "newer descriptor, unknown fields zero: %s", xattn_last_error());
    nd[new_size - 3] = 1;
    st = xattn_attention(f->ctx, (xattn_attn_desc *)nd, NULL);
    EXPECT(st == XATTN_STATUS_UNSUPPORTED && strstr(xattn_last_error(), "newer"),
           "newer descriptor, an unknown field set: %s: %s", xattn_status_name(st),
           xattn_last_error());
    EXPECT(xattn_attention_check(f->ctx, (xattn_attn_desc *)nd) == st,
           "check and run disagree on a newer descriptor");
    free(nd);
}

/* ---- structs the library fills ------------------------------------------- */

/* A heap block of exactly `size` bytes, poisoned, for an output struct. */
static unsigned char *out_block(size_t size)
{
    unsigned char *p = malloc(size);
    if (p)
        memset(p, 0xAB, size);
    return p;
}

static int zero_from(const unsigned char *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (p[i])
            return 0;
    return 1;
}

static void test_run_info(fixture *f)
{
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    set_tensors(f, &d);
    d.algo = XATTN_ALGO_FLASH;
    xattn_run_info full;
    EXPECT(xattn_attention(f->ctx, &d, &full) == XATTN_STATUS_OK, "%s", xattn_last_error());
    EXPECT(full.struct_size == sizeof full, "run info: struct_size %zu", full.struct_size);

    /* An older run info: up to phase_ms (before the appended fields). */
    const size_t old_size = offsetof(xattn_run_info, build_ms);
    unsigned char *old = out_block(old_size);
    if (old) {
        xattn_status st = xattn_attention_sized(f->ctx, &d, (xattn_run_info *)old, old_size);
        EXPECT(st == XATTN_STATUS_OK, "older run info: %s", xattn_last_error());
        EXPECT(struct_size_of(old) == old_size, "older run info: struct_size %zu, expected %zu",
               struct_size_of(old), old_size);
        xattn_algo chosen;
        int phases;
        char ph0[16];
        FIELD(xattn_run_info, old, algo_chosen, chosen);
        FIELD(xattn_run_info, old, num_phases, phases);
        FIELD(xattn_run_info, old, phase_names[0], ph0);
        EXPECT(chosen == XATTN_ALGO_FLASH && phases == full.num_phases &&
                   !strcmp(ph0, full.phase_names[0]),
               "older run info: fields differ (algo %d, phases %d)", (int)chosen, phases);
        free(old);
    }
    /* A newer run info: 64 bytes more, zeroed by the library. */
    const size_t new_size = sizeof(xattn_run_info) + 64;
    unsigned char *nw = out_block(new_size);
    if (nw) {
        EXPECT(xattn_attention_sized(f->ctx, &d, (xattn_run_info *)nw, new_size) == XATTN_STATUS_OK,
               "newer run info: %s", xattn_last_error());
        EXPECT(struct_size_of(nw) == sizeof(xattn_run_info) &&
                   zero_from(nw, sizeof(xattn_run_info), new_size),
               "newer run info: struct_size %zu, tail not zeroed", struct_size_of(nw));
        free(nw);
    }
    /* The plain symbol: the 0.1 layout, whose last field is matrix_units. */
    xattn_status (*plain)(xattn_ctx *, const xattn_attn_desc *, xattn_run_info *) = xattn_attention;
    xattn_run_info v1;
    memset(&v1, 0xAB, sizeof v1);
    EXPECT(plain(f->ctx, &d, &v1) == XATTN_STATUS_OK, "plain symbol: %s", xattn_last_error());
    EXPECT(v1.struct_size == offsetof(xattn_run_info, matrix_units) + sizeof(int) &&
               v1.matrix_units == full.matrix_units && !strcmp(v1.kernel, full.kernel),
           "plain symbol: struct_size %zu", v1.struct_size);
    /* Too small to hold struct_size: refused, nothing written. */
    unsigned char tiny[4] = {1, 2, 3, 4};
    xattn_status st = xattn_attention_sized(f->ctx, &d, (xattn_run_info *)(void *)tiny, 4);
    EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && tiny[0] == 1 && tiny[3] == 4,
           "a 4-byte run info: %s", xattn_status_name(st));
}

static void test_record(fixture *f)
{
    xattn_profiler_enable(f->ctx, 1);
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    set_tensors(f, &d);
    EXPECT(xattn_attention(f->ctx, &d, NULL) == XATTN_STATUS_OK, "%s", xattn_last_error());
    xattn_record full;
    EXPECT(xattn_profiler_get(f->ctx, 0, &full) == XATTN_STATUS_OK, "%s", xattn_last_error());
    const size_t old_size = offsetof(xattn_record, tile_q); /* before "appended" */
    unsigned char *old = out_block(old_size);
    if (old) {
        EXPECT(xattn_profiler_get_sized(f->ctx, 0, (xattn_record *)old, old_size) ==
                   XATTN_STATUS_OK,
               "older record: %s", xattn_last_error());
        uint64_t seq;
        double useful;
        int64_t sq;
        FIELD(xattn_record, old, seq, seq);
        FIELD(xattn_record, old, flops_useful, useful);
        FIELD(xattn_record, old, sq, sq);
        EXPECT(struct_size_of(old) == old_size && seq == full.seq && useful == full.flops_useful &&
                   sq == SQ,
               "older record: struct_size %zu, sq %lld", struct_size_of(old), (long long)sq);
        free(old);
    }
    const size_t new_size = sizeof(xattn_record) + 64;
    unsigned char *nw = out_block(new_size);
    if (nw) {
        EXPECT(xattn_profiler_get_sized(f->ctx, 0, (xattn_record *)nw, new_size) ==
                       XATTN_STATUS_OK &&
                   struct_size_of(nw) == sizeof(xattn_record) &&
                   zero_from(nw, sizeof(xattn_record), new_size),
               "newer record: struct_size %zu", struct_size_of(nw));
        free(nw);
    }
    xattn_profiler_enable(f->ctx, 0);
}

static void test_device_info(fixture *f)
{
    xattn_device_info full;
    EXPECT(xattn_ctx_device_info(f->ctx, &full) == XATTN_STATUS_OK, "%s", xattn_last_error());
    const size_t old_size = offsetof(xattn_device_info, compute_units);
    for (int via_registry = 0; via_registry < 2; via_registry++) {
        unsigned char *old = out_block(old_size);
        if (!old)
            continue;
        xattn_status st =
            via_registry ? xattn_device_get_info_sized(XATTN_BACKEND_CPU, 0,
                                                       (xattn_device_info *)old, old_size)
                         : xattn_ctx_device_info_sized(f->ctx, (xattn_device_info *)old, old_size);
        xattn_backend be;
        char name[256];
        FIELD(xattn_device_info, old, backend, be);
        FIELD(xattn_device_info, old, name, name);
        EXPECT(st == XATTN_STATUS_OK && struct_size_of(old) == old_size &&
                   be == XATTN_BACKEND_CPU && !strcmp(name, full.name),
               "older device info (%s): %s, struct_size %zu", via_registry ? "registry" : "ctx",
               xattn_status_name(st), struct_size_of(old));
        free(old);
    }
}

static void test_ceilings(fixture *f)
{
    /* Quick micro-benchmarks; the figures themselves are not looked at. */
    xattn_ceilings full;
    xattn_status st = xattn_ceilings_measure(f->ctx, 0, &full);
    EXPECT(st == XATTN_STATUS_OK, "measure: %s", xattn_last_error());
    if (st != XATTN_STATUS_OK)
        return;
    const size_t old_size = offsetof(xattn_ceilings, mma_f16_gflops);
    unsigned char *old = out_block(old_size);
    if (old) {
        st = xattn_ceilings_get_sized(f->ctx, (xattn_ceilings *)old, old_size);
        double fma;
        FIELD(xattn_ceilings, old, fma_f32_gflops, fma);
        EXPECT(st == XATTN_STATUS_OK && struct_size_of(old) == old_size &&
                   fma == full.fma_f32_gflops,
               "older ceilings (get): %s, struct_size %zu", xattn_status_name(st),
               struct_size_of(old));
        memset(old, 0xAB, old_size);
        st = xattn_ceilings_measure_sized(f->ctx, 0, (xattn_ceilings *)old, old_size);
        EXPECT(st == XATTN_STATUS_OK && struct_size_of(old) == old_size,
               "older ceilings (measure): %s", xattn_status_name(st));
        free(old);
    }
}

int main(void)
{
    /* Keep the ceilings' micro-benchmarks short and their cache out of $HOME. */
    setenv("XATTN_CEILINGS_QUICK", "1", 0);
    fixture f;
    if (!fixture_init(&f)) {
        printf("FAIL setup: %s\n0 passed, 1 failed, 0 skipped\n", xattn_last_error());
        return 1;
    }
    test_desc(&f);
    test_run_info(&f);
    test_record(&f);
    test_device_info(&f);
    test_ceilings(&f);
    fixture_free(&f);
    return xattn_test_summary();
}
