/*
 * xattn bench, the run: every cell of the plan (device x case x algorithm x
 * CPU thread count) measured on its device's context and checked against the
 * reference, which is computed once per case and reused by every device and
 * algorithm. Each cell's row is printed as it finishes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_bench.h"

/* The reference of a case, computed by the first cell that checks it. */
typedef struct xtool__ref_slot {
    int done;
    xattn_status st;
    char error[256];
    xtool_case_ref ref;
} xtool__ref_slot;

/* What the run carries from cell to cell. */
typedef struct xtool__bench_run {
    const xtool_bench_plan *p;
    const xtool_cli_opts *o;
    xtool_bench_report *rep;
    xtool__ref_slot *refs; /* one per case */
    xtool_progress prog;
    int casew;
    double t_first; /* when the first context was made: the traces' common time zero */
    double t_start; /* when the run began: --budget counts from here */
    int pass;       /* 0-based: the pass under way */
    int next;       /* passes after the first: the next result, in the order they were made */
    double *keep, *keep_cpu; /* one pass's samples of a cell (--max-reps entries each) */
} xtool__bench_run;

/* 1 when --budget is given and spent. */
static int xtool__budget_spent(const xtool__bench_run *b)
{
    return b->o->budget > 0 && xtool_now_s() - b->t_start >= b->o->budget;
}

/* Adds one pass's n samples (and CPU times, or NULL) to the cell's pool and
 * makes its statistics those of the pool: -1 out of memory (the pool kept). */
static int xtool__pool_add(xtool__bench_run *b, xtool_bench_result *r, const xtool_cell *pass,
                           const double *ms, const double *cpu, int n)
{
    int old = r->samples ? r->cell.t.n : 0;
    double *s = realloc(r->samples, (size_t)(old + n) * sizeof *s);
    if (!s)
        return -1;
    r->samples = s;
    memcpy(s + old, ms, (size_t)n * sizeof *s);
    if (cpu && (old == 0 || r->cpu_samples)) {
        double *c = realloc(r->cpu_samples, (size_t)(old + n) * sizeof *c);
        if (c) {
            r->cpu_samples = c;
            memcpy(c + old, cpu, (size_t)n * sizeof *c);
        } else {
            free(r->cpu_samples);
            r->cpu_samples = NULL;
        }
    } else if (old > 0 && r->cpu_samples) { /* a pass without CPU times: none kept */
        free(r->cpu_samples);
        r->cpu_samples = NULL;
    }
    if (old == 0) { /* the first pass: its record and figures */
        r->cell = *pass;
    } else {
        r->cell.elapsed_s += pass->elapsed_s;
        r->cell.build_ms += pass->build_ms;
        if (pass->peak_bytes > r->cell.peak_bytes)
            r->cell.peak_bytes = pass->peak_bytes;
    }
    r->passes++;
    xtool_stats_compute(r->samples, old + n, &r->cell.t);
    memset(&r->cell.cpu, 0, sizeof r->cell.cpu);
    if (r->cpu_samples)
        xtool_stats_compute(r->cpu_samples, old + n, &r->cell.cpu);
    r->cell.converged =
        r->cell.t.n >= b->o->min_reps && xtool_stats_ci_narrow(&r->cell.t, b->o->max_spread);
    xtool_cell_derive(&r->cell);
    return 0;
}

/* The identity of a result cell: device, case, algorithm, CPU threads. */
static xtool_bench_result *xtool__result_new(xtool__bench_run *b, int ti, int ci, xattn_algo algo,
                                             int threads)
{
    if (b->pass > 0) /* the same cell as in the first pass, made in the same order */
        return &b->rep->results[b->next++];
    xtool_bench_result *r = &b->rep->results[b->rep->n_results++];
    r->device = ti;
    r->case_idx = ci;
    r->algo = algo;
    r->threads = threads;
    r->compute_units = b->p->targets[ti].info.compute_units;
    r->pct_fma_per_thread = -1;
    return r;
}

/* % of the FMA ceiling pro-rated to the threads a CPU cell used: the ceiling
 * is measured with every compute unit, so t of n units get t/n of it (at most
 * all of it: more threads than units add no FMA units). */
