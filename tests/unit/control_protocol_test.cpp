// The control channel's pure side: framing, messages, handshake, start barrier and the watches
// after the start, fed with byte strings and a simulated clock.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "control/auth.h"
#include "control/protocol/protocol.h"
#include "test_support.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

const Instant t0{std::chrono::seconds(1000)};
const std::string job = "0123456789abcdef";

JobMember member(const std::string& text) {
  auto parsed = parse_member(text);
  REQUIRE_MESSAGE(parsed, text);
  return *parsed;
}

// The message as it comes back from the wire, or its error as text.
std::string round_trip(const Message& message, Sender from) {
  auto parsed = parse_message(std::string_view(encode(message)).substr(0, encode(message).size() - 1), from);
  return parsed ? encode(*parsed) : "error: " + parsed.error().message;
}

std::string parse_error(const std::string& line, Sender from) {
  auto parsed = parse_message(line, from);
  return parsed ? "<parsed as " + std::string(message_type(*parsed)) + ">" : parsed.error().message;
}

Hello hello_from(const std::string& task, const std::string& host, const std::string& instance = "aaaaaaaa") {
  Hello hello;
  hello.job = job;
  hello.task = member(task);
  hello.host = host;
  hello.instance = instance;
  hello.supervised = true;
  hello.name = host + ".svc";
  hello.addresses = {"10.0.0.1"};
  hello.fingerprint.tensorflow = "2.16.1";
  return hello;
}

BarrierSettings barrier_settings(EnvCheck check = EnvCheck::warn) {
  return BarrierSettings{job, {member("chief:0"), member("worker:0"), member("worker:1")}, hello_from("chief:0", "job-chief-0"), check, 10s};
}

}  // namespace

TEST_CASE("control_protocol::parse_member") {
  CHECK(parse_member("worker:2") == JobMember{TaskType::worker, 2});
  CHECK(parse_member("evaluator:0") == JobMember{TaskType::evaluator, 0});
  // The wire spells a task as logs and files do: cluster.h's task_name is the one writer.
  CHECK(JobMember{TaskType::ps, 3}.text() == "ps:3");
  CHECK(JobMember{TaskType::chief, 0}.text() == task_name(TaskType::chief, 0));
  for (const std::string text : {"", "worker", "worker:", ":1", "master:0", "worker:02", "worker:-1", "worker:1 ", "gpu:0", "worker:1:2"}) {
    CAPTURE(text);
    CHECK_FALSE(parse_member(text).has_value());
  }
}

TEST_CASE("control_protocol::FrameReader") {
  SUBCASE("lines come out whole however the bytes are split") {
    const std::string stream = "{\"type\":\"ping\"}\n\n{\"a\":1}\nrest";
    for (std::size_t chunk : {1, 2, 7, 100}) {
      CAPTURE(chunk);
      FrameReader reader(64);
      std::vector<std::string> lines;
      for (std::size_t i = 0; i < stream.size(); i += chunk) {
        REQUIRE(reader.append(std::string_view(stream).substr(i, chunk)));
        while (auto line = reader.next()) lines.push_back(*line);
      }
      CHECK(lines == std::vector<std::string>{"{\"type\":\"ping\"}", "", "{\"a\":1}"});
      CHECK_FALSE(reader.empty());  // "rest" waits for its newline
    }
  }
  SUBCASE("a line over the limit is an error, one at the limit is not") {
    FrameReader reader(8);
    CHECK(reader.append("12345678\n"));
    CHECK(reader.next() == "12345678");
    CHECK(reader.empty());
    CHECK(reader.append("1234"));
    CHECK_FALSE(reader.next());
    auto over = reader.append("56789");
    CHECK(error_of(over) == "a message over 8 bytes");
  }
  SUBCASE("an oversized line followed by its newline in the same chunk is never handed out") {
    FrameReader reader(4);
    (void)reader.append("123456\nok\n");
    CHECK(reader.next() == std::nullopt);
    CHECK(reader.next() == "ok");
  }
}

TEST_CASE("control_protocol::fitted_to_the_wire: any abort a coordinator sends is one a task accepts") {
  // An environment check's differences, or the names that did not resolve, can list thousands of tasks.
  const Abort long_one{exit_code::environment_mismatch, "environment check failed (--env-check fail): " + std::string(9000, 'w')};
  auto parsed = parse_message(encode(fitted_to_the_wire(long_one)), Sender::coordinator);
  REQUIRE_MESSAGE(parsed, error_of(parsed));
  const Abort& abort = std::get<Abort>(*parsed);
  CHECK(abort.code == exit_code::environment_mismatch);
  CHECK(abort.message.size() == 4096);
  CHECK(abort.message.starts_with("environment check failed (--env-check fail): www"));
  CHECK(abort.message.ends_with("www ... (the rest in the coordinator's log)"));
  CHECK_FALSE(parse_message(encode(long_one), Sender::coordinator));  // what it prevents
  const Abort short_one{exit_code::start_barrier_incomplete, "missing worker:2"};
  CHECK(fitted_to_the_wire(short_one).message == "missing worker:2");
}

