/* Runs one small attention call through the installed library and checks one
 * value by hand: with one key, softmax is 1 and O equals V. */
#include <math.h>
#include <stdio.h>

#include <xattn.h>

int main(void)
{
    xattn_ctx *ctx;
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx) != XATTN_STATUS_OK) {
        fprintf(stderr, "ctx: %s\n", xattn_last_error());
        return 1;
    }
    float q[4] = {1, 2, 3, 4}, k[4] = {0.5f, -1, 2, 0}, v[4] = {7, -3, 0.25f, 9}, o[4] = {0};
    xattn_buffer *bq, *bk, *bv, *bo;
    xattn_buffer_wrap_host(ctx, q, sizeof q, &bq);
    xattn_buffer_wrap_host(ctx, k, sizeof k, &bk);
    xattn_buffer_wrap_host(ctx, v, sizeof v, &bv);
    xattn_buffer_wrap_host(ctx, o, sizeof o, &bo);
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    d.q = xattn_tensor_bshd(bq, 0, XATTN_DTYPE_F32, 1, 1, 1, 4);
    d.k = xattn_tensor_bshd(bk, 0, XATTN_DTYPE_F32, 1, 1, 1, 4);
    d.v = xattn_tensor_bshd(bv, 0, XATTN_DTYPE_F32, 1, 1, 1, 4);
    d.o = xattn_tensor_bshd(bo, 0, XATTN_DTYPE_F32, 1, 1, 1, 4);
    d.algo = XATTN_ALGO_FLASH;
    xattn_status st = xattn_attention(ctx, &d, NULL);
    int ok = st == XATTN_STATUS_OK && xattn_ctx_sync(ctx) == XATTN_STATUS_OK;
    for (int i = 0; i < 4 && ok; i++)
        ok = fabsf(o[i] - v[i]) < 1e-6f;
    printf("xattn %s: %s (o = %g %g %g %g)\n", xattn_version_string(), ok ? "ok" : "FAILED",
           (double)o[0], (double)o[1], (double)o[2], (double)o[3]);
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    xattn_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
