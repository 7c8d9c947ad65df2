// A command's last lines of stderr, and the one that names its failure (output_tail.h).
#include "process/output_tail.h"

#include <cctype>

namespace tfboot {
namespace {

bool is_identifier_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_identifier_part(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// What Python's traceback ends with: a dotted name ending in Error, Exception or Interrupt, at the
// start of the line, alone or before ": message". Indented lines are the traceback's frames.
bool is_exception_line(std::string_view line) {
  std::size_t end = 0;
  while (end < line.size()) {
    if (!is_identifier_start(line[end])) return false;
    while (end < line.size() && is_identifier_part(line[end])) ++end;
    if (end < line.size() && line[end] == '.') {
      ++end;
      continue;
    }
    break;
  }
  if (end < line.size() && line[end] != ':') return false;
  const std::string_view name = line.substr(0, end);
  for (std::string_view suffix : {"Error", "Exception", "Interrupt"}) {
    if (name.ends_with(suffix)) return true;
  }
  return false;
}

// Control characters (a terminal's colours, a stray \r) as spaces, trailing blanks dropped, cut
// at a UTF-8 character's start.
std::string printable(std::string_view line) {
  std::string text(line);
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  const std::size_t first = text.find_first_not_of(' ');
  text.erase(0, first == std::string::npos ? text.size() : first);
  if (text.size() <= max_failure_line) return text;
  std::size_t size = max_failure_line;
  while (size > 0 && (static_cast<unsigned char>(text[size]) & 0xC0) == 0x80) --size;
  return text.substr(0, size) + "...";
}

}  // namespace

void OutputTail::add(std::string_view line) {
  if (lines_.size() == max_lines) lines_.pop_front();
  lines_.emplace_back(line.substr(0, max_line_bytes));
}

std::string failure_line(const std::deque<std::string>& lines) {
  for (auto line = lines.rbegin(); line != lines.rend(); ++line) {
    if (is_exception_line(*line)) return printable(*line);
  }
  for (auto line = lines.rbegin(); line != lines.rend(); ++line) {
    std::string text = printable(*line);
    if (!text.empty()) return text;
  }
  return "";
}

}  // namespace tfboot