static void xtool__per_thread(xtool_bench_result *r)
{
    const xtool_cell *c = &r->cell;
    r->pct_fma_per_thread = -1;
    if (r->threads <= 0 || r->compute_units <= 0 || c->fma_ceiling <= 0 || c->pct_fma < 0)
        return;
    int used = r->threads < r->compute_units ? r->threads : r->compute_units;
    r->pct_fma_per_thread =
        100.0 * c->gflops_executed / (c->fma_ceiling * (double)used / (double)r->compute_units);
}

/* A finished cell: counted, its row printed (with --passes, once the passes
 * of its device are done). */
static void xtool__cell_done(xtool__bench_run *b, const xtool_bench_result *r)
{
    b->prog.done++;
    if (b->o->passes > 1)
        return;
    xtool_progress_clear(&b->prog);
    xtool_bench_table_row(stdout, b->rep, r, b->casew);
    fflush(stdout);
}

/* A context on the device, its ceilings (measured first with
 * --measure-ceilings) and profiling on; NULL with bd->error set. */
static xattn_ctx *xtool__device_open(xtool__bench_run *b, xtool_bench_device *bd, const char *dname)
{
    xattn_ctx *ctx = NULL;
    xattn_status st = xtool_ctx_open(b->o, bd->t.backend, bd->t.device, &ctx);
    if (st == XATTN_STATUS_OK && b->o->measure_ceilings) {
        xattn_ceilings c;
        xtool_progress_clear(&b->prog);
        /* None cached, or cached ones measured under load: measured (again). */
        int have = xattn_ceilings_get(ctx, &c) == XATTN_STATUS_OK;
        if (!have || c.under_load) {
            printf("%-9s %s (seconds)...\n", dname,
                   have ? "the cached ceilings were measured under load: measuring them again"
                        : "no ceilings cached: measuring them");
            fflush(stdout);
            double t0 = xtool_now_s();
            if (xattn_ceilings_measure(ctx, 0, &c) != XATTN_STATUS_OK)
                printf("%-9s ceilings not measured: %s\n", dname, xattn_last_error());
            else
                printf("%-9s ceilings measured in %.1f s (wall clock)%s\n", dname,
                       xtool_now_s() - t0,
                       c.from_cache ? ", under a heavier load still: the cached ones kept" : "");
        }
    }
    if (st == XATTN_STATUS_OK)
        st = xattn_profiler_enable(ctx, 1);
    if (st == XATTN_STATUS_OK)
        return ctx;
    snprintf(bd->error, sizeof bd->error, "%s", xattn_last_error());
    xattn_ctx_destroy(ctx);
    return NULL;
}

/* Every cell of a device that cannot be used fails with the reason. */
static void xtool__device_failed(xtool__bench_run *b, int ti, const char *dname)
{
    xtool_bench_device *bd = &b->rep->devices[ti];
    xtool_progress_clear(&b->prog);
    printf("%-9s cannot be used: %s\n", dname, bd->error);
    for (int ci = 0; ci < b->p->nc; ci++) {
        xattn_algo algos[XATTN_ALGO_COUNT];
        int na = xtool_bench_case_algos(b->o, &b->p->cases[ci], algos);
        int th[XTOOL_CLI_MAX_LIST];
        int nth = xtool_bench_case_threads(b->o, &b->p->cases[ci], &bd->t, th);
        for (int hi = 0; hi < nth; hi++)
            for (int ai = 0; ai < na; ai++) {
                xtool_bench_result *r = xtool__result_new(b, ti, ci, algos[ai], th[hi]);
                r->status = XTOOL_CELL_FAILED;
                snprintf(r->error, sizeof r->error, "no context: %s", bd->error);
                b->prog.done++;
            }
    }
}

