// SPDX-License-Identifier: MIT
/* libFuzzer harness for the YAML config parser (src/core/config_parse.c): every input must parse
 * or fail with a status, and the getters, flags by last name (config_flags.c: they walk the tree
 * for keys of the same name) and unused-key check must then work on what parsed.
 * Built and run by tests/fuzz/run.sh. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <ddpc/alloc.h>
#include <ddpc/config.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = ddpc_malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    ddpc_config *c = NULL;
    if (ddpc_config_parse(&c, text, "fuzz.yaml") == DDPC_OK) {
        int64_t v;
        double f;
        const char *s;
        (void)ddpc_config_set_flag(c, "type", true, "x", "--type", 1);
        (void)ddpc_config_set_flag(c, "lr", true, NULL, "--lr", 2);
        (void)ddpc_config_int(c, "epochs", 1, 0, 100, &v);
        (void)ddpc_config_float(c, "optim.lr", 0.1, 0.0, 1.0, &f);
        (void)ddpc_config_string(c, "model.type", "mlp", &s);
        (void)ddpc_config_unmatched_flag(c, NULL, &s);
        (void)ddpc_config_check_unused(c);
    }
    ddpc_config_destroy(c);
    ddpc_free(text);
    return 0;
}
