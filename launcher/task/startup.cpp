// The contents of startup.json, and what an earlier one says about earlier starts.
#include "task/startup.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "base/json_nesting.h"

namespace tfboot {
namespace {

using nlohmann::ordered_json;

// nlohmann parses iteratively but copies, dumps and destroys recursively: a deeply nested
// earlier file would overflow the stack. Our own files are 4 levels deep.
constexpr int max_nesting = 16;
constexpr std::size_t max_text_field = 4096;
constexpr int max_restarts = 1'000'000'000;

PreviousStarts damaged(std::string why) { return PreviousStarts{.damage = std::move(why)}; }

std::string dump(const ordered_json& value, int indent) {
  // Hostnames and command arguments are bytes, not always UTF-8: replaced, never an abort.
  return value.dump(indent, ' ', false, ordered_json::error_handler_t::replace);
}

// What grows with the job is written within a byte budget each, so that the whole file stays
// well under max_previous_startup_json at any job size: the next start must read it back.
constexpr std::size_t peers_budget = 384 * 1024;
constexpr std::size_t texts_budget = 64 * 1024;  // warnings; the command; the job's environment differences
constexpr std::size_t max_listed_text = 4096;
constexpr std::size_t max_embedded_tf_config = 128 * 1024;  // Linux's limit for one variable: TF_CONFIG is always under it
constexpr std::size_t max_listed_unresolved = 20;

// `text` (a value dumped with indent 2) as it reads nested `depth` levels deep.
std::string nested(std::string_view text, int depth) {
  const std::string margin(static_cast<std::size_t>(2 * depth), ' ');
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    out += c;
    if (c == '\n') out += margin;
  }
  return out;
}

// One member of the file's top-level object, as a dump of the whole object with indent 2 writes it.
std::string member(std::string_view key, const ordered_json& value) {
  return "  \"" + std::string(key) + "\": " + nested(dump(value, 2), 1);
}

ordered_json peer_json(const StartupReport& report, std::size_t i) {
  const PeerAddress& peer = report.peers[i];
  ordered_json entry{{"task", peer.task()}, {"name", peer.name}, {"port", peer.port}};
  if (i < report.resolution.size()) {
    const NameStatus& status = report.resolution[i];
    entry["resolved"] = status.resolved;
    entry["addresses"] = status.addresses;
    entry["tries"] = status.tries;
    entry["seconds_to_resolve"] = status.resolved ? static_cast<double>(status.time_to_resolve.count()) / 1000.0 : -1.0;
    if (!status.resolved) entry["last_error"] = describe(status);
  }
  return entry;
}

// The members "peers", in cluster order within peers_budget, and when some are left out
// "peers_not_listed", which counts them and names the first unresolved ones among them (the log
// has every one). Each entry is rendered once, straight into the text.
std::vector<std::string> peer_members(const StartupReport& report) {
  std::string listed;
  std::size_t i = 0;
  for (; i < report.peers.size(); ++i) {
    std::string entry = "    " + nested(dump(peer_json(report, i), 2), 2);
    if (listed.size() + entry.size() + 2 > peers_budget) break;
    listed += listed.empty() ? "\n" : ",\n";
    listed += entry;
  }
  std::vector<std::string> members{listed.empty() ? "  \"peers\": []" : "  \"peers\": [" + listed + "\n  ]"};
  if (i == report.peers.size()) return members;
  std::size_t unresolved = 0;
  ordered_json first_unresolved = ordered_json::array();
  for (std::size_t j = i; j < report.peers.size() && j < report.resolution.size(); ++j) {
    if (report.resolution[j].resolved) continue;
    if (++unresolved <= max_listed_unresolved) first_unresolved.push_back(report.peers[j].task());
  }
  ordered_json left_out{{"count", report.peers.size() - i}, {"first", report.peers[i].task()}};
  if (!report.resolution.empty()) {
    left_out["unresolved"] = unresolved;
    left_out["first_unresolved"] = std::move(first_unresolved);
  }
  members.push_back(member("peers_not_listed", left_out));
  return members;
}

// Texts (each cut to max_listed_text) while they fit texts_budget; the number left out, or 0.
std::size_t add_texts(ordered_json& object, const char* key, const std::vector<std::string>& texts) {
  ordered_json listed = ordered_json::array();
  std::size_t used = 0;
  for (const auto& text : texts) {
    // Bytes that are not UTF-8 may triple as U+FFFD: counted at their worst.
    std::string cut = text.substr(0, max_listed_text);
    used += 3 * cut.size() + 8;
    if (used > texts_budget) break;
    listed.push_back(std::move(cut));
  }
  const std::size_t left_out = texts.size() - listed.size();
  object[key] = std::move(listed);
  if (left_out > 0) object[std::string(key) + "_not_listed"] = left_out;
  return left_out;
}

// The job section, with its environment differences bounded as the warnings are.
ordered_json job_json(const std::string& text) {
  ordered_json job = ordered_json::parse(text, nullptr, false);
  if (!job.is_object()) return job;
  if (auto it = job.find("environment_differences"); it != job.end() && it->is_array()) {
    std::vector<std::string> differences;
    for (const auto& line : *it) {
      if (line.is_string()) differences.push_back(line.get<std::string>());
    }
    add_texts(job, "environment_differences", differences);
  }
  return job;
}

bool is_short_text(const ordered_json& value) {
  return value.is_string() && value.get_ref<const std::string&>().size() <= max_text_field;
}

// An earlier file's "end" (or a history entry's end fields), as build_startup_json writes them.
std::optional<TaskEnd> end_from(const ordered_json& object) {
  auto ended_at = object.find("ended_at");
  auto status = object.find("exit_status");
  auto reason = object.find("reason");
  if (ended_at == object.end() || !ended_at->is_number() || status == object.end() || !status->is_number_integer() ||
      reason == object.end() || !is_short_text(*reason)) {
    return std::nullopt;
  }
  TaskEnd end{.ended_at = ended_at->get<double>(), .reason = reason->get<std::string>()};
  const long long exit_status = status->get<long long>();
  if (exit_status < 0 || exit_status > 255) return std::nullopt;
  end.exit_status = static_cast<int>(exit_status);
  for (auto [key, member] : {std::pair{"message", &TaskEnd::message}, std::pair{"failed_task", &TaskEnd::failed_task}}) {
    auto it = object.find(key);
    if (it == object.end()) continue;
    if (!is_short_text(*it)) return std::nullopt;
    end.*member = it->get<std::string>();
  }
  return end;
}

void add_end(ordered_json& object, const TaskEnd& end) {
  object["ended_at"] = end.ended_at;
  object["ended_at_iso"] = iso8601_utc(end.ended_at);
  object["exit_status"] = end.exit_status;
  object["reason"] = end.reason;
  // Cut well below what an earlier file may hold (max_text_field), even once bytes that are not
  // UTF-8 become three-byte U+FFFD: the next start reads it back.
  if (!end.message.empty()) object["message"] = end.message.substr(0, max_text_field / 4);
  if (!end.failed_task.empty()) object["failed_task"] = end.failed_task;
}

}  // namespace

