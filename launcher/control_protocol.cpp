// The job's control channel, pure: messages, framing, validation, handshake, barrier and watches.
#include "control_protocol.h"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstring>

#include <nlohmann/json.hpp>

#include "control_auth.h"

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

struct Encoder {
  ordered_json& out;
  void operator()(const Challenge& m) {
    out["job"] = m.job;
    out["nonce"] = m.nonce;
    out["secret"] = m.secret;
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
  }
  void operator()(const Accepted& m) {
    out["proof"] = m.proof;
    out["progress"] = progress_json(m.progress);
  }
  void operator()(const Refused& m) { out["reason"] = m.reason; }
  void operator()(const Waiting& m) { out["progress"] = progress_json(m.progress); }
  void operator()(const Start& m) {
    out["supervised"] = m.supervised;
    out["environment_differences"] = m.environment_differences;
    ordered_json members = ordered_json::array();
    for (const auto& member : m.members) {
      members.push_back({{"task", member.task.text()}, {"host", member.host}, {"name", member.name}, {"addresses", member.addresses}});
    }
    out["members"] = std::move(members);
  }
  void operator()(const Abort& m) {
    out["code"] = m.code;
    out["message"] = m.message;
  }
  void operator()(const Ping&) {}
  void operator()(const Exit& m) { out["status"] = m.status; }
  void operator()(const Done&) {}
  void operator()(const Stop& m) {
    out["task"] = m.task.text();
    out["status"] = m.status;
    out["message"] = m.message;
  }
};

constexpr const char* type_names[] = {"challenge", "hello", "accepted", "refused", "waiting", "start",
                                      "abort",     "ping",  "exit",     "done",    "stop"};
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
constexpr std::size_t max_members = 1'000'000;

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

  const json* reject(const char* key, const std::string& what) {
    if (!problem) problem = std::string("'") + key + "' " + what;
    return nullptr;
  }

  std::optional<std::string> problem;

 private:
  const json& object_;
};

Message parse_challenge(Fields& f) { return Challenge{f.hex("job", 16, 16), f.hex("nonce", 32, 64), f.flag("secret")}; }

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
  return hello;
}

Message parse_start(Fields& f) {
  Start start;
  start.supervised = f.flag("supervised");
  start.environment_differences = f.texts("environment_differences", max_listed, max_listed_line);
  const json* members = f.find("members", &json::is_array, "a list");
  if (!members) return start;
  if (members->size() > max_members) return f.reject("members", "has too many items"), start;
  for (const auto& item : *members) {
    if (!item.is_object()) return f.reject("members", "holds an item that is not an object"), start;
    Fields m(item);
    MemberInfo info{m.member("task"), m.text("host", max_name), m.text("name", max_name), m.texts("addresses", max_addresses, max_address)};
    if (m.problem) return f.reject("members", "holds a bad task: " + *m.problem), start;
    start.members.push_back(std::move(info));
  }
  return start;
}

Message parse_abort(Fields& f) {
  Abort abort{f.integer("code", exit_code::start_barrier_incomplete, exit_code::environment_mismatch), f.text("message", max_text)};
  return abort;
}

Message parse_stop(Fields& f) { return Stop{f.member("task"), f.integer("status", -1, 255), f.text("message", max_text)}; }

std::optional<Message> parse_typed(std::string_view type, Fields& f) {
  if (type == "challenge") return parse_challenge(f);
  if (type == "hello") return parse_hello(f);
  if (type == "accepted") return Accepted{f.hex("proof", 0, 64), f.progress("progress")};
  if (type == "refused") return Refused{f.text("reason", max_text)};
  if (type == "waiting") return Waiting{f.progress("progress")};
  if (type == "start") return parse_start(f);
  if (type == "abort") return parse_abort(f);
  if (type == "ping") return Ping{};
  if (type == "exit") return Exit{f.integer("status", 0, 255)};
  if (type == "done") return Done{};
  if (type == "stop") return parse_stop(f);
  return std::nullopt;
}

bool allowed_from(const Message& message, Sender from) {
  bool from_task = std::holds_alternative<Hello>(message) || std::holds_alternative<Ping>(message) || std::holds_alternative<Exit>(message);
  return from == Sender::task ? from_task : !from_task || std::holds_alternative<Ping>(message);
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
  if (fields.problem) return make_error(protocol_violation, "a bad '" + name + "' message: " + *fields.problem);
  return *message;
}

