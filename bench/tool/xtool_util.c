/* Helpers of the xattn tool: device selection, --lengths files, the progress
 * bar, JSON/CSV/XML escaping, machine description, record printing. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "xtool.h"

const char *xtool_prog = "xattn";

/* ---- devices ---------------------------------------------------------------- */

void xtool_target_name(xattn_backend be, int device, char *out, size_t n)
{
    snprintf(out, n, "%s:%d", xattn_backend_name(be), device);
}

int xtool_targets_select(const xtool_cli_opts *o, xtool_target *out, int cap, FILE *notes)
{
    int count = 0;
    for (int b = 0; b < XATTN_BACKEND_COUNT; b++) {
        xattn_backend be = (xattn_backend)b;
        int wanted = o->n_backends == 0;
        for (int i = 0; i < o->n_backends; i++)
            wanted |= o->backends[i] == be || o->backends[i] == XATTN_BACKEND_AUTO;
        if (!wanted)
            continue;
        if (xattn_backend_available(be) != XATTN_STATUS_OK) {
            if (notes)
                fprintf(notes, "%-7s skipped: %s\n", xattn_backend_name(be), xattn_last_error());
            continue;
        }
        int nd = 0;
        xattn_device_count(be, &nd);
        for (int d = 0; d < nd && count < cap; d++) {
            if (o->device >= 0 && d != o->device)
                continue;
            out[count].backend = be;
            out[count].device = d;
            memset(&out[count].info, 0, sizeof out[count].info);
            if (xattn_device_get_info(be, d, &out[count].info) != XATTN_STATUS_OK)
                snprintf(out[count].info.name, sizeof out[count].info.name, "?");
            count++;
        }
        if (o->device >= nd && notes)
            fprintf(notes, "%-7s skipped: no device %d (it has %d)\n", xattn_backend_name(be),
                    o->device, nd);
    }
    return count;
}

int xtool_targets_bad_device(const xtool_cli_opts *o, char *err, size_t errlen)
{
    if (o->device < 0)
        return 0;
    size_t k = 0;
    int any = 0;
    err[0] = '\0';
    for (int b = 0; b < XATTN_BACKEND_COUNT; b++) {
        xattn_backend be = (xattn_backend)b;
        int wanted = o->n_backends == 0;
        for (int i = 0; i < o->n_backends; i++)
            wanted |= o->backends[i] == be || o->backends[i] == XATTN_BACKEND_AUTO;
        int nd = 0;
        if (!wanted || xattn_backend_available(be) != XATTN_STATUS_OK ||
            xattn_device_count(be, &nd) != XATTN_STATUS_OK)
            continue;
        if (o->device < nd)
            return 0;
        if (k < errlen)
            k += (size_t)snprintf(err + k, errlen - k, "%s%s has %d", any ? ", " : "",
                                  xattn_backend_name(be), nd);
        any = 1;
    }
    if (!any)
        return 0;
    char list[256];
    snprintf(list, sizeof list, "%s", err);
    snprintf(err, errlen, "--device %d: no backend asked for has such a device (%s)", o->device,
             list);
    return 1;
}

/* More worker threads than the CPU has compute units run many times slower
 * (they share cores, and every OpenMP barrier waits for a descheduled one):
 * said once per process, not silently. */
static void xtool__warn_threads(const xtool_cli_opts *o, xattn_ctx *ctx)
{
    static int warned;
    xattn_device_info info;
    if (warned || xattn_ctx_device_info(ctx, &info) != XATTN_STATUS_OK || info.compute_units <= 0)
        return;
    int most = o->threads;
    for (int i = 0; i < o->thread_list.n; i++)
        if (o->thread_list.v[i] > most)
            most = (int)o->thread_list.v[i];
    if (most <= info.compute_units)
        return;
    warned = 1;
    fprintf(stderr,
            "%s: warning: --threads %d is more than the CPU's %d compute units (the CPUs OpenMP "
            "uses here: the process's affinity, or OMP_NUM_THREADS): threads beyond them share "
            "cores, and OpenMP's barriers can make each call many times slower\n",
            xtool_prog, most, info.compute_units);
}

