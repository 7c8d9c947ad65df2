// The c-ares Resolver: one channel whose sockets c-ares reports through its socket-state
// callback, driven with poll(2) (select(2) cannot wait on a descriptor numbered 1024 or more,
// and a parent may leave that many open).
#include "dns/resolver.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <ares.h>
#include <netdb.h>
#include <poll.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "base/log.h"
#include "base/text.h"

namespace tfboot {
namespace {

LookupReason reason_of(int status) {
  switch (status) {
    case ARES_SUCCESS: return LookupReason::none;
    case ARES_ENOTFOUND: return LookupReason::nxdomain;
    case ARES_ETIMEOUT: return LookupReason::timeout;
    case ARES_ESERVFAIL: return LookupReason::servfail;
    case ARES_EREFUSED: return LookupReason::refused;
    case ARES_ECONNREFUSED: return LookupReason::connection_refused;
    default: return LookupReason::other;
  }
}

// A failed c-ares lookup; `no_data` is what an answer without records of the asked type means.
LookupResult failure_of(int status, LookupReason no_data) {
  if (status == ARES_ENODATA) return lookup_failure(no_data);
  return lookup_failure(reason_of(status), ares_strerror(status));
}

std::optional<std::string> numeric_text(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  const void* bytes = nullptr;
  if (address->sa_family == AF_INET) bytes = &reinterpret_cast<const sockaddr_in*>(address)->sin_addr;
  else if (address->sa_family == AF_INET6) bytes = &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
  else return std::nullopt;
  if (!inet_ntop(address->sa_family, bytes, text, sizeof text)) return std::nullopt;
  return std::string(text);
}

LookupResult addresses_of(const ares_addrinfo* info) {
  std::vector<std::string> v4, v6;
  for (const ares_addrinfo_node* node = info ? info->nodes : nullptr; node; node = node->ai_next) {
    if (!node->ai_addr) continue;
    if (auto text = numeric_text(node->ai_addr)) (node->ai_family == AF_INET ? v4 : v6).push_back(std::move(*text));
  }
  if (v4.empty() && v6.empty()) return lookup_failure(LookupReason::no_address_records);
  v4.insert(v4.end(), v6.begin(), v6.end());
  return lookup_success(std::move(v4));
}

using Done = std::function<void(LookupResult)>;

class CaresResolver;

// What a c-ares callback gets as its argument.
using ProbeDone = std::function<void(std::optional<std::uint32_t>)>;

struct PendingLookup {
  CaresResolver* resolver = nullptr;
  Done done;
  // Reverse lookups only: the address asked about, which ares_parse_ptr_reply wants back.
  in6_addr address{};  // large enough for an in_addr too
  int length = 0;
  int family = AF_INET;
};

class CaresResolver final : public Resolver {
 public:
  CaresResolver() = default;
  ~CaresResolver() override {
    if (channel_) ares_destroy(channel_);
  }
  CaresResolver(const CaresResolver&) = delete;
  CaresResolver& operator=(const CaresResolver&) = delete;

