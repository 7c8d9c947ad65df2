// The control channel's sockets: a MessageConnection that frames messages in and queues them out,
// the event set over many, and the listen, deliver and connect steps around them (the socket
// itself, accept and poll: base/socket.h). Every descriptor is non-blocking and CLOEXEC; every
// system call is checked.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/socket.h"
#include "base/unique_fd.h"
#include "control/protocol/messages.h"
#include "control/protocol/tree.h"

namespace tfboot {

// A refused or finished peer gets this long to read our last message before the close.
inline constexpr std::chrono::seconds linger{1};

// A message encoded once, shared by every connection it is queued on (a start or a heartbeat to
// thousands of tasks costs one encoding and no copies).
using EncodedMessage = std::shared_ptr<const std::string>;
inline EncodedMessage encoded(const Message& message) { return std::make_shared<const std::string>(encode(message)); }

struct Carrier;

// One connection: lines in through a bounded FrameReader, messages out through a queue that is
// written whenever the socket takes more. Or, at the coordinator of a tree, a task's connection
// to its relay, carried by the relay's own (a Carrier): what it sends goes there as via{id} and
// the line, what it reads the relay delivered (take_line), and it has no descriptor of its own.
class MessageConnection {
 public:
  MessageConnection(Socket socket, std::string peer, std::size_t max_line, Instant now)
      : socket_(std::move(socket)), peer_(std::move(peer)), reader_(max_line), last_heard_(now) {}
  MessageConnection(std::shared_ptr<Carrier> carrier, std::uint64_t id, std::string peer, std::size_t max_line, Instant now);

  int fd() const { return carrier_ ? -1 : socket_.fd(); }
  bool carried() const { return carrier_ != nullptr; }
  Carrier* carrier() const { return carrier_.get(); }
  std::uint64_t carried_id() const { return carried_id_; }  // the relay's id for it
  // A carried connection's line, as its relay delivered it.
  void take_line(std::string_view line, Instant now);
  const std::string& peer() const { return peer_; }
  Instant last_heard() const { return last_heard_; }
  bool broken() const { return problem_.has_value(); }
  const std::string& problem() const { return *problem_; }
  bool has_output() const { return !output_.empty(); }
  short events() const { return static_cast<short>(POLLIN | (has_output() ? POLLOUT : 0)); }

  // Queues the message and writes what the socket takes now.
  void send(const Message& message) { send(encoded(message)); }
  void send(EncodedMessage message);
  // Writes what is queued, as far as the socket takes it.
  void flush();
  // Reads what is there. Lines read stay available through next_line() after the peer closed
  // or failed, so that a "done" just before a close is not lost.
  void receive(Instant now);
  std::optional<std::string> next_line() { return reader_.next(); }
  // Our side is done: the peer reads what was sent, then sees the end.
  void shutdown_write();
  // Marks the channel broken; the first problem is kept. A carried one is closed at its relay.
  void fail(std::string problem);

 private:
  void close_at_relay();

  Socket socket_;
  std::shared_ptr<Carrier> carrier_;
  EncodedMessage via_;  // a carried connection's via{id}
  std::uint64_t carried_id_ = 0;
  bool closed_at_relay_ = false;
  std::string peer_;
  FrameReader reader_;
  std::deque<EncodedMessage> output_;
  std::size_t sent_ = 0;    // of output_.front()
  std::size_t queued_ = 0;  // bytes in output_ not yet sent
  std::optional<std::string> problem_;
  Instant last_heard_;
};

// A relay's own connection at the coordinator, and the connections it carries (by the relay's
// ids, each with the coordinator's key for it).
struct Carrier {
  Carrier(MessageConnection connection, JobMember from) : channel(std::move(connection)), relay(from) {}
  MessageConnection channel;
  JobMember relay;
  std::map<std::uint64_t, std::uint64_t> carried;
  std::optional<RelayVia> via;  // a via read, its line not yet
  bool touched = false;         // sent to since its owner last watched its events
};
// Each carried connection's relay's own instead, each once; the others as they are.
std::vector<MessageConnection*> on_the_wire(const std::vector<MessageConnection*>& channels);

// What a relay's connection brought: the connections it opened, and the coordinator's keys of
// those that got a line or ended. `find` gives the connection of a key, nullptr once it is gone.
struct CarrierInput {
  std::vector<RelayOpen> opened;
  std::vector<std::uint64_t> touched;
};
CarrierInput read_carrier(Carrier& carrier, const std::function<MessageConnection*(std::uint64_t key)>& find, Instant now);

// One message for many connections: those carried by a relay get it through the relay once, in
// one via that lists them all; then the others. Nothing goes out before send().
class Fanout {
 public:
  explicit Fanout(EncodedMessage message) : message_(std::move(message)) {}
  void to(MessageConnection& channel);
  void send();  // what was gathered for the relays

 private:
  EncodedMessage message_;
  std::map<Carrier*, std::vector<std::uint64_t>> carried_;
  std::vector<MessageConnection*> direct_;
};

// An epoll set over many connections: a wake-up costs what is ready, not what is open. Each
// descriptor carries a key of the caller's; events and revents are poll(2)'s bits.
class EventSet {
 public:
  static Result<EventSet> create();
  int fd() const { return epoll_.get(); }
  // Adds `fd`, or changes its events when it is there.
  void watch(int fd, std::uint64_t key, short events);
  struct Ready {
    std::uint64_t key;
    short revents;
  };
  // What is ready, waiting until `until` at most (a past `until`: no wait). EINTR is nothing ready.
  Result<std::vector<Ready>> wait(Instant until);

 private:
  explicit EventSet(UniqueFd epoll) : epoll_(std::move(epoll)) {}
  UniqueFd epoll_;
};

// Raises the soft limit on open descriptors to the hard one when a coordinator of `tasks` needs
// more for its `connections` (control/protocol/tree.h: coordinator_connections); exit_code::resources, before any connection, when even the hard limit is too low. The
// connections the limit then allows.
Result<std::size_t> make_room_for_tasks(std::size_t tasks, std::size_t connections);

// Until everything queued on `channels` has been acknowledged by the peers, or `until`: a close
// with unread input sends a reset, and a reset throws away what the peer has not yet received.
// What arrives meanwhile stays buffered in the channels for whoever reads them next.
void deliver(const std::vector<MessageConnection*>& channels, Instant until);

// A last word: delivers what is queued (as deliver), ends our side, then reads and drops what the
// peers still send until each has closed, or until `until`. A peer that answers a last message
// (a heartbeat after an abort) then reads the end, not a reset.
void close_gently(const std::vector<MessageConnection*>& channels, Instant until);

// The coordinator's listener on every address: dual-stack where the host has IPv6, IPv4
// otherwise. An error is exit_code::resources naming --control-port.
Result<Socket> open_listener(int port);

// A non-blocking connect to a numeric address; its outcome shows when the socket turns writable.
Result<Socket> start_connect(const std::string& host, int port);

// The connect's outcome, once the socket is writable.
Result<void> connect_outcome(int fd);

}  // namespace tfboot
