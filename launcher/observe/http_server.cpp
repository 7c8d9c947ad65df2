// The metrics server: request parsing and answers (pure), and the thread that serves them.
#include "observe/http_server.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <list>
#include <vector>

#include <fmt/format.h>

#include "base/clock.h"
#include "base/listener.h"

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

// One client: its request read up to the blank line, then the answer written, then closed.
struct Connection {
  UniqueFd fd;
  Instant deadline;
  std::string input;
  std::string output;
  std::size_t sent = 0;
  bool answering = false;
};

constexpr auto idle_poll = std::chrono::milliseconds(1000);
// After a failed accept (no descriptors left, say) the listener is left alone this long, so that
// a listener that stays ready cannot keep the thread busy.
constexpr auto accept_pause = std::chrono::milliseconds(100);

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
  // The thread starts with every signal blocked: a stop signal must reach the supervisor's
  // signalfd or handler, never a thread that would take its default action.
  sigset_t all;
  sigset_t before;
  ::sigfillset(&all);
  if (int failed = ::pthread_sigmask(SIG_SETMASK, &all, &before); failed != 0) {
    return errno_error(exit_code::resources, "metrics server: pthread_sigmask", failed);
  }
  try {
    server->thread_ = std::thread([raw = server.get()] { raw->serve(); });
  } catch (const std::system_error& error) {
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    return make_error(exit_code::resources, std::string("metrics server: cannot start its thread: ") + error.what());
  }
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return server;
}

HttpServer::HttpServer(UniqueFd listener, UniqueFd wake, HttpHandler handler, HttpLimits limits)
    : listener_(std::move(listener)), wake_(std::move(wake)), handler_(std::move(handler)), limits_(limits) {}

HttpServer::~HttpServer() {
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    // The eventfd's counter cannot overflow from one write: this never fails in a way to act on.
    [[maybe_unused]] auto written = ::write(wake_.get(), &one, sizeof one);
    thread_.join();
  }
}

void HttpServer::serve() {
  std::list<Connection> connections;  // oldest first
  Instant accept_again{};
  // Whatever goes wrong in here (memory, say) ends the serving, never the process.
  try {
    std::vector<pollfd> fds;
    std::vector<std::list<Connection>::iterator> polled;
    while (true) {
      Instant now = SteadyClock::now();
      Instant until = now + idle_poll;
      fds.clear();
      polled.clear();
      fds.push_back({wake_.get(), POLLIN, 0});
      const bool accepting = now >= accept_again;
      fds.push_back({accepting ? listener_.get() : -1, POLLIN, 0});
      if (!accepting) until = std::min(until, accept_again);
      for (auto it = connections.begin(); it != connections.end(); ++it) {
        fds.push_back({it->fd.get(), static_cast<short>(it->answering ? POLLOUT : POLLIN), 0});
        polled.push_back(it);
        until = std::min(until, it->deadline);
      }
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(std::max(until - now, SteadyClock::duration::zero()));
      int ready = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
      if (ready < 0 && errno != EINTR && errno != EAGAIN) return;
      now = SteadyClock::now();
      if (ready > 0 && fds[0].revents) return;  // stopped
      for (std::size_t i = 0; i < polled.size(); ++i) {
        auto it = polled[i];
        const short revents = fds[i + 2].revents;
        bool done = now >= it->deadline;
        if (!done && !it->answering && (revents & (POLLIN | POLLHUP | POLLERR))) {
          char buffer[1024];
          ssize_t got = ::read(it->fd.get(), buffer, sizeof buffer);
          if (got <= 0) {
            done = got == 0 || (errno != EAGAIN && errno != EINTR);
          } else {
            it->input.append(buffer, static_cast<std::size_t>(got));
            auto end = it->input.find("\r\n\r\n");
            if (end == std::string::npos) end = it->input.find("\n\n");
            HttpResponse response;
            bool head = false;
            if (end != std::string::npos && end <= limits_.max_request) {
              auto request = parse_request_head(std::string_view(it->input).substr(0, end));
              if (const HttpRequest* parsed = std::get_if<HttpRequest>(&request)) {
                response = handler_(*parsed);
                head = parsed->head;
              } else {
                response = HttpResponse{.status = std::get<int>(request), .body = "bad request\n"};
              }
              it->answering = true;
            } else if (it->input.size() > limits_.max_request) {
              response = HttpResponse{.status = 431, .body = "request too large\n"};
              it->answering = true;
            }
            if (it->answering) {
              it->output = render_response(response, head);
              it->input.clear();
            }
          }
        } else if (!done && it->answering && (revents & (POLLOUT | POLLHUP | POLLERR))) {
          ssize_t wrote = ::send(it->fd.get(), it->output.data() + it->sent, it->output.size() - it->sent, MSG_NOSIGNAL);
          if (wrote < 0) done = errno != EAGAIN && errno != EINTR;
          else it->sent += static_cast<std::size_t>(wrote);
          if (it->sent == it->output.size()) {
            ::shutdown(it->fd.get(), SHUT_WR);
            done = true;
          }
        }
        if (done) connections.erase(it);
      }
      // After the connections polled above are done with: making room closes one of them.
      if (ready > 0 && fds[1].revents & POLLIN) {
        // At most a listen backlog's worth per wake-up, so that a stream of connections cannot keep
        // this loop from the ones it has.
        for (int accepted = 0; accepted < listen_backlog; ++accepted) {
          int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) accept_again = now + accept_pause;
            break;
          }
          // Full: the oldest connection makes room, so that a flood of idle ones cannot lock a scraper out.
          if (connections.size() + 1 > limits_.max_connections) connections.pop_front();
          connections.push_back(Connection{.fd = UniqueFd(fd), .deadline = now + limits_.request_time});
        }
      }
    }
  } catch (...) {
    return;
  }
}

}  // namespace tfboot
