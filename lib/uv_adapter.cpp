#include "uv_adapter.hpp"

#include <hiredis/async.h>
#include <uv.h>

namespace redlock::detail {
namespace {

struct Events {
  redisAsyncContext* context;
  uv_poll_t handle;
  int events;  // what hiredis wants
  int active;  // what the poll handle is started with
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

// hiredis asks for read/write interest after every read and for every command; each
// uv_poll_start costs epoll_ctl calls even when nothing changes, so only real changes go through.
void update(Events* p) {
  if (p->events == p->active) return;
  if (p->events != 0) {
    uv_poll_start(&p->handle, p->events, &on_poll);
  } else {
    uv_poll_stop(&p->handle);
  }
  p->active = p->events;
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
  p->events |= UV_WRITABLE;
  update(p);
}

void del_write(void* data) {
  auto* p = static_cast<Events*>(data);
  p->events &= ~UV_WRITABLE;
  update(p);
}

void cleanup(void* data) {
  auto* p = static_cast<Events*>(data);
  p->context = nullptr;  // the context is being freed; the handle may outlive it until closed
  uv_close(reinterpret_cast<uv_handle_t*>(&p->handle),
           [](uv_handle_t* h) { delete static_cast<Events*>(h->data); });
}

}  // namespace

bool attach_to_loop(redisAsyncContext* ac, uv_loop_s* loop) {
  if (ac->ev.data != nullptr) return false;
  auto* p = new Events{ac, {}, 0, 0};
  if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) {
    delete p;
    return false;
  }
  p->handle.data = p;
  ac->ev.addRead = &add_read;
  ac->ev.delRead = &del_read;
  ac->ev.addWrite = &add_write;
  ac->ev.delWrite = &del_write;
  ac->ev.cleanup = &cleanup;
  ac->ev.data = p;
  return true;
}

}  // namespace redlock::detail
