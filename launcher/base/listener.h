// A listening TCP socket on every address of the host: what the control channel and the metrics
// server both open.
#pragma once

#include <string>

#include "base/error.h"
#include "base/unique_fd.h"

namespace tfboot {

// Non-blocking and close-on-exec, on `port` of every address: dual-stack where the host has IPv6,
// IPv4 otherwise. `what` names the setting in errors ("--control-port 2220"); every failure is
// exit_code::resources.
Result<UniqueFd> listen_on_every_address(int port, int backlog, const std::string& what);

}  // namespace tfboot
