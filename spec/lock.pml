/*
 * The Redlock protocol as this library runs it, for SPIN: acquire (SET NX PX on every node,
 * decide at a quorum, roll back everywhere on failure), extend, release (compare-and-delete),
 * the restart guard, fencing counters with the maximum over the granting quorum and the
 * write-back, over N nodes, C clients and a nemesis (node crash with and without persistence,
 * connection resets that lose commands and answers, slow answers), in discrete time with node
 * clocks that drift within the bound the library subtracts. A client that does nothing while
 * ticks pass is a paused client: every interleaving of ticks and steps is explored.
 *
 * Properties:
 *  - mutual exclusion: no two clients hold the lock with validity left (Monitor);
 *  - no key left: once the commands of a failed attempt were delivered to a node (none lost),
 *    that node does not hold the attempt's token (Monitor);
 *  - -DFENCED: fences are handed out in strictly increasing order, so a holder paused past its
 *    validity carries a lower fence than any later holder (hand_out); and the resource, which
 *    refuses a write with a lower fence than it saw, never accepts a stale write: one from a
 *    holder that acquired before the holder of a write it accepted already (the write step);
 *  - -DLIVENESS: a waiter eventually gets a free lock (LTL `waiter_served`, pan -a -f).
 * Mutations (each must give a counterexample; scripts/model.sh checks that it does):
 *  MUT_NO_GUARD      the restart guard off, and restarts lose the keys
 *  MUT_NO_DRIFT      validity without the drift term
 *  MUT_NO_ROLLBACK   a failed attempt leaves its keys
 *  MUT_NO_WRITEBACK  the fence is handed out without the write-back round
 *  MUT_NO_FENCE_CHECK  the resource takes every write, whatever its fence
 *  KLEPPMANN         not a mutation: stops at the write of a holder paused past its validity,
 *                    after a later holder acquired and wrote, which the resource refused for its
 *                    fence: the trace in docs/model/kleppmann.txt
 * docs/model.md maps each step to the file and function of the library that does it.
 */

#include "common.pml"

#define QUAR (TTL + DRIFT) /* engine.cpp restart_quarantine(): the longest ttl + its drift */
#ifndef QD
#define QD 4 /* commands queued per connection (docs/model.md: a bound of the model) */
#endif
#ifndef MAXATT
#define MAXATT 3 /* attempts per client in the whole run */
#endif
#ifndef MAXACQ
#define MAXACQ 2 /* acquisitions per client */
#endif
#ifndef MAXEXT
#define MAXEXT 1 /* extends per client */
#endif
#ifndef CRASHES
#define CRASHES 1 /* node crashes */
#endif
#ifndef RESETS
#define RESETS 1 /* connection resets: what is queued on it is lost, the first perhaps run */
#endif
#ifndef SLOW
#define SLOW 1 /* timeouts of an answer that was still on its way */
#endif
#ifndef DELAYS
#define DELAYS 2 /* LIVENESS only: ticks while a round is out (before stabilisation) */
#endif
#define TOKS 3 /* tokens per client that can be live at once (reused once no trace is left) */

/* Client phases (engine/acquire.hpp AcquireOp::Phase, and the holder's) */
#define P_IDLE 0      /* between acquisitions, or sleeping between attempts (sl) */
#define P_ATTEMPT 1   /* Phase::attempt */
#define P_WRITEBACK 2 /* Phase::fence_writeback */
#define P_HOLD 3      /* the lock handed out */
#define P_EXTEND 4    /* an ExtendOp is out; the lock is held until its deadline meanwhile */

/* A command on a connection, one byte: op * 32 + current-round bit * 16 + argument (< 16) */
#define OP_ACQ 1   /* SET NX PX (acquire_fenced with -DFENCED) */
#define OP_DEL 2   /* the release script: compare-and-delete (also the rollback) */
#define OP_EXT 3   /* the extend script: compare-and-pexpire */
#define OP_RAISE 4 /* fence_raise: the write-back */
#define ENC(op, cur, arg) ((op) * 32 + (cur) * 16 + (arg))
#define E_OP(e) ((e) / 32)
#define E_CUR(e) (((e) / 16) % 2)
#define E_ARG(e) ((e) % 16)

