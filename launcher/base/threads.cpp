#include "base/threads.h"

#include <pthread.h>
#include <signal.h>

#include <string>
#include <system_error>

namespace tfboot {

Result<std::thread> start_thread_without_signals(std::function<void()> body, std::string_view what) {
  sigset_t all;
  sigset_t before;
  ::sigfillset(&all);
  // The new thread inherits the creating thread's mask, which is put back at once.
  if (int failed = ::pthread_sigmask(SIG_SETMASK, &all, &before); failed != 0) {
    return errno_error(exit_code::resources, std::string(what) + ": pthread_sigmask", failed);
  }
  Result<std::thread> started;
  try {
    started = std::thread(std::move(body));
  } catch (const std::system_error& error) {
    started = make_error(exit_code::resources, std::string(what) + ": cannot start its thread: " + error.what());
  }
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return started;
}

}  // namespace tfboot
