// The quick preflight's verdict, pure (docs/preflight.md): each task's figures (what its hello said
// about its node: its directories, its GPUs that do not answer, the clock offset the coordinator measured at its hello) in, the tasks that
// cannot run the job out, each named with its host and what is wrong, in one line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/cluster.h"

namespace tfboot {

// One directory's probe: a small file written, fsynced and removed, and the room left.
struct DirectoryFigures {
  std::string path;       // the directory written to: the one named, or its nearest existing parent
  std::string problem;    // "" when the write, fsync and removal worked
  std::int64_t free_mib = 0;
  double write_ms = 0;    // the write, fsync and removal
  friend bool operator==(const DirectoryFigures&, const DirectoryFigures&) = default;
};

// What a task found on its own node, said in its hello.
struct NodeFigures {
  DirectoryFigures log_root;
  std::optional<DirectoryFigures> checkpoint_dir;  // --checkpoint-dir, when given as a local path
  // GPUs the driver lists whose device does not open, each said whole: "GPU 0000:3b:00.0 is listed by
  // the driver but does not answer (/dev/nvidia2: No such device or address)"
  std::vector<std::string> silent_gpus;
  friend bool operator==(const NodeFigures&, const NodeFigures&) = default;
};

struct PreflightBounds {
  std::int64_t max_clock_offset_ms = 2000;  // from the coordinator's wall clock
  std::int64_t min_free_mib = 64;           // in the log root and the checkpoint directory
};

struct TaskPreflight {
  std::string task;  // "worker:3"
  std::string type;  // "worker": accelerators are compared within a type (a CPU-only ps is no mismatch)
  std::string host;
  std::optional<NodeFigures> node;            // nullopt: the task said nothing (its --preflight is off)
  std::optional<std::int64_t> clock_offset_ms;  // nullopt: its hello carried no clock
  int accelerators = 0;                         // the GPUs its fingerprint counts
};

struct PreflightVerdict {
  std::vector<std::string> refusals;  // "worker:3 (host 'h'): log root /logs not writable: ..."; "checkpoint dir ..."
  bool passed() const { return refusals.empty(); }
};

PreflightVerdict judge_preflight(const std::vector<TaskPreflight>& tasks, const PreflightBounds& bounds);
// "preflight refused the start: <refusal>; <refusal>" (the first few, then "and N more").
std::string preflight_refusal_message(const PreflightVerdict& verdict);

}  // namespace tfboot
