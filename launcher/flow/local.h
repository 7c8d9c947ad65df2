// `tfboot local`: every task of --cluster as a process on this machine (docs/deploying.md: tfboot local).
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "cli/options.h"

namespace tfboot {

// `inherited`: tfboot's environment entries, passed on to every task with its own TF_CONFIG.
Result<int> run_local(const Options& options, const Environment& env, const std::vector<std::string>& inherited);

}  // namespace tfboot
