/* Transitional, until xattn_ukbench moves to bench/dev/: the names under
 * which the CPU micro-kernel benchmark calls the tool's statistics
 * (bench/tool/xtool_stats.h). */
#ifndef XATTN_UKBENCH_STATS_H
#define XATTN_UKBENCH_STATS_H

#include "xtool_stats.h"

#define xattn_now_s xtool_now_s
#define xattn_stats xtool_stats
#define xattn_stats_compute xtool_stats_compute

#endif
