# Precompiled standard headers for the sanitizer build (KILN_PCH, on in the asan preset): at -O0
# that build's time is mostly parsing the same headers again in every file.
# EXTRA: the directory's own heavy headers (CLI11 in tools/kiln, GoogleTest in tests).
function(kiln_precompile_headers dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "LIBRARY|EXECUTABLE" OR type STREQUAL "INTERFACE_LIBRARY")
      continue()
    endif()
    # Files compiled with their own -O or -m flags cannot use a PCH made without them.
    get_target_property(sources ${t} SOURCES)
    foreach(src ${sources})
      get_source_file_property(options ${src} DIRECTORY ${dir} COMPILE_OPTIONS)
      if(options)
        set_source_files_properties(${src} DIRECTORY ${dir} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endforeach()
    target_precompile_headers(${t} PRIVATE <algorithm> <cmath> <cstdint> <cstring> <functional> <map>
      <memory> <optional> <set> <sstream> <string> <unordered_map> <unordered_set> <variant> <vector> ${ARGN})
  endforeach()
endfunction()