xattn_status xtool_ctx_open(const xtool_cli_opts *o, xattn_backend be, int device, xattn_ctx **ctx)
{
    xattn_status st = xattn_ctx_create(be, device, ctx);
    if (st == XATTN_STATUS_OK && xattn_ctx_backend(*ctx) == XATTN_BACKEND_CPU)
        xtool__warn_threads(o, *ctx);
    if (st == XATTN_STATUS_OK && o->threads && xattn_ctx_backend(*ctx) == XATTN_BACKEND_CPU)
        st = xattn_ctx_set_option(*ctx, XATTN_OPT_NUM_THREADS, o->threads);
    if (st == XATTN_STATUS_OK && o->cpu_simd && xattn_ctx_backend(*ctx) == XATTN_BACKEND_CPU)
        st = xattn_ctx_set_option(*ctx, XATTN_OPT_CPU_SIMD, o->cpu_simd);
    if (st != XATTN_STATUS_OK) {
        xattn_ctx_destroy(*ctx);
        *ctx = NULL;
    }
    return st;
}

/* ---- memory ------------------------------------------------------------------ */

void xtool_mem_room_read(xattn_ctx *ctx, const xtool_target *t, xtool_mem_room *r)
{
    memset(r, 0, sizeof *r);
    uint64_t total = 0, avail = 0;
    if (xattn_ctx_device_memory(ctx, &total, &avail) == XATTN_STATUS_OK) {
        r->device = (double)avail;
        r->device_total = (double)total;
    }
    r->same = t->info.device_type == XATTN_DEVICE_TYPE_CPU;
    if (r->same) {
        r->host = r->device;
        return;
    }
    /* The host's figure through a CPU context, made once: bench reads it before
     * every case and cell of a GPU (the tool is single-threaded). */
    static xattn_ctx *cpu;
    static int tried;
    if (!tried) {
        tried = 1;
        if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &cpu) != XATTN_STATUS_OK)
            cpu = NULL;
    }
    if (cpu && xattn_ctx_device_memory(cpu, NULL, &avail) == XATTN_STATUS_OK)
        r->host = (double)avail;
}

int xtool_mem_fits(const xtool_mem_room *r, double device_bytes, double host_bytes,
                   const char *what, char *msg, size_t n)
{
    char need[32], have[32];
    if (r->same) {
        double all = device_bytes + host_bytes;
        if (r->host <= 0 || all <= r->host)
            return 0;
        xtool_fmt_bytes(all, need, sizeof need);
        xtool_fmt_bytes(r->host, have, sizeof have);
        snprintf(msg, n, "needs %s for %s, %s available", need, what, have);
        return -1;
    }
    if (r->device > 0 && device_bytes > r->device) {
        xtool_fmt_bytes(device_bytes, need, sizeof need);
        xtool_fmt_bytes(r->device, have, sizeof have);
        snprintf(msg, n, "needs %s of device memory for %s, %s available", need, what, have);
        return -1;
    }
    if (r->host > 0 && host_bytes > r->host) {
        xtool_fmt_bytes(host_bytes, need, sizeof need);
        xtool_fmt_bytes(r->host, have, sizeof have);
        snprintf(msg, n, "needs %s of host memory for %s, %s available", need, what, have);
        return -1;
    }
    return 0;
}

/* ---- output files -------------------------------------------------------------- */

int xtool_out_probe(const char *flag, const char *path, int *created, char *err, size_t errlen)
{
    struct stat sb;
    int existed = stat(path, &sb) == 0;
    if (created)
        *created = 0;
    if (existed && S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s: '%s' is a folder, not a file", flag, path);
        return XTOOL_EXIT_USAGE;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot write '%s': %s", flag, path, strerror(errno));
        return XTOOL_EXIT_USAGE;
    }
    close(fd);
    if (created)
        *created = !existed;
    return 0;
}

/* ---- inputs ------------------------------------------------------------------ */

