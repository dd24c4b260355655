/* Status strings, the per-thread last-error message and the log callback. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "xattn_internal.h"

const char *xattn_status_string(xattn_status status)
{
    switch (status) {
#define XATTN__STATUS_TEXT(name, code, text)                                                       \
    case XATTN_STATUS_##name: return text;
        XATTN_STATUS_MAP(XATTN__STATUS_TEXT)
#undef XATTN__STATUS_TEXT
    }
    return "unknown status";
}

const char *xattn_status_name(xattn_status status)
{
    switch (status) {
#define XATTN__STATUS_NAME(name, code, text)                                                       \
    case XATTN_STATUS_##name: return "XATTN_STATUS_" #name;
        XATTN_STATUS_MAP(XATTN__STATUS_NAME)
#undef XATTN__STATUS_NAME
    }
    return "XATTN_STATUS_UNKNOWN";
}

/* 4 KiB is enough for an OpenCL build log's useful head; longer messages are cut. */
static _Thread_local char xattn__last_error[4096];

const char *xattn_last_error(void)
{
    return xattn__last_error;
}

void xattn__clear_error(void)
{
    xattn__last_error[0] = '\0';
}

void xattn__set_error_text(const char *text)
{
    snprintf(xattn__last_error, sizeof xattn__last_error, "%s", text);
}

/* ---- logging ------------------------------------------------------------ */

/*
 * The registration (callback, its user pointer, its level) changes only under
 * xattn__log_lock, and a message is delivered from a copy taken under it, so
 * that a callback is never called with another registration's pointer. The
 * level is also kept in an atomic, read without the lock, so that a message
 * nobody listens to costs one load. xattn_set_log_callback returns only when
 * no thread is still inside the previous callback (unless it is called from
 * inside a callback, where it cannot wait), so the caller may free what `user`
 * pointed to as soon as it returns.
 */
static pthread_mutex_t xattn__log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t xattn__log_idle = PTHREAD_COND_INITIALIZER;
static xattn_log_fn xattn__log_fn;        /* under the lock */
static void *xattn__log_user;             /* under the lock */
static int xattn__log_inflight;           /* callbacks running, under the lock */
static _Thread_local int xattn__log_mine; /* callbacks running on this thread */
static atomic_int xattn__log_max = -1;    /* most verbose level delivered; -1: none */
static pthread_once_t xattn__log_env_once = PTHREAD_ONCE_INIT;

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

/* The default (no callback): XATTN_LOG's level, read once. */
static void xattn__log_env_init(void)
{
    pthread_mutex_lock(&xattn__log_lock);
    if (!xattn__log_fn)
        atomic_store(&xattn__log_max, xattn__env_log_level());
    pthread_mutex_unlock(&xattn__log_lock);
}

void xattn_set_log_callback(xattn_log_fn fn, void *user, xattn_log_level max_level)
{
    pthread_once(&xattn__log_env_once, xattn__log_env_init);
    pthread_mutex_lock(&xattn__log_lock);
    xattn__log_fn = fn;
    xattn__log_user = fn ? user : NULL;
    atomic_store(&xattn__log_max, fn ? (int)max_level : xattn__env_log_level());
    /* From inside a callback it cannot wait: two threads doing so would wait
     * for each other. */
    while (xattn__log_mine == 0 && xattn__log_inflight > 0)
        pthread_cond_wait(&xattn__log_idle, &xattn__log_lock);
    pthread_mutex_unlock(&xattn__log_lock);
}

static void xattn__vlog(xattn_log_level level, const char *fmt, va_list ap)
{
    pthread_once(&xattn__log_env_once, xattn__log_env_init);
    if ((int)level > atomic_load_explicit(&xattn__log_max, memory_order_relaxed))
        return;
    char msg[4096];
    vsnprintf(msg, sizeof msg, fmt, ap);
    pthread_mutex_lock(&xattn__log_lock);
    const xattn_log_fn fn = xattn__log_fn;
    void *const user = xattn__log_user;
    const int wanted = (int)level <= atomic_load(&xattn__log_max);
    if (fn && wanted)
        xattn__log_inflight++;
    pthread_mutex_unlock(&xattn__log_lock);
    if (!wanted)
        return;
    if (!fn) {
        static const char *names[] = {"error", "warn", "info", "debug"};
        fprintf(stderr, "xattn %s: %s\n", names[level], msg);
        return;
    }
    xattn__log_mine++;
    fn(level, msg, user);
    xattn__log_mine--;
    pthread_mutex_lock(&xattn__log_lock);
    if (--xattn__log_inflight == 0)
        pthread_cond_broadcast(&xattn__log_idle);
    pthread_mutex_unlock(&xattn__log_lock);
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
    /* Formatted apart first: a caller may pass xattn_last_error() itself as
     * an argument (adding context to a message), and vsnprintf must not read
     * the buffer it writes. */
    char msg[sizeof xattn__last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(xattn__last_error, msg, sizeof msg);
    xattn__log(XATTN_LOG_ERROR, "%s: %s", xattn_status_name(status), xattn__last_error);
    return status;
}

double xattn__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
