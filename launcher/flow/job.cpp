// The job step of the flow: settings for the control channel, the barrier, and the link as the
// supervisor sees it.
#include "flow/job.h"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <thread>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "base/text.h"
#include "control/auth.h"
#include "fingerprint/fingerprint.h"
#include "flow/member_names.h"
#include "flow/observed.h"
#include "flow/preflight.h"
#include "flow/processes.h"
#include "observe/phase_clock.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

// chief:0 when the cluster has a chief, else worker:0 (TensorFlow's own choice of chief).
std::optional<JobMember> coordinator_of(const Plan& plan) {
  for (TaskType type : {TaskType::chief, TaskType::worker}) {
    for (const auto& peer : plan.peers) {
      if (peer.type == type && peer.index == 0) return JobMember{type, 0};
    }
  }
  return std::nullopt;
}

const PeerAddress* peer_of(const Plan& plan, const JobMember& member) {
  for (const auto& peer : plan.peers) {
    if (peer.type == member.type && peer.index == member.index) return &peer;
  }
  return nullptr;
}

// The job is its cluster by name, as TF_CONFIG lists it with --address name: the same on every
// task, whatever addresses each one's DNS gave.
Result<std::string> job_id_of(const Options& options, const Plan& plan) {
  Options by_name = options;
  by_name.address = AddressMode::name;
  by_name.print = true;  // the job id needs no check of the environment's size limit
  auto text = make_tf_config_text(by_name, plan, {});
  if (!text) return std::unexpected(text.error());
  return job_id_of_tf_config(*text);
}

// A name that points elsewhere may be a stale record in a DNS cache: it is asked again for this
// long (twice the TTL a default cluster DNS gives its records) before the start is aborted.
constexpr auto stale_record_window = 60s;

// On the coordinator, once every task is present: every name resolved once, then compared with
// the addresses its task reported.
Result<VerifiedMembers> verify_member_names(const Options& options, const std::vector<DnsServer>& dns_servers, const HostFacts& facts,
                                                    const std::vector<PeerAddress>& peers,
                                                    const std::vector<MemberInfo>& members, Instant deadline) {
  observe::PhaseTimer timer(observe::Phase::name_check);  // docs/observing.md
  if (members.size() != peers.size()) return make_error(exit_code::peers_unresolved, "the start barrier's table does not match the cluster");
  deadline = std::min(deadline, SteadyClock::now() + options.wait);
  auto dns = resolve_peer_names(options, dns_servers, peers, facts, deadline);
  if (!dns) return std::unexpected(dns.error());
  auto check = check_member_names(members, dns->names, options.control_source_check);
  const Instant give_up = std::min(deadline, SteadyClock::now() + stale_record_window);
  if (!check.mismatched.empty()) {
    log::warn("start barrier: {}; asking again for up to {}", check.problems,
              seconds_text(std::chrono::ceil<std::chrono::seconds>(give_up - SteadyClock::now())));
  }
  while (!check.mismatched.empty() && SteadyClock::now() + 1s < give_up) {
    std::this_thread::sleep_for(1s);
    for (std::size_t i : check.mismatched) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(give_up - SteadyClock::now());
      if (left.count() <= 0) break;
      auto again = resolve_once(options, dns_servers, facts, peers[i], std::min<std::chrono::milliseconds>(left, 2s));
      dns->names[i].resolved = again.has_value();
      dns->names[i].addresses = again ? *again : std::vector<std::string>{};
    }
    check = check_member_names(members, dns->names, options.control_source_check);
  }
  // A stranger in a task's place is dropped and the barrier waits for the real task; a name that
  // points elsewhere than where its task says it is aborts the start.
  if (check.mismatched.size() > check.strangers.size()) {
    return make_error(exit_code::peers_unresolved, "DNS names that do not point at their tasks (a stale record, or a wrong Service?): " + check.problems);
  }
  VerifiedMembers verified{check.table, {}};
  for (const auto& stranger : check.strangers) verified.strangers.emplace_back(members[stranger.position].task, stranger.problem);
  if (verified.strangers.empty()) log::info("start barrier: every task's name resolves to that task");
  return verified;
}

