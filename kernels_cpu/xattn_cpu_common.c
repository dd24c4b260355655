/*
 * What the three CPU algorithms share: SIMD detection, the micro-kernel table
 * lookup, the masking / score-modification helpers and the flash tile loop
 * (used by FLASH for whole rows and by SPLITKV for one chunk of keys).
 */
#include "xattn_cpu_common.h"

#if XATTN__CPU_X86
#include <cpuid.h>
#endif

/* ---- SIMD detection --------------------------------------------------------- */

#if XATTN__CPU_X86
/* XCR0: which register states the OS saves on a context switch. A CPU can
 * have AVX-512 while the OS does not enable it, so cpuid alone is not enough. */
static uint64_t xattn__cpu_xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

xattn_cpu_simd xattn_cpu_simd_detect(void)
{
#if XATTN__CPU_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return XATTN_CPU_SIMD_PORTABLE;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx)
        return XATTN_CPU_SIMD_PORTABLE;
    uint64_t xcr0 = xattn__cpu_xgetbv0();
    if ((xcr0 & 0x6) != 0x6) /* XMM and YMM state */
        return XATTN_CPU_SIMD_PORTABLE;
    if (__get_cpuid_max(0, NULL) < 7)
        return XATTN_CPU_SIMD_PORTABLE;
    __cpuid_count(7, 0, a, b, c, d);
    int avx2 = (b >> 5) & 1;
    if (!(avx2 && fma && f16c))
        return XATTN_CPU_SIMD_PORTABLE;
    /* The AVX-512 path is compiled for F, DQ, BW and VL (every AVX-512 CPU but
     * Knights Landing/Mill, which then take the AVX2 path). */
    int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    if (f && dq && bw && vl && (xcr0 & 0xe6) == 0xe6) /* + opmask, ZMM hi256, hi16 ZMM */
        return XATTN_CPU_SIMD_AVX512;
    return XATTN_CPU_SIMD_AVX2;
#else
    return XATTN_CPU_SIMD_PORTABLE;
#endif
}

const char *xattn_cpu_simd_name(xattn_cpu_simd s)
{
    switch (s) {
    case XATTN_CPU_SIMD_PORTABLE: return "portable";
    case XATTN_CPU_SIMD_AVX2: return "avx2";
    case XATTN_CPU_SIMD_AVX512: return "avx512";
    default: return "?";
    }
}

const xattn__cpu_uk *xattn__cpu_uk_get(xattn_cpu_simd simd)
{
#if XATTN__CPU_X86
    if (simd == XATTN_CPU_SIMD_AVX512)
        return &xattn__cpu_uk_avx512;
    if (simd == XATTN_CPU_SIMD_AVX2)
        return &xattn__cpu_uk_avx2;
#endif
    (void)simd;
    return &xattn__cpu_uk_portable;
}

/* ---- tile size from the cache ------------------------------------------------ */

static _Atomic uint64_t xattn__cpu_l1d = 32u << 10;

void xattn__cpu_set_l1d_bytes(uint64_t bytes)
{
    if (bytes >= (4u << 10) && bytes <= (16u << 20)) /* ignore nonsense */
        xattn__cpu_l1d = bytes;
}

uint64_t xattn_cpu_l1d_bytes(void)
{
    return xattn__cpu_l1d;
}

int64_t xattn__cpu_fit_keys(int64_t keys, uint64_t bytes_per_key, uint64_t budget)
{
    while (keys > 16 && (uint64_t)keys * bytes_per_key > budget)
        keys /= 2;
    return keys;
}

int64_t xattn__cpu_bk(const xattn_problem *p)
{
    const uint64_t row = (uint64_t)xattn__cpu_round_up(p->Dv, XATTN__CPU_PAD) * 4u;
    return xattn__cpu_fit_keys(XATTN_CPU_BK, row, xattn__cpu_l1d / 4u * 3u);
}

/* ---- context, rows, masks ---------------------------------------------------- */

void xattn__cpu_ctx_init(xattn__cpu_ctx *cx, const xattn_cpu_args *a)
{
    const xattn_problem *p = a->p;
    cx->p = p;
    cx->a = a;
    cx->uk = xattn__cpu_uk_get(a->simd);
    /* The softcap has a vector form (uk->softcap); any other modifier of
     * p->mods goes key by key through xattn_sem_modify, and then the softcap
     * with it, to keep the semantics' order without a vector form of each. */
    cx->rmods = p->mods;
    cx->rmods.softcap = 0.0f;
    if (xattn_sem_mods_any(&cx->rmods))
        cx->rmods = p->mods;
    cx->vcap = cx->rmods.softcap > 0.0f ? 0.0f : p->mods.softcap;
    cx->mods = p->alibi != NULL || p->has_bias || xattn_sem_mods_any(&cx->rmods);
    /* s = (q . k) * scale with no partial sum in f32 larger than those of q . k
     * itself: a |scale| <= 1 multiplies q as it is loaded, where it can only
     * shrink them (and costs nothing more), a larger one the finished dot
     * product. Folded into q, a scale of 2e38 overflowed sums whose total
     * scale * (q . k) was 2e37 (docs/guarantees.md, section 7, "Range"). */
    const int fold = fabsf(p->scale) <= 1.0f;
    cx->qscale = fold ? p->scale : 1.0f;
    cx->post = fold ? 1.0f : p->scale;
    cx->Dvp = xattn__cpu_round_up(p->Dv, XATTN__CPU_PAD);
    cx->ldk = xattn__cpu_round_up(p->D, XATTN__CPU_PAD);
}

