// The job's choices that options select between and lower layers decide on (a framework, an
// address mode, ...): domain values, kept apart from the command line that parses them, so the
// pure protocol and plan need not include cli/.
#pragma once

namespace tfboot {

enum class IdentityFrom { automatic, hostname, ptr };
enum class AddressMode { name, ip };
enum class EnvCheck { warn, fail, off };
// Whose environment each process of the command gets (docs/frameworks.md: PyTorch and JAX).
enum class Framework { tensorflow, pytorch, jax };
// What every task checks between the barrier's gathering and the command (docs/preflight.md).
enum class PreflightLevel { off, quick, network };  // network: quick, then every task's links

}  // namespace tfboot
