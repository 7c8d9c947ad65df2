// `tfboot local`: every task of --cluster as a process on this machine (SPEC §8).
#pragma once

#include "error.h"
#include "options.h"

namespace tfboot {

Result<int> run_local(const Options& options, const Environment& env);

}  // namespace tfboot
