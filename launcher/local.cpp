// `tfboot local`: every task of --cluster as a process on this machine (SPEC §8).
#include "local.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>
#include "log.h"

#include "cluster.h"
#include "files.h"
#include "identity.h"
#include "process.h"
#include "startup.h"
#include "tf_config.h"
#include "version.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

// After the first stop request (or the first failure) the tasks get this long to end before
// they are killed.
constexpr auto grace_period = 10s;

// Free ports on 127.0.0.1: every socket stays bound until all are chosen so no two tasks share one.
Result<std::vector<int>> choose_free_ports(std::size_t count) {
  std::vector<int> sockets, ports;
  auto close_all = [&] {
    for (int fd : sockets) ::close(fd);
  };
  for (std::size_t i = 0; i < count; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      int saved = errno;
      if (fd >= 0) ::close(fd);
      close_all();
      return make_error(1, std::string("cannot find a free port on 127.0.0.1: ") + std::strerror(saved));
    }
    sockets.push_back(fd);
    ports.push_back(ntohs(address.sin_port));
  }
  close_all();
  return ports;
}

struct Task {
  TaskType type;
  int index;
  std::string label;  // "[worker:0] "
  pid_t pid = -1;
  int out = -1, err = -1;  // read ends of the task's stdout and stderr
  std::string out_partial, err_partial;
  std::optional<int> status;
};

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// Copies whole lines from a task's pipe to ours, each prefixed with the task's label.
bool pump(int& fd, std::string& partial, const std::string& label, int target) {
  char buffer[8192];
  ssize_t n = ::read(fd, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    if (!partial.empty()) write_all(target, label + partial + "\n");
    partial.clear();
    ::close(fd);
    fd = -1;
    return false;
  }
  partial.append(buffer, static_cast<std::size_t>(n));
  std::size_t start = 0;
  std::string lines;
  for (std::size_t newline; (newline = partial.find('\n', start)) != std::string::npos; start = newline + 1) {
    lines += label + partial.substr(start, newline - start + 1);
  }
  partial.erase(0, start);
  write_all(target, lines);
  return true;
}

std::vector<std::string> task_environment(const Environment& env, const std::string& tf_config, const std::string& log_dir,
                                          const Task& task) {
  Environment copy = env;
  copy["TF_CONFIG"] = tf_config;
  copy["TFBOOT_LOG_DIR"] = log_dir;
  copy["TFBOOT_TASK_TYPE"] = std::string(to_string(task.type));
  copy["TFBOOT_TASK_INDEX"] = std::to_string(task.index);
  std::vector<std::string> entries;
  for (const auto& [key, value] : copy) entries.push_back(key + "=" + value);
  return entries;
}

}  // namespace

