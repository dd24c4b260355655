/*
 * xattn OpenCL kernels, part 1 of 5: build configuration, storage formats,
 * the kernel arguments every kernel shares, and the score / mask /
 * online-softmax helpers used by NAIVE, FLASH and SPLITKV.
 *
 * OpenCL C 1.2 only. f16 and bf16 are storage formats: f16 goes through
 * vload_half / vstore_half_rte (core in 1.2, no cl_khr_fp16 needed), bf16
 * through ushort bit operations; all arithmetic is f32.
 *
 * The host (backends/xattn_opencl_program.c) concatenates the five sources
 * (common, naive, flash, splitkv, rows) into one program per configuration and builds
 * it with -D options. Tuning values are data: the defaults below are only for
 * reading the file alone; the host passes every one of them.
 *
 *   XATTN_QDT, XATTN_KDT     storage of q/o and of k/v: 0 f32, 1 f16, 2 bf16,
 *                            or -1: from the flags argument at run time
 *   XATTN_DMAX, XATTN_DVMAX  array sizes along D and Dv (>= the real D, Dv)
 *   XATTN_DFIX, XATTN_DVFIX  D and Dv fixed at build time, or 0 to take them
 *                            from the kernel arguments (the generic path)
 *   XATTN_BQ                 FLASH/SPLITKV: query rows per work-group, one
 *                            work-item per row (the work-group form)
 *   XATTN_ROWS               FLASH/SPLITKV: 0 the work-group form (GPUs);
 *                            R > 0 the row form for CPU devices, R rows a
 *                            work-item (xattn_cl_rows.cl)
 *   XATTN_BK                 FLASH/SPLITKV: keys per tile staged in local memory
 *   XATTN_NT                 NAIVE qk and pv: NT x NT work-item tiles
 *   XATTN_NAIVE_LOCAL        NAIVE qk and pv: 1 stage tiles in local memory,
 *                            0 read global memory directly (xattn_cl_naive.cl)
 *   XATTN_RWG                NAIVE softmax: work-items per row (a power of two)
 *   XATTN_CWG                SPLITKV combine: work-items along Dv
 *
 * Semantics (docs/semantics.md): s = (q.k) * scale; softcap;
 * ALiBi -slope*|p - j|; bias; masks set s = -inf; rows i >= Lq are padding
 * (O = 0, LSE = -inf); a fully masked row gives O = 0, LSE = -inf; a NaN score
 * makes its row NaN (the running max is sticky for NaN).
 *
 * Kernel shape: a kernel that calls barrier() never returns before its end.
 * A work-group with nothing to do (a padding row, rows past the sequence)
 * runs its loops zero times and every work-item still reaches every barrier;
 * the writes are what the row's flags guard. OpenCL allows the early return
 * when the whole work-group takes it, but CPU implementations that turn a
 * work-group into loops over its work-items must then decide which
 * "region" between barriers each work-item runs, and PoCL 3.x's work-item
 * loops get it wrong: they resolve the branch once, for work-item 0, and a
 * later get_local_id(0) == 0 test is then taken for every work-item; LLVM,
 * seeing paths that no other work-item can take, drops the exit test of the
 * loop before it (NAIVE's softmax ran off its row and crashed on AVX2 and
 * SSE2 targets; docs/backends.md, "PoCL and kernel shapes"). One exit per
 * kernel is a shape that every compiler handles.
 */

#ifndef XATTN_QDT
#define XATTN_QDT 0
#endif
#ifndef XATTN_KDT
#define XATTN_KDT 0
#endif
#ifndef XATTN_DMAX
#define XATTN_DMAX 64
#endif
#ifndef XATTN_DVMAX
#define XATTN_DVMAX 64
#endif
#ifndef XATTN_DFIX
#define XATTN_DFIX 0
#endif
#ifndef XATTN_DVFIX
#define XATTN_DVFIX 0
#endif
#ifndef XATTN_BQ
#define XATTN_BQ 16
#endif
#ifndef XATTN_BK
#define XATTN_BK 16
#endif
#ifndef XATTN_ROWS
#define XATTN_ROWS 0
#endif
#ifndef XATTN_NT
#define XATTN_NT 16
#endif
#ifndef XATTN_RWG
#define XATTN_RWG 64
#endif
#ifndef XATTN_CWG
#define XATTN_CWG 32
#endif

