// The small text helpers every layer uses: split, split_non_empty, lines.
#include <doctest/doctest.h>

#include "base/text.h"

namespace tfboot {
namespace {

using Parts = std::vector<std::string_view>;

TEST_CASE("text::split") {
  CHECK(split("a,,b", ',') == Parts{"a", "", "b"});
  CHECK(split("", ',') == Parts{""});  // an empty list is one empty item, for the caller to refuse
  CHECK(split("a,", ',') == Parts{"a", ""});
  CHECK(split_non_empty("/a::/b:", ':') == Parts{"/a", "/b"});
  CHECK(split_non_empty("", ':').empty());
}

TEST_CASE("text::joined") {
  CHECK(joined({"10.0.0.1", "fd00::1"}, ",") == "10.0.0.1,fd00::1");
  CHECK(joined({"eth0"}, ", ") == "eth0");
  CHECK(joined({}, ",").empty());
  CHECK(joined({"", ""}, ",") == ",");
}

TEST_CASE("text::lines") {
  CHECK(lines("a\n\nb") == Parts{"a", "", "b"});
  CHECK(lines("a\n") == Parts{"a"});  // a final newline starts no line
  CHECK(lines("a") == Parts{"a"});
  CHECK(lines("").empty());
}

TEST_CASE("text::counted") {
  CHECK(counted(0, "task") == "0 tasks");
  CHECK(counted(1, "task") == "1 task");
  CHECK(counted(2, "name") == "2 names");
}

TEST_CASE("text::signal_name") {
  CHECK(signal_name(2) == "SIGINT");
  CHECK(signal_name(15) == "SIGTERM");
  CHECK(signal_name(40) == "signal 40");
}

}  // namespace
}  // namespace tfboot
