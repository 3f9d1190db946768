# The sidecar's compile baseline, shared with the bench projects that build one of its areas on its own
# (bench/decode, bench/preprocess), so that they time the code as the sidecar compiles it: C++17, Release unless
# asked otherwise, warnings on, and the baseline ISA: any x86-64 with AVX2+FMA (no -march=native: the binary must
# run on other machines; wider kernels are dispatched at run time).
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()
set(RFDETR_ISA_FLAGS -mavx2 -mfma -mf16c)
add_compile_options(-Wall -Wextra ${RFDETR_ISA_FLAGS})
include(${CMAKE_CURRENT_LIST_DIR}/rfdetr-ccache.cmake)  # ccache when installed (shared objects between build trees)
