/*
 * The on-disk caches' files (device ceilings, OpenCL program binaries): one
 * mechanism that trusts nothing it finds on disk, and the formats of the two
 * caches' entries, parsed from memory (tests/fuzz/fuzz_cache.c fuzzes them).
 *
 * Trust (docs/guarantees.md, "Cache files"): a cache folder is used only when
 * it is a real folder (not a symbolic link), owned by the effective user and
 * not writable by group or others; folders the library creates are made 0700.
 * A file is read only when it is a regular file (never a FIFO, device or
 * symbolic link), owned by the user, not writable by group or others, and no
 * larger than its cache's bound; it is read into memory counted by the
 * context's tracking allocator. Files are written to a temporary file created
 * exclusively (O_CREAT|O_EXCL, mode 0600) in the same folder, then renamed.
 * Anything else makes the cache skip that folder or file, with a reason for
 * a warning: a cache problem is never the caller's error.
 */
#ifndef XATTN_FILE_H
#define XATTN_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "xattn.h"

struct xattn_ctx;

/* Results of the functions below. */
#define XATTN__FILE_OK 0
#define XATTN__FILE_ABSENT 1  /* no such folder or file: nothing to report */
#define XATTN__FILE_SKIP (-1) /* not used; `why` says why (for a warning) */

/* Largest cache files read: ceilings files are under 2 KiB; program binaries
 * of every driver seen are a few MiB at most (PoCL: ~300 KiB). */
#define XATTN__CEIL_FILE_MAX ((size_t)64 << 10)
#define XATTN__PROG_FILE_MAX ((size_t)64 << 20)

/* 64-bit FNV-1a of n bytes, continuing from h (XATTN__FNV_INIT to start). */
#define XATTN__FNV_INIT 0xcbf29ce484222325ull
uint64_t xattn__fnv1a64(uint64_t h, const void *data, size_t n);

/* The cache root: $XATTN_CACHE_DIR, else $XDG_CACHE_HOME/xattn, else
 * $HOME/.cache/xattn. 0 when the disk cache is off: XATTN_CACHE_DIR is set to
 * "", no variable names a folder, or the path does not fit in n bytes. */
int xattn__cache_root(char *out, size_t n);

/* Opens the folder `root` (and, when `sub` is not NULL, its subfolder `sub`,
 * one name without '/') for the cache files, and checks that it can be
 * trusted. With `create`, missing folders are created with mode 0700 (each
 * missing parent of root too); without, a missing folder is ABSENT. OK: *dfd
 * is a descriptor of the folder (close it). */
int xattn__cache_dir_open(const char *root, const char *sub, int create, int *dfd, char *why,
                          size_t whyn);

/* Reads the file `name` of the folder dfd whole, when it can be trusted and
 * holds at most `max` bytes, into memory counted by ctx's tracking allocator
 * (`what` names it in a refusal; ctx NULL: plain host memory). OK: *data
 * holds *len bytes plus a terminating NUL; release it with xattn__file_free.
 * A FIFO never blocks. */
int xattn__file_read(int dfd, const char *name, size_t max, struct xattn_ctx *ctx, const char *what,
                     unsigned char **data, size_t *len, char *why, size_t whyn);
void xattn__file_free(struct xattn_ctx *ctx, unsigned char *data, size_t len);

/* `bytes` of host memory for cache work, counted by ctx's allocator (ctx NULL:
 * plain host memory); NULL with *why when it does not fit the context's
 * memory limit or the system refuses it (the caller's last error is left as
 * it was). Release with xattn__file_release(ctx, p, bytes). */
void *xattn__file_alloc(struct xattn_ctx *ctx, uint64_t bytes, const char *what, char *why,
                        size_t whyn);
void xattn__file_release(struct xattn_ctx *ctx, void *p, uint64_t bytes);

/* Pieces of a file's content, written in order. */
typedef struct xattn__file_part {
    const void *data;
    size_t len;
} xattn__file_part;

/* Replaces the file `name` of the folder dfd with the parts: written to a new
 * temporary file of the folder (created exclusively, mode 0600), then renamed
 * over `name` (which is replaced, never followed, whatever it is). OK or SKIP. */
int xattn__file_write(int dfd, const char *name, const xattn__file_part *parts, int nparts,
                      char *why, size_t whyn);

/* ---- tune entries (the OpenCL tiles and the CUDA configurations) -------- */

/*
 * A tune entry is the file <root>/<sub>/<name> holding `key` (which begins
 * with the format's magic line and names the device, driver and case), then
 * `field` ("tile=", "config=") and one value line ending the file.
 * xattn__tune_entry_read: XATTN__FILE_OK with the value (without its newline)
 * in value[valuen]; XATTN__FILE_ABSENT when there is none; XATTN__FILE_SKIP
 * with `why` when it cannot be read or is not this key's entry (`stale`, the
 * case in words, ends the stale message). The memory is counted by owner.
 */
int xattn__tune_entry_read(const char *root, const char *sub, const char *name,
                           struct xattn_ctx *owner, size_t max, const char *magic, const char *key,
                           const char *field, const char *stale, char *value, size_t valuen,
                           char *why, size_t whyn);
/* Writes the entry (atomically, xattn__file_write): XATTN__FILE_OK or
 * XATTN__FILE_SKIP with `why`. */
int xattn__tune_entry_write(const char *root, const char *sub, const char *name, const char *key,
                            const char *field, const char *value, char *why, size_t whyn);

/* ---- entry formats (memory in, memory out) ------------------------------- */

/* A program-cache entry: 8 bytes of magic, u32 key length, the key, u64
 * binary length, the binary, u64 FNV-1a of the binary (host byte order).
 * Parse: OK with the binary at buf + *bin_off, *bin_len bytes (> 0), or SKIP
 * with *reason ("not a program-cache file", "truncated or corrupt", "written
 * for another device, driver, source or build options"). */
#define XATTN__PROG_MAGIC "XATTNCL1"
#define XATTN__PROG_HEAD_MAX 4096 /* bytes of header xattn__prog_entry_head may write */
int xattn__prog_entry_parse(const unsigned char *buf, size_t n, const char *key, size_t *bin_off,
                            size_t *bin_len, const char **reason);
/* The header of an entry (what precedes the binary) into head (at least
 * XATTN__PROG_HEAD_MAX bytes) and the trailer (the checksum) into tail[8];
 * returns the header's length, 0 when the key is too long. */
size_t xattn__prog_entry_head(unsigned char *head, unsigned char tail[8], const char *key,
                              const void *bin, size_t bin_len);

/* A ceilings file (key=value lines, xattn_ceilings.c): 1 when text (n bytes)
 * holds a valid entry for `key`, filled into *c (cache_path and from_cache
 * are left to the caller); 0 otherwise. */
int xattn__ceil_parse(const char *text, size_t n, const char *key, xattn_ceilings *c);
/* Writes the file for `key` and *c into out; its length, or 0 when it does
 * not fit in n bytes. Parsing it back gives the same figures, bit for bit. */
size_t xattn__ceil_format(char *out, size_t n, const char *key, const xattn_ceilings *c);
/* Other processes' share (0..1) of the host's CPU time over an interval, from
 * its deltas (seconds): the host's busy and total CPU time, this process's CPU
 * time; -1 when it cannot be told (under 0.2 CPU-seconds in all: too few of
 * the kernel's clock ticks). */
double xattn__ceil_load_share(double busy, double total, double self);

#endif /* XATTN_FILE_H */
