#!/usr/bin/env python3
"""The house's rules, checked on the source tree (README, "Layout").

lib/ has layers, and arrows only run downwards:
    public API (lib/*.cpp, capi/)  ->  engine/  ->  net/  ->  core/
- core/ is pure: no hiredis, no libuv, no OpenSSL, nothing from net/ or engine/;
- net/ never reaches up into engine/ or the public API's private headers; it is the only place
  that includes hiredis;
- no public header names a hiredis, libuv or OpenSSL type (engine.hpp declares uv_loop_s only);
- each public header's code lives in the lib/ file of its name;
- no file under lib/ is longer than 650 lines, no function in lib/ longer than 120 lines, none in
  tools/ longer than 150 (issue 42; measured by brace matching on the code without its comments,
  strings and preprocessor lines: see functions());
- one wire codec (issue 42): outside lib/net/ nothing includes hiredis, sets up an SSL_CTX or
  its verification, or encodes RESP commands; the tools' sync client (tools/nodes/client.cpp)
  links lib/net's codec (the redlock_wire archive) instead. The few test files with a reason to
  do otherwise are listed, each with its reason, and a listing that is no longer needed fails;
- one base for the nodes that discover their servers (issue 42): Sentinel and Cluster votes are
  DiscoveringNodes (lib/net/discovering_node.*), whose masters are DiscoveredMasters, and what
  they used to repeat (trusting a discovered server, making its standalone node, the discovery
  connections, the commands that wait, the lifecycle) is done there only;
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


# ---- one wire codec --------------------------------------------------------------------------

# Everything outside lib/net/ that a second codec could hide in.
CODEC_SCAN = ("lib", "tools", "tests", "examples", "include")
C_EXTS = (".cpp", ".hpp", ".h", ".c", ".cc")

# hiredis's headers, by the path Debian installs them under or (with its pkg-config's
# -I/usr/include/hiredis) by their own names.
HIREDIS_INCLUDE = re.compile(
    r'^\s*#\s*include\s*[<"](?:hiredis/|hiredis\.h|hiredis_ssl\.h|async\.h|adapters/)', re.M)

# A TLS client set-up: a context, and the verification of the server (on the context or on one
# session; the name or address checked).
TLS_SETUP = re.compile(r"\b(?:SSL_CTX_new|SSL_CTX_set_verify|SSL_set_verify|"
                       r"X509_VERIFY_PARAM_set1_host|X509_VERIFY_PARAM_set1_ip_asc)\b")

# A RESP command encoder. Every command goes out as an array, so what marks an encoder is the
# array header `*<count>\r\n` built from a count (bulk `$<len>` headers are not a marker: the
# fake servers of the tests write bulk replies, hostile ones included, byte by byte), or hiredis's
# own encoder. Each pattern is checked to find lib/net/'s encoder (or the old tools' client) in
# test_markers_find_the_originals, so a marker that no longer matches anything fails.
RESP_ENCODER = re.compile("|".join([
    r"\bredisv?Format(?:Sds)?Command(?:Argv)?\s*\(",            # hiredis's encoder
    r"\*%(?:z|l|ll|h)?[dui]\\r\\n",                             # "*%zu\r\n", b"*%d\r\n"
    r"\*\{[^}\n]*\}\\r\\n",                                     # "*{}\r\n", f"*{len(a)}\r\n"
    r"""["']\*["']\s*(?:\+|<<)\s*(?:std::)?(?:to_string|to_chars|str|len)\b""",  # "*" + n
    r"""(?:\+=|push_back\(|append\()\s*'\*'""",                  # out += '*', then the count
    r"""\(\s*\w+\s*,\s*'\*'\s*,""",                             # append_line(out, '*', n)
]))

