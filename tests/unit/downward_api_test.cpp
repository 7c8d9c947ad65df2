// The downward API's labels and annotations files: key="value" lines, values quoted as Go's %q does.
#include <doctest/doctest.h>

#include <string>

#include "plan/platforms/downward_api.h"
#include "test_support.h"

namespace tfboot {
namespace {

// A labels file as the kubelet writes it: keys sorted, no newline after the last line.
const std::string labels =
    "batch.kubernetes.io/job-completion-index=\"0\"\n"
    "jobset.sigs.k8s.io/jobset-name=\"bert\"\n"
    "jobset.sigs.k8s.io/replicatedjob-name=\"worker\"";

std::string value_of(const std::string& text, const std::string& key) {
  auto value = downward_api_value(text, key, "/etc/podinfo/labels");
  if (!value) return "error " + std::to_string(value.error().code) + ": " + value.error().message;
  return *value ? "'" + **value + "'" : "absent";
}

}  // namespace

TEST_CASE("downward_api::downward_api_value") {
  SUBCASE("finds a key's value, first, middle or last line") {
    CHECK(value_of(labels, "batch.kubernetes.io/job-completion-index") == "'0'");
    CHECK(value_of(labels, "jobset.sigs.k8s.io/jobset-name") == "'bert'");
    CHECK(value_of(labels, "jobset.sigs.k8s.io/replicatedjob-name") == "'worker'");
  }
  SUBCASE("a key that is only a prefix of another is absent") {
    CHECK(value_of(labels, "jobset.sigs.k8s.io/jobset") == "absent");
    CHECK(value_of(labels, "jobset.sigs.k8s.io/job-index") == "absent");
  }
  SUBCASE("an empty file, or a missing key, is absent") {
    CHECK(value_of("", "jobset.sigs.k8s.io/jobset-name") == "absent");
    CHECK(value_of("a=\"1\"\n", "b") == "absent");
  }
  SUBCASE("an annotation's value keeps what Go's quoting escaped") {
    CHECK(value_of("tfboot/cluster=\"chief=1,worker=4\"", "tfboot/cluster") == "'chief=1,worker=4'");
    CHECK(value_of(R"(note="say \"hi\"\\ now")", "note") == R"('say "hi"\ now')");
    CHECK(value_of(R"(text="a\nb\tc")", "text") == "'a\nb\tc'");
    CHECK(value_of(R"(e="caf\u00e9 \U0001F600 \x41")", "e") == "'caf\xc3\xa9 \xf0\x9f\x98\x80 A'");
    CHECK(value_of("raw=\"caf\xc3\xa9\"", "raw") == "'caf\xc3\xa9'");
  }
  SUBCASE("other malformed lines do not matter") {
    CHECK(value_of("broken\njobset.sigs.k8s.io/jobset-name=\"bert\"\nalso broken=\"", "jobset.sigs.k8s.io/jobset-name") == "'bert'");
  }
  SUBCASE("a malformed line for the key is a usage error naming the file") {
    const std::string error = "error 2: /etc/podinfo/labels: the line of 'k' is not k=\"<value>\"";
    CHECK(value_of("k=bert", "k") == error);
    CHECK(value_of("k=\"bert", "k") == error);
    CHECK(value_of("k=\"be\"rt\"", "k") == error);
    CHECK(value_of(R"(k="\q")", "k") == error);
    CHECK(value_of(R"(k="\u12")", "k") == error);
    CHECK(value_of(R"(k="\ud800")", "k") == error);
    CHECK(value_of(R"(k="\")", "k") == error);
  }
}

TEST_CASE("downward_api::unquote_go_string") {
  CHECK(unquote_go_string(R"("")") == std::string());
  CHECK(unquote_go_string(R"("\a\b\f\n\r\t\v")") == std::string("\a\b\f\n\r\t\v"));
  CHECK(unquote_go_string(R"("\xff")") == std::string("\xff"));
  CHECK_FALSE(unquote_go_string("\""));
  CHECK_FALSE(unquote_go_string("plain"));
  CHECK_FALSE(unquote_go_string(R"("\U00110000")"));
}

}  // namespace tfboot