/* flags argument (host: XATTN_CL_FLAG_*) */
#define XATTN_F_CAUSAL 1
#define XATTN_F_BOTTOM_RIGHT 2
#define XATTN_F_VARLEN 4
#define XATTN_F_LSE 8
#define XATTN_F_BIAS 16
#define XATTN_F_BIAS_F16 32
#define XATTN_F_ALIBI 64
#define XATTN_F_COUNT 128 /* write the executed-work counts (see the end of this file) */
/* bits 8-9: q/o dtype, bits 10-11: k/v dtype (used when XATTN_QDT/KDT = -1) */
#define XATTN_F_SINKS 4096

/* ---- storage formats ------------------------------------------------------ */

inline float xattn_bf16_to_f32(ushort h) { return as_float((uint)h << 16); }

/* Round to nearest even; a NaN stays a (quiet) NaN. */
inline ushort xattn_f32_to_bf16(float x)
{
    uint u = as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (ushort)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (ushort)(u >> 16);
}

/* Storage formats: build-time constants on the fast path; -1 takes them from
 * the flags argument at run time (the generic path: one program serves every
 * dtype, for devices where building programs is what costs, such as PoCL). */
#define XATTN_F_QDT(f) (((f) >> 8) & 3)
#define XATTN_F_KDT(f) (((f) >> 10) & 3)

inline float xattn_load_any(__global const uchar *p, long i, int dt)
{
    if (dt == 0)
        return ((__global const float *)p)[i];
    if (dt == 1)
        return vload_half((size_t)i, (__global const half *)p);
    return xattn_bf16_to_f32(((__global const ushort *)p)[i]);
}

inline void xattn_store_any(__global uchar *p, long i, int dt, float x)
{
    if (dt == 0)
        ((__global float *)p)[i] = x;
    else if (dt == 1)
        vstore_half_rte(x, (size_t)i, (__global half *)p);
    else
        ((__global ushort *)p)[i] = xattn_f32_to_bf16(x);
}

#if XATTN_QDT == 0
#define QT float
#define XATTN_LOAD_Q(p, i) ((p)[(i)])
#define XATTN_STORE_O(p, i, x) ((p)[(i)] = (x))
#elif XATTN_QDT == 1
#define QT half
#define XATTN_LOAD_Q(p, i) vload_half((size_t)(i), (p))
#define XATTN_STORE_O(p, i, x) vstore_half_rte((x), (size_t)(i), (p))
#elif XATTN_QDT == 2
#define QT ushort
#define XATTN_LOAD_Q(p, i) xattn_bf16_to_f32((p)[(i)])
#define XATTN_STORE_O(p, i, x) ((p)[(i)] = xattn_f32_to_bf16(x))
#elif XATTN_QDT == -1
#define QT uchar
#define XATTN_LOAD_Q(p, i) xattn_load_any((p), (i), XATTN_F_QDT(flags))
#define XATTN_STORE_O(p, i, x) xattn_store_any((p), (i), XATTN_F_QDT(flags), (x))
#else
#error "XATTN_QDT must be 0 (f32), 1 (f16), 2 (bf16) or -1 (at run time)"
#endif

#if XATTN_KDT == 0
#define KT float
#define XATTN_LOAD_KV(p, i) ((p)[(i)])
#elif XATTN_KDT == 1
#define KT half
#define XATTN_LOAD_KV(p, i) vload_half((size_t)(i), (p))
#elif XATTN_KDT == 2
#define KT ushort
#define XATTN_LOAD_KV(p, i) xattn_bf16_to_f32((p)[(i)])
#elif XATTN_KDT == -1
#define KT uchar
#define XATTN_LOAD_KV(p, i) xattn_load_any((p), (i), XATTN_F_KDT(flags))
#else
#error "XATTN_KDT must be 0 (f32), 1 (f16), 2 (bf16) or -1 (at run time)"
#endif

