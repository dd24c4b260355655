/*
 * xattn advise: for one shape (and optionally a file of sequence lengths), on
 * every device: naive vs flash vs split-KV measured (time, workspace, peak
 * memory), the roofline position, the padding waste of the padded batch vs a
 * packed one (computed from the lengths, and both measured with FLASH), and a
 * recommendation in plain words. docs/tool.md defines every figure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_advice.h"

int xtool_cmd_advise(const xtool_cli_opts *o)
{
    xtool_case c;
    int32_t *lq = NULL, *lk = NULL;
    char err[512] = "";
    int rc = xtool_case_from_opts(o, &c, &lq, &lk, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: advise: %s\n", xtool_prog, err);
        return rc;
    }
    c.varlen = 0;
    int has_lengths = lq != NULL;
    xtool_waste w;
    memset(&w, 0, sizeof w);
    if (has_lengths)
        xtool_padding_waste(lq, lk, (int)c.batch, c.sq, c.sk, &w);
    if (o->json_path && xtool_out_probe("--json", o->json_path, NULL, err, sizeof err)) {
        fprintf(stderr, "%s: advise: %s\n", xtool_prog, err);
        free(lq);
        free(lk);
        return XTOOL_EXIT_USAGE;
    }
    xtool_target targets[32];
    int nt = xtool_targets_select(o, targets, 32, stdout);
    if (nt == 0) {
        int usage = xtool_targets_bad_device(o, err, sizeof err);
        if (usage)
            fprintf(stderr, "%s: advise: %s\n", xtool_prog, err);
        else
            fprintf(stderr, "%s: advise: no available device among the backends asked for\n",
                    xtool_prog);
        free(lq);
        free(lk);
        return usage ? XTOOL_EXIT_USAGE : XTOOL_EXIT_FAIL;
    }
    xtool_advise_dev *devs = calloc((size_t)nt, sizeof *devs);
    if (!devs) {
        free(lq);
        free(lk);
        return XTOOL_EXIT_FAIL;
    }
    char key[320];
    xtool_case_describe(&c, key, sizeof key);
    printf("xattn advise %s: %s\n", xattn_version_string(), key);
    if (has_lengths) {
        printf("lengths  %lld sequences from %s, padded to Sq %lld x Sk %lld: %lld query and %lld "
               "key tokens\n",
               (long long)c.batch, o->lengths_path, (long long)c.sq, (long long)c.sk,
               (long long)w.tokens_q, (long long)w.tokens_k);
        printf("padding  %.1f%% of the attention pairs (1 - sum Lq*Lk / (B*Sq*Sk) = 1 - %.0f / "
               "%.0f) and %.1f%% of the query tokens (1 - sum Lq / (B*Sq)) are padding\n",
               100 * w.pair_waste, w.pairs_useful, w.pairs_padded, 100 * w.token_waste);
    }
    xtool_cell_opts co = {o->warmup, o->min_reps, o->reps, o->max_spread, o->cell_budget, 0};
    static const xattn_algo algos[3] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};
    int failures = 0;
    for (int ti = 0; ti < nt; ti++) {
        xtool_advise_dev *d = &devs[ti];
        d->t = targets[ti];
        d->best = -1;
        char dname[32];
        xtool_target_name(d->t.backend, d->t.device, dname, sizeof dname);
        xattn_ctx *ctx = NULL;
        xattn_status st = xtool_ctx_open(o, d->t.backend, d->t.device, &ctx);
        if (st == XATTN_STATUS_OK)
            st = xattn_profiler_enable(ctx, 1);
        if (st == XATTN_STATUS_OK && o->measure_ceilings) {
            xattn_ceilings cl;
            if (xattn_ceilings_get(ctx, &cl) != XATTN_STATUS_OK) {
                printf("%-9s measuring the ceilings (seconds)...\n", dname);
                fflush(stdout);
                xattn_ceilings_measure(ctx, 0, &cl);
            }
        }
        xtool_case_run run;
        memset(&run, 0, sizeof run);
        if (st == XATTN_STATUS_OK)
            st = xtool_case_setup(ctx, &c, &run);
        if (st == XATTN_STATUS_OK) {
            st = xattn_attention_check(ctx, &run.desc);
            if (st != XATTN_STATUS_OK && xtool_status_is_usage(st)) {
                fprintf(stderr, "%s: advise: impossible case: %s\n", xtool_prog,
                        xattn_last_error());
                xtool_case_teardown(&run);
                xattn_ctx_destroy(ctx);
                free(devs);
                free(lq);
                free(lk);
                return XTOOL_EXIT_USAGE;
            }
        }
        if (st != XATTN_STATUS_OK) {
            snprintf(d->error, sizeof d->error, "%s", xattn_last_error());
            printf("\n%s %s: cannot be used: %s\n", dname, d->t.info.name, d->error);
            xtool_case_teardown(&run);
            xattn_ctx_destroy(ctx);
            failures++;
            continue;
        }
        d->opened = 1;
        printf("\n%s %s\n", dname, d->t.info.name);
        fflush(stdout);
        double scores = 4.0 * (double)c.batch * (double)c.heads * (double)c.sq * (double)c.sk;
        double mem =
            d->t.info.global_mem_bytes ? (double)d->t.info.global_mem_bytes : 16.0 * 1073741824.0;
        for (int ai = 0; ai < 3; ai++) {
            xtool_advise_algo *a = &d->a[ai];
            a->algo = algos[ai];
            if (algos[ai] == XATTN_ALGO_NAIVE && scores > mem / 4) {
                char s1[32];
                xtool_fmt_bytes(scores, s1, sizeof s1);
                snprintf(a->error, sizeof a->error,
                         "not run: its score matrix would take %s, over a quarter of the "
                         "device's memory",
                         s1);
                continue;
            }
            run.desc.algo = algos[ai];
            xattn_status mst = xtool_cell_measure(ctx, &run, &co, &a->cell);
            if (mst != XATTN_STATUS_OK) {
                snprintf(a->error, sizeof a->error, "%s: %s", xattn_status_name(mst),
                         xattn_last_error());
                if (mst != XATTN_STATUS_UNSUPPORTED)
                    failures++;
                continue;
            }
            a->ok = 1;
            if (d->best < 0 || a->cell.t.median < d->a[d->best].cell.t.median)
                d->best = ai;
        }
        xtool_case_teardown(&run);
        if (has_lengths) { /* the same batch packed, FLASH */
            xtool_case pc = c;
            pc.varlen = 1;
            pc.algo = XATTN_ALGO_FLASH;
            xattn_status pst = xtool_case_setup(ctx, &pc, &run);
            if (pst == XATTN_STATUS_OK)
                pst = xtool_cell_measure(ctx, &run, &co, &d->packed);
            if (pst == XATTN_STATUS_OK)
                d->has_packed = 1;
            else
                snprintf(d->packed_error, sizeof d->packed_error, "%s", xattn_last_error());
            xtool_case_teardown(&run);
        }
        /* Roofline with the ceilings the library used for the record (f32, or the
         * device's 16-bit ones), else the context's f32 figures. */
        if (d->best >= 0) {
            const xtool_cell *bc = &d->a[d->best].cell;
            d->fma = bc->fma_ceiling;
            d->bw = bc->bw_ceiling;
            xattn_ceilings cl;
            if ((d->fma <= 0 || d->bw <= 0) && xattn_ceilings_get(ctx, &cl) == XATTN_STATUS_OK) {
                d->fma = cl.fma_f32_gflops;
                d->bw = cl.read_gbps;
            }
            if (bc->has_rec && xtool_roofline_place(bc->rec.flops_executed, bc->rec.bytes_actual,
                                                    d->fma, d->bw, &d->roof) == 0) {
                d->roof_ok = 1;
                xtool_roofline_place(bc->rec.flops_useful, bc->rec.bytes_min, d->fma, d->bw,
                                     &d->roof_min);
            }
        }
        xattn_ctx_destroy(ctx);

        printf("  %-9s %10s %7s %10s %10s %10s %10s %9s\n", "algo", "median ms", "spread",
               "GFLOP/s", "workspace", "peak mem", "FLOP/byte", "%FMA");
        int flagged = 0;
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
            flagged += xtool_stats_over_ceiling(a->cell.pct_fma);
            printf("  %-9s %10.4f %6.1f%% %10.2f %10s %10s %10.2f %9s%s\n",
                   xattn_algo_name(a->algo), a->cell.t.median, 100 * a->cell.t.spread,
                   a->cell.gflops_useful, ws, pk, a->cell.intensity, pf,
                   ai == d->best ? "  <- fastest" : "");
        }
        if (flagged)
            printf("  !        %s\n", XTOOL_MODEL_ERROR_NOTE);
        if (d->best >= 0 && d->a[d->best].cell.has_rec) {
            const xattn_record *br = &d->a[d->best].cell.rec;
            printf("  kernel   %s: %s%s; executed work (FLOP/byte, %%FMA) %s\n",
                   xattn_algo_name(d->a[d->best].algo), br->kernel[0] ? br->kernel : "(not said)",
                   br->matrix_units ? " on matrix units" : "",
                   br->work_counted ? "counted by the kernels" : "modelled from the tile sizes");
        }
        if (has_lengths) {
            if (d->has_packed)
                printf("  %-9s %10.4f %6.1f%% %10.2f   (flash on the same batch packed: "
                       "cu_seqlens, no padding)\n",
                       "packed", d->packed.t.median, 100 * d->packed.t.spread,
                       d->packed.gflops_useful);
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
                   d->roof.compute_bound ? "compute-bound" : "memory-bound",
                   d->roof.attainable_gflops);
        else
            printf("  roofline unknown: no ceilings for this device (run '%s devices --measure' "
                   "or advise --measure-ceilings)\n",
                   xtool_prog);
        xtool_advise_text(&c, &w, has_lengths, d);
        printf("  advice   %s\n", d->advice);
        fflush(stdout);
    }

    if (o->json_path) {
        FILE *f = fopen(o->json_path, "w");
        if (!f) {
            fprintf(stderr, "%s: advise: cannot write '%s'\n", xtool_prog, o->json_path);
            failures++;
        } else {
            fprintf(f, "{\n  \"schema\": \"xattn.advise/1\",\n  \"xattn_version\": ");
            xattn__json_str(f, xattn_version_string());
            fprintf(f, ",\n  \"case\": ");
            xattn__json_str(f, key);
            fprintf(f,
                    ",\n  \"batch\": %lld, \"heads\": %lld, \"kv_heads\": %lld, \"sq\": %lld, "
                    "\"sk\": %lld, \"head_dim\": %lld, \"head_dim_v\": %lld,\n  \"padding\": ",
                    (long long)c.batch, (long long)c.heads, (long long)c.kv_heads, (long long)c.sq,
                    (long long)c.sk, (long long)c.head_dim, (long long)c.head_dim_v);
            if (has_lengths) {
                fprintf(f,
                        "{\"sequences\": %lld, \"tokens_q\": %lld, \"tokens_k\": %lld, "
                        "\"pairs_useful\": ",
                        (long long)c.batch, (long long)w.tokens_q, (long long)w.tokens_k);
                xattn__json_num(f, w.pairs_useful);
                xtool_json_field(f, "pairs_padded", w.pairs_padded);
                xtool_json_field(f, "pair_waste", w.pair_waste);
                xtool_json_field(f, "token_waste", w.token_waste);
                fprintf(f, "}");
            } else {
                fputs("null", f);
            }
            fprintf(f, ",\n  \"devices\": [");
            for (int ti = 0; ti < nt; ti++) {
                const xtool_advise_dev *d = &devs[ti];
                fprintf(f,
                        "%s\n    {\"backend\": \"%s\", \"device\": %d, \"name\": ", ti ? "," : "",
                        xattn_backend_name(d->t.backend), d->t.device);
                xattn__json_str(f, d->t.info.name);
                fprintf(f, ", \"algos\": [");
                for (int ai = 0; ai < 3; ai++) {
                    const xtool_advise_algo *a = &d->a[ai];
                    fprintf(f, "%s{\"algo\": \"%s\", \"ok\": %s, ", ai ? ", " : "",
                            xattn_algo_name(algos[ai]), a->ok ? "true" : "false");
                    if (a->ok) {
                        fprintf(f, "\"median_ms\": ");
                        xattn__json_num(f, a->cell.t.median);
                        xtool_json_field(f, "spread", a->cell.t.spread);
                        xtool_json_field(f, "gflops_useful", a->cell.gflops_useful);
                        fprintf(f,
                                ", \"workspace_bytes\": %llu, \"peak_bytes\": %llu, "
                                "\"intensity\": ",
                                (unsigned long long)a->cell.info.workspace_bytes,
                                (unsigned long long)a->cell.peak_bytes);
                        xattn__json_num(f, a->cell.intensity);
                        fprintf(f, ", \"pct_fma_ceiling\": ");
                        if (a->cell.pct_fma >= 0)
                            xattn__json_num(f, a->cell.pct_fma);
                        else
                            fputs("null", f);
                        fprintf(f, ", \"model_errors\": [%s], \"kernel\": ",
                                xtool_stats_over_ceiling(a->cell.pct_fma) ? "\"pct_fma_ceiling\""
                                                                          : "");
                        if (a->cell.has_rec && a->cell.rec.kernel[0])
                            xattn__json_str(f, a->cell.rec.kernel);
                        else
                            fputs("null", f);
                        fprintf(f, ", \"work_counted\": %s",
                                !a->cell.has_rec           ? "null"
                                : a->cell.rec.work_counted ? "true"
                                                           : "false");
                        fprintf(f, ", \"error\": null}");
                    } else {
                        fprintf(f, "\"median_ms\": null, \"error\": ");
                        xattn__json_str(f, a->error[0] ? a->error : d->error);
                        fprintf(f, "}");
                    }
                }
                fprintf(f, "], \"best\": ");
                if (d->best >= 0)
                    fprintf(f, "\"%s\"", xattn_algo_name(algos[d->best]));
                else
                    fputs("null", f);
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
                    fprintf(f, ", \"bound\": \"%s\"}",
                            d->roof.compute_bound ? "compute" : "memory");
                } else {
                    fputs("null", f);
                }
                fprintf(f, ", \"advice\": ");
                xattn__json_str(f, d->advice);
                fputs("}", f);
            }
            fprintf(f, "\n  ]\n}\n");
            if (fclose(f) != 0)
                failures++;
        }
    }
    free(devs);
    free(lq);
    free(lk);
    return failures ? XTOOL_EXIT_FAIL : XTOOL_EXIT_OK;
}
