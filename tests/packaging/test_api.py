"""The public C++ API as reviewed (docs/api.md): every entry point the headers declare has a row
there that keeps it, with a reason; a row that removed or folded an entry point stays true (the
entry point does not come back by accident); the no-throw convention holds (`try_f` beside a
throwing `f` with the same parameters; no `std::error_code&` out-parameters); and the README's one
example and the guide's C++ blocks compile against the headers.

An entry point is a public member function of a class or struct in include/redlock/*.hpp (the C
API, redlock.h, has its own version and is not listed), or a function at namespace scope, written
`Class::name(param, names)`: the parameter names stand for the types, so an overload added with
another parameter list is a new entry point. Not listed: constructors without parameters,
destructors, copy and move operations, deleted functions and friends.

Run directly to print the entry points the headers declare:
    python3 tests/packaging/test_api.py --list
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("REDLOCK_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
HEADERS = os.path.join(SOURCE, "include", "redlock")
API_DOC = os.path.join(SOURCE, "docs", "api.md")
README = os.path.join(SOURCE, "README.md")
GUIDE = os.path.join(SOURCE, "docs", "guide.md")


def strip_comments(text):
    """The text without comments, string literals kept (they hold no braces here but may hold
    '//', as in "redis://")."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            i = text.index("*/", i + 2) + 2
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_angles(text):
    """Template arguments removed (innermost first), so that `std::function<void(int)> f` reads as
    a member, not a function."""
    prev = None
    while prev != text:
        prev = text
        text = re.sub(r"<[^<>;{}]*>", "", text)
    return text


def matching(text, i, open_c, close_c):
    """The index just past the bracket that closes the one at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_c:
            depth += 1
        elif text[j] == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
    raise ValueError("unbalanced %s at %d" % (open_c, i))


def split_top(text, sep=","):
    """`text` split at `sep` outside brackets."""
    parts, depth, cur = [], 0, []
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


FUNCTION = re.compile(
    r"^(?P<pre>.*?)(?P<name>~?\b[A-Za-z_]\w*|\boperator\s*(?:bool|==|!=|<=>|\(\)|[^\s(\w]+))\s*"
    r"\((?P<params>.*?)\)\s*(?P<post>(?:const|noexcept|override|final|&&|&|\s)*)"
    r"(?:=\s*(?P<special>0|default|delete))?\s*(?::.*)?$", re.S)


def parse_function(head, cls):
    """(name, [parameter names]) when `head` declares a function worth listing, else None."""
    head = re.sub(r"\[\[.*?\]\]", " ", head)
    head = " ".join(head.split())
    if re.match(r"^(using|typedef|friend|static_assert|template)\b", head):
        return None
    flat = strip_angles(head)
    # The declarator's parentheses are the first ones at the top level: a member initializer
    # list after them (`) : a_(x) {`) has parentheses too.
    i = flat.find("(")
    if i < 0 or "=" in flat[:i].replace("operator==", "").replace("operator!=", ""):
        return None
    end = matching(flat, i, "(", ")")
    m = FUNCTION.match(flat[:end] + flat[end:].split(":", 1)[0])
    if not m or m.group("special") == "delete":
        return None
    name = re.sub(r"\s+", " ", m.group("name"))
    params = split_top(m.group("params"))
    if params == ["void"]:
        params = []
    names = []
    for p in params:
        p = p.split("=", 1)[0].strip()
        words = re.findall(r"[A-Za-z_]\w*", p)
        names.append(words[-1] if words else p)
    if cls:
        short = cls.split("::")[-1]
        if name.startswith("~") or name == "operator=":
            return None
        if name == short:
            if not params:
                return None
            first = strip_angles(params[0]).replace(" ", "")
            if len(params) == 1 and first in (short + "&&", "const" + short + "&"):
                return None
    return name, names


def entries_of(text):
    """Public entry points of one header's text: ["Class::name(a, b)", "name(x)"]."""
    text = strip_comments(text)
    text = "\n".join(l for l in text.split("\n") if not l.lstrip().startswith("#"))
    found = []

    def record(head, cls, access):
        if cls is not None and access != "public":
            return
        f = parse_function(head, cls)
        if f:
            name, params = f
            found.append("%s%s(%s)" % (cls + "::" if cls else "", name, ", ".join(params)))

    def walk(body, cls, access):
        i, head, paren = 0, [], 0
        while i < len(body):
            c = body[i]
            if c == "(":
                paren += 1
            elif c == ")":
                paren -= 1
            if paren > 0 or c not in "{;:":
                head.append(c)
                i += 1
                continue
            h = "".join(head).strip()
            if c == ":":
                label = re.fullmatch(r"(public|private|protected)", h)
                if label and not body.startswith("::", i):
                    access = label.group(1)
                    head = []
                elif body.startswith("::", i):
                    head.append("::")
                    i += 1
                else:
                    head.append(c)
                i += 1
                continue
            if c == ";":
                if h:
                    record(h, cls, access)
                head = []
                i += 1
                continue
            # c == "{": a namespace, a class, an enum, a function body or an initializer.
            end = matching(body, i, "{", "}")
            inner = body[i + 1:end - 1]
            ns = re.fullmatch(r"namespace\s*([\w:]*)", h)
            kind = re.match(r"^(?:template\s*<[^>]*>\s*)?(class|struct|union)\b\s*(.*)$", h, re.S)
            if ns:
                walk(inner, cls, access)
                head = []
            elif re.match(r"^enum\b", h):
                head = []
            elif kind and "(" not in strip_angles(h):
                words = re.findall(r"[A-Za-z_][\w:]*", kind.group(2).split(":")[0]
                                   if "::" not in kind.group(2) else kind.group(2))
                words = [w for w in words if w not in ("REDLOCK_API", "REDLOCK_HIDDEN", "final")]
                name = words[0] if words else "<anonymous>"
                if "REDLOCK_HIDDEN" not in h and not name.startswith("std::"):
                    full = cls + "::" + name if cls else name
                    nested_access = "public" if kind.group(1) != "class" else "private"
                    if cls is None or access == "public":
                        walk(inner, full, nested_access)
                head = []
            elif "(" in strip_angles(h) and not re.search(r"=\s*$", h):
                record(h, cls, access)
                head = []
            else:
                head.append(body[i:end])  # a brace initializer: the declaration goes on to ';'
            i = end
        return access

    walk(text, None, "public")
    return found


