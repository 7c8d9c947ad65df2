// Command line and TFBOOT_* environment twins -> Options (docs/command-line.md).
#include "cli/options.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "base/text.h"

namespace tfboot {
namespace {

enum class Kind { value, flag, negatable };

struct OptionSpec {
  std::string_view name;  // without the leading "--"
  Kind kind;
  std::string_view placeholder;
  std::string_view help;
  std::string_view default_text;  // for --help
  // The default_text is the value itself, as a user would write it: parsed like one (source
  // "default") when the option is not given. Otherwise it describes what happens then.
  bool default_is_value = false;
};

// One row per option; help text, env twins and every default come from this table.
constexpr OptionSpec option_table[] = {
    {"task-type", Kind::value, "T", "chief, worker, ps or evaluator", "from identity sources"},
    {"task-index", Kind::value, "N", "this task's index within its type", "from identity sources"},
    {"hostname", Kind::value, "NAME", "the name to parse instead of the real one", "POD_NAME, else gethostname()"},
    {"chief-at-ordinal-0", Kind::flag, "", "ordinal 0 is chief 0, ordinal k is worker k-1", "off"},
    {"identity-from", Kind::value, "SRC", "auto, hostname or ptr (reverse DNS of own IP)", "auto", true},
    {"cluster", Kind::value, "SPEC", "task counts, e.g. chief=1,ps=2,worker=4,evaluator=1",
     "required unless TF_CONFIG is set or a platform describes the job"},
    {"peer-template", Kind::value, "T", "peer host name with {prefix} {type} {index} {ordinal}",
     "derived from own hostname"},
    {"service", Kind::value, "NAME", "headless Service (pod subdomain)", "from /etc/hosts, else none"},
    {"namespace", Kind::value, "NS", "Kubernetes namespace", "POD_NAMESPACE, /etc/hosts, resolv.conf search list, default"},
    {"cluster-domain", Kind::value, "D", "cluster DNS domain", "resolv.conf search list, else cluster.local"},
    {"pod-info-dir", Kind::value, "DIR", "downward-API volume with the pod's labels and annotations (JobSet)",
     "/etc/podinfo", true},
    {"port", Kind::value, "SPEC", "2222, or per type: 2222,ps=2223 (pytorch and jax: 29500 unless given)", "2222", true},
    {"address", Kind::value, "MODE", "name (DNS names) or ip (resolved addresses) in TF_CONFIG", "name", true},
    {"evaluator-in-cluster", Kind::flag, "", "list the evaluator in TF_CONFIG's cluster", "off"},
    {"wait", Kind::value, "DURATION", "deadline for all peers to resolve; 0 = no DNS wait", "15m", true},
    {"dns-server", Kind::value, "LIST", "ip[:port],... to query instead of resolv.conf's", "resolv.conf"},
    {"log-root", Kind::value, "DIR", "parent of per-task log dirs", "/logs (./logs for local)"},
    {"print", Kind::flag, "", "print what each process of this node would get (TF_CONFIG, or each rank's variables), at once, with no lookup; runs and writes nothing", "off"},
    {"init", Kind::negatable, "", "supervise the command as an init (--no-init: exec it)", "on when PID 1"},
    {"control-port", Kind::value, "N", "the job's control channel (start barrier, job end); 0 = off", "2220", true},
    {"relay-port", Kind::value, "N", "above 128 tasks, the port relays listen on for their group; 0 = the control port", "0", true},
    {"start-timeout", Kind::value, "DURATION", "deadline for every task of the job to be present", "30m", true},
    {"env-check", Kind::value, "MODE", "warn, fail or off when tasks run different environments", "warn", true},
    {"preflight", Kind::value, "LEVEL", "off, quick (every task checks its node: log root, clock, accelerators) or network (also its links) before the start",
     "off", true},
    {"preflight-port", Kind::value, "N", "--preflight network: the port each task measures its links on", "2221", true},
    {"preflight-refuse-below", Kind::value, "RATIO", "--preflight network: refuse a start when a task's throughput is under this share of the job's median; 0 = only warn",
     "0.1", true},
    {"checkpoint-dir", Kind::value, "DIR", "--preflight: also check that this directory takes a write and has room (a URL is not checked)",
     "none"},
    {"stop-grace", Kind::value, "DURATION", "SIGTERM to the command, SIGKILL this long after", "30s", true},
    {"control-secret-file", Kind::value, "PATH", "shared secret the job's tasks prove they know", "none"},
    {"control-source-check", Kind::value, "MODE", "on: a task's connection must come from its name's address; off behind a NAT",
     "on", true},
    {"idle-when-done", Kind::flag, "", "init: after the command succeeded, stay idle until stopped", "off"},
    {"max-restarts", Kind::value, "N", "init: restart the whole job in place after a failure, at most N times", "0", true},
    {"stop-together", Kind::value, "MODE", "init: on passes a stop signal to one task on to every task's command", "on",
     true},
    {"framework", Kind::value, "F", "tensorflow, pytorch or jax: the environment each process gets", "tensorflow", true},
    {"nproc-per-node", Kind::value, "N", "processes of the command per task: a number, gpu, cpu or auto (pytorch, jax)",
     "1", true},
    {"log-level", Kind::value, "L", "trace, debug, info, warn, error", "info", true},
    {"log-format", Kind::value, "F", "text or json (one object per line)", "text", true},
    {"metrics-port", Kind::value, "N", "init: serve /metrics, /healthz, /readyz, /status on this port; 0 = off", "0", true},
    {"termination-log", Kind::value, "PATH", "where a failing exit's one-line reason is written",
     "/dev/termination-log when it exists and is writable"},
    {"unknown-variables", Kind::value, "MODE", "error or warn: a TFBOOT_* variable that is no option's twin", "error", true},
};

const OptionSpec* find_option(std::string_view name) {
  for (const auto& spec : option_table) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::string env_twin(std::string_view name) {
  std::string twin = "TFBOOT_";
  for (char c : name) {
    twin += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return twin;
}

// TFBOOT_* names tfboot reads or sets that are not an option's twin.
// TFBOOT_TEST_CLOCK_OFFSET_MS is for tests only (docs/preflight.md): it shifts the wall clock a hello reports.
constexpr std::string_view other_tfboot_variables[] = {"TFBOOT_POD_INDEX", "TFBOOT_LOG_DIR", "TFBOOT_RESTART_COUNT",
                                                       "TFBOOT_TEST_CLOCK_OFFSET_MS"};

// The option (by name) nearest to `name` when it is a likely typo of it, else nothing.
std::optional<std::string_view> nearest_option(std::string_view name) {
  std::optional<std::string_view> best;
  std::size_t best_distance = 0;
  for (const auto& spec : option_table) {
    const std::size_t distance = edit_distance(name, spec.name);
    if (!best || distance < best_distance) {
      best = spec.name;
      best_distance = distance;
    }
  }
  // A third of the name may be wrong, 2 to 3 characters: "clustr", "task-idx", "wiat", not "frobnicate".
  if (best && best_distance <= std::min<std::size_t>(3, std::max<std::size_t>(2, name.size() / 3))) return best;
  return std::nullopt;
}

std::string unknown_option(std::string_view flag) {
  std::string text = "unknown option '" + std::string(flag) + "'";
  // "--no-cluster": a real option that has no --no- form; its name is no typo to correct.
  const bool negates_an_option = flag.starts_with("--no-") && find_option(flag.substr(5));
  if (flag.starts_with("--") && !negates_an_option) {
    if (auto near = nearest_option(flag.substr(2))) return text + " (did you mean --" + std::string(*near) + "? see --help)";
  }
  return text + " (see --help)";
}

// A TFBOOT_* variable that is no option's twin, and the twin it is likely a typo of.
struct UnknownVariable {
  std::string name;
  std::optional<std::string> nearest;
};

std::vector<UnknownVariable> unknown_twins(const Environment& env) {
  std::vector<UnknownVariable> unknown;
  for (auto it = env.lower_bound("TFBOOT_"); it != env.end() && it->first.starts_with("TFBOOT_"); ++it) {
    const std::string& name = it->first;
    if (std::ranges::find(other_tfboot_variables, name) != std::end(other_tfboot_variables)) continue;
    if (std::ranges::any_of(option_table, [&](const OptionSpec& spec) { return env_twin(spec.name) == name; })) continue;
    std::string lower = name.substr(7);
    std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return c == '_' ? '-' : static_cast<char>(std::tolower(c)); });
    auto near = nearest_option(lower);
    unknown.push_back({name, near ? std::optional<std::string>(env_twin(*near)) : std::nullopt});
  }
  return unknown;
}

// --unknown-variables warn: "TFBOOT_CLUSTR is not an option's environment twin and is ignored; did you mean TFBOOT_CLUSTER?"
std::vector<std::string> unknown_twin_warnings(const std::vector<UnknownVariable>& unknown) {
  std::vector<std::string> warnings;
  for (const auto& variable : unknown) {
    std::string warning = variable.name + " is not an option's environment twin and is ignored";
    if (variable.nearest) warning += "; did you mean " + *variable.nearest + "?";
    warnings.push_back(warning);
  }
  return warnings;
}

// The default: one line naming every unknown variable, each with its likely twin. A typo such as
// TFBOOT_WAITT=0 would otherwise cost the full default DNS wait.
std::string unknown_twins_error(const std::vector<UnknownVariable>& unknown) {
  std::vector<std::string> named;
  for (const auto& variable : unknown) named.push_back(variable.name + (variable.nearest ? " (did you mean " + *variable.nearest + "?)" : ""));
  const std::string what = unknown.size() == 1 ? named[0] + " is not an option's environment twin"
                                               : joined(named, ", ") + " are not options' environment twins";
  return what + "; TFBOOT_UNKNOWN_VARIABLES=warn ignores them with a warning (for an image that sets variables for several "
                "tfboot versions)";
}

// What tfboot local reads (docs/deploying.md: tfboot local); the others are about DNS, pods and the control
// channel, which it has none of.
constexpr std::string_view local_options[] = {"cluster",          "log-root",  "stop-grace",     "log-level",   "log-format",
                                              "evaluator-in-cluster", "framework", "nproc-per-node", "max-restarts",
                                              "unknown-variables"};

std::vector<std::string> ignored_by_local(const std::map<std::string, Setting, std::less<>>& given) {
  std::vector<std::string> warnings;
  for (const auto& [name, setting] : given) {
    if (std::ranges::find(local_options, name) != std::end(local_options)) continue;
    warnings.push_back(setting.source + " does not apply to tfboot local and is ignored");
  }
  return warnings;
}

Result<bool> parse_bool(const Setting& setting) {
  std::string lower = setting.value;
  std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return false;
  return usage_error(setting.source + "='" + setting.value + "' is not a boolean (use 1/0, true/false, yes/no or on/off)");
}

// The words an option accepts and what each means, in the order its error lists them.
template <typename T>
struct Choice {
  std::string_view word;
  T value;
};

constexpr Choice<IdentityFrom> identity_from_choices[] = {
    {"auto", IdentityFrom::automatic}, {"hostname", IdentityFrom::hostname}, {"ptr", IdentityFrom::ptr}};
constexpr Choice<AddressMode> address_choices[] = {{"name", AddressMode::name}, {"ip", AddressMode::ip}};
constexpr Choice<bool> unknown_variables_choices[] = {{"error", false}, {"warn", true}};
constexpr Choice<EnvCheck> env_check_choices[] = {{"warn", EnvCheck::warn}, {"fail", EnvCheck::fail}, {"off", EnvCheck::off}};
constexpr Choice<PreflightLevel> preflight_choices[] = {{"off", PreflightLevel::off}, {"quick", PreflightLevel::quick}, {"network", PreflightLevel::network}};
constexpr Choice<bool> on_off_choices[] = {{"on", true}, {"off", false}};
constexpr Choice<std::string_view> log_level_choices[] = {
    {"trace", "trace"}, {"debug", "debug"}, {"info", "info"}, {"warn", "warn"}, {"error", "error"}};
constexpr Choice<Framework> framework_choices[] = {
    {"tensorflow", Framework::tensorflow}, {"pytorch", Framework::pytorch}, {"jax", Framework::jax}};
constexpr Choice<LogFormat> log_format_choices[] = {{"text", LogFormat::text}, {"json", LogFormat::json}};

// "--address 'x' must be name or ip" when the setting is none of the words.
template <typename T, std::size_t N>
Result<T> parse_choice(const Setting& setting, const Choice<T> (&choices)[N]) {
  std::string words;
  for (std::size_t i = 0; i < N; ++i) {
    if (setting.value == choices[i].word) return choices[i].value;
    words += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(choices[i].word);
  }
  return usage_error(quoted(setting) + " must be " + words);
}

using RawSettings = std::map<std::string, Setting, std::less<>>;

// 0..max written in decimal digits only, else nothing.
// "0.1", "0", "1": a share from 0 to 1.
std::optional<double> ratio_number(const std::string& text) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || !(value >= 0 && value <= 1)) return std::nullopt;
  return value;
}

