# Finds NCCL and the CUDA runtime it runs on (nccl.h, libnccl,
# cuda_runtime_api.h, libcudart): neither is a Debian package. Looked for
# under $NCCL_ROOT, $CUDA_HOME, $CUDA_PATH and /usr/local/cuda (a CUDA
# toolkit, or the nvidia-nccl / nvidia-cuda-runtime wheels laid out there;
# a wheel's lib/ holds only libnccl.so.2, which is looked for too).
# Defines NCCL::nccl (both libraries) and NCCL_VERSION.
set(_nccl_hints $ENV{NCCL_ROOT} $ENV{CUDA_HOME} $ENV{CUDA_PATH} /usr/local/cuda)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints} PATH_SUFFIXES lib64 lib)
find_path(NCCL_CUDART_INCLUDE_DIR cuda_runtime_api.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
find_library(NCCL_CUDART_LIBRARY NAMES cudart libcudart.so.13 libcudart.so.12 HINTS ${_nccl_hints} PATH_SUFFIXES lib64 lib)
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_lines REGEX "#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_part} +([0-9]+)" _m "${_nccl_lines}")
    set(_nccl_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_INCLUDE_DIR NCCL_LIBRARY NCCL_CUDART_INCLUDE_DIR NCCL_CUDART_LIBRARY
  VERSION_VAR NCCL_VERSION)
if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl INTERFACE IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR};${NCCL_CUDART_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${NCCL_LIBRARY};${NCCL_CUDART_LIBRARY}")
endif()
