// The backoff between retries and the duration text that log lines and errors show.
#include <doctest/doctest.h>

#include <algorithm>

#include "base/clock.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

TEST_CASE("clock::Backoff") {
  SUBCASE("the delay doubles up to the cap, half of it jitter") {
    Backoff backoff(100ms, 1000ms, 7);
    for (int failures = 1; failures < 30; ++failures) {
      auto delay = backoff.delay_after(failures);
      std::chrono::milliseconds full = std::min<std::chrono::milliseconds>(100ms * (1LL << std::min(failures - 1, 20)), 1000ms);
      CHECK(delay >= full / 2);
      CHECK(delay <= full);
    }
  }
  SUBCASE("the same seed gives the same delays") {
    Backoff first(100ms, 2s, 42), second(100ms, 2s, 42);
    for (int failures = 1; failures < 10; ++failures) CHECK(first.delay_after(failures) == second.delay_after(failures));
  }
}

TEST_CASE("clock::seconds_text") {
  CHECK(seconds_text(11s) == "11s");
  CHECK(seconds_text(900s) == "900s");
  CHECK(seconds_text(1500ms) == "1.5s");
  CHECK(seconds_text(600ms) == "0.6s");
  CHECK(seconds_text(10s + 1ms) == "10s");  // to the tenth
  CHECK(seconds_text(12340ms) == "12.3s");
  CHECK(seconds_text(0ms) == "0s");
}

}  // namespace
}  // namespace tfboot
