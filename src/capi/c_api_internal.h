// Shared pieces of the C API front end (include/posenc/c.h): the exception
// barrier, argument conversion to the C++ API types, the default context.
// The C API is a front end like cli/ and python/: it includes only public
// headers (include/posenc/) and never the library internals.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "posenc/c.h"
#include "posenc/context.h"
#include "posenc/error.h"
#include "posenc/positions.h"
#include "posenc/rope.h"
#include "posenc/tensor.h"

struct posenc_context {
  posenc::Context context;
};

namespace posenc::capi {

// Records `message` as this thread's last error and returns `status`.
posenc_status SetError(posenc_status status, const char* message) noexcept;
posenc_status CurrentExceptionStatus() noexcept;  // inside a catch (...) block
void ClearError() noexcept;                       // last error "" (no allocation)

// Runs fn(); maps every exception to a status and the thread's last error,
// which a success clears (c.h: posenc_last_error).
template <typename Fn>
posenc_status Guard(Fn&& fn) noexcept {
  try {
    fn();
    ClearError();
    return POSENC_OK;
  } catch (...) {
    return CurrentExceptionStatus();
  }
}

// Throws InvalidArgument("ARG: got NULL, expected ...") for a null pointer.
void RequirePointer(const void* p, std::string_view arg, std::string_view expected);

// ABI (c.h, "Stability"): every public struct starts with `size_t
// struct_size`, set by its _init function. This library knows one size per
// struct, its own sizeof; any other value (a caller that skipped _init, or a
// header newer than the library) is InvalidArgument naming `arg`.struct_size.
template <typename T>
void CheckStructSize(const T* p, std::string_view arg, std::string_view init) {
  // Messages are built only on failure: entry points run this on every call
  // and a call in the steady state allocates nothing (c.h, "Memory").
  if (p == nullptr) {
    throw InvalidArgument(
        ArgMessage(arg, "NULL", "a " + std::string(init) + "-initialised struct"));
  }
  if (p->struct_size != sizeof(T)) {
    throw InvalidArgument(ArgMessage(std::string(arg) + ".struct_size",
                                     std::to_string(p->struct_size),
                                     std::to_string(sizeof(T)) + " (set by " + std::string(init) +
                                         "; another value means the struct was not initialised "
                                         "or the header is newer than the library)"));
  }
}

// The context to run on: *ctx, or a per-thread default (1 thread, auto).
const Context& ContextOf(const posenc_context* ctx);

// Enum checks: the C value must be one of [0, count).
template <typename E>
E EnumOf(int value, int count, std::string_view arg, std::string_view allowed) {
  Require(value >= 0 && value < count, arg, value, allowed);
  return static_cast<E>(value);
}

DType DTypeOf(posenc_dtype dtype, std::string_view arg);
TensorView ViewOf(const posenc_tensor* t, std::string_view arg);
Positions PositionsOf(const posenc_positions* p, std::string_view arg);
AttentionLayout LayoutOf(posenc_layout layout);
// The C params as C++ RopeParams: a per-thread object whose frequency vector
// keeps its capacity, valid until the next call on this thread (C entry
// points do not nest).
const RopeParams& RopeParamsOf(const posenc_rope_params* p);

}  // namespace posenc::capi
