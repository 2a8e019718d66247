/* ddpc file-system helpers shared by every layer that writes outputs (run directories,
 * checkpoints, launcher logs). */
#ifndef DDPC_FS_H
#define DDPC_FS_H

#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* mkdir -p: creates every missing component of `dir`. DDPC_EINVAL for a path of 1024 bytes or
 * more; DDPC_EIO naming the component that cannot be created or is not a directory. */
ddpc_status ddpc_mkdirs(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
