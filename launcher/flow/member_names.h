// The coordinator's check of the job's DNS names once every task is present (docs/supervision.md: Job
// supervision, "DNS behind the barrier"): each task's name must resolve to an address that task
// reported in its hello. Pure.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "control/protocol/messages.h"
#include "dns/wait.h"

namespace tfboot {

struct MemberNameCheck {
  std::vector<MemberInfo> table;        // the members, each with the addresses its name resolves to
                                        // that its task has (all of them when none compares)
  std::vector<std::size_t> mismatched;  // positions in `table` whose name does not point at its task
  struct Stranger {
    std::size_t position;
    std::string problem;  // "a connection from 10.0.0.66 claimed it, but w-1.svc resolves to 10.0.0.2"
  };
  std::vector<Stranger> strangers;      // of those, the ones whose connection came from elsewhere
  std::string problems;                 // one clause per mismatched member, for the log and the error
};

// `resolved[i]` answers for members[i].name. A name is right when one of its addresses is one its
// task reported, when an address is loopback (nothing to compare it with: it is the asking host),
// or when the task reported none. With `check_sources`, the address the task's connection came
// from must be one of the name's addresses too (a loopback source or answer passes): what a task
// reports it can make up, where its connection comes from it cannot. Such a member is a stranger
// unless its name points at an address another task connected from (then the record is wrong).
MemberNameCheck check_member_names(const std::vector<MemberInfo>& members, const std::vector<NameStatus>& resolved,
                                   bool check_sources = false);

}  // namespace tfboot
