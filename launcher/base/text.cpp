// Small text helpers that every layer uses (text.h).
#include "base/text.h"

namespace tfboot {

std::string join_host_port(std::string_view host, int port) {
  std::string text = host.find(':') != std::string_view::npos ? "[" + std::string(host) + "]" : std::string(host);
  return text + ":" + std::to_string(port);
}

}  // namespace tfboot
