// Slurm's hostlist and tasks-per-node syntax, as Slurm writes them into SLURM_*_NODELIST and
// SLURM_*_TASKS_PER_NODE.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "plan/platforms/slurm_hostlist.h"
#include "test_support.h"

namespace tfboot {
namespace {

// "a b c" for the hosts, or "error 2: <message>".
std::string hosts_of(const std::string& value) {
  auto hosts = expand_hostlist(Setting{value, "SLURM_STEP_NODELIST"});
  if (!hosts) return "error " + std::to_string(hosts.error().code) + ": " + hosts.error().message;
  std::string text;
  for (const auto& host : *hosts) text += (text.empty() ? "" : " ") + host;
  return text;
}

std::string tasks_of(const std::string& value) {
  auto counts = expand_tasks_per_node(Setting{value, "SLURM_STEP_TASKS_PER_NODE"});
  if (!counts) return "error " + std::to_string(counts.error().code) + ": " + counts.error().message;
  std::string text;
  for (int count : *counts) text += (text.empty() ? "" : " ") + std::to_string(count);
  return text;
}

struct Row {
  const char* behaviour;
  std::string value;
  std::string expected;
};

}  // namespace

TEST_CASE("slurm_hostlist::expand_hostlist") {
  SUBCASE("names and ranges, in the order written") {
    const Row rows[] = {
        {"one plain name", "cpu1", "cpu1"},
        {"plain names", "a,b,c", "a b c"},
        {"a range and a plain name (the issue's example)", "gpu[07-08],cpu1", "gpu07 gpu08 cpu1"},
        {"several ranges in one bracket, zero padded", "nid00[2285-2286,2718]", "nid002285 nid002286 nid002718"},
        {"a single number in brackets", "node[5]", "node5"},
        {"the padding of a range is its first number's width", "n[08-11]", "n08 n09 n10 n11"},
        {"no padding: numbers grow in width", "n[8-11]", "n8 n9 n10 n11"},
        {"wider padding than the numbers need", "n[001-003]", "n001 n002 n003"},
        {"each range keeps its own width", "n[1-2,010-011]", "n1 n2 n010 n011"},
        {"two brackets in one name: the first varies slowest", "r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2"},
        {"three brackets, libslurm's order: the last fastest, then the first, the middle slowest (the issue's example)",
         "row[0,1]_rack[2-3]_blade[4,5]",
         "row0_rack2_blade4 row0_rack2_blade5 row1_rack2_blade4 row1_rack2_blade5 "
         "row0_rack3_blade4 row0_rack3_blade5 row1_rack3_blade4 row1_rack3_blade5"},
        {"four brackets: the last fastest, then the first, second and third", "x[1-2]y[3-4]z[5-6]w[7-8]",
         "x1y3z5w7 x1y3z5w8 x2y3z5w7 x2y3z5w8 x1y4z5w7 x1y4z5w8 x2y4z5w7 x2y4z5w8 "
         "x1y3z6w7 x1y3z6w8 x2y3z6w7 x2y3z6w8 x1y4z6w7 x1y4z6w8 x2y4z6w7 x2y4z6w8"},
        {"each bracket keeps its own padding", "n[08-09]m[007-008]", "n08m007 n08m008 n09m007 n09m008"},
        {"adjacent brackets", "n[1-2][3-4]", "n13 n14 n23 n24"},
        {"a name that is only a bracket", "[1-2]", "1 2"},
        {"text between brackets may hold dashes", "a[1-2]b-c[3-4]", "a1b-c3 a1b-c4 a2b-c3 a2b-c4"},
        {"numbers of 10 digits and more", "n[1234567890-1234567891]", "n1234567890 n1234567891"},
        {"across 2^32", "n[4294967295-4294967296]", "n4294967295 n4294967296"},
        {"up to 2^64-1", "n[18446744073709551614-18446744073709551615]", "n18446744073709551614 n18446744073709551615"},
        {"a long zero-padded number keeps its width", "n[0001234567890]", "n0001234567890"},
        {"a range ending wider than it starts", "n[098-100]", "n098 n099 n100"},
        {"a range ending in more digits than the padding keeps the first's", "n[1-0002]", "n1 n2"},
        {"several bracketed names", "a[1-2],b[3-4]", "a1 a2 b3 b4"},
        {"whitespace separates as well as commas", "a1 a2\tb1", "a1 a2 b1"},
        {"a newline separates nothing, as in libslurm (the host name check refuses it)", "a1\na2", "a1\na2"},
        {"a run of separators counts as one", "a1,,  a2,", "a1 a2"},
        {"a range of one", "x[3-3]", "x3"},
        {"order is kept, not sorted", "z1,a[3-4],b1", "z1 a3 a4 b1"},
        {"names with dots and dashes", "node-1.cluster,node-2.cluster", "node-1.cluster node-2.cluster"},
    };
    for (const Row& row : rows) {
      CAPTURE(row.behaviour);
      CHECK(hosts_of(row.value) == row.expected);
    }
  }
  SUBCASE("malformed lists are usage errors naming the variable") {
    const Row rows[] = {
        {"empty", "", "error 2: SLURM_STEP_NODELIST '' names no host"},
        {"only separators", " , ", "error 2: SLURM_STEP_NODELIST ' , ' names no host"},
        {"unclosed bracket", "gpu[07-08", "error 2: SLURM_STEP_NODELIST 'gpu[07-08': '[' without ']'"},
        {"closing bracket alone", "gpu07]", "error 2: SLURM_STEP_NODELIST 'gpu07]': ']' without '['"},
        {"nested brackets", "a[1-[2]]", "error 2: SLURM_STEP_NODELIST 'a[1-[2]]': '[' inside brackets"},
        {"empty brackets", "a[]",
         "error 2: SLURM_STEP_NODELIST 'a[]': '[]' holds '', which is not a number or a range <first>-<last>"},
        {"a range without its end", "gpu[07-]",
         "error 2: SLURM_STEP_NODELIST 'gpu[07-]': '[07-]' holds '07-', which is not a number or a range <first>-<last>"},
        {"letters in a range", "gpu[a-b]",
         "error 2: SLURM_STEP_NODELIST 'gpu[a-b]': '[a-b]' holds 'a-b', which is not a number or a range <first>-<last>"},
        {"an empty range between commas", "n[1,,2]",
         "error 2: SLURM_STEP_NODELIST 'n[1,,2]': '[1,,2]' holds '', which is not a number or a range <first>-<last>"},
        {"three numbers in a range", "n[1-2-3]",
         "error 2: SLURM_STEP_NODELIST 'n[1-2-3]': '[1-2-3]' holds '1-2-3', which is not a number or a range <first>-<last>"},
        {"a range running backwards", "n[5-3]", "error 2: SLURM_STEP_NODELIST 'n[5-3]': range '5-3' runs backwards"},
        {"Slurm's 3-D boxes are not supported", "bgl[123x456]",
         "error 2: SLURM_STEP_NODELIST 'bgl[123x456]': '[123x456]' holds '123x456', which is not a number or a range "
         "<first>-<last>"},
        {"a number beyond 2^64-1 (libslurm would read 18446744073709551615)", "n[18446744073709551616]",
         "error 2: SLURM_STEP_NODELIST 'n[18446744073709551616]': '[18446744073709551616]' holds '18446744073709551616', "
         "which is not a number or a range <first>-<last>"},
        {"text after the brackets, which libslurm refuses", "gpu-a[01-02]-ib",
         "error 2: SLURM_STEP_NODELIST 'gpu-a[01-02]-ib': 'gpu-a[01-02]-ib' goes on after its last ']', which Slurm's lists never do"},
        {"text after several brackets", "n[1-2],a[1-2]b[3-4]c",
         "error 2: SLURM_STEP_NODELIST 'n[1-2],a[1-2]b[3-4]c': 'a[1-2]b[3-4]c' goes on after its last ']', which Slurm's lists never do"},
        {"a number wider than a host name can be", "n[" + std::string(260, '0') + "1]",
         "error 2: SLURM_STEP_NODELIST 'n[" + std::string(260, '0') + "1]' gives a host name longer than 253 characters"},
        {"a runaway range", "n[0-999999999]", "error 2: SLURM_STEP_NODELIST 'n[0-999999999]' gives more than 100000 hosts"},
        {"brackets multiplying beyond the limit", "n[0-999]m[0-999]",
         "error 2: SLURM_STEP_NODELIST 'n[0-999]m[0-999]' gives more than 100000 hosts"},
    };
    for (const Row& row : rows) {
      CAPTURE(row.behaviour);
      CHECK(hosts_of(row.value) == row.expected);
    }
  }
  SUBCASE("exactly the limit is fine") {
    auto hosts = expand_hostlist(Setting{"n[1-100000]", "SLURM_JOB_NODELIST"});
    REQUIRE_MESSAGE(hosts, error_of(hosts));
    CHECK(hosts->size() == max_slurm_hosts);
    CHECK(hosts->front() == "n1");
    CHECK(hosts->back() == "n100000");
    auto one_more = expand_hostlist(Setting{"n[1-100000],m", "SLURM_JOB_NODELIST"});
    CHECK(error_of(one_more) == "SLURM_JOB_NODELIST 'n[1-100000],m' gives more than 100000 hosts");
  }
}

TEST_CASE("slurm_hostlist::expand_tasks_per_node") {
  SUBCASE("counts and (xN) repeats, node by node") {
    const Row rows[] = {
        {"one node", "4", "4"},
        {"one count per node", "2,1,3", "2 1 3"},
        {"a repeat (the issue's example)", "2,1(x2)", "2 1 1"},
        {"repeats only", "1(x4)", "1 1 1 1"},
        {"repeats between counts", "3,2(x2),1", "3 2 2 1"},
        {"a repeat of one", "5(x1)", "5"},
    };
    for (const Row& row : rows) {
      CAPTURE(row.behaviour);
      CHECK(tasks_of(row.value) == row.expected);
    }
  }
  SUBCASE("malformed values are usage errors naming the variable") {
    const std::string form = " is not <tasks> or <tasks>(x<nodes>)";
    const Row rows[] = {
        {"empty", "", "error 2: SLURM_STEP_TASKS_PER_NODE '': ''" + form},
        {"an empty item", "2,,1", "error 2: SLURM_STEP_TASKS_PER_NODE '2,,1': ''" + form},
        {"letters", "two", "error 2: SLURM_STEP_TASKS_PER_NODE 'two': 'two'" + form},
        {"a negative count", "-1", "error 2: SLURM_STEP_TASKS_PER_NODE '-1': '-1'" + form},
        {"a repeat without x", "2(3)", "error 2: SLURM_STEP_TASKS_PER_NODE '2(3)': '2(3)'" + form},
        {"an unclosed repeat", "2(x3", "error 2: SLURM_STEP_TASKS_PER_NODE '2(x3': '2(x3'" + form},
        {"a repeat of nothing", "2(x)", "error 2: SLURM_STEP_TASKS_PER_NODE '2(x)': '2(x)'" + form},
        {"a repeat of zero", "2(x0)", "error 2: SLURM_STEP_TASKS_PER_NODE '2(x0)': '2(x0)'" + form},
        {"text after the repeat", "2(x3)y", "error 2: SLURM_STEP_TASKS_PER_NODE '2(x3)y': '2(x3)y'" + form},
        {"a runaway repeat", "1(x999999999)", "error 2: SLURM_STEP_TASKS_PER_NODE '1(x999999999)' gives more than 100000 nodes"},
    };
    for (const Row& row : rows) {
      CAPTURE(row.behaviour);
      CHECK(tasks_of(row.value) == row.expected);
    }
  }
}

}  // namespace tfboot