TEST_CASE("control_protocol::encode and parse_message") {
  SUBCASE("every message survives the wire unchanged") {
    Start start{true, {"tensorflow: 2.16.1 on worker:0; 2.17.0 on worker:1"}, 1, true, std::vector<std::string>{"10.0.0.1,fd00::1"}};
    Hello asking = hello_from("worker:2", "job-worker-2");
    asking.table = true;
    asking.started_ms_ago = 1500;
    const std::vector<std::pair<Message, Sender>> messages{
        {Challenge{job, std::string(32, 'a'), true}, Sender::coordinator},
        {hello_from("worker:1", "job-worker-1"), Sender::task},
        {asking, Sender::task},
        {Start{false, {}, 3, false, std::nullopt}, Sender::coordinator},
        {Accepted{std::string(64, 'f'), {2, 3, {"worker:1"}}}, Sender::coordinator},
        {Refused{"worker:1 is already present"}, Sender::coordinator},
        {Waiting{{1, 3, {"worker:0", "worker:1"}}}, Sender::coordinator},
        {start, Sender::coordinator},
        {Abort{exit_code::environment_mismatch, "environment check failed"}, Sender::coordinator},
        {Abort{exit_code::peers_unresolved, "worker:1: worker-1.train does not resolve"}, Sender::coordinator},
        {Ping{}, Sender::coordinator},
        {Ping{}, Sender::task},
        {Exit{137}, Sender::task},
        {Done{}, Sender::coordinator},
        {Stop{member("worker:1"), -1, "worker:1 was lost"}, Sender::coordinator},
        {Restart{member("worker:1"), 3, "worker:1 failed with status 3", 2}, Sender::coordinator},
        {Preempt{member("worker:1"), 15}, Sender::task},
        {Preempt{member("worker:1"), 15}, Sender::coordinator},
        {Measure{"0123456789abcdef", 1500, 500, 1 << 27, {{1, "10.0.0.2", 2221}, {3, "fd00::4", 2221}}}, Sender::coordinator},
        {Measured{"0123456789abcdef", {{0, 1, 120, 9'400'000'000, ""}, {1, 0, std::nullopt, std::nullopt, "connection refused"}}},
         Sender::task},
    };
    for (const auto& [message, from] : messages) {
      CAPTURE(encode(message));
      CHECK(round_trip(message, from) == encode(message));
    }
    CHECK(encode(Ping{}) == "{\"type\":\"ping\"}\n");
    CHECK(encode(Exit{3}) == "{\"type\":\"exit\",\"status\":3}\n");
  }

  SUBCASE("the job's rules ride on the start; a start without them (an older coordinator) has none") {
    Start start{true, {}, 2, false, std::nullopt};
    start.restarts = 1;
    start.max_restarts = 3;
    start.stop_together = true;
    auto parsed = parse_message(round_trip(start, Sender::coordinator), Sender::coordinator);
    REQUIRE(parsed);
    CHECK(std::get<Start>(*parsed).restarts == 1);
    CHECK(std::get<Start>(*parsed).max_restarts == 3);
    CHECK(std::get<Start>(*parsed).stop_together);
    auto older = parse_message(R"({"type":"start","supervised":true,"environment_differences":[],"names_verified":false,"tasks":2})",
                               Sender::coordinator);
    REQUIRE(older);
    CHECK(std::get<Start>(*older).max_restarts == 0);
    CHECK_FALSE(std::get<Start>(*older).stop_together);
  }

  SUBCASE("our own invalid UTF-8 is replaced, not thrown") {
    CHECK(encode(Refused{"bad \xff byte"}) == "{\"type\":\"refused\",\"reason\":\"bad \xEF\xBF\xBD byte\"}\n");
  }

  SUBCASE("unknown keys are ignored") {
    auto parsed = parse_message(R"({"type":"exit","status":0,"later":{"x":[1,2]}})", Sender::task);
    REQUIRE(parsed);
    CHECK(std::get<Exit>(*parsed).status == 0);
  }

  SUBCASE("everything from the network is validated") {
    struct Row {
      const char* behaviour;
      std::string line;
      Sender from;
      std::string error;
    };
    const std::string nonce(32, 'a');
    const std::vector<Row> rows{
        {"not JSON", "{\"type\":", Sender::task, "a message that is not JSON (or not UTF-8)"},
        {"invalid UTF-8", "{\"type\":\"ping\",\"x\":\"\xff\"}", Sender::task, "a message that is not JSON (or not UTF-8)"},
        {"not an object", "[1]", Sender::task, "a message that is not a JSON object"},
        {"no type", "{\"status\":1}", Sender::task, "a message without a 'type'"},
        {"type not a string", "{\"type\":1}", Sender::task, "a message without a 'type'"},
        {"unknown type", "{\"type\":\"reboot\"}", Sender::task, "a message of unknown type 'reboot'"},
        {"a task may not send start", R"({"type":"start","supervised":true,"environment_differences":[],"tasks":1})", Sender::task,
         "a 'start' message from a task"},
        {"a coordinator may not send hello", encode(hello_from("worker:0", "w")), Sender::coordinator, "a 'hello' message from a coordinator"},
        {"exit status over 255", R"({"type":"exit","status":256})", Sender::task, "a bad 'exit' message: 'status' is outside 0..255"},
        {"exit status negative", R"({"type":"exit","status":-1})", Sender::task, "a bad 'exit' message: 'status' is outside 0..255"},
        {"exit status huge", R"({"type":"exit","status":18446744073709551615})", Sender::task,
         "a bad 'exit' message: 'status' is outside 0..255"},
        {"exit status as a float", R"({"type":"exit","status":1.0})", Sender::task, "a bad 'exit' message: 'status' is not an integer"},
        {"exit status missing", R"({"type":"exit"})", Sender::task, "a bad 'exit' message: 'status' is missing"},
        {"abort with a code other than 2, 3, 5, 6 or 8", R"({"type":"abort","code":0,"message":"x"})", Sender::coordinator,
         "a bad 'abort' message: 'code' is outside 2..8"},
        {"abort with the code of a file error", R"({"type":"abort","code":4,"message":"x"})", Sender::coordinator,
         "a bad 'abort' message: 'code' is not a start barrier's verdict"},
        {"stop naming no task", R"({"type":"stop","task":"master:0","status":1,"message":"x"})", Sender::coordinator,
         "a bad 'stop' message: 'task' is not a task such as worker:0"},
        {"challenge with a short nonce", R"({"type":"challenge","job":")" + job + R"(","nonce":"abc","secret":false})", Sender::coordinator,
         "a bad 'challenge' message: 'nonce' is not 32..64 hex digits"},
        {"challenge with an uppercase job", R"({"type":"challenge","job":"0123456789ABCDEF","nonce":")" + nonce + R"(","secret":false})",
         Sender::coordinator, "a bad 'challenge' message: 'job' is not 16..16 hex digits"},
        {"secret not a boolean", R"({"type":"challenge","job":")" + job + R"(","nonce":")" + nonce + R"(","secret":"yes"})",
         Sender::coordinator, "a bad 'challenge' message: 'secret' is not true or false"},
        {"host too long", R"({"type":"hello","job":")" + job + R"(","task":"worker:0","host":")" + std::string(254, 'h') + "\"}",
         Sender::task, "a bad 'hello' message: 'host' is longer than 253"},
        {"too many addresses", R"({"type":"hello","job":")" + job + R"(","task":"worker:0","host":"h","instance":"aaaaaaaa","supervised":true,"name":"n","addresses":[)" +
                                   [] { std::string list; for (int i = 0; i < 65; ++i) list += (i ? ",\"a\"" : "\"a\""); return list; }() + "]}",
         Sender::task, "a bad 'hello' message: 'addresses' has more than 64 items"},
        {"fingerprint not an object", R"({"type":"hello","job":")" + job + R"(","task":"worker:0","host":"h","instance":"aaaaaaaa","supervised":true,"name":"n","addresses":[],"fingerprint":"2.16"})",
         Sender::task, "a bad 'hello' message: 'fingerprint' is not an object"},
        {"progress with a negative count", R"({"type":"waiting","progress":{"present":-1,"total":3,"missing":[]}})", Sender::coordinator,
         "a bad 'waiting' message: 'progress' 'present' is outside 0..1000000"},
        {"start without the job's size", R"({"type":"start","supervised":true,"environment_differences":[],"names_verified":false})",
         Sender::coordinator, "a bad 'start' message: 'tasks' is missing"},
        {"start with a table of another size", R"({"type":"start","supervised":true,"environment_differences":[],"names_verified":false,"tasks":2,"addresses":["10.0.0.1"]})",
         Sender::coordinator, "a bad 'start' message: 'addresses' does not have one entry per task"},
        {"start with a table entry that is not text", R"({"type":"start","supervised":true,"environment_differences":[],"names_verified":false,"tasks":1,"addresses":[1]})",
         Sender::coordinator, "a bad 'start' message: 'addresses' holds an item that is not a string of at most 4160 bytes"},
        {"a task may not send restart", R"({"type":"restart","task":"worker:1","status":1,"message":"x","count":1})", Sender::task,
         "a 'restart' message from a task"},
        {"a restart counted 0", R"({"type":"restart","task":"worker:1","status":1,"message":"x","count":0})", Sender::coordinator,
         "a bad 'restart' message: 'count' is outside 1..1000000"},
        {"a preempt with no signal", R"({"type":"preempt","task":"worker:1","signal":0})", Sender::task,
         "a bad 'preempt' message: 'signal' is outside 1..64"},
        {"a preempt that is no stop signal", R"({"type":"preempt","task":"worker:1","signal":9})", Sender::coordinator,
         "a bad 'preempt' message: 'signal' is not SIGTERM (15) or SIGINT (2)"},
        {"a task may not ask for a measure", R"({"type":"measure","session":"0123456789abcdef","round_ms":1500,"bulk_ms":500,"max_bytes":1,"rounds":[]})",
         Sender::task, "a 'measure' message from a task"},
        {"a measure whose bulk outlasts its round", R"({"type":"measure","session":"0123456789abcdef","round_ms":500,"bulk_ms":500,"max_bytes":1,"rounds":[]})",
         Sender::coordinator, "a bad 'measure' message: 'bulk_ms' is not shorter than round_ms"},
        {"a measure of nine rounds", R"({"type":"measure","session":"0123456789abcdef","round_ms":1500,"bulk_ms":500,"max_bytes":1,"rounds":[)" +
             [] {
               std::string rounds;
               for (int i = 0; i < 9; ++i) rounds += std::string(i ? "," : "") + R"({"to":1,"address":"a","port":1})";
               return rounds;
             }() + "]}",
         Sender::coordinator, "a bad 'measure' message: 'rounds' has more than 8 items"},
        {"a round without a port", R"({"type":"measure","session":"0123456789abcdef","round_ms":1500,"bulk_ms":500,"max_bytes":1,"rounds":[{"to":1,"address":"a"}]})",
         Sender::coordinator, "a bad 'measure' message: 'rounds' 'port' is missing"},
        {"a coordinator may not send measured", R"({"type":"measured","session":"0123456789abcdef","links":[]})", Sender::coordinator,
         "a 'measured' message from a coordinator"},
        {"a measured link with a negative throughput", R"({"type":"measured","session":"0123456789abcdef","links":[{"from":0,"to":1,"bits_per_second":-1}]})",
         Sender::task, "a bad 'measured' message: 'links' 'bits_per_second' is outside 0..1125899906842624"},
        {"a task's message over 64 KiB", R"({"type":"ping","pad":")" + std::string(max_task_message, 'x') + "\"}", Sender::task,
         "a message over 65536 bytes"},
    };
    for (const auto& row : rows) {
      CAPTURE(row.behaviour);
      CHECK(parse_error(row.line, row.from) == row.error);
    }
  }

  SUBCASE("a coordinator's message may be large (the start's table of addresses, asked for)") {
    Start start{true, {}, 20000, true, std::vector<std::string>{}};
    for (int i = 0; i < 20000; ++i) start.addresses->push_back("10.1." + std::to_string(i / 256) + "." + std::to_string(i % 256));
    std::string line = encode(start);
    CHECK(line.size() > max_task_message);
    auto parsed = parse_message(std::string_view(line).substr(0, line.size() - 1), Sender::coordinator);
    REQUIRE_MESSAGE(parsed, error_of(parsed));
    REQUIRE(std::get<Start>(*parsed).addresses);
    CHECK(std::get<Start>(*parsed).addresses->size() == 20000);
    CHECK(std::get<Start>(*parsed).addresses->back() == "10.1.78.31");
  }
}

TEST_CASE("control_protocol::handshake") {
  const Challenge challenge{job, std::string(32, 'c'), true};
  Hello hello = hello_from("worker:0", "w");
  hello.nonce = std::string(32, 'd');
  hello.proof = task_proof("s3cret", challenge, hello);
  const std::optional<std::string> secret = "s3cret";

  SUBCASE("both sides prove the secret") {
    CHECK(check_hello_proof(hello, challenge, secret));
    Accepted accepted{coordinator_proof("s3cret", challenge, hello), {}};
    CHECK(check_accepted(accepted, challenge, hello, secret));
  }
  SUBCASE("a wrong secret, a replayed proof or a reflected proof fails") {
    Hello wrong = hello;
    wrong.proof = task_proof("guess", challenge, hello);
    CHECK(error_of(check_hello_proof(wrong, challenge, secret)) == "wrong proof of the shared secret");
    Challenge fresh = challenge;
    fresh.nonce = std::string(32, 'e');
    CHECK_FALSE(check_hello_proof(hello, fresh, secret));  // a proof recorded for another challenge
    Accepted reflected{hello.proof, {}};
    CHECK(error_of(check_accepted(reflected, challenge, hello, secret)) == "the coordinator's proof of the shared secret is wrong");
    Hello unproven = hello;
    unproven.nonce.clear();
    unproven.proof.clear();
    CHECK(error_of(check_hello_proof(unproven, challenge, secret)) == "no nonce in the hello although a secret is required");
  }
  SUBCASE("without a secret nothing is checked") {
    CHECK(check_hello_proof(hello_from("worker:0", "w"), challenge, std::nullopt));
    CHECK(check_accepted(Accepted{}, challenge, hello, std::nullopt));
  }
  SUBCASE("the task checks the coordinator's job and secret setting") {
    CHECK(check_challenge(challenge, job, true));
    CHECK(error_of(check_challenge(challenge, "fedcba9876543210", true)) ==
          "the coordinator serves job 0123456789abcdef, not ours (fedcba9876543210): another job, or a cluster of another size");
    CHECK(error_of(check_challenge(challenge, job, false)) == "the coordinator requires the shared secret; set --control-secret-file");
    CHECK(error_of(check_challenge(Challenge{job, challenge.nonce, false}, job, true)) ==
          "the coordinator has no shared secret but we do; set --control-secret-file on every task");
  }
}

TEST_CASE("control_protocol::protocol version in the handshake") {
  const std::string nonce(32, 'a');
  SUBCASE("the challenge and the hello carry the protocol and tfboot's version") {
    Challenge challenge{job, nonce, false, protocol_version, "0.1.0 (3f2a9c1)"};
    CHECK(encode(challenge) == R"({"type":"challenge","job":"0123456789abcdef","nonce":")" + nonce +
                                   R"x(","secret":false,"protocol":3,"tfboot":"0.1.0 (3f2a9c1)"})x" + "\n");
    auto parsed = parse_message(round_trip(challenge, Sender::coordinator), Sender::coordinator);
    REQUIRE(parsed);
    CHECK(std::get<Challenge>(*parsed).protocol == 3);
    CHECK(std::get<Challenge>(*parsed).tfboot == "0.1.0 (3f2a9c1)");
    Hello hello = hello_from("worker:1", "w");
    hello.tfboot = "0.1.0 (3f2a9c1)";
    auto parsed_hello = parse_message(round_trip(hello, Sender::task), Sender::task);
    REQUIRE(parsed_hello);
    CHECK(std::get<Hello>(*parsed_hello).protocol == 3);
    CHECK(std::get<Hello>(*parsed_hello).tfboot == "0.1.0 (3f2a9c1)");
  }
  SUBCASE("a challenge or hello without a version (an older tfboot) is protocol 1") {
    auto challenge = parse_message(R"({"type":"challenge","job":")" + job + R"(","nonce":")" + nonce + R"(","secret":false})",
                                   Sender::coordinator);
    REQUIRE(challenge);
    CHECK(std::get<Challenge>(*challenge).protocol == 1);
    CHECK(std::get<Challenge>(*challenge).tfboot == "");
    auto hello = parse_message(R"({"type":"hello","job":")" + job + R"(","task":"worker:1","host":"h","instance":"aaaaaaaa",)"
                               R"("supervised":true,"name":"n","addresses":[],"fingerprint":{},"nonce":"","proof":"","started_ms_ago":5})",
                               Sender::task);
    REQUIRE(hello);
    CHECK(std::get<Hello>(*hello).protocol == 1);
  }
  SUBCASE("a first message of another version that cannot be read says so") {
    CHECK(parse_error(R"({"type":"challenge","job":")" + job + R"(","secret":false,"protocol":4,"tfboot":"0.3.0"})", Sender::coordinator) ==
          "a 'challenge' of control protocol 4 (this tfboot speaks 3) that it cannot read: 'nonce' is missing");
    CHECK(parse_error(R"({"type":"challenge","job":")" + job + R"(","nonce":")" + nonce + R"(","secret":false,"protocol":0})",
                      Sender::coordinator) == "a 'challenge' of control protocol 0 (this tfboot speaks 3) that it cannot read: 'protocol' is outside 1..1000000");
    CHECK(parse_error(R"({"type":"challenge","job":")" + job + R"(","nonce":")" + nonce + R"(","secret":false,"tfboot":1})",
                      Sender::coordinator) == "a bad 'challenge' message: 'tfboot' is not a string");
  }
  SUBCASE("a task refuses a coordinator of another protocol, naming both versions (exit 6)") {
    Hello own = hello_from("worker:2", "w");
    own.tfboot = "0.2.0 (3f2a9c1)";
    CHECK(check_coordinator_protocol(Challenge{job, nonce, false, protocol_version, "0.1.0 (1111111)"}, own, "worker:0 at 10.0.0.1:2220"));
    auto older = check_coordinator_protocol(Challenge{job, nonce, false, 1, ""}, own, "worker:0 at 10.0.0.1:2220");
    REQUIRE_FALSE(older);
    CHECK(older.error().code == exit_code::environment_mismatch);
    CHECK(older.error().message ==
          "tfboot versions differ in this job: the coordinator worker:0 at 10.0.0.1:2220 speaks control protocol 1 (an older tfboot "
          "that does not say its version), this task worker:2 speaks control protocol 3 (tfboot 0.2.0 (3f2a9c1)); run one tfboot "
          "version on every task of a job (CHANGELOG.md lists each version's protocol)");
    CHECK(error_of(check_coordinator_protocol(Challenge{job, nonce, false, 4, "0.9.0"}, own, "worker:0 at 10.0.0.1:2220")) ==
          "tfboot versions differ in this job: the coordinator worker:0 at 10.0.0.1:2220 speaks control protocol 4 (tfboot 0.9.0), "
          "this task worker:2 speaks control protocol 3 (tfboot 0.2.0 (3f2a9c1)); run one tfboot version on every task of a job "
          "(CHANGELOG.md lists each version's protocol)");
  }
  SUBCASE("the coordinator aborts the start for every task when a task speaks another protocol") {
    Hello own = hello_from("worker:0", "pod-0");
    own.tfboot = "0.2.0";
    CHECK_FALSE(protocol_mismatch(hello_from("worker:1", "pod-1"), "10.0.0.2:40000", own));
    Hello older = hello_from("worker:1", "pod-1");
    older.protocol = 1;
    auto abort = protocol_mismatch(older, "10.0.0.2:40000", own);
    REQUIRE(abort);
    CHECK(abort->code == exit_code::environment_mismatch);
    CHECK(abort->message ==
          "tfboot versions differ in this job: worker:1 (host 'pod-1', 10.0.0.2:40000) speaks control protocol 1 (an older tfboot "
          "that does not say its version), the coordinator worker:0 speaks control protocol 3 (tfboot 0.2.0); run one tfboot "
          "version on every task of a job (CHANGELOG.md lists each version's protocol)");
    // A task older than the version check accepts this abort (its code and length are within what it reads).
    auto line = encode(*abort);
    CHECK(parse_message(std::string_view(line).substr(0, line.size() - 1), Sender::coordinator));
  }
}

