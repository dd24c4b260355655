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

/* ---- context, rows, masks ---------------------------------------------------- */

void xattn__cpu_ctx_init(xattn__cpu_ctx *cx, const xattn_cpu_args *a)
{
    const xattn_problem *p = a->p;
    cx->p = p;
    cx->a = a;
    cx->uk = xattn__cpu_uk_get(a->simd);
    cx->mods = p->alibi != NULL || p->has_bias;
    cx->Dvp = xattn__cpu_round_up(p->Dv, XATTN__CPU_PAD);
    cx->ldk = p->D;
}

/*
 * The masks of DESIGN.md step 6 (j >= Lk; causal j > p; window j < p - left,
 * j > p + right) each cut the key axis at one point, so the valid keys of a
 * row are one interval [lo, hi). Every algorithm works from it: NAIVE fills
 * -inf outside it, FLASH skips tiles outside the union of a query tile's
 * intervals, SPLITKV additionally clips it to its chunk.
 */
void xattn__cpu_row_init(const xattn__cpu_ctx *cx, xattn__cpu_row *rw, int64_t b, int64_t h,
                         int64_t i, int64_t kmin, int64_t kmax)
{
    const xattn_problem *p = cx->p;
    int64_t pos = xattn_problem_qpos(p, b, i);
    int64_t lo = 0, hi = p->len_k[b];
    /* Comparisons are written so that a huge window cannot overflow. */
    if (p->causal && pos < hi - 1)
        hi = pos + 1;
    if (p->window_left >= 0 && pos - lo > p->window_left)
        lo = pos - p->window_left;
    if (p->window_right >= 0 && hi - 1 - pos > p->window_right)
        hi = pos + 1 + p->window_right;
    lo = xattn__cpu_max(lo, kmin);
    hi = xattn__cpu_min(hi, kmax);
    if (hi < lo)
        hi = lo;
    rw->h = h;
    rw->i = i;
    rw->pos = pos;
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
    const float slope = rw->slope;
    const int alibi = p->alibi != NULL, bias = p->has_bias;
    const void *bbase = cx->a->bias;
    const int64_t bsd = p->bias.sd;
    const xattn_dtype bdt = p->bias.dtype;
    for (int64_t t = a; t < e; t++) {
        int64_t j = j0 + t;
        float v = s[t * stride];
        if (alibi) {
            int64_t dist = rw->pos > j ? rw->pos - j : j - rw->pos;
            v += -slope * (float)dist;
        }
        if (bias)
            v += xattn__cpu_load1(bbase, rw->bias_idx + j * bsd, bdt);
        s[t * stride] = v;
    }
}

