// Slurm's compact lists: host names ("gpu[07-08],cpu1") and tasks per node ("2,1(x2)"). Pure.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/choices.h"
#include "base/setting.h"
#include "plan/cluster.h"

namespace tfboot {

// More hosts or nodes than one task type may have is a typo (a range like [1-1000000]), not a job.
inline constexpr std::size_t max_slurm_hosts = max_tasks_per_type;

// Names separated by ',', ' ' or tab, expanded as libslurm expands them (scontrol show hostnames):
// a name may end in bracketed numeric ranges, expanded in order with the zero padding of the
// range's first number, numbers up to 2^64-1: "nid00[2285-2286,2718]" gives nid002285, nid002286,
// nid002718. With several brackets the last varies fastest, then the first, the second, ...:
// "row[0,1]_rack[2-3]_blade[4,5]" gives row0_rack2_blade4, row0_rack2_blade5, row1_rack2_blade4,
// row1_rack2_blade5, row0_rack3_blade4, ... Text after the last bracket, which libslurm refuses, is
// an error, as is a host name longer than 253 characters. Errors name setting.source.
Result<std::vector<std::string>> expand_hostlist(const Setting& setting);

// "2,1(x2)": tasks on each node in node order, a count with "(xN)" repeated N times.
Result<std::vector<int>> expand_tasks_per_node(const Setting& setting);

}  // namespace tfboot