char *xtool_read_text(const char *path, size_t max_bytes, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap) {
            if (ferror(f)) {
                snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
                free(buf);
                buf = NULL;
            }
            break;
        }
        if (cap >= max_bytes) {
            snprintf(err, errlen, "'%s' is larger than %zu bytes", path, max_bytes);
            free(buf);
            buf = NULL;
            break;
        }
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
        } else {
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        if (!err[0])
            snprintf(err, errlen, "out of memory reading '%s'", path);
        return NULL;
    }
    buf[len] = '\0';
    if (memchr(buf, '\0', len)) {
        snprintf(err, errlen, "'%s' is not a text file (it holds NUL bytes)", path);
        free(buf);
        return NULL;
    }
    return buf;
}

int xtool_lengths_load(const char *path, int64_t sq_fixed, int32_t **lq, int32_t **lk, int *n,
                       char *err, size_t errlen)
{
    enum { XTOOL__MAX_SEQS = 65536 };
    err[0] = '\0';
    *lq = *lk = NULL;
    char e2[256] = "";
    char *text = xtool_read_text(path, 8u << 20, e2, sizeof e2);
    if (!text) {
        snprintf(err, errlen, "--lengths: %s", e2);
        return XTOOL_EXIT_USAGE;
    }
    int32_t *q = malloc(XTOOL__MAX_SEQS * sizeof *q), *k = malloc(XTOOL__MAX_SEQS * sizeof *k);
    if (!q || !k) {
        free(text);
        free(q);
        free(k);
        snprintf(err, errlen, "--lengths: out of memory");
        return XTOOL_EXIT_FAIL;
    }
    int rc = xtool_cli_parse_lengths(text, q, k, XTOOL__MAX_SEQS, n, e2, sizeof e2);
    free(text);
    if (rc) {
        snprintf(err, errlen, "--lengths %s: %s", path, e2);
        free(q);
        free(k);
        return rc;
    }
    for (int i = 0; i < *n; i++) {
        if (q[i] < 0)
            q[i] = sq_fixed > 0 ? (int32_t)sq_fixed : k[i];
        else if (sq_fixed > 0 && q[i] > sq_fixed) {
            snprintf(err, errlen,
                     "--lengths %s: sequence %d has %d query tokens, more than --sq %lld", path,
                     i + 1, q[i], (long long)sq_fixed);
            free(q);
            free(k);
            return XTOOL_EXIT_USAGE;
        }
    }
    *lq = q;
    *lk = k;
    return 0;
}

/* ---- progress bar ------------------------------------------------------------ */

void xtool_progress_init(xtool_progress *p, int setting, int total)
{
    memset(p, 0, sizeof *p);
    p->on = setting < 0 ? isatty(STDERR_FILENO) : setting;
    p->total = total;
    p->start = xtool_now_s();
}

void xtool_progress_draw(xtool_progress *p, const char *label)
{
    if (!p->on || p->total <= 0)
        return;
    const int width = 24;
    int fill = (int)((double)p->done / p->total * width);
    double el = xtool_now_s() - p->start;
    char eta[32] = "";
    if (p->done > 0 && p->done < p->total)
        snprintf(eta, sizeof eta, ", ~%.0f s left", el / p->done * (p->total - p->done));
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\r\033[K[%s] %d/%d %.0f s%s  %.60s", bar, p->done, p->total, el, eta,
            label ? label : "");
    fflush(stderr);
    p->drawn = 1;
}

void xtool_progress_clear(xtool_progress *p)
{
    if (p->on && p->drawn) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        p->drawn = 0;
    }
}

void xtool_progress_done(xtool_progress *p)
{
    xtool_progress_clear(p);
}

/* ---- escaping (JSON and CSV: the library's writer, xattn_writer.h) ------------ */

void xtool_json_field(FILE *f, const char *key, double v)
{
    xattn__json_key(f, key);
    xattn__json_num(f, v);
}

void xtool_xml_text(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        switch (*p) {
        case '<':
            fputs("&lt;", f);
            p++;
            break;
        case '>':
            fputs("&gt;", f);
            p++;
            break;
        case '&':
            fputs("&amp;", f);
            p++;
            break;
        case '"':
            fputs("&quot;", f);
            p++;
            break;
        case '\'':
            fputs("&apos;", f);
            p++;
            break;
        default: {
            if (*p < 0x20 && *p != '\t' && *p != '\n') { /* not allowed in XML 1.0 */
                fputc(' ', f);
                p++;
                break;
            }
            int len = xattn__utf8_len(p);
            if (len == 0) {
                fputs("&#xFFFD;", f);
                p++;
            } else {
                fwrite(p, 1, (size_t)len, f);
                p += len;
            }
        }
        }
    }
}

