// libFuzzer target: what platforms and DNS servers hand tfboot as text or bytes: Slurm's host
// list and tasks per node, a downward-API file, a Go-quoted string, and a DNS answer's SOA TTL.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fields.h"

#include "cli/options.h"
#include "dns/names.h"
#include "plan/platforms/downward_api.h"
#include "plan/platforms/slurm_hostlist.h"

// Input: "host list\0tasks per node\0downward-API text\0key\0Go string"; the whole input is
// also read as a DNS message.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)tfboot::negative_answer_ttl(std::span<const unsigned char>(data, size));
  auto parts = split_fields<5>(data, size);
  if (auto hosts = tfboot::expand_hostlist({parts[0], "SLURM_STEP_NODELIST"})) {
    if (hosts->empty() || hosts->size() > tfboot::max_slurm_hosts) __builtin_trap();
    for (const auto& host : *hosts) {
      if (host.empty() || host.find_first_of("[],") != std::string::npos) __builtin_trap();
    }
  }
  if (auto tasks = tfboot::expand_tasks_per_node({parts[1], "SLURM_STEP_TASKS_PER_NODE"})) {
    for (int count : *tasks) {
      if (count < 0) __builtin_trap();
    }
  }
  (void)tfboot::downward_api_value(parts[2], parts[3], "/etc/podinfo/labels");
  (void)tfboot::unquote_go_string(parts[4]);
  return 0;
}
