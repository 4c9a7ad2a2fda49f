# Warnings for our own code, as an INTERFACE target: third-party headers come in through imported
# targets as system includes and are not affected.
add_library(kshard_warnings INTERFACE)
target_compile_options(kshard_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
  -Wimplicit-fallthrough -Wcast-qual -Wformat=2)
# GCC 12 at -O3 warns of an overlapping memcpy inside libstdc++'s std::string (char_traits::copy
# reached from _M_replace) where there is none, a false positive that GCC 13 no longer reports.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(kshard_warnings INTERFACE -Wno-restrict)
endif()
if(KSHARD_WERROR)
  target_compile_options(kshard_warnings INTERFACE -Werror)
endif()
# A unity build (the release preset) includes each .cc in a generated file, where GCC takes a class
# that holds a type of the .cc's anonymous namespace for one in a header. Each .cc is still
# included once, so no definition is shared between translation units: the warning does not apply.
if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(kshard_warnings INTERFACE -Wno-subobject-linkage)
endif()