/* An answer: 0 none, 1 refused (held by another / not held), 2 + value granted */
#define R_REF 1
#define R_OK 2

#define IX(c, n) ((c) * N + (n))

typedef Row {
  byte v[N]
};
typedef Queue {
  byte e[QD];
  byte qlen
};

/* ---- nodes ---- */
bool up[N];
bool fast[N]; /* its clock runs fast: keys live TTL - DRIFT ticks of the clients' clock */
byte inc[N];  /* incarnation: a new run_id at every restart */
byte age[N];  /* ticks since it came up (uptime), counted up to QUAR */
byte key[N];  /* the lock key: the token holding it, 0 = none */
byte krem[N]; /* its ttl left, on the node's clock */
byte ctr[N];  /* the fence counter (<resource>:fence); 0 = missing */
byte fclk;    /* the highest count so far: a missing counter starts above it (acquire_fenced
                 starts it from the server's clock in ms x 1000: the README's clock assumption) */

/* ---- connections, client c to node n ---- */
Queue rq[C * N]; /* commands written and not run yet (FIFO: one TCP connection); the answer
                    reaches the client as the command runs (docs/model.md: why that is enough) */

/* ---- clients ---- */
byte ph[C];
byte tok[C]; /* the current attempt's token: fresh for every attempt */
byte el[C];  /* ticks since the current round's t1 (counted up to TTL) */
Row vs[C];   /* the current round's votes, and their counts: */
byte nok[C];
byte nref[C];
byte npend[C];
byte fmax[C]; /* detail::CounterMax over the granting nodes: the maximum, and how many had it */
byte fcnt[C];
byte fence[C]; /* the fence handed out with the lock */
byte hl[C];    /* validity left: ticks to the lock's local deadline */
byte sl[C];    /* ticks left of the sleep before the next attempt */
byte att[C];
byte acq[C];
byte nxt[C]; /* extends made */
bool chk[C]; /* checked its validity, about to write to the resource with its fence */
Row conn[C]; /* incarnation + 1 of the server the connection is to; 0 = dropped */
Row kinc[C]; /* the run_id the restart guard saw last (RestartGuard::run_id_) */
Row ql[C];   /* restart guard: ticks its votes are still excluded for */
byte ftok[C]; /* the token of the last failed attempt */
Row lost[C];  /* since then, a command of this client to that node was lost or not sent */

/* ---- the protected resource, and the fences handed out ---- */
byte res;        /* the highest fence the resource accepted (scripts/lua/fenced-set.lua) */
byte last_fence; /* the highest fence handed out so far */
#ifdef FENCED
byte nseq;  /* locks handed out so far: the order of the holders (the model's, not the client's) */
byte lseq[C]; /* which of them each client holds */
byte wseq;  /* the latest (in that order) holder whose write the resource accepted */
bool ovl[C]; /* another client acquired while this one had checked its validity (a pause) */
#endif

/* ---- the nemesis's budget ---- */
byte crashes = CRASHES;
byte resets = RESETS;
byte slow = SLOW;
byte delays = DELAYS;

/* scratch, not part of the state (a breadth-first search, -DBFS, cannot hide them) */
HIDDEN byte ti, tj, tk, tv, te, tb;

#define IN_ROUND(c) (ph[c] == P_ATTEMPT || ph[c] == P_WRITEBACK || ph[c] == P_EXTEND)
#define HOLDS(c) ((ph[c] == P_HOLD || ph[c] == P_EXTEND) && hl[c] > 0)

/* core/quorum.cpp decide(): a quorum of grants, or out of reach once the reason is known */
#define QUORUM(c) (nok[c] >= Q)
#define IMPOSSIBLE(c) \
  (nok[c] + npend[c] < Q && (nref[c] > N - Q || nref[c] + npend[c] <= N - Q))

