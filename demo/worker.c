/* The C worker of `make demo` (demo/run.py builds and starts it).
 *
 *   worker leader NAME KEY TTL_MS LOCK_DELAY_MS
 *   worker semaphore NAME PREFIX LIMIT ROUNDS HOLD_MS TTL_MS
 *   worker contend NAME LOCK_KEY SEM_PREFIX ROUNDS       (the cross-language test)
 *
 * Prints `@event t=<unix ms> ...` lines for the orchestrator. SIGTERM (taken by a
 * sigwait() thread, which cancels blocking calls through a baton_cancel): a leader
 * resigns, anyone else stops waiting; the client then closes, destroying its session. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <baton.h>

static baton_cancel *stop;

static unsigned long long now_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (unsigned long long)tv.tv_sec * 1000ULL + (unsigned long long)tv.tv_usec / 1000ULL;
}

#define EVENT(fmt, ...)                                                    \
    do {                                                                   \
        printf("@" fmt "\n", __VA_ARGS__);                                 \
        fflush(stdout);                                                    \
    } while (0)

static int fail(const char *what, baton_result rc) {
    char msg[512];
    baton_last_error_message(msg, sizeof msg);
    fprintf(stderr, "%s: %s: %s\n", what, baton_result_name(rc), msg);
    return 1;
}

static void *signal_thread(void *arg) {
    int sig = 0;
    if (sigwait(arg, &sig) == 0) (void)baton_cancel_cancel(stop);
    return NULL;
}

static baton_session *make_session(baton_client *c, const char *name, unsigned long long ttl_ms,
                                   unsigned long long lock_delay_ms, uint32_t behavior) {
    char session_name[128];
    snprintf(session_name, sizeof session_name, "demo-%s", name);
    baton_session_options o = baton_session_options_default();
    o.name = session_name;
    o.ttl_ms = ttl_ms;
    o.lock_delay_ms = lock_delay_ms;
    o.behavior = behavior;
    baton_session *s = NULL;
    baton_result rc = baton_session_create(c, &o, &s);
    if (rc != BATON_OK) fail("session", rc);
    return s;
}

static int leader(baton_client *c, const char *name, const char *key, unsigned long long ttl,
                  unsigned long long delay) {
    baton_session *s = make_session(c, name, ttl, delay, BATON_BEHAVIOR_RELEASE);
    if (!s) return 1;
    baton_election *e = NULL;
    baton_result rc = baton_election_new(c, key, s, &e);
    baton_session_free(s);
    if (rc != BATON_OK) return fail("election", rc);
    EVENT("campaigning t=%llu", now_ms());
    rc = baton_election_campaign(e, (const uint8_t *)name, strlen(name), BATON_WAIT_FOREVER, stop);
    int status = 0;
    if (rc == BATON_CANCELLED) {
        EVENT("stopped t=%llu", now_ms());
    } else if (rc != BATON_OK) {
        status = fail("campaign", rc);
    } else {
        char seq[512];
        uint64_t token = 0;
        if (baton_election_sequencer(e, seq, sizeof seq, NULL, &token) == BATON_OK)
            EVENT("leading t=%llu token=%llu", now_ms(), (unsigned long long)token);
        baton_hold_lost why = 0;
        rc = baton_election_wait_lost(e, BATON_WAIT_FOREVER, stop, &why, NULL);
        if (rc == BATON_CANCELLED) {
            rc = baton_election_resign(e);
            if (rc == BATON_OK) EVENT("resigned t=%llu", now_ms());
            else status = fail("resign", rc);
        } else {
            EVENT("lost t=%llu reason=%u", now_ms(), (unsigned)why);
            status = 1;
        }
    }
    baton_election_free(e);
    return status;
}

static int semaphore(baton_client *c, const char *name, const char *prefix, int limit, int rounds,
                     long hold_ms, unsigned long long ttl) {
    baton_session *s = make_session(c, name, ttl, 0, BATON_BEHAVIOR_DELETE);
    if (!s) return 1;
    baton_semaphore_options o = baton_semaphore_options_default();
    o.session = s;
    o.value = (const uint8_t *)name;
    o.value_len = strlen(name);
    baton_semaphore *sem = NULL;
    baton_result rc = baton_semaphore_new(c, prefix, (uint32_t)limit, &o, &sem);
    baton_session_free(s);
    if (rc != BATON_OK) return fail("semaphore", rc);
    int status = 0;
    for (int i = 0; i < rounds && status == 0; i++) {
        rc = baton_semaphore_acquire(sem, BATON_WAIT_FOREVER, stop);
        if (rc == BATON_CANCELLED) break;
        if (rc != BATON_OK) {
            status = fail("acquire", rc);
            break;
        }
        EVENT("slot t=%llu state=acquired", now_ms());
        struct timespec ts = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        EVENT("slot t=%llu state=releasing", now_ms());
        if ((rc = baton_semaphore_release(sem)) != BATON_OK) status = fail("release", rc);
    }
    if (status == 0) EVENT("done t=%llu", now_ms());
    baton_semaphore_free(sem);
    return status;
}

static unsigned long long now_us(void) {
    struct timespec ts;
    /* CLOCK_MONOTONIC: the clock every contender of the cross-language test reads. */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000ULL;
}

/* The cross-language test (tests/cross/run.py): `rounds` holdings of one lock and of
 * a 2-slot semaphore, each reported as an interval in microseconds; after each lock
 * round, the leader read through the election API. */
