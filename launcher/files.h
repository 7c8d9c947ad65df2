// The per-task log dir and its files, written atomically (SPEC §7).
#pragma once

#include <optional>
#include <string>

#include "error.h"

namespace tfboot {

// Whole file, or nullopt when it cannot be read.
std::optional<std::string> read_text_file(const std::string& path);

// mkdir -p; exit code 4 on failure.
Result<void> make_directories(const std::string& path);

// Written to a temporary name in the same directory, flushed, then renamed over `path`, so a
// reader never sees half a file and a failure leaves nothing behind. Exit code 4 on failure.
Result<void> write_file_atomically(const std::string& path, const std::string& content);

}  // namespace tfboot
