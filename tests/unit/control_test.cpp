// The control channel end to end on 127.0.0.1: every task a thread running join_job, the
// coordinator the only one listening; strangers and impostors as raw sockets.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <future>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "control/auth.h"
#include "control/join.h"
#include "control/refusals.h"
#include "test_support.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;
using JoinResult = Result<std::unique_ptr<JobLink>>;

const std::string the_job_id = "0123456789abcdef";

// A port nobody listens on right now, for the coordinator to take. Below the kernel's ephemeral
// range (32768-60999): a port the kernel picked would be handed out again as the source port of
// some connection (this test's strangers, or another test run's) before the coordinator binds it.
int free_port() {
  static std::mt19937 pick(std::random_device{}());
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = std::uniform_int_distribution<int>(20000, 32000)(pick);
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{.sin_family = AF_INET, .sin_port = htons(static_cast<std::uint16_t>(port)), .sin_addr = {}};
    const bool taken = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0;
    ::close(fd);
    if (!taken) return port;
  }
  FAIL("no free port between 20000 and 32000");
  return 0;
}

JobMember member(const std::string& text) { return parse_member(text).value(); }

struct Job {
  std::vector<std::string> tasks{"chief:0", "worker:0", "worker:1"};
  int port = free_port();
  std::chrono::milliseconds start_timeout = 5s;
  EnvCheck env_check = EnvCheck::warn;
  std::optional<std::string> secret;

  JobSettings settings(const std::string& self) const {
    JobSettings settings;
    settings.job_id = the_job_id;
    for (const auto& task : tasks) settings.tasks.push_back(member(task));
    settings.self = member(self);
    settings.coordinator = member(tasks.front());
    settings.port = port;
    settings.start_timeout = start_timeout;
    settings.env_check = env_check;
    settings.secret = secret;
    settings.supervise = true;
    settings.hostname = "host-" + self.substr(0, self.find(':'));
    settings.own_name = self + ".job.svc";
    settings.own_addresses = {"127.0.0.1"};
    settings.coordinator_addresses = [] { return Result<std::vector<std::string>>(std::vector<std::string>{"127.0.0.1"}); };
    settings.heartbeat_every = 100ms;
    settings.peer_silent_after = 800ms;
    settings.hello_timeout = 500ms;
    settings.progress_every = 10s;
    return settings;
  }
};

Fingerprint fingerprint(const std::string& tensorflow = "2.16.1") {
  Fingerprint fingerprint;
  fingerprint.tensorflow = tensorflow;
  return fingerprint;
}

std::future<JoinResult> join_async(const JobSettings& settings, const Fingerprint& own = fingerprint()) {
  return std::async(std::launch::async, [settings, own] { return join_job(settings, own); });
}

// Every task of `job` joins, with the fingerprint given for it or the common one.
std::vector<std::future<JoinResult>> join_all(const Job& job, const std::map<std::string, Fingerprint>& fingerprints = {}) {
  std::vector<std::future<JoinResult>> joins;
  for (const auto& task : job.tasks) {
    auto it = fingerprints.find(task);
    joins.push_back(join_async(job.settings(task), it == fingerprints.end() ? fingerprint() : it->second));
  }
  return joins;
}

// Every task of `job` joins; the links in the order of job.tasks.
std::vector<std::unique_ptr<JobLink>> start_all(const Job& job) {
  auto joins = join_all(job);
  std::vector<std::unique_ptr<JobLink>> links;
  for (auto& join : joins) {
    JoinResult result = join.get();
    REQUIRE_MESSAGE(result, error_of(result));
    links.push_back(std::move(*result));
  }
  return links;
}

// Runs the link as a supervisor's poll loop would, until it reports an event or `at_most` passes.
std::vector<JobEvent> pump(JobLink& link, std::chrono::milliseconds at_most) {
  auto until = std::chrono::steady_clock::now() + at_most;
  while (std::chrono::steady_clock::now() < until) {
    std::vector<pollfd> fds;
    link.add_poll_fds(fds);
    auto wake = std::min(until, link.next_wakeup());
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - std::chrono::steady_clock::now());
    REQUIRE(::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(0, wait.count()))) >= 0);
    auto events = link.process(fds, std::chrono::steady_clock::now());
    if (!events.empty()) return events;
  }
  return {};
}

