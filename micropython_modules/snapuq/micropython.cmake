# snapuq user C module for the CMake-based MicroPython ports (esp32, rp2).
# Glue only: the runtime, SNAP core and blob reader are compiled from firmware/core by path,
# from the one source list firmware/core/core.mk (read here line by line: `VAR += file`), without the
# TOKENS group (no token API in the module), plus the firmware's SHA-256 for Model.snap_sha256.
add_library(usermod_snapuq INTERFACE)

get_filename_component(SNAPUQ_CORE_DIR ${CMAKE_CURRENT_LIST_DIR}/../../firmware/core ABSOLUTE)
get_filename_component(SNAPUQ_APP_DIR ${CMAKE_CURRENT_LIST_DIR}/../../firmware/app ABSOLUTE)
file(STRINGS ${SNAPUQ_CORE_DIR}/core.mk SNAPUQ_CORE_LINES
     REGEX "^SNAPUQ_CORE_(RUNTIME|DSP|SNAP)_SRC[ \t]*\\+=")
set(SNAPUQ_CORE_SOURCES)
foreach(line ${SNAPUQ_CORE_LINES})
    string(REGEX REPLACE "^[A-Z_]+[ \t]*\\+=[ \t]*([^ \t]+)[ \t]*$" "\\1" src "${line}")
    list(APPEND SNAPUQ_CORE_SOURCES ${SNAPUQ_CORE_DIR}/${src})
endforeach()
if(NOT SNAPUQ_CORE_SOURCES)
    message(FATAL_ERROR "snapuq: ${SNAPUQ_CORE_DIR}/core.mk lists no sources")
endif()

target_sources(usermod_snapuq INTERFACE
    ${CMAKE_CURRENT_LIST_DIR}/modsnapuq.c
    ${SNAPUQ_CORE_SOURCES}
    ${SNAPUQ_APP_DIR}/snapuq_sha256.c
)
target_include_directories(usermod_snapuq INTERFACE ${SNAPUQ_CORE_DIR} ${SNAPUQ_APP_DIR})
if(SNAPUQ_KERNELS_DSP)
    target_compile_definitions(usermod_snapuq INTERFACE SNAPUQ_KERNELS_DSP=1)
endif()

target_link_libraries(usermod INTERFACE usermod_snapuq)
