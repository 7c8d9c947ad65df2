// The metrics server: reading a request and rendering its answer (pure), and the thread that serves them.
#include "observe/http_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <list>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "base/clock.h"
#include "base/socket.h"
#include "base/threads.h"

namespace tfboot {
namespace {

std::string_view reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
  }
  return "Error";
}

constexpr int listen_backlog = 64;

constexpr auto idle_poll = std::chrono::milliseconds(1000);
// After a failed accept (no descriptors left, say) the listener is left alone this long, so that
// a listener that stays ready cannot keep the thread busy.
constexpr auto accept_pause = std::chrono::milliseconds(100);

// The answer to a request read whole, or to one refused.
std::string answer_to(const RequestReading& reading, const HttpHandler& handler) {
  if (reading.state == RequestReading::State::complete) return render_response(handler(reading.request), reading.request.head);
  const char* body = reading.status == 431 ? "request too large\n" : "bad request\n";
  return render_response(HttpResponse{.status = reading.status, .body = body}, false);
}

}  // namespace

std::variant<HttpRequest, int> parse_request_head(std::string_view head) {
  const auto line_end = head.find_first_of("\r\n");
  const std::string_view line = head.substr(0, line_end);
  const auto first_space = line.find(' ');
  if (first_space == std::string_view::npos) return 400;
  const auto second_space = line.find(' ', first_space + 1);
  if (second_space == std::string_view::npos) return 400;
  const std::string_view method = line.substr(0, first_space);
  const std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
  const std::string_view version = line.substr(second_space + 1);
  if (!version.starts_with("HTTP/1.") || version.size() != 8 || target.empty() || target.front() != '/') return 400;
  if (method != "GET" && method != "HEAD") return 405;
  return HttpRequest{.head = method == "HEAD", .path = std::string(target.substr(0, target.find('?')))};
}

RequestReading read_request(std::string_view received, std::size_t max_request) {
  auto end = received.find("\r\n\r\n");
  if (end == std::string_view::npos) end = received.find("\n\n");
  if (end != std::string_view::npos && end <= max_request) {
    auto parsed = parse_request_head(received.substr(0, end));
    if (const HttpRequest* request = std::get_if<HttpRequest>(&parsed)) {
      return {.state = RequestReading::State::complete, .request = *request};
    }
    return {.state = RequestReading::State::refused, .status = std::get<int>(parsed)};
  }
  if (received.size() > max_request) return {.state = RequestReading::State::refused, .status = 431};
  return {};
}

std::string render_response(const HttpResponse& response, bool head) {
  std::string text = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                 response.status, reason_phrase(response.status), response.content_type, response.body.size());
  if (!head) text += response.body;
  return text;
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(int port, HttpHandler handler, HttpLimits limits) {
  auto listener = listen_on_every_address(port, listen_backlog, "--metrics-port " + std::to_string(port));
  if (!listener) return std::unexpected(listener.error());
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return errno_error(exit_code::resources, "metrics server: eventfd", errno);
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(*listener), std::move(wake), std::move(handler), limits));
  auto thread = start_thread_without_signals([raw = server.get()] { raw->serve(); }, "metrics server");
  if (!thread) return std::unexpected(thread.error());
  server->thread_ = std::move(*thread);
  return server;
}

HttpServer::HttpServer(Socket listener, UniqueFd wake, HttpHandler handler, HttpLimits limits)
    : listener_(std::move(listener)), wake_(std::move(wake)), handler_(std::move(handler)), limits_(limits) {}

HttpServer::~HttpServer() {
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    // The eventfd's counter cannot overflow from one write: this never fails in a way to act on.
    [[maybe_unused]] auto written = ::write(wake_.get(), &one, sizeof one);
    thread_.join();
  }
}

// One client: its request read until it is complete, then the answer written, then closed.
struct HttpServer::Connection {
  Socket socket;
  Instant deadline;
  std::string source;  // the client's address
  std::string input;
  std::string output;  // the answer, once the request is read
  std::size_t sent = 0;

  bool answering() const { return !output.empty(); }
  short events() const { return answering() ? POLLOUT : POLLIN; }

