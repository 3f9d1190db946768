# The compiler cache: when ccache is installed (npm install puts it in as root) every C++ compile of the sidecar
# and of the bench projects goes through it. CMake gives the compiler absolute paths, so the same source compiled
# with the same flags in another build tree of the same checkout is a cache hit: CI's TT build (sidecar/build-ttnn)
# and bench/engine's build reuse the objects npm install's sidecar/build compiled (model, CPU engine, protocol,
# preprocess, decode), and going back to a commit built before compiles nothing again. (No CCACHE_BASEDIR: it would
# make those paths relative to each build tree, and bench/engine/build sits at another depth than sidecar/build.)
# The objects are the same bytes as without it. -DRFDETR_CCACHE=OFF turns it off; a CMAKE_CXX_COMPILER_LAUNCHER
# given on the command line wins.
option(RFDETR_CCACHE "Compile through ccache when it is installed" ON)
if(RFDETR_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(RFDETR_CCACHE_PROGRAM ccache)
  if(RFDETR_CCACHE_PROGRAM)
    set(CMAKE_CXX_COMPILER_LAUNCHER ${RFDETR_CCACHE_PROGRAM})
  endif()
endif()
