# The OpenCL backend. Included by the top-level CMakeLists.txt unless
# XATTN_WITH_OPENCL is OFF. AUTO enables it when an OpenCL SDK (headers and
# the ICD loader) is found; ON makes a missing SDK an error.
if(NOT XATTN_WITH_OPENCL MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "XATTN_WITH_OPENCL is '${XATTN_WITH_OPENCL}'; expected AUTO, ON or OFF")
endif()

find_package(OpenCL)
if(NOT OpenCL_FOUND)
  if(XATTN_WITH_OPENCL STREQUAL "ON")
    message(FATAL_ERROR "XATTN_WITH_OPENCL=ON but no OpenCL SDK was found "
                        "(Debian/Ubuntu: apt install ocl-icd-opencl-dev opencl-headers)")
  endif()
  message(STATUS "xattn: no OpenCL SDK found; the OpenCL backend is left out")
  return()
endif()

# The kernels, in the order the backend concatenates them into one program:
# first the semantics every backend shares (kernels_common/xattn_semantics.h,
# written to compile as OpenCL C too), then the OpenCL sources.
set(XATTN_CL_KERNEL_FILES
  ${PROJECT_SOURCE_DIR}/kernels_common/xattn_semantics.h
  ${PROJECT_SOURCE_DIR}/kernels_cl/xattn_cl_common.cl
  ${PROJECT_SOURCE_DIR}/kernels_cl/xattn_cl_naive.cl
  ${PROJECT_SOURCE_DIR}/kernels_cl/xattn_cl_flash.cl
  ${PROJECT_SOURCE_DIR}/kernels_cl/xattn_cl_splitkv.cl
  ${PROJECT_SOURCE_DIR}/kernels_cl/xattn_cl_rows.cl)
set(XATTN_CL_EMBED_SCRIPT ${PROJECT_SOURCE_DIR}/kernels_cl/xattn_cl_embed.cmake)
set(XATTN_CL_GENERATED ${PROJECT_BINARY_DIR}/generated/xattn_cl_sources.c)
string(REPLACE ";" "|" xattn_cl_files_arg "${XATTN_CL_KERNEL_FILES}")
add_custom_command(
  OUTPUT ${XATTN_CL_GENERATED}
  COMMAND ${CMAKE_COMMAND} -DOUT=${XATTN_CL_GENERATED} -DSOURCES=${xattn_cl_files_arg}
          -P ${XATTN_CL_EMBED_SCRIPT}
  DEPENDS ${XATTN_CL_KERNEL_FILES} ${XATTN_CL_EMBED_SCRIPT}
  COMMENT "Embedding the OpenCL kernel sources"
  VERBATIM)

# The ceilings micro-benchmarks: their own program, built only when measured.
set(XATTN_CL_CEIL_FILE ${PROJECT_SOURCE_DIR}/kernels_cl/xattn_cl_ceilings.cl)
set(XATTN_CL_CEIL_GENERATED ${PROJECT_BINARY_DIR}/generated/xattn_cl_ceilings_source.c)
add_custom_command(
  OUTPUT ${XATTN_CL_CEIL_GENERATED}
  COMMAND ${CMAKE_COMMAND} -DOUT=${XATTN_CL_CEIL_GENERATED} -DSOURCES=${XATTN_CL_CEIL_FILE}
          -DPREFIX=xattn__cl_ceil_source -P ${XATTN_CL_EMBED_SCRIPT}
  DEPENDS ${XATTN_CL_CEIL_FILE} ${XATTN_CL_EMBED_SCRIPT}
  COMMENT "Embedding the OpenCL ceilings kernels"
  VERBATIM)

target_sources(xattn_obj PRIVATE
  ${PROJECT_SOURCE_DIR}/backends/xattn_backend_opencl.c
  ${PROJECT_SOURCE_DIR}/backends/xattn_opencl_program.c
  ${PROJECT_SOURCE_DIR}/backends/xattn_opencl_tiles.c
  ${PROJECT_SOURCE_DIR}/backends/xattn_opencl_interop.c
  ${XATTN_CL_GENERATED} ${XATTN_CL_CEIL_GENERATED})
target_compile_definitions(xattn_obj PRIVATE XATTN_HAVE_OPENCL CL_TARGET_OPENCL_VERSION=120)
target_link_libraries(xattn_obj PRIVATE OpenCL::OpenCL)
list(APPEND XATTN_LINK_LIBS OpenCL::OpenCL)
set(XATTN_PC_LIBS "${XATTN_PC_LIBS} -lOpenCL")
set(XATTN_HAVE_OPENCL ON)
