// The network interface the job's collectives should use: the one whose route reaches the
// coordinator, so a pod with two networks picks the right one (docs/frameworks.md: PyTorch and JAX).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/host_facts.h"

namespace tfboot {

// The interface this host would send from to the first of `addresses` (numeric), or nullopt
// when none is routable. Asks the kernel's routing table: no packet is sent.
std::optional<std::string> interface_towards(const std::vector<std::string>& addresses, const HostFacts& facts);

}  // namespace tfboot
