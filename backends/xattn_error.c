/* Status strings, the per-thread last-error message and the log callback. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "xattn_internal.h"

const char *xattn_status_string(xattn_status status)
{
    switch (status) {
#define XATTN__STATUS_TEXT(name, code, text) \
    case XATTN_STATUS_##name:                \
        return text;
        XATTN_STATUS_MAP(XATTN__STATUS_TEXT)
#undef XATTN__STATUS_TEXT
    }
    return "unknown status";
}

const char *xattn_status_name(xattn_status status)
{
    switch (status) {
#define XATTN__STATUS_NAME(name, code, text) \
    case XATTN_STATUS_##name:                \
        return "XATTN_STATUS_" #name;
        XATTN_STATUS_MAP(XATTN__STATUS_NAME)
#undef XATTN__STATUS_NAME
    }
    return "XATTN_STATUS_UNKNOWN";
}

/* 4 KiB is enough for an OpenCL build log's useful head; longer messages are cut. */
static _Thread_local char xattn__last_error[4096];

const char *xattn_last_error(void) { return xattn__last_error; }

void xattn__clear_error(void) { xattn__last_error[0] = '\0'; }

void xattn__set_error_text(const char *text)
{
    snprintf(xattn__last_error, sizeof xattn__last_error, "%s", text);
}

/* ---- logging ------------------------------------------------------------ */

static xattn_log_fn xattn__log_fn;
static void *xattn__log_user;
static int xattn__log_max = -2; /* -2: not yet read from XATTN_LOG; -1: silent */

static int xattn__env_log_level(void)
{
    const char *e = getenv("XATTN_LOG");
    if (!e || !*e)
        return -1;
    if (!strcasecmp(e, "error"))
        return XATTN_LOG_ERROR;
    if (!strcasecmp(e, "warn"))
        return XATTN_LOG_WARN;
    if (!strcasecmp(e, "info"))
        return XATTN_LOG_INFO;
    if (!strcasecmp(e, "debug"))
        return XATTN_LOG_DEBUG;
    return XATTN_LOG_WARN;
}

void xattn_set_log_callback(xattn_log_fn fn, void *user, xattn_log_level max_level)
{
    xattn__log_fn = fn;
    xattn__log_user = user;
    xattn__log_max = fn ? (int)max_level : -2;
}

static void xattn__vlog(xattn_log_level level, const char *fmt, va_list ap)
{
    int max = xattn__log_max;
    if (max == -2 && !xattn__log_fn) {
        max = xattn__env_log_level();
        xattn__log_max = max;
    }
    if ((int)level > max)
        return;
    char msg[4096];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (xattn__log_fn) {
        xattn__log_fn(level, msg, xattn__log_user);
    } else {
        static const char *names[] = {"error", "warn", "info", "debug"};
        fprintf(stderr, "xattn %s: %s\n", names[level], msg);
    }
}

void xattn__log(xattn_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    xattn__vlog(level, fmt, ap);
    va_end(ap);
}

xattn_status xattn__error(xattn_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(xattn__last_error, sizeof xattn__last_error, fmt, ap);
    va_end(ap);
    xattn__log(XATTN_LOG_ERROR, "%s: %s", xattn_status_name(status), xattn__last_error);
    return status;
}

double xattn__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
