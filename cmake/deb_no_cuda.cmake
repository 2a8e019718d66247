# SPDX-License-Identifier: MIT
# CPack's pre-build script in a build with CUDA: the .deb is made without CUDA (its Depends come
# from Debian packages, and the CUDA toolkit's libcublas is none), so cpack stops here with one line.
message(FATAL_ERROR "ddpc's .deb is built without CUDA: configure a build directory with "
    "-DDDPC_CUDA=OFF and run cpack there (`make deb` does, in build-deb)")