/* A command of the current round is still queued for node n. */
#define CUR_AT(q, i) (rq[q].qlen > i && E_CUR(rq[q].e[i]))
#define IN_FLIGHT(c, n) \
  (CUR_AT(IX(c, n), 0) || CUR_AT(IX(c, n), 1) || CUR_AT(IX(c, n), 2) || CUR_AT(IX(c, n), 3))
#define ROOM(c, n, k) (rq[IX(c, n)].qlen + (k) <= QD)
#if N == 3
#define ROOM_ALL(c, k) (ROOM(c, 0, k) && ROOM(c, 1, k) && ROOM(c, 2, k))
#else
#define ROOM_ALL(c, k) \
  (ROOM(c, 0, k) && ROOM(c, 1, k) && ROOM(c, 2, k) && ROOM(c, 3, k) && ROOM(c, 4, k))
#endif
#ifdef FENCED
#define ATTEMPT_ROOM 3 /* SET, write-back, rollback */
#else
#define ATTEMPT_ROOM 2 /* SET, rollback */
#endif

/* ---------------------------------------------------------------- the invariants */

#if C == 2
#define EXCLUSION (!(HOLDS(0) && HOLDS(1)))
#else
#define EXCLUSION (!(HOLDS(0) && HOLDS(1)) && !(HOLDS(0) && HOLDS(2)) && !(HOLDS(1) && HOLDS(2)))
#endif
#define NO_KEY_LEFT_AT(cc, n) \
  &&!(ftok[cc] != 0 && rq[IX(cc, n)].qlen == 0 && !lost[cc].v[n] && key[n] == ftok[cc])
#define NO_KEY_LEFT (1 PAIRS(NO_KEY_LEFT_AT))

/* Checked in every state the other processes reach (each of their steps is indivisible). */
active proctype Monitor() {
end:
  do
  :: assert(EXCLUSION); assert(NO_KEY_LEFT)
  od
}

/* ---------------------------------------------------------------- nodes */

inline drop_queue(c, n) {
  if
  :: rq[IX(c, n)].qlen > 0 -> lost[c].v[n] = 1
  :: else
  fi;
  rq[IX(c, n)].qlen = 0;
  for (tk : 0 .. QD - 1) {
    rq[IX(c, n)].e[tk] = 0
  }
  conn[c].v[n] = 0
}

/* kill -9. With persistence (appendonly yes + appendfsync always) the keys (with their absolute
 * expiry) and counters come back; without, they are lost. Every connection to it drops: what is
 * queued there never runs. */
inline crash(n, keep) {
  printf("MSC: n%d CRASHES (data kept: %d)\n", n, keep);
  up[n] = 0;
  if
  :: !keep -> key[n] = 0; krem[n] = 0; ctr[n] = 0
  :: else
  fi;
  for (tj : 0 .. C - 1) {
    drop_queue(tj, n)
  }
  skip
}

inline restart(n) {
  printf("MSC: n%d restarts (new run_id)\n", n);
  up[n] = 1;
  inc[n]++;
  age[n] = 0
}

/* ---------------------------------------------------------------- clients */

inline set_vote(c, n, s) {
  if
  :: vs[c].v[n] == V_OK -> nok[c]--
  :: vs[c].v[n] == V_REF -> nref[c]--
  :: vs[c].v[n] == V_PEND -> npend[c]--
  :: else
  fi;
  vs[c].v[n] = s;
  if
  :: s == V_OK -> nok[c]++
  :: s == V_REF -> nref[c]++
  :: s == V_PEND -> npend[c]++
  :: else
  fi
}

/* (Re)connect: the handshake's INFO gives the server's run_id before the answer to any command
 * on the connection (net/standalone.cpp, hs_info); when it changed, the restart guard excludes
 * the node's votes until one quarantine after the server came up (RestartGuard::observe). */
inline connect(c, n) {
  if
  :: conn[c].v[n] != inc[n] + 1 ->
#if !defined(MUT_NO_GUARD) && !defined(DURABLE)
    if
    :: kinc[c].v[n] != inc[n] && age[n] < QUAR ->
      ql[c].v[n] = QUAR - age[n];
      printf("MSC: c%d: restart guard: n%d restarted, votes excluded %d ticks\n", c, n, ql[c].v[n])
    :: else
    fi;
#endif
    kinc[c].v[n] = inc[n];
    conn[c].v[n] = inc[n] + 1
  :: else
  fi
}

