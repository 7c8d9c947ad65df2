// A command's last lines of stderr and the one that names its failure (process/output_tail.h).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "process/output_tail.h"

namespace tfboot {
namespace {

std::deque<std::string> tail_of(const std::vector<std::string>& lines) {
  OutputTail tail;
  for (const auto& line : lines) tail.add(line);
  return tail.lines();
}

TEST_CASE("output_tail::failure_line") {
  struct Row {
    const char* behaviour;
    std::vector<std::string> lines;
    std::string expected;
  };
  const std::vector<Row> rows = {
      {"a traceback ends with its exception",
       {"Traceback (most recent call last):", "  File \"train.py\", line 3, in <module>", "    boom()",
        "RuntimeError: CUDA error: out of memory"},
       "RuntimeError: CUDA error: out of memory"},
      {"what a library prints after the traceback does not hide it",
       {"RuntimeError: CUDA error: out of memory", "[W ProcessGroupNCCL.cpp:1250] destroyed", ""},
       "RuntimeError: CUDA error: out of memory"},
      {"a chained traceback's last exception is the one", {"ValueError: inner", "During handling ...:", "KeyError: 'x'"}, "KeyError: 'x'"},
      {"a dotted exception name", {"torch.OutOfMemoryError: CUDA out of memory."}, "torch.OutOfMemoryError: CUDA out of memory."},
      {"an exception without a message", {"KeyboardInterrupt"}, "KeyboardInterrupt"},
      {"an indented exception is a frame's source, not the end", {"oops", "    raise RuntimeError('x')"}, "raise RuntimeError('x')"},
      {"a sentence before a colon is no exception line", {"DataError: bad shard", "epoch 3 failed: nan loss"}, "DataError: bad shard"},
      {"without an exception, the last line that is not blank", {"Segmentation fault", "  ", ""}, "Segmentation fault"},
      {"control characters become spaces", {"\x1b[31mfailed\x1b[0m"}, "[31mfailed [0m"},
      {"nothing said is nothing", {"", " "}, ""},
  };
  for (const Row& row : rows) {
    const std::string behaviour = row.behaviour;
    CAPTURE(behaviour);
    CHECK(failure_line(tail_of(row.lines)) == row.expected);
  }
}

TEST_CASE("output_tail::bounds") {
  SUBCASE("only the last lines are kept") {
    OutputTail tail;
    tail.add("ValueError: early");
    for (std::size_t i = 0; i < OutputTail::max_lines; ++i) tail.add("line " + std::to_string(i));
    CHECK(tail.lines().size() == OutputTail::max_lines);
    CHECK(failure_line(tail.lines()) == "line " + std::to_string(OutputTail::max_lines - 1));
  }
  SUBCASE("a long line is cut, never inside a UTF-8 character") {
    std::string line = "RuntimeError: " + std::string(max_failure_line - 15, 'x') + "\xc3\xa9" + std::string(1000, 'y');
    const std::string found = failure_line(tail_of({line}));
    CHECK(found == line.substr(0, max_failure_line - 1) + "...");
  }
}

}  // namespace
}  // namespace tfboot
