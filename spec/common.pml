/*
 * Shared by spec/lock.pml and spec/fair.pml: sizes, the quorum rule and discrete time.
 * docs/model.md maps every step here to the library's code.
 *
 * Time is discrete: a "tick" is one unit of the clients' clock (the reference frame). Everything
 * that runs between two ticks happens "at the same time". Times are kept relative (ticks left,
 * ticks elapsed) so that the state space stays finite however long a run is.
 */

#ifndef N
#define N 3 /* nodes: 3, or 5 (scripts/model.sh --deep) */
#endif
#define Q (N / 2 + 1) /* core/quorum.hpp quorum_of() */

#ifndef TTL
#define TTL 3 /* the lock's ttl, in ticks */
#endif
#ifndef DRIFT
#define DRIFT 1 /* core/quorum.cpp drift(): ttl * drift_factor + 2 ms, in ticks (rounded up) */
#endif

/* Node clocks: a node's clock may run fast against the client's by at most the drift the
 * library subtracts, so a key set with ttl TTL lives between TTL - DRIFT and TTL ticks (a slow
 * node clock only keeps a key longer, which no safety property needs). The bound is relative:
 * a slow client clock is the same as a fast node clock, so the clients' clocks are the
 * reference frame here (docs/model.md, "Clocks"). Each node's rate is chosen at the start. */

/* One round's votes per node (core/round.hpp Round::record). */
#define V_NONE 0 /* not part of the round */
#define V_PEND 1 /* sent, no answer yet */
#define V_OK 2   /* granted (and the vote counts: restart guard) */
#define V_REF 3  /* refused: held by someone else / not held */
#define V_FAIL 4 /* down, timeout, error, excluded vote */

#if N == 3
#define NODES(M) M(0) M(1) M(2)
#define NODES_OF(M, cc) M(cc, 0) M(cc, 1) M(cc, 2)
#elif N == 5
#define NODES(M) M(0) M(1) M(2) M(3) M(4)
#define NODES_OF(M, cc) M(cc, 0) M(cc, 1) M(cc, 2) M(cc, 3) M(cc, 4)
#else
#error "N must be 3 or 5"
#endif
#ifndef C
#define C 2 /* clients */
#endif
#if C == 2
#define PAIRS(M) NODES_OF(M, 0) NODES_OF(M, 1)
#elif C == 3
#define PAIRS(M) NODES_OF(M, 0) NODES_OF(M, 1) NODES_OF(M, 2)
#else
#error "C must be 2 or 3"
#endif

#ifdef BFS
#define HIDDEN
#else
#define HIDDEN hidden
#endif

#define MAX(a, b) ((a) > (b) -> (a) : (b))