float xattn__cpu_score1(const xattn__cpu_ctx *cx, const xattn__cpu_row *rw, int64_t b, int64_t j)
{
    const xattn_problem *p = cx->p;
    float qv[XATTN__CPU_DMAX + XATTN__CPU_PAD], kv[XATTN__CPU_DMAX + XATTN__CPU_PAD];
    cx->uk->load(qv, cx->a->q, xattn__cpu_qrow(&p->q, p, b, rw->i, rw->h), p->q.sd, p->D,
                 p->q.dtype, p->scale);
    cx->uk->load(kv, cx->a->k, xattn__cpu_krow(&p->k, p, b, j, rw->h / p->group), p->k.sd, p->D,
                 p->k.dtype, 1.0f);
    float s = 0.0f;
    for (int64_t d = 0; d < p->D; d++)
        s += qv[d] * kv[d];
    if (p->softcap > 0.0f)
        s = p->softcap * tanhf(s / p->softcap);
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

/* ---- per-thread scratch ----------------------------------------------------- */

static uint64_t xattn__cpu_a64(uint64_t bytes) { return (bytes + 63u) & ~(uint64_t)63u; }

/* Section sizes in bytes, in the order xattn__cpu_scratch_map lays them out. */
static void xattn__cpu_scratch_sizes(const xattn_problem *p, uint64_t sz[12])
{
    const uint64_t BQ = XATTN_CPU_BQ, BK = XATTN_CPU_BK;
    const uint64_t D = (uint64_t)p->D;
    const uint64_t Dvp = (uint64_t)xattn__cpu_round_up(p->Dv, XATTN__CPU_PAD);
    sz[0] = xattn__cpu_a64(D * BQ * 4);   /* qt */
    sz[1] = xattn__cpu_a64(BK * D * 4);   /* kt */
    sz[2] = xattn__cpu_a64(BK * Dvp * 4); /* vt */
    sz[3] = xattn__cpu_a64(BK * BQ * 4);  /* st */
    sz[4] = xattn__cpu_a64(BQ * Dvp * 4); /* acc */
    sz[5] = xattn__cpu_a64(BQ * 4);       /* m */
    sz[6] = xattn__cpu_a64(BQ * 4);       /* l */
    sz[7] = xattn__cpu_a64(BQ * 4);       /* alpha */
    sz[8] = xattn__cpu_a64((XATTN__CPU_DMAX + XATTN__CPU_PAD) * 4); /* tmp */
    sz[9] = xattn__cpu_a64(BQ * sizeof(int));                       /* clo */
    sz[10] = xattn__cpu_a64(BQ * sizeof(int));                      /* chi */
    sz[11] = xattn__cpu_a64(BQ * sizeof(xattn__cpu_row));           /* rows */
}

uint64_t xattn__cpu_scratch_bytes(const xattn_problem *p)
{
    uint64_t sz[12], total = 0;
    xattn__cpu_scratch_sizes(p, sz);
    for (int k = 0; k < 12; k++)
        total += sz[k];
    return total;
}

void xattn__cpu_scratch_map(xattn__cpu_scratch *sc, void *base, const xattn_problem *p)
{
    uint64_t sz[12];
    xattn__cpu_scratch_sizes(p, sz);
    char *c = base;
    void *ptr[12];
    for (int k = 0; k < 12; k++) {
        ptr[k] = c;
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
}

void xattn__cpu_poison(void *ptr, uint64_t bytes, int num_threads)
{
    /* All-ones bytes are a NaN in f32 (and in f16/bf16). */
    const uint64_t chunk = 1u << 20;
    int64_t n = (int64_t)((bytes + chunk - 1) / chunk);
    (void)num_threads;
#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel for num_threads(num_threads) schedule(static)
#endif
    for (int64_t k = 0; k < n; k++) {
        uint64_t off = (uint64_t)k * chunk;
        uint64_t len = bytes - off < chunk ? bytes - off : chunk;
        memset((char *)ptr + off, 0xff, (size_t)len);
    }
}

/* ---- the flash tile loop ---------------------------------------------------- */

/* K (or V) rows ja .. ja+nc-1 of (b, hk) into a tile with row pitch ld: n
 * converted elements per row, zeros from n to zero_to. */
static void xattn__cpu_load_tile(const xattn__cpu_ctx *cx, const xattn_view *v, const void *base,
                                 float *tile, int64_t ld, int64_t n, int64_t zero_to, int64_t b,
                                 int64_t hk, int64_t ja, int64_t nc)
{
    const xattn_problem *p = cx->p;
    for (int64_t c = 0; c < nc; c++) {
        float *row = tile + c * ld;
        cx->uk->load(row, base, xattn__cpu_krow(v, p, b, ja + c, hk), v->sd, n, v->dtype, 1.0f);
        for (int64_t d = n; d < zero_to; d++)
            row[d] = 0.0f;
    }
}

uint64_t xattn__cpu_attend(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t b,
                           int64_t h0, int nh, int64_t i0, int np, int64_t kmin, int64_t kmax)
{
    const xattn_problem *p = cx->p;
    const xattn__cpu_uk *uk = cx->uk;
    const int BQ = XATTN_CPU_BQ, BK = XATTN_CPU_BK;
    const int64_t D = p->D, Dv = p->Dv, Dvp = cx->Dvp, ldk = cx->ldk;
    const int64_t hk = h0 / p->group;
    const int R = nh * np;

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
        return 0; /* every row fully masked in this key range */

    /* Q tile, transposed, with the scale folded in (s = (scale*q) . k); lanes
     * R..BQ-1 are zero so that the vector kernels can run whole vectors. */
    for (int r = 0; r < R; r++) {
        const xattn__cpu_row *rw = &sc->rows[r];
        uk->load(sc->tmp, cx->a->q, xattn__cpu_qrow(&p->q, p, b, rw->i, rw->h), p->q.sd, D,
                 p->q.dtype, p->scale);
        for (int64_t d = 0; d < D; d++)
            sc->qt[d * BQ + r] = sc->tmp[d];
    }
    for (int64_t d = 0; d < D; d++)
        for (int r = R; r < BQ; r++)
            sc->qt[d * BQ + r] = 0.0f;

    uint64_t tiles = 0;
    for (int64_t t0 = ulo / BK * BK; t0 < uhi; t0 += BK) {
        const int64_t ja = xattn__cpu_max(t0, ulo), jb = xattn__cpu_min(t0 + BK, uhi);
        const int nc = (int)(jb - ja);
        /* Rows' ranges inside the tile (local key numbers); skip the tile when
         * it meets no row's interval (the union may have holes). */
        int any = 0, full = 1;
        for (int r = 0; r < R; r++) {
            const xattn__cpu_row *rw = &sc->rows[r];
            int64_t lo = xattn__cpu_max(rw->lo, ja), hi = xattn__cpu_min(rw->hi, jb);
            if (hi <= lo)
                lo = hi = ja;
            sc->clo[r] = (int)(lo - ja);
            sc->chi[r] = (int)(hi - ja);
            any |= hi > lo;
            full &= lo == ja && hi == jb;
        }
        if (!any)
            continue;
        tiles += (uint64_t)R;

        /* S = Q K^T for the tile; K rows beyond nc (up to a multiple of 16) are
         * zero so that the micro-kernel's key blocks need no tail. */
        const int64_t ncz = xattn__cpu_min(xattn__cpu_round_up(nc, XATTN__CPU_PAD), BK);
        xattn__cpu_load_tile(cx, &p->k, cx->a->k, sc->kt, ldk, D, D, b, hk, ja, nc);
        memset(sc->kt + nc * ldk, 0, (size_t)((ncz - nc) * ldk) * sizeof(float));
        uk->qk_tile(sc->st, sc->qt, sc->kt, (int)ldk, (int)D, nc, R);

        /* Score modifications and masks; nothing to do for a tile that lies
         * inside every row's interval when there are no modifications. The
         * softcap runs on whole vectors of rows (lanes past R are junk, unused). */
        if (p->softcap > 0.0f)
            for (int c = 0; c < nc; c++)
                uk->softcap(sc->st + c * BQ, xattn__cpu_round_up(R, XATTN__CPU_PAD), p->softcap);
        if (cx->mods || !full)
            for (int r = 0; r < R; r++)
                xattn__cpu_mod_row(cx, &sc->rows[r], sc->st + r, BQ, ja, nc);

        /* Online softmax: new max, p = exp(s - m), rescale of what was summed. */
        uk->softmax_tile(sc->st, nc, R, sc->m, sc->l, sc->alpha);
        for (int r = 0; r < R; r++)
            if (sc->alpha[r] != 1.0f)
                uk->scale(sc->acc + r * Dvp, Dvp, sc->alpha[r]);

        /* O += P V. A V tile holding inf/NaN goes through the careful path that
         * visits only each row's own keys and skips masked ones (score -inf),
         * so that a masked key cannot leak NaN into a row (the reference skips
         * masked keys), while an unmasked key of weight 0 (underflow) still
         * brings its inf and NaN, as the reference does. */
        xattn__cpu_load_tile(cx, &p->v, cx->a->v, sc->vt, Dvp, Dv, Dvp, b, hk, ja, nc);
        if (!uk->nonfinite(sc->vt, (int64_t)nc * Dvp)) {
            uk->pv_tile(sc->acc, (int)Dvp, sc->st, sc->vt, (int)Dvp, (int)Dv, R, sc->clo, sc->chi);
        } else {
            for (int r = 0; r < R; r++)
                for (int c = sc->clo[r]; c < sc->chi[r]; c++) {
                    const float *vr = sc->vt + c * Dvp;
                    float *ar = sc->acc + r * Dvp;
                    if (sc->st[c * BQ + r] != 0.0f)
                        uk->axpy_rows(ar, 0, 1, &sc->st[c * BQ + r], vr, (int)Dvp);
                    else if (uk->nonfinite(vr, Dvp) &&
                             xattn__cpu_score1(cx, &sc->rows[r], b, ja + c) != -INFINITY)
                        xattn__cpu_add_negligible(ar, vr, Dv);
                }
        }
    }
    return tiles;
}