/*
 * The keys a row sees are one interval [lo, hi) (docs/semantics.md step 6;
 * xattn_sem_row_keys in the semantics header every backend shares). Every
 * algorithm works from it: NAIVE fills -inf outside it, FLASH skips tiles
 * outside the union of a query tile's intervals, SPLITKV additionally clips it
 * to its chunk.
 */
void xattn__cpu_row_init(const xattn__cpu_ctx *cx, xattn__cpu_row *rw, int64_t b, int64_t h,
                         int64_t i, int64_t kmin, int64_t kmax)
{
    const xattn_problem *p = cx->p;
    const xattn_sem_rule rule = xattn_problem_rule(p, b);
    int64_t lo, hi;
    xattn_sem_row_keys(&rule, i, &lo, &hi);
    lo = xattn__cpu_max(lo, kmin);
    hi = xattn__cpu_min(hi, kmax);
    if (hi < lo)
        hi = lo;
    rw->h = h;
    rw->i = i;
    rw->pos = xattn_sem_pos(&rule, i);
    rw->lo = lo;
    rw->hi = hi;
    rw->slope = p->alibi ? p->alibi[h] : 0.0f;
    rw->bias_idx = p->has_bias ? p->bias.off + b * p->bias.sb + h * p->bias.sh + i * p->bias.ss : 0;
}

void xattn__cpu_mod_row(const xattn__cpu_ctx *cx, const xattn__cpu_row *rw, float *s,
                        int64_t stride, int64_t j0, int64_t n)
{
    const xattn_problem *p = cx->p;
    int64_t a = xattn__cpu_min(xattn__cpu_max(rw->lo - j0, 0), n);
    int64_t e = xattn__cpu_min(xattn__cpu_max(rw->hi - j0, 0), n);
    if (e < a)
        e = a;
    /* The mask comes last and wins: a masked NaN score is just masked. */
    for (int64_t t = 0; t < a; t++)
        s[t * stride] = -INFINITY;
    for (int64_t t = e; t < n; t++)
        s[t * stride] = -INFINITY;
    if (!cx->mods)
        return;
    const float slope = rw->slope; /* 0 without ALiBi */
    const int bias = p->has_bias;
    const void *bbase = cx->a->bias;
    const int64_t bsd = p->bias.sd;
    const xattn_dtype bdt = p->bias.dtype;
    for (int64_t t = a; t < e; t++) {
        const int64_t j = j0 + t;
        const float bv = bias ? xattn__cpu_load1(bbase, rw->bias_idx + j * bsd, bdt) : 0.0f;
        s[t * stride] = xattn_sem_modify(&cx->rmods, s[t * stride], slope, rw->pos, j, bv);
    }
}

float xattn__cpu_score1(const xattn__cpu_ctx *cx, const xattn__cpu_row *rw, int64_t b, int64_t j)
{
    const xattn_problem *p = cx->p;
    float qv[XATTN__CPU_DMAX + XATTN__CPU_PAD], kv[XATTN__CPU_DMAX + XATTN__CPU_PAD];
    cx->uk->load(qv, cx->a->q, xattn__cpu_qrow(&p->q, p, b, rw->i, rw->h), p->q.sd, p->D,
                 p->q.dtype, cx->qscale);
    cx->uk->load(kv, cx->a->k, xattn__cpu_krow(&p->k, p, b, j, rw->h / p->group), p->k.sd, p->D,
                 p->k.dtype, xattn__cpu_kv_mul(cx, &p->k, rw->h / p->group));
    float s = 0.0f;
    for (int64_t d = 0; d < p->D; d++)
        s += qv[d] * kv[d];
    s *= cx->post;
    s = xattn_sem_softcap(s, cx->vcap);
    xattn__cpu_mod_row(cx, rw, &s, 1, j, 1);
    return s;
}

void xattn__cpu_add_negligible(float *acc, const float *v, int64_t n)
{
    for (int64_t d = 0; d < n; d++)
        acc[d] += isinf(v[d]) ? v[d] : 0.0f * v[d];
}