def header_entries():
    out = {}
    for name in sorted(os.listdir(HEADERS)):
        if name.endswith(".hpp"):
            with open(os.path.join(HEADERS, name)) as f:
                for e in entries_of(f.read()):
                    out.setdefault(e, name)
    return out


def api_rows():
    """docs/api.md's table rows: {entry point: (decision, reason)}."""
    rows = {}
    with open(API_DOC) as f:
        for line in f:
            m = re.match(r"^\|\s*`([^`]+)`\s*\|\s*([^|]*?)\s*\|\s*(.*?)\s*\|\s*$", line)
            if m:
                entry = " ".join(m.group(1).split())
                if entry in rows:
                    raise AssertionError("docs/api.md lists %s twice" % entry)
                rows[entry] = (m.group(2).strip().lower(), m.group(3).strip())
    return rows


def decision(d):
    """keep, fold or remove: the first word of a row's decision ("keep (new)", "fold into ...")."""
    word = d.split()[0] if d.split() else ""
    return word if word in ("keep", "fold", "remove") else None


class Surface(unittest.TestCase):
    def setUp(self):
        self.headers = header_entries()
        self.rows = api_rows()

    def test_the_parser_sees_the_api(self):
        # A parser that lost its way would find nothing and let everything pass.
        for e in ("Client::lock(resources, options)", "Guard::release()",
                  "Election::campaign(id, options)", "Engine::acquire(resources, options, cb)",
                  "Lock::from_token(resources, token, mode)", "parse_node_list(text, error)"):
            if e not in self.headers:
                self.fail("the header parser did not find %s" % e)
        self.assertGreater(len(self.headers), 60)

    def test_every_row_has_a_decision_and_a_reason(self):
        for entry, (d, reason) in self.rows.items():
            if decision(d) is None:
                self.fail("docs/api.md: %s: decision %r is not keep, fold or remove" % (entry, d))
            if not reason:
                self.fail("docs/api.md: %s has no reason" % entry)

    def test_every_entry_point_was_reviewed(self):
        missing = sorted(e for e in self.headers if e not in self.rows)
        if missing:
            self.fail("public entry points without a line in docs/api.md (review each: a reason "
                      "to keep it, and its line in the table):\n" +
                      "\n".join("  %s (%s)" % (e, self.headers[e]) for e in missing))

    def test_what_was_kept_exists_and_what_went_stays_gone(self):
        wrong = []
        for entry, (d, _) in self.rows.items():
            if decision(d) == "keep" and entry not in self.headers:
                wrong.append("docs/api.md keeps %s, which no public header declares: fix the "
                             "line, or the header" % entry)
            elif decision(d) != "keep" and entry in self.headers:
                wrong.append("docs/api.md says %s (%s), but %s declares it again"
                             % (entry, d, self.headers[entry]))
        if wrong:
            self.fail("\n".join(wrong))

    def test_try_f_has_a_throwing_twin(self):
        # f(args) throws redlock::Error; try_f(args) never throws and returns the record.
        for e in self.headers:
            m = re.match(r"^(.*::)?try_(\w+)\((.*)\)$", e)
            if m:
                twin = "%s%s(%s)" % (m.group(1) or "", m.group(2), m.group(3))
                if twin not in self.headers:
                    self.fail("%s has no throwing twin %s (docs/api.md)" % (e, twin))

    def test_no_error_code_out_parameters(self):
        for name in sorted(os.listdir(HEADERS)):
            if name.endswith(".hpp"):
                with open(os.path.join(HEADERS, name)) as f:
                    text = strip_comments(f.read())
                for line in text.split("\n"):
                    if re.search(r"std::error_code\s*&", line):
                        self.fail("%s: %s: an std::error_code& out-parameter; the no-throw form "
                                  "is try_f(), returning the record (docs/api.md)"
                                  % (name, line.strip()))


