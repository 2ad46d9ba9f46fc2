/*
 * The fair lock (AcquireOptions::fair, with wake-ups) for SPIN: tickets taken over a quorum
 * (max over the replies, written back where the counts differ), the queue on every node with
 * heartbeats, attempts that win only for the first in line, the rollback that keeps the place,
 * leaving, and the direct handoff: a release hands the lock to the first waiter that registered a
 * token, and a ticket round grants it where the key is free and the waiter first in line.
 *
 * The hint rule (algorithm.md hazard 10, issue 40 item 2): a handoff *message* (PUBLISH) only
 * makes the waiter try at once; the confirming round is its own attempt (acquire_fair takes a key
 * a release set to the waiter's registered token as granted where nobody is queued below its
 * ticket), and only the replies of a round count. The ticket round's own grants are replies:
 * counted at its decision where the node's count was the agreed ticket (take_ticket_grant).
 * -DMUT_TRUST_HINT is the library before that fix (dc777f0): a quorum of handoff messages naming
 * the latest registration is the lock. With -DFORGER a principal that may PUBLISH (and read the
 * queue and `handoff` keys) sends waiters handoff messages whenever it likes.
 *
 * Properties:
 *  - mutual exclusion while validity lasts (Monitor);
 *  - FIFO: a waiter whose ticket was agreed before another's ticket round started gets the lock
 *    first, unless it gave up, or a fault (a lost command, a lapsed heartbeat) happened (hold());
 *  - no key left: once the commands of a waiter that gave up were delivered to a node, no key of
 *    its (an attempt's or a registration's) is left there (Monitor).
 * Mutations (each must give a counterexample; scripts/model.sh checks that it does):
 *  MUT_TRUST_HINT         (with FORGER) handoff messages count as the lock
 *  MUT_NO_TICKET_AGREE    the ticket is not agreed: no write-back, no settle, and a grant counts
 *                         wherever the node placed the waiter: with three clients a later waiter
 *                         agrees the same ticket as an earlier one and wins the tie
 *                         (-DLAGGING_COUNTER restricts the schedule so that a search finds it)
 *  MUT_FIFO_BY_WAITER     the queue is ordered by waiter name, not by ticket: a waiter that
 *                         came later but sorts first is served first (FIFO is not vacuous)
 * docs/model.md maps each step to the file and function of the library that does it.
 */

#include "common.pml"

#ifndef QD
#define QD 5 /* commands queued per connection */
#endif
#ifndef MAXSER
#define MAXSER 4 /* registrations per client (each ticket round and attempt makes one) */
#endif
#ifndef MAXACQ
#define MAXACQ 1 /* acquisitions per client */
#endif
#ifndef RESETS
#define RESETS 0 /* connection resets: the commands queued on it are lost */
#endif
#ifndef SLOW
#define SLOW 1 /* timeouts of a command still on its way */
#endif
#ifndef LAPSES
#define LAPSES 0 /* a waiter's heartbeat lapses on a node (a paused waiter) */
#endif
#ifndef LOSSES
#define LOSSES 0 /* pub/sub messages lost */
#endif

/* Client phases (AcquireOp::Phase, the confirming round, and the holder's) */
#define F_IDLE 0    /* before an acquisition */
#define F_TICKET 1  /* Phase::ticket */
#define F_TWB 2     /* Phase::ticket_writeback */
#define F_ATTEMPT 3 /* Phase::attempt */
#define F_SLEEP 4   /* Phase::sleeping: waits for its turn, polls, or hears a handoff */
#define F_HOLD 6
#define F_DONE 7

/* Commands (core/scripts.cpp), with the flags of the answer the client waits for */
#define OP_TAKE 1   /* ticket_take (a: serial of the registration; t: 1 = grant if free) */
#define OP_SETTLE 2 /* fence_raise on the ticket counter and the queue (t: the ticket) */
#define OP_ACQF 3   /* acquire_fair (a: serial, whose attempt token it also names; t: ticket) */
#define OP_FRB 4    /* fair_rollback (a: the attempt's serial; t: ticket) */
#define OP_LEAVE 5  /* fair_leave (a: the token of the lock acquired, 0 if none) */
#define OP_REL 6    /* release (a: token; t: 1 if the lock was handed over: its registration
                       goes with it) */