/* Operation::send: a node that is down gets nothing (not_sent). */
inline send(c, n, op, cur, arg) {
  if
  :: up[n] ->
    connect(c, n);
    rq[IX(c, n)].e[rq[IX(c, n)].qlen] = ENC(op, cur, arg);
    rq[IX(c, n)].qlen++
  :: else
  fi
}

/* Answers to the commands sent so far are no longer looked at (the round was decided:
 * Round::close; or a new one started: AcquireOp's round number grew). */
inline stale(c) {
  for (tj : 0 .. N - 1) {
    for (tk : 0 .. QD - 1) {
      if
      :: tk < rq[IX(c, tj)].qlen && E_CUR(rq[IX(c, tj)].e[tk]) ->
        rq[IX(c, tj)].e[tk] = rq[IX(c, tj)].e[tk] - 16
      :: else
      fi
    }
  }
  skip
}

inline close_round(c) {
  stale(c);
  for (tj : 0 .. N - 1) {
    vs[c].v[tj] = V_NONE
  }
  nok[c] = 0;
  nref[c] = 0;
  npend[c] = 0;
  el[c] = 0
}

/* A round: the command to every node at once; a node that is down is no vote at once. */
inline broadcast_round(c, op, arg) {
  for (tj : 0 .. N - 1) {
    if
    :: up[tj] -> set_vote(c, tj, V_PEND); send(c, tj, op, 1, arg)
    :: else -> set_vote(c, tj, V_FAIL)
    fi
  }
}

/* A token that no key, command or bookkeeping of this client carries any more is as good as a
 * fresh one: nothing can tell it from one never used (core/token.cpp make_token). */
inline fresh_token(c) {
  tv = 0;
  for (ti : 0 .. TOKS - 1) {
    if
    :: tv == 0 ->
      tb = (c * TOKS + ti + 1 != tok[c] && c * TOKS + ti + 1 != ftok[c]);
      for (tj : 0 .. N - 1) {
        tb = tb && key[tj] != c * TOKS + ti + 1;
        for (tk : 0 .. QD - 1) {
          tb = tb && !(tk < rq[IX(c, tj)].qlen && E_OP(rq[IX(c, tj)].e[tk]) != OP_RAISE &&
                       E_ARG(rq[IX(c, tj)].e[tk]) == c * TOKS + ti + 1)
        }
      }
      if
      :: tb -> tv = c * TOKS + ti + 1
      :: else
      fi
    :: else
    fi
  }
}

/* Attempts and acquisitions counted for the budget; the waiter of -DLIVENESS, whose budget is
 * endless, does not count (a count that grows for ever would make the state space endless). */
#ifdef LIVENESS
#define COUNT(x) if :: c != 0 -> x++ :: else fi
#else
#define COUNT(x) x++
#endif

/* AcquireOp::start_attempt: a fresh token, t1, the SET to every node */
inline start_attempt(c) {
  fresh_token(c);
  if
  :: tv != 0 ->
    COUNT(att[c]);
    tok[c] = tv;
    fmax[c] = 0;
    fcnt[c] = 0;
    ph[c] = P_ATTEMPT;
    stale(c);
    el[c] = 0;
    printf("MSC: c%d: attempt %d, token %d: SET to every node\n", c, att[c], tok[c]);
    broadcast_round(c, OP_ACQ, tok[c])
  :: else /* no token free (not reached with TOKS = 3): the client waits */
  fi
}

/* AcquireOp::fail_attempt: roll back on every node (also those that timed out or have not
 * answered: their SET may still run, and the rollback runs after it on the same connection),
 * then sleep (retry_delay) and try again while the budget allows. */