std::string iso8601_utc(double unix_seconds) {
  // Years 1 to 9999 only; an earlier file may hold any number.
  if (!std::isfinite(unix_seconds) || unix_seconds < -62135596800.0 || unix_seconds >= 253402300800.0) return "";
  // To the nearest millisecond: 951782400.999 is 951782400.99899995... as a double.
  const long long milliseconds = std::llround(unix_seconds * 1000.0);
  const time_t seconds = static_cast<time_t>(milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000);
  const long long fraction = milliseconds - static_cast<long long>(seconds) * 1000;
  struct tm utc {};
  if (::gmtime_r(&seconds, &utc) == nullptr) return "";
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03lldZ", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
                utc.tm_hour, utc.tm_min, utc.tm_sec, fraction);
  return text;
}

PreviousStarts read_previous_starts(const std::optional<std::string>& text) {
  if (!text) return {};
  if (text->size() > max_previous_startup_json) return damaged("larger than 1 MiB");
  if (!json_nesting_within(*text, max_nesting)) return damaged("nested deeper than " + std::to_string(max_nesting) + " levels");
  auto old = ordered_json::parse(*text, nullptr, false);
  if (old.is_discarded() || !old.is_object()) return damaged("not a JSON object");
  PreviousStarts previous;
  // An earlier start happened: count it even if that file predates the counter.
  previous.restarts = 1;
  if (auto it = old.find("restarts"); it != old.end()) {
    if (!it->is_number_integer() || it->get<long long>() < 0 || it->get<long long>() >= max_restarts) {
      return damaged("\"restarts\" is not a count");
    }
    previous.restarts = static_cast<int>(it->get<long long>()) + 1;
  }
  auto started_at = old.find("started_at");
  auto source = old.find("identity_source");
  if (started_at == old.end() || !started_at->is_number() || source == old.end() || !source->is_string() ||
      source->get_ref<const std::string&>().size() > max_text_field) {
    return damaged("\"started_at\" or \"identity_source\" missing or of the wrong type");
  }
  if (auto it = old.find("history"); it != old.end()) {
    if (!it->is_array()) return damaged("\"history\" is not a list");
    for (const auto& entry : *it) {
      if (!entry.is_object() || !entry.contains("started_at") || !entry["started_at"].is_number() ||
          !entry.contains("identity_source") || !entry["identity_source"].is_string() ||
          entry["identity_source"].get_ref<const std::string&>().size() > max_text_field) {
        return damaged("an entry of \"history\" is not a start");
      }
      std::optional<TaskEnd> end;
      if (entry.contains("ended_at") && !(end = end_from(entry))) return damaged("an entry of \"history\" has an unreadable end");
      previous.history.push_back({entry["started_at"].get<double>(), entry["identity_source"].get<std::string>(), end});
    }
  }
  std::optional<TaskEnd> end;
  if (auto it = old.find("end"); it != old.end()) {
    if (!it->is_object() || !(end = end_from(*it))) return damaged("\"end\" is not how a task ended");
  }
  previous.history.push_back({started_at->get<double>(), source->get<std::string>(), end});
  if (previous.history.size() > max_history) {
    previous.history.erase(previous.history.begin(), previous.history.end() - static_cast<std::ptrdiff_t>(max_history));
  }
  return previous;
}