void xattn__cpu_write_empty_row(const xattn__cpu_ctx *cx, int64_t b, int64_t h, int64_t i)
{
    const xattn_problem *p = cx->p;
    int64_t idx = xattn__cpu_qrow(&p->o, p, b, i, h);
    for (int64_t d = 0; d < p->Dv; d++)
        xattn__cpu_store1(cx->a->o, idx + d * p->o.sd, p->o.dtype, 0.0f);
    if (p->has_lse)
        cx->a->lse[xattn__cpu_lse_idx(p, b, h, i)] = -INFINITY;
}

float xattn__cpu_kv_mul(const xattn__cpu_ctx *cx, const xattn_view *v, int64_t hk)
{
    const xattn_problem *p = cx->p;
    if (v == &p->k && p->has_k_scale)
        return cx->a->k_scale[p->k_scale.off + hk * p->k_scale.sh];
    if (v == &p->v && p->has_v_scale)
        return cx->a->v_scale[p->v_scale.off + hk * p->v_scale.sh];
    return 1.0f;
}

float xattn__cpu_sink(const xattn__cpu_ctx *cx, int64_t h)
{
    const xattn_problem *p = cx->p;
    return p->has_sinks ? cx->a->sinks[p->sinks.off + h * p->sinks.sh] : -INFINITY;
}

void xattn__cpu_write_row(const xattn__cpu_ctx *cx, int64_t b, int64_t h, int64_t i, float m,
                          float l, const float *acc)
{
    const xattn_problem *p = cx->p;
    const int seen = m != -INFINITY;
    const float c = p->has_sinks ? xattn_sem_sink_fold(&m, &l, xattn__cpu_sink(cx, h)) : 1.0f;
    if (!seen) { /* no key: O = 0, LSE = the sink (-inf without one) */
        xattn__cpu_write_empty_row(cx, b, h, i);
        if (p->has_lse)
            cx->a->lse[xattn__cpu_lse_idx(p, b, h, i)] = xattn_sem_lse(m, l);
        return;
    }
    /* NaN in m (a NaN score) makes l, and so every output, NaN. */
    cx->uk->store(cx->a->o, xattn__cpu_qrow(&p->o, p, b, i, h), p->o.sd, acc, p->Dv, p->o.dtype,
                  c / l);
    if (p->has_lse)
        cx->a->lse[xattn__cpu_lse_idx(p, b, h, i)] = m + logf(l);
}

/* ---- per-thread scratch ----------------------------------------------------- */

static uint64_t xattn__cpu_a64(uint64_t bytes)
{
    return (bytes + 63u) & ~(uint64_t)63u;
}

/* Section sizes in bytes, in the order xattn__cpu_scratch_map lays them out. */
#define XATTN__CPU_NSECT 13

static void xattn__cpu_scratch_sizes(const xattn_problem *p, int without,
                                     uint64_t sz[XATTN__CPU_NSECT])
{
    const uint64_t BQ = XATTN_CPU_BQ, BK = XATTN_CPU_BK;
    const uint64_t D = (uint64_t)xattn__cpu_round_up(p->D, XATTN__CPU_PAD);
    const uint64_t Dvp = (uint64_t)xattn__cpu_round_up(p->Dv, XATTN__CPU_PAD);
    const int kv = !(without & XATTN__CPU_SC_NO_KV), few = without & XATTN__CPU_SC_FEW;
    sz[0] = few ? 0 : xattn__cpu_a64(D * BQ * 4);  /* qt */
    sz[1] = kv ? xattn__cpu_a64(BK * D * 4) : 0;   /* kt */
    sz[2] = kv ? xattn__cpu_a64(BK * Dvp * 4) : 0; /* vt */
    sz[3] = xattn__cpu_a64(BK * BQ * 4);           /* st (rows BQ apart whatever R) */
    sz[4] = xattn__cpu_a64((few ? XATTN__CPU_FEW_ROWS : BQ) * Dvp * 4); /* acc */
    sz[5] = xattn__cpu_a64(BQ * 4);                                     /* m */
    sz[6] = xattn__cpu_a64(BQ * 4);                                     /* l */
    sz[7] = xattn__cpu_a64(BQ * 4);                                     /* alpha */
    sz[8] = xattn__cpu_a64((XATTN__CPU_DMAX + XATTN__CPU_PAD) * 4);     /* tmp */
    sz[9] = xattn__cpu_a64(BQ * sizeof(int));                           /* clo */
    sz[10] = xattn__cpu_a64(BQ * sizeof(int));                          /* chi */
    sz[11] = xattn__cpu_a64(BQ * sizeof(xattn__cpu_row));               /* rows */
    sz[12] = xattn__cpu_a64(XATTN__CPU_FEW_ROWS * D * 4);               /* qr */
}