std::optional<int> whole_number(const Setting& setting, int max) {
  int value = -1;
  auto [end, error] = std::from_chars(setting.value.data(), setting.value.data() + setting.value.size(), value);
  if (error != std::errc{} || end != setting.value.data() + setting.value.size() || value < 0 || value > max) return std::nullopt;
  return value;
}

Result<Options> build_options(Mode mode, const RawSettings& raw, std::vector<std::string> command) {
  Options options;
  options.mode = mode;
  options.command = std::move(command);
  auto get = [&](std::string_view name) -> std::optional<Setting> {
    if (auto it = raw.find(name); it != raw.end()) return it->second;
    const OptionSpec* spec = find_option(name);
    if (spec && spec->default_is_value) return Setting{std::string(spec->default_text), "default"};
    return std::nullopt;
  };
  auto get_bool = [&](std::string_view name) -> Result<std::optional<bool>> {
    auto setting = get(name);
    if (!setting) return std::optional<bool>{};
    auto value = parse_bool(*setting);
    if (!value) return std::unexpected(value.error());
    return std::optional<bool>{*value};
  };
  // Sets `target` from the option's words (every option with words has a default).
  auto choose = [&]<typename T, std::size_t N>(std::string_view name, const Choice<T> (&choices)[N], auto& target) -> Result<void> {
    auto value = parse_choice(*get(name), choices);
    if (!value) return std::unexpected(value.error());
    target = *value;
    return {};
  };
  auto duration = [&](std::string_view name, std::chrono::milliseconds& target) -> Result<void> {
    auto setting = get(name);
    auto value = parse_duration(setting->value, setting->source);
    if (!value) return std::unexpected(value.error());
    target = *value;
    return {};
  };

  options.task_type = get("task-type");
  options.task_index = get("task-index");
  options.hostname = get("hostname");
  options.cluster = get("cluster");
  options.peer_template = get("peer-template");
  options.service = get("service");
  options.kube_namespace = get("namespace");
  options.cluster_domain = get("cluster-domain");
  options.dns_server = get("dns-server");
  options.log_root = get("log-root");
  options.checkpoint_dir = get("checkpoint-dir");
  options.port = *get("port");
  options.pod_info_dir = *get("pod-info-dir");

  for (auto [name, target] : {std::pair{"chief-at-ordinal-0", &options.chief_at_ordinal_0},
                              std::pair{"evaluator-in-cluster", &options.evaluator_in_cluster},
                              std::pair{"print", &options.print}, std::pair{"idle-when-done", &options.idle_when_done}}) {
    auto value = get_bool(name);
    if (!value) return std::unexpected(value.error());
    if (*value) *target = **value;
  }
  auto init = get_bool("init");
  if (!init) return std::unexpected(init.error());
  options.init = *init;

  for (auto checked : {choose("identity-from", identity_from_choices, options.identity_from),
                       choose("address", address_choices, options.address), duration("wait", options.wait),
                       duration("start-timeout", options.start_timeout), duration("stop-grace", options.stop_grace)}) {
    if (!checked) return std::unexpected(checked.error());
  }
  if (auto port = get("control-port"); auto value = whole_number(*port, 65535)) {
    options.control_port = *value;
  } else {
    return usage_error(port->source + " '" + port->value + "' must be a port number 1..65535, or 0 to turn the control channel off");
  }
  if (auto port = get("relay-port"); auto value = whole_number(*port, 65535)) {
    options.relay_port = *value;
  } else {
    return usage_error(port->source + " '" + port->value + "' must be a port number 1..65535, or 0 for the control port");
  }
  if (auto restarts = get("max-restarts"); auto value = whole_number(*restarts, max_restarts_allowed)) {
    options.max_restarts = *value;
  } else {
    return usage_error(restarts->source + " '" + restarts->value + "' must be a number of restarts 0.." +
                       std::to_string(max_restarts_allowed));
  }
  if (auto port = get("metrics-port"); auto value = whole_number(*port, 65535)) {
    options.metrics_port = *value;
  } else {
    return usage_error(port->source + " '" + port->value + "' must be a port number 1..65535, or 0 for no metrics server");
  }
  if (options.metrics_port != 0 && options.metrics_port == options.control_port) {
    return usage_error(quoted(*get("metrics-port")) + " is the control channel's port too (" + quoted(*get("control-port")) +
                       "); choose another");
  }
  if (auto port = get("preflight-port"); auto number = whole_number(*port, 65535)) {
    if (*number == 0) return usage_error(port->source + " '0' must be a port number 1..65535");
    options.preflight_port = *number;
  } else {
    return usage_error(port->source + " '" + port->value + "' must be a port number 1..65535");
  }
  if (auto ratio = get("preflight-refuse-below"); auto share = ratio_number(ratio->value)) {
    options.preflight_refuse_below = *share;
  } else {
    return usage_error(ratio->source + " '" + ratio->value + "' must be a ratio from 0 to 1 (0.1: a tenth of the job's median)");
  }
  for (auto checked : {choose("env-check", env_check_choices, options.env_check),
                       choose("preflight", preflight_choices, options.preflight),
                       choose("control-source-check", on_off_choices, options.control_source_check),
                       choose("stop-together", on_off_choices, options.stop_together),
                       choose("log-level", log_level_choices, options.log_level),
                       choose("log-format", log_format_choices, options.log_format),
                       choose("framework", framework_choices, options.framework),
                       choose("unknown-variables", unknown_variables_choices, options.warn_unknown_variables)}) {
    if (!checked) return std::unexpected(checked.error());
  }
  // The network level's port beside the ports that stay open with the command (a task's own port
  // may be the same: the probe closes before the command starts).
  struct Taken {
    const char* option;
    const char* what;
    int port;
  };
  for (const Taken& taken : {Taken{"control-port", "the control channel", options.control_port},
                             Taken{"metrics-port", "the metrics server", options.metrics_port}}) {
    if (options.preflight != PreflightLevel::network || taken.port != options.preflight_port) continue;
    return usage_error(quoted(*get("preflight-port")) + " is " + taken.what + "'s port too (" + quoted(*get(taken.option)) +
                       "); choose another");
  }
  options.framework_given = raw.contains("framework");
  options.nproc_per_node = *get("nproc-per-node");
  options.nproc_per_node_given = raw.contains("nproc-per-node");
  options.control_secret_file = get("control-secret-file");
  options.termination_log = get("termination-log");
  return options;
}

}  // namespace