/* The device's line before its rows: its ceilings, or how to get them. */
static void xtool__device_line(const xtool_bench_device *bd, const char *dname)
{
    if (bd->has_ceilings)
        printf("%-9s %s: ceilings %.1f GFLOP/s f32 FMA, %.1f GB/s read%s%s\n", dname,
               bd->t.info.name, bd->ceilings.fma_f32_gflops, bd->ceilings.read_gbps,
               bd->ceilings.from_cache ? " (cached)" : "",
               bd->ceilings.under_load ? "; measured under load, likely low: shares of them read "
                                         "high (--measure-ceilings measures again)"
                                       : "");
    else
        printf("%-9s %s: no ceilings known (run '%s devices --measure' once, or bench "
               "--measure-ceilings)\n",
               dname, bd->t.info.name, xtool_prog);
}

/* The cell's output against the case's reference (computed here the first
 * time: a reference that does not fit the memory is not computed, and the
 * case's cells say why). */
static void xtool__cell_check(xtool__bench_run *b, xattn_ctx *ctx, const xtool_target *t, int ci,
                              xtool_case_run *run, xtool_bench_result *r)
{
    const xtool_bench_case *bc = &b->p->cases[ci];
    xtool__ref_slot *slot = &b->refs[ci];
    r->check_on = 1;
    if (!slot->done) {
        xtool_case_mem rm;
        xtool_mem_room room;
        char rwhy[200];
        xtool_case_mem_estimate(&bc->c, r->algo, 1, b->o->check_limit, 1, &rm);
        xtool_mem_room_read(ctx, t, &room);
        slot->done = 1;
        if (xtool_mem_fits(&room, 0, rm.reference, "the reference", rwhy, sizeof rwhy)) {
            slot->st = XATTN_STATUS_OK;
            memset(&slot->ref, 0, sizeof slot->ref);
            slot->ref.mode = XTOOL_REF_SKIPPED;
            snprintf(slot->ref.note, sizeof slot->ref.note, "not checked: %.140s", rwhy);
        } else {
            slot->st = xtool_case_ref_compute(run, b->o->check_limit, &slot->ref);
            if (slot->st != XATTN_STATUS_OK)
                snprintf(slot->error, sizeof slot->error, "reference: %s", xattn_last_error());
        }
    }
    if (slot->st != XATTN_STATUS_OK) {
        r->status = XTOOL_CELL_FAILED;
        snprintf(r->error, sizeof r->error, "%s", slot->error);
        return;
    }
    r->ref_mode = slot->ref.mode;
    snprintf(r->check_note, sizeof r->check_note, "%s", slot->ref.note);
    xattn_status cst = xtool_case_check(run, &slot->ref, &r->err);
    if (cst != XATTN_STATUS_OK) {
        r->status = XTOOL_CELL_FAILED;
        snprintf(r->error, sizeof r->error, "check: %s", xattn_last_error());
    } else if (!r->err.pass) {
        r->status = XTOOL_CELL_FAILED;
        snprintf(r->error, sizeof r->error, "disagrees with the reference: rel L2 %.2e > %.2e%s",
                 r->err.rel_l2, r->err.bound,
                 r->err.nan_mismatch   ? ", NaN mismatches"
                 : r->err.lse_mismatch ? ", LSE mismatches"
                                       : "");
    }
}

/* 1 (r skipped, with the reason) when the algorithm's workspace does not fit:
 * NAIVE's B*Hq*Sq*Sk f32 scores above a quarter of the device's memory, or any
 * workspace above what is available now, the case's buffers allocated. */
static int xtool__cell_skip_workspace(xattn_ctx *ctx, const xtool_target *t,
                                      const xtool_bench_case *bc, xtool_bench_result *r)
{
    const xtool_case *c = &bc->c;
    double scores = 4.0 * (double)c->batch * (double)c->heads * (double)c->sq * (double)c->sk;
    double mem = t->info.global_mem_bytes ? (double)t->info.global_mem_bytes : 16.0 * 1073741824.0;
    if (r->algo == XATTN_ALGO_NAIVE && scores > mem / 4) {
        char s1[32], s2[32];
        xtool_fmt_bytes(scores, s1, sizeof s1);
        xtool_fmt_bytes(mem, s2, sizeof s2);
        r->status = XTOOL_CELL_SKIPPED;
        snprintf(r->error, sizeof r->error,
                 "naive's score matrix would take %s, over a quarter of the device's %s", s1, s2);
        return 1;
    }
    xtool_case_mem wm;
    xtool_mem_room room;
    char why[200];
    xtool_case_mem_estimate(c, r->algo, 0, 0, r->threads ? r->threads : 1, &wm);
    xtool_mem_room_read(ctx, t, &room);
    if (xtool_mem_fits(&room, wm.workspace, 0,
                       r->algo == XATTN_ALGO_NAIVE ? "naive's score matrix"
                                                   : "the algorithm's workspace",
                       why, sizeof why)) {
        r->status = XTOOL_CELL_SKIPPED;
        snprintf(r->error, sizeof r->error, "%s", why);
        return 1;
    }
    return 0;
}

