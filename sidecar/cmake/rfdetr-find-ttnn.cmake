# rfdetr_find_ttnn(): locates tt-metal's TT-NN for the `tt` engine (RFDETR_WITH_TTNN=ON) and sets
# RFDETR_TTNN_TARGET in the caller's scope. Order: an installed TT-NN package (find_package(TT-NN) ->
# TTNN::TTNN, via CMAKE_PREFIX_PATH), then the build tree under $TT_METAL_HOME. Fails the configure with
# what to install or set when neither is found.
#
# The ttnn layer (src/engines/tt/tt-ops-ttnn.cpp) is written against ONE tt-metal revision; a tree at another
# revision is refused unless RFDETR_TT_METAL_ALLOW_OTHER_REVISION=ON (the API moves between revisions).
set(RFDETR_TT_METAL_TAG "v0.78.0-dev20260820-25" CACHE INTERNAL "pinned tt-metal tag")
set(RFDETR_TT_METAL_COMMIT "8b98410e730" CACHE INTERNAL "pinned tt-metal commit (abbreviated)")
option(RFDETR_TT_METAL_ALLOW_OTHER_REVISION "Build the ttnn layer against a tt-metal tree at another revision" OFF)

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

function(rfdetr_find_ttnn)
  find_package(TT-NN CONFIG QUIET)
  if(TARGET TTNN::TTNN)
    message(STATUS "rfdetr: TT-NN from an installed package (${TT-NN_DIR})")
    set(RFDETR_TTNN_TARGET TTNN::TTNN PARENT_SCOPE)
    return()
  endif()

  set(home "$ENV{TT_METAL_HOME}")
  if(home STREQUAL "")
    message(FATAL_ERROR
      "rfdetr: RFDETR_WITH_TTNN=ON but tt-metal was not found. Either install TT-NN and put its prefix on "
      "CMAKE_PREFIX_PATH (find_package(TT-NN) must provide TTNN::TTNN), or build tt-metal "
      "${RFDETR_TT_METAL_TAG} (${RFDETR_TT_METAL_COMMIT}) and export TT_METAL_HOME=<tree> before configuring. "
      "Without a card or tt-metal, configure with RFDETR_WITH_TTNN=OFF and use the tt-host engine.")
  endif()
  rfdetr_check_tt_metal_revision("${home}")

  find_package(TT-NN CONFIG QUIET PATHS "${home}/build" "${home}/build_Release" NO_DEFAULT_PATH)
  if(TARGET TTNN::TTNN)
    message(STATUS "rfdetr: TT-NN from the tt-metal build tree ${home}")
    set(RFDETR_TTNN_TARGET TTNN::TTNN PARENT_SCOPE)
    return()
  endif()

  # A build tree without an exported package: link its libraries directly.
  find_library(RFDETR_TTNN_LIB NAMES _ttnncpp ttnn _ttnn PATHS "${home}/build/lib" "${home}/build_Release/lib" NO_DEFAULT_PATH)
  find_library(RFDETR_TT_METAL_LIB NAMES tt_metal PATHS "${home}/build/lib" "${home}/build_Release/lib" NO_DEFAULT_PATH)
  if(NOT RFDETR_TTNN_LIB OR NOT RFDETR_TT_METAL_LIB)
    message(FATAL_ERROR
      "rfdetr: TT_METAL_HOME=${home} has no built TT-NN (looked for TT-NNConfig.cmake and lib{_ttnncpp,tt_metal}.so "
      "under build/ and build_Release/). Build it first: cd ${home} && ./build_metal.sh")
  endif()
  add_library(rfdetr_ttnn INTERFACE)
  target_include_directories(rfdetr_ttnn INTERFACE
    "${home}" "${home}/ttnn" "${home}/ttnn/cpp" "${home}/ttnn/api" "${home}/tt_metal/api" "${home}/tt_stl"
    "${home}/build/include")
  target_link_libraries(rfdetr_ttnn INTERFACE ${RFDETR_TTNN_LIB} ${RFDETR_TT_METAL_LIB})
  message(STATUS "rfdetr: TT-NN libraries from ${home} (${RFDETR_TTNN_LIB})")
  set(RFDETR_TTNN_TARGET rfdetr_ttnn PARENT_SCOPE)
endfunction()