namespace {

struct DurationUnit {
  std::string_view suffix;
  std::uint64_t milliseconds;
};
// "ms" before "m", which it starts with.
constexpr DurationUnit duration_units[] = {{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}};

}  // namespace

Result<std::chrono::milliseconds> parse_duration(std::string_view text, std::string_view source) {
  auto fail = [&] {
    return usage_error(std::string(source) + " '" + std::string(text) +
                       "' is not a duration (use e.g. 500ms, 30s, 15m, 1h, 1m30s or plain seconds)");
  };
  // A week is far beyond any sensible start-up deadline; larger values are typos.
  constexpr std::uint64_t max_ms = 7ull * 24 * 3'600'000;
  if (text.empty()) return fail();
  std::uint64_t total_ms = 0;
  bool first_part = true;
  // Parts of a number and a unit ("1h30m", as Go writes durations), or one plain number of seconds.
  for (std::string_view rest = text; !rest.empty();) {
    std::uint64_t number = 0;
    auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), number);
    if (error != std::errc{} || end == rest.data()) return fail();
    rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
    const bool whole_text_is_a_number = rest.empty() && first_part;
    first_part = false;
    std::uint64_t per_unit_ms = 1000;  // a plain number is seconds
    if (auto unit = std::ranges::find_if(duration_units, [&](const DurationUnit& u) { return rest.starts_with(u.suffix); });
        unit != std::end(duration_units)) {
      per_unit_ms = unit->milliseconds;
      rest.remove_prefix(unit->suffix.size());
    } else if (!whole_text_is_a_number) {
      return fail();
    }
    if (number > (max_ms - total_ms) / per_unit_ms) {
      return usage_error(std::string(source) + " '" + std::string(text) + "' is longer than the maximum of 168h");
    }
    total_ms += number * per_unit_ms;
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(total_ms));
}