#define CUR 8       /* flag: answer to the current round */
#define TKR 16      /* flag: answer to the latest ticket round (a late one still counts) */
#define C_OP(x) ((x) % 8)

/* Tokens: (client + 1) * 64 + serial for an attempt (each attempt makes a registration),
 * + 32 for the registration's own token. */
#define ATOK(c, s) (((c) + 1) * 64 + (s))
#define RTOK(c, s) (((c) + 1) * 64 + 32 + (s))
#define OWNER(k) ((k) / 64 - 1)

#define IX(c, n) ((c) * N + (n))

typedef Row {
  byte v[N]
};
typedef Crow {
  byte v[C]
};
typedef Cmd {
  byte cop;
  byte ca;
  byte ct
};
typedef Queue {
  Cmd e[QD];
  byte qlen
};

/* ---- nodes ---- */
bool fast[N];
byte key[N];
byte krem[N];
byte tctr[N]; /* the ticket counter */
Crow qs[N];   /* the queue: waiter -> score (0: not queued); ties go by waiter (client) */
Crow hb[N];   /* heartbeats: 0 none, 1 live, 2 lapsed */
Crow reg[N];  /* handoff registrations: waiter -> serial (0: none) */

/* ---- connections ---- */
Queue rq[C * N];
Row inbox[C]; /* pub/sub: the serial of the last handoff message from each node (0: none) */

/* ---- clients (waiter ids are the clients') ---- */
byte ph[C];
byte el[C];  /* ticks since the current round's t1 */
byte rel[C]; /* ticks since the latest registration was sent (its t1) */
Row vs[C];
byte nok[C];
byte nref[C];
byte npend[C];
byte serial[C];  /* latest registration */
byte tserial[C]; /* the ticket round's */
byte ticket[C];  /* agreed ticket (0: not yet) */
byte tkmax[C];   /* CounterMax over the ticket round's replies */
byte tkcnt[C];
Row tkat[C];    /* each node's count in the ticket round (0: no reply) */
byte behind[C]; /* nodes that said someone is ahead */
bool need_ticket[C];
Row gr[C];      /* grants under the latest registration: 0 none, 1 unjudged, 2 counted, 3 not
                   (the ticket round's replies; with MUT_TRUST_HINT also handoff messages) */
byte ngr[C];    /* counted */
byte htok[C];   /* the lock's token */
bool handed[C]; /* the lock came by a handoff (its release takes the registration too) */
byte hl[C];
byte acq[C];
bool gaveup[C];
Row lost[C];
/* FIFO bookkeeping: agreed[x] (x waits with an agreed ticket), aheadof[y].v[x] (x's ticket was
 * agreed before y's ticket round began, and x still waits) */
bool agreed[C];
Crow aheadof[C];
bool faulted;

byte resets = RESETS;
byte slow = SLOW;
byte lapses = LAPSES;
byte losses = LOSSES;

/* scratch, not part of the state (a breadth-first search, -DBFS, cannot hide them) */
HIDDEN byte ti, tj, tk, tv, tw, tb, th;

#define IN_ROUND(c) (ph[c] == F_TICKET || ph[c] == F_TWB || ph[c] == F_ATTEMPT)
#define HOLDS(c) (ph[c] == F_HOLD && hl[c] > 0)
#define QUORUM(c) (nok[c] >= Q)
#define IMPOSSIBLE(c) \
  (nok[c] + npend[c] < Q && (nref[c] > N - Q || nref[c] + npend[c] <= N - Q))
#define ROOM(c, n, k) (rq[IX(c, n)].qlen + (k) <= QD)
#if N == 3
#define ROOM_ALL(c, k) (ROOM(c, 0, k) && ROOM(c, 1, k) && ROOM(c, 2, k))
#else
#define ROOM_ALL(c, k) \
  (ROOM(c, 0, k) && ROOM(c, 1, k) && ROOM(c, 2, k) && ROOM(c, 3, k) && ROOM(c, 4, k))
#endif
#define VALID_FROM(t) (TTL - DRIFT - (t)) /* compute_validity() */

/* ---------------------------------------------------------------- the invariants */

#if C == 2
#define EXCLUSION (!(HOLDS(0) && HOLDS(1)))
#else
#define EXCLUSION (!(HOLDS(0) && HOLDS(1)) && !(HOLDS(0) && HOLDS(2)) && !(HOLDS(1) && HOLDS(2)))
#endif
#define NO_KEY_LEFT_AT(cc, n) \
  &&!(gaveup[cc] && rq[IX(cc, n)].qlen == 0 && !lost[cc].v[n] && key[n] != 0 && \
      OWNER(key[n]) == cc)
