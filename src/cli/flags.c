// SPDX-License-Identifier: MIT
/* Argparse-style flags after CONFIG: `--epochs 5 --batch_size 32` (the seeds' and the guides'
 * spellings) are the overrides `epochs=5 data.batch_size=32`. A flag is, in this order: an alias of
 * the table below (docs/config.md lists it, `ddpc train --help` prints it), a dotted key
 * (`--optim.lr 0.1`), or the last name of the one key ending in it (`--d_model 64` is
 * model.d_model=64), which the config resolves as the trainer asks for its keys; a name that two
 * keys end in, or that no key does, is refused once the keys are known. */
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
    /* The guides' seq2seq spellings where ddpc's key differs or a bare last name would be
     * ambiguous or land elsewhere (model.max_len follows data.max_len; parallel.mode is another
     * "mode"). */
    {"max_len", "data.max_len"},
    {"use_checkpoint", "model.activation_checkpointing"},
    {"mode", "state"},
};

#define N_ALIASES (sizeof ALIASES / sizeof ALIASES[0])

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
    for (size_t i = 0; i < N_ALIASES; i++)
        fprintf(f, "  --%-29s %s=VALUE\n", ALIASES[i].flag, ALIASES[i].key);
    fprintf(f, "  --<dotted.key> VALUE            <dotted.key>=VALUE (any config key)\n"
               "  --<last name> VALUE             the one key ending in that name "
               "(--d_model 64: model.d_model=64)\n"
               "A flag alone sets a true/false key to true (--use_checkpoint); --flag=VALUE works\n"
               "too; '-' and '_' are alike.\n"
               "--plugin PATH (repeatable; not a key) loads a plugin's model and data types, after\n"
               "the config's `plugins` list and before DDPC_PLUGINS's (docs/extending.md).\n");
}

bool ddpc_cli_flag_takes(const char *next)
{
    if (!next || strncmp(next, "--", 2) == 0) /* "-h" and "-1" are values, as in argparse */
        return false;
    /* "key=value" is an override of its own: `--use_checkpoint max_steps=5` is a bare flag */
    size_t n = strspn(next, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-");
    return !(n > 0 && next[n] == '=');
}

int ddpc_cli_apply_flag(ddpc_config *c, int argc, char **argv, int *i)
{
    const char *arg = argv[*i] + 2; /* past "--" */
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    char given[256], name[256];
    if (n == 0 || n >= sizeof name) {
        fprintf(stderr,
                "ddpc: unknown flag '--%.*s' (flags: 'ddpc train --help'; any config key "
                "also works as key=value)\n",
                (int)(n < 200 ? n : 200), arg);
        return 2;
    }
    snprintf(given, sizeof given, "--%.*s", (int)n, arg);
    snprintf(name, sizeof name, "%.*s", (int)n, arg);
    const char *value = eq ? eq + 1 : NULL;
    int at = *i;
    if (!eq && *i + 1 < argc && ddpc_cli_flag_takes(argv[*i + 1]))
        value = argv[++*i];
    const char *key = NULL;
    for (size_t k = 0; k < N_ALIASES && !key; k++)
        if (same_flag(ALIASES[k].flag, name, n))
            key = ALIASES[k].key;
    bool by_last_name = !key && !strchr(name, '.');
    if (ddpc_config_set_flag(c, key ? key : name, by_last_name, value, given, at) != DDPC_OK)
        return 1;
    return 0;
}

int ddpc_cli_check_flags(const char *cmd, const ddpc_config *c)
{
    const char *more[N_ALIASES + 1];
    for (size_t i = 0; i < N_ALIASES; i++)
        more[i] = ALIASES[i].flag;
    more[N_ALIASES] = NULL;
    const char *near = NULL;
    const char *flag = ddpc_config_unmatched_flag(c, more, &near);
    if (!flag)
        return 0;
    char hint[300] = "";
    if (near)
        snprintf(hint, sizeof hint, "did you mean '--%s'? ", near);
    fprintf(stderr,
            "ddpc %s: unknown flag '%s' (%sflags: 'ddpc train --help'; any config key also works "
            "as key=value)\n",
            cmd, flag, hint);
    return 2;
}

int ddpc_cli_config_fail(const char *cmd, const ddpc_config *c)
{
    ddpc_cli_fail(cmd);
    return ddpc_config_flag_failed(c) ? 2 : 1;
}