  Result<void> open(const ResolverSettings& settings) {
    if (settings.hosts_file) hosts_file_.emplace(*settings.hosts_file);
    ares_options options{};
    // Every field c-ares would otherwise read from /etc/resolv.conf is given, so it reads no
    // file at all (lookups "b": /etc/hosts is answered by us, see start_lookup).
    int mask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_LOOKUPS | ARES_OPT_SOCK_STATE_CB |
               ARES_OPT_SERVERS | ARES_OPT_DOMAINS | ARES_OPT_NDOTS | ARES_OPT_SORTLIST;
    // NOCHECKRESP: report SERVFAIL and REFUSED as such (otherwise they look like a refused
    // connection), so the log can say "DNS in trouble" precisely. Our own loop does the retries.
    options.flags = ARES_FLAG_NOCHECKRESP;
    options.timeout = static_cast<int>(settings.per_try_timeout.count());
    options.tries = 1;
    std::string lookups = "b";
    options.lookups = lookups.data();
    options.sock_state_cb = &CaresResolver::on_socket_state;
    options.sock_state_cb_data = this;
    options.nservers = 0;  // the real list follows through ares_set_servers_ports (IPv6, ports)
    std::vector<char*> domains;
    for (const auto& domain : settings.search) domains.push_back(const_cast<char*>(domain.c_str()));
    options.domains = domains.data();
    options.ndomains = static_cast<int>(domains.size());
    options.ndots = settings.ndots;
    options.nsort = 0;
    int status = ares_init_options(&channel_, &options, mask);
    if (status != ARES_SUCCESS) {
      channel_ = nullptr;
      return make_error(exit_code::resources, std::string("cannot set up the DNS resolver: ") + ares_strerror(status));
    }
    if (!settings.servers.empty()) return use_servers(settings.servers, settings.servers_given);
    std::string list;
    for (const auto& server : settings.nameservers) {
      list += (list.empty() ? "" : ",") + (server.find(':') != std::string::npos ? "[" + server + "]" : server);
    }
    if (list.empty()) list = "127.0.0.1";
    auto servers = parse_dns_servers(list, "/etc/resolv.conf");
    if (!servers) return std::unexpected(servers.error());
    return use_servers(*servers, "/etc/resolv.conf '" + list + "'");
  }

  // `given` names the list in errors: "--dns-server '10.0.0.1'".
  Result<void> use_servers(const std::vector<DnsServer>& servers, const std::string& given) {
    std::vector<ares_addr_port_node> nodes(servers.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const DnsServer& server = servers[i];
      ares_addr_port_node& node = nodes[i];
      node.next = i + 1 < nodes.size() ? &nodes[i + 1] : nullptr;
      node.family = server.address.find(':') == std::string::npos ? AF_INET : AF_INET6;
      if (inet_pton(node.family, server.address.c_str(), &node.addr) != 1) {
        return usage_error(given + ": '" + server.address + "' is not a numeric address");
      }
      node.udp_port = server.port;
      node.tcp_port = server.port;
    }
    int status = ares_set_servers_ports(channel_, nodes.data());
    if (status != ARES_SUCCESS) return usage_error(given + ": " + ares_strerror(status));
    return {};
  }

  // A first, and AAAA only when the name exists without an A record: one query per peer in
  // the usual IPv4 cluster (half the load on the cluster DNS of an A+AAAA pair), and IPv6-only
  // peers still resolve. A dual-stack peer is reported with its IPv4 addresses.
  void start_lookup(const std::string& name, Done done) override {
    if (hosts_file_) {
      auto listed = hosts_file_->addresses(name);
      if (!listed.empty()) {
        done(lookup_success(std::move(listed)));
        return;
      }
    }
    lookup_family(name, AF_INET, [this, name, done = std::move(done)](LookupResult result) mutable {
      if (result.reason == LookupReason::no_address_records) {
        lookup_family(name, AF_INET6, std::move(done));
        return;
      }
      done(std::move(result));
    });
  }

  // A query for the PTR record itself rather than ares_gethostbyaddr, which reports every
  // failure (timeout, SERVFAIL, REFUSED) as "not found".
  void start_reverse_lookup(const std::string& address, Done done) override {
    auto name = reverse_lookup_name(address);
    if (!name) {
      done(lookup_failure(LookupReason::bad_address));
      return;
    }
    auto lookup = std::make_unique<PendingLookup>(PendingLookup{.resolver = this, .done = std::move(done)});
    lookup->family = address.find(':') == std::string::npos ? AF_INET : AF_INET6;
    lookup->length = lookup->family == AF_INET ? sizeof(in_addr) : sizeof(in6_addr);
    if (inet_pton(lookup->family, address.c_str(), &lookup->address) != 1) {
      lookup->done(lookup_failure(LookupReason::bad_address));
      return;
    }
    ares_query(channel_, name->c_str(), ns_c_in, ns_t_ptr, &CaresResolver::on_reverse_done,
               lookup.release());  // owned by on_reverse_done from here
  }

