// The flow README.md draws under "How it works", from argv and the environment to the running command.
#pragma once

namespace tfboot {

int run(int argc, char** argv, char** envp);

}  // namespace tfboot