// A job of N tasks, every one present.
StartBarrier full_barrier(int tasks) {
  BarrierSettings settings{job, {}, hello_from("worker:0", "job-worker-0"), EnvCheck::warn, 10s};
  for (int i = 0; i < tasks; ++i) settings.tasks.push_back(JobMember{TaskType::worker, i});
  StartBarrier barrier(settings);
  for (int i = 1; i < tasks; ++i) {
    const std::string task = "worker:" + std::to_string(i);
    REQUIRE(barrier.on_hello(static_cast<ConnectionId>(i), hello_from(task, "job-worker-" + std::to_string(i)), "p", t0).accepted);
  }
  return barrier;
}

TEST_CASE("control_protocol::the start's size does not depend on the job's size") {
  StartBarrier small = full_barrier(10);
  StartBarrier large = full_barrier(10000);
  REQUIRE(small.complete());
  REQUIRE(large.complete());
  const std::string small_start = encode(std::get<Start>(small.decide(true)));
  const std::string large_start = encode(std::get<Start>(large.decide(true)));
  // Only the count differs: "tasks":10 against "tasks":10000.
  CHECK(large_start.size() - small_start.size() == 3);
  CHECK(large_start.size() < 200);
  CHECK(large.progress().present == 10000);
  CHECK(large.progress().missing.empty());
}