  void start_negative_ttl_probe(const std::string& name, std::function<void(std::optional<std::uint32_t>)> done) override {
    auto owned = std::make_unique<ProbeDone>(std::move(done));
    ares_query(channel_, name.c_str(), ns_c_in, ns_t_a, &CaresResolver::on_probe_done,
               owned.release());  // owned by on_probe_done from here
  }

  void process(std::chrono::milliseconds budget) override {
    timeval storage{};
    const timeval* next_timeout = ares_timeout(channel_, nullptr, &storage);
    if (sockets_.empty() && !next_timeout) {
      sleep_for(budget);  // nothing in flight: let the time pass (the caller wakes us for the next retry)
      return;
    }
    auto wait = budget;
    if (next_timeout) {
      // Rounded up: waking before c-ares' timer is due would only spin.
      auto until_timeout = std::chrono::milliseconds(static_cast<long long>(next_timeout->tv_sec) * 1000 +
                                                     (next_timeout->tv_usec + 999) / 1000);
      wait = std::min(wait, until_timeout);
    }
    // Our own copy: c-ares may close and open sockets while it handles one.
    std::vector<pollfd> polled;
    for (const auto& [fd, events] : sockets_) polled.push_back({fd, events, 0});
    if (::poll(polled.data(), polled.size(), static_cast<int>(std::max<long long>(wait.count(), 0))) < 0) {
      // Interrupted (EINTR): c-ares still handles its timeouts below. Anything else is no normal end.
      if (errno != EINTR) fail_pending(std::string("poll failed: ") + std::strerror(errno));
    }
    bool handled = false;
    for (const pollfd& entry : polled) {
      if (!entry.revents) continue;
      bool readable = entry.revents & (POLLIN | POLLERR | POLLHUP | POLLNVAL);
      bool writable = entry.revents & POLLOUT;
      ares_process_fd(channel_, readable ? entry.fd : ARES_SOCKET_BAD, writable ? entry.fd : ARES_SOCKET_BAD);
      handled = true;
    }
    if (!handled) ares_process_fd(channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // timeouts only
  }

  std::vector<std::string> servers() const override {
    std::vector<std::string> result;
    ares_addr_port_node* list = nullptr;
    if (ares_get_servers_ports(channel_, &list) != ARES_SUCCESS) return result;
    for (auto* node = list; node; node = node->next) {
      char text[INET6_ADDRSTRLEN] = {};
      if (!inet_ntop(node->family, &node->addr, text, sizeof text)) continue;
      result.push_back(join_host_port(text, node->udp_port ? node->udp_port : 53));
    }
    ares_free_data(list);
    return result;
  }

 private:
  std::optional<HostsFile> hosts_file_;
  void lookup_family(const std::string& name, int family, Done done) {
    ares_addrinfo_hints hints{};
    hints.ai_family = family;
    // NOSORT: RFC 6724 sorting would connect() a UDP socket per address; we only need to know
    // that the name exists.
    hints.ai_flags = ARES_AI_NOSORT;
    auto* lookup = new PendingLookup{.resolver = this, .done = std::move(done)};
    ares_getaddrinfo(channel_, name.c_str(), nullptr, &hints, &CaresResolver::on_done, lookup);
  }

  // Only EINTR is a normal end of the pause; it returns early and the caller's loop goes on.
  static void sleep_for(std::chrono::milliseconds budget) {
    timespec pause{static_cast<time_t>(budget.count() / 1000), static_cast<long>(budget.count() % 1000) * 1000000};
    if (::nanosleep(&pause, nullptr) != 0 && errno != EINTR) {
      log::warn("DNS lookups: nanosleep failed: {}", std::strerror(errno));
    }
  }

  // poll itself failed (out of kernel memory, say): every lookup in flight ends as DNS trouble
  // with that text, and the caller retries them on its schedule.
  void fail_pending(std::string why) {
    log::warn("DNS lookups: {}", why);
    local_failure_ = std::move(why);
    ares_cancel(channel_);
    local_failure_.clear();
  }

  // c-ares tells which sockets to watch, and for what; nothing to watch removes the socket.
  static void on_socket_state(void* data, ares_socket_t fd, int readable, int writable) {
    auto& sockets = static_cast<CaresResolver*>(data)->sockets_;
    if (!readable && !writable) {
      sockets.erase(fd);
      return;
    }
    sockets[fd] = static_cast<short>((readable ? POLLIN : 0) | (writable ? POLLOUT : 0));
  }

  // Whether c-ares ended the lookup without an answer: cancelled by fail_pending (then the
  // lookup fails with poll's error) or by the channel's end (then nobody waits for it).
  static bool cancelled(int status, PendingLookup& lookup) {
    if (status == ARES_EDESTRUCTION) return true;
    if (status != ARES_ECANCELLED) return false;
    const std::string& why = lookup.resolver->local_failure_;
    if (!why.empty()) lookup.done(lookup_failure(LookupReason::other, why));
    return true;
  }

  static void on_done(void* arg, int status, int /*timeouts*/, ares_addrinfo* info) {
    std::unique_ptr<PendingLookup> lookup(static_cast<PendingLookup*>(arg));
    std::unique_ptr<ares_addrinfo, decltype(&ares_freeaddrinfo)> owned(info, &ares_freeaddrinfo);
    if (cancelled(status, *lookup)) return;
    lookup->done(status == ARES_SUCCESS ? addresses_of(info) : failure_of(status, LookupReason::no_address_records));
  }

  static void on_reverse_done(void* arg, int status, int /*timeouts*/, unsigned char* answer, int length) {
    std::unique_ptr<PendingLookup> lookup(static_cast<PendingLookup*>(arg));
    if (cancelled(status, *lookup)) return;
    if (status != ARES_SUCCESS) {
      lookup->done(failure_of(status, LookupReason::no_ptr_record));
      return;
    }
    hostent* host = nullptr;
    status = ares_parse_ptr_reply(answer, length, &lookup->address, lookup->length, lookup->family, &host);
    std::unique_ptr<hostent, decltype(&ares_free_hostent)> owned(host, &ares_free_hostent);
    if (status != ARES_SUCCESS) lookup->done(failure_of(status, LookupReason::no_ptr_record));
    else if (host && host->h_name && *host->h_name) lookup->done(lookup_success({host->h_name}));
    else lookup->done(lookup_failure(LookupReason::no_ptr_record));
  }

  static void on_probe_done(void* arg, int status, int /*timeouts*/, unsigned char* answer, int length) {
    std::unique_ptr<ProbeDone> done(static_cast<ProbeDone*>(arg));
    if (status == ARES_EDESTRUCTION) return;  // the resolver, and whoever asked, are going away
    if (!answer || length <= 0) return (*done)(std::nullopt);
    (*done)(negative_answer_ttl(std::span<const unsigned char>(answer, static_cast<std::size_t>(length))));
  }

  ares_channel channel_ = nullptr;
  std::map<ares_socket_t, short> sockets_;  // what c-ares asked us to poll for
  std::string local_failure_;               // set while fail_pending cancels the lookups
};

}  // namespace

Result<std::unique_ptr<Resolver>> make_cares_resolver(const ResolverSettings& settings) {
  static int library_status = ARES_SUCCESS;
  static std::once_flag library_initialised;
  std::call_once(library_initialised, [] { library_status = ares_library_init(ARES_LIB_INIT_ALL); });
  if (library_status != ARES_SUCCESS) {
    return make_error(exit_code::usage, std::string("cannot set up DNS resolver: ") + ares_strerror(library_status));
  }
  auto resolver = std::make_unique<CaresResolver>();
  if (auto opened = resolver->open(settings); !opened) return std::unexpected(opened.error());
  return std::unique_ptr<Resolver>(std::move(resolver));
}

}  // namespace tfboot
