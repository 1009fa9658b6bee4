/* The C worker of the fault harness (tests/faults/README.md has the protocol; run.py drives it).
 *
 *   worker-c NAME KEY COUNTER TTL_MS LOCK_DELAY_MS [LIMIT]      (CONSUL_HTTP_ADDR: its proxy)
 *
 * Loop: session -> acquire KEY (1 s) -> hold 200 ms, incrementing COUNTER with guarded_put ->
 * release -> sleep 0-30 ms. Prints `@<event> t=<CLOCK_MONOTONIC ns> ...` lines, flushed at once.
 * With LIMIT (semaphore mode) it takes a slot of the semaphore of that limit on the prefix KEY
 * instead, and while holding only looks every 10 ms whether the slot is still held (COUNTER is
 * unused); @start's token counts its holdings from 1.
 * A thread reads stdin: EOF or a `quit` line sets the stop flag (and cancels a pending acquire);
 * the loop sees it at the next step boundary, ends a holding as released, closes the client
 * (destroying its session), prints @bye and exits 0.
 *
 * Each acquire attempt gets a lock (or semaphore) handle of its own, with its own lost-callback
 * state: a holding's callback can only ever record into that holding's state, and
 * baton_lock_free (baton_semaphore_free) guarantees it no longer runs once the holding is over,
 * so a late callback of one holding is never attributed to the next. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <baton.h>

#define HOLD_NS (200LL * 1000000LL)
#define WORK_MS 20
#define SLOT_CHECK_MS 10 /* semaphore mode: how often a holder looks whether it still holds */
#define ACQUIRE_TIMEOUT_MS 1000
#define SESSION_RETRY_MS 100
#define ACQUIRE_RETRY_MS 50
#define REQUEST_TIMEOUT_MS 2000
#define CLOSE_TIMEOUT_MS 5000

static atomic_bool stop_flag;
static baton_cancel *stop_cancel; /* cancels a pending acquire on quit */

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000L, (us % 1000000L) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void sleep_ms(long ms) { sleep_us(ms * 1000L); }

static bool stopping(void) { return atomic_load(&stop_flag); }

/* `@error t=.. what=<what>: <BATON_NAME>: <last error message of this thread>` (one line). */
static void print_error(const char *what, baton_result rc) {
    char msg[512];
    baton_last_error_message(msg, sizeof msg);
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    printf("@error t=%lld what=%s: %s: %s\n", (long long)mono_ns(), what, baton_result_name(rc),
           msg);
    fflush(stdout);
}

static void print_error_text(const char *what) {
    printf("@error t=%lld what=%s\n", (long long)mono_ns(), what);
    fflush(stdout);
}

static void *stdin_thread(void *arg) {
    (void)arg;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) != -1) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strcmp(line, "quit") == 0) break;
    }
    free(line);
    atomic_store(&stop_flag, true);
    (void)baton_cancel_cancel(stop_cancel);
    return NULL;
}

/* The state of one holding, written by the lost callback on the library's dispatcher thread. */
struct holding {
    _Atomic int64_t lost_ns; /* 0: the callback has not run */
};

static void on_lost(void *userdata, baton_hold_lost reason, baton_lost_reason session_reason) {
    int64_t t = mono_ns();
    struct holding *h = userdata;
    (void)reason;
    (void)session_reason;
    int64_t expected = 0;
    atomic_compare_exchange_strong(&h->lost_ns, &expected, t); /* the first time only */
}

