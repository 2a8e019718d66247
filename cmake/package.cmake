# SPDX-License-Identifier: MIT
# `make deb`: one Debian package, ddpc, holding what `cmake --install` puts in place, under /usr.
# Its Depends come from dpkg-shlibdeps (the runtime libraries the program and libddpc.so link),
# so `apt install ./ddpc_*.deb` pulls exactly those on a fresh Debian 12.
set(DDPC_DEB_MAINTAINER "ddpc maintainers <maintainers@users.noreply.a-seed-458b937c.example>"
    CACHE STRING "Maintainer line of the .deb")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ddpc)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "ddpc")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "distributed data-parallel training of neural networks in C11")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR})
# Stripped binaries, their debug symbols in ddpc-dbgsym_<version>_<arch>.ddeb, as Debian's own
# packages do: cmake/deb_dbgsym.cmake, a pre-build script, splits them off before CPack packs the
# files (`make deb` builds with dpkg-buildflags' flags, whose -g gives full debug information;
# other builds get the symbol tables only). CPack's own stripping and DEBUGINFO stay off.
set(CPACK_STRIP_FILES OFF)
set(CPACK_DDPC_SOURCE_DIR ${PROJECT_SOURCE_DIR})
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/deb_dbgsym.cmake)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${DDPC_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# cmake/debian/changelog's newest entry gives the Debian revision (the -1 of 0.1.0-1), and must be
# for this version: a new version needs its changelog entry first.
file(STRINGS ${PROJECT_SOURCE_DIR}/cmake/debian/changelog DDPC_DEB_CHANGELOG_TOP LIMIT_COUNT 1)
if(NOT DDPC_DEB_CHANGELOG_TOP MATCHES "^ddpc \\(${PROJECT_VERSION}-([0-9]+)\\) ")
    message(FATAL_ERROR "cmake/debian/changelog: its first entry '${DDPC_DEB_CHANGELOG_TOP}' is "
        "not for ddpc ${PROJECT_VERSION}; add one for this version")
endif()
set(CPACK_DEBIAN_PACKAGE_RELEASE ${CMAKE_MATCH_1})
# Debian's changelog.Debian.gz and the DEP-5 copyright file (LICENSE's terms) in the package's
# documentation directory, as Debian policy (12.5, 12.7) asks.
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/changelog.Debian.gz
    COMMAND gzip -9nc ${PROJECT_SOURCE_DIR}/cmake/debian/changelog
        > ${PROJECT_BINARY_DIR}/changelog.Debian.gz
    DEPENDS ${PROJECT_SOURCE_DIR}/cmake/debian/changelog VERBATIM)
add_custom_target(ddpc_deb_changelog ALL DEPENDS ${PROJECT_BINARY_DIR}/changelog.Debian.gz)
install(FILES ${PROJECT_BINARY_DIR}/changelog.Debian.gz ${PROJECT_SOURCE_DIR}/cmake/debian/copyright
    DESTINATION ${CMAKE_INSTALL_DOCDIR})
# CPack indents these lines and turns the empty one into the " ." of a Debian description.
# Lines under 80 columns once CPack indents them (lintian: extended-description-line-too-long).
set(CPACK_PACKAGE_DESCRIPTION "ddpc trains neural networks (MLP, CNN, GPT) the way PyTorch's
distributed stack does: a launcher (ddpc run), process groups over shared
memory or MPI, a DDP gradient reducer, ZeRO sharding, samplers, a prefetching
loader and a trainer driven by YAML configs (ddpc train).

The package holds the ddpc program, libddpc (shared and static), its headers,
ddpc.pc and ddpc-static.pc for pkg-config, a CMake package
(find_package(ddpc)), the example configs under /usr/share/ddpc/configs, the
documentation and man pages.")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps says libopenblas0, which apt satisfies with the pthread build; ddpc wants the
# OpenMP one, which shares its thread pool (see CMakeLists.txt). Added to the computed list.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas0-openmp")
# libddpc.so.N gets a shlibs file and the ldconfig trigger (cmake/debian/triggers), as Debian's
# library packages do. (CPack adds postinst and postrm scripts that call ldconfig as well.)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/cmake/debian/triggers)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# The configs read Debian's Fashion-MNIST and fortunes; linking libddpc.a, and building against
# the headers, needs the development files of the libraries it was built against.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "dataset-fashion-mnist, fortunes")
string(JOIN ", " CPACK_DEBIAN_PACKAGE_SUGGESTS build-essential pkg-config libopenblas-openmp-dev
    libdnnl-dev libyaml-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev libopenmpi-dev)
# The package holds no CUDA: the toolkit's libcublas comes from no Debian package (dpkg-shlibdeps
# cannot name a Depends for it), and most Debian machines have no GPU. `make deb` builds it with
# -DDDPC_CUDA=OFF; cpack in a build with CUDA stops with one line saying so.
if(DDPC_HAVE_CUDA)
    set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/deb_no_cuda.cmake)
endif()
include(CPack)
