// The files of a Kubernetes downward-API volume: `key="value"` lines with Go-quoted values.
#include "plan/platforms/downward_api.h"

#include <charconv>

#include "base/text.h"

namespace tfboot {
namespace {

std::optional<unsigned long> parse_hex(std::string_view text, std::size_t digits) {
  if (text.size() < digits) return std::nullopt;
  unsigned long value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + digits, value, 16);
  if (error != std::errc{} || end != text.data() + digits) return std::nullopt;
  return value;
}

void append_utf8(std::string& out, unsigned long code_point) {
  auto byte = [&](unsigned long bits) { out += static_cast<char>(static_cast<unsigned char>(bits)); };
  if (code_point < 0x80) {
    byte(code_point);
  } else if (code_point < 0x800) {
    byte(0xC0 | (code_point >> 6));
    byte(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    byte(0xE0 | (code_point >> 12));
    byte(0x80 | ((code_point >> 6) & 0x3F));
    byte(0x80 | (code_point & 0x3F));
  } else {
    byte(0xF0 | (code_point >> 18));
    byte(0x80 | ((code_point >> 12) & 0x3F));
    byte(0x80 | ((code_point >> 6) & 0x3F));
    byte(0x80 | (code_point & 0x3F));
  }
}

}  // namespace

std::optional<std::string> unquote_go_string(std::string_view quoted) {
  if (quoted.size() < 2 || quoted.front() != '"' || quoted.back() != '"') return std::nullopt;
  std::string_view body = quoted.substr(1, quoted.size() - 2);
  std::string out;
  for (std::size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '"' || c == '\n') return std::nullopt;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i == body.size()) return std::nullopt;
    std::size_t digits = 0;
    switch (body[i]) {
      case 'a': out += '\a'; continue;
      case 'b': out += '\b'; continue;
      case 'f': out += '\f'; continue;
      case 'n': out += '\n'; continue;
      case 'r': out += '\r'; continue;
      case 't': out += '\t'; continue;
      case 'v': out += '\v'; continue;
      case '\\': out += '\\'; continue;
      case '"': out += '"'; continue;
      case 'x': digits = 2; break;
      case 'u': digits = 4; break;
      case 'U': digits = 8; break;
      default: return std::nullopt;
    }
    auto value = parse_hex(body.substr(i + 1), digits);
    if (!value) return std::nullopt;
    i += digits;
    if (digits == 2) {
      out += static_cast<char>(static_cast<unsigned char>(*value));  // a byte, not a character
    } else {
      if (*value > 0x10FFFF || (*value >= 0xD800 && *value <= 0xDFFF)) return std::nullopt;
      append_utf8(out, *value);
    }
  }
  return out;
}

Result<std::optional<std::string>> downward_api_value(std::string_view text, std::string_view key, std::string_view path) {
  for (std::string_view line : lines(text)) {
    if (!line.starts_with(key) || line.substr(key.size(), 1) != "=") continue;
    auto value = unquote_go_string(line.substr(key.size() + 1));
    if (!value) {
      return usage_error(std::string(path) + ": the line of '" + std::string(key) + "' is not " + std::string(key) +
                         "=\"<value>\"");
    }
    return std::optional<std::string>{std::move(*value)};
  }
  return std::optional<std::string>{};
}

}  // namespace tfboot
