# SPDX-License-Identifier: MIT
# CPack's pre-build script for the .deb: runs once CPack has installed the package's files into
# its staging directory and before it packs them, so the .deb gets the stripped binaries and
# CPACK_PACKAGE_DIRECTORY the ddpc-dbgsym .ddeb of their debug files (cmake/debian/split_debug.sh
# says how, the way dh_strip does). CPack's own DEBUGINFO support is not used: CMake 3.25 writes
# absolute paths into the .ddeb's md5sums and leaves out what lintian asks of a package.
execute_process(
    COMMAND "${CPACK_DDPC_SOURCE_DIR}/cmake/debian/split_debug.sh"
        "${CPACK_TEMPORARY_INSTALL_DIRECTORY}" "${CPACK_PACKAGE_DIRECTORY}"
        "${CPACK_PACKAGE_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}"
        "${CPACK_DEBIAN_PACKAGE_MAINTAINER}"
    RESULT_VARIABLE ddpc_split_rc)
if(NOT ddpc_split_rc EQUAL 0)
    message(FATAL_ERROR "cmake/debian/split_debug.sh failed (${ddpc_split_rc}): no .deb made")
endif()
