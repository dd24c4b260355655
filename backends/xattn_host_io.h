/*
 * Host staging of tensor boxes, through the public API only (buffer reads and
 * writes). Compiled into libxattn (xattn_attention_multi) and into xattn_mpi.
 */
#ifndef XATTN_HOST_IO_H
#define XATTN_HOST_IO_H

#include <stddef.h>

#include "xattn.h"

/*
 * Moves the box [start[i], start[i]+count[i]) of tensor t (logical [B,S,H,D]
 * indices) between its buffer and a packed host array in logical order.
 * f32 = 1: the host side is float, converted from/to t->dtype; 0: raw elements
 * of t->dtype. A write reads the covered byte range first and writes it back
 * whole (one transfer each way), so bytes of the range outside the box keep
 * their values. An empty box does nothing. On failure, err gets a message
 * naming `name`.
 */
xattn_status xattn_host_box_io(const xattn_tensor *t, const int64_t start[4],
                               const int64_t count[4], void *host, int f32, int write,
                               const char *name, char *err, size_t errlen);

#endif
