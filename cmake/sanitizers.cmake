# KSHARD_SANITIZE: a comma list for -fsanitize= (e.g. "address,undefined"); empty for none.
set(KSHARD_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined")
if(KSHARD_SANITIZE)
  add_compile_options(-fsanitize=${KSHARD_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=${KSHARD_SANITIZE})
  # UBSan's vptr check fails on cpprestsdk's stream buffers (astreambuf.h: "member call on address
  # ... which does not point to an object of type 'basic_streambuf'", the object being a
  # basic_container_buffer): the buffer is made inside libcpprest.so, whose type_info for the
  # template is not the one our objects use, so the dynamic type check sees two types. Found by
  # the manager API's Schemathesis run (a refused register reads a 404 body from the API server);
  # with -fno-sanitize-recover it aborted the operator.
  if(KSHARD_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize=vptr)
    add_link_options(-fno-sanitize=vptr)
  endif()
  # GCC's -Wmaybe-uninitialized gives false positives under the sanitizers' instrumentation
  # (e.g. inside libstdc++'s <regex> at -O1, GCC bug 105562); the release build keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
endif()
