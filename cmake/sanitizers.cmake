# KSHARD_SANITIZE: a comma list for -fsanitize= (e.g. "address,undefined"); empty for none.
set(KSHARD_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined")
if(KSHARD_SANITIZE)
  add_compile_options(-fsanitize=${KSHARD_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=${KSHARD_SANITIZE})
  # GCC's -Wmaybe-uninitialized gives false positives under the sanitizers' instrumentation
  # (e.g. inside libstdc++'s <regex> at -O1, GCC bug 105562); the release build keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
endif()
