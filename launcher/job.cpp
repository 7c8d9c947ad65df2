// The job step of the flow: settings for the control channel, the barrier, and the link as the
// supervisor sees it.
#include "job.h"

#include <nlohmann/json.hpp>

#include "control_auth.h"
#include "fingerprint.h"
#include "log.h"

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

JobSettings settings_for(const Options& options, const Plan& plan, const std::string& tf_config, const HostFacts& facts,
                         const std::optional<std::string>& secret, bool supervise) {
  JobSettings settings;
  auto cluster = nlohmann::json::parse(tf_config, nullptr, false);
  settings.job_id = job_id_of_cluster(cluster.is_object() ? cluster["cluster"].dump() : tf_config);
  for (const auto& peer : plan.peers) settings.tasks.push_back(JobMember{peer.type, peer.index});
  settings.self = JobMember{plan.identity.type, plan.identity.index};
  settings.coordinator = *coordinator_of(plan);
  settings.port = options.control_port;
  settings.start_timeout = options.start_timeout;
  settings.env_check = options.env_check;
  settings.secret = secret;
  settings.supervise = supervise;
  settings.hostname = plan.hostname.name;
  if (const PeerAddress* own = peer_of(plan, settings.self)) settings.own_name = own->name;
  settings.own_addresses = routable_addresses(facts.interface_addresses);
  const PeerAddress coordinator = *peer_of(plan, settings.coordinator);
  // Asked again before each connection: a restarted coordinator pod comes back with a new IP.
  settings.coordinator_addresses = [options, facts, coordinator]() { return resolve_once(options, facts, coordinator, 2s); };
  return settings;
}

std::string summary_json(const JobSettings& settings, const Fingerprint& own, const StartInfo& start) {
  nlohmann::ordered_json summary;
  summary["job_id"] = settings.job_id;
  summary["coordinator"] = settings.coordinator.text();
  summary["control_port"] = settings.port;
  summary["supervised"] = settings.supervise;
  summary["tasks_present"] = start.members.size();
  summary["fingerprint"] = nlohmann::ordered_json::parse(to_json(own), nullptr, false);
  summary["environment_differences"] = start.environment_differences;
  return summary.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

class LinkChannel final : public JobChannel {
 public:
  explicit LinkChannel(JobLink& link) : link_(link) {}
  void add_poll_fds(std::vector<pollfd>& fds) const override { link_.add_poll_fds(fds); }
  std::chrono::steady_clock::time_point next_wakeup() const override { return link_.next_wakeup(); }
  std::optional<JobOutcome> process(const std::vector<pollfd>& fds, std::chrono::steady_clock::time_point now) override {
    for (const JobEvent& event : link_.process(fds, now)) {
      if (event.kind == JobEventKind::job_done) return JobOutcome{exit_code::ok, "the job is done: " + event.task + " finished"};
      return JobOutcome{exit_code::job_stopped, "stopping: " + event.message};
    }
    return std::nullopt;
  }
  void report_exit(int exit_code) override {
    link_.report_exit(exit_code);
    link_.finish(5s);
  }

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

Result<JobMembership> join_the_job(const Options& options, const Environment& env, const Plan& plan,
                                   const std::string& tf_config, const HostFacts& facts,
                                   const std::optional<std::string>& secret, bool supervise) {
  JobSettings settings = settings_for(options, plan, tf_config, facts, secret, supervise);
  if (auto checked = check_job_settings(settings); !checked) return std::unexpected(checked.error());
  const Fingerprint own = read_fingerprint(env);
  log::info("joining job {} through coordinator {} on port {} ({} tasks)", settings.job_id, settings.coordinator.text(),
            settings.port, settings.tasks.size());
  auto link = join_job(settings, own);
  if (!link) return std::unexpected(link.error());
  JobMembership membership;
  membership.environment_differences = (*link)->start_info().environment_differences;
  membership.summary_json = summary_json(settings, own, (*link)->start_info());
  membership.link = std::move(*link);
  return membership;
}

std::unique_ptr<JobChannel> make_job_channel(JobLink& link) { return std::make_unique<LinkChannel>(link); }

}  // namespace tfboot
