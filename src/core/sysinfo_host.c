// SPDX-License-Identifier: MIT
/* Host facts for `ddpc env`: uname, /etc/os-release, /proc/cpuinfo (model, cores, SIMD flags),
 * the CPUs this process may use, and which SIMD extensions the build itself relies on; and
 * ddpc_sysinfo_collect, which adds the build and GPU parts. Reads only files; every field ends
 * NUL-terminated within its array, whatever the files contain. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "core/sysinfo_impl.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* SIMD extensions worth reporting, by their /proc/cpuinfo flag names. */
static const char *const simd[] = {"sse4_2",   "avx",         "f16c",        "fma",
                                   "avx2",     "avx_vnni",    "avx512f",     "avx512bw",
                                   "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                                   "amx_tile", "amx_bf16",    "amx_int8"};

/* Those of simd[] the compiler was told it may use (-march), from its predefined macros. */
static void simd_built(char *b, size_t cap)
{
    b[0] = '\0';
    (void)cap; /* unused when the build targets baseline x86-64 */
#ifdef __SSE4_2__
    ddpc__strlcatf(b, cap, " sse4_2");
#endif
#ifdef __AVX__
    ddpc__strlcatf(b, cap, " avx");
#endif
#ifdef __F16C__
    ddpc__strlcatf(b, cap, " f16c");
#endif
#ifdef __FMA__
    ddpc__strlcatf(b, cap, " fma");
#endif
#ifdef __AVX2__
    ddpc__strlcatf(b, cap, " avx2");
#endif
#ifdef __AVXVNNI__
    ddpc__strlcatf(b, cap, " avx_vnni");
#endif
#ifdef __AVX512F__
    ddpc__strlcatf(b, cap, " avx512f");
#endif
#ifdef __AVX512BW__
    ddpc__strlcatf(b, cap, " avx512bw");
#endif
#ifdef __AVX512VL__
    ddpc__strlcatf(b, cap, " avx512vl");
#endif
#ifdef __AVX512VNNI__
    ddpc__strlcatf(b, cap, " avx512_vnni");
#endif
#ifdef __AVX512BF16__
    ddpc__strlcatf(b, cap, " avx512_bf16");
#endif
#ifdef __AVX512FP16__
    ddpc__strlcatf(b, cap, " avx512_fp16");
#endif
#ifdef __AMX_TILE__
    ddpc__strlcatf(b, cap, " amx_tile");
#endif
#ifdef __AMX_BF16__
    ddpc__strlcatf(b, cap, " amx_bf16");
#endif
#ifdef __AMX_INT8__
    ddpc__strlcatf(b, cap, " amx_int8");
#endif
    if (b[0] == ' ')
        memmove(b, b + 1, strlen(b));
}

void ddpc__strlcatf(char *dst, size_t cap, const char *fmt, ...)
{
    size_t n = strnlen(dst, cap);
    if (n + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst + n, cap - n, fmt, ap);
    va_end(ap);
}

/* Whether `word` appears as a whole word in the space-separated list `words`. */
static bool has_word(const char *words, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = words; (p = strstr(p, word)); p += n) {
        bool start = p == words || p[-1] == ' ' || p[-1] == '\t';
        bool end = p[n] == '\0' || p[n] == ' ' || p[n] == '\n';
        if (start && end)
            return true;
    }
    return false;
}

/* The value after "key\t: " of a cpuinfo line, without its newline; NULL if the line is not key. */
static const char *cpuinfo_value(char *line, const char *key)
{
    size_t n = strlen(key);
    if (strncmp(line, key, n) != 0 || (line[n] != '\t' && line[n] != ' ' && line[n] != ':'))
        return NULL;
    char *colon = strchr(line, ':');
    if (!colon)
        return NULL;
    line[strcspn(line, "\n")] = '\0';
    return colon[1] == ' ' ? colon + 2 : colon + 1;
}

static void read_cpuinfo(ddpc_sysinfo *out)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[16384], flags[16384] = "";
    int package = 0, seen[4096], nseen = 0;
    const char *v;
    while (fgets(line, sizeof line, f)) {
        if ((v = cpuinfo_value(line, "model name")) && strcmp(out->cpu_model, "unknown") == 0) {
            out->cpu_model[0] = '\0';
            ddpc__strlcatf(out->cpu_model, sizeof out->cpu_model, "%s", v);
        } else if ((v = cpuinfo_value(line, "flags")) && !flags[0]) {
            ddpc__strlcatf(flags, sizeof flags, "%s", v);
        } else if ((v = cpuinfo_value(line, "physical id")))
            sscanf(v, "%d", &package);
        else if ((v = cpuinfo_value(line, "core id"))) {
            int core = 0, key, i;
            sscanf(v, "%d", &core);
            key = package * 65536 + core;
            for (i = 0; i < nseen && seen[i] != key; i++)
                ;
            if (i == nseen && nseen < 4096)
                seen[nseen++] = key;
        }
    }
    fclose(f);
    out->cpu_cores = nseen;
    for (size_t i = 0; i < sizeof simd / sizeof simd[0]; i++) {
        bool host = has_word(flags, simd[i]);
        if (host)
            ddpc__strlcatf(out->simd_host, sizeof out->simd_host, "%s%s",
                           out->simd_host[0] ? " " : "", simd[i]);
        if (!host && flags[0] && has_word(out->simd_build, simd[i]))
            ddpc__strlcatf(out->simd_missing, sizeof out->simd_missing, "%s%s",
                           out->simd_missing[0] ? " " : "", simd[i]);
    }
}

static void read_os_release(ddpc_sysinfo *out)
{
    FILE *f = fopen("/etc/os-release", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "PRETTY_NAME=", 12) != 0)
            continue;
        char *v = line + 12;
        v[strcspn(v, "\n")] = '\0';
        size_t n = strlen(v);
        if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
            v[n - 1] = '\0';
            v++;
        }
        out->distro[0] = '\0';
        ddpc__strlcatf(out->distro, sizeof out->distro, "%s", v);
        break;
    }
    fclose(f);
}

void ddpc__sysinfo_host(ddpc_sysinfo *out)
{
    struct utsname u;
    out->os[0] = '\0';
    if (uname(&u) == 0)
        ddpc__strlcatf(out->os, sizeof out->os, "%s %s %s", u.sysname, u.release, u.machine);
    else
        ddpc__strlcatf(out->os, sizeof out->os, "unknown");
    snprintf(out->distro, sizeof out->distro, "unknown");
    read_os_release(out);
    if (gethostname(out->hostname, sizeof out->hostname) != 0)
        snprintf(out->hostname, sizeof out->hostname, "unknown");
    out->hostname[sizeof out->hostname - 1] = '\0';
    snprintf(out->cpu_model, sizeof out->cpu_model, "unknown");
    out->simd_host[0] = out->simd_missing[0] = '\0';
    simd_built(out->simd_build, sizeof out->simd_build);
    read_cpuinfo(out);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    out->cpu_threads = online > 0 ? (int)online : 0;
    cpu_set_t set;
    out->cpu_allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
}

void ddpc_sysinfo_collect(ddpc_sysinfo *out)
{
    memset(out, 0, sizeof *out);
    ddpc__sysinfo_host(out);
    ddpc__sysinfo_build(out);
    ddpc__sysinfo_gpu(out);
}

int ddpc_sysinfo_cpus_usable(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}
