# The project's modules and the one direction their dependencies run.
#
# A module is a folder and a library. tpuemu_module(<folder> USES <modules>...)
# refuses, when CMake configures, any #include in the folder of a project
# header from a module it does not list, so that a dependency running the
# wrong way fails the build at once instead of creeping in. The include
# check also runs on its own (cmake -P cmake/check_layer.cmake), which is how
# a test shows that it refuses.

# The module an #include names: "core/<part>", "services", "coordinator",
# "worker", "client", "views", "web", "proto" (generated messages and gRPC), or "" for a
# header from outside the project.
function(tpuemu_module_of header out)
  if(header MATCHES "^core/([a-z_]+)/")
    set(${out} "core/${CMAKE_MATCH_1}" PARENT_SCOPE)
  elseif(header MATCHES "^(services|coordinator|worker|client|views|web)/")
    set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  elseif(header MATCHES "^(tpuemu/v1/|grpc/|grpcpp/|google/protobuf/)")
    set(${out} "proto" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

# Fails (FATAL_ERROR) when a file in `dir` includes a header of a module that
# is neither `module` itself nor one of `uses`.
function(tpuemu_check_layer dir module uses)
  file(GLOB files "${dir}/*.h" "${dir}/*.cc")
  foreach(file IN LISTS files)
    file(STRINGS "${file}" lines REGEX "^#include \"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" header "${line}")
      tpuemu_module_of("${header}" used)
      if(used STREQUAL "" OR used STREQUAL module OR used IN_LIST uses)
        continue()
      endif()
      string(REPLACE ";" ", " allowed "${uses}")
      if(allowed STREQUAL "")
        set(allowed "no other module")
      endif()
      message(FATAL_ERROR "${file} includes ${header}: ${module} may use only ${allowed} "
                          "(dependencies run one way; see cmake/layers.cmake and the README's architecture map)")
    endforeach()
  endforeach()
endfunction()

# tpuemu_module(<folder> SOURCES <files> USES <modules> [LINKS <targets>])
# adds the library tpuemu_<folder with / as _> (core/train: tpuemu_core_train)
# from the current source folder, linked to the libraries of the modules it
# uses, and checks its includes against USES.
function(tpuemu_module module)
  cmake_parse_arguments(M "" "" "SOURCES;USES;LINKS;PRIVATE_LINKS" ${ARGN})
  tpuemu_check_layer("${CMAKE_CURRENT_SOURCE_DIR}" "${module}" "${M_USES}")
  string(REPLACE "/" "_" target "tpuemu_${module}")
  add_library(${target} ${M_SOURCES})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
  foreach(used IN LISTS M_USES)
    string(REPLACE "/" "_" used_target "tpuemu_${used}")
    target_link_libraries(${target} PUBLIC ${used_target})
  endforeach()
  target_link_libraries(${target} PUBLIC ${M_LINKS} PRIVATE ${M_PRIVATE_LINKS})
endfunction()
