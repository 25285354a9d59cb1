# agent/CMakeLists.txt includes this file by this name; the definitions live in enroll.cmake.
include(${CMAKE_CURRENT_LIST_DIR}/enroll.cmake)
