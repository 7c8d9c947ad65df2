// libFuzzer target: an operator's TF_CONFIG -> parsed, validated, written back.
#include <cstddef>
#include <cstdint>
#include <string>

#include "plan/tf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto config = tfboot::parse_tf_config(text, "TF_CONFIG");
  if (!config) {
    if (config.error().code != 2 || config.error().message.find('\n') != std::string::npos) __builtin_trap();
    return 0;
  }
  // What we accept, we write back in a form we accept again, unchanged.
  std::string json = tfboot::to_json(*config);
  auto again = tfboot::parse_tf_config(json, "TF_CONFIG");
  if (!again || tfboot::to_json(*again) != json) __builtin_trap();
  return 0;
}