# Files outside lib/net/ allowed one of the above, and why. A listing whose file no longer needs
# it fails (test_allow_lists_are_needed), so the lists only shrink.
HIREDIS_ALLOWED = {
    # The oracle: the same bytes the library's reader gets are parsed by hiredis's own reader,
    # and the library's verdict is compared with what hiredis says they mean.
    "tests/fuzz/fuzz_reply.cpp",
    # Checks the fixtures' servers and fake nodes with a client of another make (a plaintext
    # hiredis client on a TLS port, hiredis's pipelining against FakeNode, a unix socket), so a
    # fault shared by the fixture's own client and the library's codec cannot hide there.
    "tests/support/fixture_selftest.cpp",
}
TLS_SETUP_ALLOWED = set()
RESP_ENCODER_ALLOWED = {
    # Fake servers' replies (a lying sentinel's SENTINEL MASTER, FakeNode's SCRIPT EXISTS),
    # arrays written by hand as a hostile server would: replies, not commands.
    "tests/integration/test_sentinel_trust.cpp",
    "tests/support/fake_node.cpp",
    # The C API's test is a C program that links libredlock's C API only (the codec is C++ and
    # private to the library and the tools); it sets keys up over a raw socket of its own.
    "tests/capi/capi_test.c",
    # The Python tests' one client (query(), command()): Python cannot link the C++ codec.
    # tests/cli/test_cluster.py sends through it too.
    "tests/cli/redisfix.py",
}


def codec_files(exts):
    for top in CODEC_SCAN:
        for path in files_under(os.path.join(ROOT, top), exts):
            rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
            if not rel.startswith("lib/net/") and rel != "tests/packaging/test_layers.py":
                yield rel, path  # (this file names the patterns it looks for)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def codec_offenders(pattern, exts):
    """{relative path: first line that matches} for every file outside lib/net/ that matches."""
    found = {}
    for rel, path in codec_files(exts):
        for line in read(path).splitlines():
            if pattern.search(line):
                found[rel] = line.strip()
                break
    return found


# ---- function lengths -------------------------------------------------------------------------

FUNCTION_LIMITS = (("lib", 120), ("tools", 150))


def strip_code(text):
    """The code of a C or C++ file with its comments, string and character literals and
    preprocessor lines blanked, every newline kept (so line numbers stay)."""
    out, i, n = [], 0, len(text)
    line_start = True
    raw = re.compile(r'R"([^()\\ \t\n]{0,16})\(')
    while i < n:
        c = text[i]
        if line_start:
            line_start = False
            j = i
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] == "#":  # a preprocessor line and its continuations
                while j < n and text[j] != "\n":
                    if text.startswith("\\\n", j):
                        out.append("\n")
                        j += 1
                    j += 1
                i = j
                continue
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "R" and raw.match(text, i) and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = raw.match(text, i)
            end = text.find(")" + m.group(1) + '"', m.end())
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c in "\"'":
            if c == "'":  # a digit separator (10'000, 0xff'ff) is no character literal
                k = i
                while k > 0 and (text[k - 1].isalnum() or text[k - 1] in "_."):
                    k -= 1
                if k < i and text[k].isdigit():
                    i += 1
                    continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


# What may follow a function's parameter list before its body.
QUALIFIERS = re.compile(r"^\s*(?:(?:const|noexcept|override|final|mutable|volatile|&&|&)\s*)*"
                        r"(?:->\s*[\w:<>,\s*&\[\]]+?)?\s*(?:requires\b.*)?$", re.S)


def without_parentheses(s):
    out, depth = [], 0
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def classify(header):
    """What a '{' after `header` (the code since the last ';', '{' or '}' at namespace or class
    level) opens: "namespace", "class", a function's "body", or "skip" (an initializer, an enum,
    a lambda inside an initializer list: its braces belong to the header)."""
    h = " ".join(header.split())
    if h.startswith("template"):
        h = re.sub(r"^template\s*<.*?>\s*", "", h)
    if re.match(r"^(?:inline\s+)?namespace\b", h) or re.match(r'^extern\s*""$', h):
        return "namespace"
    flat = without_parentheses(h)
    if re.match(r"^enum\b", flat) or h.count("(") != h.count(")"):
        return "skip"
    if re.match(r"^(?:class|struct|union)\b", flat) and "=" not in flat:
        return "class"
    if "(" not in h or re.search(r"(?<![=!<>+\-*/%&|^])=(?!=)",
                                 re.sub(r"operator\s*[^\s(]*", "operator", flat)):
        return "skip"  # `x{...}`, `x = {...}`, `f = [](...) {...}`
    if re.search(r"\)\s*(?:noexcept\s*)?:(?!:)", h):  # a constructor's initializer list
        return "body" if h.endswith((")", "}")) else "skip"
    return "body" if QUALIFIERS.match(h[h.rfind(")") + 1:]) else "skip"


