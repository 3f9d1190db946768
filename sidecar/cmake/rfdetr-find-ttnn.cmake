# rfdetr_find_ttnn(): locates tt-metal's TT-NN for the `tt` engine (RFDETR_WITH_TTNN=ON) and sets, in the
# caller's scope, RFDETR_TTNN_TARGET (an interface target: includes and libraries), RFDETR_TTNN_RPATH (the
# libraries' directories), RFDETR_TTNN_RUNTIME_ROOT (the folder holding tt_metal/, the default for
# TT_METAL_RUNTIME_ROOT), RFDETR_TTNN_VERSION ("0.78.0") and RFDETR_TTNN_VERSION_NUM (7800 = major*10000 +
# minor*100 + patch). Two layouts:
#
#  1. headers + a wheel (what CI and the Dockerfile's TT stage use): RFDETR_TTNN_HEADERS names a directory
#     holding tt-metal/ (the host headers of ttnn, tt_metal, tt_stl, umd) and deps/ (the header-only libraries
#     tt-metal's CMake fetches), as ../shared/ttnn-sdk/'s tarball or scripts/fetch-ttnn-headers.sh lay it out;
#     RFDETR_TTNN_WHEEL names an unpacked ttnn wheel from PyPI (ttnn/build/lib, ttnn.libs, ttnn-X.dist-info).
#  2. a built tree at TT_METAL_HOME (or an installed TT-NN package on CMAKE_PREFIX_PATH), pinned to one revision.
#
# Either can be given as a CMake variable or an environment variable of the same name. The executable gets an
# rpath to the libraries' directories, so it runs without LD_LIBRARY_PATH.
set(RFDETR_TT_METAL_TAG "v0.78.0-dev20260820-25" CACHE INTERNAL "pinned tt-metal tag")
set(RFDETR_TT_METAL_COMMIT "8b98410e730" CACHE INTERNAL "pinned tt-metal commit (abbreviated)")
option(RFDETR_TT_METAL_ALLOW_OTHER_REVISION "Build the ttnn layer against a tt-metal tree at another revision" OFF)
set(RFDETR_TTNN_VERSION "" CACHE STRING "ttnn release the ttnn layer is built against (read from the wheel or tree when empty)")

function(rfdetr_ttnn_version_num version out)
  if(NOT version MATCHES "^([0-9]+)\\.([0-9]+)\\.([0-9]+)")
    message(FATAL_ERROR "rfdetr: cannot read a ttnn version from '${version}' (expected X.Y.Z); "
                        "pass -DRFDETR_TTNN_VERSION=X.Y.Z for the release these headers and libraries are.")
  endif()
  math(EXPR num "${CMAKE_MATCH_1} * 10000 + ${CMAKE_MATCH_2} * 100 + ${CMAKE_MATCH_3}")
  set(${out} ${num} PARENT_SCOPE)
endfunction()