Result<JobSettings> settings_for(const Options& options, const Plan& plan, const HostFacts& facts,
                                 const std::optional<std::string>& secret, bool supervise, int restarts) {
  JobSettings settings;
  auto job_id = job_id_of(options, plan);
  if (!job_id) return std::unexpected(job_id.error());
  settings.job_id = *job_id;
  for (const auto& peer : plan.peers) settings.tasks.push_back(JobMember{peer.type, peer.index});
  settings.self = JobMember{plan.identity.type, plan.identity.index};
  settings.coordinator = *coordinator_of(plan);
  settings.port = options.control_port;
  settings.start_timeout = options.start_timeout;
  settings.env_check = options.env_check;
  settings.secret = secret;
  settings.supervise = supervise;
  settings.done_when_every_task_is = plan.framework != Framework::tensorflow;
  settings.restarts = restarts;
  settings.max_restarts = supervise ? options.max_restarts : 0;
  settings.stop_together = supervise && options.stop_together;
  settings.hostname = plan.hostname.name;
  if (const PeerAddress* own = peer_of(plan, settings.self)) settings.own_name = own->name;
  settings.own_addresses = routable_addresses(facts.interface_addresses);
  const PeerAddress coordinator = *peer_of(plan, settings.coordinator);
  settings.coordinator_name = coordinator.name;
  // Asked again before each connection: a restarted coordinator pod comes back with a new IP.
  settings.coordinator_addresses = [options, dns_servers = plan.dns_servers, facts, coordinator]() {
    return resolve_once(options, dns_servers, facts, coordinator, 2s);
  };
  settings.relay_port = options.relay_port != 0 ? options.relay_port : options.control_port;
  // Above 128 tasks a task finds its relay by the relay's name (docs/supervision.md: The start tree), asked as the coordinator's is.
  settings.task_addresses = [options, dns_servers = plan.dns_servers, facts, peers = plan.peers](const JobMember& task) -> Result<std::vector<std::string>> {
    for (const auto& peer : peers) {
      if (peer.type == task.type && peer.index == task.index) return resolve_once(options, dns_servers, facts, peer, 2s);
    }
    return make_error(exit_code::usage, task.text() + " is not in the cluster");
  };
  if (options.wait.count() > 0) {
    settings.verify_members = [options, dns_servers = plan.dns_servers, facts, peers = plan.peers](const std::vector<MemberInfo>& members,
                                                                                                  Instant deadline) {
      return verify_member_names(options, dns_servers, facts, peers, members, deadline);
    };
  }
  return settings;
}

std::string summary_json(const JobSettings& settings, const Fingerprint& own, const StartInfo& start) {
  nlohmann::ordered_json summary;
  summary["job_id"] = settings.job_id;
  summary["coordinator"] = settings.coordinator.text();
  summary["control_port"] = settings.port;
  summary["supervised"] = settings.supervise;
  summary["tasks_present"] = start.tasks;
  summary["names_resolved_by_coordinator"] = start.names_verified;
  summary["fingerprint"] = nlohmann::ordered_json::parse(to_json(own), nullptr, false);
  if (!own.cut_short.empty()) summary["fingerprint_cut_short"] = own.cut_short;
  summary["environment_differences"] = start.environment_differences;
  summary["restarts_in_place"] = start.restarts;
  summary["max_restarts"] = start.max_restarts;
  summary["stop_together"] = start.stop_together;
  return summary.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

class LinkedJob final : public Job {
 public:
  explicit LinkedJob(JobLink& link) : link_(link) {}
  void add_poll_fds(std::vector<pollfd>& fds) const override { link_.add_poll_fds(fds); }
  Instant next_wakeup() const override { return link_.next_wakeup(); }
  std::vector<JobEvent> process(const std::vector<pollfd>& fds, Instant now) override {
    std::vector<JobEvent> events = link_.process(fds, now);
    for (const JobEvent& event : events) count_job_event(event);  // docs/observing.md
    return events;
  }
  void report_exit(std::size_t, int status, const std::string& detail, bool rejoins) override {
    link_.report_exit(status, detail, rejoins);
  }
  void report_stop_signal(int signal_number) override { link_.report_stop_signal(signal_number); }
  bool verdict_pending() const override { return link_.awaits_other_tasks(); }

 private:
  JobLink& link_;
};

}  // namespace