Result<int> run_local(const Options& options, const Environment& env) {
  Setting cluster_setting = options.cluster.value_or(Setting{"worker=2", "default cluster"});
  auto spec = parse_cluster_spec(cluster_setting);
  if (!spec) return std::unexpected(spec.error());
  const std::vector<std::string>& command = options.command.empty() ? default_command : options.command;
  std::string log_root = options.log_root ? options.log_root->value : "./logs";

  std::vector<Task> tasks;
  for (TaskType type : all_task_types) {
    for (int index = 0; index < spec->count(type); ++index) {
      tasks.push_back(Task{.type = type, .index = index, .label = "[" + std::string(to_string(type)) + ":" + std::to_string(index) + "] "});
    }
  }
  auto ports = choose_free_ports(tasks.size());
  if (!ports) return std::unexpected(ports.error());
  std::vector<PeerAddress> peers;
  std::vector<std::string> addresses;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    peers.push_back(PeerAddress{tasks[i].type, tasks[i].index, "127.0.0.1", (*ports)[i], false});
    addresses.push_back("127.0.0.1:" + std::to_string((*ports)[i]));
  }

  // Everything is written before anything starts, so an error leaves no task running.
  const double now_seconds = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::vector<std::string> tf_configs, log_dirs;
  for (const Task& task : tasks) {
    TfConfig config = build_tf_config(peers, addresses, task.type, task.index, options.evaluator_in_cluster);
    if (auto valid = validate_tf_config(config, "generated TF_CONFIG"); !valid) return std::unexpected(valid.error());
    std::string log_dir = log_root + "/" + std::string(to_string(task.type)) + "_" + std::to_string(task.index);
    if (auto made = make_directories(log_dir); !made) return std::unexpected(made.error());
    tf_configs.push_back(to_json(config));
    log_dirs.push_back(log_dir);
    if (auto written = write_file_atomically(log_dir + "/tf_config.json", tf_configs.back() + "\n"); !written) {
      return std::unexpected(written.error());
    }
    StartupReport report{TFBOOT_VERSION_STRING, Identity{task.type, task.index, "tfboot local"}, "127.0.0.1", peers, {}, {},
                         {}, tf_configs.back(), nlohmann::json(command).dump(), now_seconds, 0, now_seconds};
    std::string startup_path = log_dir + "/startup.json";
    if (auto written = write_file_atomically(startup_path, build_startup_json(report, read_text_file(startup_path).value_or("")));
        !written) {
      return std::unexpected(written.error());
    }
  }

  sigset_t handled;
  sigemptyset(&handled);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&handled, signal_number);
  sigset_t original_mask;
  ::sigprocmask(SIG_BLOCK, &handled, &original_mask);
  int signals = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);

  log::info("starting {} tasks of {} on 127.0.0.1; logs under {}", tasks.size(), cluster_setting.value, log_root);
  auto argv = make_argv(command);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    Task& task = tasks[i];
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
      return make_error(1, std::string("cannot create pipes for the tasks: ") + std::strerror(errno));
    }
    auto environment = task_environment(env, tf_configs[i], log_dirs[i], task);
    std::vector<char*> envp;
    for (auto& entry : environment) envp.push_back(entry.data());
    envp.push_back(nullptr);
    task.pid = ::fork();
    if (task.pid == 0) {
      ::setpgid(0, 0);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      ::sigprocmask(SIG_SETMASK, &original_mask, nullptr);
      ::execvpe(argv[0], argv.data(), envp.data());
      int saved = errno;
      write_all(STDERR_FILENO, "tfboot: " + exec_failure_message(command[0], saved) + "\n");
      ::_exit(exec_failure_code(saved));
    }
    ::close(out[1]);
    ::close(err[1]);
    task.out = out[0];
    task.err = err[0];
    if (task.pid < 0) {
      int saved = errno;
      for (const Task& started : tasks) {
        if (started.pid > 0) ::kill(-started.pid, SIGKILL);
      }
      for (const Task& started : tasks) {
        if (started.pid > 0) ::waitpid(started.pid, nullptr, 0);
      }
      return make_error(exit_code::not_executable, std::string("cannot start task ") + task.label + "fork failed: " + std::strerror(saved));
    }
    ::setpgid(task.pid, task.pid);
  }

  std::optional<int> first_failure;
  std::optional<int> stop_signal;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  auto stop_all = [&](int signal_number) {
    for (const Task& task : tasks) {
      if (!task.status) ::kill(-task.pid, signal_number);
    }
    if (!kill_at) kill_at = std::chrono::steady_clock::now() + grace_period;
  };
  // Until every task has ended, then a short while for output still in the pipes (a daemon
  // left behind by a task may hold them open for ever).
  auto running = [&] { return std::ranges::any_of(tasks, [](const Task& t) { return !t.status; }); };
  auto output_open = [&] { return std::ranges::any_of(tasks, [](const Task& t) { return t.out >= 0 || t.err >= 0; }); };
  std::optional<std::chrono::steady_clock::time_point> drain_until;

  while (running() || (output_open() && std::chrono::steady_clock::now() < *drain_until)) {
    std::vector<pollfd> fds{{signals, POLLIN, 0}};
    for (const Task& task : tasks) {
      if (task.out >= 0) fds.push_back({task.out, POLLIN, 0});
      if (task.err >= 0) fds.push_back({task.err, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 500);
    for (Task& task : tasks) {
      for (const pollfd& entry : fds) {
        if (!(entry.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (entry.fd == task.out && task.out >= 0) pump(task.out, task.out_partial, task.label, STDOUT_FILENO);
        else if (entry.fd == task.err && task.err >= 0) pump(task.err, task.err_partial, task.label, STDERR_FILENO);
      }
    }
    signalfd_siginfo info{};
    while (::read(signals, &info, sizeof info) == sizeof info) {
      if (info.ssi_signo == SIGCHLD) continue;
      log::info("signal {}: stopping all tasks", info.ssi_signo);
      if (!stop_signal) stop_signal = static_cast<int>(info.ssi_signo);
      stop_all(static_cast<int>(info.ssi_signo));
    }
    for (Task& task : tasks) {
      int status = 0;
      if (task.status || ::waitpid(task.pid, &status, WNOHANG) != task.pid) continue;
      task.status = status_to_exit_code(status);
      log::info("{}exited with status {}", task.label, *task.status);
      if (*task.status != 0 && !first_failure && !stop_signal) {
        first_failure = *task.status;
        log::error("{}failed; stopping the other tasks", task.label);
        stop_all(SIGTERM);
      }
    }
    if (!running() && !drain_until) drain_until = std::chrono::steady_clock::now() + 1s;
    if (kill_at && std::chrono::steady_clock::now() >= *kill_at) {
      for (Task& task : tasks) {
        if (!task.status) ::kill(-task.pid, SIGKILL);
      }
    }
  }
  for (Task& task : tasks) {
    for (int* fd : {&task.out, &task.err}) {
      if (*fd >= 0) ::close(*fd);
    }
  }
  ::close(signals);
  ::sigprocmask(SIG_SETMASK, &original_mask, nullptr);
  if (first_failure) return *first_failure;
  if (stop_signal) return exit_code::signal_base + *stop_signal;
  log::info("all {} tasks succeeded; logs under {}", tasks.size(), log_root);
  return exit_code::ok;
}

}  // namespace tfboot
