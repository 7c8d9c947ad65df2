// Slurm's compact lists: host names ("gpu[07-08],cpu1") and tasks per node ("2,1(x2)").
#include "plan/platforms/slurm_hostlist.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

#include "base/text.h"

namespace tfboot {
namespace {

std::unexpected<Error> too_many(const Setting& setting, std::string_view what) {
  return usage_error(quoted(setting) + " gives more than " + std::to_string(max_slurm_hosts) + " " + std::string(what));
}

// A host is a DNS name; the bound also keeps a zero padding of thousands of digits from costing
// gigabytes before the names are checked.
constexpr std::size_t max_host_name_length = 253;

std::unexpected<Error> too_long(const Setting& setting) {
  return usage_error(quoted(setting) + " gives a host name longer than " + std::to_string(max_host_name_length) + " characters");
}

// Decimal digits only, leading zeros allowed (they set a range's width), up to 2^64-1 as libslurm
// reads them (it reads a larger number as 2^64-1, which here is an error instead).
std::optional<std::uint64_t> parse_number(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string zero_padded(std::uint64_t number, std::size_t width) {
  std::string text = std::to_string(number);
  if (text.size() < width) text.insert(0, width - text.size(), '0');
  return text;
}

// A range of one bracket, kept as its ends until the whole list is counted: "07-08" is 7..8 of
// width 2. Expanding first would cost megabytes per "[0-99999]" before the count refuses them.
struct NumberRange {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  std::size_t width = 0;  // the first number's digits: the zero padding of every number in it
  std::uint64_t count() const { return last - first + 1; }
};

// What one bracket stands for, and how many numbers that is: "07-08,11" gives 07, 08, 11.
struct Bracket {
  std::vector<NumberRange> ranges;
  std::size_t count = 0;  // at most max_slurm_hosts
};

Result<Bracket> parse_bracket(std::string_view inside, const Setting& setting) {
  Bracket bracket;
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
    if (first_text.size() > max_host_name_length || last_text.size() > max_host_name_length) return too_long(setting);
    if (*last - *first >= max_slurm_hosts - bracket.count) return too_many(setting, "hosts");
    bracket.ranges.push_back(NumberRange{*first, *last, first_text.size()});
    bracket.count += static_cast<std::size_t>(*last - *first + 1);
  }
  return bracket;
}

// The bracket's numbers as text, once the list is known to fit.
std::vector<std::string> bracket_numbers(const Bracket& bracket) {
  std::vector<std::string> numbers;
  numbers.reserve(bracket.count);
  for (const NumberRange& range : bracket.ranges) {
    for (std::uint64_t offset = 0; offset < range.count(); ++offset) numbers.push_back(zero_padded(range.first + offset, range.width));
  }
  return numbers;
}

// One name cut at its brackets: texts[i] comes before bracket i, texts.back() ends the name.
struct BracketedName {
  std::vector<std::string_view> texts;
  std::vector<Bracket> brackets;
};

Result<BracketedName> parse_name(std::string_view name, const Setting& setting) {
  BracketedName parsed;
  std::size_t i = 0;
  while (true) {
    std::size_t open = name.find_first_of("[]", i);
    parsed.texts.push_back(name.substr(i, open == std::string_view::npos ? std::string_view::npos : open - i));
    if (open == std::string_view::npos) break;
    if (name[open] == ']') return usage_error(quoted(setting) + ": ']' without '['");
    std::size_t close = name.find(']', open);
    if (close == std::string_view::npos) return usage_error(quoted(setting) + ": '[' without ']'");
    std::string_view inside = name.substr(open + 1, close - open - 1);
    if (inside.find('[') != std::string_view::npos) return usage_error(quoted(setting) + ": '[' inside brackets");
    auto bracket = parse_bracket(inside, setting);
    if (!bracket) return std::unexpected(bracket.error());
    parsed.brackets.push_back(std::move(*bracket));
    i = close + 1;
  }
// libslurm ends a bracketed name at its last bracket ("gpu[1-2]-ib" is an invalid hostlist there),
  // and Slurm only ever compresses a name's trailing number.
  if (!parsed.brackets.empty() && !parsed.texts.back().empty()) {
    return usage_error(quoted(setting) + ": '" + std::string(name) + "' goes on after its last ']', which Slurm's lists never do");
  }
  return parsed;
}

// Appends one name's hosts in libslurm's order (hostlist.c, _push_range_list): the last bracket
// varies fastest; the brackets before it are expanded from the one nearest to it outwards, each
// value of it holding the others' expansion, so among them the first varies fastest and the one
// before the last slowest. "row[0,1]_rack[2-3]_blade[4,5]": row0_rack2_blade4, row0_rack2_blade5,
// row1_rack2_blade4, row1_rack2_blade5, row0_rack3_blade4, ...
Result<void> expand_name(std::string_view name, const Setting& setting, std::vector<std::string>& hosts) {
  auto parsed = parse_name(name, setting);
  if (!parsed) return std::unexpected(parsed.error());
  // Counted before anything is expanded: the brackets' numbers together are at most the hosts
  // they make plus one per bracket, so what is expanded next is bounded by the limit.
  std::size_t count = 1;
  for (const Bracket& bracket : parsed->brackets) {
    if (count > (max_slurm_hosts - hosts.size()) / bracket.count) return too_many(setting, "hosts");
    count *= bracket.count;
  }
  if (count > max_slurm_hosts - hosts.size()) return too_many(setting, "hosts");
  std::vector<std::vector<std::string>> numbers;
  for (const Bracket& bracket : parsed->brackets) numbers.push_back(bracket_numbers(bracket));
  const std::size_t brackets = numbers.size();

  // An odometer over the brackets' values, advanced in libslurm's order: the last bracket first,
  // then the first, the second, ... up to the one before the last.
  std::vector<std::size_t> advance_order;
  if (brackets > 0) advance_order.push_back(brackets - 1);
  for (std::size_t b = 0; b + 1 < brackets; ++b) advance_order.push_back(b);
  std::vector<std::size_t> choice(brackets, 0);
  for (std::size_t n = 0; n < count; ++n) {
    std::string host;
    for (std::size_t b = 0; b < brackets; ++b) {
      host += parsed->texts[b];
      host += numbers[b][choice[b]];
    }
    host += parsed->texts.back();
    if (host.size() > max_host_name_length) return too_long(setting);
    hosts.push_back(std::move(host));
    for (std::size_t b : advance_order) {
      if (++choice[b] < numbers[b].size()) break;
      choice[b] = 0;
    }
  }
  return {};
}

// libslurm's separators (hostlist_create: "\t, "); a run of them counts as one.
bool is_separator(char c) { return c == ',' || c == ' ' || c == '\t'; }

}  // namespace

Result<std::vector<std::string>> expand_hostlist(const Setting& setting) {
  std::vector<std::string> hosts;
  const std::string_view text = setting.value;
  std::size_t i = 0;
  while (i < text.size()) {
    if (is_separator(text[i])) {
      ++i;
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
