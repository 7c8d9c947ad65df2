// The start's record and its renderings for Prometheus, /readyz and /status.
#include "observe/metrics.h"

#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tfboot::observe {
namespace {

constexpr std::array<std::string_view, phase_count> phase_names{"plan", "dns_wait", "barrier", "name_check", "files"};
constexpr std::array<std::string_view, stop_event_count> stop_event_names{"job_done", "peer_failed", "coordinator_lost", "restart",
                                                                          "preempted"};

// Every outcome a lookup can have, so that each counter exists (at 0) before it first counts.
constexpr std::string_view lookup_outcomes[] = {"resolved", "nxdomain", "no_address_records", "timeout", "servfail",
                                                "refused",  "connection_refused", "other"};

std::string_view outcome_of(LookupReason reason) {
  switch (reason) {
    case LookupReason::none: return "resolved";
    case LookupReason::nxdomain: return "nxdomain";
    case LookupReason::no_address_records: return "no_address_records";
    case LookupReason::timeout: return "timeout";
    case LookupReason::servfail: return "servfail";
    case LookupReason::refused: return "refused";
    case LookupReason::connection_refused: return "connection_refused";
    case LookupReason::no_ptr_record:
    case LookupReason::bad_address:
    case LookupReason::other: break;
  }
  return "other";
}

// A label value as the exposition format quotes it: backslash, double quote and newline escaped.
std::string label_value(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (char c : text) {
    if (c == '\\') escaped += "\\\\";
    else if (c == '"') escaped += "\\\"";
    else if (c == '\n') escaped += "\\n";
    else escaped += c;
  }
  return escaped;
}

// One metric family: HELP and TYPE, then its samples.
class Exposition {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(std::string_view name, double value, std::string_view labels = "") {
    text_ += fmt::format("{}{}{}{} {}\n", name, labels.empty() ? "" : "{", labels, labels.empty() ? "" : "}", value);
  }
  std::string take() { return std::move(text_); }

 private:
  std::string text_;
};

std::mutex record_lock;
StartRecord& the_record() {
  static StartRecord record;
  return record;
}

}  // namespace

std::string_view phase_name(Phase phase) { return phase_names[static_cast<std::size_t>(phase)]; }
std::string_view stop_event_name(StopEvent event) { return stop_event_names[static_cast<std::size_t>(event)]; }

std::string render_metrics(const StartRecord& record) {
  Exposition out;
  out.family("tfboot_build_info", "gauge", "Always 1; the labels say which tfboot runs which task of which job.");
  out.sample("tfboot_build_info", 1,
             fmt::format("version=\"{}\",commit=\"{}\",task=\"{}\",job_id=\"{}\",framework=\"{}\"", label_value(record.version),
                         label_value(record.commit), label_value(record.task), label_value(record.job_id),
                         label_value(record.framework)));
  out.family("tfboot_start_time_seconds", "gauge", "When this tfboot started, in seconds since the Unix epoch.");
  out.sample("tfboot_start_time_seconds", record.started_at);
  out.family("tfboot_start_phase_seconds", "gauge",
             "How long each start-up phase took, once it has ended (name_check is part of barrier).");
  for (std::size_t i = 0; i < phase_count; ++i) {
    if (record.phase_seconds[i]) out.sample("tfboot_start_phase_seconds", *record.phase_seconds[i], fmt::format("phase=\"{}\"", phase_names[i]));
  }
  out.family("tfboot_start_to_command_seconds", "gauge", "From tfboot's start until the command started.");
  if (record.seconds_to_command) out.sample("tfboot_start_to_command_seconds", *record.seconds_to_command);
  out.family("tfboot_dns_lookups_total", "counter", "DNS lookups of the job's names, by outcome.");
  for (std::string_view outcome : lookup_outcomes) {
    auto it = record.dns_lookups.find(outcome);
    out.sample("tfboot_dns_lookups_total", it == record.dns_lookups.end() ? 0.0 : static_cast<double>(it->second),
               fmt::format("outcome=\"{}\"", outcome));
  }
  out.family("tfboot_dns_retries_total", "counter", "DNS lookups that repeated an earlier one for the same name.");
  out.sample("tfboot_dns_retries_total", static_cast<double>(record.dns_retries));
  if (record.coordinator) {
    out.family("tfboot_barrier_tasks_expected", "gauge", "The coordinator: tasks the start barrier waits for, itself included.");
    out.sample("tfboot_barrier_tasks_expected", static_cast<double>(record.tasks_expected));
    out.family("tfboot_barrier_tasks_present", "gauge", "The coordinator: tasks present at the start barrier, itself included.");
    out.sample("tfboot_barrier_tasks_present", static_cast<double>(record.tasks_present));
  }
  out.family("tfboot_restarts", "gauge", "Earlier starts of this task in the same log dir, as startup.json counts them.");
  out.sample("tfboot_restarts", record.restarts);
  out.family("tfboot_job_restarts", "gauge", "The job's restarts in place so far, as its coordinator counts them.");
  out.sample("tfboot_job_restarts", record.job_restarts);
  out.family("tfboot_command_running", "gauge", "1 while the command runs.");
  out.sample("tfboot_command_running", record.command_running ? 1 : 0);
  out.family("tfboot_command_exit_status", "gauge", "The status tfboot exits with, once the command's supervision ended.");
  if (record.exit_status) out.sample("tfboot_command_exit_status", *record.exit_status);
  out.family("tfboot_job_stop_events_total", "counter",
             "The job's decisions seen by this task: done, a peer failed, the coordinator lost, a restart, a preemption.");
  for (std::size_t i = 0; i < stop_event_count; ++i) {
    out.sample("tfboot_job_stop_events_total", static_cast<double>(record.stop_events[i]), fmt::format("event=\"{}\"", stop_event_names[i]));
  }
  return out.take();
}

