// A task's environment fingerprint: what must match across the tasks of one job (TensorFlow,
// PyTorch, JAX, Python, CUDA, cuDNN, NCCL, NVIDIA driver, GPUs, installed distributions). Read from files only,
// never by running Python, so it takes milliseconds (fingerprint/read.cpp); comparing and the JSON
// form are pure (fingerprint.cpp).
#pragma once

#include <array>
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/setting.h"

namespace tfboot {

inline constexpr std::string_view fingerprint_absent = "absent";
// Values come from files and from the network; longer ones are cut.
inline constexpr std::size_t max_fingerprint_value = 256;

struct Fingerprint {
  std::string tensorflow{fingerprint_absent};      // "2.16.1", or "2.16.1 (tensorflow-cpu)"
  std::string torch{fingerprint_absent};           // "2.15.0"
  std::string jax{fingerprint_absent};             // "0.10.2"
  std::string jaxlib{fingerprint_absent};          // "0.10.2"
  std::string python{fingerprint_absent};          // "3.11"
  std::string cuda{fingerprint_absent};            // CUDA runtime, "12.2.2"
  std::string cudnn{fingerprint_absent};           // "8.9.7"
  std::string nccl{fingerprint_absent};            // "2.18.3"
  std::string nvidia_driver{fingerprint_absent};   // "535.104.05"
  std::string gpus{fingerprint_absent};            // distinct models, "Tesla T4"
  std::string gpu_count{fingerprint_absent};       // "4"
  std::string visible_devices{fingerprint_absent}; // "NVIDIA_VISIBLE_DEVICES=all"
  std::string distributions{fingerprint_absent};   // "312 distributions, sha256 1a2b3c4d5e6f7a8b"
  // Not fields of the wire or of the comparison, for the task's own log and startup.json: empty,
  // or why reading stopped early; the Python whose packages were read ("/opt/venv/bin/python"),
  // or empty when none was found.
  std::string cut_short;
  std::string interpreter;
};

// How much reading a fingerprint may cost: the directory entries listed in all, and the time.
struct FingerprintLimits {
  std::size_t entries = 200000;
  std::chrono::milliseconds time{2000};
};

struct FingerprintField {
  std::string_view name;
  std::string Fingerprint::*member;
  // Only these are compared across tasks: a different GPU count or device list is a choice.
  bool compared;
  // Facts of the node, not of the image: a CPU-only task (a parameter server) has no driver
  // and no GPU, which is no mismatch.
  bool absent_is_fine;
};
extern const std::array<FingerprintField, 13> fingerprint_fields;

// The GPUs the driver lists (gpu_count), 0 when absent: what --preflight compares between tasks.
int accelerator_count(const Fingerprint& fingerprint);

// A value as stored: characters outside printable ASCII dropped, spaces trimmed, cut to
// max_fingerprint_value; "absent" when nothing is left. Files and peers' JSON both go through it.
std::string clean_fingerprint_value(std::string_view text);

// `command` is the task's: the Python it names is the one read ("/opt/venv/bin/python train.py",
// "python3 -m ...", "/usr/bin/env python3 ...", a script whose "#!" line names Python, as
// torchrun's does; a pyenv shim stands for the version pyenv would pick); a command that names
// none gets `python`, else `python3`, on PATH. `root` prefixes every path read ("" in production;
// a fake tree in tests). `env` supplies PATH, PYTHONPATH, HOME, PYENV_VERSION, LD_LIBRARY_PATH,
// NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES.
Fingerprint read_fingerprint(const Environment& env, const std::vector<std::string>& command, const std::string& root = "",
                             const FingerprintLimits& limits = {});

// One compact JSON object with the field names as keys, in the order of fingerprint_fields.
std::string to_json(const Fingerprint& fingerprint);
// Lenient, since a peer may be newer: unknown keys ignored; missing, non-string or unreadable
// values "absent"; control characters dropped and values cut to max_fingerprint_value.
Fingerprint fingerprint_from_json(std::string_view json);

// One line per compared field whose values differ, values grouped by task in first-seen order:
// "tensorflow: 2.16.1 on worker:0,worker:1; 2.17.0 on worker:2". Runs of three or more
// consecutive tasks of a type are written "worker:0..7". `by_task` is in cluster order.
std::vector<std::string> compare_fingerprints(const std::vector<std::pair<std::string, Fingerprint>>& by_task);

}  // namespace tfboot
