/* File-system helpers. mkdir -p walks the path's components from the root; an existing component
 * must be a directory (a regular file in the way is reported as such, not as EEXIST). */
#include <ddpc/fs.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

ddpc_status ddpc_mkdirs(const char *dir)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return ddpc_errorf(DDPC_EINVAL, "directory path too long: '%.60s...'", dir);
    if (!buf[0])
        return ddpc_errorf(DDPC_EINVAL, "empty directory path");
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        struct stat st;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return ddpc_errorf(DDPC_EIO, "cannot create directory '%s': %s", buf, strerror(errno));
        if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
            return ddpc_errorf(DDPC_EIO, "cannot create directory '%s': a file is in the way", buf);
        *p = saved;
        if (saved == '\0')
            return DDPC_OK;
    }
}
