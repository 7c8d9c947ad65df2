// A socket's descriptor and the steps both of tfboot's servers (the control channel and the
// metrics server) take with one: listen on every address, accept, poll until a deadline. Every
// descriptor is non-blocking and CLOEXEC; every system call is checked.
#pragma once

#include <poll.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "base/unique_fd.h"

namespace tfboot {

// A socket's descriptor, owned: closed with it.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  int fd() const { return fd_.get(); }
  explicit operator bool() const { return static_cast<bool>(fd_); }
  void reset() { fd_.reset(); }

 private:
  UniqueFd fd_;
};

// On `port` of every address: dual-stack where the host has IPv6, IPv4 otherwise. `what` names
// the setting in errors ("--control-port 2220"); every failure is exit_code::resources.
Result<Socket> listen_on_every_address(int port, int backlog, const std::string& what);

// On `port` of the one numeric address `host` (tasks that share a host, each on an address of its own).
Result<Socket> listen_on_address(const std::string& host, int port, int backlog, const std::string& what);

// One connection taken from a listener, or none.
struct AcceptedConnection {
  Socket socket;     // empty when none was taken
  std::string peer;  // "host:port"
  // The accept failed (a connection that died in the backlog, no descriptors left), rather than
  // finding none pending: the listener stays, and the peer retries.
  bool failed = false;
  explicit operator bool() const { return static_cast<bool>(socket); }
};

// Accepts one pending connection. A failure is logged at debug level, naming `what` ("control
// channel").
AcceptedConnection accept_one(int listener, std::string_view what);

// "10.0.0.7" of "10.0.0.7:41234", "fd00::7" of "[fd00::7]:41234".
std::string address_of_peer(std::string_view peer);
// Our own end's address of a connected socket, numeric, without the port ("" when unknown); an
// IPv4 peer of a dual-stack listener gives the IPv4 address.
std::string local_address(int fd);

// poll(2) until `until` (a minute at most); EINTR is a wake-up with nothing ready. Any other
// failure is exit_code::resources, naming `what`.
Result<void> poll_until(std::vector<pollfd>& fds, Instant until, std::string_view what);

// The revents poll(2) left for `fd` in `fds`; 0 when it is not there.
short revents_of(const std::vector<pollfd>& fds, int fd);

}  // namespace tfboot
