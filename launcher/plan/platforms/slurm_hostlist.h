// Slurm's compact lists: host names ("gpu[07-08],cpu1") and tasks per node ("2,1(x2)"). Pure.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/options.h"
#include "plan/cluster.h"

namespace tfboot {

// More hosts or nodes than one task type may have is a typo (a range like [1-1000000]), not a job.
inline constexpr std::size_t max_slurm_hosts = max_tasks_per_type;

// Names separated by ',' or whitespace; each name may hold bracketed numeric ranges, expanded in
// order with the zero padding of the range's first number: "nid00[2285-2286,2718]" gives nid002285,
// nid002286, nid002718. Several brackets in one name expand the first one slowest
// ("r[1-2]n[1-2]": r1n1, r1n2, r2n1, r2n2). Errors name setting.source.
Result<std::vector<std::string>> expand_hostlist(const Setting& setting);

// "2,1(x2)": tasks on each node in node order, a count with "(xN)" repeated N times.
Result<std::vector<int>> expand_tasks_per_node(const Setting& setting);

}  // namespace tfboot