// --- Handshake

namespace {

std::string proof_text(std::string_view role, const Challenge& challenge, const Hello& hello) {
  return std::string(role) + "\n" + challenge.job + "\n" + hello.task.text() + "\n" + challenge.nonce + "\n" + hello.nonce;
}

}  // namespace

std::string task_proof(std::string_view secret, const Challenge& challenge, const Hello& hello) {
  return hmac_hex(secret, proof_text("tfboot task", challenge, hello));
}

std::string coordinator_proof(std::string_view secret, const Challenge& challenge, const Hello& hello) {
  return hmac_hex(secret, proof_text("tfboot coordinator", challenge, hello));
}

Result<void> check_challenge(const Challenge& challenge, std::string_view job, bool have_secret) {
  if (challenge.job != job) {
    return make_error(protocol_violation, "the coordinator serves job " + challenge.job + ", not ours (" + std::string(job) +
                                              "): another job, or a cluster of another size");
  }
  if (challenge.secret && !have_secret) {
    return make_error(protocol_violation, "the coordinator requires the shared secret; set --control-secret-file");
  }
  if (!challenge.secret && have_secret) {
    return make_error(protocol_violation, "the coordinator has no shared secret but we do; set --control-secret-file on every task");
  }
  return {};
}

Result<void> check_hello_proof(const Hello& hello, const Challenge& challenge, const std::optional<std::string>& secret) {
  if (!secret) return {};
  if (hello.nonce.size() < 32) return make_error(protocol_violation, "no nonce in the hello although a secret is required");
  if (!same_proof(task_proof(*secret, challenge, hello), hello.proof)) {
    return make_error(protocol_violation, "wrong proof of the shared secret");
  }
  return {};
}

Result<void> check_accepted(const Accepted& accepted, const Challenge& challenge, const Hello& hello,
                            const std::optional<std::string>& secret) {
  if (!secret) return {};
  if (!same_proof(coordinator_proof(*secret, challenge, hello), accepted.proof)) {
    return make_error(protocol_violation, "the coordinator's proof of the shared secret is wrong");
  }
  return {};
}

// --- The start barrier

StartBarrier::StartBarrier(BarrierSettings settings) : settings_(std::move(settings)) {
  for (const auto& task : settings_.tasks) slots_.push_back(Slot{.task = task});
  if (Slot* own = slot_of(settings_.own.task)) {
    own->hello = settings_.own;
    own->connection = 0;  // never a real connection id: the coordinator is present by itself
    own->ever_connected = true;
  }
}

StartBarrier::Slot* StartBarrier::slot_of(const JobMember& task) {
  auto it = std::find_if(slots_.begin(), slots_.end(), [&](const Slot& slot) { return slot.task == task; });
  return it == slots_.end() ? nullptr : &*it;
}

StartBarrier::Slot* StartBarrier::slot_of(ConnectionId connection) {
  auto it = std::find_if(slots_.begin(), slots_.end(), [&](const Slot& slot) { return slot.connection == connection; });
  return it == slots_.end() || connection == 0 ? nullptr : &*it;
}

HelloVerdict StartBarrier::on_hello(ConnectionId connection, const Hello& hello, std::string_view peer, Instant now) {
  const std::string from = "'" + hello.host + "' (" + std::string(peer) + ")";
  Slot* slot = slot_of(hello.task);
  if (hello.job != settings_.job_id) {
    if (slot) slot->last_error = "refused a hello from " + from + " of another job " + hello.job;
    return {false, "job " + hello.job + " is not this job (" + settings_.job_id + "): another job, or a cluster of another size"};
  }
  if (!slot) return {false, hello.task.text() + " is not a task of this job's cluster"};
  if (hello.task == settings_.own.task) return {false, hello.task.text() + " is the coordinator itself, host '" + settings_.own.host + "'"};
  HelloVerdict verdict{true, "", std::nullopt};
  if (slot->connection) {
    bool same_instance = slot->hello.instance == hello.instance;
    bool alive = now - slot->last_heard <= settings_.peer_silent_after;
    if (alive && !same_instance) {
      return {false, hello.task.text() + " is already present from host '" + slot->hello.host + "' (" + slot->peer +
                         "); refused the second hello from host " + from};
    }
    verdict.replaced = slot->connection;  // a reconnect of the same tfboot, or a restarted one after a dead one
  }
  slot->connection = connection;
  slot->hello = hello;
  slot->peer = std::string(peer);
  slot->last_heard = now;
  slot->ever_connected = true;
  slot->last_error.clear();
  return verdict;
}

