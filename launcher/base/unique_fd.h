// An owned file descriptor, closed when its owner goes, so that no error path leaks one (ninja's
// Subprocess closes its pipe the same way).
#pragma once

#include <unistd.h>

#include <utility>

namespace tfboot {

// Move-only. Only for descriptors whose close() result does not matter (reads, sockets, pipes):
// a file that was written is closed by hand, checking close's result (base/files.cpp).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  // Hands the descriptor to another owner, which then closes it.
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }
  // On Linux the descriptor is gone even when close() reports an error: nothing to retry.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace tfboot
