# SPDX-License-Identifier: MIT
# Installing ddpc: libddpc.so beside libddpc.a, `cmake --install` of the program, both libraries,
# the headers, ddpc.pc (shared) and ddpc-static.pc, the CMake package (ddpc::ddpc,
# ddpc::ddpc_static), the configs and the docs; then the .deb (cmake/package.cmake).
# Included from CMakeLists.txt after the ddpc_objects, ddpc_lib and ddpc targets exist.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The shared library exports only the public API (cmake/libddpc.map) and binds its own calls
# directly (-Bsymbolic-functions); --as-needed keeps its NEEDED list to what it really uses.
add_library(ddpc_shared SHARED $<TARGET_OBJECTS:ddpc_objects> ${DDPC_SIMD_OBJECTS}
    ${DDPC_CUDA_OBJECTS})
set_target_properties(ddpc_shared PROPERTIES OUTPUT_NAME ddpc EXPORT_NAME ddpc
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/libddpc.map)
target_link_options(ddpc_shared PRIVATE -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/libddpc.map
    -Wl,-Bsymbolic-functions -Wl,--as-needed -Wl,--no-undefined)
target_include_directories(ddpc_shared PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(ddpc_shared PRIVATE ${DDPC_LIB_DEPS})

set_target_properties(ddpc_lib PROPERTIES EXPORT_NAME ddpc_static)
target_include_directories(ddpc_lib PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

set(DDPC_TOP_LEVEL OFF)
if(PROJECT_SOURCE_DIR STREQUAL CMAKE_SOURCE_DIR)
    set(DDPC_TOP_LEVEL ON)
endif()
option(DDPC_INSTALL "Generate ddpc's install rules (default: unless a subproject)"
    ${DDPC_TOP_LEVEL})
if(NOT DDPC_INSTALL)
    return()
endif()

set(DDPC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ddpc)
install(TARGETS ddpc RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ddpc_shared EXPORT ddpc-shared
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS ddpc_lib EXPORT ddpc-static ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ddpc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.h")
install(EXPORT ddpc-shared NAMESPACE ddpc:: FILE ddpcSharedTargets.cmake
    DESTINATION ${DDPC_CMAKE_DIR})
install(EXPORT ddpc-static NAMESPACE ddpc:: FILE ddpcStaticTargets.cmake
    DESTINATION ${DDPC_CMAKE_DIR})

# The libraries libddpc.a's users link as well, as linker arguments (pkg-config) and as files
# that must exist (the CMake package's static component), derived from DDPC_LIB_DEPS so a new
# dependency cannot be left out; an imported target not known here stops the configuration.
set(DDPC_STATIC_FILES "")
set(DDPC_PC_LIBS_PRIVATE "")
set(DDPC_WITH_MPI 0)
foreach(dep IN LISTS DDPC_LIB_DEPS)
    if(dep STREQUAL "OpenMP::OpenMP_C")
        list(APPEND DDPC_PC_LIBS_PRIVATE ${OpenMP_C_FLAGS})
    elseif(dep STREQUAL "Threads::Threads")
        list(APPEND DDPC_PC_LIBS_PRIVATE -pthread)
    elseif(dep STREQUAL "ZLIB::ZLIB")
        list(APPEND DDPC_PC_LIBS_PRIVATE -lz)
    elseif(dep STREQUAL "MPI::MPI_C")
        set(DDPC_WITH_MPI 1)
        list(APPEND DDPC_PC_LIBS_PRIVATE ${MPI_C_LIBRARIES})
        list(APPEND DDPC_STATIC_FILES ${MPI_C_LIBRARIES})
    elseif(TARGET ${dep})
        message(FATAL_ERROR "cmake/install.cmake: say how ${dep} links in ddpc.pc and ddpcConfig")
    elseif(IS_ABSOLUTE "${dep}")
        list(APPEND DDPC_PC_LIBS_PRIVATE ${dep})
        list(APPEND DDPC_STATIC_FILES ${dep})
    else()
        list(APPEND DDPC_PC_LIBS_PRIVATE -l${dep})
    endif()
endforeach()
list(JOIN DDPC_PC_LIBS_PRIVATE " " DDPC_PC_LIBS_PRIVATE)

write_basic_package_version_file(${PROJECT_BINARY_DIR}/ddpcConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ddpcConfig.cmake.in
    ${PROJECT_BINARY_DIR}/ddpcConfig.cmake INSTALL_DESTINATION ${DDPC_CMAKE_DIR})
install(FILES ${PROJECT_BINARY_DIR}/ddpcConfig.cmake ${PROJECT_BINARY_DIR}/ddpcConfigVersion.cmake
    DESTINATION ${DDPC_CMAKE_DIR})

# ddpc.pc links the shared library (Libs.private serves `pkg-config --static`); ddpc-static.pc
# names libddpc.a itself, since -lddpc picks the .so wherever both exist.
file(RELATIVE_PATH DDPC_PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig
    ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" DDPC_PC_TO_PREFIX "${DDPC_PC_TO_PREFIX}")
set(DDPC_PC_DESC "")
set(DDPC_PC_LIBS "-L\${libdir} -lddpc")
set(DDPC_PC_PRIVATE "${DDPC_PC_LIBS_PRIVATE}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ddpc.pc.in ${PROJECT_BINARY_DIR}/ddpc.pc @ONLY)
set(DDPC_PC_DESC " (static library)")
set(DDPC_PC_LIBS "\${libdir}/libddpc.a ${DDPC_PC_LIBS_PRIVATE}")
set(DDPC_PC_PRIVATE "")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ddpc.pc.in ${PROJECT_BINARY_DIR}/ddpc-static.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ddpc.pc ${PROJECT_BINARY_DIR}/ddpc-static.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The configs the README trains, and the documentation with the out-of-tree example.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/ddpc/configs)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/embed ${PROJECT_SOURCE_DIR}/examples/resmlp
    DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

include(${PROJECT_SOURCE_DIR}/cmake/man.cmake)
include(${PROJECT_SOURCE_DIR}/cmake/package.cmake)