Result<std::optional<std::string>> read_secret_if_given(const Options& options) {
  if (!options.control_secret_file || options.control_port == 0) return std::optional<std::string>{};
  auto secret = read_control_secret(*options.control_secret_file);
  if (!secret) return std::unexpected(secret.error());
  return std::optional<std::string>{*secret};
}

bool job_supervision_applies(const Options& options, const Plan& plan) {
  return !options.print && options.control_port != 0 && plan.peers.size() > 1 && coordinator_of(plan) &&
         peer_of(plan, JobMember{plan.identity.type, plan.identity.index});
}

Result<void> check_control_port_is_free(const Options& options, const Plan& plan) {
  if (!job_supervision_applies(options, plan)) return {};
  const PeerAddress* coordinator = peer_of(plan, *coordinator_of(plan));
  for (const auto& peer : plan.peers) {
    if (peer.name != coordinator->name || peer.port != options.control_port) continue;
    const std::string port_source = plan.operator_config ? std::string("TF_CONFIG") : quoted(options.port);
    return usage_error("task " + task_name(peer.type, peer.index) + " would listen on port " + std::to_string(peer.port) + " (from " +
                       port_source + ") on the coordinator's host " + coordinator->name + ", where --control-port (or " +
                       "TFBOOT_CONTROL_PORT) " + std::to_string(options.control_port) + " listens; choose another for one of them");
  }
  return {};
}

std::vector<PeerAddress> peers_to_resolve_before_the_barrier(const Plan& plan) {
  const auto coordinator = coordinator_of(plan);
  if (!coordinator || *coordinator == JobMember{plan.identity.type, plan.identity.index}) return {};
  for (const auto& peer : plan.peers) {
    if (JobMember{peer.type, peer.index} == *coordinator) return {peer};
  }
  return {};
}

std::optional<std::size_t> coordinator_position(const Plan& plan, const std::vector<PeerAddress>& peers) {
  const auto coordinator = coordinator_of(plan);
  if (!coordinator || *coordinator == JobMember{plan.identity.type, plan.identity.index}) return std::nullopt;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (JobMember{peers[i].type, peers[i].index} == *coordinator) return i;
  }
  return std::nullopt;
}

std::vector<NameStatus> answers_from_table(const Plan& plan, const std::vector<NameStatus>& own, bool verified,
                                           const std::vector<std::vector<std::string>>& table) {
  std::unordered_map<std::string_view, const NameStatus*> asked;
  for (const auto& status : own) {
    if (status.resolved) asked.emplace(status.name, &status);
  }
  std::vector<NameStatus> answers;
  answers.reserve(plan.peers.size());
  for (std::size_t i = 0; i < plan.peers.size(); ++i) {
    const PeerAddress& peer = plan.peers[i];
    if (auto it = asked.find(peer.name); it != asked.end()) {
      answers.push_back(*it->second);
      continue;
    }
    NameStatus status{.name = peer.name, .resolved = verified && (table.empty() || (i < table.size() && !table[i].empty()))};
    if (status.resolved && i < table.size()) status.addresses = table[i];
    answers.push_back(std::move(status));
  }
  return answers;
}