/* Head dims: build-time constants on the fast path, arguments otherwise. */
#if XATTN_DFIX > 0
#define XATTN_HD XATTN_DFIX
#else
#define XATTN_HD D_arg
#endif
#if XATTN_DVFIX > 0
#define XATTN_HDV XATTN_DVFIX
#else
#define XATTN_HDV Dv_arg
#endif

/* ---- eight elements at a time (float8 along D) ------------------------------ */

/* Eight consecutive elements of q or k/v from element i on, as f32. */
#if XATTN_KDT == 0
#define XATTN_LOAD8_KV(p, i) vload8(0, (p) + (i))
#elif XATTN_KDT == 1
#define XATTN_LOAD8_KV(p, i) vload_half8(0, (p) + (i))
#elif XATTN_KDT == 2
#define XATTN_LOAD8_KV(p, i) as_float8(convert_uint8(vload8(0, (p) + (i))) << 16)
#else
#define XATTN_LOAD8_KV(p, i) xattn_load8_any((__global const uchar *)(p), (i), XATTN_F_KDT(flags))
#endif
#if XATTN_QDT == 0
#define XATTN_LOAD8_Q(p, i) vload8(0, (p) + (i))
#elif XATTN_QDT == 1
#define XATTN_LOAD8_Q(p, i) vload_half8(0, (p) + (i))
#elif XATTN_QDT == 2
#define XATTN_LOAD8_Q(p, i) as_float8(convert_uint8(vload8(0, (p) + (i))) << 16)
#else
#define XATTN_LOAD8_Q(p, i) xattn_load8_any((__global const uchar *)(p), (i), XATTN_F_QDT(flags))
#endif

inline float8 xattn_load8_any(__global const uchar *p, long i, int dt)
{
    if (dt == 0)
        return vload8(0, (__global const float *)p + i);
    if (dt == 1)
        return vload_half8(0, (__global const half *)p + i);
    return as_float8(convert_uint8(vload8(0, (__global const ushort *)p + i)) << 16);
}

inline float xattn_hsum8(float8 x)
{
    const float4 a = x.lo + x.hi;
    const float2 b = a.lo + a.hi;
    return b.x + b.y;
}

/* ---- the arguments every kernel starts with ------------------------------- */

/*
 * Views are element offsets and element strides (xattn_problem.h). meta holds
 * [len_q B][len_k B][start_q B][start_k B][page_size][max_pages][table_at]
 * [alibi slopes Hq, as float bits][block table B x max_pages from table_at]:
 * page_size 0 = contiguous K/V (no table); a paged cache's k_sb and v_sb are
 * the strides between pages (xattn_kv_tok). lse, bias and sinks point at a
 * dummy buffer when absent (flags say so).
 */
#define XATTN_KARGS                                                                     \
    __global const QT *q, __global const KT *k, __global const KT *v, __global QT *o,   \
        __global float *lse, __global const uchar *bias, __global const int *meta,      \
        __global const float *sinks,                                                    \
        const long q_off, const long q_sb, const long q_ss, const long q_sh,            \
        const long q_sd, const long k_off, const long k_sb, const long k_ss,            \
        const long k_sh, const long k_sd, const long v_off, const long v_sb,            \
        const long v_ss, const long v_sh, const long v_sd, const long o_off,            \
        const long o_sb, const long o_ss, const long o_sh, const long o_sd,             \
        const long l_off, const long l_sb, const long l_sh, const long l_ss,            \
        const long b_off, const long b_sb, const long b_sh, const long b_ss,            \
        const long b_sd, const long sink_off, const long sink_sh, const long win_l,     \
        const long win_r, const int B, const int Hq,                                    \
        const int group, const int D_arg, const int Dv_arg, const int Sq, const int Sk, \
        const int flags, const float scale, const xattn_sem_mods mods

#define XATTN_KARGS_PASS                                                                   \
    q, k, v, o, lse, bias, meta, sinks, q_off, q_sb, q_ss, q_sh, q_sd, k_off, k_sb, k_ss,  \
        k_sh, k_sd, v_off, v_sb, v_ss, v_sh, v_sd, o_off, o_sb, o_ss, o_sh, o_sd, l_off,   \
        l_sb, l_sh, l_ss, b_off, b_sb, b_sh, b_ss, b_sd, sink_off, sink_sh, win_l, win_r,  \
        B, Hq, group, D_arg,                                                               \
        Dv_arg, Sq, Sk, flags, scale, mods

