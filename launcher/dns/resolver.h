// Name lookups behind a small interface: c-ares in production, a fake in unit tests. What a lookup
// returns, and the pure helpers around names, are in dns/names.h.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "dns/names.h"

namespace tfboot {

class Resolver {
 public:
  virtual ~Resolver() = default;
  // Starts one lookup of a name's addresses; `done` is called from within process().
  virtual void start_lookup(const std::string& name, std::function<void(LookupResult)> done) = 0;
  // Starts one reverse (PTR) lookup of a numeric address; the name comes back in `addresses`.
  virtual void start_reverse_lookup(const std::string& address, std::function<void(LookupResult)> done) = 0;
  // Sends one A query for the fully qualified `name` as it is and reports the TTL of the SOA in a
  // negative answer (negative_answer_ttl in dns/names.h); nullopt otherwise or when unsupported.
  virtual void start_negative_ttl_probe(const std::string& name, std::function<void(std::optional<std::uint32_t>)> done) {
    (void)name;
    done(std::nullopt);
  }
  // Handles network events for at most `budget`, running callbacks of finished lookups.
  virtual void process(std::chrono::milliseconds budget) = 0;
  // The servers queried, for the log and startup.json.
  virtual std::vector<std::string> servers() const = 0;
};

struct ResolverSettings {
  // --dns-server as check_options parsed it, and the setting as given ("--dns-server '10.0.0.1'")
  // for errors; empty: resolv.conf's nameservers.
  std::vector<DnsServer> servers;
  std::string servers_given;
  std::chrono::milliseconds per_try_timeout{500};
  // What /etc/resolv.conf says, as tfboot read it (host_facts.h): c-ares is never let near the
  // /etc files itself, since a FIFO or a device there would block it for ever. No nameserver:
  // 127.0.0.1, as glibc does.
  std::vector<std::string> nameservers;
  std::vector<std::string> search;
  int ndots = 1;
  // The text of /etc/hosts, answered before DNS, as glibc's "hosts: files dns" does; nullopt:
  // DNS only, so a pod's own /etc/hosts line proves nothing.
  std::optional<std::string> hosts_file;
};

Result<std::unique_ptr<Resolver>> make_cares_resolver(const ResolverSettings& settings);

}  // namespace tfboot
