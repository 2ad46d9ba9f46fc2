// Fuzz target: what the library does with arbitrary bytes from a Redis node.
//
// Input: byte 0 picks the operation, byte 1 picks which command of the connection gets the fuzzed
// answer, the rest is the answer (raw bytes, normally RESP). Each input runs a real Engine on a
// private libuv loop against a fresh FakeNode (a TCP server on 127.0.0.1): the bytes go through
// hiredis's reader inside the library's connection, Node::handle_reply (NOSCRIPT retry, handshake
// parsing of AUTH/SELECT/INFO/CONFIG) and the operation's classification of the reply.
//
//   byte 0 % 8: 0 acquire (SET NX PX)   1 acquire of 2 resources   2 fenced acquire
//               3 read lock             4 write lock               5 extend
//               6 release               7 status
//   byte 1 % 7: 0 the operation's first lock command (SET / EVALSHA)
//               1 the second lock command (fence write-back, rollback, the EVAL after NOSCRIPT)
//               2 INFO   3 CONFIG GET   4 the first SCRIPT LOAD
//               5 AUTH (the address gets a user and password)   6 SELECT (the address gets /3)
//
// The same bytes are parsed here with hiredis's reader (redisReaderFeed/GetReply) until it stops,
// freeing every reply. If they start with a complete reply, exactly that reply is sent (trailing
// bytes are dropped, see below) and the connection stays open; otherwise all the bytes are sent
// and the node closes the connection, so an incomplete reply ends at once instead of waiting for
// node_timeout.
//
// Oracle (target 0, one node, so its vote decides): the node's state and the operation's result
// must be exactly what the first reply means for that operation (only "+OK" grants a SET, only
// ":1" grants a script acquire or extend, a positive integer is a fence or a delete, nil or ":0"
// is a refusal, an error reply is `error` with its text, anything else is `error`, no reply is
// `down`). Other targets: no crash, no hang, no leak, and a consistent result.
//
// All the bytes are sent, also after a complete reply (an extra reply nobody waits for makes the
// connection drop and reconnect). REDLOCK_FUZZ_EXTRA_REPLIES=0 sends only the first complete
// reply; REDLOCK_FUZZ_HUGE_ARRAYS=0 skips inputs that declare more than 65536 elements. Both were
// the defaults while the library used hiredis 0.14's async context, which aborted or stalled on
// such input (tests/fuzz/README.md, "Problems found").
#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <uv.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fake_node.hpp"
#include "fuzz_check.hpp"
#include "redlock/redlock.hpp"

using namespace std::chrono_literals;
using redlock::NodeState;
using redlock::test::FakeNode;

