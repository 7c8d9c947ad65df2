// Command line and TFBOOT_* twins -> Options (docs/command-line.md): every flag, every twin, every usage error.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "cli/options.h"
#include "test_support.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

Result<Options> parse(std::vector<std::string> args, const Environment& env = {}) { return parse_options(args, env); }

std::string shown(const std::optional<Setting>& setting) {
  return setting ? setting->value + " from " + setting->source : std::string("<unset>");
}

using Command = std::vector<std::string>;

// Options that keep their value as a string, with where it came from.
struct StringOption {
  std::string flag;
  std::string twin;
  std::string value;
  std::function<std::optional<Setting>(const Options&)> get;
};

const std::vector<StringOption> string_options{
    {"task-type", "TFBOOT_TASK_TYPE", "ps", [](const Options& o) { return o.task_type; }},
    {"task-index", "TFBOOT_TASK_INDEX", "3", [](const Options& o) { return o.task_index; }},
    {"hostname", "TFBOOT_HOSTNAME", "mnist-worker-3", [](const Options& o) { return o.hostname; }},
    {"cluster", "TFBOOT_CLUSTER", "chief=1,ps=2,worker=4,evaluator=1", [](const Options& o) { return o.cluster; }},
    {"peer-template", "TFBOOT_PEER_TEMPLATE", "{prefix}-{type}-{index}", [](const Options& o) { return o.peer_template; }},
    {"service", "TFBOOT_SERVICE", "mnist", [](const Options& o) { return o.service; }},
    {"namespace", "TFBOOT_NAMESPACE", "team-a", [](const Options& o) { return o.kube_namespace; }},
    {"cluster-domain", "TFBOOT_CLUSTER_DOMAIN", "corp.example", [](const Options& o) { return o.cluster_domain; }},
    {"port", "TFBOOT_PORT", "2222,ps=2223", [](const Options& o) { return std::optional<Setting>(o.port); }},
    {"dns-server", "TFBOOT_DNS_SERVER", "10.96.0.10:53,10.96.0.11", [](const Options& o) { return o.dns_server; }},
    {"log-root", "TFBOOT_LOG_ROOT", "/data/logs", [](const Options& o) { return o.log_root; }},
    {"pod-info-dir", "TFBOOT_POD_INFO_DIR", "/var/run/podinfo", [](const Options& o) { return std::optional<Setting>(o.pod_info_dir); }},
    {"termination-log", "TFBOOT_TERMINATION_LOG", "/tmp/reason", [](const Options& o) { return o.termination_log; }},
};

// Boolean switches: the flag and the twin set to 1 turn them on.
struct SwitchOption {
  std::string flag;
  std::string twin;
  std::function<bool(const Options&)> get;
};

const std::vector<SwitchOption> switch_options{
    {"chief-at-ordinal-0", "TFBOOT_CHIEF_AT_ORDINAL_0", [](const Options& o) { return o.chief_at_ordinal_0; }},
    {"evaluator-in-cluster", "TFBOOT_EVALUATOR_IN_CLUSTER", [](const Options& o) { return o.evaluator_in_cluster; }},
    {"print", "TFBOOT_PRINT", [](const Options& o) { return o.print; }},
    {"init", "TFBOOT_INIT", [](const Options& o) { return o.init.value_or(false); }},
};

}  // namespace

TEST_CASE("options::parse_options defaults") {
  auto options = parse({});
  REQUIRE(options);
  CHECK(options->mode == Mode::entrypoint);
  CHECK_FALSE(options->task_type);
  CHECK_FALSE(options->task_index);
  CHECK_FALSE(options->hostname);
  CHECK_FALSE(options->chief_at_ordinal_0);
  CHECK(options->identity_from == IdentityFrom::automatic);
  CHECK_FALSE(options->cluster);
  CHECK_FALSE(options->peer_template);
  CHECK_FALSE(options->service);
  CHECK_FALSE(options->kube_namespace);
  CHECK_FALSE(options->cluster_domain);
  CHECK(options->port.value == "2222");
  CHECK(options->port.source == "default");
  CHECK(options->pod_info_dir.value == "/etc/podinfo");
  CHECK(options->pod_info_dir.source == "default");
  CHECK(options->address == AddressMode::name);
  CHECK_FALSE(options->evaluator_in_cluster);
  CHECK(options->wait == 15min);
  CHECK_FALSE(options->dns_server);
  CHECK_FALSE(options->log_root);
  CHECK_FALSE(options->print);
  CHECK_FALSE(options->init.has_value());  // decided later: on exactly when PID 1
  CHECK(options->log_level == "info");
  CHECK(options->log_format == LogFormat::text);
  CHECK(options->command.empty());
  CHECK(default_command == Command{"python", "train.py"});
}

