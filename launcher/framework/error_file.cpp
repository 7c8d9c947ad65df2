// A failed rank's error file (error_file.h).
#include "framework/error_file.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/files.h"

namespace tfboot {
namespace {

// torch's record holds the traceback too; a larger file is not its.
constexpr std::size_t max_error_file = 1024 * 1024;
constexpr std::size_t max_message = 300;

}  // namespace

std::optional<std::string> read_torch_error_message(const std::string& path) {
  auto text = read_text_file(path, max_error_file);
  if (!text) return std::nullopt;
  // {"message": {"message": "RuntimeError: boom", "extraInfo": {...}}}; older torch wrote the
  // message as a plain string.
  auto json = nlohmann::json::parse(*text, nullptr, false);
  if (!json.is_object() || !json.contains("message")) return std::nullopt;
  const nlohmann::json* message = &json["message"];
  if (message->is_object() && message->contains("message")) message = &(*message)["message"];
  if (!message->is_string()) return std::nullopt;
  std::string line = message->get<std::string>();
  line = line.substr(0, line.find('\n'));
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  if (line.size() > max_message) line = line.substr(0, max_message) + "...";
  if (line.empty()) return std::nullopt;
  return line;
}

void remove_stale_error_file(const std::string& path) { ::unlink(path.c_str()); }

}  // namespace tfboot
