// The container's termination message (docs/observing.md): the one-line reason for a
// non-zero exit, where Kubernetes reads it for `kubectl describe pod` and the job controllers.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/setting.h"

namespace tfboot {

// Kubernetes' default terminationMessagePath.
inline constexpr std::string_view default_termination_log = "/dev/termination-log";
// Kubernetes reads at most 4 KiB of it.
inline constexpr std::size_t max_termination_message = 4096;

// --termination-log (or its twin) when given; else the default when it exists and is writable;
// else nowhere.
std::optional<std::string> termination_log_path(const std::optional<Setting>& given);

// The message cut to max_termination_message bytes (never inside a UTF-8 character), with a newline.
std::string termination_message(std::string_view reason);

// Writes the message whole. A new file or a regular file: to a temporary renamed over `path`, or,
// where that cannot be done (Kubernetes' file is a bind mount, which a rename cannot replace), in
// one write into the file already there. Anything else is never replaced: a FIFO or a character
// device gets the message written into it (/dev/null turns the message off), a symbolic link is
// written through; a directory or a block device is an error. Never blocks on a FIFO or a device;
// the caller only warns on failure.
Result<void> write_termination_message(const std::string& path, std::string_view reason);

}  // namespace tfboot