TEST_CASE("options::parse_options string options and their twins") {
  SUBCASE("--opt value") {
    for (const auto& option : string_options) {
      const std::string flag = std::string("--") + option.flag;
      CAPTURE(flag);
      auto options = parse({flag, option.value});
      REQUIRE(options);
      CHECK(shown(option.get(*options)) == std::string(option.value) + " from " + flag);
      CHECK(options->command.empty());
    }
  }
  SUBCASE("--opt=value") {
    for (const auto& option : string_options) {
      const std::string flag = std::string("--") + option.flag;
      CAPTURE(flag);
      auto options = parse({flag + "=" + option.value});
      REQUIRE(options);
      CHECK(shown(option.get(*options)) == std::string(option.value) + " from " + flag);
    }
  }
  SUBCASE("env twin") {
    for (const auto& option : string_options) {
      CAPTURE(option.twin);
      auto options = parse({}, {{option.twin, option.value}});
      REQUIRE(options);
      CHECK(shown(option.get(*options)) == std::string(option.value) + " from " + option.twin);
    }
  }
  SUBCASE("the flag beats its twin, whichever comes first") {
    for (const auto& option : string_options) {
      const std::string flag = std::string("--") + option.flag;
      CAPTURE(flag);
      auto options = parse({flag, "from-flag"}, {{option.twin, "from-env"}});
      REQUIRE(options);
      CHECK(shown(option.get(*options)) == "from-flag from " + flag);
    }
  }
  SUBCASE("an empty twin counts as unset") {
    for (const auto& option : string_options) {
      CAPTURE(option.twin);
      auto options = parse({}, {{option.twin, ""}});
      REQUIRE(options);
      const std::string expected = option.flag == "port" ? "2222 from default"
                                   : option.flag == "pod-info-dir" ? "/etc/podinfo from default"
                                                                   : "<unset>";
      CHECK(shown(option.get(*options)) == expected);
    }
  }
  SUBCASE("a missing value is a usage error naming the flag") {
    for (const auto& option : string_options) {
      const std::string flag = std::string("--") + option.flag;
      CAPTURE(flag);
      auto options = parse({flag});
      CHECK(code_of(options) == 2);
      CHECK(error_of(options) == "option " + flag + " needs a value");
    }
  }
  SUBCASE("an empty value is a usage error naming the flag") {
    for (const auto& option : string_options) {
      const std::string flag = std::string("--") + option.flag;
      CAPTURE(flag);
      auto inline_empty = parse({flag + "="});
      CHECK(code_of(inline_empty) == 2);
      CHECK(error_of(inline_empty) == "option " + flag + " needs a non-empty value");
      auto separate_empty = parse({flag, ""});
      CHECK(code_of(separate_empty) == 2);
      CHECK(error_of(separate_empty) == "option " + flag + " needs a non-empty value");
    }
  }
  SUBCASE("the valued options without a string Setting also need a value") {
    for (const std::string flag : {"--identity-from", "--address", "--wait", "--log-level", "--log-format"}) {
      CAPTURE(flag);
      auto missing = parse({flag});
      CHECK(code_of(missing) == 2);
      CHECK(error_of(missing) == "option " + std::string(flag) + " needs a value");
      auto empty = parse({std::string(flag) + "="});
      CHECK(code_of(empty) == 2);
      CHECK(error_of(empty) == "option " + std::string(flag) + " needs a non-empty value");
    }
  }
}

TEST_CASE("options::parse_options switches and their twins") {
  SUBCASE("off by default, on with the flag") {
    auto defaults = parse({});
    REQUIRE(defaults);
    for (const auto& option : switch_options) {
      const std::string flag = std::string("--") + option.flag;
      CAPTURE(flag);
      CHECK_FALSE(option.get(*defaults));
      auto options = parse({flag});
      REQUIRE(options);
      CHECK(option.get(*options));
    }
  }
  SUBCASE("the twin accepts 1/true/yes/on and 0/false/no/off, any case") {
    for (const auto& option : switch_options) {
      CAPTURE(option.twin);
      for (const std::string yes : {"1", "true", "TRUE", "yes", "On"}) {
        CAPTURE(yes);
        auto options = parse({}, {{option.twin, yes}});
        REQUIRE(options);
        CHECK(option.get(*options));
      }
      for (const std::string no : {"0", "false", "False", "no", "OFF"}) {
        CAPTURE(no);
        auto options = parse({}, {{option.twin, no}});
        REQUIRE(options);
        CHECK_FALSE(option.get(*options));
      }
    }
  }
  SUBCASE("a twin that is not a boolean is a usage error naming it") {
    for (const auto& option : switch_options) {
      for (const std::string bad : {"maybe", "2", "-1", "y", "enabled"}) {
        CAPTURE(option.twin);
        CAPTURE(bad);
        auto options = parse({}, {{option.twin, bad}});
        CHECK(code_of(options) == 2);
        CHECK(error_of(options) == std::string(option.twin) + "='" + bad + "' is not a boolean (use 1/0, true/false, yes/no or on/off)");
      }
    }
  }
  SUBCASE("the flag beats a twin set to 0, and a malformed twin") {
    for (const auto& option : switch_options) {
      const std::string flag = std::string("--") + option.flag;
      CAPTURE(flag);
      auto over_zero = parse({flag}, {{option.twin, "0"}});
      REQUIRE(over_zero);
      CHECK(option.get(*over_zero));
      auto over_malformed = parse({flag}, {{option.twin, "maybe"}});
      REQUIRE(over_malformed);
      CHECK(option.get(*over_malformed));
    }
  }
  SUBCASE("a switch takes no value") {
    for (const auto& option : switch_options) {
      const std::string flag = std::string("--") + option.flag;
      CAPTURE(flag);
      auto options = parse({flag + "=1"});
      CHECK(code_of(options) == 2);
      CHECK(error_of(options) == "option " + flag + " takes no value");
    }
  }
  SUBCASE("a switch does not swallow the next argument") {
    auto options = parse({"--print", "python"});
    REQUIRE(options);
    CHECK(options->print);
    CHECK(options->command == Command{"python"});
  }
}

