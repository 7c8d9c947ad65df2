// A relay of the start tree (control/protocol/tree.h): the tasks of its group connect to it as they
// would to the coordinator, and one connection of its own carries all of them to the coordinator.
// It says nothing of its own to them: the coordinator's messages pass through once per hop, the
// tasks' go up (their heartbeats gathered into one via per beat). Runs on a thread of its own for
// as long as its tfboot runs, across the job's restarts in place; the task it belongs to joins the
// coordinator on a connection of its own, as every task does.
#pragma once

#include <chrono>
#include <memory>

#include "base/error.h"
#include "control/job_settings.h"

namespace tfboot {

class Relay {
 public:
  virtual ~Relay() = default;
  // Delivers what its group still has to read (at most `at_most`), then closes every connection.
  virtual void finish(std::chrono::milliseconds at_most) = 0;
};

// Listens on `listener_address` ("" : every address) port settings.relay_port and starts the
// thread; `own` is the task's hello, which the relay's own connection proves itself with.
Result<std::unique_ptr<Relay>> start_relay(const JobSettings& settings, const Hello& own, const std::string& listener_address);

// This process's relay, once started (join_job starts it at its first join); finished before an
// exec replaces the process, so that its group reads the start first.
void keep_relay(std::unique_ptr<Relay> relay);
bool relay_running();
void finish_relay(std::chrono::milliseconds at_most);

}  // namespace tfboot
