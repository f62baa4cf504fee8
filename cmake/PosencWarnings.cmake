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
