# Warnings for our own code, as an INTERFACE target: third-party headers come in through imported
# targets as system includes and are not affected.
add_library(kshard_warnings INTERFACE)
target_compile_options(kshard_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
  -Wimplicit-fallthrough -Wcast-qual -Wformat=2)
if(KSHARD_WERROR)
  target_compile_options(kshard_warnings INTERFACE -Werror)
endif()
