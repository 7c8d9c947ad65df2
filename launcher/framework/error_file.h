// A failed rank's own account: the error file torch's @record writes (TORCHELASTIC_ERROR_FILE),
// read once the rank has ended (docs/frameworks.md: PyTorch and JAX).
#pragma once

#include <optional>
#include <string>

namespace tfboot {

// The exception's message as one line ("RuntimeError: boom"), or nullopt when the file is
// missing, too large or not torch's error record.
std::optional<std::string> read_torch_error_message(const std::string& path);

// Removes an error file left by an earlier run, so that it is not taken for this run's.
void remove_stale_error_file(const std::string& path);

}  // namespace tfboot
