// The task's log dir, its files and its environment.
#include "task/task_files.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "base/files.h"
#include "base/log.h"

namespace tfboot {
namespace {

// Reads an earlier startup.json, if any; one too large to read is damage too.
PreviousStarts previous_starts_in(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return {};
  auto text = read_text_file(path, max_previous_startup_json);
  if (!text) return PreviousStarts{.damage = "not a regular file of at most 1 MiB"};
  return read_previous_starts(text);
}

// Kept for whoever wants to look at it: tfboot never deletes anything in the log dir.
std::string set_aside(const std::string& path, const std::string& damage) {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string aside = path + ".damaged." + std::to_string(now);
  std::string warning = "earlier " + path + " set aside as " + aside + ": " + damage;
  if (std::rename(path.c_str(), aside.c_str()) != 0) warning = "earlier " + path + " is damaged (" + damage + "); overwritten";
  log::warn("{}", warning);
  return warning;
}

}  // namespace

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string task_log_dir(const std::string& log_root, TaskType type, int index) {
  return log_root + "/" + std::string(to_string(type)) + "_" + std::to_string(index);
}

Result<TaskFiles> write_task_files(const std::string& log_dir, StartupReport report) {
  auto created = make_directories(log_dir);
  if (!created) return std::unexpected(created.error());
  const std::string startup_path = log_dir + "/startup.json";
  PreviousStarts previous = previous_starts_in(startup_path);
  std::optional<std::string> aside_warning;
  if (previous.damage) aside_warning = set_aside(startup_path, *previous.damage);
  if (aside_warning) report.warnings.push_back(*aside_warning);
  StartupText text = render_startup_json(report, previous);
  auto written = write_files_atomically({{log_dir + "/tf_config.json", report.tf_config + "\n"},
                                         {startup_path, startup_json_with_end(text, report.end)}});
  if (!written) {
    remove_created_directories(*created);
    return std::unexpected(written.error());
  }
  std::error_code error;
  std::string absolute = std::filesystem::absolute(startup_path, error).lexically_normal().string();
  return TaskFiles{error ? startup_path : absolute, std::move(text), std::move(previous)};
}

Result<void> record_task_end(const TaskFiles& files, TaskEnd end) {
  end.ended_at = unix_seconds();
  return write_file_atomically(files.startup_path, startup_json_with_end(files.text, end));
}

std::array<std::string, 3> startup_json_around_the_end(const TaskFiles& files, TaskEnd end) {
  // A moment no real end has (2100-01-01T00:00:00.5Z), rendered as any other, then cut out.
  constexpr std::string_view number = "4102444800.5";
  constexpr std::string_view iso = "\"2100-01-01T00:00:00.500Z\"";
  end.ended_at = 4102444800.5;
  const std::string text = startup_json_with_end(files.text, end);
  const auto at_number = text.find(number);
  const auto at_iso = text.find(iso);
  if (at_number == std::string::npos || at_iso == std::string::npos || at_iso < at_number) return {};
  return {text.substr(0, at_number), text.substr(at_number + number.size(), at_iso + 1 - at_number - number.size()),
          text.substr(at_iso + iso.size() - 1)};
}

std::vector<std::string> task_environment(const std::vector<std::string>& inherited, const std::string& tf_config,
                                          const std::string& log_dir, TaskType type, int index,
                                          const std::vector<std::string>& extra) {
  std::vector<std::string> ours{"TFBOOT_LOG_DIR=" + log_dir, "TFBOOT_TASK_TYPE=" + std::string(to_string(type)),
                                "TFBOOT_TASK_INDEX=" + std::to_string(index)};
  if (!tf_config.empty()) ours.insert(ours.begin(), "TF_CONFIG=" + tf_config);
  ours.insert(ours.end(), extra.begin(), extra.end());
  std::vector<std::string> environment;
  environment.reserve(inherited.size() + ours.size());
  for (const auto& entry : inherited) {
    bool replaced = false;
    for (const auto& own : ours) replaced = replaced || entry.starts_with(own.substr(0, own.find('=') + 1));
    if (!replaced) environment.push_back(entry);
  }
  environment.insert(environment.end(), ours.begin(), ours.end());
  return environment;
}

}  // namespace tfboot
