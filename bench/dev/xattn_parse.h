/* Transitional: the name under which the CPU micro-kernel benchmark
 * (xattn_ukbench*.c) calls the tool's integer parser (bench/tool/xtool_parse.h).
 * It moved here from bench/ while another branch changed it; once that
 * branch is merged, its calls take the xtool_ name and this header goes. */
#ifndef XATTN_UKBENCH_PARSE_H
#define XATTN_UKBENCH_PARSE_H

#include "xtool_parse.h"

#define xattn_parse_i64 xtool_parse_i64

#endif
