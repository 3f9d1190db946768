# Included by the bench projects that build on the sidecar's libraries (bench/engine, bench/tt-precision): the
# sidecar without its tests, `repo_root`, nlohmann_json, and rfdetr_bench_golden(TARGET [SOURCES...]) for a
# program that reads the tests' golden files.
set(RFDETR_BUILD_TESTS OFF CACHE BOOL "" FORCE)
add_subdirectory(${CMAKE_CURRENT_LIST_DIR}/../sidecar sidecar)
get_filename_component(repo_root ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
find_package(nlohmann_json 3 REQUIRED)

# The tests' golden reader (and any other tests/support SOURCES) compiled in: their library,
# rfdetr_test_support, links GoogleTest.
function(rfdetr_bench_golden target)
  target_sources(${target} PRIVATE ${repo_root}/sidecar/tests/support/golden-file.cpp ${ARGN})
  target_include_directories(${target} PRIVATE ${repo_root}/sidecar/tests/support)
  target_compile_definitions(${target} PRIVATE RFDETR_REPO_ROOT_DIR="${repo_root}" RFDETR_TEST_WEIGHTS_DIR="")
endfunction()