TEST_CASE("control_protocol::StartBarrier") {
  StartBarrier barrier(barrier_settings());

  SUBCASE("complete when every task is present, the coordinator counting itself") {
    CHECK_FALSE(barrier.complete());
    CHECK(barrier.progress().present == 1);
    CHECK(barrier.progress().missing == std::vector<std::string>{"worker:0", "worker:1"});
    CHECK(barrier.on_hello(1, hello_from("worker:0", "w0"), "10.0.0.2:4000", t0).accepted);
    CHECK_FALSE(barrier.complete());
    CHECK(barrier.on_hello(2, hello_from("worker:1", "w1"), "10.0.0.3:4000", t0).accepted);
    CHECK(barrier.complete());
    CHECK(barrier.progress().present == 3);
    CHECK(barrier.present_tasks().size() == 2);
    auto start = std::get<Start>(barrier.decide(true));
    CHECK(start.tasks == 3);
    CHECK_FALSE(start.addresses);
    const auto members = barrier.members();
    REQUIRE(members.size() == 3);
    CHECK(members[2].host == "w1");
    CHECK(start.environment_differences.empty());
  }
  SUBCASE("nodes that run different numbers of processes are refused, each count named (exit 2)") {
    BarrierSettings settings = barrier_settings();
    settings.own.processes = 4;
    StartBarrier pytorch(settings);
    Hello first = hello_from("worker:0", "w0");
    first.processes = 4;
    Hello second = hello_from("worker:1", "w1");
    second.processes = 2;  // --nproc-per-node gpu on a node with fewer GPUs
    REQUIRE(pytorch.on_hello(1, first, "p", t0).accepted);
    REQUIRE(pytorch.on_hello(2, second, "p", t0).accepted);
    const auto abort = std::get<Abort>(pytorch.decide(true));
    CHECK(abort.code == exit_code::usage);
    CHECK(abort.message == "the nodes run different numbers of processes (--nproc-per-node): worker:1 runs 2; chief:0, worker:0 "
                           "run 4; every node of the job must run the same number (give a number, not gpu or cpu, where the "
                           "nodes differ)");
    // The abort travels to every task, which exits with its code.
    CHECK(std::get<Abort>(parse_message(encode(abort), Sender::coordinator).value()).code == exit_code::usage);
  }
  SUBCASE("refusals name their reason") {
    Hello other = hello_from("worker:0", "w0");
    other.job = "fedcba9876543210";
    CHECK(barrier.on_hello(1, other, "p", t0).reason ==
          "job fedcba9876543210 is not this job (0123456789abcdef): another job, or a cluster of another size");
    CHECK(barrier.on_hello(1, hello_from("worker:5", "w5"), "p", t0).reason == "worker:5 is not a task of this job's cluster");
    CHECK(barrier.on_hello(1, hello_from("chief:0", "impostor"), "p", t0).reason == "chief:0 is the coordinator itself, host 'job-chief-0'");
    CHECK(barrier.progress().present == 1);
  }
  SUBCASE("a second live hello is refused naming both hosts") {
    REQUIRE(barrier.on_hello(1, hello_from("worker:0", "w0", "11111111"), "10.0.0.2:4000", t0).accepted);
    auto verdict = barrier.on_hello(2, hello_from("worker:0", "w0-copy", "22222222"), "10.0.0.9:5000", t0 + 9s);
    CHECK_FALSE(verdict.accepted);
    CHECK(verdict.reason == "worker:0 is already present from host 'w0' (10.0.0.2:4000); refused the second hello from host 'w0-copy' (10.0.0.9:5000)");
  }
  SUBCASE("the same instance reconnecting replaces its old connection") {
    REQUIRE(barrier.on_hello(1, hello_from("worker:0", "w0", "11111111"), "p", t0).accepted);
    auto verdict = barrier.on_hello(2, hello_from("worker:0", "w0", "11111111"), "p", t0 + 1s);
    CHECK(verdict.accepted);
    CHECK(verdict.replaced == ConnectionId{1});
  }
  SUBCASE("a new instance replaces a dead (silent) one") {
    REQUIRE(barrier.on_hello(1, hello_from("worker:0", "w0", "11111111"), "p", t0).accepted);
    barrier.on_heard(1, t0 + 5s);
    CHECK(barrier.silent(t0 + 15s).empty());
    CHECK(barrier.silent(t0 + 15s + 1ms) == std::vector<ConnectionId>{1});
    auto verdict = barrier.on_hello(2, hello_from("worker:0", "w0", "22222222"), "p", t0 + 15s + 1ms);
    CHECK(verdict.accepted);
    CHECK(verdict.replaced == ConnectionId{1});
  }
  SUBCASE("a closed connection frees its task, whose last error is reported") {
    REQUIRE(barrier.on_hello(1, hello_from("worker:0", "w0"), "p", t0).accepted);
    barrier.on_closed(1, "connection closed by the peer");
    barrier.note_problem(member("worker:1"), "wrong proof of the shared secret from 10.0.0.3:4000");
    CHECK(barrier.progress().present == 1);
    CHECK(barrier.missing_report() ==
          "worker:0 (host 'w0': connection closed by the peer), worker:1 (never said hello: wrong proof of the shared secret from 10.0.0.3:4000)");
    CHECK(barrier.on_hello(3, hello_from("worker:0", "w0", "33333333"), "p", t0 + 1s).accepted);
    barrier.on_closed(1, "late news of the old connection");  // no longer the task's connection
    CHECK(barrier.progress().present == 2);
  }
  SUBCASE("the report of missing tasks is bounded") {
    CHECK(barrier.missing_report(1) == "worker:0 (never said hello) and 1 more");
  }
  SUBCASE("environment check: warn lists differences, fail aborts, off ignores") {
    for (EnvCheck check : {EnvCheck::warn, EnvCheck::fail, EnvCheck::off}) {
      StartBarrier checked(barrier_settings(check));
      Hello newer = hello_from("worker:1", "w1");
      newer.fingerprint.tensorflow = "2.17.0";
      checked.on_hello(1, hello_from("worker:0", "w0"), "p", t0);
      checked.on_hello(2, newer, "p", t0);
      REQUIRE(checked.complete());
      auto decision = checked.decide(true);
      const std::string line = "tensorflow: 2.16.1 on chief:0,worker:0; 2.17.0 on worker:1";
      if (check == EnvCheck::warn) CHECK(std::get<Start>(decision).environment_differences == std::vector<std::string>{line});
      if (check == EnvCheck::off) CHECK(std::get<Start>(decision).environment_differences.empty());
      if (check == EnvCheck::fail) {
        CHECK(std::get<Abort>(decision).code == exit_code::environment_mismatch);
        CHECK(std::get<Abort>(decision).message == "environment check failed (--env-check fail): " + line);
      }
    }
  }
}

