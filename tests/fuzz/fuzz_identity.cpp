// libFuzzer target: hostname, index variables and pod files -> Identity and DNS suffix.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fields.h"

#include "cli/options.h"
#include "plan/identity.h"
#include "plan/kubernetes.h"

// Input: "hostname\0JOB_COMPLETION_INDEX\0/etc/hosts text\0/etc/resolv.conf text" (missing parts empty).
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto parts = split_fields<4>(data, size);
  static const tfboot::Options options = *tfboot::parse_options({}, {});
  tfboot::Environment env;
  if (!parts[1].empty()) env["JOB_COMPLETION_INDEX"] = parts[1];
  tfboot::Hostname hostname{parts[0], "--hostname"};
  tfboot::PlanInputs parsed;
  std::optional<tfboot::Setting> no_ptr;
  auto identity = tfboot::resolve_identity({env, hostname, parsed, no_ptr});
  if (identity && identity->index < 0) __builtin_trap();
  if (auto split = tfboot::split_hostname(parts[0])) {
    auto peer_template = tfboot::derive_peer_template(*split, parts[0]);
    if (peer_template.text.empty()) __builtin_trap();
  }
  auto resolv = tfboot::parse_resolv_conf(parts[3]);
  (void)tfboot::choose_dns_suffix({options.service, options.kube_namespace, options.cluster_domain}, env, parts[2], resolv, {parts[0]});
  return 0;
}
