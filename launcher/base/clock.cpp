// The backoff between retries and the duration text (clock.h).
#include "base/clock.h"

#include <algorithm>
#include <ratio>

namespace tfboot {

std::chrono::milliseconds Backoff::delay_after(int failures) {
  auto delay = first_;
  for (int i = 1; i < failures && delay < most_; ++i) delay *= 2;
  delay = std::min(delay, most_);
  auto half = delay.count() / 2;
  std::uniform_int_distribution<long long> jitter(0, half);
  return std::chrono::milliseconds(delay.count() - half + jitter(random_));
}

std::string seconds_text(SteadyClock::duration duration) {
  auto tenths = std::chrono::round<std::chrono::duration<long long, std::deci>>(std::max(duration, SteadyClock::duration::zero())).count();
  std::string text = std::to_string(tenths / 10);
  if (tenths % 10 != 0) text += "." + std::to_string(tenths % 10);
  return text + "s";
}

}  // namespace tfboot
