// The start's record: the process's one copy and the hook-ins that change it (start_record.h).
#include "observe/start_record.h"

#include <mutex>

namespace tfboot::observe {
namespace {

constexpr std::array<std::string_view, phase_count> phase_names{"plan", "dns_wait", "barrier", "name_check", "files"};
constexpr std::array<std::string_view, stop_event_count> stop_event_names{"job_done", "peer_failed", "coordinator_lost", "restart",
                                                                          "preempted"};

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

std::mutex record_lock;
StartRecord& the_record() {
  static StartRecord record;
  return record;
}

}  // namespace

std::string_view phase_name(Phase phase) { return phase_names[static_cast<std::size_t>(phase)]; }
std::string_view stop_event_name(StopEvent event) { return stop_event_names[static_cast<std::size_t>(event)]; }

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

}  // namespace tfboot::observe
