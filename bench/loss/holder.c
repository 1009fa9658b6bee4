/* The C holder of `make bench-loss` (bench/loss/run.py drives it; same protocol as holder.rs).
 *
 *   holder ADDR KEY TTL_MS LOCK_DELAY_MS SIGNAL_TIMEOUT_MS
 *
 * Prints READY once connected; for each `acquire` line on stdin: creates a session, acquires
 * KEY with it, watches the loss signals, prints HELD, and once the holding is lost prints
 * `RESULT {json}` with CLOCK_MONOTONIC nanoseconds (null: missing SIGNAL_TIMEOUT_MS after the
 * deadline) of:
 *
 *   is_held    the first baton_lock_is_held() false, polled every ~1 ms;
 *   callback   the baton_lock_on_lost callback;
 *   wait_lost  baton_lock_wait_lost returning in a thread blocked in it;
 *   token      baton_session_wait_lost (the holding's session) returning in another thread:
 *              the C API has no per-holding cancel token, this is its closest signal.
 *
 * The deadline: the poll thread reads baton_session_time_left_ms while held; each reading
 * gives a lower bound (clock read before the call + whole ms left) and the largest is kept
 * (the deadline only moves forward, and readings at ~1 ms spacing walk through the
 * rounding, so the largest is within a few µs of the true deadline).
 * `quit` or the end of stdin: close the client, exit 0. Any failure exits non-zero. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <baton.h>

enum { IS_HELD, CALLBACK, WAIT_LOST, TOKEN, NSIGNALS };
static const char *const NAMES[NSIGNALS] = {"is_held", "callback", "wait_lost", "token"};

static const char *hold_lost_name(int r) {
    switch (r) {
    case BATON_HOLD_RELEASED: return "released";
    case BATON_HOLD_KEY_CHANGED: return "key_changed";
    case BATON_HOLD_REMOVED: return "removed";
    case BATON_HOLD_SESSION_LOST: return "session_lost";
    case BATON_HOLD_CLIENT_CLOSED: return "client_closed";
    default: return "";
    }
}

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, baton_result rc) {
    char msg[512];
    baton_last_error_message(msg, sizeof msg);
    fprintf(stderr, "bench-loss holder.c: %s: %s: %s\n", what, baton_result_name(rc), msg);
    exit(1);
}

struct episode {
    baton_lock *lock;
    baton_session *session;
    baton_cancel *stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t at[NSIGNALS]; /* 0: not yet */
    int count;
    int reason[NSIGNALS];
    _Atomic int64_t deadline; /* the largest lower bound seen (written by the poll thread) */
    atomic_bool done;
};

