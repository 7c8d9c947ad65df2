// Small text helpers that every layer uses (text.h).
#include "base/text.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tfboot {

std::string counted(std::size_t count, std::string_view noun) {
  const bool sibilant = noun.ends_with("s") || noun.ends_with("x") || noun.ends_with("sh") || noun.ends_with("ch");
  return std::to_string(count) + " " + std::string(noun) + (count == 1 ? "" : sibilant ? "es" : "s");
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string signal_name(int signal_number) {
  const char* abbreviation = ::sigabbrev_np(signal_number);
  return abbreviation ? "SIG" + std::string(abbreviation) : "signal " + std::to_string(signal_number);
}

std::string join_host_port(std::string_view host, int port) {
  std::string text = host.find(':') != std::string_view::npos ? "[" + std::string(host) + "]" : std::string(host);
  return text + ":" + std::to_string(port);
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    std::size_t end = text.find(separator);
    parts.push_back(text.substr(0, end));
    if (end == std::string_view::npos) return parts;
    text.remove_prefix(end + 1);
  }
}

std::vector<std::string_view> split_non_empty(std::string_view text, char separator) {
  std::vector<std::string_view> parts = split(text, separator);
  std::erase_if(parts, [](std::string_view part) { return part.empty(); });
  return parts;
}

std::string joined(const std::vector<std::string>& parts, std::string_view separator) {
  std::string text;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) text += separator;
    text += parts[i];
  }
  return text;
}

std::vector<std::string_view> lines(std::string_view text) {
  std::vector<std::string_view> parts = split(text, '\n');
  if (parts.back().empty()) parts.pop_back();  // after the last '\n', or "" itself
  return parts;
}

}  // namespace tfboot
