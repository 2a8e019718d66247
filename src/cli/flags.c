// SPDX-License-Identifier: MIT
/* Seed-style flags after CONFIG: `--epochs 5 --batch_size 32` (argparse's spellings, as the seeds'
 * train scripts take them) are the overrides `epochs=5 data.batch_size=32`. The table below is the
 * documented list (docs/config.md); a dotted config key also works as a flag (`--optim.lr 0.1`).
 * Anything else starting with "--" is an error naming the flag, not a config path. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *flag; /* as argparse spells it; '-' and '_' are the same */
    const char *key;
} flag_alias;

static const flag_alias ALIASES[] = {
    {"epochs", "epochs"},
    {"batch_size", "data.batch_size"},
    {"num_workers", "data.num_workers"},
    {"lr", "optim.lr"},
    {"learning_rate", "optim.lr"},
    {"weight_decay", "optim.weight_decay"},
    {"grad_accum_steps", "optim.grad_accum_steps"},
    {"gradient_accumulation_steps", "optim.grad_accum_steps"},
    {"max_steps", "max_steps"},
    {"seed", "seed"},
    {"log_every", "log_every"},
    {"eval_every", "eval_every"},
    {"run_dir", "run_dir"},
    {"output_dir", "run_dir"},
    {"resume", "resume"},
    {"init_from", "init_from"},
    {"weights_out", "weights_out"},
    {"state", "state"},
    {"num_threads", "num_threads"},
};

/* `a` and `b` (b of length n) are the same flag, '-' and '_' alike. */
static bool same_flag(const char *a, const char *b, size_t n)
{
    if (strlen(a) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        char x = a[i] == '-' ? '_' : a[i], y = b[i] == '-' ? '_' : b[i];
        if (x != y)
            return false;
    }
    return true;
}

void ddpc_cli_print_flags(FILE *f)
{
    fprintf(f, "flags (argparse-style, each also written key=value):\n");
    for (size_t i = 0; i < sizeof ALIASES / sizeof ALIASES[0]; i++)
        fprintf(f, "  --%-29s %s=VALUE\n", ALIASES[i].flag, ALIASES[i].key);
    fprintf(f, "  --<dotted.key> VALUE            <dotted.key>=VALUE (any config key)\n");
}

int ddpc_cli_flag_assignment(int argc, char **argv, int *i, char *out, size_t cap)
{
    const char *arg = argv[*i] + 2; /* past "--" */
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    const char *value = eq ? eq + 1 : NULL;
    const char *key = NULL;
    for (size_t k = 0; k < sizeof ALIASES / sizeof ALIASES[0] && !key; k++)
        if (same_flag(ALIASES[k].flag, arg, n))
            key = ALIASES[k].key;
    int key_len = (int)n;
    if (!key && memchr(arg, '.', n))
        key = arg; /* a config key spelled as a flag */
    else if (key)
        key_len = (int)strlen(key);
    if (!key || n == 0) {
        fprintf(stderr,
                "ddpc: unknown flag '--%.*s' (flags: 'ddpc train --help'; any config key also "
                "works as key=value)\n",
                (int)n, arg);
        return 2;
    }
    if (!value) {
        if (*i + 1 >= argc) {
            fprintf(stderr, "ddpc: flag '--%.*s' needs a value\n", (int)n, arg);
            return 2;
        }
        value = argv[++*i];
    }
    if ((size_t)snprintf(out, cap, "%.*s=%s", key_len, key, value) >= cap) {
        fprintf(stderr, "ddpc: flag '--%.*s': value too long\n", (int)n, arg);
        return 2;
    }
    return 0;
}