# The README's example is statements of a function's body; what it calls of the caller's own is
# declared here.
README_PRELUDE = """
#include <string>
void stop_working(const std::string&);
void log(const std::string&, const char*, const std::string&);
void do_a_bounded_step(std::chrono::milliseconds);
"""


def readme_example():
    with open(README) as f:
        text = f.read()
    section = re.search(r"(?ms)^## The library in one example\n(.*?)^## ", text)
    assert section, "README.md has no section 'The library in one example'"
    code = re.search(r"(?ms)^```cpp\n(.*?)^```", section.group(1))
    assert code, "README.md's example has no ```cpp block"
    lines = code.group(1).split("\n")
    includes = [l for l in lines if l.startswith("#include")]
    usings = [l for l in lines if l.startswith("using ")]
    body = [l for l in lines if l not in includes and l not in usings]
    return ("\n".join(includes) + README_PRELUDE + "\n".join(usings) + "\nvoid example() {\n" +
            "\n".join(body) + "\n}\n")


# The guide's C++ blocks are fragments of one service: each is compiled as the body of a function
# that has the `client`, the `lo` and the parsed `nodes` the blocks before it made (a block that
# declares its own shadows them, in a scope of its own), and the caller's helpers declared here.
GUIDE_PRELUDE = """
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>
#include <redlock/redlock.hpp>
using namespace std::chrono_literals;
namespace guide {
[[noreturn]] void die(const std::string&);
template <class... A> void log(A&&...);
template <class... A> void log_async(A&&...);
void skip();
void retry_later();
void alert(const char*);
void stop_work();
void do_work_fenced_with(std::uint64_t);
void abort_and_retry_later();
struct Db { template <class... A> int exec(A&&...); };
inline Db db;
inline bool degraded = false;
inline std::string hostname;
struct Step { std::chrono::milliseconds worst_case; void run(); };
inline std::vector<Step> steps;
"""


def guide_program():
    with open(GUIDE) as f:
        blocks = re.findall(r"(?ms)^```cpp\n(.*?)^```", f.read())
    assert len(blocks) >= 5, "docs/guide.md: fewer C++ blocks than expected (%d)" % len(blocks)
    out = [GUIDE_PRELUDE]
    for i, b in enumerate(blocks):
        out.append("void block_%d(redlock::Client& client, redlock::LockOptions& lo,\n"
                   "             std::optional<std::vector<redlock::NodeAddress>>& nodes) {\n"
                   "{\n%s}\n}\n" % (i + 1, b))
    out.append("}  // namespace guide\n")
    return "".join(out)


def compile_check(test, name, code, extra=()):
    cxx = os.environ.get("REDLOCK_CXX", "").split() or [shutil.which("c++") or "g++"]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "example.cpp")
        with open(path, "w") as f:
            f.write(code)
        r = subprocess.run(cxx + ["-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Werror"] +
                           list(extra) + ["-I", os.path.join(SOURCE, "include"), path],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            numbered = "\n".join("%4d %s" % (n + 1, l) for n, l in enumerate(code.split("\n")))
            test.fail("%s does not compile:\n%s\n%s" % (name, numbered, r.stderr))


class Examples(unittest.TestCase):
    def test_readme_example_compiles(self):
        compile_check(self, "README.md's example", readme_example())

    def test_guide_blocks_compile(self):
        # Fragments: what one block declares and the next does not use is not a mistake.
        compile_check(self, "docs/guide.md's C++ blocks", guide_program(),
                      ["-Wno-unused-variable", "-Wno-unused-parameter",
                       "-Wno-unused-but-set-variable"])


if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:
        for e, h in sorted(header_entries().items(), key=lambda x: (x[1], x[0])):
            print("%-16s %s" % (h, e))
        sys.exit(0)
    unittest.main()
