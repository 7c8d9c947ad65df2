// A small HTTP/1.1 server for /metrics, /healthz, /readyz and /status (docs/observing.md: Observing a
// start): GET and HEAD only, one request per connection, bounded like the control port (request
// size, connections, time), on a thread of its own so that it never holds up the start or the
// supervision, and they never hold it up.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <variant>

#include "base/clock.h"
#include "base/error.h"
#include "base/socket.h"
#include "base/unique_fd.h"

namespace tfboot {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// The request's target, without a query ("/metrics?x=1" is "/metrics").
struct HttpRequest {
  bool head = false;  // HEAD: the answer without its body
  std::string path;
};

// The request head (up to its blank line): the request, or the status that refuses it (400 for
// what is not HTTP, 405 for a method other than GET and HEAD).
std::variant<HttpRequest, int> parse_request_head(std::string_view head);

// What the bytes a connection has sent so far make, as picohttpparser's phr_parse_request says:
// not yet a whole request head, a request to answer, or a refusal (parse_request_head's, or 431
// once more than `max_request` bytes came without the head's end).
struct RequestReading {
  enum class State { incomplete, complete, refused };
  State state = State::incomplete;
  HttpRequest request;  // complete
  int status = 0;       // refused
};
RequestReading read_request(std::string_view received, std::size_t max_request);

// The whole answer on the wire; the connection closes after it.
std::string render_response(const HttpResponse& response, bool head);

struct HttpLimits {
  std::size_t max_request = 4096;   // the request head; more is answered 431
  std::size_t max_connections = 32;  // beyond this the address holding the most gives up its oldest
  std::chrono::milliseconds request_time{5000};  // from accept to the answer sent: slow clients are cut
};

using HttpHandler = std::function<HttpResponse(const HttpRequest& request)>;

class HttpServer {
 public:
  // Listens on `port` on every address (IPv6 and IPv4) and serves from a thread of its own, with
  // every signal blocked there (signals are the supervisor's). An error when the port cannot be
  // opened.
  static Result<std::unique_ptr<HttpServer>> start(int port, HttpHandler handler, HttpLimits limits = {});
  // Stops the thread (within one poll) and closes every connection.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

 private:
  struct Connection;

  HttpServer(Socket listener, UniqueFd wake, HttpHandler handler, HttpLimits limits);
  void serve();
  void accept_connections(std::list<Connection>& connections, Instant now);
  static void make_room(std::list<Connection>& connections, const std::string& source);

  Socket listener_;
  Instant accept_again_{};  // after a failed accept, the listener is left alone until then
  UniqueFd wake_;  // an eventfd: rung to stop
  HttpHandler handler_;
  HttpLimits limits_;
  std::thread thread_;
};

}  // namespace tfboot
