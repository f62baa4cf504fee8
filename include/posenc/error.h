// posenc/error.h: the error hierarchy of the public API.
//
// The library validates every argument at its boundary and reports bad input
// by throwing one of these; it never exits, aborts or returns NaN for user
// input. Each message names the argument, the value given and what is allowed:
//   "rotary_dim: got 7, expected an even number in [2, head_dim=64]"
// The CLI maps the classes to exit codes (see cli/main.cc) and the Python
// module maps them to ValueError / RuntimeError.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace posenc {

// Base of every error the library throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A function argument (or tensor view) is outside what the function accepts.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A model configuration (config.json, rope parameters) is malformed.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A file could not be read, written or parsed.
class IoError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename T>
std::string ToText(const T& value) {
  std::ostringstream os;
  os.precision(17);
  os << value;
  return os.str();
}
}  // namespace detail

// Builds the canonical message "ARG: got VALUE, expected ALLOWED".
template <typename T>
std::string ArgMessage(std::string_view arg, const T& value, std::string_view allowed) {
  std::string msg(arg);
  msg += ": got ";
  msg += detail::ToText(value);
  msg += ", expected ";
  msg += allowed;
  return msg;
}

// Throws InvalidArgument("ARG: got VALUE, expected ALLOWED") unless `ok`.
template <typename T>
void Require(bool ok, std::string_view arg, const T& value, std::string_view allowed) {
  if (!ok) throw InvalidArgument(ArgMessage(arg, value, allowed));
}

// Throws InvalidArgument("ARG[INDEX]: got VALUE, expected ALLOWED") unless
// `ok`. For checks of every element of a list: the name is built only when
// the check fails, so a loop over millions of ids allocates nothing.
template <typename T>
void RequireAt(bool ok, std::string_view arg, std::int64_t index, const T& value,
               std::string_view allowed) {
  if (ok) return;
  std::string name(arg);
  name += '[';
  name += std::to_string(index);
  name += ']';
  throw InvalidArgument(ArgMessage(name, value, allowed));
}

// Throws InvalidArgument("ARG: got VALUE, expected ALLOWED"). For checks whose
// message costs more to build than the check: `if (!ok) FailArgument(...)`.
template <typename T>
[[noreturn]] void FailArgument(std::string_view arg, const T& value, std::string_view allowed) {
  throw InvalidArgument(ArgMessage(arg, value, allowed));
}

}  // namespace posenc
