// SPDX-License-Identifier: MIT
/* Run directory guards: a second job (process) cannot lock a held run directory and is told the
 * holder's pid; the lock is free once the holder is SIGKILLed; config.yaml is nested YAML that the
 * config parser reads back with the same values (sequences of mappings included); writability
 * probes name the path (as root, permissions do not stop us, so a regular file stands in the way
 * of a directory, and /proc is not writable). */
#include "check.h"

#include <ddpc/config.h>
#include <ddpc/rundir.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/ddpc_test_rundir_XXXXXX";

static void test_lock_excludes_a_second_job(void)
{
    char run[256];
    snprintf(run, sizeof run, "%s/run/a", dir);
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t holder = fork();
    if (holder == 0) {
        ddpc_rundir_lock *l = NULL;
        char ok = ddpc_rundir_lock_acquire(run, &l) == DDPC_OK ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char ok = 0;
    CHECK(read(ready[0], &ok, 1) == 1 && ok == 'y');
    ddpc_rundir_lock *l = NULL;
    CHECK_EQ_INT(ddpc_rundir_lock_acquire(run, &l), DDPC_EINVAL);
    char pid[32];
    snprintf(pid, sizeof pid, "(pid %d)", (int)holder);
    CHECK_STR_CONTAINS(ddpc_last_error(), pid);
    CHECK_STR_CONTAINS(ddpc_last_error(), "is in use by another job");
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    CHECK_EQ_INT(ddpc_rundir_lock_acquire(run, &l), DDPC_OK); /* the kernel dropped it */
    ddpc_rundir_unlock(l);
    ddpc_rundir_unlock(NULL);
    close(ready[0]);
    close(ready[1]);
}

static void test_config_yaml_round_trip(void)
{
    const char *dump = "seed: 3\n"
                       "model.type: mlp\n"
                       "model.hidden: [32, 16]\n"
                       "data.batch_size: 16\n"
                       "tasks.0.name: fine\n"
                       "tasks.0.data.type: synthetic_images\n"
                       "predict.prompt: \"a: b\\n\"\n"
                       "tasks.1.name: coarse\n"
                       "tasks.1.data.label_map: [0, 0, 1]\n"
                       "model.dropout: 0.25\n";
    CHECK_EQ_INT(ddpc_rundir_write_config(dir, dump), DDPC_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    ddpc_config *c = NULL;
    CHECK_EQ_INT(ddpc_config_load(&c, path), DDPC_OK);
    if (!c)
        return;
    int64_t v, list[4];
    size_t n;
    const char *s;
    double f;
    CHECK_EQ_INT(ddpc_config_int(c, "seed", 0, 0, 100, &v), DDPC_OK);
    CHECK_EQ_INT(v, 3);
    CHECK_EQ_INT(ddpc_config_int_list(c, "model.hidden", NULL, 0, 0, 100, list, 4, &n), DDPC_OK);
    CHECK(n == 2 && list[0] == 32 && list[1] == 16);
    CHECK_EQ_INT(ddpc_config_string(c, "tasks.1.name", NULL, &s), DDPC_OK);
    CHECK(s && strcmp(s, "coarse") == 0);
    CHECK_EQ_INT(ddpc_config_string(c, "tasks.0.data.type", NULL, &s), DDPC_OK);
    CHECK(s && strcmp(s, "synthetic_images") == 0);
    CHECK_EQ_INT(ddpc_config_string(c, "predict.prompt", NULL, &s), DDPC_OK);
    CHECK(s && strcmp(s, "a: b\n") == 0);
    CHECK_EQ_INT(ddpc_config_float(c, "model.dropout", 0, 0, 1, &f), DDPC_OK);
    CHECK(f == 0.25);
    CHECK_EQ_INT(ddpc_config_seq_len(c, "tasks"), 2);
    ddpc_config_destroy(c);
}

static void test_writability_probes(void)
{
    char file[256], under_file[300];
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    snprintf(under_file, sizeof under_file, "%s/sub/w.safetensors", file);
    CHECK_EQ_INT(ddpc_path_check_writable(under_file), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), under_file);
    CHECK_EQ_INT(ddpc_path_check_writable("/proc/ddpc.safetensors"), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "/proc/ddpc.safetensors");
    CHECK_EQ_INT(ddpc_path_check_writable(dir), DDPC_EIO); /* a directory */
    char ok[300];
    snprintf(ok, sizeof ok, "%s/new/deeper/w.safetensors", dir);
    CHECK_EQ_INT(ddpc_path_check_writable(ok), DDPC_OK);
    CHECK(access(ok, F_OK) != 0); /* the probe is gone, the file not made */
    char ckpt[300];
    snprintf(ckpt, sizeof ckpt, "%s/sub/checkpoints", file);
    CHECK_EQ_INT(ddpc_dir_check_writable(ckpt), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "a file is in the way");
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    RUN_TEST(test_lock_excludes_a_second_job);
    RUN_TEST(test_config_yaml_round_trip);
    RUN_TEST(test_writability_probes);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return check_summary();
}
