// The control channel's messages: framing, encoding and the validating parser.
#include "control/protocol/messages.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>

namespace tfboot {

using nlohmann::json;
using nlohmann::ordered_json;

std::optional<JobMember> parse_member(std::string_view text) {
  auto colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto type = parse_task_type(text.substr(0, colon));
  auto index = parse_index(text.substr(colon + 1));
  if (!type || !index) return std::nullopt;
  JobMember member{*type, *index};
  if (member.text() != text) return std::nullopt;  // "master:0", "worker:02"
  return member;
}

// --- Framing

Result<void> FrameReader::append(std::string_view bytes) {
  // Consumed lines are dropped only now and then, so that a burst of small lines stays linear.
  if (start_ > 0 && start_ * 2 >= buffer_.size()) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  buffer_.append(bytes);
  if (buffer_.find('\n', start_ + scanned_) == std::string::npos && buffer_.size() - start_ > max_line_) {
    return make_error(protocol_violation, "a message over " + std::to_string(max_line_) + " bytes");
  }
  return {};
}

std::optional<std::string> FrameReader::next() {
  auto end = buffer_.find('\n', start_ + scanned_);
  if (end == std::string::npos) {
    scanned_ = buffer_.size() - start_;
    return std::nullopt;
  }
  std::string line = buffer_.substr(start_, end - start_);
  start_ = end + 1;
  scanned_ = 0;
  if (line.size() > max_line_) return std::nullopt;  // append() reports it; never handed out
  return line;
}

// --- Encoding

namespace {

ordered_json progress_json(const BarrierProgress& progress) {
  return {{"present", progress.present}, {"total", progress.total}, {"missing", progress.missing}};
}

// A directory's preflight figures; `path_key` names its path ("log_root" at the top of the hello's
// preflight, as protocol 2 first sent it; "path" in the checkpoint dir's object).
ordered_json directory_json(const DirectoryFigures& directory, const char* path_key) {
  return {{path_key, directory.path}, {"problem", directory.problem}, {"free_mib", directory.free_mib},
          {"write_us", static_cast<std::int64_t>(directory.write_ms * 1000)}};
}

struct Encoder {
  ordered_json& out;
  void operator()(const Challenge& m) {
    out["job"] = m.job;
    out["nonce"] = m.nonce;
    out["secret"] = m.secret;
    out["protocol"] = m.protocol;
    out["tfboot"] = m.tfboot;
  }
  void operator()(const Hello& m) {
    out["job"] = m.job;
    out["task"] = m.task.text();
    out["host"] = m.host;
    out["instance"] = m.instance;
    out["supervised"] = m.supervised;
    out["name"] = m.name;
    out["addresses"] = m.addresses;
    out["fingerprint"] = ordered_json::parse(to_json(m.fingerprint));
    out["nonce"] = m.nonce;
    out["proof"] = m.proof;
    if (m.table) out["table"] = true;
    out["started_ms_ago"] = m.started_ms_ago;
    out["protocol"] = m.protocol;
    out["tfboot"] = m.tfboot;
    if (m.processes > 0) out["processes"] = m.processes;
    if (m.preflight) {
      // The log root's figures at the top (as protocol 2 first sent them), the checkpoint dir's beside.
      out["preflight"] = directory_json(m.preflight->log_root, "log_root");
      if (m.preflight->checkpoint_dir) out["preflight"]["checkpoint_dir"] = directory_json(*m.preflight->checkpoint_dir, "path");
      if (!m.preflight->silent_gpus.empty()) out["preflight"]["silent_gpus"] = m.preflight->silent_gpus;
      if (m.network_port) out["preflight"]["network_port"] = *m.network_port;
    }
    if (m.wall_ms) out["wall_ms"] = *m.wall_ms;
    if (m.relay) out["relay"] = true;
  }
  void operator()(const Accepted& m) {
    out["proof"] = m.proof;
    out["progress"] = progress_json(m.progress);
  }
  void operator()(const Refused& m) { out["reason"] = m.reason; }
  void operator()(const Waiting& m) { out["progress"] = progress_json(m.progress); }
  void operator()(const Start& m) {
    out["supervised"] = m.supervised;
    out["names_verified"] = m.names_verified;
    out["environment_differences"] = m.environment_differences;
    out["tasks"] = m.tasks;
    if (m.addresses) out["addresses"] = *m.addresses;
    out["restarts"] = m.restarts;
    out["max_restarts"] = m.max_restarts;
    out["stop_together"] = m.stop_together;
    if (m.clock_offsets_ms) out["preflight"] = {{"clock_offsets_ms", *m.clock_offsets_ms}};
    if (m.network) {
      ordered_json network;
      network["median_bits_per_second"] = m.network->median_bits_per_second ? ordered_json(std::llround(*m.network->median_bits_per_second)) : ordered_json();
      network["median_rtt_us"] = m.network->median_rtt_ms ? ordered_json(std::llround(*m.network->median_rtt_ms * 1000)) : ordered_json();
      network["ms"] = std::llround(m.network->seconds * 1000);
      network["links"] = m.network->links;
      network["warnings"] = m.network->warnings;
      out["preflight"]["network"] = network;
    }
  }
  void operator()(const Abort& m) {
    out["code"] = m.code;
    out["message"] = m.message;
  }
  void operator()(const Ping&) {}
  void operator()(const Exit& m) {
    out["status"] = m.status;
    if (!m.detail.empty()) out["detail"] = m.detail;
  }
  void operator()(const Done&) {}
  void operator()(const Stop& m) {
    out["task"] = m.task.text();
    out["status"] = m.status;
    out["message"] = m.message;
  }
  void operator()(const Restart& m) {
    out["task"] = m.task.text();
    out["status"] = m.status;
    out["message"] = m.message;
    out["count"] = m.count;
  }
  void operator()(const Preempt& m) {
    out["task"] = m.task.text();
    out["signal"] = m.signal;
  }
  void operator()(const Measure& m) {
    out["session"] = m.session;
    out["round_ms"] = m.round_ms;
    out["bulk_ms"] = m.bulk_ms;
    out["max_bytes"] = m.max_bytes;
    out["rounds"] = ordered_json::array();
    for (const auto& round : m.rounds) out["rounds"].push_back({{"to", round.to}, {"address", round.address}, {"port", round.port}});
  }
  void operator()(const Measured& m) {
    out["session"] = m.session;
    out["links"] = ordered_json::array();
    for (const auto& link : m.links) {
      ordered_json item{{"from", link.from}, {"to", link.to}};
      if (link.rtt_us) item["rtt_us"] = *link.rtt_us;
      if (link.bits_per_second) item["bits_per_second"] = *link.bits_per_second;
      if (!link.problem.empty()) item["problem"] = link.problem;
      out["links"].push_back(std::move(item));
    }
  }
};

constexpr const char* type_names[] = {"challenge", "hello", "accepted", "refused", "waiting", "start",  "abort",
                                      "ping",      "exit",  "done",     "stop",    "restart", "preempt",
                                      "measure",   "measured"};
static_assert(std::size(type_names) == std::variant_size_v<Message>);

}  // namespace

std::string_view message_type(const Message& message) { return type_names[message.index()]; }

std::string encode(const Message& message) {
  ordered_json out;
  out["type"] = std::string(message_type(message));
  std::visit(Encoder{out}, message);
  return out.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

// --- Parsing

namespace {

constexpr std::size_t max_name = 253;  // a DNS name
constexpr std::size_t max_text = 4096;
constexpr std::size_t max_addresses = 64;
constexpr std::size_t max_address = 64;
constexpr std::size_t max_listed = 64;
constexpr std::size_t max_listed_line = 65536;
constexpr int max_tasks = 1'000'000;
constexpr std::size_t max_table_entry = max_addresses * (max_address + 1);
constexpr int max_restart_count = 1'000'000;
constexpr int max_protocol = 1'000'000;
constexpr std::int64_t max_mib = std::int64_t{1} << 40;
constexpr std::int64_t max_micros = std::int64_t{1} << 40;
constexpr std::int64_t max_wall_ms = std::int64_t{1} << 50;  // some 35,000 years after 1970
constexpr std::int64_t max_figure = std::int64_t{1} << 50;   // a throughput in bit/s: a petabit

// Reads the fields of one message; the first problem is kept and turns the result into an error.
class Fields {
 public:
  explicit Fields(const json& object) : object_(object) {}

  const json* find(const char* key, bool (json::*is_kind)() const noexcept, const char* kind) {
    auto it = object_.find(key);
    if (it == object_.end()) return reject(key, "is missing");
    if (!((*it).*is_kind)()) return reject(key, std::string("is not ") + kind);
    return &*it;
  }

  std::string text(const char* key, std::size_t max_length) {
    const json* value = find(key, &json::is_string, "a string");
    if (!value) return "";
    const auto& text = value->get_ref<const std::string&>();
    if (text.size() > max_length) return reject(key, "is longer than " + std::to_string(max_length)), "";
    return text;
  }

  // "" when the key is absent (an older peer's message).
  std::string optional_text(const char* key, std::size_t max_length) {
    return object_.contains(key) ? text(key, max_length) : "";
  }
  bool optional_flag(const char* key) { return object_.contains(key) && flag(key); }
  std::int64_t optional_integer(const char* key, int min, int max) { return object_.contains(key) ? integer(key, min, max) : 0; }

  // Lowercase hex of `min`..`max` characters (nonces, proofs, instance ids).
  std::string hex(const char* key, std::size_t min, std::size_t max) {
    std::string value = text(key, max);
    bool ok = value.size() >= min && std::all_of(value.begin(), value.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'); });
    if (!problem && !ok) reject(key, "is not " + std::to_string(min) + ".." + std::to_string(max) + " hex digits");
    return value;
  }

  int integer(const char* key, int min, int max) {
    const json* value = find(key, &json::is_number_integer, "an integer");
    if (!value) return 0;
    // JSON integers arrive as signed or unsigned 64-bit; compared before narrowing.
    bool in_range = value->is_number_unsigned()
                        ? value->get<std::uint64_t>() <= static_cast<std::uint64_t>(max) && static_cast<std::int64_t>(value->get<std::uint64_t>()) >= min
                        : value->get<std::int64_t>() >= min && value->get<std::int64_t>() <= max;
    if (!in_range) return reject(key, "is outside " + std::to_string(min) + ".." + std::to_string(max)), 0;
    return static_cast<int>(value->get<std::int64_t>());
  }

  std::int64_t long_integer(const char* key, std::int64_t min, std::int64_t max) {
    const json* value = find(key, &json::is_number_integer, "an integer");
    if (!value) return 0;
    bool in_range = value->is_number_unsigned()
                        ? value->get<std::uint64_t>() <= static_cast<std::uint64_t>(max) && (min <= 0 || value->get<std::uint64_t>() >= static_cast<std::uint64_t>(min))
                        : value->get<std::int64_t>() >= min && value->get<std::int64_t>() <= max;
    if (!in_range) return reject(key, "is outside " + std::to_string(min) + ".." + std::to_string(max)), 0;
    return value->get<std::int64_t>();
  }

  bool flag(const char* key) {
    const json* value = find(key, &json::is_boolean, "true or false");
    return value && value->get<bool>();
  }

  std::vector<std::string> texts(const char* key, std::size_t max_items, std::size_t max_length) {
    const json* value = find(key, &json::is_array, "a list");
    std::vector<std::string> items;
    if (!value) return items;
    if (value->size() > max_items) return reject(key, "has more than " + std::to_string(max_items) + " items"), items;
    for (const auto& item : *value) {
      if (!item.is_string() || item.get_ref<const std::string&>().size() > max_length) {
        return reject(key, "holds an item that is not a string of at most " + std::to_string(max_length) + " bytes"), items;
      }
      items.push_back(item.get<std::string>());
    }
    return items;
  }

  JobMember member(const char* key) {
    std::string value = text(key, 32);
    auto member = parse_member(value);
    if (!problem && !member) reject(key, "is not a task such as worker:0");
    return member.value_or(JobMember{});
  }

  BarrierProgress progress(const char* key) {
    const json* value = find(key, &json::is_object, "an object");
    BarrierProgress progress;
    if (!value) return progress;
    Fields inner(*value);
    progress.present = inner.integer("present", 0, 1'000'000);
    progress.total = inner.integer("total", 0, 1'000'000);
    progress.missing = inner.texts("missing", max_listed, 32);
    if (inner.problem) reject(key, *inner.problem);
    return progress;
  }

  bool has(const char* key) const { return object_.contains(key); }
  const json* at(const char* key) const { auto it = object_.find(key); return it == object_.end() ? nullptr : &*it; }

  const json* reject(const char* key, const std::string& what) {
    if (!problem) problem = std::string("'") + key + "' " + what;
    return nullptr;
  }

  std::optional<std::string> problem;

 private:
  const json& object_;
};

// A peer from before the version was carried says neither: protocol 1, tfboot version unknown.
int protocol_of(Fields& f) { return f.has("protocol") ? f.integer("protocol", 1, max_protocol) : unversioned_protocol; }

Message parse_challenge(Fields& f) {
  Challenge challenge{f.hex("job", 16, 16), f.hex("nonce", 32, 64), f.flag("secret")};
  challenge.protocol = protocol_of(f);
  challenge.tfboot = f.optional_text("tfboot", max_tfboot_version);
  return challenge;
}

DirectoryFigures directory_from(Fields& f, const char* path_key) {
  DirectoryFigures directory;
  directory.path = f.text(path_key, max_text);
  directory.problem = f.text("problem", max_text);
  directory.free_mib = f.long_integer("free_mib", 0, max_mib);
  directory.write_ms = static_cast<double>(f.long_integer("write_us", 0, max_micros)) / 1000;
  return directory;
}

Message parse_hello(Fields& f) {
  Hello hello;
  hello.job = f.hex("job", 16, 16);
  hello.task = f.member("task");
  hello.host = f.text("host", max_name);
  hello.instance = f.hex("instance", 8, 64);
  hello.supervised = f.flag("supervised");
  hello.name = f.text("name", max_name);
  hello.addresses = f.texts("addresses", max_addresses, max_address);
  if (const json* fingerprint = f.find("fingerprint", &json::is_object, "an object")) {
    hello.fingerprint = fingerprint_from_json(fingerprint->dump(-1, ' ', false, json::error_handler_t::replace));
  }
  hello.nonce = f.hex("nonce", 0, 64);
  hello.proof = f.hex("proof", 0, 64);
  hello.table = f.optional_flag("table");
  hello.started_ms_ago = f.optional_integer("started_ms_ago", 0, std::numeric_limits<int>::max());
  hello.protocol = protocol_of(f);
  hello.tfboot = f.optional_text("tfboot", max_tfboot_version);
  hello.processes = static_cast<int>(f.optional_integer("processes", 0, max_processes_per_node));
  if (f.has("preflight")) {
    if (const json* object = f.find("preflight", &json::is_object, "an object")) {
      Fields inner(*object);
      NodeFigures node;
      node.log_root = directory_from(inner, "log_root");
      if (inner.has("checkpoint_dir")) {
        if (const json* checkpoint = inner.find("checkpoint_dir", &json::is_object, "an object")) {
          Fields dir(*checkpoint);
          node.checkpoint_dir = directory_from(dir, "path");
          if (dir.problem) inner.reject("checkpoint_dir", *dir.problem);
        }
      }
      if (inner.has("silent_gpus")) node.silent_gpus = inner.texts("silent_gpus", max_listed, max_text);
      if (inner.has("network_port")) hello.network_port = inner.integer("network_port", 1, 65535);
      if (inner.problem) f.reject("preflight", *inner.problem);
      hello.preflight = node;
    }
  }
  if (f.has("wall_ms")) hello.wall_ms = f.long_integer("wall_ms", 0, max_wall_ms);
  hello.relay = f.optional_flag("relay");
  return hello;
}

NetworkSummary network_summary_from(Fields& f) {
  NetworkSummary summary;
  const json* object = f.find("network", &json::is_object, "an object");
  if (!object) return summary;
  Fields inner(*object);
  for (const char* key : {"median_bits_per_second", "median_rtt_us"}) {
    const json* value = inner.at(key);
    if (!value) inner.reject(key, "is missing");
    else if (!value->is_null()) {
      const double figure = static_cast<double>(inner.long_integer(key, 0, max_figure));
      if (std::string_view(key) == "median_rtt_us") summary.median_rtt_ms = figure / 1000;
      else summary.median_bits_per_second = figure;
    }
  }
  summary.seconds = static_cast<double>(inner.long_integer("ms", 0, max_micros)) / 1000;
  summary.links = inner.integer("links", 0, max_tasks * static_cast<int>(max_probe_rounds));
  summary.warnings = inner.texts("warnings", max_listed, max_text);
  if (inner.problem) f.reject("network", *inner.problem);
  return summary;
}

Message parse_measure(Fields& f) {
  Measure measure;
  measure.session = f.hex("session", 16, 16);
  measure.round_ms = f.integer("round_ms", 100, 60'000);
  measure.bulk_ms = f.integer("bulk_ms", 10, 60'000);
  measure.max_bytes = f.long_integer("max_bytes", 1, std::int64_t{1} << 34);
  if (!f.problem && measure.bulk_ms >= measure.round_ms) f.reject("bulk_ms", "is not shorter than round_ms");
  const json* rounds = f.find("rounds", &json::is_array, "a list");
  if (rounds && rounds->size() > max_probe_rounds) f.reject("rounds", "has more than " + std::to_string(max_probe_rounds) + " items");
  if (rounds && !f.problem) {
    for (const auto& item : *rounds) {
      if (!item.is_object()) return f.reject("rounds", "holds an item that is not an object"), measure;
      Fields round(item);
      measure.rounds.push_back({round.integer("to", 0, max_tasks - 1), round.text("address", max_address), round.integer("port", 1, 65535)});
      if (round.problem) return f.reject("rounds", *round.problem), measure;
    }
  }
  return measure;
}

Message parse_measured(Fields& f) {
  Measured measured;
  measured.session = f.hex("session", 16, 16);
  const json* links = f.find("links", &json::is_array, "a list");
  if (links && links->size() > max_measured_links) f.reject("links", "has more than " + std::to_string(max_measured_links) + " items");
  if (links && !f.problem) {
    for (const auto& item : *links) {
      if (!item.is_object()) return f.reject("links", "holds an item that is not an object"), measured;
      Fields link(item);
      MeasuredLink figure{link.integer("from", 0, max_tasks - 1), link.integer("to", 0, max_tasks - 1)};
      if (link.has("rtt_us")) figure.rtt_us = link.long_integer("rtt_us", 0, max_micros);
      if (link.has("bits_per_second")) figure.bits_per_second = link.long_integer("bits_per_second", 0, max_figure);
      figure.problem = link.optional_text("problem", max_text);
      if (link.problem) return f.reject("links", *link.problem), measured;
      measured.links.push_back(std::move(figure));
    }
  }
  return measured;
}

Message parse_start(Fields& f) {
  Start start;
  start.supervised = f.flag("supervised");
  start.names_verified = f.flag("names_verified");
  start.environment_differences = f.texts("environment_differences", max_listed, max_listed_line);
  start.tasks = f.integer("tasks", 1, max_tasks);
  if (!f.problem && f.has("addresses")) start.addresses = f.texts("addresses", static_cast<std::size_t>(start.tasks), max_table_entry);
  if (!f.problem && start.addresses && start.addresses->size() != static_cast<std::size_t>(start.tasks)) {
    f.reject("addresses", "does not have one entry per task");
  }
  start.restarts = static_cast<int>(f.optional_integer("restarts", 0, max_restart_count));
  start.max_restarts = static_cast<int>(f.optional_integer("max_restarts", 0, max_restart_count));
  start.stop_together = f.optional_flag("stop_together");
  if (!f.problem && f.has("preflight")) {
    if (const json* object = f.find("preflight", &json::is_object, "an object")) {
      Fields inner(*object);
      if (inner.has("network")) start.network = network_summary_from(inner);
      const json* offsets = inner.find("clock_offsets_ms", &json::is_array, "a list");
      if (offsets && offsets->size() != static_cast<std::size_t>(start.tasks)) inner.reject("clock_offsets_ms", "does not have one entry per task");
      if (offsets && !inner.problem) {
        start.clock_offsets_ms.emplace();
        for (const auto& item : *offsets) {
          if (!item.is_number_integer() || item.get<std::int64_t>() < -max_wall_ms || item.get<std::int64_t>() > max_wall_ms) {
            inner.reject("clock_offsets_ms", "holds an item that is not an offset in ms");
            break;
          }
          start.clock_offsets_ms->push_back(item.get<std::int64_t>());
        }
      }
      if (inner.problem) f.reject("preflight", *inner.problem);
    }
  }
  return start;
}

Message parse_abort(Fields& f) {
  Abort abort{f.integer("code", exit_code::usage, exit_code::preflight_refused), f.text("message", max_text)};
  if (abort.code == exit_code::file_write || abort.code == exit_code::resources) f.reject("code", "is not a start barrier's verdict");
  return abort;
}

Message parse_stop(Fields& f) { return Stop{f.member("task"), f.integer("status", -1, 255), f.text("message", max_text)}; }

// Only the stop signals: a stranger's SIGKILL must not reach every command as a "preemption".
Message parse_preempt(Fields& f) {
  Preempt preempt{f.member("task"), f.integer("signal", 1, 64)};
  if (!f.problem && preempt.signal != 2 && preempt.signal != 15) f.reject("signal", "is not SIGTERM (15) or SIGINT (2)");
  return preempt;
}

Message parse_restart(Fields& f) {
  return Restart{f.member("task"), f.integer("status", -1, 255), f.text("message", max_text), f.integer("count", 1, max_restart_count)};
}

std::optional<Message> parse_typed(std::string_view type, Fields& f) {
  if (type == "challenge") return parse_challenge(f);
  if (type == "hello") return parse_hello(f);
  if (type == "accepted") return Accepted{f.hex("proof", 0, 64), f.progress("progress")};
  if (type == "refused") return Refused{f.text("reason", max_text)};
  if (type == "waiting") return Waiting{f.progress("progress")};
  if (type == "start") return parse_start(f);
  if (type == "abort") return parse_abort(f);
  if (type == "ping") return Ping{};
  if (type == "exit") return Exit{f.integer("status", 0, 255), f.optional_text("detail", max_text)};
  if (type == "done") return Done{};
  if (type == "stop") return parse_stop(f);
  if (type == "restart") return parse_restart(f);
  if (type == "preempt") return parse_preempt(f);
  if (type == "measure") return parse_measure(f);
  if (type == "measured") return parse_measured(f);
  return std::nullopt;
}

bool allowed_from(const Message& message, Sender from) {
  const bool both = std::holds_alternative<Ping>(message) || std::holds_alternative<Preempt>(message);
  const bool from_task =
      std::holds_alternative<Hello>(message) || std::holds_alternative<Exit>(message) || std::holds_alternative<Measured>(message);
  return both || (from == Sender::task ? from_task : !from_task);
}

}  // namespace

Result<Message> parse_message(std::string_view line, Sender from) {
  const std::size_t limit = from == Sender::task ? max_task_message : max_coordinator_message;
  if (line.size() > limit) return make_error(protocol_violation, "a message over " + std::to_string(limit) + " bytes");
  json object = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) return make_error(protocol_violation, "a message that is not JSON (or not UTF-8)");
  if (!object.is_object()) return make_error(protocol_violation, "a message that is not a JSON object");
  auto type = object.find("type");
  if (type == object.end() || !type->is_string()) return make_error(protocol_violation, "a message without a 'type'");
  const std::string& name = type->get_ref<const std::string&>();
  Fields fields(object);
  auto message = parse_typed(name, fields);
  if (!message) return make_error(protocol_violation, "a message of unknown type '" + name.substr(0, 32) + "'");
  if (!allowed_from(*message, from)) {
    return make_error(protocol_violation, "a '" + name + "' message from a " + (from == Sender::task ? "task" : "coordinator"));
  }
  if (fields.problem) {
    // A peer of another version whose first message we cannot read: its version says why.
    auto protocol = object.find("protocol");
    if ((name == "challenge" || name == "hello") && protocol != object.end() && protocol->is_number_integer() &&
        *protocol != protocol_version) {
      return make_error(protocol_violation, "a '" + name + "' of control protocol " + protocol->dump() + " (this tfboot speaks " +
                                                std::to_string(protocol_version) + ") that it cannot read: " + *fields.problem);
    }
    return make_error(protocol_violation, "a bad '" + name + "' message: " + *fields.problem);
  }
  return *message;
}

Abort fitted_to_the_wire(Abort abort) {
  static constexpr std::string_view rest = " ... (the rest in the coordinator's log)";
  if (abort.message.size() > max_text) abort.message = abort.message.substr(0, max_text - rest.size()).append(rest);
  return abort;
}

}  // namespace tfboot