uint64_t xattn__cpu_scratch_bytes_without(const xattn_problem *p, int without)
{
    uint64_t sz[XATTN__CPU_NSECT], total = 0;
    xattn__cpu_scratch_sizes(p, without, sz);
    for (int k = 0; k < XATTN__CPU_NSECT; k++)
        total += sz[k];
    return total;
}

uint64_t xattn__cpu_scratch_bytes(const xattn_problem *p)
{
    return xattn__cpu_scratch_bytes_without(p, 0);
}

void xattn__cpu_scratch_map_without(xattn__cpu_scratch *sc, void *base, const xattn_problem *p,
                                    int without)
{
    uint64_t sz[XATTN__CPU_NSECT];
    xattn__cpu_scratch_sizes(p, without, sz);
    char *c = base;
    void *ptr[XATTN__CPU_NSECT];
    for (int k = 0; k < XATTN__CPU_NSECT; k++) {
        ptr[k] = sz[k] ? c : NULL;
        c += sz[k];
    }
    sc->qt = ptr[0];
    sc->kt = ptr[1];
    sc->vt = ptr[2];
    sc->st = ptr[3];
    sc->acc = ptr[4];
    sc->m = ptr[5];
    sc->l = ptr[6];
    sc->alpha = ptr[7];
    sc->tmp = ptr[8];
    sc->clo = ptr[9];
    sc->chi = ptr[10];
    sc->rows = ptr[11];
    sc->qr = ptr[12];
    sc->work = NULL;
    sc->few_max = (without & XATTN__CPU_SC_FEW) ? XATTN__CPU_FEW_ROWS : XATTN__CPU_FEW_ROWS_TILED;
}

void xattn__cpu_scratch_map(xattn__cpu_scratch *sc, void *base, const xattn_problem *p)
{
    xattn__cpu_scratch_map_without(sc, base, p, 0);
}

/* Sets bytes to `v` in 1 MiB chunks across the threads (placed by `bind`). */
static void xattn__cpu_fill(void *ptr, uint64_t bytes, int num_threads, int v,
                            const xattn_cpu_bind *bind)
{
    const uint64_t chunk = 1u << 20;
    int64_t n = (int64_t)((bytes + chunk - 1) / chunk);
    (void)num_threads;
#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel num_threads(num_threads)
#endif
    {
        const int bound = xattn__cpu_bind_enter(bind);
#ifdef XATTN_HAVE_OPENMP
#pragma omp for schedule(static) nowait
#endif
        for (int64_t k = 0; k < n; k++) {
            uint64_t off = (uint64_t)k * chunk;
            uint64_t len = bytes - off < chunk ? bytes - off : chunk;
            memset((char *)ptr + off, v, (size_t)len);
        }
        xattn__cpu_bind_leave(bind, bound);
    }
}

void xattn__cpu_prefault(void *ptr, uint64_t bytes, int num_threads, const xattn_cpu_bind *bind)
{
    xattn__cpu_fill(ptr, bytes, num_threads, 0, bind);
}

void xattn__cpu_poison(void *ptr, uint64_t bytes, int num_threads)
{
    /* All-ones bytes are a NaN in f32 (and in f16/bf16). */
    xattn__cpu_fill(ptr, bytes, num_threads, 0xff, NULL);
}

/* ---- the flash tile loop ---------------------------------------------------- */

uint64_t xattn__cpu_pv_pairs(const int *clo, const int *chi, int nr, int block, int tail_alone)
{
    uint64_t n = 0;
    const int nb = tail_alone ? nr / block * block : nr;
    int r = 0;
    for (; r < nb; r += block) {
        int lo = INT32_MAX, hi = 0;
        const int e = r + block < nr ? r + block : nr;
        for (int k = r; k < e; k++)
            if (clo[k] < chi[k]) {
                lo = clo[k] < lo ? clo[k] : lo;
                hi = chi[k] > hi ? chi[k] : hi;
            }
        if (lo < hi)
            n += (uint64_t)(e - r) * (uint64_t)(hi - lo);
    }
    for (; r < nr; r++)
        if (clo[r] < chi[r])
            n += (uint64_t)(chi[r] - clo[r]);
    return n;
}

