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

/* Locks, semaphores, elections, observers and fencing (test_recipes.c). */
void test_recipes(baton_client *c, baton_client *other);

/* Sessions bound to health checks, the agent API, adopted sessions (test_checks.c). */
void test_checks(baton_client *c);

/* Capabilities of the README's parity table no other C test covered (test_parity_gaps.c). */
void test_parity_gaps(baton_client *c, baton_client *other);

/* The default session configured from C, KV check-and-set, guarded transactions
 * (test_capi_gaps.c). */
void test_capi_gaps(baton_client *c);

/* NULL, non-UTF-8, over-long and exact-size arguments at every entry point (test_hostile.c). */
void test_hostile(baton_client *c);

#endif
