# A CUDA build of the pip torch wheel, configured with or without a CUDA toolkit.
#
# The wheel's TorchConfig.cmake (through Caffe2/public/cuda.cmake) wants a CUDA toolkit: it runs
# find_package(CUDA) and enable_language(CUDA) and, on a machine without nvcc, stops with "Your
# installed Caffe2 version uses CUDA but I cannot find the CUDA libraries"; with a toolkit of another
# version it links that toolkit's libraries beside the wheel's. Yet the wheel's packages hold what
# our C++ needs: the CUDA runtime with its headers (site-packages/nvidia/cu13), NCCL (nvidia/nccl),
# and, from two small packages of the same CUDA version that scripts/setup.sh adds
# (nvidia-cuda-crt, nvidia-cuda-cccl: about 3 MB), the crt/ and nv/ headers that cuda_runtime_api.h
# and cuda_fp16.h include. cuda.cmake returns at once when the target torch::cudart exists (its
# include guard), so defining that target from the wheel's runtime before find_package(Torch) makes
# every machine configure alike, toolkit or not, and link the CUDA libraries the wheel was built
# with. Without those headers (a venv not made by scripts/setup.sh) the toolkit path stays.
#
# Include before find_package(Torch). Sets, empty when they do not apply:
#   ROFORMER_WHEEL_CUDA_VERSION  the CUDA version of the wheel's runtime ("13.0")
#   ROFORMER_NVCC                an nvcc of the wheel's CUDA major version, for CUDA sources of our
#                                own: CMAKE_CUDA_COMPILER or CUDACXX when set, else the wheel's
#                                site-packages (pip install nvidia-cuda-nvcc), PATH, /usr/local/cuda.
#                                Another major version is never used (its runtime is not the wheel's).
set(ROFORMER_WHEEL_CUDA_VERSION "")
set(ROFORMER_NVCC "")

# The nvcc programs this machine has, in order of preference, as "path;version" pairs flattened.
function(roformer_list_nvcc site_packages out_var)
  file(GLOB pip_nvcc ${site_packages}/nvidia/*/bin/nvcc)
  find_program(path_nvcc nvcc NO_CACHE)
  set(candidates ${CMAKE_CUDA_COMPILER} $ENV{CUDACXX} ${pip_nvcc} ${path_nvcc} /usr/local/cuda/bin/nvcc)
  list(REMOVE_DUPLICATES candidates)
  set(found "")
  foreach(nvcc IN LISTS candidates)
    if(EXISTS "${nvcc}")
      execute_process(COMMAND ${nvcc} --version OUTPUT_VARIABLE text ERROR_QUIET RESULT_VARIABLE rc)
      if(rc EQUAL 0 AND text MATCHES "release ([0-9]+\\.[0-9]+)")
        list(APPEND found ${nvcc} ${CMAKE_MATCH_1})
      endif()
    endif()
  endforeach()
  set(${out_var} "${found}" PARENT_SCOPE)
endfunction()

# Sets ROFORMER_NVCC (parent scope) to the first nvcc of CUDA `major`, and says what was found.
function(roformer_pick_nvcc nvccs major)
  set(rejected "")
  while(nvccs)
    list(POP_FRONT nvccs nvcc version)
    if(version MATCHES "^${major}\\.")
      set(ROFORMER_NVCC ${nvcc} PARENT_SCOPE)
      message(STATUS "CUDA compiler: nvcc ${version} at ${nvcc} (the wheel's CUDA major version)")
      return()
    endif()
    list(APPEND rejected "nvcc ${version} at ${nvcc}")
  endwhile()
  if(rejected)
    string(REPLACE ";" ", " rejected "${rejected}")
    set(rejected " (${rejected}: another major version, not used)")
  endif()
  message(STATUS "CUDA compiler: no nvcc of CUDA ${major}${rejected}; CUDA sources of our own need one "
                 "(README, \"CUDA without a toolkit\")")
endfunction()

function(roformer_use_wheel_cuda_runtime)
  # Where find_package(Torch) will look: Torch_DIR, then the prefix path.
  string(REPLACE ":" ";" env_prefixes "$ENV{CMAKE_PREFIX_PATH}")
  find_file(torch_config TorchConfig.cmake
    PATHS ${Torch_DIR} $ENV{Torch_DIR} ${CMAKE_PREFIX_PATH} ${env_prefixes}
    PATH_SUFFIXES . Torch share/cmake/Torch NO_DEFAULT_PATH NO_CACHE)
  if(NOT torch_config)
    return()  # not a pip wheel we can see; find_package(Torch) decides
  endif()
  get_filename_component(torch_root "${torch_config}/../../../.." ABSOLUTE)  # site-packages/torch
  get_filename_component(site_packages "${torch_root}/.." ABSOLUTE)
  file(GLOB runtime_headers ${site_packages}/nvidia/*/include/cuda_runtime_api.h)
  if(NOT EXISTS ${torch_root}/lib/libtorch_cuda.so OR NOT runtime_headers)
    return()  # a CPU LibTorch, or a CUDA one without the pip runtime (a LibTorch zip): the toolkit path
  endif()
  list(GET runtime_headers 0 header)
  get_filename_component(runtime_root "${header}/../.." ABSOLUTE)
  file(GLOB cudart ${runtime_root}/lib/libcudart.so.*)
  file(STRINGS ${header} version_line REGEX "#define CUDART_VERSION +[0-9]+")
  if(NOT cudart OR NOT version_line MATCHES "([0-9]+)$")
    return()
  endif()
  math(EXPR major "${CMAKE_MATCH_1} / 1000")
  math(EXPR minor "${CMAKE_MATCH_1} % 1000 / 10")
  set(ROFORMER_WHEEL_CUDA_VERSION ${major}.${minor} PARENT_SCOPE)
  roformer_list_nvcc(${site_packages} nvccs)

  set(packages "nvidia-cuda-crt==${major}.${minor}.* nvidia-cuda-cccl==${major}.${minor}.*")
  if(NOT EXISTS ${runtime_root}/include/crt/host_defines.h OR NOT EXISTS ${runtime_root}/include/nv/target)
    if(NOT nvccs)
      message(FATAL_ERROR "The pip torch is a CUDA ${major}.${minor} build and this machine has no CUDA toolkit, "
        "so its headers must come from the venv, which lacks crt/ and nv/ (${runtime_root}/include).\n"
        "---> HINT: pip install \"nvidia-cuda-crt==${major}.${minor}.*\" \"nvidia-cuda-cccl==${major}.${minor}.*\" "
        "into that venv (scripts/setup.sh does), then configure again.")
    endif()
    message(STATUS "CUDA runtime: the CUDA toolkit's (the venv lacks ${packages}, which would make it unneeded)")
  else()
    list(GET cudart 0 cudart)
    add_library(torch::cudart INTERFACE IMPORTED GLOBAL)
    set_target_properties(torch::cudart PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES ${runtime_root}/include
      INTERFACE_LINK_LIBRARIES ${cudart})
    message(STATUS "CUDA runtime: the wheel's CUDA ${major}.${minor} (${runtime_root}); no CUDA toolkit needed")
  endif()
  roformer_pick_nvcc("${nvccs}" ${major})
  set(ROFORMER_NVCC ${ROFORMER_NVCC} PARENT_SCOPE)
endfunction()

roformer_use_wheel_cuda_runtime()
