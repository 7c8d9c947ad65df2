// The preflight step of the flow (docs/preflight.md): this task's look at its node (can the log
// root and the checkpoint dir take a write, how much room is there, do its GPUs answer), the verdict of a task alone, and startup.json's
// "preflight" object. Effectful; the job's verdict is control/protocol/preflight.h's, at the barrier.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/options.h"
#include "control/protocol/network_check.h"
#include "control/protocol/preflight.h"
#include "fingerprint/fingerprint.h"

namespace tfboot {

// Writes a small file into `directory` (or, when it does not exist yet, into its nearest existing
// parent, where tfboot or the trainer would create it), fsyncs and removes it; the free room of
// that file system. Never fails: what went wrong is DirectoryFigures::problem ("No space left on device").
DirectoryFigures check_directory(const std::string& directory);

// The GPUs the driver lists (`listing`/<bus id>/information, its "Device Minor: N") and whether each
// one's device, `devices`/nvidia<N>, opens. An open that fails with ENXIO, ENODEV or EIO (a GPU
// fallen off the bus, lost by the driver), or a listing or open still blocked at `deadline`, is
// named in `silent`; any other failure (absent, not permitted: another container's GPU) is not.
struct GpuFigures {
  int answering = 0;                // devices that opened
  std::vector<std::string> silent;  // "GPU 0000:3b:00.0 is listed by the driver but does not answer (/dev/nvidia2: ...)"
};
GpuFigures check_gpus(const std::string& listing = "/proc/driver/nvidia/gpus", const std::string& devices = "/dev",
                      std::chrono::milliseconds deadline = std::chrono::seconds(5));

// What this task's preflight found, for the log, startup.json and /status.
struct PreflightRecord {
  NodeFigures node;
  std::string checkpoint_dir_unchecked;  // --checkpoint-dir when it is a URL (gs://, s3://): not ours to probe
  int accelerators = 0;
  int accelerators_answering = 0;               // of them, those whose device opened
  std::optional<std::int64_t> clock_offset_ms;  // as the coordinator measured it; none for a task alone
  double seconds = 0;                           // this task's checks
  std::string level = "quick";                  // --preflight: quick or network
  std::optional<NetworkSummary> network;        // --preflight network: the job's figures, with the start
  NetworkBounds network_bounds;                 // what they were judged against
};

// This task's checks: the log root (--log-root, /logs by default), --checkpoint-dir when given, the
// GPUs its fingerprint counts, and whether each GPU the driver lists answers.
PreflightRecord check_this_node(const Options& options, const Fingerprint& own);
// A task without the control channel judges itself: exit 8 naming what is wrong.
Result<void> judge_alone(const PreflightRecord& record, const std::string& task, const std::string& host);
// startup.json's "preflight": the level, each check's figure for this task, the job's verdict.
std::string preflight_json(const PreflightRecord& record);
// One log line with the figures.
void log_preflight(const PreflightRecord& record);

}  // namespace tfboot
