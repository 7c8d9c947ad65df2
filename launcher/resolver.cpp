// The c-ares Resolver: one channel, lookups driven by the classic ares_fds/ares_timeout/select loop.
#include "resolver.h"

#include <arpa/inet.h>
#include <ares.h>
#include <netdb.h>
#include <sys/select.h>
#include <time.h>

#include <mutex>

namespace tfboot {

LookupResult lookup_success(std::vector<std::string> addresses) {
  return {LookupStatus::resolved, std::move(addresses), "", LookupReason::none};
}

LookupResult lookup_failure(LookupReason reason, std::string detail) {
  auto result = [&](LookupStatus status, std::string text) { return LookupResult{status, {}, std::move(text), reason}; };
  switch (reason) {
    case LookupReason::none: break;
    case LookupReason::nxdomain: return result(LookupStatus::not_published, "NXDOMAIN");
    case LookupReason::no_address_records: return result(LookupStatus::not_published, "no address records");
    case LookupReason::no_ptr_record: return result(LookupStatus::not_published, "no PTR record");
    case LookupReason::bad_address: return result(LookupStatus::not_published, "not a numeric address");
    case LookupReason::timeout: return result(LookupStatus::dns_trouble, "timeout");
    case LookupReason::servfail: return result(LookupStatus::dns_trouble, "SERVFAIL");
    case LookupReason::refused: return result(LookupStatus::dns_trouble, "REFUSED");
    case LookupReason::connection_refused: return result(LookupStatus::dns_trouble, "connection refused");
    case LookupReason::other: break;
  }
  return result(LookupStatus::dns_trouble, detail.empty() ? std::string("lookup failed") : std::move(detail));
}

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

LookupResult addresses_of(const ares_addrinfo* info) {
  std::vector<std::string> v4, v6;
  for (const ares_addrinfo_node* node = info ? info->nodes : nullptr; node; node = node->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (node->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(node->ai_addr)->sin_addr, text, sizeof text);
      v4.emplace_back(text);
    } else if (node->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(node->ai_addr)->sin6_addr, text, sizeof text);
      v6.emplace_back(text);
    }
  }
  if (v4.empty() && v6.empty()) return lookup_failure(LookupReason::no_address_records);
  v4.insert(v4.end(), v6.begin(), v6.end());
  return lookup_success(std::move(v4));
}

class CaresResolver final : public Resolver {
 public:
  explicit CaresResolver(ares_channel channel) : channel_(channel) {}
  ~CaresResolver() override { ares_destroy(channel_); }
  CaresResolver(const CaresResolver&) = delete;
  CaresResolver& operator=(const CaresResolver&) = delete;

  // A first, and AAAA only when the name exists without an A record: one query per peer in
  // the usual IPv4 cluster (half the load on the cluster DNS of an A+AAAA pair), and IPv6-only
  // peers still resolve. A dual-stack peer is reported with its IPv4 addresses.
  void start_lookup(const std::string& name, std::function<void(LookupResult)> done) override {
    lookup_family(name, AF_INET, [this, name, done = std::move(done)](LookupResult result) mutable {
      if (result.reason == LookupReason::no_address_records) {
        lookup_family(name, AF_INET6, std::move(done));
        return;
      }
      done(std::move(result));
    });
  }

  void lookup_family(const std::string& name, int family, std::function<void(LookupResult)> done) {
    ares_addrinfo_hints hints{};
    hints.ai_family = family;
    // NOSORT: RFC 6724 sorting would connect() a UDP socket per address; we only need to know
    // that the name exists.
    hints.ai_flags = ARES_AI_NOSORT;
    auto* callback = new std::function<void(LookupResult)>(std::move(done));
    ares_getaddrinfo(channel_, name.c_str(), nullptr, &hints, &CaresResolver::on_done, callback);
  }

  void start_reverse_lookup(const std::string& address, std::function<void(LookupResult)> done) override {
    in6_addr storage{};
    int family = address.find(':') == std::string::npos ? AF_INET : AF_INET6;
    if (inet_pton(family, address.c_str(), &storage) != 1) {
      done(lookup_failure(LookupReason::bad_address));
      return;
    }
    auto* callback = new std::function<void(LookupResult)>(std::move(done));
    ares_gethostbyaddr(channel_, &storage, family == AF_INET ? sizeof(in_addr) : sizeof(in6_addr), family,
                       &CaresResolver::on_reverse_done, callback);
  }

