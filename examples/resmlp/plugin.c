// SPDX-License-Identifier: MIT
/* resmlp_plugin.so: the example's model type ("resmlp") and data type ("arrays") as a plugin of
 * the ddpc program, so that `ddpc train resmlp.yaml --plugin ./resmlp_plugin.so` (or a config's
 * `plugins:` list) trains them with no main() of the user's. It is built with ddpc's headers but
 * not linked to libddpc: the functions it calls are the loading program's. */
#include "resmlp.h"

#include <ddpc/plugin.h>

DDPC_PLUGIN_DECLARE_ABI;

/* Called once by the loader, after it checked the ABI above; the first failure's message (a
 * type name already registered, say) is the loader's error. */
DDPC_PLUGIN_EXPORT ddpc_status ddpc_plugin_init(void)
{
    DDPC_TRY(ddpc_model_register(&resmlp_ops));
    return ddpc_data_register("arrays", arrays_factory, NULL);
}