StartupText render_startup_json(const StartupReport& report, const PreviousStarts& previous) {
  // Members in the file's order: "end", when there is one, goes between `before` and `after`.
  ordered_json root;
  root["tfboot_version"] = report.version;
  if (!report.commit.empty()) root["tfboot_commit"] = report.commit;
  root["task"] = {{"type", std::string(to_string(report.identity.type))}, {"index", report.identity.index}};
  // Read back as at most max_text_field bytes, even once bytes that are not UTF-8 become U+FFFD.
  root["identity_source"] = report.identity.source.substr(0, max_text_field / 4);
  if (!report.local) root["hostname"] = report.hostname;
  root["started_at"] = report.started_at;
  root["started_at_iso"] = iso8601_utc(report.started_at);
  if (!report.local) root["dns_wait_seconds"] = report.dns_wait_seconds;
  root["written_at"] = report.written_at;
  root["written_at_iso"] = iso8601_utc(report.written_at);
  if (!report.local) root["dns_servers"] = report.dns_servers;
  std::vector<std::string> members;
  for (const auto& [key, value] : root.items()) members.push_back(member(key, value));
  if (!report.local) {
    for (std::string& peers : peer_members(report)) members.push_back(std::move(peers));
  }
  ordered_json rest;
  add_texts(rest, "warnings", report.warnings);
  if (report.tf_config.size() <= max_embedded_tf_config) {
    rest["tf_config"] = ordered_json::parse(report.tf_config, nullptr, false);
  } else {
    rest["tf_config"] = nullptr;
    rest["tf_config_not_listed"] = std::to_string(report.tf_config.size()) + " bytes: tf_config.json holds it";
  }
  add_texts(rest, "command", report.command);
  if (!report.job_json.empty()) rest["job"] = job_json(report.job_json);
  if (!report.preflight_json.empty()) rest["preflight"] = ordered_json::parse(report.preflight_json, nullptr, false);
  if (!report.framework_json.empty()) rest["framework"] = ordered_json::parse(report.framework_json, nullptr, false);
  for (const auto& [key, value] : rest.items()) members.push_back(member(key, value));

  ordered_json history = ordered_json::array();
  for (const auto& start : previous.history) {
    ordered_json entry{{"started_at", start.started_at}, {"started_at_iso", iso8601_utc(start.started_at)},
                       {"identity_source", start.identity_source}};
    if (start.end) add_end(entry, *start.end);
    history.push_back(entry);
  }
  StartupText text{"{\n", member("restarts", previous.restarts) + ",\n" + member("history", history) + "\n}\n"};
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (i > 0) text.before += ",\n";
    text.before += members[i];
  }
  return text;
}

std::string startup_json_with_end(const StartupText& text, const std::optional<TaskEnd>& end) {
  std::string file = text.before;
  if (end) {
    ordered_json fields = ordered_json::object();
    add_end(fields, *end);
    file += ",\n" + member("end", fields);
  }
  return file + ",\n" + text.after;
}

std::string build_startup_json(const StartupReport& report, const PreviousStarts& previous) {
  return startup_json_with_end(render_startup_json(report, previous), report.end);
}

}  // namespace tfboot
