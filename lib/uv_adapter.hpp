#pragma once
// Attaches a hiredis async context to a libuv loop.
//
// This replaces <hiredis/adapters/libuv.h> of hiredis 0.14, whose poll callback returns early
// when libuv reports an error status. libuv reports POLLERR that way (UV_EBADF) and stops the
// handle, which is exactly what a refused or reset connection produces: with the packaged adapter
// a connect to a dead node is never completed nor failed and only a timer can end it. Here an
// error status hands the registered events to hiredis, which then reads the socket error itself
// (the fix hiredis made in 1.0).
//
// Writes on a connected socket are flushed once per loop iteration (a prepare handle) instead of
// waiting for POLLOUT: see lib/uv_adapter.cpp.

struct redisAsyncContext;
struct uv_loop_s;

namespace redlock::detail {

// Returns false (and attaches nothing) if the poll handle cannot be created.
[[nodiscard]] bool attach_to_loop(redisAsyncContext* ac, uv_loop_s* loop);

}  // namespace redlock::detail
