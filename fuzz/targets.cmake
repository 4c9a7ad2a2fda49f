# The fuzz harness bodies as a library, shared by the libFuzzer binaries (fuzz/CMakeLists.txt, clang
# only) and the replay test (tests/fuzz/, any compiler). Included from both; defines the library
# once.
#
# KSHARD_FUZZ_HARNESSES names every harness: fuzz/<name>_fuzz.cc holds fuzzOne<Name>, listed in
# fuzz/fuzz_targets.cc; the binary is <name>_fuzz; seeds are in fuzz/corpus/<name>/. To add one:
# the .cc file, its name here and in fuzz_targets.cc, its library in target_link_libraries below,
# and a seed corpus.
set(KSHARD_FUZZ_HARNESSES
  admission_review
  base64
  channel_frame
  duration
  entity_key
  http_head
  injection_config
  json_depth
  jwt
  kube_api
  kubeconfig
  options_yaml
  router
  shard_map_json
  shard_set
  version
  watch_stream
  wire)

if(NOT TARGET kshard_fuzz_targets)
  set(_kshard_fuzz_sources
    "${CMAKE_CURRENT_LIST_DIR}/checked_logger.cc"
    "${CMAKE_CURRENT_LIST_DIR}/fuzz_input.cc"
    "${CMAKE_CURRENT_LIST_DIR}/fuzz_targets.cc")
  foreach(_name IN LISTS KSHARD_FUZZ_HARNESSES)
    list(APPEND _kshard_fuzz_sources "${CMAKE_CURRENT_LIST_DIR}/${_name}_fuzz.cc")
  endforeach()
  add_library(kshard_fuzz_targets STATIC ${_kshard_fuzz_sources})
  target_link_libraries(kshard_fuzz_targets
    PUBLIC kshard_folder_fuzz
    PRIVATE kshard_folder_http_internal kshard_base kshard_options kshard_sharding kshard_protocol kshard_http kshard_kube
            kshard_injector kshard_sidecar_core kshard_jwt_signer nlohmann_json::nlohmann_json yaml-cpp
            Boost::system
            kshard_warnings)
endif()
