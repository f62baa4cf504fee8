# Warning and sanitizer flags, applied PRIVATE to our own targets only.
function(posenc_set_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-psabi
    $<$<BOOL:${POSENC_WERROR}>:-Werror>)
endfunction()

if(POSENC_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# libFuzzer build: coverage instrumentation for every target, ASan + UBSan
# (UB is fatal, so the fuzzer records it as a crash); fuzz/ links -fsanitize=fuzzer.
if(POSENC_BUILD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "POSENC_BUILD_FUZZ needs clang (libFuzzer): use `cmake --preset fuzz`")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# ThreadSanitizer build (the tsan preset): data races in the thread pool and
# the kernels that share a Context.
if(POSENC_TSAN)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()