TEST_CASE("control_protocol::JobMonitor when every task must finish (PyTorch, JAX)") {
  JobMonitor monitor(member("worker:0"), {{member("worker:1"), true}, {member("worker:2"), true}, {member("worker:3"), false}}, 10s,
                     t0, JobRules{.every_task_must_finish = true});
  SUBCASE("the coordinator's 0 waits for every supervised task; the last one's 0 ends the job") {
    auto own = monitor.on_own_exit(0);
    CHECK(own.events.empty());
    CHECK_FALSE(own.broadcast);
    CHECK_FALSE(monitor.decided());
    CHECK(monitor.on_message(member("worker:1"), Exit{0}, t0 + 1s).events.empty());
    CHECK_FALSE(monitor.decided());
    auto last = monitor.on_message(member("worker:2"), Exit{0}, t0 + 2s);  // worker:3 execs: not waited for
    REQUIRE(last.events.size() == 1);
    CHECK(last.events[0].kind == JobEventKind::job_done);
    CHECK(last.events[0].task == "every task");
    REQUIRE(last.broadcast);
    CHECK(std::holds_alternative<Done>(*last.broadcast));
    CHECK(monitor.decided());
  }
  SUBCASE("tasks done before the coordinator: its own 0 ends the job at once") {
    monitor.on_message(member("worker:1"), Exit{0}, t0 + 1s);
    monitor.on_message(member("worker:2"), Exit{0}, t0 + 1s);
    CHECK(monitor.on_own_exit(0).broadcast);
    CHECK(monitor.decided());
  }
  SUBCASE("a task failing after the coordinator's 0 still fails the job, naming it") {
    monitor.on_own_exit(0);
    auto failed = monitor.on_message(member("worker:2"), Exit{1, "rank 2 on pod-2: ValueError: x"}, t0 + 1s);
    REQUIRE(failed.events.size() == 1);
    CHECK(failed.events[0].message == "worker:2 failed with status 1: rank 2 on pod-2: ValueError: x");
  }
  SUBCASE("a task silent after the coordinator's 0 is lost, as before") {
    monitor.on_own_exit(0);
    auto lost = monitor.on_tick(t0 + 11s);
    REQUIRE(lost.events.size() == 1);
    CHECK(lost.events[0].status == -1);
  }
}

