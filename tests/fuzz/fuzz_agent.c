// SPDX-License-Identifier: MIT
/* libFuzzer harness for the records launchers read from each other through the store
 * (src/launch/agent.c, agent_rdzv.c): a node's rendezvous record and a failure record. Built by
 * tests/fuzz/run.sh. The input, cut at its first NUL, is parsed as both; an accepted node record
 * has terminated fields that fit, a failure record always gives a FAILED event with an exit code
 * a process can return and a terminated text. */
#include "launch/agent_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char text[DDPC__AGENT_RECORD_MAX];
    static ddpc__agent_event ev;
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    ddpc__agent_record r;
    if (ddpc__agent_parse_node(text, &r) &&
        (strlen(r.run_id) >= sizeof r.run_id || strlen(r.host) >= sizeof r.host ||
         strlen(r.addr) >= sizeof r.addr || !r.host[0]))
        abort();
    ddpc__agent_parse_failure(text, &ev);
    if (ev.kind != DDPC__AGENT_FAILED || ev.exit_code < 1 || ev.exit_code > 255 ||
        strlen(ev.text) >= sizeof ev.text)
        abort();
    return 0;
}
