/*
 * The portable micro-kernels: plain C11, the reference path next to the SIMD
 * ones (same contracts, see xattn__cpu_uk in xattn_cpu_common.h). exp and tanh
 * come from libm here, so this path is also the accuracy baseline for the
 * vector exp of the SIMD paths.
 */
#include "xattn_cpu_common.h"

#define XQ XATTN_CPU_BQ

static void xattn__cpu_p_load(float *dst, const void *base, int64_t idx, int64_t stride, int64_t n,
                              xattn_dtype dt, float mul)
{
    if (dt == XATTN_DTYPE_F32 && stride == 1) {
        const float *s = (const float *)base + idx;
        for (int64_t t = 0; t < n; t++)
            dst[t] = mul * s[t];
        return;
    }
    for (int64_t t = 0; t < n; t++)
        dst[t] = mul * xattn__cpu_load1(base, idx + t * stride, dt);
}

static void xattn__cpu_p_store(void *base, int64_t idx, int64_t stride, const float *src, int64_t n,
                               xattn_dtype dt, float mul)
{
    for (int64_t t = 0; t < n; t++)
        xattn__cpu_store1(base, idx + t * stride, dt, mul * src[t]);
}

static void xattn__cpu_p_qk_tile(float *st, const float *qt, const float *kt, int ldk, int D,
                                 int nc, int nr)
{
    for (int c = 0; c < nc; c++) {
        float *s = st + c * XQ;
        const float *k = kt + (int64_t)c * ldk;
        for (int r = 0; r < nr; r++)
            s[r] = 0.0f;
        for (int d = 0; d < D; d++) {
            const float kd = k[d];
            const float *q = qt + d * XQ;
            for (int r = 0; r < nr; r++)
                s[r] += q[r] * kd;
        }
    }
}

static void xattn__cpu_p_softmax_tile(float *st, int nc, int nr, float *m, float *l, float *alpha)
{
    /* docs/semantics.md step 8, one row at a time with the shared update (the
     * vector paths compute the same update lane by lane). */
    for (int r = 0; r < nr; r++) {
        float tmax = -INFINITY;
        for (int c = 0; c < nc; c++)
            tmax = xattn_sem_sticky_max(tmax, st[c * XQ + r]);
        float al;
        const float mu = xattn_sem_online_max(&m[r], tmax, &al);
        float sum = 0.0f;
        for (int c = 0; c < nc; c++) {
            const float p = expf(st[c * XQ + r] - mu);
            st[c * XQ + r] = p;
            sum += p;
        }
        l[r] = l[r] * al + sum;
        alpha[r] = al;
    }
}

static void xattn__cpu_p_pv_tile(float *acc, int ldacc, const float *st, const float *vt, int ldv,
                                 int n, int nr, const int *clo, const int *chi)
{
    for (int r = 0; r < nr; r++) {
        float *a = acc + (int64_t)r * ldacc;
        for (int c = clo[r]; c < chi[r]; c++) {
            const float p = st[c * XQ + r];
            const float *v = vt + (int64_t)c * ldv;
            for (int d = 0; d < n; d++)
                a[d] += p * v[d];
        }
    }
}

static int xattn__cpu_p_nonfinite(const float *x, int64_t n)
{
    float s = 0.0f;
    for (int64_t t = 0; t < n; t++)
        s += x[t] * 0.0f;
    return s != s;
}

static void xattn__cpu_p_axpy_rows(float *acc, int ldacc, int nr, const float *coef, const float *v,
                                   int n)
{
    for (int r = 0; r < nr; r++) {
        const float c = coef[r];
        if (c == 0.0f)
            continue;
        float *a = acc + (int64_t)r * ldacc;
        for (int t = 0; t < n; t++)
            a[t] += c * v[t];
    }
}

static float xattn__cpu_p_row_max(const float *x, int64_t n)
{
    float m = -INFINITY;
    for (int64_t t = 0; t < n; t++)
        m = xattn_sem_sticky_max(m, x[t]);
    return m;
}

static float xattn__cpu_p_exp_sum(float *x, int64_t n, float m)
{
    float sum = 0.0f;
    for (int64_t t = 0; t < n; t++) {
        x[t] = expf(x[t] - m);
        sum += x[t];
    }
    return sum;
}

static void xattn__cpu_p_scale(float *x, int64_t n, float a)
{
    for (int64_t t = 0; t < n; t++)
        x[t] *= a;
}

static void xattn__cpu_p_softcap(float *x, int64_t n, float cap)
{
    for (int64_t t = 0; t < n; t++)
        x[t] = xattn_sem_softcap(x[t], cap);
}

const xattn__cpu_uk xattn__cpu_uk_portable = {
    .simd = XATTN_CPU_SIMD_PORTABLE,
    .load = xattn__cpu_p_load,
    .store = xattn__cpu_p_store,
    .qk_tile = xattn__cpu_p_qk_tile,
    .softmax_tile = xattn__cpu_p_softmax_tile,
    .pv_tile = xattn__cpu_p_pv_tile,
    .pv_block = 1,
    .nonfinite = xattn__cpu_p_nonfinite,
    .axpy_rows = xattn__cpu_p_axpy_rows,
    .row_max = xattn__cpu_p_row_max,
    .exp_sum = xattn__cpu_p_exp_sum,
    .scale = xattn__cpu_p_scale,
    .softcap = xattn__cpu_p_softcap,
};
