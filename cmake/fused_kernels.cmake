# The fused kernels (src/kernels, issue 38): Triton sources compiled ahead of time into the library.
#
# src/kernels/triton/<module>.py holds each kernel and lists its compiled variants; at build time
# src/kernels/triton/aot.py (run by ROFORMER_PYTHON, the venv of scripts/setup.sh, whose torch wheel
# brings triton) compiles them for sm_90 and sm_80 into cubins and writes
# build/kernels/triton_images.cpp, which embeds them, and build/kernels/triton_launchers.h, a typed
# launcher per kernel; src/kernels/triton_runtime.cpp launches them through the CUDA driver API
# resolved at run time. No GPU, nvcc or CUDA driver is needed to build,
# and none of it at run time beyond what the CUDA LibTorch needs: the user's machine needs no Python.
#
# ROFORMER_WITH_TRITON_KERNELS: AUTO (default: on when LibTorch has CUDA, cuda.h is found and
# ROFORMER_PYTHON's triton compiles a test kernel for sm_90 at configure), ON (required) or OFF.
# Without them every fused op runs its ATen path (src/kernels/*.h), which is also what the CPU runs.
# Include after roformer_lib is defined.

set(ROFORMER_WITH_TRITON_KERNELS AUTO CACHE STRING
    "Fused Triton kernels compiled ahead of time for sm_90/sm_80: AUTO (when possible), ON (required) or OFF")
set(ROFORMER_TRITON_TARGETS "90;80" CACHE STRING "Compute capabilities x 10 the fused kernels are compiled for")
# The kernel modules (src/kernels/triton/<name>.py), each with aot_variants().
set(ROFORMER_TRITON_MODULES layer_norm rotary cross_entropy embedding)

set(ROFORMER_KERNELS_ENABLED OFF)
set(why "")
if(ROFORMER_WITH_TRITON_KERNELS STREQUAL "OFF")
  set(why "ROFORMER_WITH_TRITON_KERNELS=OFF")
elseif(NOT TARGET torch_cuda)
  set(why "LibTorch has no CUDA")
elseif(NOT ROFORMER_PYTHON)
  set(why "no ROFORMER_PYTHON (scripts/setup.sh sets it to its venv, whose torch brings triton)")
else()
  set(cuda_include_hints ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  if(TARGET torch::cudart)
    get_target_property(cudart_includes torch::cudart INTERFACE_INCLUDE_DIRECTORIES)
    list(PREPEND cuda_include_hints ${cudart_includes})
  endif()
  find_path(ROFORMER_CUDA_DRIVER_HEADER_DIR cuda.h PATHS ${cuda_include_hints} ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
  if(NOT ROFORMER_CUDA_DRIVER_HEADER_DIR)
    set(why "no cuda.h (the driver API's types) next to the CUDA runtime headers")
  else()
    execute_process(COMMAND ${ROFORMER_PYTHON} ${PROJECT_SOURCE_DIR}/src/kernels/triton/aot.py --check
                    RESULT_VARIABLE rc OUTPUT_VARIABLE check_out ERROR_VARIABLE check_err OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0)
      set(ROFORMER_KERNELS_ENABLED ON)
    else()
      set(why "${check_out}")
    endif()
  endif()
endif()

if(ROFORMER_KERNELS_ENABLED)
  set(gen ${CMAKE_BINARY_DIR}/kernels)
  file(GLOB triton_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/triton/*.py)
  include(ProcessorCount)
  ProcessorCount(cores)
  if(cores LESS 1)
    set(cores 1)
  endif()
  string(REPLACE ";" ", sm_" targets_text "${ROFORMER_TRITON_TARGETS}")
  add_custom_command(OUTPUT ${gen}/triton_images.cpp ${gen}/triton_launchers.h
    COMMAND ${ROFORMER_PYTHON} ${PROJECT_SOURCE_DIR}/src/kernels/triton/aot.py --out ${gen}
            --targets ${ROFORMER_TRITON_TARGETS} --jobs ${cores} ${ROFORMER_TRITON_MODULES}
    DEPENDS ${triton_sources}
    COMMENT "Triton: compiling the fused kernels ahead of time for sm_${targets_text}"
    VERBATIM)
  # triton_launchers.h: one typed launcher per kernel (src/kernels/triton_runtime.h), so the kernels'
  # C++ callers (src/kernels/*.cpp) fail to compile when a kernel's parameters change.
  # Only the files that define ROFORMER_WITH_TRITON_KERNELS read it (the include directory is theirs,
  # so every other object keeps its flags and its ccache entries).
  target_sources(roformer_lib PRIVATE ${gen}/triton_images.cpp ${gen}/triton_launchers.h)
  file(GLOB kernel_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/*.cpp)
  set_source_files_properties(${kernel_sources} ${gen}/triton_images.cpp PROPERTIES
    COMPILE_DEFINITIONS ROFORMER_WITH_TRITON_KERNELS INCLUDE_DIRECTORIES ${CMAKE_BINARY_DIR})
  message(STATUS "Fused kernels: yes, Triton ahead of time for sm_${targets_text} (${ROFORMER_TRITON_MODULES}); "
                 "cuda.h from ${ROFORMER_CUDA_DRIVER_HEADER_DIR}")
elseif(ROFORMER_WITH_TRITON_KERNELS STREQUAL "ON")
  message(FATAL_ERROR "ROFORMER_WITH_TRITON_KERNELS=ON but the fused kernels cannot be built: ${why}")
else()
  message(STATUS "Fused kernels: no (${why}); the fused ops run their ATen paths")
endif()
