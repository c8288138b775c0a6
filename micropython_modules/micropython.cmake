# Top-level list of snapuq's MicroPython user C modules (CMake ports: esp32, rp2).
#   cmake/idf.py/make ... -DUSER_C_MODULES=/path/to/snapuq/micropython_modules/micropython.cmake
include(${CMAKE_CURRENT_LIST_DIR}/snapuq/micropython.cmake)
