// join_job: runs the start barrier as the coordinator or as a task (join_sides.h) and returns the
// link kept after the start (link.h). The decisions are made by the pure types of protocol/.
#include "control/join.h"

#include <algorithm>

#include "base/log.h"
#include "control/auth.h"
#include "control/join_sides.h"
#include "control/network_probe.h"
#include "control/relay.h"
#include "version.h"

namespace tfboot {
namespace {

// A relay listens on every address, unless its name resolves to one loopback address: tasks of one
// machine, each on an address of its own. A lookup that fails is asked again, three times in all
// (a DNS server busy with hundreds of starting tasks may miss the 2 s deadline), then said: relays
// that share a machine, each on every address, would take the port from one another.
std::string relay_listener_address(const JobSettings& settings) {
  if (!settings.task_addresses) return "";
  auto addresses = settings.task_addresses(settings.self);
  for (int tries = 1; !addresses && tries < 3; ++tries) addresses = settings.task_addresses(settings.self);
  if (!addresses) {
    log::info("relay: its own name did not resolve ({}); listening on every address", addresses.error().message);
    return "";
  }
  if (addresses->size() != 1 || !(*addresses)[0].starts_with("127.")) return "";
  return (*addresses)[0];
}

}  // namespace

Result<std::unique_ptr<JobLink>> join_job(const JobSettings& settings, const Fingerprint& own) {
  if (auto valid = check_job_settings(settings); !valid) return std::unexpected(valid.error());
  auto instance = make_nonce();
  if (!instance) return std::unexpected(instance.error());
  Hello hello{settings.job_id, settings.self, settings.hostname, instance->substr(0, 16), settings.supervise,
              settings.own_name, settings.own_addresses, own, "", "", settings.wants_table, 0};
  // Strings that go on the wire are bounded there; cut here so that our own hello is never refused.
  hello.host = hello.host.substr(0, 253);
  hello.name = hello.name.substr(0, 253);
  if (hello.addresses.size() > 64) hello.addresses.resize(64);
  const Instant now = SteadyClock::now();
  hello.started_ms_ago = started_ms_ago(settings.started, now);
  hello.processes = settings.processes_per_node;
  hello.preflight = settings.node_figures;
  if (hello.preflight) {  // bounded on the wire as every text is: a path or an error message
    auto bound = [](DirectoryFigures& directory) {
      directory.path = directory.path.substr(0, 4096);
      directory.problem = directory.problem.substr(0, 4096);
    };
    bound(hello.preflight->log_root);
    if (hello.preflight->checkpoint_dir) bound(*hello.preflight->checkpoint_dir);
    auto& gpus = hello.preflight->silent_gpus;  // 16 KiB at most, well inside a task's 64 KiB line
    if (gpus.size() > 32) gpus.resize(32);
    for (auto& gpu : gpus) gpu = gpu.substr(0, 512);
  }
  hello.tfboot = std::string(TFBOOT_VERSION_STRING " (" TFBOOT_COMMIT ")").substr(0, max_tfboot_version);
  // --preflight network, at the job's first start (a restart in place keeps the nodes it measured):
  // the probe's port is ours before the hello says it.
  std::optional<NetworkProbe> probe;
  if (settings.preflight == PreflightLevel::network && settings.restarts == 0 && settings.tasks.size() > 1) {
    auto opened = NetworkProbe::open(settings.network_port, settings.job_id);
    if (!opened) return std::unexpected(opened.error());
    probe.emplace(std::move(*opened));
    hello.network_port = probe->port();  // --preflight-port, or the one the kernel chose
  }
  const NetworkProbe* own_probe = probe ? &*probe : nullptr;
  // The start tree (docs/supervision.md: The start tree): a relay starts carrying its group at its first join and goes
  // on across restarts in place; a task of a relay's group joins through it.
  const auto position_of = [&](const JobMember& task) {
    return static_cast<std::size_t>(std::find(settings.tasks.begin(), settings.tasks.end(), task) - settings.tasks.begin());
  };
  const std::size_t self = position_of(settings.self);
  const std::size_t coordinator = position_of(settings.coordinator);
  if (is_relay(self, coordinator, settings.tasks.size()) && !relay_running()) {
    auto relay = start_relay(settings, hello, relay_listener_address(settings));
    if (!relay) return std::unexpected(relay.error());
    keep_relay(std::move(*relay));
  }
  if (auto relay = relay_of(self, coordinator, settings.tasks.size())) {
    JobSettings through = settings;
    const JobMember member = settings.tasks[*relay];
    through.coordinator_addresses = [lookup = settings.task_addresses, member] { return lookup(member); };
    through.port = settings.relay_port;
    log::info("start barrier: this task joins through its relay {} on port {}", member.text(), settings.relay_port);
    return join_as_task(through, std::move(hello), now, own_probe);
  }
  if (settings.self != settings.coordinator) return join_as_task(settings, std::move(hello), now, own_probe);
  // Before any connection is accepted, so that none is refused for want of a descriptor.
  auto room = make_room_for_tasks(settings.tasks.size(), coordinator_connections(settings.tasks.size()));
  if (!room) return std::unexpected(room.error());
  auto listener = open_listener(settings.port);
  if (!listener) return std::unexpected(listener.error());
  return join_as_coordinator(settings, std::move(*listener), hello, now, *room, own_probe);
}

}  // namespace tfboot
