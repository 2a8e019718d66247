// SPDX-License-Identifier: MIT
/* Memory figures from /proc: the machine's MemAvailable (/proc/meminfo) and this process's
 * resident set and its high-water mark (VmRSS, VmHWM of /proc/self/status). Both files give
 * "Key:   <n> kB" lines; a missing file or key is DDPC_EIO naming it. */
#include <ddpc/sysinfo.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* *bytes = the kB figure of the line starting with `key` (e.g. "VmRSS:") in `path`. */
static ddpc_status read_kb(const char *path, const char *key, uint64_t *bytes)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return ddpc_errorf(DDPC_EIO, "cannot open %s to read %s", path, key);
    char line[256];
    size_t klen = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        uint64_t kb;
        if (strncmp(line, key, klen) == 0 && sscanf(line + klen, "%" SCNu64, &kb) == 1) {
            *bytes = kb * 1024;
            found = true;
        }
    }
    fclose(f);
    return found ? DDPC_OK : ddpc_errorf(DDPC_EIO, "%s has no %s line", path, key);
}

ddpc_status ddpc_sysinfo_mem_available(uint64_t *bytes)
{
    return read_kb("/proc/meminfo", "MemAvailable:", bytes);
}

ddpc_status ddpc_sysinfo_process_memory(uint64_t *rss, uint64_t *rss_peak)
{
    DDPC_TRY(read_kb("/proc/self/status", "VmRSS:", rss));
    return read_kb("/proc/self/status", "VmHWM:", rss_peak);
}