TEST_CASE("options::parse_options --init and --no-init") {
  SUBCASE("unset unless asked for") {
    auto options = parse({});
    REQUIRE(options);
    CHECK_FALSE(options->init.has_value());
  }
  SUBCASE("--init turns it on, --no-init off") {
    auto on = parse({"--init"});
    REQUIRE(on);
    CHECK(on->init == std::optional<bool>(true));
    auto off = parse({"--no-init"});
    REQUIRE(off);
    CHECK(off->init == std::optional<bool>(false));
  }
  SUBCASE("TFBOOT_INIT=1 and TFBOOT_INIT=0") {
    auto on = parse({}, {{"TFBOOT_INIT", "1"}});
    REQUIRE(on);
    CHECK(on->init == std::optional<bool>(true));
    auto off = parse({}, {{"TFBOOT_INIT", "0"}});
    REQUIRE(off);
    CHECK(off->init == std::optional<bool>(false));
  }
  SUBCASE("flags beat the twin both ways") {
    auto off = parse({"--no-init"}, {{"TFBOOT_INIT", "1"}});
    REQUIRE(off);
    CHECK(off->init == std::optional<bool>(false));
    auto on = parse({"--init"}, {{"TFBOOT_INIT", "0"}});
    REQUIRE(on);
    CHECK(on->init == std::optional<bool>(true));
  }
  SUBCASE("the last of --init and --no-init wins") {
    auto options = parse({"--init", "--no-init"});
    REQUIRE(options);
    CHECK(options->init == std::optional<bool>(false));
  }
  SUBCASE("--no-init takes no value") {
    auto options = parse({"--no-init=1"});
    CHECK(code_of(options) == 2);
    CHECK(error_of(options) == "option --no-init takes no value");
  }
  SUBCASE("TFBOOT_INIT=maybe names the twin") {
    auto options = parse({}, {{"TFBOOT_INIT", "maybe"}});
    CHECK(code_of(options) == 2);
    CHECK(error_of(options) == "TFBOOT_INIT='maybe' is not a boolean (use 1/0, true/false, yes/no or on/off)");
  }
  SUBCASE("only --init is negatable") {
    for (const std::string negated : {"--no-print", "--no-chief-at-ordinal-0", "--no-cluster", "--no-evaluator-in-cluster"}) {
      CAPTURE(negated);
      auto options = parse({negated});
      CHECK(code_of(options) == 2);
      CHECK(error_of(options) == "unknown option '" + std::string(negated) + "' (see --help)");
    }
  }
}

