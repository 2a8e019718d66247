// SPDX-License-Identifier: MIT
/* torchrun's rendezvous options on `ddpc run`, so that copied torchrun lines work: --standalone,
 * --rdzv-endpoint HOST[:PORT], --rdzv-backend, --rdzv-id and --nnodes MIN:MAX. ddpc's rendezvous
 * is its own store at the master address, so each maps onto a ddpc option with torchrun's meaning
 * (endpoint = --master-addr and --master-port, id = --run-id, which torchrun also exports as
 * TORCHELASTIC_RUN_ID); what ddpc cannot honour is refused in one line naming the alternative. */
#include "launch/launch_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* torchrun's port for a c10d endpoint given without one (torch.distributed.run). */
#define TORCHRUN_RDZV_PORT 29400

static ddpc_status parse_port(const char *endpoint, const char *s, int *port)
{
    size_t n = strspn(s, "0123456789");
    /* 0 is torchrun's "localhost:0" idiom: a free port, as ddpc picks by default */
    if (n == 0 || n > 5 || s[n] != '\0' || atoi(s) > 65535)
        return ddpc_errorf(DDPC_EINVAL, "--rdzv-endpoint: the port of '%s' is not 0 to 65535",
                           endpoint);
    *port = atoi(s);
    return DDPC_OK;
}

/* HOST, HOST:PORT, [IPV6] or [IPV6]:PORT, as torchrun splits them. */
static ddpc_status endpoint(ddpc_launch_config *c, const char *v)
{
    char host[sizeof c->master_addr];
    int port = TORCHRUN_RDZV_PORT;
    const char *colon = strrchr(v, ':');
    size_t hlen = strlen(v);
    if (v[0] == '[') {
        const char *close = strchr(v, ']');
        if (!close || (close[1] != '\0' && close[1] != ':'))
            return ddpc_errorf(DDPC_EINVAL,
                               "--rdzv-endpoint: '%s' is not HOST[:PORT] or "
                               "[IPV6][:PORT]",
                               v);
        if (close[1] == ':')
            DDPC_TRY(parse_port(v, close + 2, &port));
        v++;
        hlen = (size_t)(close - v);
    } else if (colon && strchr(v, ':') == colon) { /* one ':' only: a bare IPv6 has no port */
        DDPC_TRY(parse_port(v, colon + 1, &port));
        hlen = (size_t)(colon - v);
    }
    if (hlen == 0 || hlen >= sizeof host)
        return ddpc_errorf(DDPC_EINVAL,
                           "--rdzv-endpoint: '%s' names no host, or one longer than "
                           "%zu characters",
                           v, sizeof host - 1);
    memcpy(host, v, hlen);
    host[hlen] = '\0';
    char why[512];
    if (!ddpc__host_check(host, why, sizeof why))
        return ddpc_errorf(DDPC_EINVAL, "--rdzv-endpoint: %s", why);
    if ((c->master_addr_set && strcmp(c->master_addr, host) != 0) ||
        (c->master_port != 0 && c->master_port != port))
        return ddpc_errorf(DDPC_EINVAL,
                           "--rdzv-endpoint %s:%d and the --master-addr %s --master-port %d given "
                           "before it name different rendezvous; give one of them",
                           host, port, c->master_addr, c->master_port);
    memcpy(c->master_addr, host, hlen + 1);
    c->master_addr_set = true;
    c->master_port = port;
    c->rdzv_endpoint_set = true;
    return DDPC_OK;
}

static ddpc_status backend(const char *v)
{
    /* both mean "meet at the endpoint" for ddpc, whose store serves either way */
    if (strcmp(v, "c10d") == 0 || strcmp(v, "static") == 0)
        return DDPC_OK;
    if (strcmp(v, "etcd") == 0 || strcmp(v, "etcd-v2") == 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "--rdzv-backend %s: ddpc has no etcd rendezvous; its own store at "
                           "node 0 serves instead: give --rdzv-endpoint HOST:PORT (node 0's "
                           "address) and drop --rdzv-backend",
                           v);
    return ddpc_errorf(DDPC_EINVAL, "--rdzv-backend: '%s' is not 'c10d' or 'static'", v);
}

