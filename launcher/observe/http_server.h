// A small HTTP/1.1 server for /metrics, /healthz, /readyz and /status (docs/observing.md: Observing a
// start): GET and HEAD only, one request per connection, bounded like the control port (request
// size, connections, time), on a thread of its own so that it never holds up the start or the
// supervision, and they never hold it up.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <variant>

#include "base/error.h"
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

// The whole answer on the wire; the connection closes after it.
std::string render_response(const HttpResponse& response, bool head);

struct HttpLimits {
  std::size_t max_request = 4096;   // the request head; more is answered 431
  std::size_t max_connections = 32;  // beyond this the oldest connection is closed for the new one
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
  HttpServer(UniqueFd listener, UniqueFd wake, HttpHandler handler, HttpLimits limits);
  void serve();

  UniqueFd listener_;
  UniqueFd wake_;  // an eventfd: rung to stop
  HttpHandler handler_;
  HttpLimits limits_;
  std::thread thread_;
};

}  // namespace tfboot