// Pumps every link side by side (so that heartbeats keep flowing) until `watched` has an event.
std::vector<JobEvent> pump_all(std::vector<std::unique_ptr<JobLink>>& links, std::size_t watched, std::chrono::milliseconds at_most) {
  auto until = std::chrono::steady_clock::now() + at_most;
  while (std::chrono::steady_clock::now() < until) {
    for (std::size_t i = 0; i < links.size(); ++i) {
      if (!links[i]) continue;
      auto events = pump(*links[i], 10ms);
      if (i == watched && !events.empty()) return events;
    }
  }
  return {};
}

// A raw TCP client: strangers, impostors and half-done peers.
struct RawClient {
  int fd = -1;
  explicit RawClient(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{.sin_family = AF_INET, .sin_port = htons(static_cast<std::uint16_t>(port)), .sin_addr = {htonl(INADDR_LOOPBACK)}};
    for (int attempt = 0; attempt < 200; ++attempt) {
      if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return;
      std::this_thread::sleep_for(10ms);  // the coordinator is not listening yet
      ::close(fd);
      fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    }
    FAIL("cannot connect to the coordinator");
  }
  struct Accepted {};
  RawClient(Accepted, int accepted_fd) : fd(accepted_fd) {}
  RawClient(const RawClient&) = delete;
  ~RawClient() { ::close(fd); }
  void send_text(const std::string& text) const { REQUIRE(::send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size())); }
  // One line, waiting up to a second.
  std::string read_line() const {
    std::string line;
    char c = 0;
    timeval timeout{1, 0};
    REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) == 0);
    while (::recv(fd, &c, 1, 0) == 1 && c != '\n') line += c;
    return line;
  }
};

// Listens where a coordinator would, to play one.
struct FakeCoordinator {
  int fd = -1;
  explicit FakeCoordinator(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    int on = 1;
    REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0);
    sockaddr_in address{.sin_family = AF_INET, .sin_port = htons(static_cast<std::uint16_t>(port)), .sin_addr = {htonl(INADDR_LOOPBACK)}};
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(fd, 8) == 0);
  }
  ~FakeCoordinator() { ::close(fd); }
  std::unique_ptr<RawClient> accept() const {
    int connection = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    REQUIRE(connection >= 0);
    return std::make_unique<RawClient>(RawClient::Accepted{}, connection);
  }
};

Hello raw_hello(const Job& job, const std::string& task, const std::string& instance) {
  JobSettings settings = job.settings(task);
  return Hello{settings.job_id, settings.self, settings.hostname, instance, true, settings.own_name, {"127.0.0.1"}, fingerprint(), "", ""};
}

