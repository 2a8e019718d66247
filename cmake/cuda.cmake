# SPDX-License-Identifier: MIT
# CUDA in the build: DDPC_CUDA=AUTO (default) builds it when nvcc is found (CUDACXX, PATH or
# /usr/local/cuda), ON requires it (one clear line when absent), OFF leaves it out. The kernels run
# on sm_80 and sm_90 machine code plus sm_90 PTX for newer GPUs; the runtime is linked statically,
# so a machine without a driver still starts the program and trains on the CPU.
set(DDPC_CUDA AUTO CACHE STRING "Build the CUDA kernels: AUTO, ON or OFF")
set_property(CACHE DDPC_CUDA PROPERTY STRINGS AUTO ON OFF)
set(DDPC_HAVE_CUDA OFF)
set(DDPC_CUDA_OBJECTS "")
if(NOT DDPC_CUDA STREQUAL "OFF")
    if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
        set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
    endif()
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
        set(DDPC_HAVE_CUDA ON)
    elseif(DDPC_CUDA STREQUAL "ON" AND DEFINED ENV{CUDACXX})
        message(FATAL_ERROR "DDPC_CUDA=ON but CUDACXX=$ENV{CUDACXX} is not a working CUDA "
            "compiler: point CUDACXX at nvcc, or configure with -DDDPC_CUDA=OFF")
    elseif(DDPC_CUDA STREQUAL "ON")
        message(FATAL_ERROR "DDPC_CUDA=ON but no CUDA compiler (nvcc) was found: install the CUDA "
            "toolkit or set CUDACXX, or configure with -DDDPC_CUDA=OFF")
    else()
        message(STATUS "ddpc: no nvcc found, building without CUDA")
    endif()
endif()
if(DDPC_HAVE_CUDA)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
        set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_FLAGS_RELEASE "-O3 -DNDEBUG")
    find_package(CUDAToolkit REQUIRED)
    file(GLOB DDPC_CUDA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/cuda/*.cu)
    # Their own object library (made after enable_language, so it gets the architectures); its
    # objects join libddpc.a and libddpc.so as DDPC_CUDA_OBJECTS. fmad stays on, as in PyTorch's
    # kernels; -lineinfo costs nothing at run time.
    add_library(ddpc_cuda_objects OBJECT ${DDPC_CUDA_SOURCES})
    set_target_properties(ddpc_cuda_objects PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_include_directories(ddpc_cuda_objects PRIVATE ${PROJECT_SOURCE_DIR}/include
        ${PROJECT_SOURCE_DIR}/src ${CUDAToolkit_INCLUDE_DIRS})
    target_compile_options(ddpc_cuda_objects PRIVATE -lineinfo -Xcompiler=-Wall,-Wextra
        $<$<BOOL:${DDPC_WERROR}>:-Werror=all-warnings>)
    target_compile_definitions(ddpc_cuda_objects PRIVATE DDPC_HAVE_CUDA=1)
    target_compile_definitions(ddpc_objects PRIVATE DDPC_HAVE_CUDA=1)
    # comm/ stages device buffers (cuda_runtime_api.h, C) and drives NCCL, whose header gives the
    # types only: libnccl.so.2 is dlopen()ed at run time, so the same binary runs without it.
    # System headers, so that -Werror never sees their warnings.
    target_include_directories(ddpc_objects SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
    find_path(DDPC_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(DDPC_NCCL_INCLUDE_DIR)
        target_include_directories(ddpc_objects SYSTEM PRIVATE ${DDPC_NCCL_INCLUDE_DIR})
        target_compile_definitions(ddpc_objects PRIVATE DDPC_HAVE_NCCL=1)
    else()
        message(STATUS "ddpc: no nccl.h found, building without the nccl backend")
    endif()
    set(DDPC_CUDA_OBJECTS $<TARGET_OBJECTS:ddpc_cuda_objects>)
    # Files, not imported targets, so install.cmake can write them into ddpc.pc as they are.
    list(APPEND DDPC_LIB_DEPS ${CUDA_cudart_static_LIBRARY} ${CUDA_cublas_LIBRARY}
        ${CUDA_cublasLt_LIBRARY})
    message(STATUS "ddpc: CUDA ${CUDAToolkit_VERSION} for ${CMAKE_CUDA_ARCHITECTURES}")
endif()