/* Element indices of the views (xattn_problem.h, "Addressing"); K and V
 * through xattn_kv_tok below, which knows paged caches. */
#define XATTN_Q_AT(b, tok, h, d) (q_off + (long)(b)*q_sb + (long)(tok)*q_ss + (long)(h)*q_sh + (long)(d)*q_sd)
#define XATTN_O_AT(b, tok, h, d) (o_off + (long)(b)*o_sb + (long)(tok)*o_ss + (long)(h)*o_sh + (long)(d)*o_sd)
#define XATTN_LSE_AT(b, h, tok) (l_off + (long)(b)*l_sb + (long)(h)*l_sh + (long)(tok)*l_ss)
#define XATTN_BIAS_AT(b, h, i, j) (b_off + (long)(b)*b_sb + (long)(h)*b_sh + (long)(i)*b_ss + (long)(j)*b_sd)

/* ---- one sequence --------------------------------------------------------- */

typedef struct xattn_seq {
    int lq, lk;   /* lengths */
    int sq, sk;   /* first token (packed batches; 0 when padded) */
    int rows;     /* rows written: lq when packed, Sq when padded */
    long poff;    /* p = i + poff (bottom-right: lk - lq) */
    int ps;       /* paged K/V: tokens a page; 0 = contiguous */
    long pt;      /* paged K/V: meta index of this sequence's block-table row */
} xattn_seq;

inline xattn_seq xattn_seq_of(__global const int *meta, int B, int b, int flags, int Sq)
{
    xattn_seq s;
    s.lq = meta[b];
    s.lk = meta[B + b];
    s.sq = meta[2 * B + b];
    s.sk = meta[3 * B + b];
    s.rows = (flags & XATTN_F_VARLEN) ? s.lq : Sq;
    s.poff = (flags & XATTN_F_BOTTOM_RIGHT) ? (long)s.lk - (long)s.lq : 0;
    s.ps = meta[4 * B];
    s.pt = (long)meta[4 * B + 2] + (long)b * meta[4 * B + 1];
    return s;
}

inline float xattn_alibi_slope(__global const int *meta, int B, int h, int flags)
{
    return (flags & XATTN_F_ALIBI) ? as_float(meta[4 * B + 3 + h]) : 0.0f;
}

/* ---- K and V rows, contiguous or paged ------------------------------------ */

/*
 * The element offset of key j (0 <= j < s.lk) of sequence b, head 0, dim 0,
 * in K or V (the view's offset and batch and token strides): a paged cache's
 * key j is slot j % ps of page table[j / ps], whose entries past the
 * sequence's pages are never read (xattn_problem_kv_token). Add kh * sh +
 * d * sd for a head and a dim. Keys j .. j + n - 1 share a page when
 * xattn_kv_one_page says so: the kernels then look the page up once and step
 * by the token stride, as they always do for contiguous K/V.
 */
inline long xattn_kv_tok(__global const int *meta, xattn_seq s, int b, long j, long off, long sb,
                         long ss)
{
    /* j < lk fits an int: 32-bit division, several times cheaper on CPUs */
    if (s.ps > 0)
        return off + (long)meta[s.pt + (int)j / s.ps] * sb + (long)((int)j % s.ps) * ss;
    return off + (long)b * sb + ((long)s.sk + j) * ss;
}
#define XATTN_K_TOK(b, s, j) xattn_kv_tok(meta, (s), (b), (j), k_off, k_sb, k_ss)
#define XATTN_V_TOK(b, s, j) xattn_kv_tok(meta, (s), (b), (j), v_off, v_sb, v_ss)

inline int xattn_kv_one_page(xattn_seq s, long j, long n)
{
    return s.ps == 0 || (int)j % s.ps + n <= s.ps;
}

/* The end of the run of keys from j on that share j's page, at most hi (hi
 * itself for contiguous K/V). */
inline long xattn_kv_run_end(xattn_seq s, long j, long hi)
{
    return s.ps > 0 ? min(hi, ((long)((int)j / s.ps) + 1) * s.ps) : hi;
}

