# rfdetr_tt_openblas: an interface target for OpenBLAS's CBLAS (header + library). Debian/Ubuntu keep cblas.h
# under a per-variant directory (x86_64-linux-gnu/openblas-pthread), so find it there too.
if(NOT TARGET rfdetr_tt_openblas)
  find_path(RFDETR_CBLAS_INCLUDE_DIR cblas.h
    PATH_SUFFIXES openblas-pthread openblas x86_64-linux-gnu/openblas-pthread x86_64-linux-gnu/openblas
    PATHS /usr/include /usr/local/include /usr/include/x86_64-linux-gnu)
  find_library(RFDETR_OPENBLAS_LIBRARY NAMES openblas
    PATH_SUFFIXES openblas-pthread
    PATHS /usr/lib/x86_64-linux-gnu /usr/lib /usr/local/lib)
  if(NOT RFDETR_CBLAS_INCLUDE_DIR OR NOT RFDETR_OPENBLAS_LIBRARY)
    message(FATAL_ERROR "OpenBLAS (cblas.h + libopenblas) not found; install it: sudo apt-get install -y libopenblas-dev")
  endif()
  add_library(rfdetr_tt_openblas INTERFACE)
  target_include_directories(rfdetr_tt_openblas INTERFACE ${RFDETR_CBLAS_INCLUDE_DIR})
  target_link_libraries(rfdetr_tt_openblas INTERFACE ${RFDETR_OPENBLAS_LIBRARY})
endif()
