/*
 * xattn advise, the report: the batch's padding, each device's table of
 * naive, flash and splitkv, the packed run, the roofline and the advice, and
 * the same as JSON (schema xattn.advise/1).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "xtool_advise.h"

void xtool_advise_print_header(const xtool_advise_plan *p)
{
    const xtool_case *c = &p->c;
    const xtool_waste *w = &p->w;
    printf("xattn advise %s: %s\n", xattn_version_string(), p->key);
    if (!p->has_lengths)
        return;
    printf("lengths  %lld sequences from %s, padded to Sq %lld x Sk %lld: %lld query and %lld "
           "key tokens\n",
           (long long)c->batch, p->o->lengths_path, (long long)c->sq, (long long)c->sk,
           (long long)w->tokens_q, (long long)w->tokens_k);
    printf("padding  %.1f%% of the attention pairs (1 - sum Lq*Lk / (B*Sq*Sk) = 1 - %.0f / "
           "%.0f) and %.1f%% of the query tokens (1 - sum Lq / (B*Sq)) are padding\n",
           100 * w->pair_waste, w->pairs_useful, w->pairs_padded, 100 * w->token_waste);
}

/* The three algorithms, the fastest marked; a share of a ceiling above 100%
 * flagged, never quoted. */
static void xtool__algo_table(const xtool_advise_dev *d)
{
    printf("  %-9s %10s %7s %10s %10s %10s %10s %9s\n", "algo", "median ms", "spread", "GFLOP/s",
           "workspace", "peak mem", "FLOP/byte", "%FMA");
    int flagged = 0, low = 0;
    double low_ceiling = 0;
    for (int ai = 0; ai < 3; ai++) {
        const xtool_advise_algo *a = &d->a[ai];
        if (!a->ok) {
            printf("  %-9s %s\n", xattn_algo_name(a->algo), a->error);
            continue;
        }
        char ws[32], pk[32], pf[16];
        xtool_fmt_bytes((double)a->cell.info.workspace_bytes, ws, sizeof ws);
        xtool_fmt_bytes((double)a->cell.peak_bytes, pk, sizeof pk);
        xtool_fmt_pct(a->cell.pct_fma, pf, sizeof pf);
        if (xtool_advise_ceiling_low(&a->cell)) {
            low++;
            low_ceiling = a->cell.fma_ceiling;
        } else {
            flagged += xtool_stats_over_ceiling(a->cell.pct_fma);
        }
        printf("  %-9s %10.4f %6.1f%% %10.2f %10s %10s %10.2f %9s%s\n", xattn_algo_name(a->algo),
               a->cell.t.median, 100 * a->cell.t.spread, a->cell.gflops_useful, ws, pk,
               a->cell.intensity, pf, ai == d->best ? "  <- fastest" : "");
    }
    if (low)
        printf("  !        a share above 100%% whose useful work alone ran faster than the FMA "
               "ceiling (%.1f GFLOP/s): the ceiling was measured low, most likely on a busy "
               "machine; measure it again on a quiet one (--measure-ceilings)\n",
               low_ceiling);
    if (flagged)
        printf("  !        %s\n", XTOOL_MODEL_ERROR_NOTE);
}

void xtool_advise_print_device(const xtool_advise_plan *p, const xtool_advise_dev *d)
{
    xtool__algo_table(d);
    if (d->best >= 0 && d->a[d->best].cell.has_rec) {
        const xattn_record *br = &d->a[d->best].cell.rec;
        printf("  kernel   %s: %s%s; executed work (FLOP/byte, %%FMA) %s\n",
               xattn_algo_name(d->a[d->best].algo), br->kernel[0] ? br->kernel : "(not said)",
               br->matrix_units ? " on matrix units" : "",
               br->work_counted ? "counted by the kernels" : "modelled from the tile sizes");
    }
    if (p->has_lengths) {
        if (d->has_packed)
            printf("  %-9s %10.4f %6.1f%% %10.2f   (flash on the same batch packed: "
                   "cu_seqlens, no padding)\n",
                   "packed", d->packed.t.median, 100 * d->packed.t.spread, d->packed.gflops_useful);
        else
            printf("  %-9s not run: %s\n", "packed", d->packed_error);
    }
    if (d->roof_ok)
        printf("  roofline ceilings %.1f GFLOP/s FMA, %.1f GB/s read: ridge %.2f FLOP/byte. "
               "The shape (useful FLOPs / minimum bytes) sits at %.2f FLOP/byte, %s; %s as "
               "run executes %.2f FLOP/byte, %s (attainable %.1f GFLOP/s)\n",
               d->fma, d->bw, d->roof.ridge, d->roof_min.intensity,
               d->roof_min.compute_bound ? "compute-bound" : "memory-bound",
               xattn_algo_name(d->a[d->best].algo), d->roof.intensity,
               d->roof.compute_bound ? "compute-bound" : "memory-bound", d->roof.attainable_gflops);
    else
        printf("  roofline unknown: no ceilings for this device (run '%s devices --measure' "
               "or advise --measure-ceilings)\n",
               xtool_prog);
    printf("  advice   %s\n", d->advice);
    fflush(stdout);
}

/* ---- advise.json ------------------------------------------------------------------------ */

