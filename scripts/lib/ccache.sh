# The compiler cache for every C++ build (scripts/build, scripts/fuzz, scripts/release). Sourced, not run:
#   source scripts/lib/ccache.sh
#   cmake ... "${compiler_launcher[@]}"
# With ccache installed (scripts/setup installs it) each compile goes through it; the cache is
# ccache's own (~/.cache/ccache, or CCACHE_DIR), so it outlives the checkout. CCACHE_BASEDIR is the
# checkout: ccache rewrites the paths under it relative to the build directory, so a fresh clone in
# another place still hits what an earlier clone compiled. The sanitizer and fuzz builds carry debug
# information, for which ccache would also hash the build directory's path; CCACHE_NOHASHDIR=1 lets
# them hit too, at the price that an object from the cache names the directory it was first compiled
# in as its compile directory (stack traces then show that clone's path). CCACHE_DISABLE=1 compiles
# without the cache.
compiler_launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  compiler_launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
else
  # An empty value, not none: a build directory configured with ccache before keeps no stale launcher.
  compiler_launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_C_COMPILER_LAUNCHER=)
fi
