/* Transitional: the names under which the CPU micro-kernel benchmark
 * (xattn_ukbench*.c) calls the tool's statistics (bench/tool/xtool_stats.h).
 * It moved here from bench/ while another branch changed it; once that
 * branch is merged, its calls take the xtool_ names and this header goes. */
#ifndef XATTN_UKBENCH_STATS_H
#define XATTN_UKBENCH_STATS_H

#include "xtool_stats.h"

#define xattn_now_s xtool_now_s
#define xattn_stats xtool_stats
#define xattn_stats_compute xtool_stats_compute

#endif
