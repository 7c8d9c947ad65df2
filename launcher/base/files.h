// Files tfboot writes and reads: directories remembered for rollback, atomic writes through safe
// temporaries, bounded reads that never block (docs/supervision.md: Running the command).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"

namespace tfboot {

// write(2) until all of `text` is written, again after EINTR. 0 when done, else the errno that
// stopped it (ENOSPC when write wrote nothing). The log and the children's output ignore it: a
// closed stderr is no reason to fail.
int write_all(int fd, std::string_view text);

inline constexpr std::size_t default_read_limit = 16 * 1024 * 1024;

// The whole file when it is a regular file of at most `max_size` bytes, else nullopt. Opened
// non-blocking, so a FIFO or a device in its place never hangs us.
std::optional<std::string> read_text_file(const std::string& path, std::size_t max_size = default_read_limit);

// mkdir -p. Returns the directories it created, outermost first, so that a later failure can
// remove exactly those (remove_created_directories). Exit code 4 on failure, with nothing created.
Result<std::vector<std::string>> make_directories(const std::string& path);
// Removes the given directories innermost first, each only if it is empty.
void remove_created_directories(const std::vector<std::string>& created);

// Written to a fresh temporary in the same directory (a random name, O_EXCL: never through a
// link planted there), flushed, then renamed over `path`: a reader never sees half a file and a
// failure leaves nothing behind. Exit code 4 on failure.
Result<void> write_file_atomically(const std::string& path, const std::string& content);

// A fresh, empty temporary beside `path` (the random name and O_EXCL as above), opened for
// writing: its descriptor and name, to be renamed over `path` or unlinked by the caller.
Result<std::pair<UniqueFd, std::string>> open_temporary(const std::string& path);

// Several files as one step: every temporary is written first; only when all are whole are they
// renamed into place. A failure (a full disk) leaves none of the new files and no temporary.
Result<void> write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace tfboot
