/* The C tests' checking macros and shared helpers (test_baton.c defines the counters). */
#ifndef BATON_TEST_CHECK_H
#define BATON_TEST_CHECK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "baton.h"

/* Updated from several threads (the contention test), hence atomic. */
extern atomic_int passed, failed;
/* Not UTF-8. */
extern const char BAD_UTF8[];

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (cond) {                                                                  \
            atomic_fetch_add(&passed, 1);                                            \
        } else {                                                                     \
            atomic_fetch_add(&failed, 1);                                            \
            char m_[512];                                                            \
            baton_last_error_message(m_, sizeof m_);                                 \
            fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, \
                    #cond, m_);                                                      \
        }                                                                            \
    } while (0)

#define CHECK_RC(expr, want) CHECK((expr) == (want))

static inline void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls `*v` every 10 ms until it reaches `want` or `ms` pass. */
bool wait_for(atomic_int *v, int want, long ms);

/* The shared fixture (test_baton.c). Every test runs through RUN0, RUN1 or RUN2: RUN1 and
 * RUN2 give it fresh clients (`c`; `c` and `other`) from the environment and close them
 * after it (BATON_OK within 10 s). Then, whatever the test did, no session may be left at
 * the server beyond those it had when the suite started: a session left after close() is
 * a failure of that test (issue 31), reported with the test's name and then destroyed. */
baton_client *fixture_client(void);
void fixture_close(baton_client *c);
void check_no_sessions_left(const char *test);
/* The sessions at the server now that it did not have when the suite started. */
size_t sessions_beyond_baseline(void);
#define RUN0(t)                      \
    do {                             \
        t();                         \
        check_no_sessions_left(#t);  \
    } while (0)
#define RUN1(t)                                 \
    do {                                        \
        baton_client *fixture_c_ = fixture_client(); \
        if (fixture_c_) t(fixture_c_);          \
        fixture_close(fixture_c_);              \
        check_no_sessions_left(#t);             \
    } while (0)
#define RUN2(t)                                                              \
    do {                                                                     \
        baton_client *fixture_c_ = fixture_client(), *fixture_o_ = fixture_client(); \
        if (fixture_c_ && fixture_o_) t(fixture_c_, fixture_o_);             \
        fixture_close(fixture_c_);                                           \
        fixture_close(fixture_o_);                                           \
        check_no_sessions_left(#t);                                          \
    } while (0)

/* Whether the calling thread's last error message contains `needle`. */
bool last_error_has(const char *needle);

/* Locks, semaphores, elections, observers and fencing (test_recipes.c). */
void test_recipes(void);

/* Read-write and multi-key locks, leader tasks, group membership, barriers and counters
 * (test_recipes_more.c). */
void test_recipes_more(void);

/* Sessions bound to health checks, the agent API, adopted sessions (test_checks.c). */
void test_checks(void);

/* Capabilities of the README's parity table no other C test covered (test_parity_gaps.c). */
void test_parity_gaps(void);

/* The default session configured from C, KV check-and-set, guarded transactions
 * (test_capi_gaps.c). */
void test_capi_gaps(void);

/* A client's metrics: the snapshot struct, its tables, the text exposition, exact counts
 * (test_metrics.c). */
void test_metrics(void);

/* NULL, non-UTF-8, over-long and exact-size arguments at every entry point (test_hostile.c). */
void test_hostile(void);

#endif
