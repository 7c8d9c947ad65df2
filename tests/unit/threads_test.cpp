// Threads of tfboot's own start with every signal blocked, and leave the caller's mask as it was.
#include <doctest/doctest.h>

#include <pthread.h>
#include <signal.h>

#include "base/threads.h"

namespace tfboot {
namespace {

sigset_t current_mask() {
  sigset_t mask;
  ::sigemptyset(&mask);
  ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return mask;
}

TEST_CASE("threads::start_thread_without_signals") {
  const sigset_t before = current_mask();
  REQUIRE(::sigismember(&before, SIGTERM) == 0);  // the test runs with SIGTERM deliverable
  sigset_t seen;
  ::sigemptyset(&seen);
  auto thread = start_thread_without_signals([&seen] { seen = current_mask(); }, "test");
  REQUIRE(thread.has_value());
  thread->join();
  for (int signal_number : {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGCHLD, SIGUSR1}) {
    CAPTURE(signal_number);
    CHECK(::sigismember(&seen, signal_number) == 1);
  }
  const sigset_t after = current_mask();
  for (int signal_number : {SIGTERM, SIGINT, SIGCHLD}) CHECK(::sigismember(&after, signal_number) == ::sigismember(&before, signal_number));
}

}  // namespace
}  // namespace tfboot