  void process(std::chrono::milliseconds budget) override {
    fd_set readers, writers;
    FD_ZERO(&readers);
    FD_ZERO(&writers);
    int nfds = ares_fds(channel_, &readers, &writers);
    timeval max_wait{static_cast<time_t>(budget.count() / 1000), static_cast<suseconds_t>((budget.count() % 1000) * 1000)};
    if (nfds == 0) {
      // Nothing in flight: just let the time pass (the caller wakes us for the next retry).
      timespec pause{max_wait.tv_sec, max_wait.tv_usec * 1000};
      nanosleep(&pause, nullptr);
      return;
    }
    timeval storage{};
    timeval* wait = ares_timeout(channel_, &max_wait, &storage);
    int ready = select(nfds, &readers, &writers, nullptr, wait);
    if (ready < 0) {
      FD_ZERO(&readers);  // EINTR: still let c-ares handle its timeouts
      FD_ZERO(&writers);
    }
    ares_process(channel_, &readers, &writers);
  }

  std::vector<std::string> servers() const override {
    std::vector<std::string> result;
    ares_addr_port_node* list = nullptr;
    if (ares_get_servers_ports(channel_, &list) != ARES_SUCCESS) return result;
    for (auto* node = list; node; node = node->next) {
      char text[INET6_ADDRSTRLEN] = {};
      inet_ntop(node->family, &node->addr, text, sizeof text);
      int port = node->udp_port ? node->udp_port : 53;
      result.push_back(node->family == AF_INET6 ? "[" + std::string(text) + "]:" + std::to_string(port)
                                                : std::string(text) + ":" + std::to_string(port));
    }
    ares_free_data(list);
    return result;
  }

 private:
  static void on_done(void* arg, int status, int /*timeouts*/, ares_addrinfo* info) {
    std::unique_ptr<std::function<void(LookupResult)>> callback(static_cast<std::function<void(LookupResult)>*>(arg));
    // On ares_destroy the pending lookups are cancelled; nobody waits for them any more.
    if (status != ARES_EDESTRUCTION && status != ARES_ECANCELLED) {
      (*callback)(status == ARES_SUCCESS ? addresses_of(info) : failure_of(status, LookupReason::no_address_records));
    }
    if (info) ares_freeaddrinfo(info);
  }

  static void on_reverse_done(void* arg, int status, int /*timeouts*/, hostent* host) {
    std::unique_ptr<std::function<void(LookupResult)>> callback(static_cast<std::function<void(LookupResult)>*>(arg));
    if (status == ARES_EDESTRUCTION || status == ARES_ECANCELLED) return;
    if (status != ARES_SUCCESS) (*callback)(failure_of(status, LookupReason::no_ptr_record));
    else if (host && host->h_name && *host->h_name) (*callback)(lookup_success({host->h_name}));
    else (*callback)(lookup_failure(LookupReason::no_ptr_record));
  }

  ares_channel channel_;
};

}  // namespace

Result<std::unique_ptr<Resolver>> make_cares_resolver(const ResolverSettings& settings) {
  static std::once_flag library_initialised;
  std::call_once(library_initialised, [] { ares_library_init(ARES_LIB_INIT_ALL); });

  ares_options options{};
  int mask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_LOOKUPS;
  // NOCHECKRESP: report SERVFAIL and REFUSED as such (otherwise they look like a refused
  // connection), so the log can say "DNS in trouble" precisely. Our own loop does the retries.
  options.flags = ARES_FLAG_NOCHECKRESP;
  options.timeout = static_cast<int>(settings.per_try_timeout.count());
  options.tries = 1;
  std::string lookups = settings.use_hosts_file ? "fb" : "b";
  options.lookups = lookups.data();
  ares_channel channel = nullptr;
  int status = ares_init_options(&channel, &options, mask);
  if (status != ARES_SUCCESS) {
    return make_error(exit_code::usage, std::string("cannot set up DNS resolver from /etc/resolv.conf: ") + ares_strerror(status));
  }
  if (!settings.servers_csv.empty()) {
    status = ares_set_servers_ports_csv(channel, settings.servers_csv.c_str());
    if (status != ARES_SUCCESS) {
      ares_destroy(channel);
      return usage_error(settings.servers_source + " '" + settings.servers_csv + "' is not a list of ip[:port]: " +
                         ares_strerror(status));
    }
  }
  return std::unique_ptr<Resolver>(new CaresResolver(channel));
}

}  // namespace tfboot