TEST_CASE("control_protocol::JobMonitor") {
  JobMonitor monitor(member("chief:0"), {{member("worker:0"), true}, {member("worker:1"), true}, {member("ps:0"), false}}, 10s, t0);

  SUBCASE("a task finishing with 0 is no failure; the coordinator's 0 ends the job") {
    auto decision = monitor.on_message(member("worker:0"), Exit{0}, t0 + 1s);
    CHECK(decision.events.empty());
    CHECK_FALSE(decision.broadcast);
    CHECK(monitor.on_closed(member("worker:0"), "closed", t0 + 2s).events.empty());
    auto done = monitor.on_own_exit(0);
    CHECK(done.events.empty());
    REQUIRE(done.broadcast);
    CHECK(std::holds_alternative<Done>(*done.broadcast));
    CHECK(monitor.decided());
  }
  SUBCASE("a task failing stops the job, once") {
    auto decision = monitor.on_message(member("worker:1"), Exit{137}, t0 + 1s);
    REQUIRE(decision.events.size() == 1);
    CHECK(decision.events[0].kind == JobEventKind::task_failed);
    CHECK(decision.events[0].task == "worker:1");
    CHECK(decision.events[0].status == 137);
    CHECK(decision.events[0].message == "worker:1 failed with signal SIGKILL (status 137)");
    REQUIRE(decision.broadcast);
    CHECK(encode(*decision.broadcast) == "{\"type\":\"stop\",\"task\":\"worker:1\",\"status\":137,\"message\":\"worker:1 failed with signal SIGKILL (status 137)\"}\n");
    CHECK(monitor.on_message(member("worker:0"), Exit{143}, t0 + 2s).events.empty());
    CHECK_FALSE(monitor.on_own_exit(143).broadcast);
  }
  SUBCASE("the coordinator's own failure is told to every task") {
    auto decision = monitor.on_own_exit(1);
    REQUIRE(decision.broadcast);
    CHECK(std::get<Stop>(*decision.broadcast).message == "chief:0 failed with status 1");
    CHECK(decision.events.size() == 1);
  }
  SUBCASE("a supervised task silent too long is lost; an exec-mode task is not watched") {
    CHECK(monitor.next_deadline() == t0 + 10s);
    monitor.on_message(member("worker:0"), Ping{}, t0 + 5s);
    CHECK(monitor.on_tick(t0 + 10s).events.empty());
    auto decision = monitor.on_tick(t0 + 10s + 1ms);
    REQUIRE(decision.events.size() == 1);
    CHECK(decision.events[0].message == "worker:1 was lost: silent for 10s");
    CHECK(decision.events[0].status == -1);
    CHECK(monitor.next_deadline() == Instant::max());
  }
  SUBCASE("a supervised task's connection closing without an exit report is a loss") {
    CHECK(monitor.on_closed(member("ps:0"), "closed", t0).events.empty());  // exec mode: gone at exec
    auto decision = monitor.on_closed(member("worker:0"), "connection reset", t0 + 1s);
    REQUIRE(decision.events.size() == 1);
    CHECK(decision.events[0].message == "worker:0 was lost: connection reset");
  }
}

