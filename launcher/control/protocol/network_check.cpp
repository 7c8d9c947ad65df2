// The network level's schedule and verdict: links judged against the job's healthy links.
#include "control/protocol/network_check.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

namespace tfboot {

std::vector<std::size_t> network_shifts(std::size_t tasks) {
  std::vector<std::size_t> shifts;
  if (tasks < 2) return shifts;
  // A small job measures every pair both ways; a larger one the ring and two far pairings. A
  // shift s and tasks - s pair the same tasks the other way round: one of them is enough.
  const std::vector<std::size_t> candidates =
      tasks <= 4 ? std::vector<std::size_t>{1, 2, 3} : std::vector<std::size_t>{1, tasks / 2, (tasks + 1) / 3};
  for (std::size_t shift : candidates) {
    if (shift == 0 || shift >= tasks) continue;
    const bool paired = std::ranges::any_of(shifts, [&](std::size_t s) { return s == shift || (tasks > 4 && s == tasks - shift); });
    if (!paired) shifts.push_back(shift);
  }
  return shifts;
}

std::string gbits_text(double bits_per_second) { return fmt::format("{:.3g} Gbit/s", bits_per_second / 1e9); }

namespace {

enum class Level { fine, warn, refuse };

double median(std::vector<double> values) {
  std::ranges::sort(values);
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::string rtt_text(double ms) { return fmt::format("{:.3g} ms", ms); }

class Judge {
 public:
  Judge(const std::vector<LinkFigure>& links, const std::vector<std::string>& names, const NetworkBounds& bounds)
      : names_(names), bounds_(bounds) {
    // One entry per link: the receiver's figures over the sender's problem.
    std::map<std::pair<std::size_t, std::size_t>, LinkFigure> unique;
    for (const auto& link : links) {
      if (link.from >= names.size() || link.to >= names.size() || link.from == link.to) continue;
      auto [it, fresh] = unique.try_emplace({link.from, link.to}, link);
      if (!fresh && it->second.problem.empty() == false && link.problem.empty()) it->second = link;
    }
    for (auto& [key, link] : unique) links_.push_back(link);
    find_references();
  }

  NetworkVerdict verdict() {
    NetworkVerdict verdict{reference_bps_, reference_rtt_ms_, {}, {}};
    std::vector<Level> levels;
    for (const auto& link : links_) levels.push_back(level_of(link));
    // A task all of whose links are slow is the bad node; its links are not named one by one.
    std::set<std::size_t> bad;
    for (std::size_t task = 0; task < names_.size(); ++task) {
      std::vector<std::size_t> mine;
      for (std::size_t i = 0; i < links_.size(); ++i) {
        if (links_[i].from == task || links_[i].to == task) mine.push_back(i);
      }
      if (mine.size() < 2 || !std::ranges::all_of(mine, [&](std::size_t i) { return levels[i] != Level::fine; })) continue;
      bad.insert(task);
      const bool refuse = std::ranges::all_of(mine, [&](std::size_t i) { return levels[i] == Level::refuse; });
      (refuse ? verdict.refusals : verdict.warnings).push_back(names_[task] + ": network: " + bad_task_text(mine));
    }
    // A slow link whose ends are fine with their other partners only warns: one link alone does
    // not say which end is at fault, and on a busy host any link has its bad moments.
    for (std::size_t i = 0; i < links_.size(); ++i) {
      const LinkFigure& link = links_[i];
      if (levels[i] == Level::fine || bad.contains(link.from) || bad.contains(link.to)) continue;
      verdict.warnings.push_back("network: " + link_text(link));
    }
    return verdict;
  }

 private:
  // Each task's best link (the fastest, the shortest round trip), and the median of those: what a
  // healthy link of this job does, even when one bad node slows every link it is part of.
  void find_references() {
    std::map<std::size_t, double> best_bps;
    std::map<std::size_t, double> best_rtt;
    for (const auto& link : links_) {
      for (std::size_t task : {link.from, link.to}) {
        if (link.bits_per_second) best_bps[task] = std::max(best_bps[task], *link.bits_per_second);
        if (link.rtt_ms) best_rtt[task] = best_rtt.contains(task) ? std::min(best_rtt[task], *link.rtt_ms) : *link.rtt_ms;
      }
    }
    std::vector<double> values;
    for (const auto& [task, bps] : best_bps) values.push_back(bps);
    if (!values.empty()) reference_bps_ = median(values);
    values.clear();
    for (const auto& [task, rtt] : best_rtt) values.push_back(rtt);
    if (!values.empty()) reference_rtt_ms_ = median(values);
  }

  // How much worse than the reference: 1 for as good, 10 for a tenth of the throughput or ten
  // times the round trip.
  double slowdown(const LinkFigure& link) const {
    double worst = 1;
    if (link.bits_per_second && reference_bps_ && *reference_bps_ > 0) {
      worst = std::max(worst, *reference_bps_ / std::max(*link.bits_per_second, 1.0));
    }
    if (link.rtt_ms && reference_rtt_ms_ && *link.rtt_ms - *reference_rtt_ms_ > bounds_.rtt_floor_ms) {
      worst = std::max(worst, *link.rtt_ms / std::max(*reference_rtt_ms_, 0.001));
    }
    return worst;
  }

  Level level_of(const LinkFigure& link) const {
    if (!link.problem.empty() || !link.bits_per_second) return bounds_.refuse_below > 0 ? Level::refuse : Level::warn;
    const double worse = slowdown(link);
    if (bounds_.refuse_below > 0 && worse > 1 / bounds_.refuse_below) return Level::refuse;
    if (bounds_.warn_below > 0 && worse > 1 / bounds_.warn_below) return Level::warn;
    return Level::fine;
  }

  std::string figures_text(const LinkFigure& link) const {
    if (!link.problem.empty()) return "not measured: " + link.problem;
    if (!link.bits_per_second) return "not measured";
    std::string text = gbits_text(*link.bits_per_second);
    if (reference_bps_) text += fmt::format(" (median {:.3g})", *reference_bps_ / 1e9);
    if (link.rtt_ms) {
      text += ", round trip " + rtt_text(*link.rtt_ms);
      if (reference_rtt_ms_) text += fmt::format(" (median {:.3g})", *reference_rtt_ms_);
    }
    return text;
  }

  std::string link_text(const LinkFigure& link) const {
    return task_of(link.from) + " → " + task_of(link.to) + ": " + figures_text(link);
  }

  // "worker:7" of "worker:7 (host 'h')".
  std::string task_of(std::size_t position) const { return names_[position].substr(0, names_[position].find(' ')); }

  // "slow with every partner (4 links); at best worker:7 → worker:8: 0.00392 Gbit/s (median 9.41), ..."
  std::string bad_task_text(const std::vector<std::size_t>& mine) const {
    const LinkFigure* best = &links_[mine.front()];
    for (std::size_t i : mine) {
      if (slowdown_rank(links_[i]) < slowdown_rank(*best)) best = &links_[i];
    }
    return "slow with every partner (" + std::to_string(mine.size()) + " links); at best " + link_text(*best);
  }

  // Links that could not be measured rank after every measured one.
  double slowdown_rank(const LinkFigure& link) const {
    return link.problem.empty() && link.bits_per_second ? slowdown(link) : std::numeric_limits<double>::max();
  }

  const std::vector<std::string>& names_;
  NetworkBounds bounds_;
  std::vector<LinkFigure> links_;
  std::optional<double> reference_bps_;
  std::optional<double> reference_rtt_ms_;
};

}  // namespace

NetworkVerdict judge_network(const std::vector<LinkFigure>& links, const std::vector<std::string>& names, const NetworkBounds& bounds) {
  return Judge(links, names, bounds).verdict();
}

}  // namespace tfboot
