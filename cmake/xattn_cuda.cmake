# CUDA backend: kernels_cuda/*.cu + backends/xattn_backend_cuda.c, included
# by the top-level CMakeLists.txt when XATTN_WITH_CUDA is not OFF.
#
# XATTN_WITH_CUDA: AUTO enables the backend when nvcc is found (on the PATH, in
# CUDACXX / CMAKE_CUDA_COMPILER, or at /usr/local/cuda/bin/nvcc); ON makes a
# missing nvcc an error. The static CUDA runtime is linked, so a library built
# with CUDA still loads on a machine without a driver, where the backend
# reports itself unavailable with the driver's message.
#
# Architectures: sm_75..sm_90 as SASS plus compute_90 PTX (override with
# -DCMAKE_CUDA_ARCHITECTURES=...). The tensor-core kernels exist for sm_80+;
# on sm_75 their bodies are empty and the SIMT path runs instead.

include(CheckLanguage)

if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
endif()
check_language(CUDA)

if(NOT CMAKE_CUDA_COMPILER)
  if(XATTN_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "XATTN_WITH_CUDA=ON but no CUDA compiler (nvcc) was found: "
                        "put nvcc on the PATH, set CUDACXX, or install the CUDA toolkit "
                        "in /usr/local/cuda")
  endif()
  message(STATUS "xattn: CUDA backend off (nvcc not found)")
  return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "75-real;80-real;86-real;89-real;90-real;90-virtual")
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

file(GLOB XATTN_CUDA_KERNEL_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels_cuda/*.cu)
target_sources(xattn_obj PRIVATE
  ${PROJECT_SOURCE_DIR}/backends/xattn_backend_cuda.c
  ${XATTN_CUDA_KERNEL_SOURCES})
target_include_directories(xattn_obj PRIVATE ${PROJECT_SOURCE_DIR}/kernels_cuda)
target_include_directories(xattn_obj SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
target_compile_definitions(xattn_obj PRIVATE XATTN_HAVE_CUDA)
set_source_files_properties(${XATTN_CUDA_KERNEL_SOURCES} PROPERTIES LANGUAGE CUDA)
# xattn_obj exists before CUDA is enabled: its architectures are set here.
set_target_properties(xattn_obj PROPERTIES
  CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}"
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  CUDA_EXTENSIONS OFF
  CUDA_RUNTIME_LIBRARY Static
  CUDA_VISIBILITY_PRESET hidden)
# Host-side warnings of the .cu files follow the C flags. No exceptions, RTTI or
# thread-safe static guards in the kernels' host code: the static library then
# needs no C++ runtime (a C program links it with the C linker).
set(XATTN_CUDA_FLAGS -Xcompiler=-Wall,-Wextra,-fno-exceptions,-fno-rtti,-fno-threadsafe-statics)
if(XATTN_WERROR)
  list(APPEND XATTN_CUDA_FLAGS -Werror=all-warnings -Xcompiler=-Werror)
endif()
target_compile_options(xattn_obj PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${XATTN_CUDA_FLAGS}>)

list(APPEND XATTN_LINK_LIBS CUDA::cudart_static)
set(XATTN_PC_LIBS "${XATTN_PC_LIBS} -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt -lpthread")
set(XATTN_HAVE_CUDA ON)
message(STATUS "xattn: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
               "architectures ${CMAKE_CUDA_ARCHITECTURES})")
