// The metrics server's pages, each read from one snapshot of the start record.
#include "observe/endpoints.h"

#include "base/log.h"
#include "observe/prometheus.h"
#include "observe/status.h"

namespace tfboot::observe {

HttpResponse answer(const HttpRequest& request) {
  if (request.path == "/metrics") {
    return {.status = 200, .content_type = "text/plain; version=0.0.4; charset=utf-8", .body = render_metrics(snapshot())};
  }
  if (request.path == "/healthz") return {.body = "ok\n"};
  if (request.path == "/readyz") {
    if (is_ready(snapshot())) return {.body = "ready\n"};
    return {.status = 503, .body = "not ready: the command has not started\n"};
  }
  if (request.path == "/status") {
    StartRecord record = snapshot();
    if (!record.coordinator) return {.status = 404, .body = "only the job's coordinator serves /status\n"};
    return {.status = 200, .content_type = "application/json", .body = render_status(record)};
  }
  return {.status = 404, .body = "not found; try /metrics, /healthz, /readyz or /status\n"};
}

std::unique_ptr<HttpServer> serve_start_record(int port) {
  auto server = HttpServer::start(port, answer);
  if (!server) {
    log::warn("no metrics: {}", server.error().message);
    return nullptr;
  }
  log::info("metrics on port {}: /metrics, /healthz, /readyz, /status", port);
  return std::move(*server);
}

}  // namespace tfboot::observe