std::string render_status(const StartRecord& record) {
  nlohmann::ordered_json status;
  status["job_id"] = record.job_id;
  status["started"] = record.job_started;
  status["tasks_expected"] = record.tasks_expected;
  status["tasks_present"] = record.tasks_present;
  auto& tasks = status["tasks"] = nlohmann::ordered_json::array();
  for (const auto& task : record.tasks) {
    tasks.push_back({{"task", task.task}, {"present", task.present}, {"host", task.host}, {"last_error", task.last_error}});
  }
  return status.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

bool is_ready(const StartRecord& record) { return record.command_started; }

void update(const std::function<void(StartRecord&)>& change) {
  std::lock_guard lock(record_lock);
  change(the_record());
}

StartRecord snapshot() {
  std::lock_guard lock(record_lock);
  return the_record();
}

void phase_ended(Phase phase, double seconds) {
  update([&](StartRecord& record) { record.phase_seconds[static_cast<std::size_t>(phase)] = seconds; });
}

void count_failed_lookup(LookupReason reason) {
  update([&](StartRecord& record) { ++record.dns_lookups[std::string(outcome_of(reason))]; });
}

void count_lookups(const std::vector<NameStatus>& names) {
  update([&](StartRecord& record) {
    for (const auto& name : names) {
      if (name.resolved && name.tries > 0) ++record.dns_lookups["resolved"];
      if (name.tries > 1) record.dns_retries += static_cast<std::uint64_t>(name.tries - 1);
    }
  });
}

void count_stop_event(StopEvent event) {
  update([&](StartRecord& record) { ++record.stop_events[static_cast<std::size_t>(event)]; });
}

void PhaseClock::ended(Phase phase) {
  const Instant now = SteadyClock::now();
  phase_ended(phase, std::chrono::duration<double>(now - last_).count());
  last_ = now;
}

void PhaseClock::restarted() {
  started_ = last_ = SteadyClock::now();
  update([](StartRecord& record) {
    record.command_started = false;
    record.command_running = false;
    record.seconds_to_command.reset();
    record.phase_seconds[static_cast<std::size_t>(Phase::barrier)].reset();
    record.phase_seconds[static_cast<std::size_t>(Phase::name_check)].reset();
    record.phase_seconds[static_cast<std::size_t>(Phase::files)].reset();
  });
}

void PhaseClock::command_starts() {
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - started_).count();
  update([&](StartRecord& record) {
    record.seconds_to_command = seconds;
    record.command_started = true;
    record.command_running = true;
  });
}

}  // namespace tfboot::observe