void xtool_fmt_bytes(double b, char *out, size_t n)
{
    if (b >= 1099511627776.0 * 10)
        snprintf(out, n, "%.0f TiB", b / 1099511627776.0);
    else if (b >= 1073741824.0)
        snprintf(out, n, "%.2f GiB", b / 1073741824.0);
    else if (b >= 1048576.0)
        snprintf(out, n, "%.1f MiB", b / 1048576.0);
    else if (b >= 1024.0)
        snprintf(out, n, "%.1f KiB", b / 1024.0);
    else
        snprintf(out, n, "%.0f B", b);
}

const char *xtool_fmt_pct(double v, char *out, size_t n)
{
    if (!(v >= 0) || !isfinite(v))
        snprintf(out, n, "-");
    else
        snprintf(out, n, "%.1f%s", v, xtool_stats_over_ceiling(v) ? "!" : "");
    return out;
}

void xtool_command_line(int argc, char **argv, char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    k += (size_t)snprintf(out, n, "%s", xtool_prog);
    for (int i = 0; i < argc && k < n; i++) {
        const char *a = argv[i];
        int plain = *a != '\0';
        for (const char *p = a; *p; p++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+@%",
                        *p))
                plain = 0;
        if (plain) {
            k += (size_t)snprintf(out + k, n - k, " %s", a);
            continue;
        }
        k += (size_t)snprintf(out + k, n - k, " '");
        for (const char *p = a; *p && k < n; p++)
            k += (size_t)(*p == '\'' ? snprintf(out + k, n - k, "'\\''")
                                     : snprintf(out + k, n - k, "%c", *p));
        if (k < n)
            k += (size_t)snprintf(out + k, n - k, "'");
    }
}

void xtool_host_describe(char *host, size_t nhost, char *os, size_t nos)
{
    if (gethostname(host, nhost) != 0)
        snprintf(host, nhost, "?");
    host[nhost - 1] = '\0';
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(os, nos, "%s %s %s", u.sysname, u.release, u.machine);
    else
        snprintf(os, nos, "?");
}

void xtool_utc_now(char *out, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int xtool_load_read(double out[3])
{
    out[0] = out[1] = out[2] = NAN;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f)
        return -1;
    int n = fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]);
    fclose(f);
    if (n != 3) {
        out[0] = out[1] = out[2] = NAN;
        return -1;
    }
    return 0;
}

int xtool_cpus_online(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 1 << 20 ? (int)n : 0;
}

int xtool_mkdir(const char *path)
{
    if (mkdir(path, 0777) == 0)
        return 0;
    if (errno == EEXIST) {
        struct stat s;
        if (stat(path, &s) == 0 && S_ISDIR(s.st_mode))
            return 0;
        errno = ENOTDIR;
    }
    return -1;
}

/* ---- records ------------------------------------------------------------------- */

