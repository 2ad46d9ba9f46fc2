#!/usr/bin/env python3
"""The house's rules, checked on the source tree (README, "Layout").

lib/ has layers, and arrows only run downwards:
    public API (lib/*.cpp, capi/)  ->  engine/  ->  net/  ->  core/
- core/ is pure: no hiredis, no libuv, no OpenSSL, nothing from net/ or engine/;
- net/ never reaches up into engine/ or the public API's private headers; it is the only place
  that includes hiredis;
- no public header names a hiredis, libuv or OpenSSL type (engine.hpp declares uv_loop_s only);
- each public header's code lives in the lib/ file of its name;
- no file under lib/ is longer than 650 lines;
- and in the compiled archive (REDLOCK_OBJECTS_ARCHIVE, set by meson): no object of a lower layer
  calls a function defined in a higher layer's object (an include can hide such an arrow: a
  public header declares BootClock, whose code used to live in the API's lock.cpp).
"""
import subprocess
import os
import re
import sys
import unittest

ROOT = os.environ.get("REDLOCK_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
LIB = os.path.join(ROOT, "lib")
INCLUDE = os.path.join(ROOT, "include", "redlock")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def files_under(folder, exts=(".cpp", ".hpp", ".h")):
    for dirpath, _, names in os.walk(folder):
        for n in sorted(names):
            if n.endswith(exts):
                yield os.path.join(dirpath, n)


def includes(path):
    with open(path, encoding="utf-8") as f:
        return INCLUDE_RE.findall(f.read())


def layer(path):
    rel = os.path.relpath(path, LIB)
    return rel.split(os.sep)[0] if os.sep in rel else "api"


class Layers(unittest.TestCase):
    def test_core_is_pure(self):
        for path in files_under(os.path.join(LIB, "core")):
            for inc in includes(path):
                with self.subTest(file=os.path.relpath(path, ROOT), include=inc):
                    self.assertFalse(inc.startswith(("hiredis/", "uv", "openssl/")), "I/O library in core/")
                    self.assertFalse(inc.startswith(("net/", "engine/", "capi/")), "core/ reaches up")
                    self.assertNotIn(inc, ("client_impl.hpp", "guard_state.hpp"))

    def test_net_does_not_reach_up(self):
        for path in files_under(os.path.join(LIB, "net")):
            for inc in includes(path):
                with self.subTest(file=os.path.relpath(path, ROOT), include=inc):
                    self.assertFalse(inc.startswith(("engine/", "capi/")), "net/ reaches up")
                    self.assertNotIn(inc, ("client_impl.hpp", "guard_state.hpp"))

    def test_engine_does_not_reach_up(self):
        for path in files_under(os.path.join(LIB, "engine")):
            for inc in includes(path):
                with self.subTest(file=os.path.relpath(path, ROOT), include=inc):
                    self.assertFalse(inc.startswith("capi/"))
                    self.assertNotIn(inc, ("client_impl.hpp", "guard_state.hpp"))

    def test_only_net_includes_hiredis(self):
        users = [os.path.relpath(p, LIB) for p in files_under(LIB)
                 if any(i.startswith("hiredis/") for i in includes(p))]
        self.assertTrue(users, "nobody includes hiredis: this test is out of date")
        for u in users:
            self.assertTrue(u.startswith("net" + os.sep), u + " includes hiredis outside net/")

    def test_public_headers_name_no_dependency_type(self):
        for path in files_under(INCLUDE):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            name = os.path.basename(path)
            with self.subTest(header=name):
                for inc in INCLUDE_RE.findall(text):
                    self.assertFalse(inc.startswith(("hiredis/", "uv", "openssl/")), inc)
                code = re.sub(r"/\*.*?\*/", "", re.sub(r"//.*", "", text), flags=re.S)
                code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', code)
                found = set(re.findall(r"\b(redis\w*|uv_\w+|SSL\w*|X509\w*)\b", code))
                if name == "engine.hpp":
                    found.discard("uv_loop_s")
                self.assertEqual(found, set(), "dependency types in a public header")

    def test_each_public_header_has_its_source(self):
        # export.hpp holds macros only.
        for path in files_under(INCLUDE, (".hpp", ".h")):
            stem = os.path.splitext(os.path.basename(path))[0]
            if stem == "export":
                continue
            candidates = [os.path.join(LIB, d, stem + ".cpp") for d in ("", "core", "engine", "capi")]
            with self.subTest(header=os.path.basename(path)):
                self.assertTrue(any(os.path.exists(c) for c in candidates),
                                "no lib/**/%s.cpp for %s" % (stem, os.path.basename(path)))

    def test_no_call_reaches_up(self):
        archive = os.environ.get("REDLOCK_OBJECTS_ARCHIVE")
        if not archive or not os.path.exists(archive):
            self.skipTest("REDLOCK_OBJECTS_ARCHIVE not set (meson sets it)")
        text = subprocess.run(["nm", "-C", archive], check=True, capture_output=True,
                              text=True).stdout
        defined, used, obj = {}, {}, None
        for line in text.splitlines():
            if line.endswith(".o:"):
                obj = os.path.basename(line[:-1])
                continue
            parts = line.split(None, 2)
            if len(parts) == 2 and parts[0] in ("U", "w"):
                used.setdefault(obj, set()).add(parts[1])
            elif len(parts) == 3 and parts[1] in ("T", "D", "R", "B"):
                defined.setdefault(parts[2], set()).add(obj)

        def rank(o):  # meson names a layer's objects after its folder: core_x.cpp.o, net_x.cpp.o
            for i, prefix in enumerate(("core_", "net_", "engine_")):
                if o.startswith(prefix):
                    return i
            return 3  # the public API's code (lib/*.cpp)

        self.assertTrue(any(o.startswith("core_") for o in used), "no core objects: out of date")
        for o, symbols in sorted(used.items()):
            for sym in sorted(symbols):
                for where in sorted(defined.get(sym, ())):
                    with self.subTest(object=o, symbol=sym[:100]):
                        self.assertLessEqual(rank(where), rank(o), "calls up into " + where)

    def test_acquire_op_keeps_to_its_phases(self):
        # AcquireOp had about 58 fields at dc777f0, the fair queue, the handoff bookkeeping and the
        # wake-up watch among them (issue 42). Those are rooms of their own now (FairPlace,
        # WakeWatch): no I/O in them, and AcquireOp stays under half its old size.
        with open(os.path.join(LIB, "engine", "acquire.hpp"), encoding="utf-8") as f:
            text = f.read()
        body = text[text.index("class AcquireOp"):]
        body = body[:body.index("\n};")]
        fields = re.findall(r"^  (?!//)[^()\n]*?\b(\w+_)(?:\{[^}]*\})?(?: = [^;]*)?;", body, re.M)
        self.assertIn("fair_", fields)
        self.assertIn("watch_", fields)
        self.assertLess(len(fields), 29, "AcquireOp's fields: " + ", ".join(fields))
        for room in ("fair_place", "wake_watch"):
            for ext in (".hpp", ".cpp"):
                path = os.path.join(LIB, "engine", room + ext)
                for inc in includes(path):
                    with self.subTest(file=room + ext, include=inc):
                        self.assertFalse(inc.startswith(("uv", "hiredis/", "openssl/")))
                        self.assertNotIn(inc, ("engine/impl.hpp", "engine/operation.hpp",
                                               "net/connection.hpp", "net/node.hpp"))

    def test_no_file_over_650_lines(self):
        for path in files_under(LIB):
            with open(path, encoding="utf-8") as f:
                n = sum(1 for _ in f)
            with self.subTest(file=os.path.relpath(path, ROOT)):
                self.assertLessEqual(n, 650)


if __name__ == "__main__":
    sys.exit(unittest.main(verbosity=1))