/* Folds head h's sink into a finished row's (*m, *l) (xattn_sem_sink_fold of
 * the semantics header) and returns the factor for its accumulator: 1 without
 * sinks. */
inline float xattn_sink_fold(__global const float *sinks, long sink_off, long sink_sh, int h,
                             int flags, float *m, float *l)
{
    if (!(flags & XATTN_F_SINKS))
        return 1.0f;
    return xattn_sem_sink_fold(m, l, sinks[sink_off + (long)h * sink_sh]);
}

/* ---- masks and scores (the helpers of kernels_cpu, one score at a time) --- */

/*
 * The mask rule of a sequence (docs/semantics.md step 6, xattn_sem_rule of the
 * semantics header prepended to this program), and the keys [*lo, *hi) row i
 * sees, clipped to [kmin, kmax) (a SPLITKV chunk). An empty range lies inside
 * [kmin, kmax], so that no union of ranges reaches past the sequence's keys.
 */
inline xattn_sem_rule xattn_rule_of(xattn_seq s, int flags, long wl, long wr)
{
    return xattn_sem_rule_make(s.lq, s.lk, flags & XATTN_F_BOTTOM_RIGHT, flags & XATTN_F_CAUSAL,
                               wl, wr);
}

inline void xattn_row_range(const xattn_sem_rule *r, long i, long kmin, long kmax, long *lo,
                            long *hi)
{
    long a, b;
    xattn_sem_row_keys(r, i, &a, &b);
    a = min(max(a, kmin), kmax);
    *lo = a;
    *hi = max(a, min(b, kmax));
}

/* Semantics steps 2-5 on an unmasked score s = (q . k) * scale: the call's
 * modifiers (the kernel argument `mods`), ALiBi, bias (the semantics header's
 * xattn_sem_modify). */
inline float xattn_mod_score(float s, const xattn_sem_mods mods, float slope, long pos, long j,
                             float bias_val)
{
    return xattn_sem_modify(&mods, s, slope, pos, j, bias_val);
}

inline float xattn_bias_load(__global const uchar *bias, long idx, int flags)
{
    if (flags & XATTN_F_BIAS_F16)
        return vload_half((size_t)idx, (__global const half *)bias);
    return ((__global const float *)bias)[idx];
}

/* The running max with NaN sticky: once a NaN is seen it stays. */
inline float xattn_max_sticky(float m, float s) { return xattn_sem_sticky_max(m, s); }

/* ---- executed-work counts --------------------------------------------------- */

/*
 * With XATTN_F_COUNT the product kernels write what they computed into a
 * ulong array `cnt` (the host sums it; no atomics): from element cnt_at on,
 *   xattn_naive_qk      one count a work-group: (query row, key) scores it computed
 *   xattn_naive_pv      one count a row of work-items: keys it added into O
 *   xattn_flash, xattn_splitkv_partial
 *                       three segments of one count a work-group: scores computed,
 *                       keys added into O, K/V rows loaded (G = number of groups;
 *                       in the row form a work-group is one work-item)
 * Each kernel writes every element of its part, so that nothing is left over
 * from a previous call. xattn_count_sum adds up large arrays on the device.
 */

/* cnt[0..2] = the sums of the three segments of n0, n1 and n2 elements that
 * follow them. One work-group of XATTN_RWG work-items. */
__kernel __attribute__((reqd_work_group_size(XATTN_RWG, 1, 1))) void
xattn_count_sum(__global ulong *cnt, const long n0, const long n1, const long n2)
{
    __local ulong red[XATTN_RWG];
    const int lid = get_local_id(0);
    long base = 3;
    for (int seg = 0; seg < 3; seg++) {
        const long n = seg == 0 ? n0 : seg == 1 ? n1 : n2;
        ulong x = 0;
        for (long e = lid; e < n; e += XATTN_RWG)
            x += cnt[base + e];
        red[lid] = x;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid == 0) { /* once a call: a plain loop is enough */
            for (int r = 1; r < XATTN_RWG; r++)
                x += red[r];
            cnt[seg] = x;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* red is rewritten by the next segment */
        base += n;
    }
}