static ddpc_status rdzv_id(ddpc_launch_config *c, const char *v)
{
    if (!ddpc__run_id_valid(v))
        return ddpc_errorf(DDPC_EINVAL,
                           "--rdzv-id: '%s' is not 1 to 100 characters of letters, digits, '.', "
                           "'_' and '-'",
                           v);
    snprintf(c->run_id, sizeof c->run_id, "%s", v);
    return DDPC_OK;
}

/* torchrun's --nnodes MIN:MAX: a fixed N:N is N; a range would need elastic membership. */
static ddpc_status nnodes_range(ddpc_launch_config *c, const char *v, const char *colon)
{
    char *end = NULL;
    long lo = strtol(v, &end, 10), hi = end == colon ? strtol(colon + 1, &end, 10) : -1;
    if (end == colon || *end != '\0' || lo < 1 || hi < 1 || lo > 65536 || hi > 65536)
        return ddpc_errorf(DDPC_EINVAL, "--nnodes: '%s' is not N or MIN:MAX with 1 <= N <= 65536",
                           v);
    if (lo != hi)
        return ddpc_errorf(DDPC_EINVAL,
                           "--nnodes %s: ddpc does not add or drop nodes while a job runs "
                           "(torchrun's elastic MIN:MAX); give the fixed number, --nnodes %ld",
                           v, hi);
    c->nnodes = (int)lo;
    return DDPC_OK;
}

/* torchrun's options and ddpc's own name the same fields: given both ways, in either order, they
 * must agree. */
static ddpc_status agree(const ddpc_launch_config *c, const char *name, const char *v)
{
    char port[16];
    snprintf(port, sizeof port, "%d", c->master_port);
    bool id = strcmp(name, "--run-id") == 0 || strcmp(name, "--rdzv-id") == 0;
    if (id && c->run_id[0] && strcmp(c->run_id, v) != 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "%s %s and the id given before it, %s (--run-id, "
                           "--rdzv-id), name different jobs; give one",
                           name, v, c->run_id);
    if (!c->rdzv_endpoint_set)
        return DDPC_OK;
    if ((strcmp(name, "--master-addr") == 0 && strcmp(v, c->master_addr) != 0) ||
        (strcmp(name, "--master-port") == 0 && strcmp(v, port) != 0))
        return ddpc_errorf(DDPC_EINVAL,
                           "%s %s and the --rdzv-endpoint %s:%d given before it "
                           "name different rendezvous; give one of them",
                           name, v, c->master_addr, c->master_port);
    return DDPC_OK;
}

ddpc_status ddpc__torchrun_option(ddpc_launch_config *c, const char *name, const char *v,
                                  bool *handled)
{
    *handled = true;
    DDPC_TRY(agree(c, name, v));
    if (strcmp(name, "--rdzv-endpoint") == 0)
        return endpoint(c, v);
    if (strcmp(name, "--rdzv-backend") == 0)
        return backend(v);
    if (strcmp(name, "--rdzv-id") == 0)
        return rdzv_id(c, v);
    const char *colon = strchr(v, ':');
    if (strcmp(name, "--nnodes") == 0 && colon)
        return nnodes_range(c, v, colon);
    *handled = false;
    return DDPC_OK;
}

ddpc_status ddpc__torchrun_check(const ddpc_launch_config *c)
{
    if (c->standalone) {
        const char *other = c->nnodes > 1            ? "--nnodes above 1"
                            : c->rdzv_endpoint_set   ? "--rdzv-endpoint"
                            : c->master_addr_set     ? "--master-addr"
                            : c->master_port != 0    ? "--master-port"
                            : c->hostfile[0] != '\0' ? "--hostfile"
                                                     : NULL;
        if (other)
            return ddpc_errorf(DDPC_EINVAL,
                               "--standalone is a job on this host alone, meeting on a free local "
                               "port, so it cannot take %s; across hosts drop --standalone and "
                               "give --nnodes N --node-rank R --rdzv-endpoint HOST:PORT",
                               other);
    }
    /* torchrun's "HOST:0" picks a free port, which only works where nobody else must find it */
    if (c->rdzv_endpoint_set && c->master_port == 0 && c->nnodes > 1)
        return ddpc_errorf(DDPC_EINVAL,
                           "--rdzv-endpoint %s:0 picks a free port, which the other %d nodes "
                           "cannot know: give a fixed port, the same on every host",
                           c->master_addr, c->nnodes - 1);
    return DDPC_OK;
}
