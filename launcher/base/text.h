// Small text helpers that every layer uses, each written once.
#pragma once

#include <string>
#include <string_view>

namespace tfboot {

// "host:port", or "[v6]:port" when the host is an IPv6 address: the one place that writes one.
std::string join_host_port(std::string_view host, int port);

}  // namespace tfboot
