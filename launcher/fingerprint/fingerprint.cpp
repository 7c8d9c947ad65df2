// A task's environment fingerprint, pure: the field table, the JSON form and the comparison
// across tasks. Reading it from the files of the image is fingerprint/read.cpp.
#include "fingerprint/fingerprint.h"

#include <algorithm>
#include <charconv>
#include <map>

#include <nlohmann/json.hpp>

namespace tfboot {

const std::array<FingerprintField, 13> fingerprint_fields{{
    {"tensorflow", &Fingerprint::tensorflow, true, false},
    {"torch", &Fingerprint::torch, true, false},
    {"jax", &Fingerprint::jax, true, false},
    {"jaxlib", &Fingerprint::jaxlib, true, false},
    {"python", &Fingerprint::python, true, false},
    {"cuda", &Fingerprint::cuda, true, false},
    {"cudnn", &Fingerprint::cudnn, true, false},
    {"nccl", &Fingerprint::nccl, true, false},
    {"nvidia_driver", &Fingerprint::nvidia_driver, true, true},
    {"gpus", &Fingerprint::gpus, true, true},
    {"gpu_count", &Fingerprint::gpu_count, false, true},
    {"visible_devices", &Fingerprint::visible_devices, false, true},
    {"distributions", &Fingerprint::distributions, true, false},
}};

std::string clean_fingerprint_value(std::string_view text) {
  std::string value;
  for (char c : text) {
    if (value.size() == max_fingerprint_value) break;
    if (c >= 0x20 && c < 0x7f) value += c;
  }
  while (!value.empty() && value.back() == ' ') value.pop_back();
  while (!value.empty() && value.front() == ' ') value.erase(0, 1);
  return value.empty() ? std::string(fingerprint_absent) : value;
}

std::string to_json(const Fingerprint& fingerprint) {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  for (const auto& field : fingerprint_fields) json[std::string(field.name)] = fingerprint.*field.member;
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Fingerprint fingerprint_from_json(std::string_view text) {
  Fingerprint fingerprint;
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return fingerprint;
  for (const auto& field : fingerprint_fields) {
    auto it = json.find(std::string(field.name));
    if (it != json.end() && it->is_string()) fingerprint.*field.member = clean_fingerprint_value(it->get_ref<const std::string&>());
  }
  return fingerprint;
}

namespace {

// "worker:0,worker:1,worker:2,ps:0" -> "worker:0..2,ps:0": readable for thousands of tasks. At
// most `shown` runs are written, then "and N more": a line stays short however the tasks differ.
std::string join_tasks(const std::vector<std::string>& tasks, std::size_t shown) {
  std::string text;
  std::size_t runs = 0;
  for (std::size_t i = 0; i < tasks.size();) {
    if (runs == shown) return text + " and " + std::to_string(tasks.size() - i) + " more";
    ++runs;
    auto colon = tasks[i].rfind(':');
    int index = -1;
    if (colon != std::string::npos) {
      const char* digits = tasks[i].data() + colon + 1;
      const char* end = tasks[i].data() + tasks[i].size();
      if (auto [stop, error] = std::from_chars(digits, end, index); error != std::errc() || stop != end) index = -1;
    }
    std::size_t run = 1;
    while (index >= 0 && i + run < tasks.size() &&
           tasks[i + run] == tasks[i].substr(0, colon + 1) + std::to_string(index + static_cast<int>(run))) {
      ++run;
    }
    text += text.empty() ? "" : ",";
    if (run >= 3) {
      text += tasks[i] + ".." + tasks[i + run - 1].substr(colon + 1);
      i += run;
    } else {
      text += tasks[i];
      i += 1;
    }
  }
  return text;
}

// A line names at most this many values, each with at most this many runs of tasks.
constexpr std::size_t shown_values = 8;
constexpr std::size_t shown_runs = 16;

}  // namespace

std::vector<std::string> compare_fingerprints(const std::vector<std::pair<std::string, Fingerprint>>& by_task) {
  std::vector<std::string> lines;
  for (const auto& field : fingerprint_fields) {
    if (!field.compared) continue;
    std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // value -> tasks, first seen first
    std::map<std::string_view, std::size_t> group_of;                       // value -> its place in groups
    for (const auto& [task, fingerprint] : by_task) {
      const std::string& value = fingerprint.*field.member;
      if (field.absent_is_fine && value == fingerprint_absent) continue;
      auto [group, added] = group_of.try_emplace(value, groups.size());
      if (added) groups.push_back({value, {}});
      groups[group->second].second.push_back(task);
    }
    if (groups.size() < 2) continue;
    std::string line = std::string(field.name) + ": ";
    std::size_t others = 0;
    for (std::size_t i = 0; i < groups.size(); ++i) {
      if (i < shown_values) line += (i ? "; " : "") + groups[i].first + " on " + join_tasks(groups[i].second, shown_runs);
      else others += groups[i].second.size();
    }
    if (groups.size() > shown_values) {
      line += "; " + std::to_string(groups.size() - shown_values) + " other values on " + std::to_string(others) + " tasks";
    }
    lines.push_back(line);
  }
  return lines;
}

int accelerator_count(const Fingerprint& fingerprint) {
  int count = 0;
  const std::string& text = fingerprint.gpu_count;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
  return error == std::errc{} && end == text.data() + text.size() && count > 0 ? count : 0;
}

}  // namespace tfboot
