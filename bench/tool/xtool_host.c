/* The machine a run is made on: its name and system, the time, its load and
 * CPUs (xtool.h). */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "xtool.h"

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

void xtool_json_provenance(FILE *f, const char *schema, const char *created,
                           const char *command_line, const char *host, const char *os)
{
    fprintf(f, "{\n  \"schema\": ");
    xattn__json_str(f, schema);
    fprintf(f, ",\n  \"xattn_version\": ");
    xattn__json_str(f, xattn_version_string());
    fprintf(f, ",\n  \"created_utc\": ");
    xattn__json_str(f, created);
    fprintf(f, ",\n  \"command_line\": ");
    xattn__json_str(f, command_line);
    fprintf(f, ",\n  \"host\": {\"hostname\": ");
    xattn__json_str(f, host);
    fprintf(f, ", \"os\": ");
    xattn__json_str(f, os);
    fputc('}', f);
}

void xtool_json_load(FILE *f, int cpus, const double start[3], const double end[3])
{
    fprintf(f, "{\"cpus\": %d, \"start\": [", cpus);
    for (int i = 0; i < 3; i++) {
        fputs(i ? ", " : "", f);
        xattn__json_num(f, start[i]);
    }
    fputs("], \"end\": [", f);
    for (int i = 0; i < 3; i++) {
        fputs(i ? ", " : "", f);
        xattn__json_num(f, end[i]);
    }
    fprintf(f, "], \"busy\": %s}", xtool_load_busy(cpus, start, end) ? "true" : "false");
}

int xtool_cpus_available(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    return xtool_cpus_online();
}

int xtool_load_busy(int cpus, const double start[3], const double end[3])
{
    if (cpus <= 0)
        return 0;
    double limit = (double)cpus - 0.5;
    return (isfinite(start[0]) && start[0] > limit) || (isfinite(end[0]) && end[0] > limit);
}

void xtool_load_print(FILE *f, int cpus, const double start[3], const double end[3])
{
    if (!isfinite(start[0]) || !isfinite(end[0]))
        return;
    fprintf(f,
            "load     %.2f at the start, %.2f at the end (1-minute load average, %d CPUs "
            "available): ",
            start[0], end[0], cpus);
    if (xtool_load_busy(cpus, start, end))
        fprintf(f,
                "busy: the machine was oversubscribed (load above %d - 0.5 CPUs), other "
                "work slowed the cells down and widened their intervals; the verdicts stay "
                "interval-based\n",
                cpus);
    else
        fprintf(f, "not oversubscribed; other work on the machine still slows the cells down\n");
}

int xtool_cpus_online(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 1 << 20 ? (int)n : 0;
}
