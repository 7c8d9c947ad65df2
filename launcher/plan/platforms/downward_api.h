// The files of a Kubernetes downward-API volume that hold a pod's labels or annotations: one
// `key="value"` line per entry, the value quoted the way Go's %q quotes it. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace tfboot {

// The value of `key` in such a file's `text`; nullopt when the file has no line for it. A line
// for `key` that is not `key="<quoted>"` is a usage error naming `path`.
Result<std::optional<std::string>> downward_api_value(std::string_view text, std::string_view key, std::string_view path);

// A Go-quoted string ("a\"b\u00e9") as the bytes it stands for; nullopt when it is not one.
std::optional<std::string> unquote_go_string(std::string_view quoted);

}  // namespace tfboot