TEST_CASE("control_protocol::JobMonitor with restarts left (--max-restarts)") {
  JobMonitor monitor(member("chief:0"), {{member("worker:0"), true}, {member("worker:1"), true}}, 10s, t0,
                     JobRules{.restarts = 1, .max_restarts = 2});
  SUBCASE("a task's failure restarts the job, counted, once") {
    auto decision = monitor.on_message(member("worker:1"), Exit{3}, t0 + 1s);
    REQUIRE(decision.events.size() == 1);
    CHECK(decision.events[0].kind == JobEventKind::restart);
    CHECK(decision.events[0].restart == 2);
    CHECK(decision.events[0].message == "worker:1 failed with status 3");
    REQUIRE(decision.broadcast);
    CHECK(encode(*decision.broadcast) ==
          "{\"type\":\"restart\",\"task\":\"worker:1\",\"status\":3,\"message\":\"worker:1 failed with status 3\",\"count\":2}\n");
    CHECK(monitor.on_message(member("worker:0"), Exit{143}, t0 + 2s).events.empty());
    CHECK(monitor.decided());
  }
  SUBCASE("a lost task and the coordinator's own failure restart it too") {
    CHECK(std::holds_alternative<Restart>(*monitor.on_closed(member("worker:0"), "connection reset", t0).broadcast));
    JobMonitor other(member("chief:0"), {{member("worker:0"), true}}, 10s, t0, JobRules{.max_restarts = 1});
    auto own = other.on_own_exit(1);
    REQUIRE(own.events.size() == 1);
    CHECK(own.events[0].kind == JobEventKind::restart);
    CHECK(own.events[0].restart == 1);
  }
  SUBCASE("the coordinator's own failure when it is stopping anyway stops the job: no one would gather it again") {
    auto own = monitor.on_own_exit(143, "", /*restartable=*/false);
    REQUIRE(own.broadcast);
    CHECK(std::holds_alternative<Stop>(*own.broadcast));
  }
  SUBCASE("with none left the failure stops the job, as without restarts") {
    JobMonitor spent(member("chief:0"), {{member("worker:0"), true}}, 10s, t0, JobRules{.restarts = 2, .max_restarts = 2});
    auto decision = spent.on_message(member("worker:0"), Exit{3}, t0 + 1s);
    REQUIRE(decision.broadcast);
    CHECK(std::holds_alternative<Stop>(*decision.broadcast));
  }
}