inline fail_attempt(c) {
  printf("MSC: c%d: attempt with token %d failed: rollback on every node\n", c, tok[c]);
  close_round(c);
  ftok[c] = tok[c];
  for (tj : 0 .. N - 1) {
#ifndef MUT_NO_ROLLBACK
    if
    :: up[tj] -> lost[c].v[tj] = 0; send(c, tj, OP_DEL, 0, tok[c])
    :: else -> lost[c].v[tj] = 1 /* not sent: not delivered */
    fi
#else
    lost[c].v[tj] = !up[tj]
#endif
  }
  tok[c] = 0;
  ph[c] = P_IDLE;
  sl[c] = 1
}

#ifdef MUT_NO_DRIFT
#define VALIDITY(c) (TTL - el[c])
#else
#define VALIDITY(c) (TTL - DRIFT - el[c]) /* core/quorum.cpp compute_validity() */
#endif

/* AcquireOp::attempt_decided / hand_out_fenced: validity = ttl - elapsed - drift > 0 */
inline hand_out(c) {
  tv = VALIDITY(c);
  close_round(c);
  ph[c] = P_HOLD;
  hl[c] = tv;
  COUNT(acq[c]);
  printf("MSC: c%d: HOLDS the lock (token %d, validity %d ticks, fence %d)\n", c, tok[c], tv,
         fmax[c]);
#ifdef FENCED
  fence[c] = fmax[c];
  /* fences strictly increase: a holder past its validity has a lower one than any later */
  assert(fence[c] > last_fence);
  last_fence = fence[c];
  nseq++;
  lseq[c] = nseq;
  for (tj : 0 .. C - 1) {
    if
    :: tj != c && chk[tj] -> ovl[tj] = 1
    :: else
    fi
  }
#endif
}

/* Fencing, second round (Phase::fence_writeback): raise the counter to the fence on a quorum.
 * t1 stays the attempt's: the validity counts from before the SETs. */
inline start_writeback(c) {
  printf("MSC: c%d: fence %d on %d nodes only: write-back round\n", c, fmax[c], fcnt[c]);
  ph[c] = P_WRITEBACK;
  stale(c);
  broadcast_round(c, OP_RAISE, fmax[c])
}

#if defined(FENCED) && !defined(MUT_NO_WRITEBACK)
/* CounterMax::on_quorum: where a quorum's counters stand at the fence, nothing to raise */
#define FENCE_STANDS(c) (ph[c] == P_WRITEBACK || fcnt[c] >= Q)
#else
#define FENCE_STANDS(c) 1
#endif
#define ACQUIRING(c) (ph[c] == P_ATTEMPT || ph[c] == P_WRITEBACK)

/* Decides every round that can be decided now (a decision may start the next round). */
inline evaluate(c) {
  do
  :: ACQUIRING(c) && QUORUM(c) && FENCE_STANDS(c) && VALIDITY(c) > 0 -> hand_out(c)
  :: ph[c] == P_ATTEMPT && QUORUM(c) && !FENCE_STANDS(c) -> start_writeback(c)
  :: ACQUIRING(c) && (IMPOSSIBLE(c) || (QUORUM(c) && FENCE_STANDS(c) && VALIDITY(c) <= 0)) ->
    fail_attempt(c) /* no quorum, or Errc::expired: validity used up */
  :: ph[c] == P_EXTEND && QUORUM(c) ->
    /* ExtendOp::evaluate: validity from the extend's own t1 */
    if
    :: TTL - DRIFT - el[c] > 0 -> hl[c] = TTL - DRIFT - el[c]
    :: else
    fi;
    printf("MSC: c%d: extended, validity %d ticks\n", c, hl[c]);
    close_round(c);
    ph[c] = P_HOLD
  :: ph[c] == P_EXTEND && IMPOSSIBLE(c) ->
    printf("MSC: c%d: extend failed\n", c);
    close_round(c);
    ph[c] = P_HOLD /* a failed extend does not release: the caller decides */
  :: else -> break
  od;
  skip /* (a d_step may not end in a loop's exit) */
}

/* An answer from node n to the current round: the first one counts (Round::record); a grant
 * only if the restart guard lets the node vote now (Operation::outcome). */
