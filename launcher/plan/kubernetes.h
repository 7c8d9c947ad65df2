// What the pod's own files say about its Service, namespace and cluster domain (docs/peers-and-dns.md). Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/setting.h"
#include "plan/cluster.h"

namespace tfboot {

struct ResolvConf {
  std::vector<std::string> nameservers;
  std::vector<std::string> search;
  int ndots = 1;
};
ResolvConf parse_resolv_conf(std::string_view text);

// The kubelet writes "<podIP> <host>.<service>.<namespace>.svc.<domain> <host>" for a pod with a
// subdomain. Finds that line for any of the given own host names.
std::optional<DnsSuffix> suffix_from_hosts_file(std::string_view hosts_text, const std::vector<std::string>& own_names);

// The first "<namespace>.svc.<domain>" entry of the search list.
struct SearchListHint {
  std::string kube_namespace;
  std::string domain;
};
std::optional<SearchListHint> hint_from_search_list(const std::vector<std::string>& search);

// The peers' Service as the flags give it (--service, --namespace, --cluster-domain); each part
// unset is found by choose_dns_suffix.
struct ServiceSettings {
  std::optional<Setting> service;
  std::optional<Setting> kube_namespace;
  std::optional<Setting> cluster_domain;
};

// Flags beat POD_NAMESPACE, which beats /etc/hosts, which beats the search list.
// Without a Service there is no suffix: names are used bare.
Result<std::optional<DnsSuffix>> choose_dns_suffix(const ServiceSettings& given, const Environment& env, std::string_view hosts_text,
                                                   const ResolvConf& resolv, const std::vector<std::string>& own_names);

}  // namespace tfboot