def function_name(header):
    h = " ".join(header.split())
    m = re.search(r"([~\w:]*operator\s*(?:\(\)|[^\s(]+)|[~\w:]+)\s*\(", h)
    return m.group(1) if m else h[:40]


def functions(text):
    """[(name, first line, lines)] of every function defined at namespace or class level, from
    the first line of its declaration to its closing brace; lambdas and local classes count
    towards the function they are in."""
    code = strip_code(text)
    n = len(code)

    def matching(j):
        depth = 0
        for k in range(j, n):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    return k
        return n - 1

    found, header_start, i = [], 0, 0
    while i < n:
        c = code[i]
        if c == "{":
            header = code[header_start:i]
            kind = classify(header)
            if kind == "skip":
                i = matching(i) + 1  # the header goes on
                continue
            if kind == "body":
                end = matching(i)
                start = header_start + len(header) - len(header.lstrip())
                first = code.count("\n", 0, start) + 1
                found.append((function_name(header), first, code.count("\n", 0, end) + 2 - first))
                i = end
            header_start = i + 1
        elif c in ";}" or (c == ":" and re.search(r"\b(?:public|private|protected)\s*$",
                                                  code[header_start:i])):
            header_start = i + 1
        i += 1
    return found


def long_functions():
    """["file:line:function:lines"] of every function over its folder's limit."""
    over = []
    for top, limit in FUNCTION_LIMITS:
        for path in files_under(os.path.join(ROOT, top), C_EXTS):
            rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
            for name, line, count in functions(read(path)):
                if count > limit:
                    over.append("%s:%d:%s:%d lines (limit %d)" % (rel, line, name, count, limit))
    return over


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

    def test_no_hiredis_outside_net(self):
        found = codec_offenders(HIREDIS_INCLUDE, C_EXTS)
        for rel, line in sorted(found.items()):
            with self.subTest(file=rel):
                self.assertIn(rel, HIREDIS_ALLOWED,
                              "includes hiredis outside lib/net/ (" + line + "): read replies with "
                              "net/reader.hpp, encode with net/resp.hpp (tools: nodes/client.hpp)")

    def test_no_tls_setup_outside_net(self):
        found = codec_offenders(TLS_SETUP, C_EXTS)
        for rel, line in sorted(found.items()):
            with self.subTest(file=rel):
                self.assertIn(rel, TLS_SETUP_ALLOWED,
                              "a second TLS set-up or verification (" + line + "): use "
                              "net/tls.hpp (TlsContext::create, tls_transport)")

    def test_no_second_resp_encoder(self):
        found = codec_offenders(RESP_ENCODER, C_EXTS + (".py",))
        for rel, line in sorted(found.items()):
            with self.subTest(file=rel):
                self.assertIn(rel, RESP_ENCODER_ALLOWED,
                              "a second RESP encoder (" + line + "): use net/resp.hpp "
                              "(tools: nodes::SyncClient; Python tests: redisfix.resp)")

    def test_allow_lists_are_needed(self):
        for pattern, exts, allowed in ((HIREDIS_INCLUDE, C_EXTS, HIREDIS_ALLOWED),
                                       (TLS_SETUP, C_EXTS, TLS_SETUP_ALLOWED),
                                       (RESP_ENCODER, C_EXTS + (".py",), RESP_ENCODER_ALLOWED)):
            found = codec_offenders(pattern, exts)
            for rel in sorted(allowed):
                with self.subTest(file=rel):
                    self.assertIn(rel, found, "allowed, but no longer needs it: drop the listing")

    def test_markers_find_the_originals(self):
        # The patterns above must match the library's own codec, or they prove nothing.
        net = os.path.join(LIB, "net")
        self.assertTrue(HIREDIS_INCLUDE.search(read(os.path.join(net, "reader.cpp"))))
        self.assertTrue(TLS_SETUP.search(read(os.path.join(net, "tls.cpp"))))
        self.assertTrue(RESP_ENCODER.search(read(os.path.join(net, "resp.cpp"))))
        # ... and the shapes a second encoder took before (tools/nodes/client.cpp used hiredis's;
        # the Python tests write printf-style headers).
        for sample in ('redisFormatCommandArgv(&cmd, argc, argv, lens);',
                       'snprintf(buf, sizeof buf, "*%zu\\r\\n", argc);',
                       'out = b"*%d\\r\\n" % len(args)',
                       'std::string out = "*" + std::to_string(argv.size()) + "\\r\\n";',
                       'out += \'*\';',
                       'out = f"*{len(args)}\\r\\n"'):
            with self.subTest(sample=sample):
                self.assertTrue(RESP_ENCODER.search(sample), "the marker misses " + sample)

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


