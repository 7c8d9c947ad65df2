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

TEST_CASE("member names: a connection from another address than its name's is a stranger in the task's place") {
  auto from = [](MemberInfo info, std::string source) {
    info.source = std::move(source);
    return info;
  };
  // The stranger copied worker-1's address into its hello; where it connects from it cannot fake.
  const std::vector<MemberInfo> members{from(member(0, {"10.0.0.1"}), ""), from(member(1, {"10.0.0.2"}), "10.0.0.66"),
                                        from(member(2, {"10.0.0.3"}), "10.0.0.3"), from(member(3, {"10.0.0.4"}), "127.0.0.1")};
  const std::vector<NameStatus> answers{answer("worker-0.train", {"10.0.0.1"}), answer("worker-1.train", {"10.0.0.2"}),
                                        answer("worker-2.train", {"10.0.0.3"}), answer("worker-3.train", {"10.0.0.4"})};
  auto check = check_member_names(members, answers, true);
  REQUIRE(check.strangers.size() == 1);
  CHECK(check.strangers[0].position == 1);
  CHECK(check.strangers[0].problem == "a connection from 10.0.0.66 claimed it, but worker-1.train resolves to 10.0.0.2");
  CHECK(check.mismatched == std::vector<std::size_t>{1});
  CHECK(check.problems == "worker:1 on host 'worker-1': a connection from 10.0.0.66 claimed it, but worker-1.train resolves to 10.0.0.2");
  SUBCASE("a name pointing at another task's address is a wrong record, not a stranger") {
    auto wrong = members;
    wrong[1].source = "10.0.0.2";
    wrong[2].source = "10.0.0.3";
    auto stale = check_member_names(wrong, {answers[0], answers[1], answer("worker-2.train", {"10.0.0.2"}), answers[3]}, true);
    CHECK(stale.strangers.empty());
    CHECK(stale.mismatched == std::vector<std::size_t>{2});
  }
  SUBCASE("with the check off (a NAT), the source is not compared") {
    auto unchecked = check_member_names(members, answers, false);
    CHECK(unchecked.strangers.empty());
    CHECK(unchecked.mismatched.empty());
  }
}

}  // namespace tfboot
