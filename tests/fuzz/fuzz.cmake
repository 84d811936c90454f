# Fuzzing the bytes a processor reads from the network (docs/wire-protocol.md, "Fuzzing").
# Two libFuzzer targets: tests/schema/fuzz_frame_decoder.cpp (frames, whole and as a
# chunked stream) and tests/net/fuzz_handshake.cpp (handshake messages, record layer).
#
# - Always, with the project's compiler: each target's seed corpus replayed through it
#   (fuzz/replay_main.cpp), as a CTest entry; the targets' checks abort on a violation.
# - With clang (the compiler, or a clang++ found beside it) that can link libFuzzer
#   (BANYAN_FUZZ, on by default): the targets built with -fsanitize=fuzzer,address,undefined
#   in a small build of their own (fuzz/libfuzzer, an ExternalProject in <build>/fuzz), and
#   a short fuzz run of each as a CTest entry. Without clang nothing of that is configured.
# - On request: `cmake --build build --target fuzz_corpus` writes the seed corpora into
#   the source tree again (fuzz/corpus_gen.cpp; deterministic).

set(banyan_fuzz_frame_corpus ${CMAKE_CURRENT_SOURCE_DIR}/schema/fuzz_corpus)
set(banyan_fuzz_handshake_corpus ${CMAKE_CURRENT_SOURCE_DIR}/net/fuzz_handshake_corpus)

add_executable(fuzz_replay_frame_decoder fuzz/replay_main.cpp schema/fuzz_frame_decoder.cpp)
target_link_libraries(fuzz_replay_frame_decoder PRIVATE banyan::schema banyan_warnings)
add_test(NAME schema_fuzz_frame_decoder_corpus
         COMMAND fuzz_replay_frame_decoder ${banyan_fuzz_frame_corpus})
add_executable(fuzz_replay_handshake fuzz/replay_main.cpp net/fuzz_handshake.cpp)
target_link_libraries(fuzz_replay_handshake PRIVATE banyan::net banyan_warnings)
add_test(NAME net_fuzz_handshake_corpus
         COMMAND fuzz_replay_handshake ${banyan_fuzz_handshake_corpus})
set_tests_properties(schema_fuzz_frame_decoder_corpus net_fuzz_handshake_corpus
                     PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "no violation")

add_executable(fuzz_corpus_gen EXCLUDE_FROM_ALL fuzz/corpus_gen.cpp)
target_include_directories(fuzz_corpus_gen PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(fuzz_corpus_gen PRIVATE banyan::net banyan::schema banyan_warnings)
add_custom_target(fuzz_corpus
  COMMAND fuzz_corpus_gen ${banyan_fuzz_frame_corpus} ${banyan_fuzz_handshake_corpus}
  DEPENDS fuzz_corpus_gen
  COMMENT "Writing the fuzz targets' seed corpora into the source tree")

if(NOT BANYAN_FUZZ)
  return()
endif()
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  set(banyan_fuzz_cxx ${CMAKE_CXX_COMPILER})
else()
  find_program(BANYAN_CLANGXX NAMES clang++ clang++-19 clang++-18 clang++-17 clang++-16
                                    clang++-15 clang++-14)
  set(banyan_fuzz_cxx ${BANYAN_CLANGXX})
endif()
if(NOT banyan_fuzz_cxx)
  message(STATUS "Fuzzing: no clang++, the libFuzzer targets are not built (the corpus replay is)")
  return()
endif()
# Can it link a libFuzzer target with the sanitizers? (Debian's clang has libFuzzer in
# libclang-rt-dev / libclang-common-N-dev.)
set(probe ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe.cpp)
file(WRITE ${probe} "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }\n")
execute_process(COMMAND ${banyan_fuzz_cxx} -fsanitize=fuzzer,address,undefined ${probe}
                        -o ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe
                RESULT_VARIABLE probe_result OUTPUT_QUIET ERROR_QUIET)
if(NOT probe_result EQUAL 0)
  message(STATUS "Fuzzing: ${banyan_fuzz_cxx} cannot link -fsanitize=fuzzer,address,undefined; "
                 "the libFuzzer targets are not built (the corpus replay is)")
  return()
endif()
message(STATUS "Fuzzing: libFuzzer targets built with ${banyan_fuzz_cxx} in ${CMAKE_BINARY_DIR}/fuzz")

include(ExternalProject)
get_target_property(banyan_schema_binary_dir banyan_schema BINARY_DIR)
set(banyan_fuzz_dir ${CMAKE_BINARY_DIR}/fuzz)
set(banyan_fuzz_args
    -DCMAKE_CXX_COMPILER=${banyan_fuzz_cxx}
    -DBANYAN_SOURCE_DIR=${CMAKE_SOURCE_DIR}
    -DBANYAN_CAPNP_GENERATED=${banyan_schema_binary_dir}/generated)
if(CMAKE_CXX_COMPILER_LAUNCHER)
  list(APPEND banyan_fuzz_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER})
endif()
ExternalProject_Add(banyan_fuzzers
  SOURCE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/libfuzzer
  BINARY_DIR ${banyan_fuzz_dir}
  CMAKE_ARGS ${banyan_fuzz_args}
  INSTALL_COMMAND ""
  BUILD_ALWAYS ON # its own build decides what is out of date
  DEPENDS banyan_schema) # the generated Cap'n Proto sources

# A short run of each (libFuzzer writes what it finds into a scratch directory under the
# build, never into the committed corpus).
add_test(NAME schema_fuzz_frame_decoder_run
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzzer.sh
                 ${banyan_fuzz_dir}/fuzz_frame_decoder ${banyan_fuzz_dir}/run-frame 20
                 ${banyan_fuzz_frame_corpus})
add_test(NAME net_fuzz_handshake_run
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzzer.sh
                 ${banyan_fuzz_dir}/fuzz_handshake ${banyan_fuzz_dir}/run-handshake 10
                 ${banyan_fuzz_handshake_corpus})
set_tests_properties(schema_fuzz_frame_decoder_run net_fuzz_handshake_run PROPERTIES TIMEOUT 120)