// A connection to the coordinator from `source` (another loopback address than the tasks'
// 127.0.0.1, as a stranger on another host), or -1. No test assertion: runs on helper threads.
int connect_from(const char* source, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in from{.sin_family = AF_INET, .sin_port = 0, .sin_addr = {}};
  ::inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{.sin_family = AF_INET, .sin_port = htons(static_cast<std::uint16_t>(port)), .sin_addr = {htonl(INADDR_LOOPBACK)}};
  timeval timeout{0, 200'000};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the peer closed `fd` (what it sent before is read and dropped).
bool closed_by_peer(int fd) {
  char buffer[4096];
  while (true) {
    ssize_t got = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (got > 0) continue;
    return got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
}

// A stranger on `source` that keeps `count` silent connections open until stopped, each
// replaced by a fresh one before it is `recycled_at` old (the new opened before the old closes)
// and each one closed by the coordinator opened again at once.
class Stranger {
 public:
  Stranger(const char* source, int port, std::size_t count, std::chrono::milliseconds recycled_at)
      : thread_([=, this] { run(source, port, count, recycled_at); }) {}
  ~Stranger() {
    stop_ = true;
    thread_.join();
  }
  std::size_t held() const { return held_; }

 private:
  void run(const char* source, int port, std::size_t count, std::chrono::milliseconds recycled_at) {
    struct Held {
      int fd;
      std::chrono::steady_clock::time_point opened;
    };
    std::vector<Held> open;
    while (!stop_) {
      const auto now = std::chrono::steady_clock::now();
      std::vector<Held> kept;
      for (const Held& connection : open) {
        if (closed_by_peer(connection.fd)) {
          ::close(connection.fd);
        } else if (now - connection.opened >= recycled_at) {
          if (int fresh = connect_from(source, port); fresh >= 0) kept.push_back({fresh, std::chrono::steady_clock::now()});
          ::close(connection.fd);
        } else {
          kept.push_back(connection);
        }
      }
      open = std::move(kept);
      while (open.size() < count && !stop_) {
        int fd = connect_from(source, port);
        if (fd < 0) break;
        open.push_back({fd, std::chrono::steady_clock::now()});
      }
      held_ = open.size();
      std::this_thread::sleep_for(2ms);
    }
    for (const Held& connection : open) ::close(connection.fd);
  }

  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> held_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE("control::join_job starts every task once all are present") {
  Job job;
  auto links = start_all(job);
  for (const auto& link : links) {
    CHECK(link->start_info().environment_differences.empty());
    CHECK(link->start_info().coordinator_supervises);
    CHECK(link->start_info().tasks == 3);
  }
  // The coordinator keeps the table of what each task reported; the tasks did not ask for it.
  REQUIRE(links.front()->start_info().addresses.size() == 3);
  CHECK(links.front()->start_info().addresses[2] == std::vector<std::string>{"127.0.0.1"});
  CHECK(links[1]->start_info().addresses.empty());
  CHECK(links[2]->start_info().addresses.empty());
}

// Every task of `job` joins; the coordinator checks the members' names with `verify`.
std::vector<std::future<JoinResult>> join_all_verified(const Job& job, decltype(JobSettings::verify_members) verify) {
  std::vector<std::future<JoinResult>> joins;
  for (const auto& task : job.tasks) {
    JobSettings settings = job.settings(task);
    if (task == job.tasks.front()) {
      settings.verify_members = verify;
      settings.record_settle = 50ms;
    }
    settings.wants_table = task == job.tasks.back();  // as with --address ip
    joins.push_back(join_async(settings));
  }
  return joins;
}

TEST_CASE("control::join_job: the coordinator's check of the names, on a thread while the barrier stays alive") {
  Job job;
  SUBCASE("the start carries the verified table to the task that asked; heartbeats go on during a check longer than the silence limit") {
    auto verify = [](const std::vector<MemberInfo>& members, Instant) -> Result<VerifiedMembers> {
      std::this_thread::sleep_for(1500ms);  // peer_silent_after is 800 ms
      auto table = members;
      for (std::size_t i = 0; i < table.size(); ++i) table[i].addresses = {"10.0.0." + std::to_string(i + 1)};
      return VerifiedMembers{table, {}};
    };
    auto joins = join_all_verified(job, verify);
    for (std::size_t i = 0; i < joins.size(); ++i) {
      auto link = joins[i].get();
      REQUIRE_MESSAGE(link, error_of(link));
      CHECK((*link)->start_info().names_verified);
      if (i == 1) {  // neither the coordinator nor one that asked
        CHECK((*link)->start_info().addresses.empty());
        continue;
      }
      REQUIRE((*link)->start_info().addresses.size() == 3);
      CHECK((*link)->start_info().addresses[2] == std::vector<std::string>{"10.0.0.3"});
    }
  }
  SUBCASE("a failed check aborts the start on every task with the DNS code and its message") {
    auto verify = [](const std::vector<MemberInfo>&, Instant) -> Result<VerifiedMembers> {
      return make_error(exit_code::peers_unresolved, "worker:1: w-1.job.svc resolves to 10.0.0.9, but the task has 127.0.0.1");
    };
    for (auto& join : join_all_verified(job, verify)) {
      auto link = join.get();
      CHECK(code_of(link) == exit_code::peers_unresolved);
      CHECK(error_of(link) ==
            "the coordinator's check of the job's names: worker:1: w-1.job.svc resolves to 10.0.0.9, but the task has 127.0.0.1");
    }
  }
  SUBCASE("any failure of the check is the DNS code for every task, its text cut to what the wire carries") {
    const std::string cause = "cannot set up the DNS resolver: " + std::string(10000, 'x');
    auto verify = [&](const std::vector<MemberInfo>&, Instant) -> Result<VerifiedMembers> {
      return make_error(exit_code::resources, cause);
    };
    auto joins = join_all_verified(job, verify);
    for (std::size_t i = 0; i < joins.size(); ++i) {
      auto link = joins[i].get();
      CHECK(code_of(link) == exit_code::peers_unresolved);
      if (i == 0) {  // the coordinator's own line has all of it
        CHECK(error_of(link) == "the coordinator's check of the job's names: " + cause);
        continue;
      }
      CHECK(error_of(link).starts_with("the coordinator's check of the job's names: cannot set up the DNS resolver: xxx"));
      CHECK(error_of(link).ends_with("xxx ... (the rest in the coordinator's log)"));
      CHECK(error_of(link).size() <= 4096);
    }
  }
  SUBCASE("without a check the table is what the tasks reported, unverified") {
    for (const auto& link : start_all(job)) CHECK_FALSE(link->start_info().names_verified);
    std::vector<std::future<JoinResult>> joins;
    for (const auto& task : job.tasks) {
      JobSettings settings = job.settings(task);
      settings.wants_table = true;
      joins.push_back(join_async(settings));
    }
    for (auto& join : joins) {
      auto link = join.get();
      REQUIRE_MESSAGE(link, error_of(link));
      REQUIRE((*link)->start_info().addresses.size() == 3);
      CHECK((*link)->start_info().addresses[1] == std::vector<std::string>{"127.0.0.1"});
    }
  }
}

TEST_CASE("control::join_job checks the environment") {
  Job job;
  SUBCASE("warn: every task starts and knows the differences") {
    auto joins = join_all(job, {{"worker:1", fingerprint("2.17.0")}});
    for (auto& join : joins) {
      auto link = join.get();
      REQUIRE_MESSAGE(link, error_of(link));
      CHECK((*link)->start_info().environment_differences ==
            std::vector<std::string>{"tensorflow: 2.16.1 on chief:0,worker:0; 2.17.0 on worker:1"});
    }
  }
  SUBCASE("fail: every task ends with the environment code, before any command") {
    job.env_check = EnvCheck::fail;
    auto joins = join_all(job, {{"worker:1", fingerprint("2.17.0")}});
    for (auto& join : joins) {
      auto link = join.get();
      CHECK(code_of(link) == exit_code::environment_mismatch);
      CHECK(error_of(link) == "environment check failed (--env-check fail): tensorflow: 2.16.1 on chief:0,worker:0; 2.17.0 on worker:1");
    }
  }
}

TEST_CASE("control::join_job at the deadline names the missing task") {
  Job job;
  job.start_timeout = 1500ms;
  auto coordinator = join_async(job.settings("chief:0"));
  auto worker = join_async(job.settings("worker:0"));
  auto coordinator_result = coordinator.get();
  auto worker_result = worker.get();
  CHECK(code_of(coordinator_result) == exit_code::start_barrier_incomplete);
  CHECK(error_of(coordinator_result) == "start barrier incomplete after 1.5s: 2/3 tasks present; missing worker:1 (never said hello)");
  // The coordinator tells the waiting tasks why, so they end with the same words at once.
  CHECK(code_of(worker_result) == exit_code::start_barrier_incomplete);
  CHECK(error_of(worker_result) == error_of(coordinator_result));

  SUBCASE("a task whose coordinator never comes says what it last saw") {
    Job lonely;
    lonely.start_timeout = 600ms;
    auto result = join_job(lonely.settings("worker:0"), fingerprint());
    CHECK(code_of(result) == exit_code::start_barrier_incomplete);
    CHECK(error_of(result).starts_with("start barrier incomplete after 0.6s: no start from the coordinator chief:0; last: 127.0.0.1:" +
                                       std::to_string(lonely.port) + ": connect: Connection refused"));
  }
}

// The coordinator and worker:0 wait for worker:1, which is played by `stranger`; everyone's
// deadline passes. Returns the stranger's result; the coordinator's is checked here.
JoinResult stranger_as_worker_1(Job& job, const JobSettings& stranger, const std::string& coordinator_sees) {
  job.start_timeout = 2s;
  auto coordinator = join_async(job.settings("chief:0"));
  auto worker = join_async(job.settings("worker:0"));
  std::this_thread::sleep_for(400ms);  // worker:0 first, so that a copy of it is the second
  auto result = join_job(stranger, fingerprint());
  auto coordinator_result = coordinator.get();
  const std::string expected = "start barrier incomplete after 2s: 2/3 tasks present; missing worker:1 " + coordinator_sees;
  INFO(error_of(coordinator_result));
  // `coordinator_sees` without its closing parenthesis is a prefix (it ends with a port).
  CHECK((coordinator_sees.ends_with(")") ? error_of(coordinator_result) == expected : error_of(coordinator_result).starts_with(expected)));
  CHECK(code_of(worker.get()) == exit_code::start_barrier_incomplete);
  return result;
}

// A task's deadline message ends "; last: <what it saw>[; earlier: <the last refusal>]".
std::string last_refusal(const JoinResult& result) {
  const std::string text = error_of(result);
  if (auto earlier = text.find("; earlier: "); earlier != std::string::npos) return text.substr(earlier + 11);
  auto last = text.find("; last: ");
  return last == std::string::npos ? text : text.substr(last + 8);
}

TEST_CASE("control::join_job refuses tasks of another job, a second live hello, and a wrong secret") {
  Job job;
  SUBCASE("another job: the task sees it in the challenge and says nothing") {
    JobSettings settings = job.settings("worker:1");
    settings.job_id = "fedcba9876543210";
    settings.start_timeout = 1s;
    auto refused = stranger_as_worker_1(job, settings, "(never said hello)");
    CHECK(code_of(refused) == exit_code::start_barrier_incomplete);
    CHECK(last_refusal(refused) == "127.0.0.1:" + std::to_string(job.port) +
                                       ": the coordinator serves job 0123456789abcdef, not ours (fedcba9876543210): another job, or a cluster of another size");
  }
  SUBCASE("a second live hello for a present task names both hosts") {
    JobSettings copy = job.settings("worker:0");
    copy.hostname = "host-copy";
    copy.start_timeout = 1s;
    auto second = stranger_as_worker_1(job, copy, "(never said hello)");
    INFO(error_of(second));
    CHECK(last_refusal(second).starts_with("127.0.0.1:" + std::to_string(job.port) +
                                           " refused us: worker:0 is already present from host 'host-worker' (127.0.0.1:"));
    CHECK(last_refusal(second).find("); refused the second hello from host 'host-copy' (127.0.0.1:") != std::string::npos);
  }
  SUBCASE("with a secret: the same secret joins") {
    job.secret = "s3cret";
    CHECK(start_all(job).size() == 3);
  }
  SUBCASE("with a secret: a wrong one is refused and named by the coordinator") {
    job.secret = "s3cret";
    JobSettings wrong = job.settings("worker:1");
    wrong.secret = "guess";
    wrong.start_timeout = 1s;
    auto refused = stranger_as_worker_1(job, wrong, "(never said hello: wrong proof of the shared secret from 127.0.0.1:");
    CHECK(last_refusal(refused) == "127.0.0.1:" + std::to_string(job.port) + " refused us: authentication failed");
  }
  SUBCASE("with a secret: a task without one is told so") {
    job.secret = "s3cret";
    JobSettings none = job.settings("worker:1");
    none.secret.reset();
    none.start_timeout = 1s;
    auto refused = stranger_as_worker_1(job, none, "(never said hello)");
    CHECK(last_refusal(refused) == "127.0.0.1:" + std::to_string(job.port) +
                                       ": the coordinator requires the shared secret; set --control-secret-file");
  }
}

TEST_CASE("control::join_job obeys only a coordinator that proved the secret and names tasks of the job") {
  Job job;
  job.secret = "s3cret";
  job.start_timeout = 1s;
  FakeCoordinator fake(job.port);
  auto task = join_async(job.settings("worker:0"));
  auto peer = fake.accept();
  const Challenge challenge{the_job_id, std::string(32, 'a'), true};
  peer->send_text(encode(challenge));
  auto message = parse_message(peer->read_line(), Sender::task);
  REQUIRE_MESSAGE(message, error_of(message));
  const Hello hello = std::get<Hello>(*message);
  // The task proves the secret first, over our nonce and its own.
  CHECK(hello.nonce.size() == 32);
  CHECK(check_hello_proof(hello, challenge, job.secret));

  SUBCASE("a wrong proof from the coordinator: its start is not obeyed") {
    peer->send_text(encode(Accepted{coordinator_proof("guess", challenge, hello), {}}));
    peer->send_text(encode(Start{true, {}, 3, false, std::nullopt}));
    auto result = task.get();
    INFO(error_of(result));
    CHECK(code_of(result) == exit_code::start_barrier_incomplete);
    CHECK(last_refusal(result) == "127.0.0.1:" + std::to_string(job.port) + ": the coordinator's proof of the shared secret is wrong");
  }
  SUBCASE("a start for a job of another size is a protocol violation") {
    peer->send_text(encode(Accepted{coordinator_proof("s3cret", challenge, hello), {}}));
    peer->send_text(encode(Start{true, {}, 10, false, std::nullopt}));
    auto result = task.get();
    INFO(error_of(result));
    CHECK(code_of(result) == exit_code::start_barrier_incomplete);
    CHECK(last_refusal(result) == "127.0.0.1:" + std::to_string(job.port) + ": protocol violation: the start counts 10 tasks, this job has 3");
  }
  SUBCASE("with the right proof the start is obeyed") {
    peer->send_text(encode(Accepted{coordinator_proof("s3cret", challenge, hello), {}}));
    peer->send_text(encode(Start{true, {"tensorflow: x"}, 3, false, std::nullopt}));
    auto result = task.get();
    REQUIRE_MESSAGE(result, error_of(result));
    CHECK((*result)->start_info().environment_differences == std::vector<std::string>{"tensorflow: x"});
  }
}

TEST_CASE("control::join_job is not stalled by strangers on the port") {
  Job job;
  job.start_timeout = 4s;
  auto coordinator = join_async(job.settings("chief:0"));
  RawClient silent(job.port);                    // connects and says nothing
  RawClient junk(job.port);                      // not JSON
  RawClient huge(job.port);                      // a line over 64 KiB
  RawClient early(job.port);                     // a message other than hello
  junk.send_text("GET / HTTP/1.1\r\n\r\n");
  huge.send_text(std::string(max_task_message + 10, 'x'));
  early.send_text(encode(Exit{0}));
  std::vector<std::future<JoinResult>> workers;
  for (const char* task : {"worker:0", "worker:1"}) workers.push_back(join_async(job.settings(task)));
  auto started = coordinator.get();
  REQUIRE_MESSAGE(started, error_of(started));
  for (auto& worker : workers) CHECK(worker.get().has_value());
  // Each stranger got the challenge and nothing more; the silent one was closed after the hello timeout.
  CHECK(silent.read_line().starts_with(R"({"type":"challenge","job":"0123456789abcdef","nonce":")"));
}

TEST_CASE("control::join_job: strangers' fresh connections never lock out a task that proves itself") {
  // The review's case: ~70 silent connections held open, each replaced before it is 2 s old, so
  // that none is ever old enough to be closed for room; the tasks hold the secret.
  Job job;
  job.secret = "s3cret";
  job.start_timeout = 6s;
  JobSettings coordinator_settings = job.settings("chief:0");
  coordinator_settings.hello_timeout = 10s;  // as in production: only room-making closes them
  auto coordinator = join_async(coordinator_settings);
  Stranger stranger("127.0.0.2", job.port, 80, 1500ms);
  for (int i = 0; i < 200 && stranger.held() < 67; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(stranger.held() >= 67);  // the unproven budget of this job (3 tasks + 64) is spent
  std::vector<std::future<JoinResult>> workers;
  for (const char* task : {"worker:0", "worker:1"}) workers.push_back(join_async(job.settings(task)));
  auto started = coordinator.get();
  CHECK_MESSAGE(started, error_of(started));
  for (auto& worker : workers) {
    auto joined = worker.get();
    CHECK_MESSAGE(joined, error_of(joined));
  }
}

TEST_CASE("control::join_job: a reconnect replaces the old connection, a silent task is dropped") {
  Job job;
  auto coordinator = join_async(job.settings("chief:0"));
  RawClient old_connection(job.port);
  REQUIRE(old_connection.read_line().starts_with(R"({"type":"challenge")"));
  old_connection.send_text(encode(raw_hello(job, "worker:1", "0000000000000001")));
  REQUIRE(old_connection.read_line().starts_with(R"({"type":"accepted","proof":"","progress":{"present":2,"total":3)"));

  SUBCASE("the same instance reconnecting takes over; its old connection is closed") {
    RawClient reconnected(job.port);
    REQUIRE(reconnected.read_line().starts_with(R"({"type":"challenge")"));
    reconnected.send_text(encode(raw_hello(job, "worker:1", "0000000000000001")));
    CHECK(reconnected.read_line().starts_with(R"({"type":"accepted")"));
    std::string line;
    for (int i = 0; i < 100 && !(line = old_connection.read_line()).empty();) ++i;  // waiting messages, then the end
    CHECK(line.empty());
    auto worker = join_async(job.settings("worker:0"));
    REQUIRE(worker.get().has_value());
    for (int i = 0; i < 100 && (line = reconnected.read_line()).starts_with(R"({"type":"waiting")"); ++i) {}
    CHECK(line.starts_with(R"({"type":"start","supervised":true)"));
    REQUIRE(coordinator.get().has_value());
  }
  SUBCASE("a task silent for longer than the limit is dropped, and its place is free again") {
    auto silent_since = std::chrono::steady_clock::now();
    std::string line;
    for (int i = 0; i < 100 && !(line = old_connection.read_line()).empty();) ++i;
    CHECK(std::chrono::steady_clock::now() - silent_since >= 700ms);
    std::vector<std::future<JoinResult>> workers;
    for (const char* task : {"worker:0", "worker:1"}) workers.push_back(join_async(job.settings(task)));
    auto started = coordinator.get();
    REQUIRE_MESSAGE(started, error_of(started));
    for (auto& worker : workers) {
      auto joined = worker.get();
      CHECK_MESSAGE(joined, error_of(joined));
    }
  }
}

TEST_CASE("control::JobLink after the start") {
  Job job;
  auto links = start_all(job);

  SUBCASE("the coordinator's command ends with 0: every task learns the job is done") {
    links[0]->report_exit(0);
    links[0]->finish(1s);
    for (std::size_t i : {1, 2}) {
      auto events = pump(*links[i], 2s);
      REQUIRE(events.size() == 1);
      CHECK(events[0].kind == JobEventKind::job_done);
      CHECK(events[0].message == "the coordinator chief:0 finished: the job is done");
    }
  }
  SUBCASE("a worker fails: the coordinator stops the job and every other task learns who failed") {
    links[1]->report_exit(3);
    links[1]->finish(1s);
    links[1].reset();
    auto coordinator_events = pump_all(links, 0, 2s);
    REQUIRE(coordinator_events.size() == 1);
    CHECK(coordinator_events[0].kind == JobEventKind::task_failed);
    CHECK(coordinator_events[0].task == "worker:0");
    CHECK(coordinator_events[0].status == 3);
    CHECK(coordinator_events[0].message == "worker:0 failed with status 3");
    auto events = pump_all(links, 2, 2s);
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == JobEventKind::task_failed);
    CHECK(events[0].message == "worker:0 failed with status 3");
  }
  SUBCASE("a worker finishing with 0 is not a failure") {
    links[2]->report_exit(0);
    links[2]->finish(1s);
    links[2].reset();
    CHECK(pump_all(links, 0, 1500ms).empty());  // longer than the silence limit
  }
  SUBCASE("a worker whose tfboot vanishes is lost") {
    links[2].reset();  // no exit report: the connection just closes
    auto events = pump_all(links, 0, 2s);
    REQUIRE(events.size() == 1);
    CHECK(events[0].message == "worker:1 was lost: connection closed by the peer");
    CHECK(events[0].status == -1);
  }
  SUBCASE("the coordinator vanishes: every task loses it") {
    links[0].reset();
    auto events = pump(*links[1], 2s);
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == JobEventKind::coordinator_lost);
    CHECK(events[0].message == "the coordinator chief:0 was lost: connection closed by the peer");
  }
  SUBCASE("the coordinator falls silent: lost after the silence limit") {
    links[0]->next_wakeup();  // taken back from its thread (kept_alive_until_used) and never pumped: no heartbeats
    auto start = std::chrono::steady_clock::now();
    auto events = pump(*links[1], 3s);
    auto elapsed = std::chrono::steady_clock::now() - start;
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == JobEventKind::coordinator_lost);
    CHECK(events[0].message.starts_with("the coordinator chief:0 was lost: silent for "));
    CHECK(elapsed >= 700ms);
  }
  SUBCASE("until its first use a link runs on a thread of its own: no task is lost while its supervisor is busy") {
    std::this_thread::sleep_for(1500ms);  // the silence limit is 800 ms; no link is used
    CHECK(pump(*links[1], 200ms).empty());
    CHECK(pump(*links[2], 200ms).empty());
    CHECK(pump_all(links, 0, 200ms).empty());
  }
  SUBCASE("what the thread decided before the first use is told to every task, and comes out of the first process()") {
    links[1]->report_exit(3);
    links[1]->finish(1s);
    links[1].reset();
    std::this_thread::sleep_for(1500ms);  // the coordinator's link is not used: its thread hears the exit
    auto told = pump(*links[2], 200ms);     // and has told the other task already
    REQUIRE(told.size() == 1);
    CHECK(told[0].message == "worker:0 failed with status 3");
    const auto wake = links[0]->next_wakeup();  // held events: at once
    CHECK(wake <= std::chrono::steady_clock::now());
    std::vector<pollfd> none;
    auto events = links[0]->process(none, std::chrono::steady_clock::now());
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == JobEventKind::task_failed);
    CHECK(events[0].message == "worker:0 failed with status 3");
  }
  SUBCASE("a latecomer is refused: the job already started") {
    RawClient late(job.port);
    pump(*links[0], 200ms);
    CHECK(late.read_line() == R"({"type":"refused","reason":"job already started"})");
  }
  SUBCASE("latecomers are refused a few per turn: the rest wait for the next") {
    links[0]->next_wakeup();  // taken back from its thread: the turns are this test's
    std::vector<int> late;
    for (int i = 0; i < 100; ++i) late.push_back(connect_from("127.0.0.3", job.port));
    REQUIRE(std::ranges::count(late, -1) == 0);
    std::this_thread::sleep_for(50ms);  // every connection is in the listen queue
    std::vector<pollfd> fds;
    links[0]->add_poll_fds(fds);
    REQUIRE(::poll(fds.data(), fds.size(), 1000) == 1);
    links[0]->process(fds, std::chrono::steady_clock::now());  // one turn
    std::this_thread::sleep_for(50ms);
    auto answered = std::ranges::count_if(late, [](int fd) {
      char c = 0;
      return ::recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) == 1;
    });
    CHECK(answered == 32);
    for (int fd : late) ::close(fd);
  }
  SUBCASE("a flood of connections never holds up the heartbeats") {
    // The tasks on threads of their own, as on their own hosts: a coordinator stalled by the
    // flood would be silent to them for longer than the limit (800 ms here).
    std::vector<std::future<std::vector<JobEvent>>> tasks;
    for (std::size_t i : {1, 2}) tasks.push_back(std::async(std::launch::async, [&links, i] { return pump(*links[i], 3500ms); }));
    std::atomic<bool> flooding{true};
    std::atomic<std::size_t> made{0};
    auto flood = [&] {
      while (flooding) {
        if (int fd = connect_from("127.0.0.3", job.port); fd >= 0) {
          ::close(fd);
          ++made;
        }
      }
    };
    std::vector<std::thread> flooders;
    for (int i = 0; i < 3; ++i) flooders.emplace_back(flood);
    auto during = pump(*links[0], 2s);
    flooding = false;
    for (auto& flooder : flooders) flooder.join();
    auto after = pump(*links[0], 1600ms);
    CHECK(made > 1000);
    CHECK(during.empty());
    CHECK(after.empty());
    for (auto& task : tasks) {
      auto events = task.get();
      CHECK_MESSAGE(events.empty(), events.front().message);
    }
  }
}

TEST_CASE("refusals::RefusalTally: a line at once, then one per interval with the count") {
  RefusalTally tally(10s);
  const Instant start{};
  CHECK(tally.note("a connection from 10.0.0.9:1000: job already started", start) ==
        "refused a connection from 10.0.0.9:1000: job already started");
  for (int i = 1; i < 20000; ++i) CHECK_FALSE(tally.note("a connection from 10.0.0.9:1001: job already started", start + 5s));
  CHECK(tally.note("a connection from 10.0.0.9:1002: job already started", start + 10s) ==
        "refused 20000 connections in 10s (20001 so far); the last: a connection from 10.0.0.9:1002: job already started");
  CHECK_FALSE(tally.note("a connection from 10.0.0.9:1003: job already started", start + 12s));
  CHECK(tally.note("a connection from 10.0.0.9:1004: job already started", start + 30s) ==
        "refused 2 connections in 20s (20003 so far); the last: a connection from 10.0.0.9:1004: job already started");
  CHECK(tally.total() == 20003);
}

TEST_CASE("control::join_job in exec mode: the links after the start are inert") {
  Job job;
  std::vector<std::future<JoinResult>> joins;
  for (const auto& task : job.tasks) {
    JobSettings settings = job.settings(task);
    settings.supervise = task != "chief:0";  // the coordinator exec's its command
    joins.push_back(join_async(settings));
  }
  std::vector<std::unique_ptr<JobLink>> links;
  for (auto& join : joins) links.push_back(std::move(join.get().value()));
  links[0].reset();
  CHECK_FALSE(links[1]->start_info().coordinator_supervises);
  CHECK(pump(*links[1], 300ms).empty());
  std::vector<pollfd> fds;
  links[1]->add_poll_fds(fds);
  CHECK(fds.empty());
}

TEST_CASE("control::join_job: a coordinator whose port is taken ends with the resources code") {
  Job job;
  FakeCoordinator taken(job.port);
  auto result = join_job(job.settings("chief:0"), fingerprint());
  CHECK(code_of(result) == exit_code::resources);
  CHECK(error_of(result) == "--control-port " + std::to_string(job.port) + ": cannot listen: Address already in use");
}

TEST_CASE("control::check_job_settings") {
  Job job;
  JobSettings settings = job.settings("worker:0");
  CHECK(check_job_settings(settings));
  settings.port = 0;
  CHECK(error_of(check_job_settings(settings)) == "--control-port 0 is outside 1..65535");
  settings = job.settings("worker:0");
  settings.self = member("worker:7");
  CHECK(error_of(check_job_settings(settings)) == "task worker:7 is not in the cluster");
  settings = job.settings("worker:0");
  settings.coordinator_addresses = nullptr;
  CHECK(code_of(join_job(settings, fingerprint())) == exit_code::usage);
}

}  // namespace tfboot