void StartBarrier::on_heard(ConnectionId connection, Instant now) {
  if (Slot* slot = slot_of(connection)) slot->last_heard = now;
}

void StartBarrier::on_closed(ConnectionId connection, const std::string& why) {
  if (Slot* slot = slot_of(connection)) {
    slot->connection.reset();
    slot->last_error = why;
  }
}

void StartBarrier::note_problem(const JobMember& task, const std::string& problem) {
  if (Slot* slot = slot_of(task); slot && !slot->connection) slot->last_error = problem;
}

std::vector<ConnectionId> StartBarrier::silent(Instant now) const {
  std::vector<ConnectionId> connections;
  for (const auto& slot : slots_) {
    if (slot.connection && *slot.connection != 0 && now - slot.last_heard > settings_.peer_silent_after) {
      connections.push_back(*slot.connection);
    }
  }
  return connections;
}

bool StartBarrier::complete() const {
  return std::all_of(slots_.begin(), slots_.end(), [](const Slot& slot) { return slot.connection.has_value(); });
}

BarrierProgress StartBarrier::progress() const {
  constexpr std::size_t shown = 5;  // enough to act on; the coordinator's log names them all
  BarrierProgress progress{0, static_cast<int>(slots_.size()), {}};
  for (const auto& slot : slots_) {
    if (slot.connection) ++progress.present;
    else if (progress.missing.size() < shown) progress.missing.push_back(slot.task.text());
  }
  return progress;
}

std::vector<std::string> StartBarrier::environment_differences() const {
  std::vector<std::pair<std::string, Fingerprint>> by_task;
  for (const auto& slot : slots_) {
    if (slot.connection) by_task.emplace_back(slot.task.text(), slot.hello.fingerprint);
  }
  return compare_fingerprints(by_task);
}

std::variant<Start, Abort> StartBarrier::decide(bool supervised) const {
  Start start{supervised, {}, {}};
  if (settings_.env_check != EnvCheck::off) start.environment_differences = environment_differences();
  if (settings_.env_check == EnvCheck::fail && !start.environment_differences.empty()) {
    std::string message = "environment check failed (--env-check fail): ";
    for (std::size_t i = 0; i < start.environment_differences.size(); ++i) message += (i ? " | " : "") + start.environment_differences[i];
    return Abort{exit_code::environment_mismatch, message};
  }
  for (const auto& slot : slots_) start.members.push_back({slot.task, slot.hello.host, slot.hello.name, slot.hello.addresses});
  return start;
}

std::string StartBarrier::missing_report(std::size_t at_most) const {
  std::string report;
  std::size_t listed = 0;
  std::size_t missing = 0;
  for (const auto& slot : slots_) {
    if (slot.connection) continue;
    if (++missing > at_most) continue;
    ++listed;
    std::string detail = slot.ever_connected ? "host '" + slot.hello.host + "'" : "never said hello";
    if (!slot.last_error.empty()) detail += ": " + slot.last_error;
    report += (report.empty() ? "" : ", ") + slot.task.text() + " (" + detail + ")";
  }
  if (missing > listed) report += " and " + std::to_string(missing - listed) + " more";
  return report;
}

std::vector<StartBarrier::Present> StartBarrier::present_tasks() const {
  std::vector<Present> present;
  for (const auto& slot : slots_) {
    if (slot.connection && *slot.connection != 0) present.push_back({slot.task, *slot.connection, slot.hello.supervised});
  }
  return present;
}

// --- After the start

std::string describe_status(int status) {
  if (status < 0) return "lost";
  if (status > exit_code::signal_base && status < exit_code::signal_base + 65) {
    const char* name = sigabbrev_np(status - exit_code::signal_base);
    return "signal " + std::string(name ? "SIG" + std::string(name) : std::to_string(status - exit_code::signal_base)) +
           " (status " + std::to_string(status) + ")";
  }
  return "status " + std::to_string(status);
}

