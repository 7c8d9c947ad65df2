// The coordinator's check of the job's DNS names against what each task reported. Pure.
#include "flow/member_names.h"

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "base/text.h"

namespace tfboot {
namespace {

bool points_at(const std::vector<std::string>& resolved, const std::vector<std::string>& reported) {
  if (reported.empty()) return true;
  return std::ranges::any_of(resolved, [&](const std::string& address) {
    return is_loopback_address(address) || std::ranges::find(reported, address) != reported.end();
  });
}

// The answers the task confirmed (in DNS order), so that --address ip never writes one it does
// not have; all of them when none can be compared (loopback, a task without addresses).
std::vector<std::string> confirmed(const std::vector<std::string>& resolved, const std::vector<std::string>& reported) {
  std::vector<std::string> kept;
  for (const auto& address : resolved) {
    if (std::ranges::find(reported, address) != reported.end()) kept.push_back(address);
  }
  return kept.empty() ? resolved : kept;
}

}  // namespace

MemberNameCheck check_member_names(const std::vector<MemberInfo>& members, const std::vector<NameStatus>& resolved,
                                   bool check_sources) {
  MemberNameCheck check;
  check.table = members;
  // A name that points at another task's address is a wrong record (a stale one, a wrong
  // Service), whoever holds the connection; pointing where no task connected from, while the
  // connection comes from elsewhere, a stranger holds the task's place.
  std::unordered_set<std::string_view> sources;
  for (const auto& member : members) {
    if (!member.source.empty()) sources.insert(member.source);
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    const MemberInfo& member = members[i];
    std::string problem;
    if (i >= resolved.size() || !resolved[i].resolved) {
      problem = member.name + " does not resolve" + (i < resolved.size() ? " (" + describe(resolved[i]) + ")" : "");
      check.table[i].addresses.clear();
    } else {
      check.table[i].addresses = confirmed(resolved[i].addresses, member.addresses);
      const bool from_its_address = !check_sources || member.source.empty() || is_loopback_address(member.source) ||
                                    points_at(resolved[i].addresses, {member.source});
      if (from_its_address && points_at(resolved[i].addresses, member.addresses)) continue;
      const bool at_another_task = std::ranges::any_of(resolved[i].addresses, [&](const std::string& address) { return sources.contains(address); });
      if (!from_its_address && !at_another_task) {
        // The name asked, not the one the hello gave: a stranger's hello says what it likes.
        problem = "a connection from " + member.source + " claimed it, but " + resolved[i].name + " resolves to " + joined(resolved[i].addresses, ",");
        check.strangers.push_back({i, problem});
      } else {
        problem = member.name + " resolves to " + joined(resolved[i].addresses, ",") + ", but the task has " + joined(member.addresses, ",");
      }
    }
    check.mismatched.push_back(i);
    std::string host = member.host.empty() ? "" : " on host '" + member.host + "'";
    check.problems += (check.problems.empty() ? "" : "; ") + member.task.text() + host + ": " + problem;
  }
  return check;
}

}  // namespace tfboot
