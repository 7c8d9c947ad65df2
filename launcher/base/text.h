// Small text helpers that every layer uses, each written once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tfboot {

// "1 task", "3 tasks": a count with its noun, in the singular for one.
std::string counted(std::size_t count, std::string_view noun);

// Levenshtein distance: single-character insertions, deletions and substitutions.
std::size_t edit_distance(std::string_view a, std::string_view b);

// "SIGTERM" for 15; "signal 40" for one without a name (a real-time signal).
std::string signal_name(int signal_number);

// "host:port", or "[v6]:port" when the host is an IPv6 address: the one place that writes one.
std::string join_host_port(std::string_view host, int port);

// The parts of `text` between `separator`s, as views into it (so `text` must outlive them):
// "a,,b" gives "a", "", "b", and "" gives one empty part, for lists where an empty item is an error.
std::vector<std::string_view> split(std::string_view text, char separator);
// The same without the empty parts: "/a::/b:" gives "/a", "/b" (search paths, words).
std::vector<std::string_view> split_non_empty(std::string_view text, char separator);
// The parts joined by `separator`, split's inverse: {"a", "b"} and "," give "a,b"; none give "".
std::string joined(const std::vector<std::string>& parts, std::string_view separator);
// The lines of `text` without their '\n', as views into it: a last line needs no '\n', and ""
// has none.
std::vector<std::string_view> lines(std::string_view text);

}  // namespace tfboot