#define NO_KEY_LEFT (1 PAIRS(NO_KEY_LEFT_AT))

active proctype Monitor() {
end:
  do
  :: assert(EXCLUSION); assert(NO_KEY_LEFT)
  od
}

/* ---------------------------------------------------------------- node scripts */

/* th := the first waiter in line on node n (C: none), by score, then waiter */
inline head(n) {
  th = C;
  for (tj : 0 .. C - 1) {
    if
#ifdef MUT_FIFO_BY_WAITER
    :: qs[n].v[tj] != 0 && th == C -> th = tj
#else
    :: qs[n].v[tj] != 0 && (th == C || qs[n].v[tj] < qs[n].v[th]) -> th = tj
#endif
    :: else
    fi
  }
}

/* waiters whose heartbeat lapsed leave the queue, the heartbeats and the registrations */
inline drop_lapsed(n) {
  for (tj : 0 .. C - 1) {
    if
    :: hb[n].v[tj] == 2 -> qs[n].v[tj] = 0; hb[n].v[tj] = 0; reg[n].v[tj] = 0
    :: else
    fi
  }
}

/* tb := nobody but w is queued on node n below ticket t */
inline nobody_below(n, w, t) {
  tb = 1;
  for (tj : 0 .. C - 1) {
    if
    :: tj != w && qs[n].v[tj] != 0 && qs[n].v[tj] < t -> tb = 0
    :: else
    fi
  }
}

/* acquire_fair's won() */
inline won(n, w) {
  qs[n].v[w] = 0;
  hb[n].v[w] = 0;
  reg[n].v[w] = 0
}

/* tb := the key is a token w registered here (a release handed it over) */
#define MINE(n, w) (reg[n].v[w] != 0 && key[n] == RTOK(w, reg[n].v[w]))
#define LIFE(n) (fast[n] -> TTL - DRIFT : TTL)

/* Runs the first command of connection (w, n); tv := its answer (0 none, 1 no, 2 yes; for
 * ticket_take 16 * behind + count), tw := the command's op byte. `listening`: the first waiter's
 * client listens on its channel (PUBSUB NUMSUB > 0), so a release may hand it the lock. */
