// A guard before parsing JSON from a file: nlohmann's values are built and destroyed
// recursively, so text nested without bound would overflow the stack. Pure.
#pragma once

#include <string_view>

namespace tfboot {

// Whether no object or array in `text` is nested deeper than `limit` (strings are skipped, their
// brackets do not count). Malformed text is left to the parser.
inline bool json_nesting_within(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > limit) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

}  // namespace tfboot