class FunctionLengths(unittest.TestCase):
    def test_no_function_over_its_limit(self):
        # No function over ~120 lines in lib/, ~150 in tools/ (issue 42: run_run had 184, the
        # address parser 141, main 151).
        over = long_functions()
        self.assertEqual(over, [], "split these functions:\n" + "\n".join(over))

    def test_the_measure_finds_what_it_measures(self):
        # A measure that finds nothing proves nothing: the shapes that could fool brace matching,
        # each with its expected length.
        sample = "\n".join([
            '#include <x>',                                   # 1
            '#define OPEN {',                                 # 2
            'namespace a {',                                  # 3
            'namespace {',                                    # 4
            'constexpr int table[] = {1, 2};',                # 5
            'struct S final : B {',                           # 6
            '  S(int x) : f_([](int y) { return y; }), g_{x} {',  # 7
            '    s_ = "}";',                                  # 8
            '  }',                                            # 9
            '  int get() const noexcept { return 1\'000; }',  # 10
            ' private:',                                      # 11
            '  std::function<void()> h_{[] {}};',             # 12
            '  enum class E { a, b };',                       # 13
            '};',                                             # 14
            '}  // namespace',                                # 15
            'auto lambda = [](int) {',                        # 16
            '  return 2;',                                    # 17
            '};',                                             # 18
            'template <typename T>',                          # 19
            'auto f(T t) -> int {',                           # 20
            "  char c = '{'; /* { */ // {",                   # 21
            '  auto raw = R"x({)x";',                         # 22
            '  struct Local { void m() {} };',                # 23
            '  return [&] { return t; }();',                  # 24
            '}',                                              # 25
            'bool operator==(const S&, const S&) { return true; }',  # 26
            'extern "C" int c_api(void) {',                   # 27
            '  return 0;',                                    # 28
            '}',                                              # 29
            '}  // namespace a',                              # 30
        ])
        self.assertEqual(functions(sample), [("S", 7, 3), ("get", 10, 1), ("f", 19, 7),
                                             ("operator==", 26, 1), ("c_api", 27, 3)])
        # ... and, on the tree, functions where they are.
        found = {name: count for name, _, count in
                 functions(read(os.path.join(LIB, "core", "address.cpp")))}
        self.assertIn("parse_address", found)
        self.assertGreater(found["parse_query"], 60)
        self.assertIn("main", [name for name, _, _ in functions(read(os.path.join(ROOT, "tools",
                                                                                  "main.cpp")))])


# ---- one base for the nodes that discover their servers ---------------------------------------

NET = os.path.join(LIB, "net")
CLASS_HEAD = re.compile(r"\b(?:class|struct)\s+(\w+)(?:\s+final)?\s*:(?!:)\s*([^{;]+)\{")


