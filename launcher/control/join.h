// The job's control channel over TCP: the start barrier, then the link that the supervisor's poll
// loop keeps while the command runs. Effectful (sockets, poll); the decisions are made by the
// pure types of control/protocol/protocol.h.
//
// How run.cpp and the supervisor use it:
//   auto link = join_job(settings, read_fingerprint(env));  // blocks until the start, or an Error
//   link->start_info().environment_differences              // warn-level lines, for startup.json
//   exec mode:  link.reset(), then exec (the sockets are CLOEXEC anyway)
//   init mode:  each turn of the poll loop
//                 link->add_poll_fds(fds);  timeout until link->next_wakeup();  poll(fds)
//                 for (const JobEvent& event : link->process(fds, now)) ...
//                   job_done         -> stop the command (SIGTERM, SIGKILL after --stop-grace), exit 0
//                   task_failed      -> stop the command, exit exit_code::job_stopped (event.message)
//                   coordinator_lost -> the same
//               when the command ends: link->report_exit(status); link->finish(bound);
#pragma once

#include <memory>

#include "base/error.h"
#include "control/job_settings.h"
#include "control/link.h"
#include "fingerprint/fingerprint.h"

namespace tfboot {

// The start barrier. Returns once the coordinator says start, or an Error:
//   exit_code::start_barrier_incomplete at the deadline (the coordinator names each missing
//     task, its host if known and its last error; a task says what it last saw),
//   exit_code::environment_mismatch with --env-check fail (on every task),
//   exit_code::usage for bad settings, exit_code::resources when the port cannot be opened.
// Progress is logged every progress_every.
Result<std::unique_ptr<JobLink>> join_job(const JobSettings& settings, const Fingerprint& own);

}  // namespace tfboot
