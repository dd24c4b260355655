/* The machine a run is made on: its name and system, the time, its load and
 * CPUs (xtool.h). */
#include <math.h>
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

int xtool_cpus_online(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 1 << 20 ? (int)n : 0;
}
