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

// Runs fn(); maps every exception to a status and the thread's last error.
template <typename Fn>
posenc_status Guard(Fn&& fn) noexcept {
  try {
    fn();
    return POSENC_OK;
  } catch (...) {
    return CurrentExceptionStatus();
  }
}

// Throws InvalidArgument("ARG: got NULL, expected ...") for a null pointer.
void RequirePointer(const void* p, std::string_view arg, std::string_view expected);

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
RopeParams RopeParamsOf(const posenc_rope_params* p);

}  // namespace posenc::capi
