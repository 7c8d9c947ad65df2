// Small helpers shared by the unit tests: a Result's error as text and exit code.
#pragma once

#include <string>

#include "base/error.h"

namespace tfboot {

template <typename T>
std::string error_of(const Result<T>& result) {
  return result ? std::string("<no error>") : result.error().message;
}

template <typename T>
int code_of(const Result<T>& result) {
  return result ? 0 : result.error().code;
}

}  // namespace tfboot
