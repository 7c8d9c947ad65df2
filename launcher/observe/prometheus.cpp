// The start record in Prometheus' text exposition format (prometheus.h).
#include "observe/prometheus.h"

#include <fmt/format.h>

namespace tfboot::observe {
namespace {

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

}  // namespace

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
    if (record.phase_seconds[i]) out.sample("tfboot_start_phase_seconds", *record.phase_seconds[i], fmt::format("phase=\"{}\"", phase_name(static_cast<Phase>(i))));
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
  out.family("tfboot_preflight_seconds", "gauge", "--preflight: how long this task's checks took.");
  if (record.preflight_seconds) out.sample("tfboot_preflight_seconds", *record.preflight_seconds);
  out.family("tfboot_preflight_passed", "gauge", "--preflight: 1 when the job's verdict let it start, 0 when it refused.");
  if (record.preflight_passed) out.sample("tfboot_preflight_passed", *record.preflight_passed ? 1 : 0);
  out.family("tfboot_preflight_writable", "gauge", "--preflight: 1 when a small write and fsync in the directory worked.");
  for (const auto& dir : record.preflight_directories) {
    out.sample("tfboot_preflight_writable", dir.writable ? 1 : 0, fmt::format("directory=\"{}\"", dir.name));
  }
  out.family("tfboot_preflight_write_seconds", "gauge", "--preflight: the directory's write, fsync and removal.");
  for (const auto& dir : record.preflight_directories) {
    out.sample("tfboot_preflight_write_seconds", dir.write_seconds, fmt::format("directory=\"{}\"", dir.name));
  }
  out.family("tfboot_preflight_free_bytes", "gauge", "--preflight: room left in the directory's file system.");
  for (const auto& dir : record.preflight_directories) {
    out.sample("tfboot_preflight_free_bytes", static_cast<double>(dir.free_mib) * 1024 * 1024, fmt::format("directory=\"{}\"", dir.name));
  }
  out.family("tfboot_preflight_accelerators", "gauge", "--preflight: the GPUs this task sees.");
  if (record.preflight_accelerators) out.sample("tfboot_preflight_accelerators", *record.preflight_accelerators);
  out.family("tfboot_preflight_accelerators_answering", "gauge", "--preflight: of those GPUs, the ones whose device opened.");
  if (record.preflight_accelerators_answering) {
    out.sample("tfboot_preflight_accelerators_answering", *record.preflight_accelerators_answering);
  }
  out.family("tfboot_preflight_clock_offset_seconds", "gauge", "--preflight: this task's wall clock less the coordinator's.");
  if (record.preflight_clock_offset_seconds) out.sample("tfboot_preflight_clock_offset_seconds", *record.preflight_clock_offset_seconds);
  out.family("tfboot_preflight_network_seconds", "gauge", "--preflight network: from the measure to the verdict, at the coordinator.");
  if (record.preflight_network_seconds) out.sample("tfboot_preflight_network_seconds", *record.preflight_network_seconds);
  out.family("tfboot_preflight_network_links", "gauge", "--preflight network: the links measured between the job's tasks.");
  if (record.preflight_network_links) out.sample("tfboot_preflight_network_links", *record.preflight_network_links);
  out.family("tfboot_preflight_network_median_bits_per_second", "gauge", "--preflight network: the job's median throughput of a link.");
  if (record.preflight_network_median_bits_per_second) {
    out.sample("tfboot_preflight_network_median_bits_per_second", *record.preflight_network_median_bits_per_second);
  }
  out.family("tfboot_preflight_network_median_rtt_seconds", "gauge", "--preflight network: the job's median round trip of a link.");
  if (record.preflight_network_median_rtt_seconds) out.sample("tfboot_preflight_network_median_rtt_seconds", *record.preflight_network_median_rtt_seconds);
  out.family("tfboot_preflight_network_warnings", "gauge", "--preflight network: slow links named as warnings (the start went on).");
  if (record.preflight_network_warnings) out.sample("tfboot_preflight_network_warnings", *record.preflight_network_warnings);
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
    out.sample("tfboot_job_stop_events_total", static_cast<double>(record.stop_events[i]), fmt::format("event=\"{}\"", stop_event_name(static_cast<StopEvent>(i))));
  }
  return out.take();
}

}  // namespace tfboot::observe