static void xtool__json_padding(FILE *f, const xtool_advise_plan *p)
{
    if (!p->has_lengths) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\"sequences\": %lld, \"tokens_q\": %lld, \"tokens_k\": %lld, \"pairs_useful\": ",
            (long long)p->c.batch, (long long)p->w.tokens_q, (long long)p->w.tokens_k);
    xattn__json_num(f, p->w.pairs_useful);
    xtool_json_field(f, "pairs_padded", p->w.pairs_padded);
    xtool_json_field(f, "pair_waste", p->w.pair_waste);
    xtool_json_field(f, "token_waste", p->w.token_waste);
    fprintf(f, "}");
}

static void xtool__json_algo(FILE *f, const xtool_advise_dev *d, const xtool_advise_algo *a)
{
    fprintf(f, "{\"algo\": \"%s\", \"ok\": %s, ", xattn_algo_name(a->algo),
            a->ok ? "true" : "false");
    if (!a->ok) {
        fprintf(f, "\"median_ms\": null, \"error\": ");
        xattn__json_str(f, a->error[0] ? a->error : d->error);
        fprintf(f, "}");
        return;
    }
    const xtool_cell *c = &a->cell;
    fprintf(f, "\"median_ms\": ");
    xattn__json_num(f, c->t.median);
    xtool_json_field(f, "spread", c->t.spread);
    xtool_json_field(f, "gflops_useful", c->gflops_useful);
    fprintf(f, ", \"workspace_bytes\": %llu, \"peak_bytes\": %llu",
            (unsigned long long)c->info.workspace_bytes, (unsigned long long)c->peak_bytes);
    xtool_json_field(f, "intensity", c->intensity);
    xtool_json_field_or_null(f, "pct_fma_ceiling", c->pct_fma);
    /* a share above 100% is either a model error or the proof of a ceiling measured low */
    const int low = xtool_advise_ceiling_low(c);
    fprintf(f, ", \"model_errors\": [%s], \"fma_ceiling_low\": %s, \"kernel\": ",
            xtool_stats_over_ceiling(c->pct_fma) && !low ? "\"pct_fma_ceiling\"" : "",
            low ? "true" : "false");
    xtool_json_str_or_null(f, c->has_rec ? c->rec.kernel : NULL);
    fprintf(f, ", \"work_counted\": %s, \"error\": null}",
            !c->has_rec           ? "null"
            : c->rec.work_counted ? "true"
                                  : "false");
}

static void xtool__json_device(FILE *f, const xtool_advise_dev *d)
{
    fprintf(f, "{\"backend\": \"%s\", \"device\": %d, \"name\": ", xattn_backend_name(d->t.backend),
            d->t.device);
    xattn__json_str(f, d->t.info.name);
    fprintf(f, ", \"algos\": [");
    for (int ai = 0; ai < 3; ai++) {
        fputs(ai ? ", " : "", f);
        xtool__json_algo(f, d, &d->a[ai]);
    }
    fprintf(f, "], \"best\": ");
    xtool_json_str_or_null(f, d->best >= 0 ? xattn_algo_name(d->a[d->best].algo) : NULL);
    fprintf(f, ", \"packed_flash_ms\": ");
    if (d->has_packed)
        xattn__json_num(f, d->packed.t.median);
    else
        fputs("null", f);
    fprintf(f, ", \"roofline\": ");
    if (d->roof_ok) {
        fprintf(f, "{\"fma_gflops\": ");
        xattn__json_num(f, d->fma);
        xtool_json_field(f, "bw_gbps", d->bw);
        xtool_json_field(f, "ridge", d->roof.ridge);
        xtool_json_field(f, "intensity_min", d->roof_min.intensity);
        xtool_json_field(f, "intensity_executed", d->roof.intensity);
        fprintf(f, ", \"bound\": \"%s\"}", d->roof.compute_bound ? "compute" : "memory");
    } else {
        fputs("null", f);
    }
    fprintf(f, ", \"advice\": ");
    xattn__json_str(f, d->advice);
    fputs("}", f);
}

int xtool_advise_write_json(const xtool_advise_plan *p, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    const xtool_case *c = &p->c;
    fprintf(f, "{\n  \"schema\": \"xattn.advise/1\",\n  \"xattn_version\": ");
    xattn__json_str(f, xattn_version_string());
    fprintf(f, ",\n  \"case\": ");
    xattn__json_str(f, p->key);
    fprintf(f,
            ",\n  \"batch\": %lld, \"heads\": %lld, \"kv_heads\": %lld, \"sq\": %lld, "
            "\"sk\": %lld, \"head_dim\": %lld, \"head_dim_v\": %lld,\n  \"padding\": ",
            (long long)c->batch, (long long)c->heads, (long long)c->kv_heads, (long long)c->sq,
            (long long)c->sk, (long long)c->head_dim, (long long)c->head_dim_v);
    xtool__json_padding(f, p);
    fprintf(f, ",\n  \"devices\": [");
    for (int ti = 0; ti < p->nt; ti++) {
        fputs(ti ? ",\n    " : "\n    ", f);
        xtool__json_device(f, &p->devs[ti]);
    }
    fprintf(f, "\n  ]\n}\n");
    return xtool_file_close(f, path, err, errlen);
}
