// SPDX-License-Identifier: MIT
// The C shim over gloo's TCP transport (see gloo_link.h): a full mesh joined through ddpc's
// key-value store (a gloo::rendezvous::Store implemented on ddpc_store, so no FileStore or Redis),
// staging buffers registered once as gloo unbound buffers, and sends/receives whose waits end at
// a deadline. Invariant: every entry point catches every exception and returns a ddpc status with
// one sentence; nothing C++ crosses into C.
#include "comm/gloo_link.h"

#include <ddpc/alloc.h>
#include <ddpc/timer.h>

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <sys/socket.h>
#include <vector>

namespace
{

// A ddpc status travelling through gloo's code as an exception (the store is called from inside
// connectFullMesh, which cannot return a status).
struct StoreFailure : std::exception {
    ddpc_status status;
    std::string msg;
    StoreFailure(ddpc_status s, const char *m) : status(s), msg(m) {}
    const char *what() const noexcept override { return msg.c_str(); }
};

class DdpcStore : public gloo::rendezvous::Store
{
  public:
    DdpcStore(ddpc_store *s, const char *prefix, double deadline)
        : store_(s), prefix_(prefix), deadline_(deadline)
    {
    }

    void set(const std::string &key, const std::vector<char> &data) override
    {
        std::string k = prefix_ + key;
        ddpc_status st = ddpc_store_set(store_, k.c_str(), data.data(), data.size());
        if (st != DDPC_OK)
            throw StoreFailure(st, ddpc_last_error());
    }

    std::vector<char> get(const std::string &key) override
    {
        std::string k = prefix_ + key;
        std::vector<char> v(256);
        for (;;) {
            size_t len = 0;
            ddpc_status st = ddpc_store_get(store_, k.c_str(), v.data(), v.size(), &len, deadline_);
            if (st != DDPC_OK)
                throw StoreFailure(st, ddpc_last_error());
            if (len <= v.size()) {
                v.resize(len);
                return v;
            }
            v.resize(len); // a value longer than the first guess: read it again whole
        }
    }

    void wait(const std::vector<std::string> &keys) override
    {
        for (const std::string &key : keys)
            get(key);
    }

    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &) override
    {
        wait(keys); // the link's deadline bounds every wait
    }

  private:
    ddpc_store *store_;
    std::string prefix_;
    double deadline_;
};

std::chrono::milliseconds ms_until(double deadline)
{
    double ms = (deadline - ddpc_time_now()) * 1e3;
    return std::chrono::milliseconds(ms < 1 ? 1 : (long long)ms + 1);
}

// The status and message for the exception being handled (call inside a catch block only).
ddpc_status from_exception(const char *what_failed, double deadline)
{
    try {
        throw;
    } catch (const StoreFailure &e) {
        return ddpc_errorf(e.status, "%s", e.msg.c_str());
    } catch (const std::exception &e) {
        bool late = ddpc_time_now() >= deadline;
        return ddpc_errorf(late ? DDPC_ETIMEOUT : DDPC_EPEER, "%s: %s", what_failed, e.what());
    } catch (...) {
        return ddpc_errorf(DDPC_EINTERNAL, "%s: unknown C++ exception", what_failed);
    }
}

} // namespace

struct ddpc__gloo_link {
    std::shared_ptr<gloo::transport::Device> device;
    std::shared_ptr<gloo::rendezvous::Context> context;
    std::vector<void *> mem;                                           // (nbuf) staging buffers
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> ubuf; // (nbuf) their handles
    size_t buf_bytes = 0;
};

extern "C" ddpc_status ddpc__gloo_link_create(ddpc_store *store, const char *prefix, int rank,
                                              int size, const char *bind_addr, size_t buf_bytes,
                                              int nbuf, double deadline, ddpc__gloo_link **out)
{
    *out = nullptr;
    ddpc__gloo_link *l = nullptr;
    try {
        l = new ddpc__gloo_link();
        l->buf_bytes = buf_bytes;
        gloo::transport::tcp::attr attr;
        attr.hostname = bind_addr;
        attr.ai_family = AF_INET;
        l->device = gloo::transport::tcp::CreateDevice(attr);
        l->context = std::make_shared<gloo::rendezvous::Context>(rank, size);
        l->context->setTimeout(ms_until(deadline));
        DdpcStore st(store, prefix, deadline);
        l->context->connectFullMesh(st, l->device);
        for (int i = 0; i < nbuf; i++) {
            void *p = ddpc_malloc(buf_bytes);
            if (!p) {
                ddpc__gloo_link_destroy(l);
                return ddpc_errorf(DDPC_ENOMEM, "out of memory for the gloo link's buffers");
            }
            l->mem.push_back(p);
            l->ubuf.push_back(l->context->createUnboundBuffer(p, buf_bytes));
        }
    } catch (...) {
        ddpc_status s = from_exception("gloo could not connect the hosts", deadline);
        ddpc__gloo_link_destroy(l);
        return s;
    }
    *out = l;
    return DDPC_OK;
}

extern "C" void ddpc__gloo_link_destroy(ddpc__gloo_link *l)
{
    if (!l)
        return;
    try {
        l->ubuf.clear();
        if (l->context)
            l->context->closeConnections();
        l->context.reset();
        l->device.reset();
    } catch (...) {
        // Tearing down after a failure: nothing more to report, the group already failed.
    }
    for (void *p : l->mem)
        ddpc_free(p);
    delete l;
}

extern "C" void *ddpc__gloo_link_buf(ddpc__gloo_link *l, int i)
{
    return l->mem[(size_t)i];
}

extern "C" ddpc_status ddpc__gloo_link_send(ddpc__gloo_link *l, int i, int peer, uint64_t slot,
                                            size_t bytes)
{
    try {
        l->ubuf[(size_t)i]->send(peer, slot, 0, bytes);
    } catch (...) {
        return from_exception("gloo send failed", 1e300);
    }
    return DDPC_OK;
}

extern "C" ddpc_status ddpc__gloo_link_recv(ddpc__gloo_link *l, int i, int peer, uint64_t slot)
{
    try {
        l->ubuf[(size_t)i]->recv(peer, slot, 0, l->buf_bytes);
    } catch (...) {
        return from_exception("gloo receive failed", 1e300);
    }
    return DDPC_OK;
}

extern "C" ddpc_status ddpc__gloo_link_wait_send(ddpc__gloo_link *l, int i, double deadline)
{
    try {
        if (!l->ubuf[(size_t)i]->waitSend(ms_until(deadline)))
            return ddpc_errorf(DDPC_EINTERNAL, "gloo send was aborted");
    } catch (...) {
        return from_exception("gloo send did not complete", deadline);
    }
    return DDPC_OK;
}

extern "C" ddpc_status ddpc__gloo_link_wait_recv(ddpc__gloo_link *l, int i, double deadline)
{
    try {
        if (!l->ubuf[(size_t)i]->waitRecv(ms_until(deadline)))
            return ddpc_errorf(DDPC_EINTERNAL, "gloo receive was aborted");
    } catch (...) {
        return from_exception("gloo receive did not complete", deadline);
    }
    return DDPC_OK;
}