int xattn__cpu_load_rows(const xattn__cpu_uk *uk, float *tile, int64_t ld, const void *base,
                         int64_t idx0, int64_t rstride, int64_t n, int64_t zero_to, int64_t nc,
                         xattn_dtype dt, int check, float mul)
{
    if (xattn__cpu_is_fp8(dt)) {
        /* Every byte's value times the head's scale, once per tile (the
         * portable path of fp8; SIMD conversions are not written yet). */
        float lut[256];
        for (int x = 0; x < 256; x++)
            lut[x] = mul * xattn_sem_fp8_value((unsigned)x, dt == XATTN_DTYPE_FP8_E5M2);
        float bad = 0.0f; /* x*0: NaN iff an element is inf or NaN */
        for (int64_t c = 0; c < nc; c++) {
            const uint8_t *s = (const uint8_t *)base + idx0 + c * rstride;
            float *row = tile + c * ld;
            for (int64_t d = 0; d < n; d++) {
                row[d] = lut[s[d]];
                bad += row[d] * 0.0f;
            }
            for (int64_t d = n; d < zero_to; d++)
                row[d] = 0.0f;
        }
        return check && bad != bad;
    }
    if (dt == XATTN_DTYPE_Q8_0) {
        /* Each block's f16 d once, times its int8 (exact in f32); the inner
         * loop is plain C that the compiler vectorizes. Rows start on a block
         * (the layout rules), but a piece of a row need not (k < 32 then). */
        const int64_t QB = XATTN_SEM_Q8_0_BLOCK;
        float bad = 0.0f; /* x*0: NaN iff an element is inf or NaN */
        for (int64_t c = 0; c < nc; c++) {
            float *row = tile + c * ld;
            for (int64_t t = 0, k; t < n; t += k) {
                const int64_t e = idx0 + c * rstride + t, i0 = e % QB;
                const uint8_t *s = (const uint8_t *)base + xattn_sem_q8_0_d_byte(e);
                const float d = xattn__cpu_f16_to_f32((uint16_t)(s[0] | (s[1] << 8)));
                const int8_t *qs = (const int8_t *)(s + 2) + i0;
                k = xattn__cpu_min(QB - i0, n - t);
                for (int64_t i = 0; i < k; i++)
                    row[t + i] = d * (float)qs[i];
                bad += d * 0.0f;
            }
            for (int64_t z = n; z < zero_to; z++)
                row[z] = 0.0f;
        }
        return check && bad != bad;
    }
    if (uk->load_rows)
        return uk->load_rows(tile, ld, base, idx0, rstride, n, zero_to, nc, dt, check);
    int bad = 0;
    for (int64_t c = 0; c < nc; c++) {
        float *row = tile + c * ld;
        uk->load(row, base, idx0 + c * rstride, 1, n, dt, 1.0f);
        for (int64_t d = n; d < zero_to; d++)
            row[d] = 0.0f;
        if (check && !bad)
            bad = uk->nonfinite(row, n);
    }
    return bad;
}

/* K (or V) rows ja .. ja+nc-1 of (b, hk) into a tile with row pitch ld: n
 * converted elements per row, zeros from n to zero_to. With `check`, returns
 * 1 when the converted rows hold an inf or NaN. A paged cache's tile goes by
 * the runs of keys within one page (one run when the tile lies in a page). */
static int xattn__cpu_load_tile(const xattn__cpu_ctx *cx, const xattn_view *v, const void *base,
                                float *tile, int64_t ld, int64_t n, int64_t zero_to, int64_t b,
                                int64_t hk, int64_t ja, int64_t nc, int check)
{
    const xattn_problem *p = cx->p;
    if (v->sd == 1) {
        int bad = 0;
        for (int64_t c = 0, run; c < nc; c += run) {
            run = xattn__cpu_krun(p, v, b, ja + c, nc - c);
            bad |= xattn__cpu_load_rows(cx->uk, tile + c * ld, ld, base,
                                        xattn__cpu_krow(v, p, b, ja + c, hk), v->ss, n, zero_to,
                                        run, v->dtype, check, xattn__cpu_kv_mul(cx, v, hk));
        }
        return bad;
    }
    for (int64_t c = 0; c < nc; c++) {
        float *row = tile + c * ld;
        cx->uk->load(row, base, xattn__cpu_krow(v, p, b, ja + c, hk), v->sd, n, v->dtype,
                     xattn__cpu_kv_mul(cx, v, hk));
        for (int64_t d = n; d < zero_to; d++)
            row[d] = 0.0f;
    }
    return check && cx->uk->nonfinite(tile, nc * ld);
}

void xattn__cpu_token_rows(const xattn_problem *p, const xattn_view *v, int64_t b, int64_t j,
                           int64_t n, int64_t *rows)
{
    for (int64_t c = 0, run; c < n; c += run) {
        run = xattn__cpu_krun(p, v, b, j + c, n - c);
        const int64_t r0 = xattn_problem_kv_token(p, v, b, j + c);
        for (int64_t t = 0; t < run; t++)
            rows[c + t] = r0 + t * v->ss;
    }
}