/* One cell on a set-up case: measured, then checked. */
static void xtool__cell_measure(xtool__bench_run *b, xattn_ctx *ctx, const xtool_target *t, int ci,
                                xtool_case_run *run, xtool_bench_result *r)
{
    const xtool_cli_opts *o = b->o;
    const xtool_bench_case *bc = &b->p->cases[ci];
    if (xtool__cell_skip_workspace(ctx, t, bc, r))
        return;
    run->desc.algo = r->algo;
    /* The check (and its poisoned first call) in the first pass only. */
    int check = o->check && b->pass == 0;
    xtool_cell_opts co = {.warmup = o->warmup,
                          .min_reps = o->min_reps,
                          .max_reps = o->reps,
                          .max_spread = o->max_spread,
                          .budget_s = o->cell_budget,
                          .poison_first = check,
                          .cpu_time = t->backend == XATTN_BACKEND_CPU,
                          .keep_ms = b->keep,
                          .keep_cpu_ms = b->keep_cpu};
    xtool_cell pass;
    xattn_range_push(ctx, bc->key);
    xattn_status mst = xtool_cell_measure(ctx, run, &co, &pass);
    xattn_range_pop(ctx);
    if (mst != XATTN_STATUS_OK) {
        r->status = mst == XATTN_STATUS_UNSUPPORTED ? XTOOL_CELL_UNSUPPORTED : XTOOL_CELL_FAILED;
        snprintf(r->error, sizeof r->error, "%s%s: %s", b->pass ? "a later pass: " : "",
                 xattn_status_name(mst), xattn_last_error());
        free(r->samples);
        free(r->cpu_samples);
        r->samples = r->cpu_samples = NULL;
        memset(&r->cell, 0, sizeof r->cell);
        return;
    }
    if (xtool__pool_add(b, r, &pass, b->keep, pass.cpu.n ? b->keep_cpu : NULL, pass.t.n)) {
        r->status = XTOOL_CELL_FAILED;
        snprintf(r->error, sizeof r->error, "out of memory for the samples");
        return;
    }
    xtool__per_thread(r);
    if (check)
        xtool__cell_check(b, ctx, t, ci, run, r);
}

/* A case set up on the context; the reason in mem_skip (inputs and outputs
 * that do not fit: nothing is allocated, since an allocation beyond the
 * memory may succeed and the OOM killer end the run when its pages are
 * touched) or in setup_error when it cannot run. */
static xattn_status xtool__case_setup(xattn_ctx *ctx, const xtool_target *t,
                                      const xtool_bench_case *bc, xtool_case_run *run,
                                      char *mem_skip, size_t nm, char *setup_error, size_t ns)
{
    xtool_mem_room room;
    xtool_case_mem cm;
    mem_skip[0] = setup_error[0] = '\0';
    xtool_mem_room_read(ctx, t, &room);
    xtool_case_mem_estimate(&bc->c, XATTN_ALGO_FLASH, 0, 0, t->info.compute_units, &cm);
    if (xtool_mem_fits(&room, cm.tensors, cm.staging, "its inputs and outputs", mem_skip, nm)) {
        snprintf(setup_error, ns, "%s", mem_skip);
        return XATTN_STATUS_OUT_OF_MEMORY;
    }
    mem_skip[0] = '\0';
    xattn_status st = xtool_case_setup(ctx, &bc->c, run);
    if (st == XATTN_STATUS_OK)
        st = xattn_attention_check(ctx, &run->desc);
    if (st != XATTN_STATUS_OK)
        snprintf(setup_error, ns, "%s", xattn_last_error());
    return st;
}

