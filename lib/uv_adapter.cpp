#include "uv_adapter.hpp"

#include <hiredis/async.h>
#include <uv.h>

namespace redlock::detail {
namespace {

// Writes are not driven by POLLOUT. libuv 1.44's uv_poll_start() begins with an EPOLL_CTL_DEL
// and re-adds the fd on the next poll, so switching write interest on and off for every command
// cost four epoll_ctl calls per command per node, and each command waited one loop iteration
// for a writability event the socket almost always already had. Instead, when hiredis asks to
// write on a connected socket, a prepare handle flushes its buffer just before the loop next
// polls: every command queued on this connection during the iteration goes out in one write(),
// and the poll handle keeps watching for reads only. POLLOUT is used only while a connect is in
// progress (hiredis detects its completion on writability) and when the socket buffer is full.
struct Events {
  redisAsyncContext* context;
  uv_poll_t poll;
  uv_prepare_t flush;
  int events;   // what the poll handle should watch
  int active;   // what the poll handle is started with
  bool flushing = false;
  int open_handles = 2;
};

void on_poll(uv_poll_t* handle, int status, int events) {
  auto* p = static_cast<Events*>(handle->data);
  // On an error status libuv has stopped the handle; let hiredis try the operations it waits
  // for, so it sees the socket error and fails the connection (and its callbacks) at once.
  if (status != 0) p->active = 0;  // libuv stopped the handle
  const int ready = status != 0 ? p->events : events;
  if (p->context != nullptr && (ready & UV_READABLE)) redisAsyncHandleRead(p->context);
  if (p->context != nullptr && (ready & UV_WRITABLE)) redisAsyncHandleWrite(p->context);
}

// hiredis asks for read interest after every read; each uv_poll_start costs epoll_ctl calls even
// when nothing changes, so only real changes go through.
void update(Events* p) {
  if (p->events == p->active) return;
  if (p->events != 0) {
    uv_poll_start(&p->poll, p->events, &on_poll);
  } else {
    uv_poll_stop(&p->poll);
  }
  p->active = p->events;
}

void on_flush(uv_prepare_t* handle) {
  auto* p = static_cast<Events*>(handle->data);
  uv_prepare_stop(handle);
  if (p->context == nullptr) return;
  // A write that does not complete (socket buffer full) asks for write interest again from
  // inside this call: that one must wait for POLLOUT, or the loop would spin on EAGAIN.
  p->flushing = true;
  redisAsyncHandleWrite(p->context);  // may free the context (write error): cleanup() runs
  p->flushing = false;
}

void add_read(void* data) {
  auto* p = static_cast<Events*>(data);
  p->events |= UV_READABLE;
  update(p);
}

void del_read(void* data) {
  auto* p = static_cast<Events*>(data);
  p->events &= ~UV_READABLE;
  update(p);
}

void add_write(void* data) {
  auto* p = static_cast<Events*>(data);
  if (!p->flushing && p->context != nullptr && (p->context->c.flags & REDIS_CONNECTED) != 0) {
    uv_prepare_start(&p->flush, &on_flush);  // no-op when already due this iteration
    return;
  }
  p->events |= UV_WRITABLE;
  update(p);
}

void del_write(void* data) {
  auto* p = static_cast<Events*>(data);
  p->events &= ~UV_WRITABLE;
  update(p);
}

void on_closed(uv_handle_t* h) {
  auto* p = static_cast<Events*>(h->data);
  if (--p->open_handles == 0) delete p;
}

void cleanup(void* data) {
  auto* p = static_cast<Events*>(data);
  p->context = nullptr;  // the context is being freed; the handles may outlive it until closed
  uv_close(reinterpret_cast<uv_handle_t*>(&p->poll), &on_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&p->flush), &on_closed);
}

}  // namespace

bool attach_to_loop(redisAsyncContext* ac, uv_loop_s* loop) {
  if (ac->ev.data != nullptr) return false;
  auto* p = new Events{ac, {}, {}, 0, 0};
  if (uv_poll_init(loop, &p->poll, ac->c.fd) != 0) {
    delete p;
    return false;
  }
  uv_prepare_init(loop, &p->flush);  // cannot fail
  p->poll.data = p;
  p->flush.data = p;
  ac->ev.addRead = &add_read;
  ac->ev.delRead = &del_read;
  ac->ev.addWrite = &add_write;
  ac->ev.delWrite = &del_write;
  ac->ev.cleanup = &cleanup;
  ac->ev.data = p;
  return true;
}

}  // namespace redlock::detail
