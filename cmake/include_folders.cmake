# Include folders per target. Every #include names its top-level folder ("sharding/planner.h"),
# and a target sees only the folders of the libraries it links: each folder's INTERFACE target,
# kshard_folder_<folder>, puts on the include path a directory of the build tree that holds a link
# to that folder alone (Bazel's "virtual includes"). An include of a folder the target does not
# link fails to compile; tools/check-includes.py checks the same graph from the sources.
set(KSHARD_INCLUDE_ROOT "${PROJECT_BINARY_DIR}/include")

# kshard_folder_include(<folder>): kshard_folder_<folder>, which makes "<folder>/..." includable.
function(kshard_folder_include folder)
  set(dir "${KSHARD_INCLUDE_ROOT}/${folder}")
  file(MAKE_DIRECTORY "${dir}")
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${folder}" "${dir}/${folder}" SYMBOLIC)
  add_library(kshard_folder_${folder} INTERFACE)
  target_include_directories(kshard_folder_${folder} INTERFACE "${dir}")
endfunction()

# kshard_public_headers(<folder> <headers...>): kshard_folder_<folder> with only these headers of
# the folder (no subfolder), for a folder whose other headers are internal; and
# kshard_folder_<folder>_internal with every header, for the folder's own library, its tests and
# its fuzz harnesses.
function(kshard_public_headers folder)
  set(dir "${KSHARD_INCLUDE_ROOT}/${folder}")
  file(REMOVE_RECURSE "${dir}")
  file(MAKE_DIRECTORY "${dir}/${folder}")
  foreach(header IN LISTS ARGN)
    if(NOT EXISTS "${PROJECT_SOURCE_DIR}/${folder}/${header}")
      message(FATAL_ERROR "kshard_public_headers: no ${folder}/${header}")
    endif()
    file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${folder}/${header}" "${dir}/${folder}/${header}"
         SYMBOLIC)
  endforeach()
  add_library(kshard_folder_${folder} INTERFACE)
  target_include_directories(kshard_folder_${folder} INTERFACE "${dir}")

  set(internal "${KSHARD_INCLUDE_ROOT}/${folder}_internal")
  file(MAKE_DIRECTORY "${internal}")
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${folder}" "${internal}/${folder}" SYMBOLIC)
  add_library(kshard_folder_${folder}_internal INTERFACE)
  # Before the public folder: in a file that sees both, every header of the folder is reached by
  # one path.
  target_include_directories(kshard_folder_${folder}_internal BEFORE INTERFACE "${internal}")
endfunction()

# http/ names its public headers itself (http/CMakeLists.txt).
foreach(folder IN LISTS KSHARD_FOLDERS ITEMS fuzz tests)
  if(NOT folder STREQUAL "http")
    kshard_folder_include(${folder})
  endif()
endforeach()
