// What the metrics server answers (docs/observing.md): /metrics, /healthz, /readyz and,
// on the coordinator, /status, all read from the process's start record.
#pragma once

#include <memory>

#include "observe/http_server.h"

namespace tfboot::observe {

HttpResponse answer(const HttpRequest& request);

// The server on --metrics-port, or nothing (with a warning) when the port cannot be opened: the
// metrics are never a reason for a task not to start.
std::unique_ptr<HttpServer> serve_start_record(int port);

}  // namespace tfboot::observe