function(rfdetr_check_tt_metal_revision tree)
  find_package(Git QUIET)
  if(NOT GIT_FOUND OR NOT EXISTS "${tree}/.git")
    message(WARNING "rfdetr: cannot check the tt-metal revision of ${tree} (no git checkout); "
                    "the ttnn layer is written for ${RFDETR_TT_METAL_TAG} (${RFDETR_TT_METAL_COMMIT})")
    return()
  endif()
  execute_process(COMMAND ${GIT_EXECUTABLE} -C "${tree}" rev-parse HEAD
                  OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  string(FIND "${head}" "${RFDETR_TT_METAL_COMMIT}" at)
  if(NOT rc EQUAL 0 OR NOT at EQUAL 0)
    set(msg "rfdetr: tt-metal at ${tree} is at commit '${head}', but the ttnn layer is written for "
            "${RFDETR_TT_METAL_TAG} (${RFDETR_TT_METAL_COMMIT}). Check out that revision, or pass "
            "-DRFDETR_TT_METAL_ALLOW_OTHER_REVISION=ON and review src/engines/tt/TTNN_CALLS.md against your headers.")
    if(RFDETR_TT_METAL_ALLOW_OTHER_REVISION)
      message(WARNING "${msg}")
    else()
      message(FATAL_ERROR "${msg}")
    endif()
  endif()
endfunction()

# Layout 1: host headers + an unpacked wheel.
function(rfdetr_ttnn_from_wheel headers wheel)
  set(H "${headers}/tt-metal")
  set(D "${headers}/deps")
  if(NOT EXISTS "${H}/ttnn/api/ttnn/device.hpp" OR NOT IS_DIRECTORY "${D}/fmt/include")
    message(FATAL_ERROR "rfdetr: RFDETR_TTNN_HEADERS=${headers} does not hold tt-metal/ttnn/api/ttnn/device.hpp and "
                        "deps/fmt/include. Unpack ../shared/ttnn-sdk/tt-metal-headers-*.tar.xz there, or run "
                        "scripts/fetch-ttnn-headers.sh <dir> (tt-metal v0.78.0's headers).")
  endif()
  set(lib "${wheel}/ttnn/build/lib")
  foreach(so _ttnncpp.so libtt_metal.so libtt_stl.so)
    if(NOT EXISTS "${lib}/${so}")
      message(FATAL_ERROR "rfdetr: RFDETR_TTNN_WHEEL=${wheel} has no ttnn/build/lib/${so}. Unpack a ttnn wheel there: "
                          "python3 -m pip download --no-deps --only-binary=:all: --python-version 3.10 "
                          "--platform manylinux_2_34_x86_64 ttnn==0.78.0 && unzip ttnn-*.whl -d ${wheel}")
    endif()
  endforeach()
  set(version "${RFDETR_TTNN_VERSION}")
  if(version STREQUAL "")
    file(GLOB meta "${wheel}/ttnn-*.dist-info/METADATA")
    if(meta)
      list(GET meta 0 meta)
      file(STRINGS "${meta}" line REGEX "^Version: ")
      string(REGEX REPLACE "^Version: *" "" version "${line}")
    endif()
  endif()
  rfdetr_ttnn_version_num("${version}" num)

  add_library(rfdetr_ttnn INTERFACE)
  target_include_directories(rfdetr_ttnn SYSTEM INTERFACE
    "${H}/ttnn/api" "${H}/ttnn/cpp" "${H}/ttnn" "${H}/tt_metal/api" "${H}/tt_metal/hostdevcommon/api" "${H}/tt_stl"
    "${H}/tt_metal" "${H}/tt_metal/third_party/umd/device/api" "${H}/tt_metal/include" "${H}"
    "${D}/fmt/include" "${D}/spdlog/include" "${D}/xtensor/include" "${D}/xtl/include" "${D}/reflect"
    "${D}/enchantum/enchantum/include" "${D}/tt-logger/include" "${D}/tracy/public")
  if(IS_DIRECTORY "${H}/overlay")
    target_include_directories(rfdetr_ttnn SYSTEM INTERFACE "${H}/overlay")
  endif()
  # This spdlog expects a fmt symbol that fmt 11.1 moved to xchar.h (../shared/ttnn-sdk/README.md).
  target_compile_definitions(rfdetr_ttnn INTERFACE FMT_HEADER_ONLY SPDLOG_FMT_EXTERNAL)
  target_compile_options(rfdetr_ttnn INTERFACE -include fmt/xchar.h)
  target_link_libraries(rfdetr_ttnn INTERFACE "${lib}/_ttnncpp.so" "${lib}/libtt_metal.so" "${lib}/libtt_stl.so")
  set(RFDETR_TTNN_RPATH "${lib};${wheel}/ttnn.libs" PARENT_SCOPE)
  set(RFDETR_TTNN_RUNTIME_ROOT "${wheel}/ttnn" PARENT_SCOPE)
  set(RFDETR_TTNN_VERSION_FOUND "${version}" PARENT_SCOPE)
  set(RFDETR_TTNN_VERSION_NUM_FOUND "${num}" PARENT_SCOPE)
  message(STATUS "rfdetr: TT-NN ${version}: headers ${headers}, libraries ${lib}")
endfunction()

# Layout 2: a built tt-metal tree (or an installed package).
function(rfdetr_ttnn_from_tree)
  set(version "${RFDETR_TTNN_VERSION}")
  find_package(TT-NN CONFIG QUIET)
  if(TARGET TTNN::TTNN)
    if(version STREQUAL "")
      set(version "${TT-NN_VERSION}")
    endif()
    rfdetr_ttnn_version_num("${version}" num)
    message(STATUS "rfdetr: TT-NN ${version} from an installed package (${TT-NN_DIR})")
    set(RFDETR_TTNN_TARGET_FOUND TTNN::TTNN PARENT_SCOPE)
    set(RFDETR_TTNN_VERSION_FOUND "${version}" PARENT_SCOPE)
    set(RFDETR_TTNN_VERSION_NUM_FOUND "${num}" PARENT_SCOPE)
    return()
  endif()

  set(home "$ENV{TT_METAL_HOME}")
  if(home STREQUAL "")
    message(FATAL_ERROR
      "rfdetr: RFDETR_WITH_TTNN=ON but TT-NN was not found. Give one of: RFDETR_TTNN_HEADERS=<tt-metal headers> with "
      "RFDETR_TTNN_WHEEL=<unpacked ttnn wheel> (scripts/check-ttnn.sh shows how); TT_METAL_HOME=<tt-metal tree "
      "${RFDETR_TT_METAL_TAG}, built>; or an installed TT-NN on CMAKE_PREFIX_PATH. Without a card or tt-metal, "
      "configure with RFDETR_WITH_TTNN=OFF and use the tt-host engine.")
  endif()
  rfdetr_check_tt_metal_revision("${home}")
  if(version STREQUAL "")
    # v0.78.0-dev20260820-25 -> 0.78.0
    set(version "${RFDETR_TT_METAL_TAG}")
    string(REGEX REPLACE "^v([0-9]+\\.[0-9]+\\.[0-9]+).*" "\\1" version "${version}")
  endif()
  rfdetr_ttnn_version_num("${version}" num)
  set(RFDETR_TTNN_VERSION_FOUND "${version}" PARENT_SCOPE)
  set(RFDETR_TTNN_VERSION_NUM_FOUND "${num}" PARENT_SCOPE)
  set(RFDETR_TTNN_RUNTIME_ROOT "${home}" PARENT_SCOPE)

  find_package(TT-NN CONFIG QUIET PATHS "${home}/build" "${home}/build_Release" NO_DEFAULT_PATH)
  if(TARGET TTNN::TTNN)
    message(STATUS "rfdetr: TT-NN ${version} from the tt-metal build tree ${home}")
    set(RFDETR_TTNN_TARGET_FOUND TTNN::TTNN PARENT_SCOPE)
    return()
  endif()

  # A build tree without an exported package: link its libraries directly.
  find_library(RFDETR_TTNN_LIB NAMES _ttnncpp ttnn _ttnn PATHS "${home}/build/lib" "${home}/build_Release/lib" NO_DEFAULT_PATH)
  find_library(RFDETR_TT_METAL_LIB NAMES tt_metal PATHS "${home}/build/lib" "${home}/build_Release/lib" NO_DEFAULT_PATH)
  find_library(RFDETR_TT_STL_LIB NAMES tt_stl PATHS "${home}/build/lib" "${home}/build_Release/lib" NO_DEFAULT_PATH)
  if(NOT RFDETR_TTNN_LIB OR NOT RFDETR_TT_METAL_LIB)
    message(FATAL_ERROR
      "rfdetr: TT_METAL_HOME=${home} has no built TT-NN (looked for TT-NNConfig.cmake and lib{_ttnncpp,tt_metal}.so "
      "under build/ and build_Release/). Build it first: cd ${home} && ./build_metal.sh")
  endif()
  add_library(rfdetr_ttnn INTERFACE)
  target_include_directories(rfdetr_ttnn SYSTEM INTERFACE
    "${home}" "${home}/ttnn" "${home}/ttnn/cpp" "${home}/ttnn/api" "${home}/tt_metal/api" "${home}/tt_stl"
    "${home}/build/include")
  target_link_libraries(rfdetr_ttnn INTERFACE ${RFDETR_TTNN_LIB} ${RFDETR_TT_METAL_LIB})
  if(RFDETR_TT_STL_LIB)
    target_link_libraries(rfdetr_ttnn INTERFACE ${RFDETR_TT_STL_LIB})
  endif()
  get_filename_component(libdir "${RFDETR_TTNN_LIB}" DIRECTORY)
  set(RFDETR_TTNN_RPATH "${libdir}" PARENT_SCOPE)
  message(STATUS "rfdetr: TT-NN ${version} libraries from ${home} (${RFDETR_TTNN_LIB})")
  set(RFDETR_TTNN_TARGET_FOUND rfdetr_ttnn PARENT_SCOPE)
endfunction()

function(rfdetr_find_ttnn)
  set(headers "${RFDETR_TTNN_HEADERS}")
  if(headers STREQUAL "")
    set(headers "$ENV{RFDETR_TTNN_HEADERS}")
  endif()
  set(wheel "${RFDETR_TTNN_WHEEL}")
  if(wheel STREQUAL "")
    set(wheel "$ENV{RFDETR_TTNN_WHEEL}")
  endif()
  if(NOT headers STREQUAL "" OR NOT wheel STREQUAL "")
    if(headers STREQUAL "" OR wheel STREQUAL "")
      message(FATAL_ERROR "rfdetr: the headers + wheel layout needs both RFDETR_TTNN_HEADERS (got '${headers}') and "
                          "RFDETR_TTNN_WHEEL (got '${wheel}'), from the same ttnn API generation.")
    endif()
    rfdetr_ttnn_from_wheel("${headers}" "${wheel}")
    set(RFDETR_TTNN_TARGET rfdetr_ttnn PARENT_SCOPE)
  else()
    rfdetr_ttnn_from_tree()
    set(RFDETR_TTNN_TARGET ${RFDETR_TTNN_TARGET_FOUND} PARENT_SCOPE)
  endif()
  set(RFDETR_TTNN_RPATH "${RFDETR_TTNN_RPATH}" PARENT_SCOPE)
  set(RFDETR_TTNN_RUNTIME_ROOT "${RFDETR_TTNN_RUNTIME_ROOT}" PARENT_SCOPE)
  set(RFDETR_TTNN_VERSION "${RFDETR_TTNN_VERSION_FOUND}" PARENT_SCOPE)
  set(RFDETR_TTNN_VERSION_NUM "${RFDETR_TTNN_VERSION_NUM_FOUND}" PARENT_SCOPE)
endfunction()
