# SPDX-License-Identifier: MIT
# Man pages for ddpc and each of its commands (ddpc-train(1), ...), made at build time by help2man
# from the program's own --help, so a page cannot drift from the usage it documents; installed
# gzipped under share/man/man1. Without help2man (Debian: help2man, in scripts/setup) a build
# makes no pages and says so; `make deb` sets DDPC_MAN=ON, which requires them.
option(DDPC_MAN "Require help2man and the man pages (make deb sets it)" OFF)
find_program(DDPC_HELP2MAN help2man)
if(NOT DDPC_HELP2MAN)
    if(DDPC_MAN)
        message(FATAL_ERROR "ddpc's man pages need help2man (Debian: help2man); run ./scripts/setup")
    endif()
    message(STATUS "ddpc: no help2man found, building without man pages")
    return()
endif()

# command | the page's NAME line
set(DDPC_MAN_PAGES
    "|distributed data-parallel training of neural networks"
    "train|train, validate, test or predict as a YAML config says"
    "plan|print a config's per-rank memory plan at every ZeRO stage"
    "bench|time training steps or collectives"
    "run|start a program as a group of distributed workers"
    "env|print the system, the build and the distributed environment"
    "ckpt|list, show, verify or export checkpoints"
    "report|write a run's metrics as one HTML page")
set(DDPC_MAN_FILES "")
foreach(entry IN LISTS DDPC_MAN_PAGES)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 cmd)
    list(GET parts 1 name)
    if(cmd STREQUAL "")
        set(page ddpc)
    else()
        set(page ddpc-${cmd})
    endif()
    # help2man runs PROGRAM --help and names the page after PROGRAM, so each command gets a
    # script of that name. It writes "Usage:" lines as the SYNOPSIS, and ddpc prints "usage:"
    # (which scripts and tests match), hence the one sed.
    file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/man/${page}
        CONTENT "#!/bin/sh\n\"$<TARGET_FILE:ddpc>\" ${cmd} \"$@\" | sed 's/^usage:/Usage:/'\n"
        FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ WORLD_READ)
    set(out ${PROJECT_BINARY_DIR}/man/${page}.1)
    add_custom_command(OUTPUT ${out}.gz
        COMMAND ${DDPC_HELP2MAN} --no-info --version-string=${PROJECT_VERSION} --section=1
            --name=${name} --output=${out} ${PROJECT_BINARY_DIR}/man/${page}
        COMMAND gzip -9nf ${out}
        DEPENDS ddpc ${PROJECT_SOURCE_DIR}/cmake/man.cmake
        COMMENT "help2man: ${page}.1.gz" VERBATIM)
    list(APPEND DDPC_MAN_FILES ${out}.gz)
endforeach()
add_custom_target(ddpc_man ALL DEPENDS ${DDPC_MAN_FILES})
install(FILES ${DDPC_MAN_FILES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