void xattn__cpu_prefetch_rows(const xattn_problem *p, const xattn_view *v, const void *base,
                              int64_t n, int64_t b, int64_t hk, int64_t ja, int64_t nc)
{
    if (v->sd != 1)
        return; /* strided rows: not worth guessing */
    /* By runs of keys within one page (one run without pages). */
    const xattn_dtype dt = v->dtype;
    const int64_t rb = xattn__cpu_start_byte(dt, n), sb = xattn__cpu_start_byte(dt, v->ss);
    for (int64_t c = 0, run; c < nc; c += run) {
        run = xattn__cpu_krun(p, v, b, ja + c, nc - c);
        const char *row =
            (const char *)base + xattn__cpu_start_byte(dt, xattn__cpu_krow(v, p, b, ja + c, hk));
        for (int64_t r = 0; r < run; r++, row += sb)
            for (int64_t o = 0; o < rb; o += 64)
                __builtin_prefetch(row + o, 0, 2);
    }
}

int xattn__cpu_pack_tile(const xattn__cpu_ctx *cx, int64_t b, int64_t hk, int64_t t, float *kt,
                         float *vt)
{
    const xattn_problem *p = cx->p;
    const int64_t BK = xattn__cpu_bk(p), ja = t * BK;
    const int64_t nc = xattn__cpu_min(BK, (int64_t)p->len_k[b] - ja);
    xattn__cpu_load_tile(cx, &p->k, cx->a->k, kt, cx->ldk, p->D, cx->ldk, b, hk, ja, nc, 0);
    const int bad =
        xattn__cpu_load_tile(cx, &p->v, cx->a->v, vt, cx->Dvp, p->Dv, cx->Dvp, b, hk, ja, nc, 1);
    memset(kt + nc * cx->ldk, 0, (size_t)((BK - nc) * cx->ldk) * sizeof(float));
    memset(vt + nc * cx->Dvp, 0, (size_t)((BK - nc) * cx->Dvp) * sizeof(float));
    return bad;
}

void xattn__cpu_attend_begin(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t b,
                             int64_t h0, int nh, int64_t i0, int np, int64_t kmin, int64_t kmax)
{
    const xattn_problem *p = cx->p;
    const xattn__cpu_uk *uk = cx->uk;
    const int BQ = XATTN_CPU_BQ;
    const int64_t D = p->D, Dvp = cx->Dvp, ldk = cx->ldk;
    const int R = nh * np;
    sc->R = R;
    sc->hk = h0 / p->group;
    sc->omul = 1.0f;

    /* Rows, their valid keys, and the union that decides which tiles run
     * (the masks depend on the position only, so the heads share intervals). */
    int64_t ulo = INT64_MAX, uhi = INT64_MIN;
    for (int r = 0; r < R; r++) {
        xattn__cpu_row *rw = &sc->rows[r];
        xattn__cpu_row_init(cx, rw, b, h0 + r / np, i0 + r % np, kmin, kmax);
        if (rw->lo < rw->hi) {
            ulo = xattn__cpu_min(ulo, rw->lo);
            uhi = xattn__cpu_max(uhi, rw->hi);
        }
    }
    for (int r = 0; r < BQ; r++) {
        sc->m[r] = -INFINITY;
        sc->l[r] = 0.0f;
    }
    memset(sc->acc, 0, (size_t)R * (size_t)Dvp * sizeof(float));
    if (ulo >= uhi)
        ulo = uhi = 0; /* every row fully masked in this key range */
    sc->ulo = ulo;
    sc->uhi = uhi;
    sc->few = R <= sc->few_max && uk->qk_rows;
    if (ulo >= uhi)
        return;

    /* The Q tile times cx->qscale (the scale where |scale| <= 1). A few rows stay
     * row-major for uk->qk_rows (zero past D and up to XATTN__CPU_FEW_ROWS
     * rows); otherwise transposed for the outer product, lanes R..BQ-1 zero so
     * that the vector kernels can run whole vectors. */
    if (sc->few) {
        memset(sc->qr, 0, (size_t)(XATTN__CPU_FEW_ROWS * ldk) * sizeof(float));
        for (int r = 0; r < R; r++) {
            const xattn__cpu_row *rw = &sc->rows[r];
            uk->load(sc->qr + r * ldk, cx->a->q, xattn__cpu_qrow(&p->q, p, b, rw->i, rw->h),
                     p->q.sd, D, p->q.dtype, cx->qscale);
        }
    } else {
        /* Every row asked for first: the rows of one head are a few hundred
         * bytes Hq*D elements apart (BSHD), which no hardware prefetcher
         * follows, and loaded one after the other each waited on memory. */
        const int64_t es = xattn__cpu_esize(p->q.dtype);
        if (p->q.sd == 1)
            for (int r = 0; r < R; r++) {
                const char *row = (const char *)cx->a->q +
                                  xattn__cpu_qrow(&p->q, p, b, sc->rows[r].i, sc->rows[r].h) * es;
                for (int64_t o = 0; o < D * es; o += 64)
                    __builtin_prefetch(row + o, 0, 3);
            }
        for (int r = 0; r < R; r++) {
            const xattn__cpu_row *rw = &sc->rows[r];
            uk->load(sc->tmp, cx->a->q, xattn__cpu_qrow(&p->q, p, b, rw->i, rw->h), p->q.sd, D,
                     p->q.dtype, cx->qscale);
            for (int64_t d = 0; d < D; d++)
                sc->qt[d * BQ + r] = sc->tmp[d];
        }
        for (int64_t d = 0; d < D; d++)
            for (int r = R; r < BQ; r++)
                sc->qt[d * BQ + r] = 0.0f;
    }
}