inline receive(c, n) {
  printf("MSC: c%d: answer from n%d: %d (1 refused, 2+ granted), quarantined %d\n", c, n, tv,
         ql[c].v[n]);
  if
  :: vs[c].v[n] == V_PEND ->
    if
    :: tv == R_REF -> set_vote(c, n, V_REF)
    :: tv >= R_OK && ql[c].v[n] > 0 -> set_vote(c, n, V_FAIL) /* excluded */
    :: tv >= R_OK && ql[c].v[n] == 0 ->
      set_vote(c, n, V_OK);
      if
      :: ph[c] == P_ATTEMPT && tv - R_OK > fmax[c] -> fmax[c] = tv - R_OK; fcnt[c] = 1
      :: ph[c] == P_ATTEMPT && tv - R_OK == fmax[c] -> fcnt[c]++
      :: else
      fi
    fi
  :: else
  fi
}

/* ReleaseOp: compare-and-delete on every node; the holder stops holding when it sends it. */
inline release(c) {
  printf("MSC: c%d: releases (token %d)\n", c, tok[c]);
  for (tj : 0 .. N - 1) {
    send(c, tj, OP_DEL, 0, tok[c])
  }
  tok[c] = 0;
  ph[c] = P_IDLE;
  hl[c] = 0;
  chk[c] = 0;
#ifdef FENCED
  ovl[c] = 0
#endif
}

/* Runs the first command queued on connection (c, n) on node n, as the scripts of
 * core/scripts.cpp do (Redis runs a script to its end); its answer is in tv (0: none). */
inline node_run(c, n) {
  te = rq[IX(c, n)].e[0];
  for (tk : 1 .. QD - 1) {
    rq[IX(c, n)].e[tk - 1] = rq[IX(c, n)].e[tk]
  }
  rq[IX(c, n)].e[QD - 1] = 0;
  rq[IX(c, n)].qlen--;
  tv = 0;
  tb = (fast[n] -> TTL - DRIFT : TTL); /* the key's ttl in ticks of the clients' clock */
  if
  :: E_OP(te) == OP_ACQ ->
    if
    :: key[n] == 0 ->
      key[n] = E_ARG(te);
      krem[n] = tb;
      printf("MSC: n%d: SET NX token %d from c%d: set, lives %d ticks\n", n, E_ARG(te), c, tb);
#ifdef FENCED
      /* acquire_fenced: INCR the counter; a missing one starts from the clock */
      if
      :: ctr[n] == 0 -> ctr[n] = fclk
      :: else
      fi;
      ctr[n]++;
      fclk = MAX(fclk, ctr[n]);
      tv = R_OK + ctr[n]
#else
      tv = R_OK
#endif
    :: else ->
      tv = R_REF;
      printf("MSC: n%d: SET NX token %d from c%d: refused (held by token %d)\n", n, E_ARG(te), c,
             key[n])
    fi
  :: E_OP(te) == OP_DEL ->
    if
    :: key[n] == E_ARG(te) ->
      key[n] = 0;
      krem[n] = 0;
      printf("MSC: n%d: delete token %d from c%d: deleted\n", n, E_ARG(te), c)
    :: else -> printf("MSC: n%d: delete token %d from c%d: not held\n", n, E_ARG(te), c)
    fi
  :: E_OP(te) == OP_EXT ->
    if
    :: key[n] == E_ARG(te) ->
      krem[n] = tb;
      tv = R_OK;
      printf("MSC: n%d: extend token %d from c%d: lives %d ticks\n", n, E_ARG(te), c, tb)
    :: else -> tv = R_REF; printf("MSC: n%d: extend token %d from c%d: not held\n", n, E_ARG(te), c)
    fi
  :: E_OP(te) == OP_RAISE ->
    ctr[n] = MAX(ctr[n], E_ARG(te)); /* fence_raise: counters only ever grow */
    fclk = MAX(fclk, ctr[n]);
    tv = R_OK;
    printf("MSC: n%d: raise fence counter to %d for c%d: now %d\n", n, E_ARG(te), c, ctr[n])
  fi;
  skip
}

/* The answer reaches the client. Only an answer to a command of the current round is looked at
 * (AcquireOp's round number; Round::close), at once (docs/model.md: "Answers"). */
