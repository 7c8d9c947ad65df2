// Starting the command: the one place that calls exec, for plain exec mode and for a ChildSet's
// forked child alike, with a shell's 127/126 when it cannot (docs/supervision.md: Running the command).
#pragma once

#include <string>
#include <vector>

#include "base/error.h"

namespace tfboot {

// The command as execvpe takes it: argv and envp as null-ended arrays over strings it owns. Built
// before fork, because the forked child of a process that may have had threads should do only
// async-signal-safe work, and building these arrays allocates.
class PreparedCommand {
 public:
  PreparedCommand(std::vector<std::string> argv, std::vector<std::string> environment);
  // The arrays point into the strings: neither copied nor moved.
  PreparedCommand(const PreparedCommand&) = delete;
  PreparedCommand& operator=(const PreparedCommand&) = delete;

  const std::string& program() const { return argv_strings_.front(); }

 private:
  friend Error exec_command(const PreparedCommand& command);
  std::vector<std::string> argv_strings_, environment_strings_;
  std::vector<char*> argv_, envp_;
};

// Default dispositions for every signal and an empty mask (what a command expects to inherit,
// whatever our own parent left us: nohup, runtimes that block signals), then exec with a PATH
// search and exactly the prepared environment. Returns only on failure: 127 when the command is
// not found, 126 when it cannot be executed, with the message to report.
Error exec_command(const PreparedCommand& command);
// The same for plain exec mode, where nothing was forked: tfboot itself becomes the command.
Error exec_command(const std::vector<std::string>& command, const std::vector<std::string>& environment);

// A waitpid status as an exit code: the status, or 128+N when signal N ended the process.
int status_to_exit_code(int status);

}  // namespace tfboot