int xattn__cpu_tile_ranges(xattn__cpu_scratch *sc, int64_t ja, int64_t jb, int *full)
{
    int any = 0, all = 1;
    for (int r = 0; r < sc->R; r++) {
        const xattn__cpu_row *rw = &sc->rows[r];
        int64_t lo = xattn__cpu_max(rw->lo, ja), hi = xattn__cpu_min(rw->hi, jb);
        if (hi <= lo)
            lo = hi = ja;
        sc->clo[r] = (int)(lo - ja);
        sc->chi[r] = (int)(hi - ja);
        any |= hi > lo;
        all &= lo == ja && hi == jb;
    }
    *full = all;
    return any;
}

void xattn__cpu_tile_softmax(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t ja, int nc,
                             int full)
{
    const xattn__cpu_uk *uk = cx->uk;
    const int BQ = XATTN_CPU_BQ, R = sc->R;
    /* The rest of a |scale| > 1 (cx->post), then score modifications and
     * masks; nothing to do for a tile that lies inside every row's interval
     * when there are no modifications. The softcap runs on whole vectors of
     * rows (lanes past R are junk, unused). */
    if (cx->post != 1.0f)
        for (int c = 0; c < nc; c++)
            uk->scale(sc->st + c * BQ, R, cx->post);
    if (cx->vcap > 0.0f)
        for (int c = 0; c < nc; c++)
            uk->softcap(sc->st + c * BQ, xattn__cpu_round_up(R, XATTN__CPU_PAD), cx->vcap);
    if (cx->mods || !full)
        for (int r = 0; r < R; r++)
            xattn__cpu_mod_row(cx, &sc->rows[r], sc->st + r, BQ, ja, nc);

    /* Online softmax: new max, p = exp(s - m), rescale of what was summed. */
    uk->softmax_tile(sc->st, nc, R, sc->m, sc->l, sc->alpha);
    for (int r = 0; r < R; r++)
        if (sc->alpha[r] != 1.0f)
            uk->scale(sc->acc + r * cx->Dvp, cx->Dvp, sc->alpha[r]);
}

void xattn__cpu_tile_pv_careful(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t b,
                                int64_t ja, const float *vt, int64_t vpitch)
{
    const xattn__cpu_uk *uk = cx->uk;
    const int BQ = XATTN_CPU_BQ;
    const int64_t Dvp = cx->Dvp;
    /* The keys of weight 0 recomputed here (xattn__cpu_score1, rare) are
     * not counted. */
    uint64_t pairs = 0;
    for (int r = 0; r < sc->R; r++)
        for (int c = sc->clo[r]; c < sc->chi[r]; c++) {
            const float *vr = vt + c * vpitch;
            float *ar = sc->acc + r * Dvp;
            if (sc->st[c * BQ + r] != 0.0f) {
                uk->axpy_rows(ar, 0, 1, &sc->st[c * BQ + r], vr, (int)Dvp);
                pairs++;
            } else if (uk->nonfinite(vr, Dvp) &&
                       xattn__cpu_score1(cx, &sc->rows[r], b, ja + c) != -INFINITY)
                xattn__cpu_add_negligible(ar, vr, cx->p->Dv);
        }
    sc->work->pv_terms += pairs * (uint64_t)cx->p->Dv;
}