inline answer(c, n) {
  if
  :: tv != 0 && E_CUR(te) -> receive(c, n); evaluate(c)
  :: else
  fi
}


#ifdef LIVENESS
/* The waiter (client 0) tries for ever; the others take the lock MAXACQ times. */
#define BUDGET(c) (c == 0 || (att[c] < MAXATT && acq[c] < MAXACQ))
#else
#define BUDGET(c) (att[c] < MAXATT && acq[c] < MAXACQ)
#endif
#ifdef KLEPPMANN
/* The scenario, to keep the search short: client 1 tries only once client 0 holds the lock and
 * has checked its validity (it is about to write); client 0 writes before it releases. */
#define SCENARIO(c) (c == 0 || chk[0])
#define MAY_RELEASE(c) (c != 0 || !chk[0])
#else
#define SCENARIO(c) 1
#define MAY_RELEASE(c) 1
#endif
#define CAN_START(c) \
  (ph[c] == P_IDLE && sl[c] == 0 && BUDGET(c) && ROOM_ALL(c, ATTEMPT_ROOM) && SCENARIO(c))

/* node_timeout: free when the answer is gone for good (a lost command, a crashed node); the
 * timeout of a command still on its way uses the budget `slow` (else every round could time
 * out, which says no more than that the network is down). */
#define TIMEOUT(n) \
  ::d_step { \
    vs[c].v[n] == V_PEND && (!IN_FLIGHT(c, n) || slow > 0)->if \
    ::IN_FLIGHT(c, n)->slow-- \
    ::else \
    fi; \
    set_vote(c, n, V_FAIL); \
    printf("MSC: c%d: n%d timed out\n", c, n); \
    evaluate(c) \
  }

proctype Client(byte c) {
end:
  do
  :: d_step { CAN_START(c) -> start_attempt(c); evaluate(c) }
  NODES(TIMEOUT)
  :: d_step {
       HOLDS(c) && nxt[c] < MAXEXT && ROOM_ALL(c, 2) ->
         nxt[c]++;
         printf("MSC: c%d: extends\n", c);
         ph[c] = P_EXTEND;
         stale(c);
         el[c] = 0;
         broadcast_round(c, OP_EXT, tok[c]);
         evaluate(c)
     }
  :: d_step { ph[c] == P_HOLD && ROOM_ALL(c, 1) && MAY_RELEASE(c) -> release(c) }
#ifdef FENCED
  /* the holder checks its validity and is about to write; a pause may come in between */
  :: d_step {
       HOLDS(c) && !chk[c] ->
         chk[c] = 1;
         printf("MSC: c%d: validity left, about to write with fence %d\n", c, fence[c])
     }
  :: d_step {
       chk[c] ->
         chk[c] = 0;
         if
#ifdef MUT_NO_FENCE_CHECK
         :: true ->
#else
         :: fence[c] >= res -> /* fenced-set.lua: a fence not older than the highest seen */
#endif
           printf("MSC: c%d: resource accepts the write with fence %d (validity left %d)\n", c,
                  fence[c], hl[c]);
           /* no stale write: none from a holder older than one whose write was taken */
           assert(lseq[c] >= wseq);
           res = MAX(res, fence[c]);
           wseq = lseq[c]
         :: else ->
           printf("MSC: c%d: resource REFUSES the write with fence %d (it saw %d; validity left %d)\n",
                  c, fence[c], res, hl[c]);
#ifdef KLEPPMANN
           /* the trace: this holder was paused past its validity while another acquired */
           assert(!ovl[c])
#else
           skip
#endif
         fi;
         ovl[c] = 0
     }
#endif
  od
}

/* The network delivers any queued command, in each connection's order, whenever it likes: a
 * delay is a command (or answer) that waits while other steps and ticks happen. */
#define DELIVER(cc, n) \
  ::d_step { \
    up[n] && rq[IX(cc, n)].qlen > 0->node_run(cc, n); \
    answer(cc, n) \
  }

proctype Net() {
end:
  do
  PAIRS(DELIVER)
  od
}

/* One tick of the clients' clock: keys expire on their nodes' clocks; deadlines, sleeps,
 * quarantines and elapsed times move. */