/* Every cell of one case on one device: its thread counts x its algorithms. */
static void xtool__case_cells(xtool__bench_run *b, xattn_ctx *ctx, int ti, int ci,
                              const char *dname)
{
    const xtool_target *t = &b->rep->devices[ti].t;
    const xtool_bench_case *bc = &b->p->cases[ci];
    xtool_case_run run;
    memset(&run, 0, sizeof run);
    char mem_skip[320], setup_error[384], thread_error[320] = "";
    xattn_status sst = xtool__case_setup(ctx, t, bc, &run, mem_skip, sizeof mem_skip, setup_error,
                                         sizeof setup_error);
    xattn_algo algos[XATTN_ALGO_COUNT];
    int na = xtool_bench_case_algos(b->o, bc, algos);
    int th[XTOOL_CLI_MAX_LIST];
    int nth = xtool_bench_case_threads(b->o, bc, t, th);
    xattn_status tst = XATTN_STATUS_OK; /* the thread count applied */
    for (int cell = 0; cell < nth * na; cell++) {
        int hi = cell / na, ai = cell % na;
        if (ai == 0 && th[hi] > 0 && sst == XATTN_STATUS_OK) {
            thread_error[0] = '\0';
            tst = xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, th[hi]);
            if (tst != XATTN_STATUS_OK)
                snprintf(thread_error, sizeof thread_error, "threads %d: %s", th[hi],
                         xattn_last_error());
        }
        xtool_bench_result *r = xtool__result_new(b, ti, ci, algos[ai], th[hi]);
        if (b->pass > 0 && (r->status != XTOOL_CELL_OK || xtool__budget_spent(b))) {
            b->prog.done++; /* not timed in the first pass, or the budget is spent */
            b->rep->budget_hit |= r->status == XTOOL_CELL_OK;
            continue;
        }
        char label[400];
        if (th[hi] > 0)
            snprintf(label, sizeof label, "%s %s t%d %s", dname, xattn_algo_name(algos[ai]), th[hi],
                     bc->key);
        else
            snprintf(label, sizeof label, "%s %s %s", dname, xattn_algo_name(algos[ai]), bc->key);
        xtool_progress_draw(&b->prog, label);
        if (b->pass > 0 && (sst != XATTN_STATUS_OK || tst != XATTN_STATUS_OK)) {
            /* timed in the first pass, not now: the first passes' samples stand */
            b->prog.done++;
            continue;
        }
        if (mem_skip[0]) {
            r->status = XTOOL_CELL_SKIPPED;
            snprintf(r->error, sizeof r->error, "%s", mem_skip);
        } else if (sst != XATTN_STATUS_OK || tst != XATTN_STATUS_OK) {
            xattn_status bad = sst != XATTN_STATUS_OK ? sst : tst;
            r->status =
                bad == XATTN_STATUS_UNSUPPORTED ? XTOOL_CELL_UNSUPPORTED : XTOOL_CELL_FAILED;
            snprintf(r->error, sizeof r->error, "%s",
                     sst != XATTN_STATUS_OK ? setup_error : thread_error);
        } else {
            xtool__cell_measure(b, ctx, t, ci, &run, r);
        }
        xtool__cell_done(b, r);
    }
    xtool_case_teardown(&run); /* a no-op after a failed setup */
}

