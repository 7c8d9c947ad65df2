// A value together with where it came from, and the environment as tfboot reads it: what every
// layer needs to name the source of a bad value in its error message.
#pragma once

#include <functional>
#include <map>
#include <string>

namespace tfboot {

using Environment = std::map<std::string, std::string, std::less<>>;

// A string option together with where it came from ("--cluster" or "TFBOOT_CLUSTER"),
// so that a later step can name the source in its error message.
struct Setting {
  std::string value;
  std::string source;
};
// "--cluster 'worker=x'": where a value came from and the value, for error messages.
inline std::string quoted(const Setting& setting) { return setting.source + " '" + setting.value + "'"; }

}  // namespace tfboot