  // Reads or writes as poll(2) says it may. True when the connection is done with: answered,
  // closed by the client, failed, or past its deadline.
  bool advance(short revents, Instant now, const HttpHandler& handler, std::size_t max_request) {
    if (now >= deadline) return true;
    if (!answering()) return (revents & (POLLIN | POLLHUP | POLLERR)) && receive(handler, max_request);
    return (revents & (POLLOUT | POLLHUP | POLLERR)) && send_answer();
  }

  // Reads what the client sent; once read_request says the request is complete (or refused), the
  // answer is made. True when the connection is done with: closed by the client, or failed.
  bool receive(const HttpHandler& handler, std::size_t max_request) {
    char buffer[1024];
    ssize_t got = ::read(socket.fd(), buffer, sizeof buffer);
    if (got == 0) return true;
    if (got < 0) return errno != EAGAIN && errno != EINTR;
    input.append(buffer, static_cast<std::size_t>(got));
    const RequestReading reading = read_request(input, max_request);
    if (reading.state == RequestReading::State::incomplete) return false;
    output = answer_to(reading, handler);
    input.clear();
    return false;
  }

  // Writes what the socket takes of the answer. True once it is all sent (our side then ends), or
  // the write failed.
  bool send_answer() {
    ssize_t wrote = ::send(socket.fd(), output.data() + sent, output.size() - sent, MSG_NOSIGNAL);
    if (wrote < 0) return errno != EAGAIN && errno != EINTR;
    sent += static_cast<std::size_t>(wrote);
    if (sent < output.size()) return false;
    ::shutdown(socket.fd(), SHUT_WR);
    return true;
  }
};

void HttpServer::serve() {
  std::list<Connection> connections;  // oldest first
  // Whatever goes wrong in here (memory, say) ends the serving, never the process.
  try {
    std::vector<pollfd> fds;
    while (true) {
      const Instant now = SteadyClock::now();
      const bool accepting = now >= accept_again_;
      Instant until = accepting ? now + idle_poll : std::min(now + idle_poll, accept_again_);
      fds = {{wake_.get(), POLLIN, 0}, {accepting ? listener_.fd() : -1, POLLIN, 0}};
      for (const Connection& connection : connections) {
        fds.push_back({connection.socket.fd(), connection.events(), 0});
        until = std::min(until, connection.deadline);
      }
      if (!poll_until(fds, until, "metrics server")) return;
      if (fds[0].revents) return;  // stopped
      const Instant polled = SteadyClock::now();
      auto revents = fds.begin() + 2;
      for (auto it = connections.begin(); it != connections.end(); ++revents) {
        it = it->advance(revents->revents, polled, handler_, limits_.max_request) ? connections.erase(it) : std::next(it);
      }
      // After the connections polled above are done with: making room closes one of them.
      if (fds[1].revents & POLLIN) accept_connections(connections, polled);
    }
  } catch (...) {
    return;
  }
}

// Full: room is made by fairness, not age. The address holding the most connections gives up its
// oldest, so that a scraper from any other address always gets in, however a flood of idle
// connections is timed; a newcomer from that address (or one tied with it) replaces its own oldest.
void HttpServer::make_room(std::list<Connection>& connections, const std::string& source) {
  std::map<std::string, std::size_t> held;
  for (const Connection& connection : connections) ++held[connection.source];
  std::string greediest = source;
  std::size_t most = held[source];
  for (const auto& [address, count] : held) {
    if (count > most) greediest = address, most = count;
  }
  auto oldest = std::ranges::find(connections, greediest, &Connection::source);
  connections.erase(oldest != connections.end() ? oldest : connections.begin());
}

// At most a listen backlog's worth per wake-up, so that a stream of connections cannot keep the
// serving from the ones it has.
void HttpServer::accept_connections(std::list<Connection>& connections, Instant now) {
  for (int accepted = 0; accepted < listen_backlog; ++accepted) {
    AcceptedConnection connection = accept_one(listener_.fd(), "metrics server");
    if (!connection) {
      if (connection.failed) accept_again_ = now + accept_pause;
      return;
    }
    std::string source = address_of_peer(connection.peer);
    if (connections.size() + 1 > limits_.max_connections) make_room(connections, source);
    connections.push_back(Connection{.socket = std::move(connection.socket), .deadline = now + limits_.request_time, .source = std::move(source)});
  }
}

}  // namespace tfboot