// TFBOOT_TEST_CLOCK_OFFSET_MS (tests only, docs/preflight.md): a clock off the coordinator's, faked.
std::int64_t clock_offset_for_tests(const Environment& env) {
  auto it = env.find("TFBOOT_TEST_CLOCK_OFFSET_MS");
  if (it == env.end()) return 0;
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), value);
  return error == std::errc{} && end == it->second.data() + it->second.size() ? value : 0;
}

Result<JobMembership> pass_start_barrier(const Options& options, const Environment& env, const Plan& plan, const HostFacts& facts,
                                   const std::optional<std::string>& secret, bool supervise, Instant started, int restarts,
                                   int processes_per_node) {
  auto made = settings_for(options, plan, facts, secret, supervise, restarts);
  if (made) {
    made->started = started;
    made->processes_per_node = processes_per_node;
    made->wants_table = options.address == AddressMode::ip;
    observe_job(*made);  // docs/observing.md
  }
  if (!made) return std::unexpected(made.error());
  const JobSettings& settings = *made;
  if (auto checked = check_job_settings(settings); !checked) return std::unexpected(checked.error());
  const Fingerprint own = read_fingerprint(env, options.command.empty() ? default_command : options.command);
  if (own.interpreter.empty()) {
    log::warn("environment check: no Python found for the command (not named by it, nor python or python3 on PATH): "
              "Python, TensorFlow, PyTorch, JAX and the distributions are compared as \"absent\"");
  }
  if (!own.cut_short.empty()) {
    log::warn("environment check: reading this task's environment {}; the check compares what was read", own.cut_short);
  }
  log::info("joining job {} through coordinator {} on port {} ({})", settings.job_id, settings.coordinator.text(),
            settings.port, counted(settings.tasks.size(), "task"));
  // --preflight: this node's checks go with the hello; the coordinator's verdict comes with the start.
  std::optional<PreflightRecord> preflight;
  if (options.preflight != PreflightLevel::off) {
    preflight = check_this_node(options, own);
    made->preflight = options.preflight;
    // Tasks that share a host (Slurm, host networking) cannot all listen on one port: each then
    // takes one the kernel chooses, and its hello says which.
    const auto on_this_host = std::ranges::count_if(plan.peers, [&](const PeerAddress& peer) { return peer.name == made->own_name; });
    made->network_port = on_this_host > 1 ? 0 : options.preflight_port;
    made->network_bounds.refuse_below = options.preflight_refuse_below;
    made->node_figures = preflight->node;
    made->clock_offset_for_tests_ms = clock_offset_for_tests(env);
  }
  auto link = join_job(settings, own);
  if (!link && preflight && link.error().code == exit_code::preflight_refused) observe_preflight(*preflight, false, link.error().message);
  if (!link) return std::unexpected(link.error());
  JobMembership membership;
  if (preflight) {
    const auto& offsets = (*link)->start_info().clock_offsets_ms;
    const auto position = std::find(settings.tasks.begin(), settings.tasks.end(), settings.self) - settings.tasks.begin();
    if (offsets && static_cast<std::size_t>(position) < offsets->size()) preflight->clock_offset_ms = (*offsets)[position];
    preflight->network = (*link)->start_info().network;
    preflight->network_bounds = settings.network_bounds;
    log_preflight(*preflight);
    membership.preflight_json = preflight_json(*preflight);
    observe_preflight(*preflight, true);
  }
  membership.joined = true;
  membership.environment_differences = (*link)->start_info().environment_differences;
  membership.summary_json = summary_json(settings, own, (*link)->start_info());
  membership.names_verified = (*link)->start_info().names_verified;
  if (membership.names_verified) membership.verified_addresses = (*link)->start_info().addresses;
  membership.restarts = (*link)->start_info().restarts;
  membership.max_restarts = (*link)->start_info().max_restarts;
  membership.link = std::move(*link);
  return membership;
}

std::unique_ptr<Job> make_linked_job(JobLink& link) { return std::make_unique<LinkedJob>(link); }

}  // namespace tfboot