namespace {

enum Op {
  op_acquire,
  op_multi,
  op_fenced,
  op_read,
  op_write,
  op_extend,
  op_release,
  op_status,
  op_count
};
enum Target { t_lock1, t_lock2, t_info, t_config, t_script_load, t_auth, t_select, t_count };

// With REDLOCK_FUZZ_HUGE_ARRAYS=0, inputs with a multi-bulk header above this are skipped.
// Complete arrays in an input of at most a few KB have far fewer elements than this.
constexpr std::size_t kMaxElements = 1 << 16;
redisReplyObjectFunctions* g_default_fn = nullptr;

// What the first complete reply of the input is, read with hiredis's own reader.
struct Parsed {
  bool complete = false;  // a first reply exists
  std::size_t first_len = 0;
  int type = 0;
  long long integer = 0;
  std::string str;  // status, error, string
  // status op: the three elements, when an array of 3
  std::size_t elements = 0;
  int el_type[3] = {0, 0, 0};
  std::string el_str[3];
  long long el_int[3] = {0, 0, 0};
  int replies = 0;             // complete replies before the reader stopped
  long long max_elements = 0;  // the largest multi-bulk count seen
};

// The largest multi-bulk count the reader was asked to allocate for (hiredis 0.14 callocs
// count * 8 bytes on reading the header, and freeing the reply walks all `count` slots).
thread_local long long g_max_elements = 0;
redisReplyObjectFunctions g_counting_fn;

void* count_array(const redisReadTask* task, int elements) {  // (int in hiredis 0.14)
  g_max_elements = std::max(g_max_elements, static_cast<long long>(elements));
  if (elements < 0 || static_cast<std::size_t>(elements) > kMaxElements)
    return nullptr;  // the reader reports out of memory and stops
  return g_default_fn->createArray(task, elements);
}

Parsed parse(std::string_view bytes) {
  Parsed p;
  redisReader* r = redisReaderCreate();
  FUZZ_CHECK(r != nullptr, "redisReaderCreate");
  if (g_default_fn == nullptr) {
    g_default_fn = r->fn;
    g_counting_fn = *r->fn;
    g_counting_fn.createArray = count_array;
  }
  r->fn = &g_counting_fn;
  g_max_elements = 0;
  if (!bytes.empty() && redisReaderFeed(r, bytes.data(), bytes.size()) != REDIS_OK) {
    redisReaderFree(r);
    p.max_elements = g_max_elements;
    return p;
  }
  for (;;) {
    void* obj = nullptr;
    if (redisReaderGetReply(r, &obj) != REDIS_OK || obj == nullptr) break;
    auto* rep = static_cast<redisReply*>(obj);
    if (p.replies++ == 0) {
      p.complete = true;
      p.first_len = bytes.size() - (r->len - r->pos);
      p.type = rep->type;
      p.integer = rep->integer;
      if (rep->str != nullptr) p.str.assign(rep->str, rep->len);
      if (rep->type == REDIS_REPLY_ARRAY) {
        p.elements = rep->elements;
        for (std::size_t i = 0; i < 3 && i < rep->elements; ++i) {
          p.el_type[i] = rep->element[i]->type;
          p.el_int[i] = rep->element[i]->integer;
          if (rep->element[i]->str != nullptr)
            p.el_str[i].assign(rep->element[i]->str, rep->element[i]->len);
        }
      }
    }
    freeReplyObject(rep);
    if (p.replies >= 64) break;
  }
  redisReaderFree(r);
  p.max_elements = g_max_elements;
  return p;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Shared with the FakeNode's thread.
struct Script {
  std::mutex mu;
  int target = 0;
  std::string answer;  // what the targeted command gets (already wrapped in close_after if needed)
  int lock_cmds = 0;
  int script_loads = 0;
  bool info = false, config = false, auth = false, select = false;
};

FakeNode::Responder responder(std::shared_ptr<Script> s) {
  auto base = FakeNode::redis_like();
  return [s, base](const std::vector<std::string>& argv) -> std::optional<std::string> {
    const std::string cmd = argv.empty() ? std::string() : upper(argv[0]);
    const std::string sub = argv.size() > 1 ? upper(argv[1]) : std::string();
    std::lock_guard<std::mutex> lock(s->mu);
    bool hit = false;
    if (cmd == "SET" || cmd == "EVALSHA" || cmd == "EVAL") {
      const int n = ++s->lock_cmds;
      hit = (s->target == t_lock1 && n == 1) || (s->target == t_lock2 && n == 2);
    } else if (cmd == "SCRIPT" && sub == "LOAD") {
      hit = s->target == t_script_load && ++s->script_loads == 1;
    } else if (cmd == "INFO") {
      hit = s->target == t_info && !std::exchange(s->info, true);
    } else if (cmd == "CONFIG") {
      hit = s->target == t_config && !std::exchange(s->config, true);
    } else if (cmd == "AUTH") {
      hit = s->target == t_auth && !std::exchange(s->auth, true);
    } else if (cmd == "SELECT") {
      hit = s->target == t_select && !std::exchange(s->select, true);
    }
    if (hit) return s->answer;
    return base(argv);
  };
}

struct Outcome {
  bool done = false;
  bool ok = false;
  std::error_code error;
  std::vector<redlock::NodeOutcome> nodes;
  redlock::Lock lock;
  int deleted = 0;
  redlock::StatusResult status;
};

uv_loop_t* loop() {
  static uv_loop_t* l = [] {
    auto* p = new uv_loop_t;
    uv_loop_init(p);
    return p;
  }();
  return l;
}

bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string_view(v) == "0";
}

// An error reply's text in a record: as the server sent it when it was plain, else made safe
// (core/server_text.hpp; the library's internals are not linked here).
bool shown_as(const std::string& detail, const std::string& server_sent) {
  if (fuzz::plain_server_text(server_sent)) return detail == server_sent;
  return fuzz::unsafe_for_terminal(detail).empty() && detail.size() <= 200;
}

bool extra_replies() {
  static const bool on = !env_off("REDLOCK_FUZZ_EXTRA_REPLIES");
  return on;
}

bool huge_arrays() {
  static const bool on = !env_off("REDLOCK_FUZZ_HUGE_ARRAYS");
  return on;
}

std::string describe(int op, int target, std::string_view bytes) {
  return "op " + std::to_string(op) + " target " + std::to_string(target) + " bytes " +
         fuzz::show(bytes);
}

// The state the node must be in after the first lock command got `p` (target 0).
std::optional<NodeState> expected_state(int op, const Parsed& p) {
  if (!p.complete) return NodeState::down;
  if (p.type == REDIS_REPLY_ERROR) {
    // A script call answered NOSCRIPT is sent again with EVAL, which the fake answers normally.
    if (op != op_acquire && p.str.rfind("NOSCRIPT", 0) == 0) return std::nullopt;
    return NodeState::error;
  }
  const bool integer = p.type == REDIS_REPLY_INTEGER;
  switch (op) {
    case op_acquire:
      if (p.type == REDIS_REPLY_STATUS && p.str == "OK") return NodeState::ok;
      if (p.type == REDIS_REPLY_NIL) return NodeState::held_by_other;
      return NodeState::error;
    case op_fenced:
      if (integer && p.integer > 0) return NodeState::ok;
      if (integer && p.integer == 0) return NodeState::held_by_other;
      return NodeState::error;
    case op_multi:
    case op_read:
    case op_write:
      if (integer && p.integer == 1) return NodeState::ok;
      if (integer && p.integer == 0) return NodeState::held_by_other;
      return NodeState::error;
    case op_extend:
      if (integer && p.integer == 1) return NodeState::ok;
      if (integer && p.integer == 0) return NodeState::not_held;
      return NodeState::error;
    case op_release:
      if (integer) return p.integer > 0 ? NodeState::ok : NodeState::not_held;
      return NodeState::error;
    default:
      return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const int op = data[0] % op_count;
  const int target = data[1] % t_count;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
  const std::string what = describe(op, target, bytes);

  const Parsed p = parse(bytes);
  if (p.max_elements > static_cast<long long>(kMaxElements) && !huge_arrays()) return 0;
  FUZZ_CHECK(!p.complete || (p.first_len > 0 && p.first_len <= bytes.size()), what);

  auto script = std::make_shared<Script>();
  script->target = target;
  if (p.complete && !extra_replies()) {
    script->answer.assign(bytes.substr(0, p.first_len));
  } else {
    script->answer = FakeNode::close_after(std::string(bytes));
  }
  FakeNode node(responder(script));

  std::string address = "127.0.0.1:" + std::to_string(node.port());
  if (target == t_auth) address = "redis://fuzzer:secret@" + address;
  if (target == t_select) address = "redis://" + address + "/3";
  std::string err;
  auto addr = redlock::NodeAddress::parse(address, err);
  FUZZ_CHECK(addr.has_value(), err);

  redlock::Options o;
  o.nodes = {*addr};
  o.node_timeout = 1000ms;
  o.connect_timeout = 1000ms;
  o.retry_count = 0;
  o.min_node_uptime = 1s;  // a fuzzed INFO with a small uptime_in_seconds excludes the vote

  Outcome out;
  auto* engine = new redlock::Engine(loop(), o);
  const std::string token(40, 'f');
  redlock::AcquireOptions ao;
  ao.ttl = 10s;
  ao.retry_count = 0;
  auto on_acquire = [&out](redlock::AcquireResult r) {
    out.done = true;
    out.ok = bool(r);
    out.error = r.error;
    out.nodes = std::move(r.nodes);
    out.lock = std::move(r.lock);
  };
  switch (op) {
    case op_acquire:
      engine->acquire({"fuzz"}, ao, on_acquire);
      break;
    case op_multi:
      engine->acquire({"fuzz-a", "fuzz-b"}, ao, on_acquire);
      break;
    case op_fenced:
      ao.fence = true;
      engine->acquire({"fuzz"}, ao, on_acquire);
      break;
    case op_read:
      ao.mode = redlock::LockMode::read;
      engine->acquire({"fuzz"}, ao, on_acquire);
      break;
    case op_write:
      ao.mode = redlock::LockMode::write;
      engine->acquire({"fuzz"}, ao, on_acquire);
      break;
    case op_extend:
      engine->extend(redlock::Lock::from_token({"fuzz"}, token), 10s,
                     [&out](redlock::ExtendResult r) {
                       out.done = true;
                       out.ok = bool(r);
                       out.error = r.error;
                       out.nodes = std::move(r.nodes);
                     });
      break;
    case op_release:
      engine->release(redlock::Lock::from_token({"fuzz"}, token), [&out](redlock::ReleaseResult r) {
        out.done = true;
        out.ok = bool(r);
        out.error = r.error;
        out.deleted = r.deleted;
        out.nodes = std::move(r.nodes);
      });
      break;
    case op_status:
      engine->status("fuzz", [&out](redlock::StatusResult r) {
        out.done = true;
        out.status = std::move(r);
      });
      break;
  }
  while (!out.done) uv_run(loop(), UV_RUN_ONCE);
  delete engine;
  uv_run(loop(), UV_RUN_DEFAULT);  // until every handle of the engine is closed

  // Consistency, whatever was fuzzed.
  if (op == op_status) {
    FUZZ_CHECK(out.status.nodes.size() == 1, what);
  } else {
    FUZZ_CHECK(out.nodes.size() == 1, what);
    const auto& n = out.nodes[0];
    // (A fenced acquire also needs its write-back round: its grant alone does not make a lock.)
    if (op == op_fenced) {
      FUZZ_CHECK(!out.ok || n.state == NodeState::ok, what + ": result and node state disagree");
    } else {
      FUZZ_CHECK(out.ok == (n.state == NodeState::ok), what + ": result and node state disagree");
    }
    FUZZ_CHECK(n.node.find("secret") == std::string::npos, what + ": password in the node name");
    if (out.ok && op <= op_write) {
      FUZZ_CHECK(out.lock.votes() == 1 && out.lock.token().size() > 0, what);
    }
    // An error state says why, unless the node's error reply itself was empty ("-\r\n").
    if (n.state == NodeState::error && target == t_lock1 &&
        !(p.type == REDIS_REPLY_ERROR && p.str.empty())) {
      FUZZ_CHECK(!n.detail.empty(), what + ": error without a reason");
    }
  }

  // The exact meaning of the first lock command's reply.
  if (target == t_lock1 && !extra_replies()) {
    if (op == op_status) {
      const auto& row = out.status.nodes[0];
      if (!p.complete) {
        FUZZ_CHECK(!row.up && !row.value && !row.pttl && row.type.empty(), what);
      } else if (p.type == REDIS_REPLY_ERROR) {
        if (p.str.rfind("NOSCRIPT", 0) != 0)
          FUZZ_CHECK(row.up && shown_as(row.detail, p.str), what);
      } else if (p.type == REDIS_REPLY_ARRAY && p.elements == 3) {
        FUZZ_CHECK(row.up && row.detail.empty(), what);
        const bool has_type =
            p.el_type[0] == REDIS_REPLY_STRING || p.el_type[0] == REDIS_REPLY_STATUS;
        FUZZ_CHECK(row.type == (has_type ? p.el_str[0] : std::string()), what + ": type");
        FUZZ_CHECK(row.value.has_value() == (p.el_type[1] == REDIS_REPLY_STRING), what + ": value");
        if (row.value) FUZZ_CHECK(*row.value == p.el_str[1], what + ": value");
        const bool has_pttl = p.el_type[2] == REDIS_REPLY_INTEGER && p.el_int[2] >= 0;
        FUZZ_CHECK(row.pttl.has_value() == has_pttl, what + ": pttl");
        if (row.pttl) FUZZ_CHECK(row.pttl->count() == p.el_int[2], what + ": pttl");
      } else {
        FUZZ_CHECK(
            row.up && row.detail.rfind("unexpected reply ", 0) == 0 && !row.value && !row.pttl,
            what);
      }
    } else if (auto want = expected_state(op, p)) {
      const auto& n = out.nodes[0];
      FUZZ_CHECK(n.state == *want, what + ": state " + redlock::to_string(n.state) + ", expected " +
                                       redlock::to_string(*want));
      if (*want == NodeState::error && p.type == REDIS_REPLY_ERROR) {
        FUZZ_CHECK(shown_as(n.detail, p.str), what + ": detail " + fuzz::show(n.detail));
      }
      if (*want == NodeState::held_by_other)
        FUZZ_CHECK(out.error == redlock::Errc::contended, what);
      if (*want == NodeState::not_held && op == op_extend)
        FUZZ_CHECK(out.error == redlock::Errc::not_held, what);
      if (op == op_fenced && out.ok) {
        FUZZ_CHECK(out.lock.fence() && *out.lock.fence() == static_cast<std::uint64_t>(p.integer),
                   what + ": fence");
      }
      if (op == op_release)
        FUZZ_CHECK(out.deleted == (*want == NodeState::ok ? 1 : 0), what + ": deleted");
    }
  }
  return 0;
}
