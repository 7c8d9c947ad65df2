// The job's control channel, pure: events in, decisions out; time is passed in and nothing here
// touches a socket (control/socket.h and the join and link files do). One header for all of it:
//   control/protocol/messages.h   message types, framing, encoding and the validating parser (the wire)
//   control/protocol/handshake.h  the shared-secret proofs and the checks of the first messages
//   control/protocol/barrier.h    the start barrier's state, as the coordinator keeps it
//   control/protocol/network_check.h  --preflight network: the schedule of partners and the verdict on the links
//   control/protocol/watch.h      the job after the start: JobMonitor (coordinator), CoordinatorWatch (task)
//   control/protocol/tree.h       above 128 tasks: who joins through which relay, and the relays' frames
#pragma once

#include "control/protocol/barrier.h"
#include "control/protocol/handshake.h"
#include "control/protocol/messages.h"
#include "control/protocol/network_check.h"
#include "control/protocol/tree.h"
#include "control/protocol/watch.h"
