// The flow of README's first section, from argv and the environment to the running command.
#pragma once

namespace tfboot {

int run(int argc, char** argv, char** envp);

}  // namespace tfboot