int xattn__cpu_attend_tile(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t b, int64_t t0,
                           int64_t t1, const float *kt, int64_t kpitch, const float *vt,
                           int64_t vpitch, int vbad)
{
    const xattn_problem *p = cx->p;
    const xattn__cpu_uk *uk = cx->uk;
    const int BK = (int)xattn__cpu_bk(p);
    const int64_t D = p->D, Dv = p->Dv, Dvp = cx->Dvp, ldk = cx->ldk;
    const int64_t hk = sc->hk;
    const int R = sc->R;
    const int64_t ja = xattn__cpu_max(t0, sc->ulo);
    const int64_t jb = xattn__cpu_min(xattn__cpu_min(t1, t0 + BK), sc->uhi);
    if (jb <= ja)
        return 0;
    const int nc = (int)(jb - ja);
    /* Rows' ranges inside the tile (local key numbers); skip the tile when it
     * meets no row's interval (the union may have holes). */
    int full;
    if (!xattn__cpu_tile_ranges(sc, ja, jb, &full))
        return 0;
    /* Executed work: every real row against every key of the tile (the
     * micro-kernels' padded rows and keys aside), K/V rows where they are
     * loaded here; the P.V's pairs below (every row over every key, whatever
     * the blocking, when each row's keys cover the tile). */
    xattn_cpu_work *w = sc->work;
    const uint64_t tile_pairs = (uint64_t)R * (uint64_t)nc;
    w->qk_pairs += tile_pairs;
    if (!kt)
        w->kv_rows += (uint64_t)nc;

    /* S = Q K^T for the tile. The micro-kernels' key blocks run to a multiple
     * of 16 keys: converted here, rows past nc are zero; given by the caller,
     * they are readable (next keys or zeros) and their scores are unused. */
    if (!kt) {
        const int64_t ncz = xattn__cpu_min(xattn__cpu_round_up(nc, XATTN__CPU_PAD), BK);
        xattn__cpu_load_tile(cx, &p->k, cx->a->k, sc->kt, ldk, D, ldk, b, hk, ja, nc, 0);
        memset(sc->kt + nc * ldk, 0, (size_t)((ncz - nc) * ldk) * sizeof(float));
        kt = sc->kt;
        kpitch = ldk;
    }
    if (sc->few)
        uk->qk_rows(sc->st, sc->qr, (int)ldk, R, kt, (int)kpitch, (int)ldk, nc);
    else
        uk->qk_tile(sc->st, sc->qt, kt, (int)kpitch, (int)D, nc, R);

    xattn__cpu_tile_softmax(cx, sc, ja, nc, full);

    /* O += P V. A V tile holding inf/NaN goes through the careful path that
     * visits only each row's own keys and skips masked ones (score -inf), so
     * that a masked key cannot leak NaN into a row (the reference skips masked
     * keys), while an unmasked key of weight 0 (underflow) still brings its inf
     * and NaN, as the reference does. */
    if (!vt) {
        vbad = xattn__cpu_load_tile(cx, &p->v, cx->a->v, sc->vt, Dvp, Dv, Dvp, b, hk, ja, nc, 1);
        vt = sc->vt;
        vpitch = Dvp;
    }
    if (!vbad) {
        uk->pv_tile(sc->acc, (int)Dvp, sc->st, vt, (int)vpitch, (int)Dv, R, sc->clo, sc->chi);
        w->pv_terms +=
            (full ? tile_pairs
                  : xattn__cpu_pv_pairs(sc->clo, sc->chi, R, uk->pv_block, !uk->pv_tail_block)) *
            (uint64_t)Dv;
    } else {
        xattn__cpu_tile_pv_careful(cx, sc, b, ja, vt, vpitch);
    }
    return 1;
}

void xattn__cpu_attend(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t b, int64_t h0,
                       int nh, int64_t i0, int np, int64_t kmin, int64_t kmax,
                       const xattn__cpu_kvpack *kv)
{
    const xattn_problem *p = cx->p;
    const int64_t BK = xattn__cpu_bk(p), D = p->D, Dv = p->Dv, Dvp = cx->Dvp, ldk = cx->ldk;
    xattn__cpu_attend_begin(cx, sc, b, h0, nh, i0, np, kmin, kmax);
    const int64_t ulo = sc->ulo, uhi = sc->uhi, hk = sc->hk;
    for (int64_t t0 = ulo / BK * BK; t0 < uhi; t0 += BK) {
        const int64_t ja = xattn__cpu_max(t0, ulo);
        const float *kt = NULL, *vt = NULL;
        int vbad = 0;
        if (kv) { /* packed: tile (b, hk, t0 / BK), from key ja */
            const int64_t tile =
                kv->tile0[b] * p->Hkv + hk * (kv->tile0[b + 1] - kv->tile0[b]) + t0 / BK;
            kt = kv->k + (tile * BK + (ja - t0)) * ldk;
            vt = kv->v + (tile * BK + (ja - t0)) * Dvp;
            vbad = kv->vbad[tile];
        } else if (t0 + BK < uhi) {
            /* The next tile's K and V on their way while this one computes
             * (packed panels are contiguous: the hardware prefetchers follow
             * them). */
            const int64_t na = t0 + BK, nb = xattn__cpu_min(t0 + 2 * BK, uhi);
            xattn__cpu_prefetch_rows(p, &p->k, cx->a->k, D, b, hk, na, nb - na);
            xattn__cpu_prefetch_rows(p, &p->v, cx->a->v, Dv, b, hk, na, nb - na);
        }
        /* A tile read from the packed panels counts as a load of its rows. */
        if (xattn__cpu_attend_tile(cx, sc, b, t0, t0 + BK, kt, ldk, vt, Dvp, vbad) && kv)
            sc->work->kv_rows += (uint64_t)(xattn__cpu_min(t0 + BK, uhi) - ja);
    }
}