Result<Options> parse_options(std::span<const std::string> args, const Environment& env) {
  std::size_t position = 0;
  Mode mode = Mode::entrypoint;
  if (!args.empty() && args[0] == "local") {
    mode = Mode::local;
    position = 1;
  }

  RawSettings raw;
  // Environment twins first; flags parsed below overwrite them.
  for (const auto& spec : option_table) {
    auto twin = env_twin(spec.name);
    auto it = env.find(twin);
    if (it != env.end() && !it->second.empty()) raw[std::string(spec.name)] = Setting{it->second, twin};
  }

  std::vector<std::string> command;
  while (position < args.size()) {
    const std::string& arg = args[position];
    if (arg == "--") {
      ++position;
      break;
    }
    if (arg == "--help" || arg == "-h") return build_options(Mode::help, {}, {});
    if (arg == "--version") return build_options(Mode::version, {}, {});
    if (!arg.starts_with("-") || arg == "-") break;
    if (!arg.starts_with("--")) return usage_error(unknown_option(arg));

    std::string_view body = std::string_view(arg).substr(2);
    std::optional<std::string> inline_value;
    if (auto equals = body.find('='); equals != std::string_view::npos) {
      inline_value = std::string(body.substr(equals + 1));
      body = body.substr(0, equals);
    }
    bool negated = false;
    const OptionSpec* spec = find_option(body);
    if (!spec && body.starts_with("no-")) {
      spec = find_option(body.substr(3));
      negated = spec && spec->kind == Kind::negatable;
      if (!negated) spec = nullptr;
    }
    if (!spec) return usage_error(unknown_option("--" + std::string(body)));
    std::string flag = "--" + std::string(body);
    ++position;

    if (spec->kind != Kind::value) {
      if (inline_value) return usage_error("option " + flag + " takes no value");
      raw[std::string(spec->name)] = Setting{negated ? "0" : "1", flag};
      continue;
    }
    std::string value;
    if (inline_value) {
      value = *inline_value;
    } else {
      if (position >= args.size()) return usage_error("option " + flag + " needs a value");
      value = args[position++];
    }
    if (value.empty()) return usage_error("option " + flag + " needs a non-empty value");
    raw[std::string(spec->name)] = Setting{value, flag};
  }
  command.assign(args.begin() + static_cast<std::ptrdiff_t>(position), args.end());
  // Before any other check: a mistyped twin is often why another option is missing.
  const auto unknown = unknown_twins(env);
  if (!unknown.empty()) {
    auto setting = raw.contains("unknown-variables") ? raw.at("unknown-variables") : Setting{"error", "default"};
    auto warn = parse_choice(setting, unknown_variables_choices);
    if (!warn) return std::unexpected(warn.error());
    if (!*warn) return usage_error(unknown_twins_error(unknown));
  }
  auto options = build_options(mode, raw, std::move(command));
  if (options) {
    options->warnings = unknown_twin_warnings(unknown);
    if (mode == Mode::local) std::ranges::move(ignored_by_local(raw), std::back_inserter(options->warnings));
  }
  return options;
}

