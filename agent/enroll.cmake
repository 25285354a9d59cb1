# The host CA and the enrollment server (issue 4), included by agent/CMakeLists.txt (through
# agent_enroll.cmake). sluice_agent_enroll: ca.c replay.c ratelimit.c enroll.c;
# sluice-agent-ca: the CA tool.
pkg_check_modules(SQLITE REQUIRED IMPORTED_TARGET sqlite3)

add_library(sluice_agent_enroll STATIC
  ${CMAKE_CURRENT_LIST_DIR}/ca.c
  ${CMAKE_CURRENT_LIST_DIR}/replay.c
  ${CMAKE_CURRENT_LIST_DIR}/ratelimit.c
  ${CMAKE_CURRENT_LIST_DIR}/enroll.c)
target_include_directories(sluice_agent_enroll PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(sluice_agent_enroll PUBLIC sluice_util sluice_channel sluice_token
                      sluice_control OpenSSL::Crypto PkgConfig::SQLITE)

add_executable(sluice-agent-ca ${CMAKE_CURRENT_LIST_DIR}/ca_tool.c)
target_link_libraries(sluice-agent-ca PRIVATE sluice_agent_enroll)
install(TARGETS sluice-agent-ca RUNTIME DESTINATION bin)

# The names agent/CMakeLists.txt links sluice-agent with.
add_library(agent_ca ALIAS sluice_agent_enroll)
add_library(agent_enroll ALIAS sluice_agent_enroll)