def classes_with_bases(folder):
    """[(class, file relative to folder, [bases])] of every class or struct with bases."""
    found = []
    for path in files_under(folder):
        for m in CLASS_HEAD.finditer(strip_code(read(path))):
            bases = [re.sub(r"^(?:(?:public|protected|private|virtual)\s+)*", "", b.strip())
                     for b in m.group(2).split(",")]
            found.append((m.group(1), os.path.relpath(path, folder), bases))
    return found


def callers(name, folder=NET):
    """The files under `folder` whose code (comments and strings aside) calls `name` (its
    definition, a return type and the name at the start of a line, is no call)."""
    call = re.compile(r"^(.*?)\b" + re.escape(name) + r"\s*\(", re.M)

    def calls(code):
        return any(not re.match(r"^[\w:<>*&]+(?:\s+[\w:<>*&]+)*\s+$", m.group(1)) or
                   "return" in m.group(1) for m in call.finditer(code))

    return sorted(os.path.relpath(p, folder) for p in files_under(folder, (".cpp",))
                  if calls(strip_code(read(p))))


class DiscoveringNodes(unittest.TestCase):
    # Sentinel and Cluster votes repeated one lifecycle and one way to reach the servers they are
    # told of (issue 42: cluster_node.hpp and sentinel.cpp, and three more runs); adding a
    # topology meant copying one. Now each is a DiscoveringNode, and a new one is one file plus
    # one line in node_factory.cpp.

    def test_every_discovering_node_derives_from_the_base(self):
        classes = classes_with_bases(NET)
        direct = sorted(c for c, _, bases in classes if "Node" in bases)
        self.assertEqual(direct, ["DiscoveringNode", "StandaloneNode"],
                         "a node that discovers its servers derives from DiscoveringNode")
        discovering = sorted((c, f) for c, f, bases in classes if "DiscoveringNode" in bases)
        self.assertEqual(discovering, [("ClusterNode", "cluster_node.hpp"),
                                       ("SentinelNode", "sentinel.cpp")])
        # Their masters: the base's, which alone watches a standalone node for the vote.
        watchers = sorted(c for c, _, bases in classes if "MasterWatcher" in bases)
        self.assertEqual(watchers, ["DiscoveredMaster"])
        masters = sorted(f for c, f, bases in classes if "DiscoveredMaster" in bases)
        self.assertEqual(masters, ["cluster_node.hpp", "sentinel.cpp"])

    def test_what_they_shared_is_done_once(self):
        # Trusting a server the discovery named, making its standalone node, opening discovery
        # connections, and telling the host a vote has closed.
        self.assertEqual(callers("trust_discovered"), ["discovering_node.cpp"])
        self.assertEqual(callers("discovery_settings"), ["discovering_node.cpp"])
        self.assertEqual(callers("make_standalone_node"),
                         ["discovering_node.cpp", "node_factory.cpp"])
        self.assertEqual(callers("on_node_closed"), ["discovering_node.cpp", "standalone.cpp"])
        # Commands that wait for the first discovery wait in the base's PendingCommands.
        holders = sorted(os.path.relpath(p, NET) for p in files_under(NET)
                         if re.search(r"^\s*PendingCommands\s+\w+_", strip_code(read(p)), re.M))
        self.assertEqual(holders, ["discovering_node.hpp"])

    def test_a_topology_is_one_file_and_one_line_of_the_factory(self):
        factory = strip_code(read(os.path.join(NET, "node_factory.cpp")))
        nodes = [(name, where) for name, where, bases in classes_with_bases(NET)
                 if "DiscoveringNode" in bases]
        self.assertGreaterEqual(len(nodes), 2, "no DiscoveringNode: this test is out of date")
        for name, where in nodes:
            source = os.path.join(NET, where.replace("_node.hpp", ".cpp"))
            makers = re.findall(r"\b(make_\w+_node)\s*\(", strip_code(read(source)))
            with self.subTest(node=name):
                self.assertTrue(makers, "no make_*_node in " + os.path.basename(source))
                self.assertEqual(len(re.findall(r"\b" + makers[0] + r"\s*\(", factory)), 1,
                                 makers[0] + " is not made by node_factory.cpp's make_node")


if __name__ == "__main__":
    sys.exit(unittest.main(verbosity=1))