TEST_CASE("options::parse_options enumerated values") {
  struct Row {
    std::vector<std::string> args;
    Environment env;
    std::function<bool(const Options&)> expected;
  };
  const std::vector<Row> accepted{
      {{"--identity-from", "auto"}, {}, [](const Options& o) { return o.identity_from == IdentityFrom::automatic; }},
      {{"--identity-from=hostname"}, {}, [](const Options& o) { return o.identity_from == IdentityFrom::hostname; }},
      {{}, {{"TFBOOT_IDENTITY_FROM", "ptr"}}, [](const Options& o) { return o.identity_from == IdentityFrom::ptr; }},
      {{"--identity-from=hostname"}, {{"TFBOOT_IDENTITY_FROM", "ptr"}},
       [](const Options& o) { return o.identity_from == IdentityFrom::hostname; }},
      {{"--address", "ip"}, {}, [](const Options& o) { return o.address == AddressMode::ip; }},
      {{}, {{"TFBOOT_ADDRESS", "ip"}}, [](const Options& o) { return o.address == AddressMode::ip; }},
      {{"--address=name"}, {{"TFBOOT_ADDRESS", "ip"}}, [](const Options& o) { return o.address == AddressMode::name; }},
      {{"--log-level", "trace"}, {}, [](const Options& o) { return o.log_level == "trace"; }},
      {{"--log-level=debug"}, {}, [](const Options& o) { return o.log_level == "debug"; }},
      {{"--log-level=warn"}, {}, [](const Options& o) { return o.log_level == "warn"; }},
      {{}, {{"TFBOOT_LOG_LEVEL", "error"}}, [](const Options& o) { return o.log_level == "error"; }},
      {{"--log-level=info"}, {{"TFBOOT_LOG_LEVEL", "error"}}, [](const Options& o) { return o.log_level == "info"; }},
      {{"--log-format", "json"}, {}, [](const Options& o) { return o.log_format == LogFormat::json; }},
      {{}, {{"TFBOOT_LOG_FORMAT", "json"}}, [](const Options& o) { return o.log_format == LogFormat::json; }},
      {{"--log-format=text"}, {{"TFBOOT_LOG_FORMAT", "json"}}, [](const Options& o) { return o.log_format == LogFormat::text; }},
      {{"--wait", "30s"}, {}, [](const Options& o) { return o.wait == 30s; }},
      {{"--wait=500ms"}, {}, [](const Options& o) { return o.wait == 500ms; }},
      {{}, {{"TFBOOT_WAIT", "1h"}}, [](const Options& o) { return o.wait == 1h; }},
      {{"--wait=0"}, {{"TFBOOT_WAIT", "1h"}}, [](const Options& o) { return o.wait == 0ms; }},
      {{}, {}, [](const Options& o) { return o.control_source_check; }},
      {{"--control-source-check", "off"}, {}, [](const Options& o) { return !o.control_source_check; }},
      {{}, {{"TFBOOT_CONTROL_SOURCE_CHECK", "off"}}, [](const Options& o) { return !o.control_source_check; }},
      {{"--control-source-check=on"}, {{"TFBOOT_CONTROL_SOURCE_CHECK", "off"}}, [](const Options& o) { return o.control_source_check; }},
      {{}, {}, [](const Options& o) { return o.max_restarts == 0 && o.stop_together; }},
      {{"--max-restarts", "3"}, {}, [](const Options& o) { return o.max_restarts == 3; }},
      {{}, {{"TFBOOT_MAX_RESTARTS", "10000"}}, [](const Options& o) { return o.max_restarts == 10000; }},
      {{"--max-restarts=0"}, {{"TFBOOT_MAX_RESTARTS", "5"}}, [](const Options& o) { return o.max_restarts == 0; }},
      {{"--stop-together", "off"}, {}, [](const Options& o) { return !o.stop_together; }},
      {{}, {{"TFBOOT_STOP_TOGETHER", "off"}}, [](const Options& o) { return !o.stop_together; }},
  };
  for (std::size_t i = 0; i < accepted.size(); ++i) {
    CAPTURE(i);
    auto options = parse_options(accepted[i].args, accepted[i].env);
    REQUIRE(options);
    CHECK(accepted[i].expected(*options));
  }

  struct Rejected {
    std::vector<std::string> args;
    Environment env;
    std::string message;
  };
  const std::vector<Rejected> rejected{
      {{"--identity-from", "dns"}, {}, "--identity-from 'dns' must be auto, hostname or ptr"},
      {{}, {{"TFBOOT_IDENTITY_FROM", "Auto"}}, "TFBOOT_IDENTITY_FROM 'Auto' must be auto, hostname or ptr"},
      {{"--address=host"}, {}, "--address 'host' must be name or ip"},
      {{}, {{"TFBOOT_ADDRESS", "ipv6"}}, "TFBOOT_ADDRESS 'ipv6' must be name or ip"},
      {{"--log-level=verbose"}, {}, "--log-level 'verbose' must be trace, debug, info, warn or error"},
      {{}, {{"TFBOOT_LOG_LEVEL", "warning"}}, "TFBOOT_LOG_LEVEL 'warning' must be trace, debug, info, warn or error"},
      {{"--log-format", "xml"}, {}, "--log-format 'xml' must be text or json"},
      {{}, {{"TFBOOT_LOG_FORMAT", "JSON"}}, "TFBOOT_LOG_FORMAT 'JSON' must be text or json"},
      {{"--wait=1x"}, {}, "--wait '1x' is not a duration (use e.g. 500ms, 30s, 15m, 1h, 1m30s or plain seconds)"},
      {{}, {{"TFBOOT_WAIT", "-1"}}, "TFBOOT_WAIT '-1' is not a duration (use e.g. 500ms, 30s, 15m, 1h, 1m30s or plain seconds)"},
      {{"--wait", "200h"}, {}, "--wait '200h' is longer than the maximum of 168h"},
      {{"--control-source-check", "no"}, {}, "--control-source-check 'no' must be on or off"},
      {{"--max-restarts", "-1"}, {}, "--max-restarts '-1' must be a number of restarts 0..10000"},
      {{}, {{"TFBOOT_MAX_RESTARTS", "10001"}}, "TFBOOT_MAX_RESTARTS '10001' must be a number of restarts 0..10000"},
      {{"--max-restarts=2x"}, {}, "--max-restarts '2x' must be a number of restarts 0..10000"},
      {{"--stop-together", "yes"}, {}, "--stop-together 'yes' must be on or off"},
  };
  for (const auto& row : rejected) {
    CAPTURE(row.message);
    auto options = parse_options(row.args, row.env);
    CHECK(code_of(options) == 2);
    CHECK(error_of(options) == row.message);
  }
}

