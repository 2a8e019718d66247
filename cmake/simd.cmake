# SPDX-License-Identifier: MIT
# Run-time ISA selection for ddpc's own loops (include/ddpc/simd.h, src/core/simd_dispatch.h).
# Each file of DDPC_SIMD_SOURCES is compiled three times: baseline x86-64 (inside ddpc_lib),
# x86-64-v3 and x86-64-v4 (object libraries whose objects, DDPC_SIMD_OBJECTS, go into libddpc.a
# and libddpc.so); the baseline compile (no DDPC_SIMD_VARIANT given) defines the dispatching
# functions. Included after ddpc_objects exists. These are the loops a GPT or CNN step spends its non-GEMM time in.
set(DDPC_SIMD_SOURCES
    ${PROJECT_SOURCE_DIR}/src/kernels/cpu/activation.c
    ${PROJECT_SOURCE_DIR}/src/kernels/cpu/attention.c
    ${PROJECT_SOURCE_DIR}/src/kernels/cpu/cross_entropy.c
    ${PROJECT_SOURCE_DIR}/src/kernels/cpu/dropout.c
    ${PROJECT_SOURCE_DIR}/src/kernels/cpu/elementwise.c
    ${PROJECT_SOURCE_DIR}/src/kernels/cpu/layernorm.c
    ${PROJECT_SOURCE_DIR}/src/kernels/cpu/linear.c
    ${PROJECT_SOURCE_DIR}/src/optim/adamw.c
    ${PROJECT_SOURCE_DIR}/src/optim/sgd.c
    ${PROJECT_SOURCE_DIR}/src/optim/clip.c
    ${PROJECT_SOURCE_DIR}/src/core/half.c
    ${PROJECT_SOURCE_DIR}/src/comm/reduce.c)
set(DDPC_SIMD_MULTI OFF)
set(DDPC_SIMD_OBJECTS "")
if(NOT DDPC_NATIVE AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64"
   AND CMAKE_C_COMPILER_ID STREQUAL "GNU" AND CMAKE_C_COMPILER_VERSION VERSION_GREATER_EQUAL 12)
    set(DDPC_SIMD_MULTI ON)
endif()
message(STATUS "ddpc: run-time ISA variants of the hot loops: ${DDPC_SIMD_MULTI}")
if(DDPC_SIMD_MULTI)
    target_compile_definitions(ddpc_objects PRIVATE DDPC_SIMD_MULTI=1)
    foreach(variant avx2:x86-64-v3 avx512:x86-64-v4)
        string(REPLACE ":" ";" pair ${variant})
        list(GET pair 0 name)
        list(GET pair 1 arch)
        add_library(ddpc_simd_${name} OBJECT ${DDPC_SIMD_SOURCES})
        set_target_properties(ddpc_simd_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
        target_compile_options(ddpc_simd_${name} PRIVATE -march=${arch} -mtune=generic
            -fno-semantic-interposition)
        target_compile_definitions(ddpc_simd_${name} PRIVATE DDPC_SIMD_MULTI=1
            DDPC_SIMD_VARIANT=${name} DDPC_SIMD_IS_CLONE=1)
        target_include_directories(ddpc_simd_${name} PRIVATE ${PROJECT_SOURCE_DIR}/include
            ${PROJECT_SOURCE_DIR}/src ${CBLAS_INCLUDE_DIR} ${DNNL_INCLUDE_DIR})
        target_link_libraries(ddpc_simd_${name} PRIVATE OpenMP::OpenMP_C)
        list(APPEND DDPC_SIMD_OBJECTS $<TARGET_OBJECTS:ddpc_simd_${name}>)
    endforeach()
endif()
