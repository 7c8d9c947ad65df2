// The job's control channel after the start: the JobLink each side keeps while the command runs
// (the coordinator's over every supervised task, a task's over the coordinator). Made by the
// join files once the start barrier is passed; run.cpp and the supervisor use them via control.h.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "control/control.h"
#include "control/socket.h"

namespace tfboot {

// Heartbeats to every supervised task in `tasks`, their exits and silences into a JobMonitor, its
// decisions out to every task; a new connection on `listener` (if kept) is refused at once.
std::unique_ptr<JobLink> make_coordinator_link(StartInfo info, const JobSettings& settings, Socket listener,
                                               std::map<JobMember, Channel> tasks,
                                               const std::vector<JobMonitor::Watched>& watched, Instant now);

// Heartbeats to the coordinator over `channel`, its done/stop in, our exit out. Without a
// channel (one side does not supervise) the link is inert.
std::unique_ptr<JobLink> make_task_link(StartInfo info, const JobSettings& settings, std::optional<Channel> channel,
                                        Instant now);

}  // namespace tfboot