TEST_CASE("options::parse_options where options stop") {
  SUBCASE("no command: the default is chosen later") {
    auto options = parse({"--cluster", "worker=2"});
    REQUIRE(options);
    CHECK(options->command.empty());
  }
  SUBCASE("the first non-option starts the command; its flags are passed untouched") {
    auto options = parse({"--cluster=worker=2", "python", "train.py", "--port", "9", "--cluster=x", "--", "--help"});
    REQUIRE(options);
    CHECK(options->command == Command{"python", "train.py", "--port", "9", "--cluster=x", "--", "--help"});
    CHECK(shown(options->cluster) == "worker=2 from --cluster");
    CHECK(options->port.value == "2222");
    CHECK(options->mode == Mode::entrypoint);
  }
  SUBCASE("-- ends the options and is dropped; what follows is the command even if it looks like a flag") {
    auto options = parse({"--print", "--", "--cluster=x", "-v", "--version"});
    REQUIRE(options);
    CHECK(options->command == Command{"--cluster=x", "-v", "--version"});
    CHECK_FALSE(options->cluster);
    CHECK(options->print);
    CHECK(options->mode == Mode::entrypoint);
  }
  SUBCASE("a second -- belongs to the command") {
    auto options = parse({"--", "--", "x"});
    REQUIRE(options);
    CHECK(options->command == Command{"--", "x"});
  }
  SUBCASE("-- with nothing after it gives the default command") {
    auto options = parse({"--"});
    REQUIRE(options);
    CHECK(options->command.empty());
  }
  SUBCASE("a lone '-' is a command, not an option") {
    auto options = parse({"-", "x"});
    REQUIRE(options);
    CHECK(options->command == Command{"-", "x"});
  }
  SUBCASE("arguments with spaces and shell characters are passed as they are") {
    auto options = parse({"sh", "-c", "echo $TF_CONFIG; exit 3", "", "a b"});
    REQUIRE(options);
    CHECK(options->command == Command{"sh", "-c", "echo $TF_CONFIG; exit 3", "", "a b"});
  }
  SUBCASE("the value of an option is taken even if it starts with a dash") {
    auto options = parse({"--task-index", "-1", "python"});
    REQUIRE(options);
    CHECK(shown(options->task_index) == "-1 from --task-index");
    CHECK(options->command == Command{"python"});
  }
  SUBCASE("--opt=value splits at the first '='") {
    auto options = parse({"--cluster=chief=1,worker=2", "--peer-template={prefix}-{type}-{index}"});
    REQUIRE(options);
    CHECK(shown(options->cluster) == "chief=1,worker=2 from --cluster");
    CHECK(shown(options->peer_template) == "{prefix}-{type}-{index} from --peer-template");
  }
  SUBCASE("a flag given twice: the last one wins") {
    auto options = parse({"--port", "1111", "--port=3333"});
    REQUIRE(options);
    CHECK(options->port.value == "3333");
    CHECK(options->port.source == "--port");
  }
}

TEST_CASE("options::parse_options local subcommand") {
  SUBCASE("local with options and a command") {
    auto options = parse({"local", "--cluster", "worker=3", "--", "python", "train.py", "--epochs=2"});
    REQUIRE(options);
    CHECK(options->mode == Mode::local);
    CHECK(shown(options->cluster) == "worker=3 from --cluster");
    CHECK(options->command == Command{"python", "train.py", "--epochs=2"});
  }
  SUBCASE("local alone") {
    auto options = parse({"local"});
    REQUIRE(options);
    CHECK(options->mode == Mode::local);
    CHECK(options->command.empty());
  }
  SUBCASE("local reads the same twins") {
    auto options = parse({"local", "python", "x.py"}, {{"TFBOOT_CLUSTER", "worker=4"}});
    REQUIRE(options);
    CHECK(options->mode == Mode::local);
    CHECK(shown(options->cluster) == "worker=4 from TFBOOT_CLUSTER");
    CHECK(options->command == Command{"python", "x.py"});
  }
  SUBCASE("'local' is a subcommand only in first place; later it is the command") {
    auto options = parse({"--cluster=worker=2", "local"});
    REQUIRE(options);
    CHECK(options->mode == Mode::entrypoint);
    CHECK(options->command == Command{"local"});
  }
  SUBCASE("'local' after -- is the command") {
    auto options = parse({"--", "local"});
    REQUIRE(options);
    CHECK(options->mode == Mode::entrypoint);
    CHECK(options->command == Command{"local"});
  }
}

