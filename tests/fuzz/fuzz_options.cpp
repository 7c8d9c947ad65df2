// libFuzzer target: argv and TFBOOT_* environment twins -> Options.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/options.h"

// Input: NUL-separated fields. Fields of the form KEY=VALUE that start with "TFBOOT_" go to the
// environment, the rest are arguments, in order.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args;
  tfboot::Environment env;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    std::string field = text.substr(start, end - start);
    auto equals = field.find('=');
    if (field.starts_with("TFBOOT_") && equals != std::string::npos) {
      env[field.substr(0, equals)] = field.substr(equals + 1);
    } else {
      args.push_back(field);
    }
    start = end + 1;
  }
  auto options = tfboot::parse_options(args, env);
  if (!options) {
    // Every error carries the usage exit code and a single line.
    if (options.error().code != 2 || options.error().message.find('\n') != std::string::npos) __builtin_trap();
  }
  (void)tfboot::parse_duration(text, "--wait");
  return 0;
}
