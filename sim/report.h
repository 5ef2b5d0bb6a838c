/*
 * report.h — ramex-fleet's output: the figures table (text), the JSON
 * summary and the SVG chart of fleet RAM over time, one panel per policy.
 * Owns formatting only; every number comes from struct fleet_result.
 */
#ifndef RAMEX_SIM_REPORT_H
#define RAMEX_SIM_REPORT_H

#include "sim/fleet.h"

#include <stdio.h>

void report_table(FILE *out, const struct fleet_config *c,
                  const struct fleet_result *r, int n);
void report_json(FILE *out, const struct fleet_config *c,
                 const struct fleet_result *r, int n);
void report_svg(FILE *out, const struct fleet_config *c,
                const struct fleet_result *r, int n);

#endif