TEST_CASE("control_protocol::JobMonitor with --stop-together") {
  JobMonitor monitor(member("chief:0"), {{member("worker:0"), true}, {member("worker:1"), true}}, 10s, t0,
                     JobRules{.max_restarts = 3, .stop_together = true});
  SUBCASE("a task's stop signal goes to every task, and no failure after it restarts or stops the job") {
    auto decision = monitor.on_message(member("worker:1"), Preempt{member("worker:1"), 15}, t0 + 1s);
    REQUIRE(decision.events.size() == 1);
    CHECK(decision.events[0].kind == JobEventKind::preempt);
    CHECK(decision.events[0].message == "worker:1 was asked to stop (SIGTERM): every task stops together");
    REQUIRE(decision.broadcast);
    CHECK(encode(*decision.broadcast) == "{\"type\":\"preempt\",\"task\":\"worker:1\",\"signal\":15}\n");
    CHECK_FALSE(monitor.on_message(member("worker:1"), Exit{143}, t0 + 2s).broadcast);
    CHECK_FALSE(monitor.on_own_exit(143).broadcast);
  }
  SUBCASE("the coordinator's own stop signal too") {
    auto decision = monitor.on_own_stop_signal(2);
    REQUIRE(decision.broadcast);
    CHECK(std::get<Preempt>(*decision.broadcast).task == member("chief:0"));
    CHECK(std::get<Preempt>(*decision.broadcast).signal == 2);
  }
  SUBCASE("off, a stop signal is only the task's own") {
    JobMonitor off(member("chief:0"), {{member("worker:0"), true}}, 10s, t0);
    CHECK_FALSE(off.on_message(member("worker:0"), Preempt{member("worker:0"), 15}, t0).broadcast);
    CHECK_FALSE(off.on_own_stop_signal(15).broadcast);
    CHECK_FALSE(off.decided());
  }
}

TEST_CASE("control_protocol::CoordinatorWatch") {
  CoordinatorWatch watch(member("chief:0"), true, 10s, t0);
  SUBCASE("done is the job's end") {
    auto event = watch.on_message(Done{}, t0 + 1s);
    REQUIRE(event);
    CHECK(event->kind == JobEventKind::job_done);
    CHECK(event->message == "the coordinator chief:0 finished: the job is done");
    CHECK_FALSE(watch.on_closed("closed"));  // decided once
  }
  SUBCASE("stop names the failed task") {
    auto event = watch.on_message(Stop{member("worker:3"), 1, "worker:3 failed with status 1"}, t0);
    REQUIRE(event);
    CHECK(event->kind == JobEventKind::task_failed);
    CHECK(event->task == "worker:3");
    CHECK(event->status == 1);
  }
  SUBCASE("restart and preempt are the coordinator's decisions, once") {
    auto event = watch.on_message(Restart{member("worker:3"), -1, "worker:3 was lost: connection reset", 4}, t0);
    REQUIRE(event);
    CHECK(event->kind == JobEventKind::restart);
    CHECK(event->restart == 4);
    CHECK(event->status == -1);
    CHECK_FALSE(watch.on_message(Preempt{member("worker:1"), 15}, t0));
    CoordinatorWatch other(member("chief:0"), true, 10s, t0);
    auto preempt = other.on_message(Preempt{member("worker:1"), 15}, t0);
    REQUIRE(preempt);
    CHECK(preempt->kind == JobEventKind::preempt);
    CHECK(preempt->status == 15);
  }
  SUBCASE("silence or a closed connection loses the coordinator") {
    watch.on_message(Ping{}, t0 + 3s);
    CHECK(watch.next_deadline() == t0 + 13s);
    CHECK_FALSE(watch.on_tick(t0 + 13s));
    auto event = watch.on_tick(t0 + 13s + 1ms);
    REQUIRE(event);
    CHECK(event->kind == JobEventKind::coordinator_lost);
    CHECK(event->message == "the coordinator chief:0 was lost: silent for 10s");
  }
  SUBCASE("a coordinator that exec'd its command is not watched") {
    CoordinatorWatch inactive(member("chief:0"), false, 10s, t0);
    CHECK_FALSE(inactive.on_closed("closed"));
    CHECK_FALSE(inactive.on_tick(t0 + 1h));
    CHECK(inactive.next_deadline() == Instant::max());
  }
}

TEST_CASE("control_protocol::describe_status") {
  CHECK(describe_status(0) == "status 0");
  CHECK(describe_status(1) == "status 1");
  CHECK(describe_status(143) == "signal SIGTERM (status 143)");
  CHECK(describe_status(-1) == "lost");
  CHECK(describe_status(255) == "status 255");
}

}  // namespace tfboot
