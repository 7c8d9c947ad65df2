// The network level of the preflight, pure (docs/preflight.md): which partners each task measures
// in which round, and the verdict on the figures — each link's throughput and round trip against
// the job's median, a task that is slow with every partner named as the bad node, other slow
// links named as links.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tfboot {

// The rounds of a job of `tasks` tasks: in round r task i sends to (i + shifts[r]) mod tasks and
// receives from (i - shifts[r]) mod tasks, so every task sends once and receives once per round,
// the ring first, then shifts to far partners. At most three rounds whatever the size; none for
// a task alone.
std::vector<std::size_t> network_shifts(std::size_t tasks);

// One link's figures, tasks by their position in cluster order.
struct LinkFigure {
  std::size_t from = 0;
  std::size_t to = 0;
  std::optional<double> rtt_ms;       // the least of a few one-byte round trips
  std::optional<double> bits_per_second;  // the bulk stream, as the receiver counted it
  std::string problem;                // "connection refused": the link could not be measured
};

// A link is slow when its throughput is under `ratio` of the job's median, or its round trip over
// 1/`ratio` times the median's and over the median by more than `rtt_floor_ms` (a loopback's
// tens of microseconds jitter by more than any ratio).
struct NetworkBounds {
  double warn_below = 0.5;
  double refuse_below = 0.1;  // 0: never refuse, only warn (--preflight-refuse-below 0)
  double rtt_floor_ms = 1.0;
};

struct NetworkVerdict {
  std::optional<double> median_bits_per_second;
  std::optional<double> median_rtt_ms;
  std::vector<std::string> refusals;  // "worker:7 (host 'h'): network: slow with all 4 partners: ..."
  std::vector<std::string> warnings;
  bool passed() const { return refusals.empty(); }
};

// What the start says of a network check that passed (preflight.network of the start message and
// of startup.json).
struct NetworkSummary {
  std::optional<double> median_bits_per_second;
  std::optional<double> median_rtt_ms;
  double seconds = 0;  // from the measure to the verdict, at the coordinator
  int links = 0;       // links measured
  std::vector<std::string> warnings;
  friend bool operator==(const NetworkSummary&, const NetworkSummary&) = default;
};

// `names`: each task's "worker:7 (host 'h')", in cluster order. A link that appears twice (its
// receiver's figures and its sender's problem) is judged on the figures.
NetworkVerdict judge_network(const std::vector<LinkFigure>& links, const std::vector<std::string>& names, const NetworkBounds& bounds);

// "0.00392 Gbit/s", "9.41 Gbit/s": three significant digits.
std::string gbits_text(double bits_per_second);

}  // namespace tfboot