/* Every cell of one device; its context's trace written for the merge. */
static void xtool__device_cells(xtool__bench_run *b, int ti, xtool_bench_trace *traces,
                                int *ntraces)
{
    xtool_bench_device *bd = &b->rep->devices[ti];
    bd->t = b->p->targets[ti];
    char dname[32];
    xtool_target_name(bd->t.backend, bd->t.device, dname, sizeof dname);
    double t_open = xtool_now_s();
    xattn_ctx *ctx = xtool__device_open(b, bd, dname);
    if (!ctx) {
        xtool__device_failed(b, ti, dname);
        return;
    }
    if (b->t_first < 0)
        b->t_first = t_open;
    bd->opened = 1;
    bd->has_ceilings = xattn_ceilings_get(ctx, &bd->ceilings) == XATTN_STATUS_OK;
    xtool_progress_clear(&b->prog);
    xtool__device_line(bd, dname);
    if (b->o->passes <= 1 && (ti == 0 || !b->rep->devices[ti - 1].opened))
        xtool_bench_table_header(stdout, b->casew);
    fflush(stdout);
    /* --passes: every cell of the device in turn, then again, so that a burst of
     * load hits every cell alike; each cell's samples pooled. */
    int base = b->rep->n_results, passes = b->o->passes > 1 ? b->o->passes : 1;
    for (b->pass = 0; b->pass < passes; b->pass++) {
        if (b->pass > 0 && xtool__budget_spent(b)) {
            b->rep->budget_hit = 1;
            break;
        }
        b->next = base;
        for (int ci = 0; ci < b->p->nc; ci++)
            xtool__case_cells(b, ctx, ti, ci, dname);
        if (passes > 1) {
            xtool_progress_clear(&b->prog);
            printf("%-9s pass %d of %d done\n", dname, b->pass + 1, passes);
            fflush(stdout);
        }
    }
    if (b->pass > b->rep->passes_done)
        b->rep->passes_done = b->pass;
    if (passes > 1) { /* the rows once the device's passes are done, under their header */
        xtool_progress_clear(&b->prog);
        xtool_bench_table_header(stdout, b->casew);
        for (int i = base; i < b->rep->n_results; i++)
            xtool_bench_table_row(stdout, b->rep, &b->rep->results[i], b->casew);
        fflush(stdout);
    }
    b->pass = 0;
    /* This context's trace, shifted onto the bench's timeline when merged. */
    xtool_bench_trace *pt = &traces[*ntraces];
    snprintf(pt->path, sizeof pt->path, "%s/trace-%s-%d.json", b->o->out_dir,
             xattn_backend_name(bd->t.backend), bd->t.device);
    pt->offset_us = (t_open - b->t_first) * 1e6;
    if (xattn_profiler_export(ctx, XATTN_EXPORT_TRACE, pt->path) == XATTN_STATUS_OK)
        ++*ntraces;
    else
        printf("%-9s trace not written: %s\n", dname, xattn_last_error());
    xattn_ctx_destroy(ctx);
}

int xtool_bench_run(const xtool_bench_plan *p, xtool_bench_report *rep, xtool_bench_trace *traces,
                    int *ntraces)
{
    xtool__bench_run b;
    memset(&b, 0, sizeof b);
    b.p = p;
    b.o = &p->o;
    b.rep = rep;
    b.casew = xtool_bench_plan_casew(p);
    b.t_first = -1;
    b.t_start = xtool_now_s();
    b.refs = calloc((size_t)(p->nc ? p->nc : 1), sizeof *b.refs);
    size_t cap = (size_t)(p->o.reps > 0 ? p->o.reps : 1);
    b.keep = malloc(cap * sizeof *b.keep);
    b.keep_cpu = malloc(cap * sizeof *b.keep_cpu);
    if (!b.refs || !b.keep || !b.keep_cpu) {
        free(b.refs);
        free(b.keep);
        free(b.keep_cpu);
        return -1;
    }
    *ntraces = 0;
    xtool_progress_init(&b.prog, p->o.progress, p->cells * (p->o.passes > 1 ? p->o.passes : 1));
    for (int ti = 0; ti < p->nt; ti++)
        xtool__device_cells(&b, ti, traces, ntraces);
    xtool_progress_done(&b.prog);
    for (int i = 0; i < p->nc; i++)
        xtool_case_ref_free(&b.refs[i].ref);
    free(b.refs);
    free(b.keep);
    free(b.keep_cpu);
    return 0;
}

void xtool_bench_results_free(xtool_bench_report *rep)
{
    for (int i = 0; rep->results && i < rep->n_results; i++) {
        free(rep->results[i].samples);
        free(rep->results[i].cpu_samples);
        rep->results[i].samples = rep->results[i].cpu_samples = NULL;
    }
}
