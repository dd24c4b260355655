# CUDA backend: kernels_cuda/*.cu + backends/xattn_backend_cuda.c, included
# by the top-level CMakeLists.txt when XATTN_WITH_CUDA is not OFF.
#
# XATTN_WITH_CUDA: AUTO enables the backend when nvcc is found (on the PATH, in
# CUDACXX / CMAKE_CUDA_COMPILER, or at /usr/local/cuda/bin/nvcc) and there is
# something to compile for (XATTN_CUDA_ARCHS below); ON makes a missing nvcc an
# error. The static CUDA runtime is linked, so a library built with CUDA still
# loads on a machine without a driver, where the backend reports itself
# unavailable with the driver's message.
#
# Architectures (XATTN_CUDA_ARCHS, or CMAKE_CUDA_ARCHITECTURES which wins):
#   AUTO (the default): the GPUs this machine shows, asked of the driver
#         without running nvcc: `nvidia-smi --query-gpu=compute_cap` (each GPU's
#         sm_XY), else CMake's `native` when `nvidia-smi -L` lists a GPU or
#         /proc/driver/nvidia/gpus is not empty. No GPU visible: with
#         XATTN_WITH_CUDA=AUTO the backend is left out (one line says how to
#         add it) and nvcc is never run; with ON, the full list below.
#   ALL:  sm_75..sm_90 as SASS plus compute_90 PTX, GPU or not (the test
#         command's and CI's release presets, and packages).
# XATTN_CUDA_GPU_PROBE=none|<caps> (environment, e.g. "9.0;8.6") replaces the
# driver query (to check this logic on any machine).
# The tensor-core kernels exist for sm_80+; on sm_75 their bodies are empty
# and the SIMT path runs instead.

set(XATTN_CUDA_ARCHS_ALL "75-real;80-real;86-real;89-real;90-real;90-virtual")

include(CheckLanguage)

if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
endif()

# Which GPUs are visible, without running nvcc: sets XATTN_CUDA_GPU_ARCHS to
# "90-real;86-real" (from the driver's compute capabilities), "native" (a GPU
# is listed but its capability is not), or "" (none).
function(xattn_cuda_probe_gpus out)
  set(archs "")
  if(DEFINED ENV{XATTN_CUDA_GPU_PROBE})
    set(caps "$ENV{XATTN_CUDA_GPU_PROBE}")
    if(caps STREQUAL "none")
      set(caps "")
    endif()
    set(how "XATTN_CUDA_GPU_PROBE")
  else()
    set(caps "")
    set(how "")
    find_program(XATTN_NVIDIA_SMI nvidia-smi)
    mark_as_advanced(XATTN_NVIDIA_SMI)
    if(XATTN_NVIDIA_SMI)
      execute_process(COMMAND ${XATTN_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                      RESULT_VARIABLE rc OUTPUT_VARIABLE caps ERROR_QUIET TIMEOUT 20)
      if(NOT rc EQUAL 0)
        set(caps "")
        execute_process(COMMAND ${XATTN_NVIDIA_SMI} -L RESULT_VARIABLE rc OUTPUT_VARIABLE listed
                        ERROR_QUIET TIMEOUT 20)
        if(rc EQUAL 0 AND listed MATCHES "GPU [0-9]")
          set(archs native)
        endif()
      endif()
      set(how "nvidia-smi")
    elseif(IS_DIRECTORY /proc/driver/nvidia/gpus)
      file(GLOB gpus /proc/driver/nvidia/gpus/*)
      if(gpus)
        set(archs native)
      endif()
      set(how "/proc/driver/nvidia/gpus")
    endif()
  endif()
  string(REGEX MATCHALL "[0-9]+\\.[0-9]+" caps "${caps}")
  foreach(c IN LISTS caps)
    string(REPLACE "." "" a "${c}")
    list(APPEND archs "${a}-real")
  endforeach()
  list(REMOVE_DUPLICATES archs)
  if(archs STREQUAL "native" AND CMAKE_VERSION VERSION_LESS 3.24)
    set(archs "${XATTN_CUDA_ARCHS_ALL}") # CMake before 3.24 has no `native`
  endif()
  set(${out} "${archs}" PARENT_SCOPE)
  set(${out}_HOW "${how}" PARENT_SCOPE)
endfunction()

set(XATTN_CUDA_ARCH_WHY "")
if(DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(XATTN_CUDA_ARCH_WHY "CMAKE_CUDA_ARCHITECTURES")
elseif(XATTN_CUDA_ARCHS STREQUAL "ALL")
  set(CMAKE_CUDA_ARCHITECTURES "${XATTN_CUDA_ARCHS_ALL}")
  set(XATTN_CUDA_ARCH_WHY "XATTN_CUDA_ARCHS=ALL")
elseif(XATTN_CUDA_ARCHS STREQUAL "AUTO")
  xattn_cuda_probe_gpus(XATTN_CUDA_GPU_ARCHS)
  if(XATTN_CUDA_GPU_ARCHS)
    set(CMAKE_CUDA_ARCHITECTURES "${XATTN_CUDA_GPU_ARCHS}")
    set(XATTN_CUDA_ARCH_WHY "the visible GPUs (${XATTN_CUDA_GPU_ARCHS_HOW})")
  elseif(XATTN_WITH_CUDA STREQUAL "ON")
    set(CMAKE_CUDA_ARCHITECTURES "${XATTN_CUDA_ARCHS_ALL}")
    set(XATTN_CUDA_ARCH_WHY "no GPU visible, XATTN_WITH_CUDA=ON: the full list")
  else()
    # Nothing to run CUDA on here: nvcc is not run at all.
    find_program(XATTN_NVCC_SEEN nvcc) # looked up, not run
    mark_as_advanced(XATTN_NVCC_SEEN)
    if(CMAKE_CUDA_COMPILER OR DEFINED ENV{CUDACXX} OR XATTN_NVCC_SEEN)
      message(STATUS "xattn: CUDA backend off: nvcc is here but no NVIDIA GPU is visible; "
                     "-DXATTN_WITH_CUDA=ON (pip: XATTN_WITH_CUDA=ON pip install ./python) "
                     "builds it for sm_75..sm_90+PTX")
    else()
      message(STATUS "xattn: CUDA backend off (no NVIDIA GPU visible, no nvcc)")
    endif()
    return()
  endif()
else()
  message(FATAL_ERROR "XATTN_CUDA_ARCHS=${XATTN_CUDA_ARCHS}: expected AUTO or ALL "
                      "(or set CMAKE_CUDA_ARCHITECTURES)")
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
               "architectures ${CMAKE_CUDA_ARCHITECTURES}: ${XATTN_CUDA_ARCH_WHY})")
