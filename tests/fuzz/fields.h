// Splits a fuzzer input into NUL-separated fields; the last field takes the rest.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

template <std::size_t N>
std::array<std::string, N> split_fields(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::array<std::string, N> fields;
  std::size_t start = 0;
  for (std::size_t i = 0; i < N && start <= text.size(); ++i) {
    std::size_t end = i + 1 == N ? text.size() : text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    fields[i] = text.substr(start, end - start);
    start = end + 1;
  }
  return fields;
}
