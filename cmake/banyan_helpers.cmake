# Shared build settings for banyan's targets.

add_library(banyan_warnings INTERFACE)
target_compile_options(banyan_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-array-bounds)
if(BANYAN_SANITIZE)
  target_compile_options(banyan_warnings INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(banyan_warnings INTERFACE -fsanitize=address,undefined)
endif()
if(BANYAN_TSAN)
  target_compile_options(banyan_warnings INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(banyan_warnings INTERFACE -fsanitize=thread)
endif()
install(TARGETS banyan_warnings EXPORT banyanTargets COMPONENT dev)

# banyan_library(NAME core SOURCES ... DEPS ...): a layer library with public headers
# under <layer>/include, exported as banyan::NAME. Static or shared (BUILD_SHARED_LIBS);
# shared ones carry the SONAME libbanyan_NAME.so.MAJOR.MINOR: 0.x releases keep their ABI
# only within a minor version (banyanConfigVersion.cmake says SameMinorVersion too).
function(banyan_library)
  cmake_parse_arguments(A "" "NAME" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(banyan_${A_NAME} ${A_SOURCES})
  add_library(banyan::${A_NAME} ALIAS banyan_${A_NAME})
  set_target_properties(banyan_${A_NAME} PROPERTIES EXPORT_NAME ${A_NAME}
                        POSITION_INDEPENDENT_CODE ON
                        VERSION ${PROJECT_VERSION}
                        SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
                        # a relocated install (another prefix, an unpacked .deb) still
                        # finds the layers below
                        INSTALL_RPATH "$ORIGIN")
  target_include_directories(banyan_${A_NAME} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(banyan_${A_NAME} PUBLIC ${A_DEPS} PRIVATE ${A_PRIVATE_DEPS}
                        $<BUILD_INTERFACE:banyan_warnings>)
  install(TARGETS banyan_${A_NAME} EXPORT banyanTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib
                  NAMELINK_COMPONENT dev)
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
endfunction()

# banyan_test(NAME suite SOURCES ... DEPS ...): one Boost.Test executable = one CTest entry.
function(banyan_test)
  cmake_parse_arguments(A "" "NAME;TIMEOUT" "SOURCES;DEPS" ${ARGN})
  add_executable(test_${A_NAME} ${A_SOURCES})
  target_link_libraries(test_${A_NAME} PRIVATE ${A_DEPS} Boost::unit_test_framework banyan_warnings)
  target_compile_definitions(test_${A_NAME} PRIVATE BOOST_TEST_MODULE=${A_NAME})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  if(BANYAN_SANITIZE OR BANYAN_TSAN)
    math(EXPR A_TIMEOUT "${A_TIMEOUT} * 6") # sanitized code runs several times slower
  endif()
  # A suite with long cases lists them in banyan_split_<NAME>: each runs as a CTest entry
  # of its own (<NAME>.<case>) and the suite's entry runs the rest, so `ctest -j` spreads
  # them over the cores.
  set(entries ${A_NAME})
  set(rest "")
  foreach(c IN LISTS banyan_split_${A_NAME})
    add_test(NAME ${A_NAME}.${c} COMMAND test_${A_NAME} --run_test=${c})
    list(APPEND entries ${A_NAME}.${c})
    list(APPEND rest "--run_test=!${c}")
  endforeach()
  add_test(NAME ${A_NAME} COMMAND test_${A_NAME} ${rest})
  set_tests_properties(${entries} PROPERTIES TIMEOUT ${A_TIMEOUT})
endfunction()
