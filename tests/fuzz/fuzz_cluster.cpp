// libFuzzer target: cluster spec, port spec and peer template -> peer names.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "fields.h"

#include "plan/cluster.h"

// Input: "cluster spec\0port spec\0peer template\0hostname".
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto parts = split_fields<4>(data, size);
  auto spec = tfboot::parse_cluster_spec({parts[0], "--cluster"});
  auto ports = tfboot::parse_port_spec({parts[1], "--port"});
  auto peer_template = tfboot::make_peer_template({parts[2], "--peer-template"}, tfboot::split_hostname(parts[3]));
  if (!spec || !ports || !peer_template) return 0;
  int total = 0;
  for (int count : spec->counts) total += count;
  if (total > 2000) return 0;  // large clusters are fine but slow the fuzzer down
  for (bool chief_at_0 : {false, true}) {
    auto peers = tfboot::plan_peers(*spec, *ports, *peer_template, std::nullopt, chief_at_0);
    if (!peers) continue;
    std::set<std::string> names;
    for (const auto& peer : *peers) {
      if (tfboot::dns_name_problem(peer.name) || peer.port < 1 || peer.port > 65535) __builtin_trap();
      if (!names.insert(peer.name).second) __builtin_trap();  // plan_peers promises distinct names
    }
    if (static_cast<int>(peers->size()) != total) __builtin_trap();
  }
  return 0;
}
