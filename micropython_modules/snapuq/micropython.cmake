# snapuq user C module for the CMake-based MicroPython ports (esp32, rp2).
# Glue only: the runtime and SNAP core are compiled from firmware/core by path (same glob as
# micropython.mk, so the two file lists cannot drift).
add_library(usermod_snapuq INTERFACE)

get_filename_component(SNAPUQ_CORE_DIR ${CMAKE_CURRENT_LIST_DIR}/../../firmware/core ABSOLUTE)
file(GLOB SNAPUQ_CORE_SOURCES ${SNAPUQ_CORE_DIR}/*.c)
list(SORT SNAPUQ_CORE_SOURCES)

target_sources(usermod_snapuq INTERFACE
    ${CMAKE_CURRENT_LIST_DIR}/modsnapuq.c
    ${SNAPUQ_CORE_SOURCES}
)
target_include_directories(usermod_snapuq INTERFACE ${SNAPUQ_CORE_DIR})
if(SNAPUQ_KERNELS_DSP)
    target_compile_definitions(usermod_snapuq INTERFACE SNAPUQ_KERNELS_DSP=1)
endif()

target_link_libraries(usermod INTERFACE usermod_snapuq)
