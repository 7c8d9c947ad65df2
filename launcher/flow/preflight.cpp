// The preflight step: the log root's and checkpoint dir's write, fsync and free room, the GPUs' devices; the figures in the log and startup.json.
#include "flow/preflight.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/files.h"
#include "base/log.h"
#include "base/text.h"
#include "base/unique_fd.h"

namespace tfboot {
namespace {

// The log root if it is a directory, else its nearest existing parent ("" when none is).
std::string nearest_directory(std::string path) {
  while (!path.empty()) {
    struct stat status{};
    if (::stat(path.c_str(), &status) == 0) return S_ISDIR(status.st_mode) ? path : "";
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return "";
}

// A write the size of a few log lines: enough to find a full or read-only file system.
constexpr std::size_t probe_bytes = 4096;

std::string write_probe(const std::string& directory) {
  // A fresh random name (O_EXCL): tasks that share a log root, each PID 1 of its container, and a
  // probe left by a killed tfboot never stand in each other's way.
  std::string path = directory + (directory.ends_with('/') ? "" : "/") + ".tfboot-preflight.XXXXXX";
  UniqueFd fd(::mkostemp(path.data(), O_CLOEXEC));
  if (!fd) return std::strerror(errno);
  const std::string bytes(probe_bytes, '\n');
  std::string problem;
  const ssize_t written = ::write(fd.get(), bytes.data(), bytes.size());
  if (written < 0) problem = std::strerror(errno);
  else if (static_cast<std::size_t>(written) != bytes.size()) problem = "a short write";
  else if (::fsync(fd.get()) != 0) problem = std::strerror(errno);
  fd.reset();
  ::unlink(path.c_str());  // nothing left behind, whatever happened
  return problem;
}

bool is_url(const std::string& path) { return path.find("://") != std::string::npos; }

// A node lists at most a few dozen GPUs; more is no driver's listing, and the hello stays small.
constexpr std::size_t max_listed_gpus = 64;

struct ListedGpu {
  std::string bus;     // the listing's directory name, "0000:3b:00.0"
  std::string device;  // "/dev/nvidia2"
};

// Every GPU the driver lists with its "Device Minor:", in the listing's order by name.
std::vector<ListedGpu> listed_gpus(const std::string& listing, const std::string& devices) {
  std::vector<std::string> buses;
  std::error_code error;
  for (std::filesystem::directory_iterator it(listing, error), end; !error && it != end; it.increment(error)) {
    if (buses.size() < max_listed_gpus) buses.push_back(it->path().filename().string());
  }
  std::sort(buses.begin(), buses.end());
  std::vector<ListedGpu> gpus;
  for (const auto& bus : buses) {
    const auto information = read_text_file(listing + "/" + bus + "/information", 4096);
    if (!information) continue;
    for (std::string_view line : lines(*information)) {
      if (!line.starts_with("Device Minor:")) continue;  // an older driver says nothing of its device
      std::string_view minor = line.substr(13);
      minor.remove_prefix(std::min(minor.find_first_not_of(" \t"), minor.size()));
      minor = minor.substr(0, minor.find_last_not_of(" \t\r") + 1);
      if (!minor.empty() && minor.size() <= 6 && minor.find_first_not_of("0123456789") == std::string_view::npos) {
        gpus.push_back({bus, devices + "/nvidia" + std::string(minor)});
      }
      break;
    }
  }
  return gpus;
}

// 0 when the device opens, else the errno of its open.
int open_errno(const std::string& device) {
  while (true) {
    UniqueFd fd(::open(device.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK));
    if (fd) return 0;
    if (errno != EINTR) return errno;
  }
}

// What the driver answers for a GPU it lost. Anything else (absent, not permitted: another
// container's GPU; out of descriptors or memory: tfboot's own trouble) says nothing of the GPU.
bool gpu_does_not_answer(int error) { return error == ENXIO || error == ENODEV || error == EIO; }

}  // namespace

GpuFigures check_gpus(const std::string& listing, const std::string& devices, std::chrono::milliseconds deadline) {
  // The listing and every open run on threads of their own, all against one deadline: a GPU the
  // driver lost can hold a read or an open() past any bound (without persistence mode a healthy
  // GPU's first open takes a while too, so each has its own thread). The threads own what they
  // touch; one still blocked at the deadline finishes alone.
  struct Progress {
    std::mutex mutex;
    std::condition_variable changed;
    bool listed = false;
    std::vector<ListedGpu> gpus;
    std::vector<std::optional<int>> errors;  // by GPU: its open's errno, once it returned
    std::size_t done = 0;
  };
  auto progress = std::make_shared<Progress>();
  const auto until = std::chrono::steady_clock::now() + deadline;
  auto start_thread = [](auto work) {
    try {
      std::thread(std::move(work)).detach();
      return true;
    } catch (const std::system_error& error) {
      log::warn("preflight: no thread to check the GPUs ({}); their devices not opened", error.what());
      return false;
    }
  };
  const bool started = start_thread([progress, listing, devices] {
    std::vector<ListedGpu> gpus = listed_gpus(listing, devices);
    const std::lock_guard lock(progress->mutex);
    progress->gpus = std::move(gpus);
    progress->errors.assign(progress->gpus.size(), std::nullopt);
    progress->listed = true;
    progress->changed.notify_all();
  });
  GpuFigures figures;
  if (!started) return figures;
  std::unique_lock lock(progress->mutex);
  if (!progress->changed.wait_until(lock, until, [&] { return progress->listed; })) {
    figures.silent.push_back(fmt::format("the driver's GPU listing {} did not answer within {} ms", listing, deadline.count()));
    return figures;
  }
  for (std::size_t i = 0; i < progress->gpus.size(); ++i) {
    const bool opened = start_thread([progress, i, device = progress->gpus[i].device] {
      const int error = open_errno(device);
      const std::lock_guard done_lock(progress->mutex);
      progress->errors[i] = error;
      ++progress->done;
      progress->changed.notify_all();
    });
    if (!opened) {
      progress->errors[i] = 0;  // not checked: counted as neither
      ++progress->done;
    }
  }
  progress->changed.wait_until(lock, until, [&] { return progress->done == progress->gpus.size(); });
  for (std::size_t i = 0; i < progress->gpus.size(); ++i) {
    const ListedGpu& gpu = progress->gpus[i];
    const std::optional<int>& error = progress->errors[i];
    if (!error) {
      figures.silent.push_back(fmt::format("GPU {} is listed by the driver but does not answer ({} did not open within {} ms)", gpu.bus,
                                           gpu.device, deadline.count()));
    } else if (gpu_does_not_answer(*error)) {
      figures.silent.push_back(fmt::format("GPU {} is listed by the driver but does not answer ({}: {})", gpu.bus, gpu.device, std::strerror(*error)));
    } else if (*error == 0) {
      ++figures.answering;
    }
  }
  return figures;
}

DirectoryFigures check_directory(const std::string& directory) {
  const auto began = std::chrono::steady_clock::now();
  DirectoryFigures figures;
  figures.path = nearest_directory(directory);
  if (figures.path.empty()) {
    figures.path = directory;
    figures.problem = "neither it nor a parent is a directory";
    return figures;
  }
  figures.problem = write_probe(figures.path);
  struct statvfs room{};
  if (::statvfs(figures.path.c_str(), &room) == 0) {
    figures.free_mib = static_cast<std::int64_t>(room.f_bavail) * static_cast<std::int64_t>(room.f_frsize) / (1024 * 1024);
  }
  figures.write_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
  return figures;
}

PreflightRecord check_this_node(const Options& options, const Fingerprint& own) {
  const auto began = std::chrono::steady_clock::now();
  PreflightRecord record;
  record.level = options.preflight == PreflightLevel::network ? "network" : "quick";
  record.node.log_root = check_directory(options.log_root ? options.log_root->value : "/logs");
  if (options.checkpoint_dir) {
    if (is_url(options.checkpoint_dir->value)) record.checkpoint_dir_unchecked = options.checkpoint_dir->value;
    else record.node.checkpoint_dir = check_directory(options.checkpoint_dir->value);
  }
  record.accelerators = accelerator_count(own);
  GpuFigures gpus = check_gpus();
  record.accelerators_answering = gpus.answering;
  record.node.silent_gpus = std::move(gpus.silent);
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return record;
}

Result<void> judge_alone(const PreflightRecord& record, const std::string& task, const std::string& host) {
  const std::string type = task.substr(0, task.find(':'));
  const PreflightVerdict verdict = judge_preflight({{task, type, host, record.node, std::nullopt, record.accelerators}}, PreflightBounds{});
  if (verdict.passed()) return {};
  return make_error(exit_code::preflight_refused, preflight_refusal_message(verdict));
}

namespace {

nlohmann::ordered_json directory_json(const DirectoryFigures& directory) {
  return {{"path", directory.path}, {"writable", directory.problem.empty()}, {"write_ms", directory.write_ms}, {"free_mib", directory.free_mib}};
}

}  // namespace

std::string preflight_json(const PreflightRecord& record) {
  nlohmann::ordered_json out;
  out["level"] = record.level;
  out["verdict"] = "passed";  // a refused start writes no startup.json
  out["seconds"] = record.seconds;
  out["log_root"] = directory_json(record.node.log_root);
  if (record.node.checkpoint_dir) {
    out["checkpoint_dir"] = directory_json(*record.node.checkpoint_dir);
  } else if (!record.checkpoint_dir_unchecked.empty()) {
    out["checkpoint_dir"] = {{"path", record.checkpoint_dir_unchecked}, {"checked", false}};
  }
  out["accelerators"] = record.accelerators;
  out["accelerators_answering"] = record.accelerators_answering;
  out["clock_offset_ms"] = record.clock_offset_ms ? nlohmann::ordered_json(*record.clock_offset_ms) : nlohmann::ordered_json();
  const PreflightBounds bounds;
  out["bounds"] = {{"max_clock_offset_ms", bounds.max_clock_offset_ms}, {"min_free_mib", bounds.min_free_mib}};
  if (record.level == "network") {
    nlohmann::ordered_json network;  // null: no links to measure (a task alone, or a restart in place)
    if (record.network) {
      const NetworkSummary& figures = *record.network;
      auto figure = [](const std::optional<double>& value) { return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(); };
      network = {{"seconds", figures.seconds},
                 {"links", figures.links},
                 {"median_bits_per_second", figure(figures.median_bits_per_second)},
                 {"median_rtt_ms", figure(figures.median_rtt_ms)},
                 {"warnings", figures.warnings},
                 {"bounds", {{"warn_below", record.network_bounds.warn_below}, {"refuse_below", record.network_bounds.refuse_below}}}};
    }
    out["network"] = network;
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void log_preflight(const PreflightRecord& record) {
  const DirectoryFigures& logs = record.node.log_root;
  std::string checkpoint;
  if (record.node.checkpoint_dir) {
    const DirectoryFigures& dir = *record.node.checkpoint_dir;
    checkpoint = fmt::format(", checkpoint dir {} writable ({:.1f} ms, {} MiB free)", dir.path, dir.write_ms, dir.free_mib);
  } else if (!record.checkpoint_dir_unchecked.empty()) {
    checkpoint = ", checkpoint dir " + record.checkpoint_dir_unchecked + " not checked (not a local path)";
  }
  log::info("preflight passed: log root {} writable ({:.1f} ms, {} MiB free){}, {} accelerators ({} answering), clock {}",
            logs.path, logs.write_ms, logs.free_mib, checkpoint, record.accelerators, record.accelerators_answering,
            record.clock_offset_ms ? std::to_string(*record.clock_offset_ms) + " ms off the coordinator's" : "not compared (no coordinator)");
  if (record.network) {
    const NetworkSummary& figures = *record.network;
    log::info("preflight passed the network: {} links in {:.1f} s, median {}, round trip {}", figures.links, figures.seconds,
              figures.median_bits_per_second ? gbits_text(*figures.median_bits_per_second) : "none",
              figures.median_rtt_ms ? fmt::format("{:.3g} ms", *figures.median_rtt_ms) : "none");
  }
}

}  // namespace tfboot