LogFormat requested_log_format(std::span<const std::string> args, const Environment& env) {
  std::string_view format;
  if (auto twin = env.find("TFBOOT_LOG_FORMAT"); twin != env.end()) format = twin->second;
  for (std::size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "--log-format" && i + 1 < args.size()) format = args[i + 1];
    else if (args[i].starts_with("--log-format=")) format = std::string_view(args[i]).substr(13);
  }
  return format == "json" ? LogFormat::json : LogFormat::text;
}

std::string help_text() {
  std::string text =
      "usage: tfboot [OPTIONS] [--] [COMMAND [ARG...]]        run as a task (default COMMAND: python train.py)\n"
      "       tfboot local [OPTIONS] [--] [COMMAND [ARG...]]  run every task of --cluster on this machine\n"
      "       tfboot --version | --help\n\n"
      "Every option has an environment twin TFBOOT_<NAME>; a flag beats its twin.\n\n";
  for (const auto& spec : option_table) {
    std::string left = "  --" + std::string(spec.name);
    if (spec.kind == Kind::value) left += " " + std::string(spec.placeholder);
    if (spec.kind == Kind::negatable) left += ", --no-" + std::string(spec.name);
    if (left.size() < 32) left.resize(32, ' ');
    else left += "  ";
    text += left + std::string(spec.help) + "\n";
    std::string twin = env_twin(spec.name) + (spec.kind == Kind::value ? "" : "=1");
    text += std::string(32, ' ') + "env " + twin + "; default: " + std::string(spec.default_text) + "\n";
  }
  text +=
      "\nExit codes: 0 ok, 2 usage/configuration error, 3 peers did not resolve before the deadline,\n"
      "4 log dir or file not writable, 5 start barrier incomplete, 6 environment check failed\n"
      "(or the tasks run tfboot versions of different control protocols),\n"
      "7 a system resource refused, 8 preflight refused the start (a node cannot run the job),\n"
      "126 not executable, 127 not found, 128+N killed by signal N,\n"
      "200 stopped because another task failed or the coordinator was lost, else the command's own status.\n";
  return text;
}

}  // namespace tfboot
