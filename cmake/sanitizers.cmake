# KSHARD_SANITIZE: a comma list for -fsanitize= (e.g. "address,undefined"); empty for none.
set(KSHARD_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined")
if(KSHARD_SANITIZE)
  add_compile_options(-fsanitize=${KSHARD_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=${KSHARD_SANITIZE})
endif()