inline tick() {
  printf("MSC: tick\n");
  for (tj : 0 .. N - 1) {
    if
    :: key[tj] != 0 ->
      krem[tj]--;
      if
      :: krem[tj] == 0 -> key[tj] = 0
      :: else
      fi
    :: else
    fi;
    if
    :: up[tj] && age[tj] < QUAR -> age[tj]++
    :: else
    fi
  }
  for (ti : 0 .. C - 1) {
    if
    :: el[ti] < TTL && IN_ROUND(ti) -> el[ti]++
    :: else
    fi;
    if
    :: hl[ti] > 0 -> hl[ti]--
    :: else
    fi;
    if
    :: sl[ti] > 0 -> sl[ti]--
    :: else
    fi;
    for (tj : 0 .. N - 1) {
      if
      :: ql[ti].v[tj] > 0 -> ql[ti].v[tj]--
      :: else
      fi
    }
  }
  skip
}

#ifdef LIVENESS
/* Eventual synchrony: before it, rounds may take any number of ticks (DELAYS of them in all);
 * after it, a round ends within the tick it started in. */
#if C == 2
#define ROUND_OUT (npend[0] > 0 || npend[1] > 0)
#else
#define ROUND_OUT (npend[0] > 0 || npend[1] > 0 || npend[2] > 0)
#endif
proctype Clock() {
end:
  do
  :: d_step { !ROUND_OUT -> tick() }
  :: d_step { ROUND_OUT && delays > 0 -> delays--; tick() }
  od
}
#else
proctype Clock() {
end:
  do
  :: d_step { true -> tick() }
  od
}
#endif

/* Crashes (with or without the data; restarted at once or later) and connection resets (what
 * is queued is lost; the first command may have run before). */
#ifdef DURABLE
#define CRASH(n) \
  ::d_step { \
    crashes > 0 && up[n]->crashes--; \
    crash(n, 1) \
  }
#else
#define CRASH(n) \
  ::d_step { \
    crashes > 0 && up[n]->crashes--; \
    crash(n, 0) \
  } \
  ::d_step { \
    crashes > 0 && up[n]->crashes--; \
    crash(n, 1) \
  }
#endif
#define RESTART(n) \
  ::d_step { \
    !up[n]->restart(n) \
  }
#define RESET(cc, n) \
  ::d_step { \
    resets > 0 && rq[IX(cc, n)].qlen > 0->resets--; \
    printf("MSC: connection c%d-n%d reset\n", cc, n); \
    drop_queue(cc, n) \
  } \
  ::d_step { \
    resets > 0 && rq[IX(cc, n)].qlen > 0->resets--; \
    node_run(cc, n); \
    printf("MSC: connection c%d-n%d reset\n", cc, n); \
    drop_queue(cc, n) \
  }

proctype Nemesis() {
end:
  do
  NODES(CRASH)
  NODES(RESTART)
  PAIRS(RESET)
  od
}


init {
  atomic {
    /* how many nodes' clocks run fast (as fast as the drift bound allows); which ones does not
     * matter, the nodes being alike; -DFAST_NODES=k fixes it, to shrink a check that needs no
     * drift) */
#ifdef FAST_NODES
    tb = FAST_NODES;
#else
    if
    :: tb = 0
    :: tb = 1
    :: tb = Q
    :: tb = N
    fi;
#endif
    d_step {
      for (ti : 0 .. N - 1) {
        fast[ti] = (ti < tb);
        up[ti] = 1;
        age[ti] = QUAR; /* up long before the run */
        for (tj : 0 .. C - 1) {
          conn[tj].v[ti] = 1
        }
      }
      skip
    }
    run Clock();
    run Net();
    run Nemesis();
    run Client(0);
    run Client(1);
#if C > 2
    run Client(2)
#endif
  }
}

#ifdef LIVENESS
#define WAITING (ph[0] == P_IDLE || ph[0] == P_ATTEMPT || ph[0] == P_WRITEBACK)
ltl waiter_served { [] (WAITING -> <> (ph[0] == P_HOLD)) }
#endif
