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

TEST_CASE("text::lines") {
  CHECK(lines("a\n\nb") == Parts{"a", "", "b"});
  CHECK(lines("a\n") == Parts{"a"});  // a final newline starts no line
  CHECK(lines("a") == Parts{"a"});
  CHECK(lines("").empty());
}

}  // namespace
}  // namespace tfboot