static int contend(baton_client *c, const char *name, const char *key, const char *prefix,
                   int rounds) {
    char value[64];
    int n = snprintf(value, sizeof value, "%s:%ld", name, (long)getpid());
    baton_lock_options o = baton_lock_options_default();
    o.value = (const uint8_t *)value;
    o.value_len = (size_t)n;
    baton_lock *l = NULL;
    baton_result rc = baton_lock_new(c, key, &o, &l);
    if (rc != BATON_OK) return fail("lock", rc);
    int status = 0;
    for (int i = 0; i < rounds && status == 0; i++) {
        if ((rc = baton_lock_acquire(l, 60000, stop)) != BATON_OK) {
            status = fail("acquire", rc);
            break;
        }
        unsigned long long start = now_us();
        uint64_t token = 0;
        char seq[512];
        rc = baton_lock_sequencer(l, seq, sizeof seq, NULL, &token);
        struct timespec ms1 = {0, 1000000L};
        nanosleep(&ms1, NULL);
        unsigned long long end = now_us();
        baton_result rel = baton_lock_release(l);
        if (rc != BATON_OK || rel != BATON_OK) {
            status = fail("sequencer/release", rc != BATON_OK ? rc : rel);
            break;
        }
        EVENT("hold kind=lock start=%llu end=%llu token=%llu", start, end,
              (unsigned long long)token);
        baton_leader ld;
        uint8_t buf[128];
        rc = baton_election_leader(c, key, &ld, buf, sizeof buf);
        if (rc != BATON_OK) status = fail("leader", rc);
        else if (ld.has_leader)
            EVENT("saw value=%.*s token=%llu", (int)ld.value_len, (const char *)buf,
                  (unsigned long long)ld.token);
    }
    baton_lock_free(l);
    baton_semaphore_options so = baton_semaphore_options_default();
    so.value = (const uint8_t *)value;
    so.value_len = (size_t)n;
    baton_semaphore *sem = NULL;
    if (status == 0 && (rc = baton_semaphore_new(c, prefix, 2, &so, &sem)) != BATON_OK)
        status = fail("semaphore", rc);
    for (int i = 0; i < rounds / 2 && status == 0; i++) {
        if ((rc = baton_semaphore_acquire(sem, 60000, stop)) != BATON_OK) {
            status = fail("semaphore acquire", rc);
            break;
        }
        unsigned long long start = now_us();
        struct timespec ms2 = {0, 2000000L};
        nanosleep(&ms2, NULL);
        unsigned long long end = now_us();
        if ((rc = baton_semaphore_release(sem)) != BATON_OK) status = fail("semaphore release", rc);
        EVENT("hold kind=sem start=%llu end=%llu", start, end);
    }
    baton_semaphore_free(sem);
    if (status == 0) EVENT("done t=%llu", now_ms());
    return status;
}

/* What the client counted (the demo's closing summary): one `@metrics` line. */
static void report_metrics(const baton_client *c, const char *mode) {
    baton_metrics m;
    if (baton_client_metrics(c, &m, sizeof m) != BATON_OK) return;
    unsigned long long acquired = 0, timed_out = 0, losses = 0, requests = 0, refused = 0;
    for (int r = 0; r < BATON_RECIPE_COUNT; r++) {
        acquired += m.acquires[r][BATON_ACQUIRE_ACQUIRED];
        timed_out += m.acquires[r][BATON_ACQUIRE_TIMED_OUT];
        for (int l = 0; l < BATON_LOSS_REASON_COUNT; l++) losses += m.losses[r][l];
    }
    for (int f = 0; f < BATON_FAMILY_COUNT; f++) {
        for (int o = 0; o < BATON_REQUEST_OUTCOME_COUNT; o++) requests += m.requests[f][o];
        refused += m.requests[f][BATON_REQUEST_429];
    }
    EVENT("metrics t=%llu mode=%s acquired=%llu timed_out=%llu losses=%llu renewals=%llu "
          "renewals_failed=%llu requests=%llu refused_429=%llu",
          now_ms(), mode, acquired, timed_out, losses, (unsigned long long)m.renewals_ok,
          (unsigned long long)m.renewals_failed, requests, refused);
}

int main(int argc, char **argv) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (baton_cancel_new(&stop) != BATON_OK) return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, signal_thread, &set) != 0) return 1;
    pthread_detach(t);

    baton_client *c = NULL;
    baton_result rc = baton_client_new_from_env(&c);
    if (rc != BATON_OK) return fail("client", rc);
    int status;
    if (argc == 6 && strcmp(argv[1], "leader") == 0) {
        status = leader(c, argv[2], argv[3], strtoull(argv[4], NULL, 10),
                        strtoull(argv[5], NULL, 10));
    } else if (argc == 6 && strcmp(argv[1], "contend") == 0) {
        status = contend(c, argv[2], argv[3], argv[4], atoi(argv[5]));
    } else if (argc == 8 && strcmp(argv[1], "semaphore") == 0) {
        status = semaphore(c, argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), atol(argv[6]),
                           strtoull(argv[7], NULL, 10));
    } else {
        fprintf(stderr,
                "usage: %s leader NAME KEY TTL_MS LOCK_DELAY_MS\n"
                "       %s semaphore NAME PREFIX LIMIT ROUNDS HOLD_MS TTL_MS\n"
                "       %s contend NAME LOCK_KEY SEM_PREFIX ROUNDS\n",
                argv[0], argv[0], argv[0]);
        status = 2;
    }
    rc = baton_client_close(c, 5000);
    if (argc > 1 && strcmp(argv[1], "contend") != 0) report_metrics(c, argv[1]); /* the demo's, not the cross test's */
    baton_client_free(c);
    return status != 0 ? status : (rc == BATON_OK ? 0 : 1);
}