inline node_run(w, n, listening) {
  tw = rq[IX(w, n)].e[0].cop;
  ti = rq[IX(w, n)].e[0].ca;
  tk = rq[IX(w, n)].e[0].ct;
  for (tj : 1 .. QD - 1) {
    rq[IX(w, n)].e[tj - 1].cop = rq[IX(w, n)].e[tj].cop;
    rq[IX(w, n)].e[tj - 1].ca = rq[IX(w, n)].e[tj].ca;
    rq[IX(w, n)].e[tj - 1].ct = rq[IX(w, n)].e[tj].ct
  }
  rq[IX(w, n)].e[QD - 1].cop = 0;
  rq[IX(w, n)].e[QD - 1].ca = 0;
  rq[IX(w, n)].e[QD - 1].ct = 0;
  rq[IX(w, n)].qlen--;
  tv = 0;
  if
  :: C_OP(tw) == OP_TAKE ->
    /* ticket_take */
    tb = MINE(n, w);
    tctr[n]++;
    drop_lapsed(n);
    qs[n].v[w] = tctr[n]; /* placed at this node's own count */
    hb[n].v[w] = 1;
    reg[n].v[w] = ti;
    head(n);
    if
    :: (!tb && key[n] != 0) || th != w ->
      tv = 16 + tctr[n]; /* behind */
      if
      :: tb -> key[n] = 0 /* a key handed under an older registration goes back */
      :: else
      fi
    :: else ->
      if
      :: tk ->
        key[n] = RTOK(w, ti); /* granted with the ticket round itself */
        krem[n] = LIFE(n);
        qs[n].v[w] = 0;
        tv = 32 + tctr[n];
        printf("MSC: n%d: ticket %d for c%d, key free, first: granted\n", n, tctr[n], w)
      :: else ->
        if
        :: tb -> key[n] = 0
        :: else
        fi;
        tv = tctr[n]
      fi
    fi;
    printf("MSC: n%d: ticket_take by c%d: count %d, answer %d\n", n, w, tctr[n], tv)
  :: C_OP(tw) == OP_SETTLE ->
    tctr[n] = MAX(tctr[n], tk);
    if
    :: qs[n].v[w] != 0 -> qs[n].v[w] = tk
    :: else
    fi;
    tv = 2;
    printf("MSC: n%d: settle c%d at ticket %d\n", n, w, tk)
  :: C_OP(tw) == OP_ACQF ->
    /* acquire_fair */
    head(n);
    if
    :: th == w && qs[n].v[w] == tk && key[n] == 0 ->
      key[n] = ATOK(w, ti);
      krem[n] = LIFE(n);
      won(n, w);
      tv = 2
    :: else ->
      if
      :: MINE(n, w) ->
        /* handed over before: taken as this attempt's grant, unless someone with a lower
         * ticket is queued here; waiters whose heartbeat lapsed are dropped first only when
         * someone is (nobody below: nothing to drop that could change the answer) */
        nobody_below(n, w, tk);
        if
        :: !tb -> drop_lapsed(n); nobody_below(n, w, tk)
        :: else
        fi;
        if
        :: tb -> key[n] = ATOK(w, ti); krem[n] = LIFE(n); won(n, w); tv = 2
        :: else -> key[n] = 0
        fi
      :: else -> drop_lapsed(n)
      fi;
      if
      :: tv == 0 ->
        qs[n].v[w] = tk;
        hb[n].v[w] = 1;
        reg[n].v[w] = ti;
        head(n);
        if
        :: th == w && key[n] == 0 -> key[n] = ATOK(w, ti); krem[n] = LIFE(n); won(n, w); tv = 2
        :: else -> tv = 1
        fi
      :: else
      fi
    fi;
    printf("MSC: n%d: attempt of c%d (ticket %d): %d (2 granted)\n", n, w, tk, tv)
  :: C_OP(tw) == OP_FRB ->
    if
    :: key[n] == ATOK(w, ti) -> key[n] = 0; qs[n].v[w] = tk; hb[n].v[w] = 1
    :: else
    fi
  :: C_OP(tw) == OP_LEAVE ->
    tb = MINE(n, w) && RTOK(w, reg[n].v[w]) != ti;
    qs[n].v[w] = 0;
    hb[n].v[w] = 0;
    reg[n].v[w] = 0;
    if
    :: tb -> key[n] = 0; printf("MSC: n%d: c%d leaves, gives back the key handed to it\n", n, w)
    :: else -> printf("MSC: n%d: c%d leaves the queue\n", n, w)
    fi
  :: C_OP(tw) == OP_REL ->
    if
    :: key[n] == ti ->
      key[n] = 0;
      if
      :: tk -> hb[n].v[w] = 0; reg[n].v[w] = 0
      :: else
      fi;
      head(n);
      if
      :: th != C && reg[n].v[th] != 0 && hb[n].v[th] == 1 && listening ->
        key[n] = RTOK(th, reg[n].v[th]);
        krem[n] = LIFE(n);
        qs[n].v[th] = 0;
        inbox[th].v[n] = reg[n].v[th]; /* PUBLISH <waiter>/<hash>/<serial> */
        printf("MSC: n%d: release by c%d hands the lock to c%d (registration %d)\n", n, w, th,
               reg[n].v[th])
      :: else -> printf("MSC: n%d: release by c%d\n", n, w)
      fi
    :: else
    fi
  fi
}

