// The coordinator's check of every task's DNS name against the addresses the task reported.
#include "flow/member_names.h"

#include <doctest/doctest.h>

namespace tfboot {
namespace {

MemberInfo member(int index, std::vector<std::string> addresses) {
  return MemberInfo{JobMember{TaskType::worker, index}, "worker-" + std::to_string(index), "worker-" + std::to_string(index) + ".train",
                    std::move(addresses)};
}

NameStatus answer(const std::string& name, std::vector<std::string> addresses) {
  NameStatus status{.name = name, .resolved = true, .tries = 1};
  status.addresses = std::move(addresses);
  return status;
}

}  // namespace

TEST_CASE("member names: the table carries the resolved addresses, in DNS order") {
  auto check = check_member_names({member(0, {"10.0.0.1"}), member(1, {"10.0.0.2", "fd00::2"})},
                                  {answer("worker-0.train", {"10.0.0.1"}), answer("worker-1.train", {"fd00::2", "10.0.0.2"})});
  CHECK(check.mismatched.empty());
  CHECK(check.problems.empty());
  REQUIRE(check.table.size() == 2);
  CHECK(check.table[1].addresses == std::vector<std::string>{"fd00::2", "10.0.0.2"});
  CHECK(check.table[1].host == "worker-1");
}

TEST_CASE("member names: the table keeps only the answers the task has, unless none compares") {
  auto check = check_member_names({member(0, {"10.0.0.1"}), member(1, {"10.0.0.2"})},
                                  {answer("worker-0.train", {"10.0.0.9", "10.0.0.1"}), answer("worker-1.train", {"127.0.1.1"})});
  CHECK(check.mismatched.empty());
  CHECK(check.table[0].addresses == std::vector<std::string>{"10.0.0.1"});   // never the stale 10.0.0.9
  CHECK(check.table[1].addresses == std::vector<std::string>{"127.0.1.1"});  // loopback: nothing to compare
}

TEST_CASE("member names: a name pointing at another address is named with both") {
  auto check = check_member_names({member(0, {"10.0.0.1"}), member(1, {"10.0.0.2"})},
                                  {answer("worker-0.train", {"10.0.0.1"}), answer("worker-1.train", {"10.0.0.9"})});
  CHECK(check.mismatched == std::vector<std::size_t>{1});
  CHECK(check.problems == "worker:1 on host 'worker-1': worker-1.train resolves to 10.0.0.9, but the task has 10.0.0.2");
}

TEST_CASE("member names: loopback answers and tasks without addresses cannot be compared, and pass") {
  auto check = check_member_names({member(0, {"10.0.0.1"}), member(1, {}), member(2, {"10.0.0.3"})},
                                  {answer("worker-0.train", {"127.0.0.1"}), answer("worker-1.train", {"10.0.0.7"}),
                                   answer("worker-2.train", {"::1"})});
  CHECK(check.mismatched.empty());
  CHECK(is_loopback_address("127.3.4.5"));
  CHECK_FALSE(is_loopback_address("10.127.0.1"));
  CHECK_FALSE(is_loopback_address("::2"));
}

TEST_CASE("member names: a name that does not resolve is a problem with its last error") {
  NameStatus missing{.name = "worker-1.train", .tries = 3, .last_status = LookupStatus::not_published, .last_error = "NXDOMAIN"};
  auto check = check_member_names({member(0, {"10.0.0.1"}), member(1, {"10.0.0.2"})}, {answer("worker-0.train", {"10.0.0.1"}), missing});
  CHECK(check.mismatched == std::vector<std::size_t>{1});
  CHECK(check.problems == "worker:1 on host 'worker-1': worker-1.train does not resolve (not published yet: NXDOMAIN)");
  CHECK(check.table[1].addresses.empty());
}

}  // namespace tfboot