void xtool_record_print(FILE *f, const xattn_record *r)
{
    char a[32], b[32], c[32];
    /* one call: its own time and the figures derived from it, not the median's */
    fprintf(f,
            "record   #%llu on %s:%d %s, range \"%s\" (the last call: its own time and figures, "
            "not the median's)\n",
            (unsigned long long)r->seq, xattn_backend_name(r->backend), r->device, r->device_name,
            r->range);
    fprintf(f, "  identity   algo %s (asked %s): %s\n", xattn_algo_name(r->algo_chosen),
            xattn_algo_name(r->algo_requested), r->reason);
    fprintf(f,
            "  shape      B%lld Hq%lld Hkv%lld Sq%lld Sk%lld D%lld Dv%lld, q %s, kv %s, "
            "scale %g, softcap %g\n",
            (long long)r->batch, (long long)r->heads, (long long)r->kv_heads, (long long)r->sq,
            (long long)r->sk, (long long)r->head_dim, (long long)r->head_dim_v,
            xattn_dtype_name(r->q_dtype), xattn_dtype_name(r->kv_dtype), (double)r->scale,
            (double)r->softcap);
    fprintf(f,
            "  options    causal %d (%s), window %lld,%lld, bias %d, alibi %d, lse %d, varlen %d, "
            "padded %d, splits %d, tiles %dx%d\n",
            r->causal, r->align == XATTN_ALIGN_TOP_LEFT ? "top-left" : "bottom-right",
            (long long)r->window_left, (long long)r->window_right, r->has_bias, r->has_alibi,
            r->has_lse, r->varlen, r->padded, r->num_splits, r->tile_q, r->tile_k);
    fprintf(
        f, "  time       host %.1f..%.1f us, device %.1f..%.1f us, device %.4f ms, build %.3f ms\n",
        r->host_submit_us, r->host_return_us, r->device_start_us, r->device_end_us, r->device_ms,
        r->build_ms);
    for (int i = 0; i < r->num_phases && i < 4; i++)
        fprintf(f, "  phase      %-8s %.4f ms (from %.1f us)\n", r->phase_names[i], r->phase_ms[i],
                r->phase_start_us[i]);
    xtool_fmt_bytes((double)r->workspace_bytes, a, sizeof a);
    xtool_fmt_bytes((double)r->mem_current_bytes, b, sizeof b);
    xtool_fmt_bytes((double)r->mem_peak_bytes, c, sizeof c);
    fprintf(f, "  memory     workspace %s, context now %s, peak %s", a, b, c);
    if (r->device_mem_total) {
        xtool_fmt_bytes((double)r->device_mem_total, a, sizeof a);
        xtool_fmt_bytes((double)r->device_mem_free, b, sizeof b);
        fprintf(f, ", device %s (%s free)", a, b);
    }
    fprintf(f, "\n");
    fprintf(f,
            "  work       FLOPs dense %.4g, useful %.4g, executed %.4g; bytes min %.4g, actual "
            "%.4g\n",
            r->flops_dense, r->flops_useful, r->flops_executed, r->bytes_min, r->bytes_actual);
    fprintf(f, "  derived    %.2f GFLOP/s useful, %.2f executed, %.2f GB/s, padding waste %.1f%%",
            r->gflops_useful, r->gflops_executed, r->gbytes_per_s, 100.0 * r->padding_waste);
    char pf[16], pb[16];
    if (r->pct_fma_ceiling >= 0)
        fprintf(f, ", %s%% of the FMA ceiling, %s%% of the bandwidth\n",
                xtool_fmt_pct(r->pct_fma_ceiling, pf, sizeof pf),
                xtool_fmt_pct(r->pct_bw_ceiling, pb, sizeof pb));
    else
        fprintf(f, ", no ceilings known (run '%s devices --measure')\n", xtool_prog);
}

void xtool_ceilings_json(FILE *f, xattn_ctx *ctx)
{
    xattn_ceilings c;
    if (!ctx || xattn_ceilings_get(ctx, &c) != XATTN_STATUS_OK) {
        fputs("null", f);
        return;
    }
    fputs("{\"fma_f32_gflops\": ", f);
    xattn__json_num(f, c.fma_f32_gflops);
    fputs(", \"fma_f16_gflops\": ", f);
    xattn__json_num(f, c.fma_f16_gflops);
    fputs(", \"fma_bf16_gflops\": ", f);
    xattn__json_num(f, c.fma_bf16_gflops);
    fputs(", \"mma_f16_gflops\": ", f);
    xattn__json_num(f, c.mma_f16_gflops);
    fputs(", \"mma_bf16_gflops\": ", f);
    xattn__json_num(f, c.mma_bf16_gflops);
    fputs(", \"read_gbps\": ", f);
    xattn__json_num(f, c.read_gbps);
    fputs(", \"copy_gbps\": ", f);
    xattn__json_num(f, c.copy_gbps);
    fprintf(f, ", \"from_cache\": %s, \"cache_path\": ", c.from_cache ? "true" : "false");
    xattn__json_str(f, c.cache_path);
    fputs("}", f);
}
