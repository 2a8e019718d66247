// SPDX-License-Identifier: MIT
/* Tests for src/core/plugin.c's refusals that need no plugin built: a missing path, a directory,
 * a file that is no shared library, and a shared library that is no ddpc plugin (libc). Each is
 * its status and one message naming the path. Plugins that load, fail their init or carry
 * another ABI are built and loaded by tests/cli_train_plugin.sh. */
#include <ddpc/plugin.h>
#include <ddpc/status.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static void test_missing(void)
{
    CHECK_EQ_INT(ddpc_plugin_load("/nonexistent/dir/p.so"), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(),
                       "plugin '/nonexistent/dir/p.so': No such file or directory");
    CHECK_EQ_INT(ddpc_plugin_load(""), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_plugin_load(NULL), DDPC_EINVAL);
}

static void test_directory(void)
{
    CHECK_EQ_INT(ddpc_plugin_load("/tmp"), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "plugin '/tmp' is not a regular file");
}

/* a text file, named without a '/': dlopen must open it as a file, not search the library path */
static void test_not_a_library(void)
{
    char dir[] = "/tmp/ddpc-plugin-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[64], cwd[4096];
    snprintf(path, sizeof path, "%s/text.so", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    for (int i = 0; f && i < 100; i++)
        fputs("not an ELF file\n", f);
    if (f)
        fclose(f);
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK_EQ_INT(chdir(dir), 0);
    CHECK_EQ_INT(ddpc_plugin_load("text.so"), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "plugin './text.so' cannot be loaded: invalid ELF header");
    CHECK_EQ_INT(chdir(cwd), 0);
    unlink(path);
    rmdir(dir);
}

/* a real shared library without ddpc_plugin_init: refused, and nothing of it is called */
static void test_not_a_plugin(void)
{
    const char *libs[] = {"/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1",
                          "/lib64/libz.so.1"};
    const char *lib = NULL;
    for (size_t i = 0; i < sizeof libs / sizeof libs[0] && !lib; i++)
        if (access(libs[i], R_OK) == 0)
            lib = libs[i];
    CHECK(lib != NULL); /* zlib is one of ddpc's own dependencies */
    if (!lib)
        return;
    CHECK_EQ_INT(ddpc_plugin_load(lib), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "is not a ddpc plugin: it exports no ddpc_plugin_init");
}

int main(void)
{
    RUN_TEST(test_missing);
    RUN_TEST(test_directory);
    RUN_TEST(test_not_a_library);
    RUN_TEST(test_not_a_plugin);
    return check_summary();
}
