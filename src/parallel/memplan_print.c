// SPDX-License-Identifier: MIT
/* The memory plan as text: the comparison table of `ddpc plan` (every ZeRO stage, with and
 * without activation checkpointing) and the one-line summary a training run starts with. Sizes
 * are binary units with 3 significant digits, or exact byte counts when asked (for scripts). */
#include <ddpc/memplan.h>

#include <inttypes.h>

static void cell(FILE *f, uint64_t bytes, bool exact)
{
    char b[32];
    if (exact)
        fprintf(f, " %16" PRIu64, bytes);
    else
        fprintf(f, " %16s", ddpc_memplan_format_bytes(bytes, b, sizeof b));
}

static void row(FILE *f, const ddpc_memplan_input *in, int stage, bool ckpt, bool exact)
{
    ddpc_memplan_input v = *in;
    v.stage = stage, v.checkpointing = ckpt;
    ddpc_memplan p;
    if (ddpc_memplan_compute(&v, &p) != DDPC_OK)
        return;
    bool configured = stage == in->stage && ckpt == in->checkpointing;
    fprintf(f, "%c %5d %5s", configured ? '*' : ' ', stage,
            !in->can_checkpoint ? "-"
            : ckpt              ? "on"
                                : "off");
    for (int i = 0; i < DDPC_MEM_ITEMS; i++)
        cell(f, p.bytes[i], exact);
    cell(f, p.total, exact);
    fputc('\n', f);
}

void ddpc_memplan_print_table(FILE *f, const ddpc_memplan_input *in, uint64_t limit,
                              const char *limit_what, bool exact)
{
    /* DataParallel runs one process (its replicas are threads), so its plan is that process's. */
    if (in->replicas > 1)
        fprintf(f, "memory plan of the process with %d DataParallel replicas", in->replicas);
    else
        fprintf(f, "memory plan per rank at %d rank%s", in->world, in->world == 1 ? "" : "s");
    fprintf(f, " (%zu parameters, %d optimizer state buffer%s each; * = as configured):\n", in->n,
            in->optim_states, in->optim_states == 1 ? "" : "s");
    fprintf(f, "  stage  ckpt");
    for (int i = 0; i < DDPC_MEM_ITEMS; i++)
        fprintf(f, " %16s", ddpc_memplan_item_name((ddpc_memplan_item)i));
    fprintf(f, " %16s\n", "total");
    for (int s = 0; s <= DDPC_MEMPLAN_MAX_STAGE; s++) {
        if (in->can_checkpoint) {
            row(f, in, s, false, exact);
            row(f, in, s, true, exact);
        } else {
            row(f, in, s, in->checkpointing, exact);
        }
    }
    if (in->world == 1)
        fprintf(f, "(one %s: every zero.stage runs as stage 0)\n",
                in->replicas > 1 ? "process" : "rank");
    char b[32];
    fprintf(f, "limit: %s per %s: %s\n", ddpc_memplan_format_bytes(limit, b, sizeof b),
            in->replicas > 1 ? "process" : "rank", limit_what);
}

void ddpc_memplan_print_line(FILE *f, const ddpc_memplan *p, int world)
{
    char b[32];
    if (p->replicas > 1)
        fprintf(f, "memory plan of the process (zero.stage %d, %d DataParallel replicas):",
                p->stage, p->replicas);
    else
        fprintf(f, "memory plan per rank (zero.stage %d, %d rank%s):", p->stage, world,
                world == 1 ? "" : "s");
    for (int i = 0; i < DDPC_MEM_ITEMS; i++)
        fprintf(f, "%s %s %s", i ? "," : "", ddpc_memplan_item_name((ddpc_memplan_item)i),
                ddpc_memplan_format_bytes(p->bytes[i], b, sizeof b));
    fprintf(f, "; total %s\n", ddpc_memplan_format_bytes(p->total, b, sizeof b));
}
