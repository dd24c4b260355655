/* Transitional, until xattn_ukbench moves to bench/dev/: the name under which
 * the CPU micro-kernel benchmark calls the tool's integer parser
 * (bench/tool/xtool_parse.h). */
#ifndef XATTN_UKBENCH_PARSE_H
#define XATTN_UKBENCH_PARSE_H

#include "xtool_parse.h"

#define xattn_parse_i64 xtool_parse_i64

#endif