static bool parse_u64(const char *s, size_t len, uint64_t *out) {
    if (len == 0 || len > 20) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* Reads COUNTER (missing: 0). Prints an @error and returns false on failure. */
static bool read_counter(const baton_client *c, const char *key, uint64_t *out) {
    uint8_t buf[32];
    size_t len = 0;
    bool found = false;
    baton_result rc = baton_kv_get(c, key, NULL, buf, sizeof buf, &len, &found);
    if (rc != BATON_OK) {
        print_error("kv get", rc);
        return false;
    }
    if (!found) {
        *out = 0;
        return true;
    }
    if (!parse_u64((const char *)buf, len, out)) {
        print_error_text("kv get: the counter is not a decimal number");
        return false;
    }
    return true;
}

/* One acquire attempt's handle: the lock (five arguments), or the semaphore (LIMIT given). */
struct attempt {
    baton_lock *lock;
    baton_semaphore *sem;
};

/* Creates the attempt's handle (a semaphore when limit > 0) with value NAME and session s, and
 * registers the lost callback recording into h. On failure the caller prints the error and frees
 * the attempt. */
static baton_result attempt_new(const baton_client *c, const char *name, const char *key,
                                uint32_t limit, const baton_session *s, struct holding *h,
                                struct attempt *a) {
    baton_result rc;
    a->lock = NULL;
    a->sem = NULL;
    if (limit == 0) {
        baton_lock_options lo = baton_lock_options_default();
        lo.session = s;
        lo.value = (const uint8_t *)name;
        lo.value_len = strlen(name);
        rc = baton_lock_new(c, key, &lo, &a->lock);
        if (rc == BATON_OK) rc = baton_lock_on_lost(a->lock, on_lost, h, NULL);
    } else {
        baton_semaphore_options so = baton_semaphore_options_default();
        so.session = s;
        so.value = (const uint8_t *)name;
        so.value_len = strlen(name);
        rc = baton_semaphore_new(c, key, limit, &so, &a->sem);
        if (rc == BATON_OK) rc = baton_semaphore_on_lost(a->sem, on_lost, h, NULL);
    }
    return rc;
}

static baton_result attempt_acquire(const struct attempt *a) {
    return a->lock ? baton_lock_acquire(a->lock, ACQUIRE_TIMEOUT_MS, stop_cancel)
                   : baton_semaphore_acquire(a->sem, ACQUIRE_TIMEOUT_MS, stop_cancel);
}

static bool attempt_is_held(const struct attempt *a) {
    return a->lock ? baton_lock_is_held(a->lock) : baton_semaphore_is_held(a->sem);
}

static baton_result attempt_release(const struct attempt *a) {
    return a->lock ? baton_lock_release(a->lock) : baton_semaphore_release(a->sem);
}

/* Frees the handle, releasing it if held; no lost callback runs after this returns. */
static void attempt_free(struct attempt *a) {
    baton_lock_free(a->lock);
    baton_semaphore_free(a->sem);
    a->lock = NULL;
    a->sem = NULL;
}

/* The sequencer of the held lock (malloc'ed) with its token and lock index, or NULL after an
 * @error. */
static char *lock_sequencer(const baton_lock *lock, const char *key, uint64_t *token,
                            uint64_t *lock_index) {
    size_t seq_cap = strlen(key) + 128; /* <lock_index>:<token>:<session>:<key> */
    char *seq = malloc(seq_cap);
    if (!seq) {
        print_error_text("out of memory");
        return NULL;
    }
    baton_result rc = baton_lock_sequencer(lock, seq, seq_cap, NULL, token);
    if (rc != BATON_OK) {
        /* Lost between the acquire and now (or a bug): no token to report the holding with. */
        print_error("sequencer", rc);
        free(seq);
        return NULL;
    }
    const char *colon = strchr(seq, ':');
    if (!colon || !parse_u64(seq, (size_t)(colon - seq), lock_index)) {
        print_error_text("sequencer: malformed");
        free(seq);
        return NULL;
    }
    return seq;
}

/* One increment of COUNTER under the lock's sequencer: read, the 20 ms of "work", then the
 * guarded write without checking again, and its @inc / @fenced / @incunk line. */
static void increment(const baton_client *c, const char *seq, const char *counter,
                      uint64_t token) {
    uint64_t value = 0;
    if (!read_counter(c, counter, &value)) {
        sleep_ms(WORK_MS);
        return;
    }
    sleep_ms(WORK_MS); /* the "work": a freeze here leaves a stale holder about to write */
    char text[24];
    int n = snprintf(text, sizeof text, "%llu", (unsigned long long)(value + 1));
    baton_result rc = baton_guarded_put(c, seq, counter, (const uint8_t *)text, (size_t)n);
    int64_t t = mono_ns();
    if (rc == BATON_OK) {
        printf("@inc t=%lld value=%s token=%llu\n", (long long)t, text,
               (unsigned long long)token);
    } else if (rc == BATON_CONFLICT || rc == BATON_SESSION_INVALIDATED || rc == BATON_NOT_HELD) {
        /* Consul refused it: the session no longer holds the key. Nothing was written. */
        printf("@fenced t=%lld value=%s token=%llu\n", (long long)t, text,
               (unsigned long long)token);
    } else {
        /* Timeout, connection, 5xx...: the write may or may not have been applied. */
        printf("@incunk t=%lld value=%s token=%llu err=%s\n", (long long)t, text,
               (unsigned long long)token, baton_result_name(rc));
    }
    fflush(stdout);
}

/* The deadline sampler of one holding: `deadline` is the latest of now + the session's time
 * left, read every 5 ms until `done`; a lost session has no time left and is not sampled. */
struct sampler {
    const baton_session *session;
    _Atomic int64_t deadline;
    atomic_bool done;
};

static void sample_once(struct sampler *smp) {
    uint64_t left = 0;
    int64_t now = mono_ns();
    if (baton_session_time_left_ms(smp->session, &left) == BATON_OK && left > 0 &&
        left != BATON_WAIT_FOREVER) {
        int64_t d = now + (int64_t)left * 1000000LL;
        int64_t seen = atomic_load(&smp->deadline);
        while (d > seen && !atomic_compare_exchange_weak(&smp->deadline, &seen, d)) {
        }
    }
}

static void *sample_deadline(void *arg) {
    struct sampler *smp = arg;
    while (!atomic_load(&smp->done)) {
        sample_once(smp);
        sleep_ms(5);
    }
    return NULL;
}

/* Holds what was acquired for 200 ms (or until lost or quit) and prints its @start ... @end:
 * the lock incrementing COUNTER, a semaphore slot only looking every 10 ms whether it is still
 * held. `holdings` numbers this worker's holdings from 1: a slot's token. */
static void hold(const baton_client *c, const struct attempt *a, struct holding *h,
                 const baton_session *s, const char *sid, const char *key,
                 const char *counter, int64_t started, uint64_t holdings) {
    char *seq = NULL; /* the lock's sequencer; NULL for a semaphore slot */
    uint64_t token = holdings;
    if (a->lock) {
        uint64_t lock_index = 0;
        seq = lock_sequencer(a->lock, key, &token, &lock_index);
        if (!seq) return; /* the caller frees the lock, which releases it */
        printf("@start t=%lld token=%llu lock_index=%llu session=%s\n", (long long)started,
               (unsigned long long)token, (unsigned long long)lock_index, sid);
    } else {
        printf("@start t=%lld token=%llu session=%s\n", (long long)started,
               (unsigned long long)token, sid);
    }
    fflush(stdout);

    /* The session's deadline, sampled every 5 ms by a thread beside the work (not only between
     * two increments: one blocked across a renew, a partition's timed-out request, would leave
     * it a renew behind the real one). */
    struct sampler smp = {.session = s};
    atomic_init(&smp.deadline, 0);
    atomic_init(&smp.done, false);
    pthread_t smp_thread;
    bool sampling = pthread_create(&smp_thread, NULL, sample_deadline, &smp) == 0;
    const char *why = "released";
    int64_t end = 0;
    bool do_release = false;
    for (;;) {
        bool held = attempt_is_held(a);
        int64_t now = mono_ns();
        int64_t cb = atomic_load(&h->lost_ns);
        if (!held || cb != 0) {
            why = "lost";
            end = (!held && (cb == 0 || now < cb)) ? now : cb;
            break;
        }
        if (stopping() || now - started >= HOLD_NS) {
            end = mono_ns(); /* read before calling release */
            do_release = true;
            break;
        }
        sample_once(&smp);
        if (seq)
            increment(c, seq, counter, token);
        else
            sleep_ms(SLOT_CHECK_MS);
    }
    atomic_store(&smp.done, true);
    if (sampling) pthread_join(smp_thread, NULL);
    int64_t deadline = atomic_load(&smp.deadline);
    baton_result rc = do_release ? attempt_release(a) : BATON_OK;
    printf("@end t=%lld token=%llu why=%s deadline=%lld\n", (long long)end,
           (unsigned long long)token, why, (long long)deadline);
    fflush(stdout);
    if (rc != BATON_OK) print_error("release", rc); /* an @error, not a second @end */
    free(seq);
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s NAME KEY COUNTER TTL_MS LOCK_DELAY_MS [LIMIT]\n", argv[0]);
        return 2;
    }
    const char *name = argv[1], *key = argv[2], *counter = argv[3];
    uint64_t ttl_ms = 0, lock_delay_ms = 0;
    if (!parse_u64(argv[4], strlen(argv[4]), &ttl_ms) ||
        !parse_u64(argv[5], strlen(argv[5]), &lock_delay_ms)) {
        fprintf(stderr, "worker-c: TTL_MS and LOCK_DELAY_MS must be decimal numbers\n");
        return 2;
    }
    uint64_t limit = 0; /* 0: the lock; else semaphore mode */
    if (argc == 7 &&
        (!parse_u64(argv[6], strlen(argv[6]), &limit) || limit == 0 || limit > UINT32_MAX)) {
        fprintf(stderr, "worker-c: LIMIT must be a decimal number from 1 to %lu\n",
                (unsigned long)UINT32_MAX);
        return 2;
    }
    size_t session_name_len = strlen(name) + sizeof "faults-";
    char *session_name = malloc(session_name_len);
    if (!session_name) return 1;
    snprintf(session_name, session_name_len, "faults-%s", name);

    baton_client_options co = baton_client_options_default();
    co.address = getenv("CONSUL_HTTP_ADDR"); /* NULL: the library default */
    co.request_timeout_ms = REQUEST_TIMEOUT_MS;
    baton_client *c = NULL;
    baton_result rc = baton_client_new(&co, &c);
    if (rc != BATON_OK) {
        char msg[512];
        baton_last_error_message(msg, sizeof msg);
        fprintf(stderr, "worker-c: client: %s: %s\n", baton_result_name(rc), msg);
        free(session_name);
        return 1;
    }
    if ((rc = baton_cancel_new(&stop_cancel)) != BATON_OK) {
        fprintf(stderr, "worker-c: cancel: %s\n", baton_result_name(rc));
        baton_client_free(c);
        free(session_name);
        return 1;
    }
    atomic_init(&stop_flag, false);
    pthread_t reader;
    if (pthread_create(&reader, NULL, stdin_thread, NULL) != 0) {
        fprintf(stderr, "worker-c: pthread_create failed\n");
        baton_cancel_free(stop_cancel);
        baton_client_free(c);
        free(session_name);
        return 1;
    }
    srand((unsigned)getpid() ^ (unsigned)mono_ns());

    baton_session *s = NULL;
    char sid[BATON_SESSION_ID_SIZE] = "";
    uint64_t holdings = 0; /* successful acquires so far */
    while (!stopping()) {
        /* 1. Session. */
        if (s && !baton_session_is_valid(s)) {
            baton_session_free(s);
            s = NULL;
        }
        if (!s) {
            baton_session_options so = baton_session_options_default();
            so.name = session_name;
            so.ttl_ms = ttl_ms;
            so.lock_delay_ms = lock_delay_ms;
            so.behavior = BATON_BEHAVIOR_RELEASE;
            rc = baton_session_create(c, &so, &s);
            if (rc == BATON_OK) rc = baton_session_id(s, sid, sizeof sid, NULL);
            if (rc != BATON_OK) {
                print_error("session", rc);
                baton_session_free(s);
                s = NULL;
                sleep_ms(SESSION_RETRY_MS);
                continue;
            }
            printf("@session t=%lld id=%s\n", (long long)mono_ns(), sid);
            fflush(stdout);
        }
        if (stopping()) break;

        /* 2. Acquire, with a lock (or semaphore) handle and lost-callback state for this
         * attempt only. */
        struct holding h;
        atomic_init(&h.lost_ns, 0);
        struct attempt a;
        rc = attempt_new(c, name, key, (uint32_t)limit, s, &h, &a);
        if (rc != BATON_OK) {
            print_error(limit ? "semaphore" : "lock", rc);
            attempt_free(&a);
            sleep_ms(ACQUIRE_RETRY_MS);
            continue;
        }
        rc = attempt_acquire(&a);
        int64_t started = mono_ns();
        if (rc == BATON_OK) {
            /* 3 and 4. Hold, end. */
            hold(c, &a, &h, s, sid, key, counter, started, ++holdings);
            attempt_free(&a); /* no callback runs after this returns; h may go */
            sleep_us(rand() % 30001);
        } else {
            /* Timeout: back to 1. Cancelled: quit. Else an error (printed before the free,
             * which could replace this thread's last error message). */
            bool retry = rc == BATON_TIMEOUT || rc == BATON_CANCELLED;
            if (!retry) print_error("acquire", rc);
            attempt_free(&a);
            if (!retry) sleep_ms(ACQUIRE_RETRY_MS);
        }
    }

    /* 5. Quit. */
    baton_session_free(s);
    rc = baton_client_close(c, CLOSE_TIMEOUT_MS);
    if (rc != BATON_OK) print_error("close", rc);
    baton_client_free(c);
    printf("@bye t=%lld\n", (long long)mono_ns());
    fflush(stdout);
    pthread_join(reader, NULL); /* it set the stop flag, so it has returned or is returning */
    baton_cancel_free(stop_cancel);
    free(session_name);
    return 0;
}