inline drop_queue(c, n) {
  if
  :: rq[IX(c, n)].qlen > 0 -> lost[c].v[n] = 1
  :: else
  fi;
  rq[IX(c, n)].qlen = 0;
  for (tj : 0 .. QD - 1) {
    rq[IX(c, n)].e[tj].cop = 0;
    rq[IX(c, n)].e[tj].ca = 0;
    rq[IX(c, n)].e[tj].ct = 0
  }
  skip
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

inline send(c, n, op, a, t) {
  assert(rq[IX(c, n)].qlen < QD); /* (a bound of the model: the guards keep room) */
  rq[IX(c, n)].e[rq[IX(c, n)].qlen].cop = op;
  rq[IX(c, n)].e[rq[IX(c, n)].qlen].ca = a;
  rq[IX(c, n)].e[rq[IX(c, n)].qlen].ct = t;
  rq[IX(c, n)].qlen++
}

inline broadcast(c, op, a, t) {
  for (ti : 0 .. N - 1) {
    send(c, ti, op, a, t)
  }
  skip
}

/* answers to commands sent so far are not looked at (the ticket round's apart: flag TKR) */
inline close_round(c) {
  for (ti : 0 .. N - 1) {
    for (tj : 0 .. QD - 1) {
      if
      :: rq[IX(c, ti)].e[tj].cop & CUR -> rq[IX(c, ti)].e[tj].cop = rq[IX(c, ti)].e[tj].cop - CUR
      :: else
      fi
    }
    vs[c].v[ti] = V_NONE
  }
  nok[c] = 0;
  nref[c] = 0;
  npend[c] = 0;
  el[c] = 0
}

inline start_round(c, phase, op, a, t) {
  close_round(c);
  ph[c] = phase;
  for (ti : 0 .. N - 1) {
    set_vote(c, ti, V_PEND);
    send(c, ti, op + CUR, a, t)
  }
  skip
}

/* AcquireOp::new_registration: a new serial, its token, sent now; grants heard so far forgotten */
inline new_registration(c) {
  serial[c]++;
  rel[c] = 0;
  for (ti : 0 .. N - 1) {
    gr[c].v[ti] = 0
  }
  ngr[c] = 0
}

/* judge_grant: under the ticket round's registration a grant counts only where the node's
 * count was the agreed ticket (not known yet: judged when it is) */
inline judge(c, n) {
  if
  :: gr[c].v[n] == 1 && serial[c] == tserial[c] && ticket[c] != 0 && tkat[c].v[n] != 0 ->
#ifdef MUT_NO_TICKET_AGREE
    gr[c].v[n] = 2;
    ngr[c]++
#else
    if
    :: tkat[c].v[n] == ticket[c] -> gr[c].v[n] = 2; ngr[c]++
    :: else -> gr[c].v[n] = 3
    fi
#endif
  :: gr[c].v[n] == 1 && serial[c] != tserial[c] -> gr[c].v[n] = 2; ngr[c]++
  :: else
  fi
}

inline judge_all(c) {
  for (tk : 0 .. N - 1) {
    judge(c, tk)
  }
  skip
}

/* FIFO: x waited with an agreed ticket since before c's ticket round began */
inline fifo_note_ticket(c) {
  for (tk : 0 .. C - 1) {
    if
    :: tk != c && agreed[tk] -> aheadof[c].v[tk] = 1
    :: else
    fi
  }
  skip
}

/* c no longer waits (it holds the lock, or gave up) */
inline fifo_done(c) {
  agreed[c] = 0;
  for (tk : 0 .. C - 1) {
    aheadof[tk].v[c] = 0
  }
  skip
}

/* AcquireOp::start_ticket */
inline start_ticket(c) {
  need_ticket[c] = 0;
  behind[c] = 0;
  tkmax[c] = 0;
  tkcnt[c] = 0;
  ticket[c] = 0;
  agreed[c] = 0;
  for (ti : 0 .. N - 1) {
    tkat[c].v[ti] = 0;
    /* earlier ticket rounds' answers are no longer looked at */
    for (tj : 0 .. QD - 1) {
      if
      :: rq[IX(c, ti)].e[tj].cop & TKR -> rq[IX(c, ti)].e[tj].cop = rq[IX(c, ti)].e[tj].cop - TKR
      :: else
      fi
    }
  }
  new_registration(c);
  tserial[c] = serial[c];
  fifo_note_ticket(c);
  printf("MSC: c%d: ticket round, registration %d\n", c, serial[c]);
  start_round(c, F_TICKET, OP_TAKE + TKR, serial[c], 1)
}


/* AcquireOp::start_attempt (registers again) */
inline start_attempt(c) {
  new_registration(c);
  printf("MSC: c%d: attempt with ticket %d, registration %d\n", c, ticket[c], serial[c]);
  start_round(c, F_ATTEMPT, OP_ACQF, serial[c], ticket[c]);
  el[c] = 0
}

/* The lock is c's: tv = its validity, tw = its token. Nodes that did not grant (vs/gr) are told
 * to drop c from their queue (finish_waiting, fair_leave). */
inline hold(c, tokn, validity, by_handoff) {
  htok[c] = tokn;
  handed[c] = by_handoff;
  hl[c] = validity;
  acq[c]++;
  printf("MSC: c%d: HOLDS the lock (token %d, validity %d, ticket %d, handoff %d)\n", c, tokn,
         validity,
         ticket[c], by_handoff);
  assert(faulted || !(aheadof[c].v[0] || aheadof[c].v[1] || aheadof[c].v[C - 1]));
  fifo_done(c);
  ph[c] = F_HOLD
}

inline take_handoff(c) {
  if
  :: VALID_FROM(rel[c]) > 0 ->
    for (ti : 0 .. N - 1) {
      if
      :: gr[c].v[ti] != 2 -> send(c, ti, OP_LEAVE, RTOK(c, serial[c]), 0)
      :: else
      fi
    }
    close_round(c);
    hold(c, RTOK(c, serial[c]), VALID_FROM(rel[c]), 1)
  :: else ->
    /* registered too long ago: given back; the library joins the queue again as a new
     * waiter, the model stops this client */
    close_round(c);
    broadcast(c, OP_LEAVE, 0, 0);
    give_up(c)
  fi
}

inline give_up(c) {
  printf("MSC: c%d: gives up\n", c);
  fifo_done(c);
  /* lost[] keeps what was lost before: a rollback lost to a reset leaves the attempt's key until
   * its ttl (fair_leave gives back only a key handed to the registration), which the no-key-left
   * property does not claim (the deep check found the model forgetting it here) */
  gaveup[c] = 1;
  ph[c] = F_DONE
}

/* AcquireOp::fail_attempt (the rollback where the attempt may hold keys) and sleep */
inline fail(c) {
  if
  :: ph[c] == F_ATTEMPT -> broadcast(c, OP_FRB, serial[c], ticket[c])
  :: else
  fi;
  close_round(c);
  ph[c] = F_SLEEP
}

/* ticket_decided / ticket_writeback_decided -> ticket_agreed */
inline ticket_agreed(c) {
  agreed[c] = 1;
  if
  :: ngr[c] >= Q -> take_handoff(c)
  :: else ->
    close_round(c);
    ph[c] = F_SLEEP /* waits in line, or attempts at once (the sleeping client may start it) */
  fi
}

inline evaluate(c) {
  do
  :: ph[c] == F_TICKET && QUORUM(c) ->
    ticket[c] = tkmax[c];
    printf("MSC: c%d: ticket %d agreed (%d nodes at it)\n", c, ticket[c], tkcnt[c]);
    judge_all(c);
#ifdef MUT_NO_TICKET_AGREE
    ticket_agreed(c)
#else
    if
    :: tkcnt[c] >= Q ->
      /* the nodes that counted otherwise (or have not answered) are told the ticket */
      for (ti : 0 .. N - 1) {
        if
        :: tkat[c].v[ti] != ticket[c] -> send(c, ti, OP_SETTLE, 0, ticket[c])
        :: else
        fi
      }
      ticket_agreed(c)
    :: else -> start_round(c, F_TWB, OP_SETTLE, 0, ticket[c])
    fi
#endif
  :: ph[c] == F_TICKET && IMPOSSIBLE(c) -> need_ticket[c] = 1; fail(c)
  :: ph[c] == F_TWB && QUORUM(c) -> ticket_agreed(c)
  :: ph[c] == F_TWB && IMPOSSIBLE(c) -> need_ticket[c] = 1; fail(c)
  :: ph[c] == F_ATTEMPT && QUORUM(c) && VALID_FROM(el[c]) > 0 ->
    for (ti : 0 .. N - 1) {
      if
      :: vs[c].v[ti] != V_OK -> send(c, ti, OP_LEAVE, ATOK(c, serial[c]), 0)
      :: else
      fi
    }
    tv = VALID_FROM(el[c]);
    close_round(c);
    hold(c, ATOK(c, serial[c]), tv, 0)
  :: ph[c] == F_ATTEMPT && (IMPOSSIBLE(c) || (QUORUM(c) && VALID_FROM(el[c]) <= 0)) -> fail(c)
  :: else -> break
  od;
  skip
}

/* The answer to command tw (args ti, tk) of client c from node n, value tv. */
inline answer(c, n) {
  if
  :: C_OP(tw) == OP_TAKE && (tw & (CUR | TKR)) ->
    /* the ticket round's answer, in time or late (note_late_ticket) */
    if
    :: tkat[c].v[n] == 0 ->
      tkat[c].v[n] = tv % 16;
      if
      :: tw & CUR ->
        if
        :: tv % 16 > tkmax[c] -> tkmax[c] = tv % 16; tkcnt[c] = 1
        :: tv % 16 == tkmax[c] -> tkcnt[c]++
        :: else
        fi;
        if
        :: tv / 16 == 1 -> behind[c]++
        :: else
        fi
      :: else
      fi;
      if
      :: (tw & CUR) && tv / 16 == 2 && serial[c] == tserial[c] && gr[c].v[n] == 0 ->
        gr[c].v[n] = 1; /* FairPlace::ticket_reply: judged at the decision (take_ticket_grant); a late
                           grant is left to the attempt, which takes the handed key */
        judge(c, n)
      :: else
      fi
    :: else
    fi
  :: else
  fi;
  if
  :: (tw & CUR) && vs[c].v[n] == V_PEND ->
    if
    :: C_OP(tw) == OP_TAKE -> set_vote(c, n, V_OK)
    :: tv == 1 -> set_vote(c, n, V_REF)
    :: else -> set_vote(c, n, V_OK)
    fi;
    evaluate(c)
  :: else
  fi
}

#define CAN_RETRY(c) (ph[c] == F_SLEEP && serial[c] < MAXSER && ROOM_ALL(c, 3))

#ifdef LAGGING_COUNTER
/* The scenario in which the ticket agreement matters (MUT_NO_TICKET_AGREE), to keep the search
 * short: client 2 takes the lock first, client 1 starts its ticket round only once client 2
 * holds, client 0 only once client 1's ticket is agreed, and nobody gives up. Every trace of it
 * is a trace of the full model with three clients. */
#if C != 3
#error LAGGING_COUNTER needs three clients (-DC=3)
#endif
#define MAY_START(c) ((c) == 2 || ((c) == 1 && ph[2] == F_HOLD) || ((c) == 0 && agreed[1]))
#define MAY_GIVE_UP 0
#else
#define MAY_START(c) 1
#define MAY_GIVE_UP 1
#endif

/* A sleeping waiter tries again whenever it likes: at the end of its sleep, at a poll, when a
 * release names it (wake-ups name the first in line; which of these comes when is not modelled:
 * any time is allowed). It takes a quorum of grants at once (the retry timer). */
inline retry(c) {
  if
#ifdef MUT_TRUST_HINT
  :: ngr[c] >= Q -> take_handoff(c)
#endif
  :: need_ticket[c] -> start_ticket(c)
  :: else -> start_attempt(c)
  fi
}

/* A handoff message from node n (subscriber.cpp on_push -> AcquireOp::wake). */
inline hear(c, n) {
  tv = inbox[c].v[n];
  inbox[c].v[n] = 0;
  if
  :: tv == serial[c] ->
#ifdef MUT_TRUST_HINT
    /* note_grant: counted (judged) as if it were a reply */
    if
    :: gr[c].v[n] == 0 -> gr[c].v[n] = 1; judge(c, n)
    :: else
    fi
#else
    skip /* only a hint: the waiter tries at once (retry, which the model allows at any time) */
#endif
  :: else
  fi
}

#define HEAR(n) \
  ::d_step { \
    inbox[c].v[n] != 0->hear(c, n) \
  }
#define CUR_AT(q, i) (rq[q].qlen > i && (rq[q].e[i].cop & CUR))
#define IN_FLIGHT(c, n) \
  (CUR_AT(IX(c, n), 0) || CUR_AT(IX(c, n), 1) || CUR_AT(IX(c, n), 2) || CUR_AT(IX(c, n), 3) || \
   CUR_AT(IX(c, n), 4))
/* node_timeout: free when the command is gone (a reset), else from the budget `slow`; its
 * answer, should the command still run, is not looked at */
#define TIMEOUT(n) \
  ::d_step { \
    vs[c].v[n] == V_PEND && (!IN_FLIGHT(c, n) || slow > 0)->if \
    ::IN_FLIGHT(c, n)->slow-- \
    ::else \
    fi; \
    for (tj : 0 .. QD - 1) { \
      if \
      ::rq[IX(c, n)].e[tj].cop & CUR->rq[IX(c, n)].e[tj].cop = rq[IX(c, n)].e[tj].cop & 7 \
      ::else \
      fi \
    } \
    set_vote(c, n, V_FAIL); \
    evaluate(c) \
  }

proctype Client(byte c) {
end:
  do
  :: d_step {
       ph[c] == F_IDLE && acq[c] < MAXACQ && serial[c] < MAXSER && ROOM_ALL(c, 3) &&
       MAY_START(c) ->
         start_ticket(c);
         evaluate(c)
     }
  :: d_step { CAN_RETRY(c) -> retry(c); evaluate(c) }
  :: d_step {
       ph[c] == F_SLEEP && ROOM_ALL(c, 1) && MAY_GIVE_UP ->
         broadcast(c, OP_LEAVE, 0, 0);
         close_round(c);
         give_up(c)
     }
#ifdef MUT_TRUST_HINT
  /* the library before the fix: a quorum of handoff messages is the lock, taken at once */
  :: d_step {
       ph[c] == F_SLEEP && ngr[c] >= Q && ROOM_ALL(c, 1) -> take_handoff(c)
     }
#endif
  NODES(HEAR)
  NODES(TIMEOUT)
  :: d_step {
       ph[c] == F_HOLD && ROOM_ALL(c, 1) ->
         printf("MSC: c%d: releases\n", c);
         broadcast(c, OP_REL, htok[c], handed[c]);
         hl[c] = 0;
         if
         :: acq[c] < MAXACQ -> ph[c] = F_IDLE
         :: else -> ph[c] = F_DONE
         fi
     }
  od
}

#define DELIVER(cc, n) \
  ::d_step { \
    rq[IX(cc, n)].qlen > 0->node_run(cc, n, 1); \
    answer(cc, n) \
  } \
  ::d_step { \
    rq[IX(cc, n)].qlen > 0 && C_OP(rq[IX(cc, n)].e[0].cop) == OP_REL->node_run(cc, n, 0); \
    answer(cc, n) \
  }

proctype Net() {
end:
  do
  PAIRS(DELIVER)
  od
}

inline tick() {
  for (tj : 0 .. N - 1) {
    if
    :: key[tj] != 0 ->
      krem[tj]--;
      if
      :: krem[tj] == 0 -> key[tj] = 0
      :: else
      fi
    :: else
    fi
  }
  for (ti : 0 .. C - 1) {
    if
    :: el[ti] < TTL && IN_ROUND(ti) -> el[ti]++
    :: else
    fi;
    if
    :: rel[ti] < TTL && ph[ti] != F_HOLD && ph[ti] != F_DONE && ph[ti] != F_IDLE -> rel[ti]++
    :: else
    fi;
    if
    :: hl[ti] > 0 -> hl[ti]--
    :: else
    fi
  }
  skip
}

proctype Clock() {
end:
  do
  :: d_step { true -> tick() }
  od
}

#define FORGE(cc, n) \
  ::d_step { \
    serial[cc] != 0 && ph[cc] != F_DONE && inbox[cc].v[n] != serial[cc]->inbox[cc].v[n] = \
        serial[cc] \
  }
#define RESET(cc, n) \
  ::d_step { \
    resets > 0 && rq[IX(cc, n)].qlen > 0->resets--; \
    faulted = 1; \
    drop_queue(cc, n) \
  }
#define LAPSE(cc, n) \
  ::d_step { \
    lapses > 0 && hb[n].v[cc] == 1->lapses--; \
    faulted = 1; \
    hb[n].v[cc] = 2 \
  }
#define LOSE(cc, n) \
  ::d_step { \
    losses > 0 && inbox[cc].v[n] != 0->losses--; \
    inbox[cc].v[n] = 0 \
  }

proctype Nemesis() {
end:
  do
#ifdef FORGER
  PAIRS(FORGE)
#endif
#if RESETS > 0
  PAIRS(RESET)
#endif
#if LAPSES > 0
  PAIRS(LAPSE)
#endif
#if LOSSES > 0
  PAIRS(LOSE)
#endif
  :: false
  od
}

init {
  atomic {
    /* how many nodes' clocks run fast (lock.pml's init says why these choices); -DFAST_NODES=k
     * fixes it */
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
        fast[ti] = (ti < tb)
      }
      skip
    }
#ifndef TIMELESS
    run Clock(); /* -DTIMELESS: no time passes (for mutations whose trace needs none) */
#endif
    run Net();
    run Nemesis();
    run Client(0);
    run Client(1);
#if C > 2
    run Client(2)
#endif
  }
}
