"""The installed package, as a user gets it.

`meson install --destdir TMP --no-rebuild` of the current build directory (no second configure),
then checks what landed in TMP: the library's soname and symlinks, that only the public API is
exported (no hiredis, libuv or redlock::detail / private implementation symbols; every C API
function present), self-contained headers, a relocatable redlock.pc, the CLI, its man page and
completion, the documents and licence. Then separate consumer projects find the package, build,
and take a real lock on a redis-server: through pkg-config one with meson (C++ API) and one with
CMake (C API), and through the CMake package config (find_package(redlock CONFIG), target
redlock::redlock) one with CMake (C++ API, no C++ standard of its own). Finally the installed
tree is moved elsewhere and redlock-cli still runs (RUNPATH $ORIGIN/../<libdir>).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
from redisfix import Server, get  # noqa: E402

BUILD = os.environ.get("REDLOCK_BUILD_ROOT", os.path.join(HERE, "..", "..", "build"))
SOURCE = os.environ.get("REDLOCK_SOURCE_ROOT", os.path.join(HERE, "..", ".."))


def meson_cmd():
    exe = shutil.which("meson")
    return [exe] if exe else [sys.executable, "-m", "mesonbuild.mesonmain"]


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 240)
    return subprocess.run(cmd, **kw)


def introspect(what):
    r = run(meson_cmd() + ["introspect", BUILD, what])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def exported_symbols(path):
    """Defined dynamic symbols: (raw name, demangled name) pairs."""
    raw = run(["nm", "-D", "--defined-only", path])
    dem = run(["nm", "-D", "--defined-only", "-C", path])
    assert raw.returncode == 0 and dem.returncode == 0, raw.stderr + dem.stderr
    names = lambda out: [ln.split(" ", 2)[2] for ln in out.splitlines() if ln.count(" ") >= 2]  # noqa: E731
    return list(zip(names(raw.stdout), names(dem.stdout)))


# What must never be exported: the bundled-in dependencies and everything private to lib/.
FORBIDDEN = [
    re.compile(r"^(redis|__redis|sds|uv_|uv__)"),  # hiredis, libuv (C names)
    re.compile(r"redlock::(detail|net|capi)::"),
    re.compile(r"^(?:(?:vtable|typeinfo|typeinfo name|VTT|construction vtable) for )?"
               r"redlock::(Engine::Impl|Client::Impl|Guard::State|Operation|AcquireOp|HoldOp|LockBuilder)\b"),
    re.compile(r"\(anonymous namespace\)"),
]


class Installed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="redlock-pkg-")
        cls.root = os.path.join(cls.tmp, "root")
        r = run(meson_cmd() + ["install", "-C", BUILD, "--destdir", cls.root, "--no-rebuild", "--quiet"])
        if r.returncode != 0:
            raise RuntimeError("meson install failed:\n" + r.stdout + r.stderr)
        opts = {o["name"]: o["value"] for o in introspect("--buildoptions")}
        cls.version = introspect("--projectinfo")["version"]
        cls.prefix = opts["prefix"]
        p = lambda key: os.path.join(cls.root + cls.prefix, opts[key])  # noqa: E731
        cls.libdir, cls.includedir, cls.bindir = p("libdir"), p("includedir"), p("bindir")
        cls.mandir, cls.datadir = p("mandir"), p("datadir")
        cls.lib = os.path.join(cls.libdir, "libredlock.so.%s" % cls.version)
        # The .pc file names the configured prefix; a DESTDIR install lives elsewhere, so
        # consumers get a copy whose prefix points into the DESTDIR (the only line that differs).
        cls.pcdir = os.path.join(cls.tmp, "pkgconfig")
        os.makedirs(cls.pcdir)
        with open(os.path.join(cls.libdir, "pkgconfig", "redlock.pc")) as f:
            cls.pc = f.read()
        relocated = re.sub(r"(?m)^prefix=.*$", "prefix=" + cls.root + cls.prefix, cls.pc)
        with open(os.path.join(cls.pcdir, "redlock.pc"), "w") as f:
            f.write(relocated)
        cls.env = dict(os.environ)
        cls.env["PKG_CONFIG_PATH"] = cls.pcdir
        cls.env.pop("PKG_CONFIG_SYSROOT_DIR", None)
        cls.env.pop("PKG_CONFIG_LIBDIR", None)
        cls.env["LD_LIBRARY_PATH"] = cls.libdir

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ---- files ---------------------------------------------------------------------------

    def test_library_soname_and_symlinks(self):
        major = self.version.split(".")[0]
        self.assertTrue(os.path.isfile(self.lib))
        self.assertEqual(os.readlink(os.path.join(self.libdir, "libredlock.so")), "libredlock.so." + major)
        self.assertEqual(os.readlink(os.path.join(self.libdir, "libredlock.so." + major)),
                         "libredlock.so." + self.version)
        r = run(["readelf", "-d", self.lib])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\(SONAME\)\s+Library soname: \[libredlock\.so\.%s\]" % major)
        self.assertNotIn(os.path.abspath(BUILD), r.stdout)  # no build-tree RUNPATH left behind

    def test_every_public_header_is_installed_and_self_contained(self):
        installed = os.path.join(self.includedir, "redlock")
        source = os.path.join(SOURCE, "include", "redlock")
        headers = sorted(f for f in os.listdir(source) if f.endswith((".h", ".hpp")))
        self.assertIn("redlock.h", headers)
        self.assertIn("export.hpp", headers)
        for h in headers:
            path = os.path.join(installed, h)
            self.assertTrue(os.path.isfile(path), "not installed: " + h)
            with open(path) as f:
                for inc in re.findall(r'#include\s+"redlock/([^"]+)"', f.read()):
                    self.assertTrue(os.path.isfile(os.path.join(installed, inc)),
                                    "%s includes redlock/%s, which is not installed" % (h, inc))

    def test_pkg_config_file_is_relocatable(self):
        self.assertRegex(self.pc, r"(?m)^Version: %s$" % re.escape(self.version))
        self.assertRegex(self.pc, r"(?m)^Libs: .*-lredlock")
        others = [ln for ln in self.pc.splitlines() if not ln.startswith("prefix=")]
        self.assertFalse([ln for ln in others if self.prefix in ln],
                         "paths must derive from ${prefix}: %r" % others)

    def test_cli_man_page_and_completion(self):
        cli = os.path.join(self.bindir, "redlock-cli")
        r = run([cli, "--version"], env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(self.version, r.stdout + r.stderr)
        ldd = run(["ldd", cli], env=self.env)
        self.assertRegex(ldd.stdout, r"libredlock\.so\.\d+ => %s/" % re.escape(self.libdir))
        self.assertTrue(os.path.isfile(os.path.join(self.mandir, "man1", "redlock-cli.1")))
        comp = os.path.join(self.datadir, "bash-completion", "completions", "redlock-cli")
        self.assertTrue(os.path.isfile(comp))
        with open(comp) as f:
            self.assertIn("complete -F _redlock_cli redlock-cli", f.read())

    def test_pkg_config_brings_no_dependency_flags(self):
        # No public header includes hiredis, libuv or OpenSSL (test_layers.py), so a consumer
        # gets none of their flags: hiredis's -I/usr/include/hiredis -D_FILE_OFFSET_BITS=64 used to
        # come with every --cflags (issue 41). Only a static link needs the libraries.
        self.assertNotRegex(self.pc, r"(?m)^Requires:")
        self.assertNotRegex(self.pc, r"(?m)^Requires\.private:.*hiredis")
        r = run(["pkg-config", "--cflags", "redlock"], env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("hiredis", r.stdout)
        self.assertNotIn("-D", r.stdout)
        self.assertEqual([f for f in r.stdout.split() if not f.startswith("-I")], [], r.stdout)
        r = run(["pkg-config", "--libs", "redlock"], env=self.env)
        self.assertEqual(r.stdout.split()[-1:], ["-lredlock"], r.stdout)
        self.assertNotIn("-lhiredis", r.stdout)
        r = run(["pkg-config", "--static", "--libs", "redlock"], env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        for lib in ("-lredlock", "-lhiredis", "-luv", "-lssl", "-lcrypto"):
            self.assertIn(lib, r.stdout.split())

    def test_pkg_config_says_the_cxx_standard(self):
        # Cflags carries no -std (it would break C consumers, and lower a newer standard a C++
        # consumer chose); the requirement is a variable and in the description.
        r = run(["pkg-config", "--variable=cxx_std", "redlock"], env=self.env)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "c++20"), r.stderr)
        r = run(["pkg-config", "--cflags", "redlock"], env=self.env)
        self.assertNotIn("-std=", r.stdout)
        self.assertRegex(self.pc, r"(?m)^Description: .*C\+\+20")

    def test_cli_runs_from_any_prefix(self):
        # No LD_LIBRARY_PATH, no ldconfig: the CLI finds the library installed beside it, also
        # after the whole tree was moved (an unpacked tarball, a relocated prefix).
        cli = os.path.join(self.bindir, "redlock-cli")
        r = run(["readelf", "-d", cli])
        self.assertRegex(r.stdout, r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[\$ORIGIN/")
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        moved = os.path.join(self.tmp, "moved")
        shutil.copytree(self.root + self.prefix, moved, symlinks=True)
        moved_cli = os.path.join(moved, os.path.relpath(cli, self.root + self.prefix))
        moved_libdir = os.path.join(moved, os.path.relpath(self.libdir, self.root + self.prefix))
        for exe, libdir in ((cli, self.libdir), (moved_cli, moved_libdir)):
            r = run([exe, "--version"], env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(self.version, r.stdout + r.stderr)
            ldd = run(["ldd", exe], env=env)
            found = re.search(r"libredlock\.so\.\d+ => (\S+)", ldd.stdout)
            self.assertIsNotNone(found, ldd.stdout)
            self.assertEqual(os.path.realpath(os.path.dirname(found.group(1))), os.path.realpath(libdir))

    def test_documents_and_licence(self):
        doc = os.path.join(self.datadir, "doc", "redlock")
        for name in ("README.md", "guide.md", "LICENSE", "CHANGELOG.md"):
            self.assertTrue(os.path.isfile(os.path.join(doc, name)), name + " not installed")
        with open(os.path.join(SOURCE, "meson.build")) as f:
            licence = re.search(r"license\s*:\s*'([^']+)'", f.read()).group(1)
        with open(os.path.join(doc, "LICENSE")) as f:
            text = f.read()
        self.assertEqual(licence, "MIT")
        self.assertTrue(text.startswith("MIT License"), text[:40])
        self.assertIn("Copyright (c) the redlock authors", text)
        with open(os.path.join(doc, "CHANGELOG.md")) as f:
            changelog = f.read()
        self.assertIn("## [%s]" % self.version, changelog)

    # ---- symbols -------------------------------------------------------------------------

    def test_only_the_public_api_is_exported(self):
        syms = exported_symbols(self.lib)
        leaked = [d for _, d in syms if any(p.search(d) for p in FORBIDDEN)]
        self.assertEqual(leaked, [], "private symbols exported")
        raw = {r for r, _ in syms}
        demangled = [d for _, d in syms]
        # Every function of the C header.
        with open(os.path.join(self.includedir, "redlock", "redlock.h")) as f:
            c_api = set(re.findall(r"REDLOCK_C_API\b[^;(]*?\b(redlock_\w+)\s*\(", f.read()))
        self.assertGreater(len(c_api), 40)
        self.assertEqual(sorted(c_api - raw), [], "C API functions not exported")
        # The C++ API, including the exception's typeinfo (catching redlock::Error outside the
        # library needs it; the meson consumer below catches one).
        for needed in ["redlock::Client::Client(", "redlock::Guard::release(", "redlock::version()",
                       "redlock::parse_node_list(", "typeinfo for redlock::Error"]:
            self.assertTrue(any(d.startswith(needed) for d in demangled), needed + " not exported")
        # Nothing of the C API's own internals (lib/capi/: redlock::capi, hidden, or extern "C"):
        # all exported C names are declared in the header.
        c_names = {r for r in raw if r.startswith("redlock_")}
        self.assertEqual(sorted(c_names - c_api), [])

    # ---- consumers -----------------------------------------------------------------------

    def consume(self, exe):
        """Runs a consumer: node-list parsing, then a real acquisition on a fresh redis-server."""
        r = run([exe, "127.0.0.1:7001,redis://[::1]:7002"], env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("version=%s\n" % self.version, r.stdout)
        bad = run([exe, "127.0.0.1:7001,not an address"], env=self.env)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("parse-error=", bad.stdout)
        self.assertIn("not an address", bad.stdout)
        server = Server()
        try:
            resource = "pkg-consumer-" + os.path.basename(os.path.dirname(exe))
            r = run([exe, server.address, resource], env=self.env, timeout=30)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            token = re.search(r"(?m)^token=([0-9a-f]{40})$", r.stdout)
            self.assertIsNotNone(token, r.stdout)
            self.assertEqual(get(server.port, resource), token.group(1))  # the lock is on the server
            return r.stdout
        finally:
            server.close()

    def test_meson_consumer(self):
        src = os.path.join(HERE, "consumer-meson")
        bld = os.path.join(self.tmp, "consumer-meson")
        r = run(meson_cmd() + ["setup", bld, src], env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"Run-time dependency redlock found: YES %s" % re.escape(self.version))
        r = run(["ninja", "-C", bld], env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = self.consume(os.path.join(bld, "consumer"))
        self.assertIn("nodes=2\n", run([os.path.join(bld, "consumer"), "a:1,b:2"], env=self.env).stdout)
        # redlock::Error thrown inside libredlock.so, caught by type in the consumer.
        self.assertRegex(out, r"second-acquire=contended nodes=1")

    def test_cmake_consumer(self):
        if not shutil.which("cmake"):
            self.skipTest("cmake not installed")
        src = os.path.join(HERE, "consumer-cmake")
        bld = os.path.join(self.tmp, "consumer-cmake")
        r = run(["cmake", "-S", src, "-B", bld], env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("Found redlock, version %s" % self.version, r.stdout)
        r = run(["cmake", "--build", bld], env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = self.consume(os.path.join(bld, "consumer"))
        self.assertIn("nodes=1\n", out)


    def test_cmake_package_config_consumer(self):
        # find_package(redlock CONFIG) with no pkg-config at all: the imported target brings the
        # include directory, the library and C++20 (the consumer sets no standard; g++ 12 would
        # default to C++17, which the headers do not compile as).
        if not shutil.which("cmake"):
            self.skipTest("cmake not installed")
        src = os.path.join(HERE, "consumer-cmake-config")
        bld = os.path.join(self.tmp, "consumer-cmake-config")
        prefix = self.root + self.prefix
        env = {k: v for k, v in self.env.items() if k != "PKG_CONFIG_PATH"}
        major, minor = self.version.split(".")[:2]
        r = run(["cmake", "-S", src, "-B", bld, "-DCMAKE_PREFIX_PATH=" + prefix,
                 "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", "-DREDLOCK_WANT=%s.%s" % (major, minor)], env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("Found redlock %s in %s/" % (self.version, prefix), r.stdout)
        r = run(["cmake", "--build", bld], env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(bld, "compile_commands.json")) as f:
            self.assertRegex(f.read(), r"-std=(?:gnu|c)\+\+20")
        out = self.consume(os.path.join(bld, "consumer"))
        self.assertRegex(out, r"second-acquire=contended nodes=1")
        # The version file: pre-1.0 a request for the next minor version is not met.
        r = run(["cmake", "-S", src, "-B", bld + "-next", "-DCMAKE_PREFIX_PATH=" + prefix,
                 "-DREDLOCK_WANT=%s.%d" % (major, int(minor) + 1)], env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("compatible with requested version", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
