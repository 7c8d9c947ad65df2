// Slurm's compact lists: host names ("gpu[07-08],cpu1") and tasks per node ("2,1(x2)").
#include "plan/platforms/slurm_hostlist.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

#include "base/text.h"

namespace tfboot {
namespace {

std::unexpected<Error> too_many(const Setting& setting, std::string_view what) {
  return usage_error(quoted(setting) + " gives more than " + std::to_string(max_slurm_hosts) + " " + std::string(what));
}

// Decimal digits only, leading zeros allowed (they set a range's width); at most 9 digits.
std::optional<unsigned long> parse_number(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  unsigned long value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string zero_padded(unsigned long number, std::size_t width) {
  std::string text = std::to_string(number);
  if (text.size() < width) text.insert(0, width - text.size(), '0');
  return text;
}

// What one bracket stands for: "07-08,11" gives 07, 08, 11. Each range is padded to the width of
// its first number, as Slurm writes them.
Result<std::vector<std::string>> bracket_numbers(std::string_view inside, const Setting& setting) {
  std::vector<std::string> numbers;
  for (std::string_view range : split(inside, ',')) {
    std::size_t dash = range.find('-');
    std::string_view first_text = range.substr(0, dash);
    std::string_view last_text = dash == std::string_view::npos ? first_text : range.substr(dash + 1);
    auto first = parse_number(first_text);
    auto last = parse_number(last_text);
    if (!first || !last) {
      return usage_error(quoted(setting) + ": '[" + std::string(inside) + "]' holds '" + std::string(range) +
                         "', which is not a number or a range <first>-<last>");
    }
    if (*last < *first) return usage_error(quoted(setting) + ": range '" + std::string(range) + "' runs backwards");
    if (*last - *first >= max_slurm_hosts - numbers.size()) return too_many(setting, "hosts");
    for (unsigned long number = *first; number <= *last; ++number) numbers.push_back(zero_padded(number, first_text.size()));
  }
  return numbers;
}

// Appends one name's hosts: its brackets expanded, the first bracket varying slowest.
Result<void> expand_name(std::string_view name, const Setting& setting, std::vector<std::string>& hosts) {
  std::vector<std::string> expanded{""};
  std::size_t i = 0;
  while (i < name.size()) {
    if (name[i] == ']') return usage_error(quoted(setting) + ": ']' without '['");
    if (name[i] != '[') {
      std::size_t next = std::min(name.find_first_of("[]", i), name.size());
      for (auto& host : expanded) host += name.substr(i, next - i);
      i = next;
      continue;
    }
    std::size_t close = name.find(']', i);
    if (close == std::string_view::npos) return usage_error(quoted(setting) + ": '[' without ']'");
    std::string_view inside = name.substr(i + 1, close - i - 1);
    if (inside.find('[') != std::string_view::npos) return usage_error(quoted(setting) + ": '[' inside brackets");
    auto numbers = bracket_numbers(inside, setting);
    if (!numbers) return std::unexpected(numbers.error());
    if (expanded.size() * numbers->size() > max_slurm_hosts - hosts.size()) return too_many(setting, "hosts");
    std::vector<std::string> longer;
    longer.reserve(expanded.size() * numbers->size());
    for (const auto& host : expanded) {
      for (const auto& number : *numbers) longer.push_back(host + number);
    }
    expanded = std::move(longer);
    i = close + 1;
  }
  if (expanded.size() > max_slurm_hosts - hosts.size()) return too_many(setting, "hosts");
  hosts.insert(hosts.end(), expanded.begin(), expanded.end());
  return {};
}

bool is_separator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n'; }

}  // namespace

Result<std::vector<std::string>> expand_hostlist(const Setting& setting) {
  std::vector<std::string> hosts;
  const std::string_view text = setting.value;
  std::size_t i = 0;
  while (i < text.size()) {
    if (is_separator(text[i])) {
      ++i;  // Slurm reads a run of separators as one
      continue;
    }
    // A name runs to the next separator outside brackets.
    std::size_t end = i;
    bool in_brackets = false;
    while (end < text.size() && (in_brackets || !is_separator(text[end]))) {
      if (text[end] == '[') in_brackets = true;
      else if (text[end] == ']') in_brackets = false;
      ++end;
    }
    if (auto expanded = expand_name(text.substr(i, end - i), setting, hosts); !expanded) return std::unexpected(expanded.error());
    i = end;
  }
  if (hosts.empty()) return usage_error(quoted(setting) + " names no host");
  return hosts;
}

Result<std::vector<int>> expand_tasks_per_node(const Setting& setting) {
  std::vector<int> counts;
  for (std::string_view item : split(setting.value, ',')) {
    std::size_t open = item.find('(');
    auto count = parse_number(item.substr(0, open));
    std::optional<unsigned long> repeat = 1;
    if (open != std::string_view::npos) {
      bool shaped = item.size() > open + 3 && item[open + 1] == 'x' && item.back() == ')';
      repeat = shaped ? parse_number(item.substr(open + 2, item.size() - open - 3)) : std::nullopt;
    }
    if (!count || !repeat || *repeat == 0 || *count > max_slurm_hosts) {
      return usage_error(quoted(setting) + ": '" + std::string(item) + "' is not <tasks> or <tasks>(x<nodes>)");
    }
    if (*repeat > max_slurm_hosts - counts.size()) return too_many(setting, "nodes");
    counts.insert(counts.end(), *repeat, static_cast<int>(*count));
  }
  return counts;
}

}  // namespace tfboot