TEST_CASE("options::parse_options --help and --version") {
  SUBCASE("--help, -h and --version select their mode") {
    auto help = parse({"--help"});
    REQUIRE(help);
    CHECK(help->mode == Mode::help);
    auto short_help = parse({"-h"});
    REQUIRE(short_help);
    CHECK(short_help->mode == Mode::help);
    auto version = parse({"--version"});
    REQUIRE(version);
    CHECK(version->mode == Mode::version);
  }
  SUBCASE("after other options, and after local") {
    auto help = parse({"--cluster", "worker=2", "--help"});
    REQUIRE(help);
    CHECK(help->mode == Mode::help);
    auto version = parse({"local", "--version"});
    REQUIRE(version);
    CHECK(version->mode == Mode::version);
  }
  SUBCASE("a malformed twin does not stop --help") {
    auto help = parse({"--help"}, {{"TFBOOT_PRINT", "maybe"}});
    REQUIRE(help);
    CHECK(help->mode == Mode::help);
  }
  SUBCASE("--help after the command belongs to the command") {
    auto options = parse({"python", "--help"});
    REQUIRE(options);
    CHECK(options->mode == Mode::entrypoint);
    CHECK(options->command == Command{"python", "--help"});
  }
  SUBCASE("the help text lists every option with its twin and the exit codes") {
    const std::string text = help_text();
    CHECK(text.starts_with("usage: tfboot [OPTIONS] [--] [COMMAND [ARG...]]"));
    for (const auto& option : string_options) {
      CAPTURE(option.flag);
      CHECK(text.find(std::string("--") + option.flag + " ") != std::string::npos);
      CHECK(text.find(std::string("env ") + option.twin + ";") != std::string::npos);
    }
    for (const auto& option : switch_options) {
      CAPTURE(option.flag);
      CHECK(text.find(std::string("--") + option.flag) != std::string::npos);
      CHECK(text.find(std::string("env ") + option.twin + "=1;") != std::string::npos);
    }
    for (const std::string other : {"--identity-from SRC", "--address MODE", "--wait DURATION", "--log-level L", "--log-format F",
                              "--init, --no-init", "env TFBOOT_WAIT;", "env TFBOOT_ADDRESS;"}) {
      CAPTURE(other);
      CHECK(text.find(other) != std::string::npos);
    }
    CHECK(text.find("126 not executable, 127 not found") != std::string::npos);
  }
}

TEST_CASE("options::parse_options unknown options") {
  const std::vector<std::pair<std::string, std::string>> rows{
      {"--frobnicate", "unknown option '--frobnicate' (see --help)"},
      {"--frobnicate=1", "unknown option '--frobnicate' (see --help)"},
      {"-v", "unknown option '-v' (see --help)"},
      {"-c", "unknown option '-c' (see --help)"},
      {"--Cluster=worker=1", "unknown option '--Cluster' (did you mean --cluster? see --help)"},
      {"--task_type=ps", "unknown option '--task_type' (did you mean --task-type? see --help)"},
      {"---cluster", "unknown option '---cluster' (did you mean --cluster? see --help)"},
  };
  SUBCASE("an unknown option is a usage error naming it") {
    for (const auto& [arg, message] : rows) {
      CAPTURE(arg);
      auto options = parse({arg, "python"});
      CHECK(code_of(options) == 2);
      CHECK(error_of(options) == message);
    }
  }
  SUBCASE("an unknown TFBOOT_* variable is a usage error naming the nearest twin") {
    auto options = parse({}, {{"TFBOOT_WAITT", "0"}, {"TFBOOT_LOG_DIR", "/logs/worker_0"}, {"TFBOOT_POD_INDEX", "3"},
                              {"TFBOOT_RESTART_COUNT", "1"}});
    CHECK(code_of(options) == 2);
    CHECK(error_of(options) == "TFBOOT_WAITT (did you mean TFBOOT_WAIT?) is not an option's environment twin; "
                               "TFBOOT_UNKNOWN_VARIABLES=warn ignores them with a warning (for an image that sets variables "
                               "for several tfboot versions)");
  }
  SUBCASE("several unknown variables are named on one line, before any other usage error") {
    auto options = parse({"--wait", "forever"}, {{"TFBOOT_FROBNICATE", "1"}, {"TFBOOT_CLUSTR", "worker=3"}});
    CHECK(code_of(options) == 2);
    CHECK(error_of(options) == "TFBOOT_CLUSTR (did you mean TFBOOT_CLUSTER?), TFBOOT_FROBNICATE are not options' environment "
                               "twins; TFBOOT_UNKNOWN_VARIABLES=warn ignores them with a warning (for an image that sets "
                               "variables for several tfboot versions)");
    CHECK(code_of(parse({"local"}, {{"TFBOOT_CLUSTR", "worker=3"}})) == 2);
  }
  SUBCASE("--help and --version do not look at the environment's variables") {
    CHECK(parse({"--help"}, {{"TFBOOT_CLUSTR", "worker=3"}}));
    CHECK(parse({"--version"}, {{"TFBOOT_CLUSTR", "worker=3"}}));
  }
  SUBCASE("TFBOOT_UNKNOWN_VARIABLES or --unknown-variables takes error or warn, nothing else") {
    auto options = parse({}, {{"TFBOOT_CLUSTR", "worker=3"}, {"TFBOOT_UNKNOWN_VARIABLES", "ignore"}});
    CHECK(code_of(options) == 2);
    CHECK(error_of(options) == "TFBOOT_UNKNOWN_VARIABLES 'ignore' must be error or warn");
    CHECK(error_of(parse({}, {{"TFBOOT_UNKNOWN_VARIABLES", "ignore"}})) == "TFBOOT_UNKNOWN_VARIABLES 'ignore' must be error or warn");
    CHECK(parse({"--unknown-variables", "warn"}, {{"TFBOOT_CLUSTR", "worker=3"}}));
    CHECK(code_of(parse({"--unknown-variables=error"}, {{"TFBOOT_CLUSTR", "worker=3"}, {"TFBOOT_UNKNOWN_VARIABLES", "warn"}})) == 2);
  }
  SUBCASE("with TFBOOT_UNKNOWN_VARIABLES=warn unknown TFBOOT_* variables are ignored, each with a warning and the nearest twin") {
    auto options = parse({}, {{"TFBOOT_FROBNICATE", "1"}, {"TFBOOT_POD_INDEX", "3"}, {"TFBOOT_CLUSTR", "worker=3"},
                              {"TFBOOT_IDLE_WHEN_DON", "1"}, {"TFBOOT_LOG_DIR", "/logs/worker_0"}, {"TFBOOT_WAIT", "1s"},
                              {"TFBOOT_UNKNOWN_VARIABLES", "warn"}});
    REQUIRE(options);
    CHECK(options->command.empty());
    CHECK_FALSE(options->cluster);
    CHECK(options->warnings == std::vector<std::string>{
                                   "TFBOOT_CLUSTR is not an option's environment twin and is ignored; did you mean TFBOOT_CLUSTER?",
                                   "TFBOOT_FROBNICATE is not an option's environment twin and is ignored",
                                   "TFBOOT_IDLE_WHEN_DON is not an option's environment twin and is ignored; did you mean "
                                   "TFBOOT_IDLE_WHEN_DONE?"});
  }
  SUBCASE("a mistyped flag is named with the nearest option") {
    for (const auto& [flag, near] : {std::pair{"--clustr", "--cluster"}, std::pair{"--task-idx", "--task-index"},
                                     std::pair{"--wiat", "--wait"}}) {
      auto options = parse({flag, "x"});
      CHECK(error_of(options) == "unknown option '" + std::string(flag) + "' (did you mean " + near + "? see --help)");
    }
  }
}

