# Cross-compiling tfboot for aarch64 (Grace, GH200, Graviton) on an x86-64 Debian 12 machine:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# with Debian's cross compiler and the arm64 c-ares and libsodium beside the machine's own (Debian
# multiarch; scripts/setup --aarch64 installs them). No sysroot: the cross compiler reads its own
# glibc and libstdc++ under /usr/aarch64-linux-gnu, then /usr/include, whose headers multiarch
# keeps the same for every architecture; the aarch64-linux-gnu library architecture makes
# find_library take /usr/lib/aarch64-linux-gnu's archives, never the x86-64 ones.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Programs found at configure time (git, for the version) run here, on the build machine.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# ctest runs an aarch64 build's unit tests (linked -static) through qemu-user: no binfmt needed.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)
