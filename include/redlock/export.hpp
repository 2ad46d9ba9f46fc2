#pragma once
// REDLOCK_API marks what libredlock.so exports. The library is built with hidden visibility
// (-fvisibility=hidden), so everything without this mark (the engine internals in lib/,
// redlock::detail, and the hiredis/libuv code paths) stays private to the .so: consumers cannot
// link against it by accident and the dynamic symbol table stays small.
//
// Classes carry the mark as a whole (`class REDLOCK_API Client`), so their member functions,
// vtables and typeinfo are exported: redlock::Error thrown inside the library must be catchable
// in the application, which needs one shared typeinfo.
//
// The same default visibility is right on both sides (building the library and using it), so
// there is no import/export switch: that distinction only matters for Windows DLLs, which this
// library does not target.

//
// REDLOCK_HIDDEN marks the private implementation classes nested in exported classes
// (Client::Impl, Engine::Impl, Guard::State): nested classes inherit the visibility of the class
// around them, so without it their members, vtables and typeinfo would be exported too.

#if defined(__GNUC__) || defined(__clang__)
#define REDLOCK_API __attribute__((visibility("default")))
#define REDLOCK_HIDDEN __attribute__((visibility("hidden")))
#else
#define REDLOCK_API
#define REDLOCK_HIDDEN
#endif