JobMonitor::JobMonitor(JobMember self, const std::vector<Watched>& tasks, std::chrono::milliseconds silent_after, Instant now)
    : self_(self), silent_after_(silent_after) {
  for (const auto& task : tasks) tasks_.emplace(task.task, State{task.supervised, false, false, now});
}

JobDecision JobMonitor::fail(const JobMember& task, int status, const std::string& message) {
  if (decided_) return {};
  decided_ = true;
  JobEvent event{JobEventKind::task_failed, task.text(), status, message};
  return {{event}, Stop{task, status, message}};
}

JobDecision JobMonitor::on_message(const JobMember& from, const Message& message, Instant now) {
  auto it = tasks_.find(from);
  if (it == tasks_.end()) return {};
  it->second.last_heard = now;
  const Exit* exit = std::get_if<Exit>(&message);
  if (!exit) return {};
  it->second.exited = true;
  // A task other than the coordinator finishing is normal (an evaluator, a worker done early).
  if (exit->status == 0) return {};
  return fail(from, exit->status, from.text() + " failed with " + describe_status(exit->status));
}

JobDecision JobMonitor::on_closed(const JobMember& from, const std::string& why, Instant) {
  auto it = tasks_.find(from);
  if (it == tasks_.end() || it->second.gone) return {};
  it->second.gone = true;
  if (it->second.exited || !it->second.supervised) return {};
  return fail(from, -1, from.text() + " was lost: " + why);
}

JobDecision JobMonitor::on_tick(Instant now) {
  for (auto& [task, state] : tasks_) {
    if (state.gone || state.exited || !state.supervised || now - state.last_heard <= silent_after_) continue;
    state.gone = true;
    auto seconds = std::chrono::duration<double>(now - state.last_heard).count();
    auto decision = fail(task, -1, task.text() + " was lost: silent for " + std::to_string(static_cast<int>(seconds)) + "s");
    if (!decision.events.empty()) return decision;
  }
  return {};
}

JobDecision JobMonitor::on_own_exit(int status) {
  if (decided_) return {};
  if (status != 0) return fail(self_, status, self_.text() + " failed with " + describe_status(status));
  decided_ = true;
  return {{}, Done{}};
}

Instant JobMonitor::next_deadline() const {
  Instant next = Instant::max();
  if (decided_) return next;
  for (const auto& [task, state] : tasks_) {
    if (!state.gone && !state.exited && state.supervised) next = std::min(next, state.last_heard + silent_after_);
  }
  return next;
}

CoordinatorWatch::CoordinatorWatch(JobMember coordinator, bool active, std::chrono::milliseconds silent_after, Instant now)
    : coordinator_(coordinator), active_(active), silent_after_(silent_after), last_heard_(now) {}

std::optional<JobEvent> CoordinatorWatch::decide(JobEvent event) {
  if (decided_ || !active_) return std::nullopt;
  decided_ = true;
  return event;
}

std::optional<JobEvent> CoordinatorWatch::on_message(const Message& message, Instant now) {
  last_heard_ = now;
  if (std::holds_alternative<Done>(message)) {
    return decide({JobEventKind::job_done, coordinator_.text(), 0, "the coordinator " + coordinator_.text() + " finished: the job is done"});
  }
  if (const Stop* stop = std::get_if<Stop>(&message)) return decide({JobEventKind::task_failed, stop->task.text(), stop->status, stop->message});
  return std::nullopt;
}

std::optional<JobEvent> CoordinatorWatch::on_closed(const std::string& why) {
  return decide({JobEventKind::coordinator_lost, coordinator_.text(), -1, "the coordinator " + coordinator_.text() + " was lost: " + why});
}

std::optional<JobEvent> CoordinatorWatch::on_tick(Instant now) {
  if (now - last_heard_ <= silent_after_) return std::nullopt;
  auto seconds = static_cast<int>(std::chrono::duration<double>(now - last_heard_).count());
  return decide({JobEventKind::coordinator_lost, coordinator_.text(), -1,
                 "the coordinator " + coordinator_.text() + " was lost: silent for " + std::to_string(seconds) + "s"});
}

Instant CoordinatorWatch::next_deadline() const { return decided_ || !active_ ? Instant::max() : last_heard_ + silent_after_; }

}  // namespace tfboot