// Several bad values: the first in the order the option table's checks run is the one reported,
// so a user fixes them one at a time in a stable order.
TEST_CASE("options::parse_options reports the first of several bad values") {
  struct Row {
    std::vector<std::string> args;
    std::string error;
  };
  const Row rows[] = {
      {{"--wait", "x", "--env-check", "y"}, "--wait 'x' is not a duration (use e.g. 500ms, 30s, 15m, 1h, 1m30s or plain seconds)"},
      {{"--control-port", "x", "--log-level", "y"},
       "--control-port 'x' must be a port number 1..65535, or 0 to turn the control channel off"},
      {{"--stop-grace", "9x", "--log-format", "xml"},
       "--stop-grace '9x' is not a duration (use e.g. 500ms, 30s, 15m, 1h, 1m30s or plain seconds)"},
      {{"--address", "dns", "--wait", "x"}, "--address 'dns' must be name or ip"},
      {{"--env-check", "y", "--log-format", "xml"}, "--env-check 'y' must be warn, fail or off"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.error);
    auto options = parse(row.args);
    CHECK(code_of(options) == 2);
    CHECK(error_of(options) == row.error);
  }
}

TEST_CASE("options::parse_options --preflight") {
  CHECK(parse({})->preflight == PreflightLevel::off);
  CHECK(parse({"--preflight", "quick"})->preflight == PreflightLevel::quick);
  CHECK(parse({}, {{"TFBOOT_PREFLIGHT", "quick"}})->preflight == PreflightLevel::quick);
  auto bad = parse({}, {{"TFBOOT_PREFLIGHT", "full"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == exit_code::usage);
  CHECK(bad.error().message == "TFBOOT_PREFLIGHT 'full' must be off, quick or network");
  // The test-only clock shift is known, not a typo of an option's twin.
  CHECK(parse({}, {{"TFBOOT_TEST_CLOCK_OFFSET_MS", "5000"}}));
}

TEST_CASE("options::parse_options --preflight network, its port and its bound") {
  auto network = parse({"--preflight", "network"});
  REQUIRE(network);
  CHECK(network->preflight == PreflightLevel::network);
  CHECK(network->preflight_port == 2221);
  CHECK(network->preflight_refuse_below == 0.1);
  auto given = parse({"--preflight", "network", "--preflight-port", "3000"}, {{"TFBOOT_PREFLIGHT_REFUSE_BELOW", "0"}});
  REQUIRE(given);
  CHECK(given->preflight_port == 3000);
  CHECK(given->preflight_refuse_below == 0);
  struct Row {
    std::vector<std::string> args;
    std::string error;
  };
  const std::vector<Row> rows = {
      {{"--preflight", "network", "--preflight-port", "0"}, "--preflight-port '0' must be a port number 1..65535"},
      {{"--preflight-port", "70000"}, "--preflight-port '70000' must be a port number 1..65535"},
      {{"--preflight-refuse-below", "1.5"}, "--preflight-refuse-below '1.5' must be a ratio from 0 to 1 (0.1: a tenth of the job's median)"},
      {{"--preflight-refuse-below", "tenth"}, "--preflight-refuse-below 'tenth' must be a ratio from 0 to 1 (0.1: a tenth of the job's median)"},
      {{"--preflight", "network", "--preflight-port", "2220"},
       "--preflight-port '2220' is the control channel's port too (default '2220'); choose another"},
      {{"--preflight", "network", "--metrics-port", "2221"},
       "default '2221' is the metrics server's port too (--metrics-port '2221'); choose another"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.error);
    auto options = parse(row.args);
    CHECK(code_of(options) == 2);
    CHECK(error_of(options) == row.error);
  }
  // Another level does not use the port: no clash.
  CHECK(parse({"--preflight", "quick", "--metrics-port", "2221"}));
}

TEST_CASE("options::parse_options --metrics-port") {
  SUBCASE("off unless given") {
    auto options = parse({});
    REQUIRE(options);
    CHECK(options->metrics_port == 0);
  }
  SUBCASE("the flag beats its twin") {
    auto options = parse({"--metrics-port", "9090"}, {{"TFBOOT_METRICS_PORT", "9091"}});
    REQUIRE(options);
    CHECK(options->metrics_port == 9090);
    CHECK(parse({}, {{"TFBOOT_METRICS_PORT", "9091"}})->metrics_port == 9091);
  }
  SUBCASE("a bad port is a usage error naming its source") {
    auto flag = parse({"--metrics-port", "70000"});
    REQUIRE_FALSE(flag);
    CHECK(flag.error().code == exit_code::usage);
    CHECK(flag.error().message == "--metrics-port '70000' must be a port number 1..65535, or 0 for no metrics server");
    auto twin = parse({}, {{"TFBOOT_METRICS_PORT", "http"}});
    REQUIRE_FALSE(twin);
    CHECK(twin.error().message == "TFBOOT_METRICS_PORT 'http' must be a port number 1..65535, or 0 for no metrics server");
  }
  SUBCASE("the control channel's port is not the metrics port") {
    auto same = parse({"--metrics-port", "2220"});
    REQUIRE_FALSE(same);
    CHECK(same.error().message == "--metrics-port '2220' is the control channel's port too (default '2220'); choose another");
  }
}

TEST_CASE("options::parse_duration") {
  struct Good {
    std::string text;
    std::chrono::milliseconds expected;
  };
  for (const auto& [text, expected] : std::vector<Good>{{"500ms", 500ms},
                                                        {"30s", 30s},
                                                        {"15m", 15min},
                                                        {"1h", 1h},
                                                        {"45", 45s},
                                                        {"0", 0ms},
                                                        {"0ms", 0ms},
                                                        {"0s", 0ms},
                                                        {"1ms", 1ms},
                                                        {"90m", 90min},
                                                        {"168h", 168h},
                                                        {"10080m", 168h},
                                                        {"604800", 168h},
                                                        {"604800000ms", 168h},
                                                        {"1m30s", 90s},
                                                        {"1h30m", 90min},
                                                        {"5m5s", 305s},
                                                        {"1h0m0s500ms", 1h + 500ms},
                                                        {"167h60m", 168h}}) {
    CAPTURE(text);
    auto duration = parse_duration(text, "--wait");
    REQUIRE(duration);
    CHECK(duration->count() == expected.count());
  }

  const std::string hint = " is not a duration (use e.g. 500ms, 30s, 15m, 1h, 1m30s or plain seconds)";
  for (const std::string text : {"1x", "-1", "", "ms", "s", "1.5s", " 5s", "5s ", "+5", "5 s", "5sec", "1H", "1d", "1m30", "s5",
                           "0x10", "99999999999999999999999"}) {
    CAPTURE(text);
    auto duration = parse_duration(text, "TFBOOT_WAIT");
    CHECK(code_of(duration) == 2);
    CHECK(error_of(duration) == "TFBOOT_WAIT '" + std::string(text) + "'" + hint);
  }

  for (const std::string text : {"169h", "10081m", "604801", "604800001ms", "100000h", "18446744073709551615", "168h1ms"}) {
    CAPTURE(text);
    auto duration = parse_duration(text, "--wait");
    CHECK(code_of(duration) == 2);
    CHECK(error_of(duration) == "--wait '" + std::string(text) + "' is longer than the maximum of 168h");
  }
}

}  // namespace tfboot
