// What the pod's own files say about its Service, namespace and cluster domain (docs/peers-and-dns.md).
#include "plan/kubernetes.h"

#include <algorithm>

namespace tfboot {
namespace {

// Fields separated by blanks, as `stream >> word` splits them (an istringstream would bring
// libstdc++'s locales into the static binary).
std::vector<std::string> words(std::string_view line) {
  static constexpr std::string_view blanks = " \t\n\v\f\r";
  std::vector<std::string> result;
  for (auto start = line.find_first_not_of(blanks); start != std::string_view::npos;) {
    auto end = line.find_first_of(blanks, start);
    result.emplace_back(line.substr(start, end - start));  // to the line's end when end is npos
    start = line.find_first_not_of(blanks, end);           // npos when end is npos
  }
  return result;
}

// Each line without its comment.
template <typename Visit>
void for_each_line(std::string_view text, Visit visit) {
  for (std::string_view line : lines(text)) visit(line.substr(0, line.find('#')));
}

}  // namespace

ResolvConf parse_resolv_conf(std::string_view text) {
  ResolvConf conf;
  for_each_line(text, [&](std::string_view line) {
    auto fields = words(line);
    if (fields.empty()) return;
    if (fields[0] == "nameserver" && fields.size() >= 2) {
      conf.nameservers.push_back(fields[1]);
    } else if ((fields[0] == "search" || fields[0] == "domain")) {
      conf.search.assign(fields.begin() + 1, fields.end());  // the last search/domain line wins, as in glibc
    } else if (fields[0] == "options") {
      for (std::size_t i = 1; i < fields.size(); ++i) {
        if (fields[i].starts_with("ndots:")) {
          if (auto ndots = parse_index(std::string_view(fields[i]).substr(6))) conf.ndots = std::min(*ndots, 15);
        }
      }
    }
  });
  return conf;
}

std::optional<DnsSuffix> suffix_from_hosts_file(std::string_view hosts_text, const std::vector<std::string>& own_names) {
  std::optional<DnsSuffix> found;
  for_each_line(hosts_text, [&](std::string_view line) {
    if (found) return;
    auto fields = words(line);
    for (std::size_t i = 1; i < fields.size(); ++i) {
      const std::string& name = fields[i];
      for (const auto& own : own_names) {
        if (own.empty() || !name.starts_with(own + ".")) continue;
        // <host>.<service>.<namespace>.svc.<domain>
        std::string_view rest = std::string_view(name).substr(own.size() + 1);
        while (rest.ends_with('.')) rest.remove_suffix(1);
        auto first_dot = rest.find('.');
        if (first_dot == std::string_view::npos) continue;
        auto second_dot = rest.find('.', first_dot + 1);
        if (second_dot == std::string_view::npos) continue;
        auto tail = rest.substr(second_dot + 1);
        if (!tail.starts_with("svc.") || tail.size() <= 4) continue;
        found = DnsSuffix{std::string(rest.substr(0, first_dot)),
                          std::string(rest.substr(first_dot + 1, second_dot - first_dot - 1)), std::string(tail.substr(4))};
        return;
      }
    }
  });
  return found;
}

std::optional<SearchListHint> hint_from_search_list(const std::vector<std::string>& search) {
  for (const auto& entry : search) {
    auto dot = entry.find('.');
    if (dot == std::string::npos || dot == 0) continue;
    std::string_view tail = std::string_view(entry).substr(dot + 1);
    while (tail.ends_with('.')) tail.remove_suffix(1);
    if (tail.starts_with("svc.") && tail.size() > 4) return SearchListHint{entry.substr(0, dot), std::string(tail.substr(4))};
  }
  return std::nullopt;
}

Result<std::optional<DnsSuffix>> choose_dns_suffix(const ServiceSettings& given, const Environment& env, std::string_view hosts_text,
                                                   const ResolvConf& resolv, const std::vector<std::string>& own_names) {
  auto from_hosts = suffix_from_hosts_file(hosts_text, own_names);
  auto from_search = hint_from_search_list(resolv.search);

  // Each part remembers where it came from, so that an error can name it.
  Setting service, kube_namespace{"default", "default namespace"}, domain{"cluster.local", "default cluster domain"};
  if (given.service) service = *given.service;
  else if (from_hosts) service = Setting{from_hosts->service, "/etc/hosts"};
  else return std::optional<DnsSuffix>{};

  if (given.kube_namespace) kube_namespace = *given.kube_namespace;
  else if (auto it = env.find("POD_NAMESPACE"); it != env.end() && !it->second.empty()) kube_namespace = {it->second, "POD_NAMESPACE"};
  else if (from_hosts) kube_namespace = {from_hosts->kube_namespace, "/etc/hosts"};
  else if (from_search) kube_namespace = {from_search->kube_namespace, "/etc/resolv.conf search list"};

  if (given.cluster_domain) domain = *given.cluster_domain;
  else if (from_search) domain = {from_search->domain, "/etc/resolv.conf search list"};
  else if (from_hosts) domain = {from_hosts->domain, "/etc/hosts"};
  while (domain.value.ends_with('.')) domain.value.pop_back();

  for (const auto* part : {&service, &kube_namespace, &domain}) {
    if (auto problem = dns_name_problem(part->value)) {
      return usage_error(part->source + " '" + part->value + "' " + *problem);
    }
  }
  DnsSuffix suffix{service.value, kube_namespace.value, domain.value};
  return std::optional<DnsSuffix>{suffix};
}

}  // namespace tfboot