static void record(struct episode *e, int which, int64_t t, int reason) {
    pthread_mutex_lock(&e->mu);
    if (e->at[which] == 0) {
        e->at[which] = t;
        e->reason[which] = reason;
        e->count++;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
}

static void on_lost(void *ud, baton_hold_lost reason, baton_lost_reason session_reason) {
    int64_t t = mono_ns();
    struct episode *e = ud;
    (void)session_reason;
    record(e, CALLBACK, t, (int)reason);
}

static void *poll_thread(void *arg) {
    struct episode *e = arg;
    while (!atomic_load(&e->done)) {
        int64_t t0 = mono_ns();
        if (!baton_lock_is_held(e->lock)) {
            record(e, IS_HELD, mono_ns(), 0);
            return NULL;
        }
        uint64_t left = 0;
        if (baton_session_time_left_ms(e->session, &left) == BATON_OK && left > 0 &&
            left != BATON_WAIT_FOREVER) {
            int64_t est = t0 + (int64_t)left * 1000000LL;
            if (est > atomic_load(&e->deadline)) atomic_store(&e->deadline, est);
        }
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    return NULL;
}

static void *wait_lost_thread(void *arg) {
    struct episode *e = arg;
    baton_hold_lost why = 0;
    if (baton_lock_wait_lost(e->lock, BATON_WAIT_FOREVER, e->stop, &why, NULL) == BATON_OK) {
        record(e, WAIT_LOST, mono_ns(), (int)why);
    }
    return NULL;
}

static void *token_thread(void *arg) {
    struct episode *e = arg;
    if (baton_session_wait_lost(e->session, BATON_WAIT_FOREVER, e->stop, NULL) == BATON_OK)
        record(e, TOKEN, mono_ns(), 0);
    return NULL;
}

static void episode_run(baton_client *c, const char *key, uint64_t ttl_ms, uint64_t delay_ms,
                        int64_t signal_timeout_ns, int n) {
    struct episode e;
    memset(&e, 0, sizeof e);
    pthread_mutex_init(&e.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e.cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&e.done, false);
    atomic_init(&e.deadline, 0);

    baton_session_options so = baton_session_options_default();
    so.name = "bench-loss-c";
    so.ttl_ms = ttl_ms;
    so.lock_delay_ms = delay_ms;
    baton_result rc = baton_session_create(c, &so, &e.session);
    if (rc != BATON_OK) die("session", rc);
    baton_lock_options lo = baton_lock_options_default();
    lo.session = e.session;
    if ((rc = baton_lock_new(c, key, &lo, &e.lock)) != BATON_OK) die("lock", rc);
    if ((rc = baton_lock_on_lost(e.lock, on_lost, &e, NULL)) != BATON_OK) die("on_lost", rc);
    if ((rc = baton_cancel_new(&e.stop)) != BATON_OK) die("cancel", rc);
    if ((rc = baton_lock_acquire(e.lock, 60000, NULL)) != BATON_OK) die("acquire", rc);
    int64_t acquired = mono_ns();

    pthread_t th[3];
    void *(*fns[3])(void *) = {poll_thread, wait_lost_thread, token_thread};
    for (int i = 0; i < 3; i++)
        if (pthread_create(&th[i], NULL, fns[i], &e) != 0) {
            fprintf(stderr, "bench-loss holder.c: pthread_create failed\n");
            exit(1);
        }
    printf("HELD\n");
    fflush(stdout);

    /* Until the first signal the driver bounds the wait; after it, each other signal has
     * SIGNAL_TIMEOUT_MS past the (estimated) deadline. */
    pthread_mutex_lock(&e.mu);
    while (e.count == 0) pthread_cond_wait(&e.cv, &e.mu);
    int64_t first = 0;
    for (int i = 0; i < NSIGNALS; i++)
        if (e.at[i] && (!first || e.at[i] < first)) first = e.at[i];
    int64_t deadline = atomic_load(&e.deadline);
    int64_t bound = (deadline > first ? deadline : first) + signal_timeout_ns;
    while (e.count < NSIGNALS) {
        struct timespec ts = {(time_t)(bound / 1000000000LL), (long)(bound % 1000000000LL)};
        if (pthread_cond_timedwait(&e.cv, &e.mu, &ts) != 0 && mono_ns() >= bound) break;
    }
    pthread_mutex_unlock(&e.mu);
    atomic_store(&e.done, true);
    (void)baton_cancel_cancel(e.stop);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    baton_lock_free(e.lock); /* no callback runs after this returns */

    printf("RESULT {\"lang\":\"c\",\"episode\":%d,\"acquired\":%lld,\"deadline\":", n,
           (long long)acquired);
    int64_t deadline_ns = atomic_load(&e.deadline);
    if (deadline_ns) printf("%lld", (long long)deadline_ns);
    else printf("null");
    for (int i = 0; i < NSIGNALS; i++) {
        if (e.at[i]) printf(",\"%s\":%lld", NAMES[i], (long long)e.at[i]);
        else printf(",\"%s\":null", NAMES[i]);
    }
    printf(",\"callback_reason\":\"%s\",\"wait_lost_reason\":\"%s\"}\n",
           hold_lost_name(e.reason[CALLBACK]), hold_lost_name(e.reason[WAIT_LOST]));
    fflush(stdout);
    baton_session_free(e.session);
    baton_cancel_free(e.stop);
    pthread_cond_destroy(&e.cv);
    pthread_mutex_destroy(&e.mu);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: holder ADDR KEY TTL_MS LOCK_DELAY_MS SIGNAL_TIMEOUT_MS\n");
        return 2;
    }
    baton_client_options o = baton_client_options_default();
    o.address = argv[1];
    baton_client *c = NULL;
    baton_result rc = baton_client_new(&o, &c);
    if (rc != BATON_OK) die("client", rc);
    uint64_t ttl = strtoull(argv[3], NULL, 10), delay = strtoull(argv[4], NULL, 10);
    int64_t signal_timeout_ns = (int64_t)strtoll(argv[5], NULL, 10) * 1000000LL;
    printf("READY\n");
    fflush(stdout);
    char line[64];
    int n = 0;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        if (strcmp(line, "quit") == 0) break;
        if (strcmp(line, "acquire") != 0) {
            fprintf(stderr, "bench-loss holder.c: unknown command '%s'\n", line);
            return 2;
        }
        episode_run(c, argv[2], ttl, delay, signal_timeout_ns, ++n);
    }
    (void)baton_client_close(c, 5000);
    baton_client_free(c);
    return 0;
}
