/* C tests of a client's metrics (issue 47): baton_client_metrics, the size-versioned
 * baton_metrics struct, the label and metric tables, and baton_client_metrics_text.
 * Known operations on fresh clients against the dev server at CONSUL_HTTP_ADDR (or
 * BATON_TEST_CONSUL), and the exact counts they leave; exactly N 429s from a dev server
 * of our own started with --max-conns-per-client 4 (BATON_DEVSERVER_BIN, exported by
 * with-devserver.sh). Asynchronous events (a loss) are awaited by polling the snapshot
 * with a deadline. Called from test_baton.c's main. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

extern char **environ;

/* Generous bound for "eventually": a failure bound, not a speed assertion. */
#define PATIENCE_MS 20000

static baton_metrics snap(baton_client *c) {
    baton_metrics m;
    memset(&m, 0xab, sizeof m);
    CHECK_RC(baton_client_metrics(c, &m, sizeof m), BATON_OK);
    return m;
}

static uint64_t sum_all(const uint64_t *v, size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) s += v[i];
    return s;
}

/* The total of a histogram's per-bucket counts. */
static uint64_t wait_buckets(const baton_wait_histogram *h) {
    return sum_all(h->buckets, BATON_WAIT_BUCKET_COUNT);
}

/* Polls `c`'s snapshot until losses[recipe][reason] reaches `want` (or PATIENCE_MS). */
static baton_metrics until_loss(baton_client *c, size_t recipe, size_t reason, uint64_t want) {
    baton_metrics m = snap(c);
    for (long t = 0; m.losses[recipe][reason] < want && t < PATIENCE_MS; t += 20) {
        sleep_ms(20);
        m = snap(c);
    }
    return m;
}

static void key_of(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "ffi/metrics/%ld/%s", (long)getpid(), name);
}

struct cancel_after {
    baton_cancel *cancel;
    long ms;
};

static void *cancel_after_run(void *arg) {
    struct cancel_after *ca = arg;
    sleep_ms(ca->ms);
    (void)baton_cancel_cancel(ca->cancel);
    return NULL;
}

/* A fresh client counts nothing; the tables name the indices as the core does. */
static void test_metrics_tables_and_a_fresh_client(baton_client *c) {
    baton_metrics m = snap(c);
    CHECK(m.size == sizeof(baton_metrics));
    CHECK(sizeof(baton_metrics) == BATON_METRICS_SIZE_V1);
    CHECK(sum_all(m.held, BATON_RECIPE_COUNT) == 0);
    CHECK(sum_all(&m.acquires[0][0], BATON_RECIPE_COUNT * BATON_ACQUIRE_OUTCOME_COUNT) == 0);
    CHECK(sum_all(&m.losses[0][0], BATON_RECIPE_COUNT * BATON_LOSS_REASON_COUNT) == 0);
    CHECK(m.lease_left_seconds < 0); /* no session yet */
    CHECK(m.retries == 0 && m.leaderless_seconds == 0.0);
    CHECK(m.owed[BATON_OWED_UNLOCKS] == 0 && m.owed[BATON_OWED_SLOTS] == 0 &&
          m.owed[BATON_OWED_SESSIONS] == 0);

    CHECK(strcmp(baton_metrics_label(BATON_LABELS_RECIPE, BATON_RECIPE_ELECTION), "election") == 0);
    CHECK(strcmp(baton_metrics_label(BATON_LABELS_ACQUIRE_OUTCOME, BATON_ACQUIRE_TIMED_OUT),
                 "timed_out") == 0);
    CHECK(strcmp(baton_metrics_label(BATON_LABELS_LOSS_REASON, BATON_LOSS_INVALIDATED),
                 "invalidated") == 0);
    CHECK(strcmp(baton_metrics_label(BATON_LABELS_FAMILY, BATON_FAMILY_TXN), "txn") == 0);
    CHECK(strcmp(baton_metrics_label(BATON_LABELS_REQUEST_OUTCOME, BATON_REQUEST_429), "429") == 0);
    CHECK(strcmp(baton_metrics_label(BATON_LABELS_OWED_KIND, BATON_OWED_SESSIONS), "sessions") ==
          0);
    CHECK(baton_metrics_label(BATON_LABELS_RECIPE, BATON_RECIPE_COUNT) == NULL);
    CHECK(baton_metrics_label(BATON_LABELS_OWED_KIND + 1, 0) == NULL);

    size_t n = 0;
    const double *b = baton_metrics_bounds(BATON_BUCKETS_WAIT, &n);
    CHECK(b != NULL && n + 1 == BATON_WAIT_BUCKET_COUNT);
    for (size_t i = 1; b && i < n; i++) CHECK(b[i] > b[i - 1]);
    b = baton_metrics_bounds(BATON_BUCKETS_HOLD, &n);
    CHECK(b != NULL && n + 1 == BATON_HOLD_BUCKET_COUNT && b[n - 1] == 3600.0);
    n = 7;
    CHECK(baton_metrics_bounds(BATON_BUCKETS_HOLD + 1, &n) == NULL && n == 0);

    /* The metric table: 13 metrics, counters named _total, histograms in seconds. */
    CHECK(baton_metric_count() == 13);
    size_t counters = 0;
    for (size_t i = 0; i < baton_metric_count(); i++) {
        const char *name = baton_metric_name(i), *type = baton_metric_type(i);
        CHECK(name && type && baton_metric_help(i) && strncmp(name, "baton_", 6) == 0);
        if (!name || !type) continue;
        size_t len = strlen(name);
        bool total = len > 6 && strcmp(name + len - 6, "_total") == 0;
        CHECK(total == (strcmp(type, "counter") == 0));
        counters += total;
        if (strcmp(type, "histogram") == 0) CHECK(strcmp(name + len - 8, "_seconds") == 0);
        for (size_t j = 0; j < baton_metric_label_count(i); j++)
            CHECK(baton_metric_label_name(i, j));
        CHECK(baton_metric_label_name(i, baton_metric_label_count(i)) == NULL);
    }
    CHECK(counters == 6);
    CHECK(strcmp(baton_metric_name(1), "baton_acquires_total") == 0);
    CHECK(baton_metric_label_count(1) == 2);
    CHECK(strcmp(baton_metric_label_name(1, 0), "recipe") == 0);
    CHECK(strcmp(baton_metric_label_name(1, 1), "outcome") == 0);
    CHECK(baton_metric_name(baton_metric_count()) == NULL);
    CHECK(baton_metric_help(baton_metric_count()) == NULL);
    CHECK(baton_metric_type(baton_metric_count()) == NULL);
    CHECK(baton_metric_label_count(baton_metric_count()) == 0);
}

/* Acquire, not acquired, timed out, cancelled, release, a loss by key change, a loss by
 * session invalidation: each counted exactly once, where it belongs. */
static void test_metrics_count_acquires_and_losses_exactly(baton_client *c, baton_client *other) {
    char k[128], taken[128];
    key_of(k, sizeof k, "a");
    key_of(taken, sizeof taken, "taken");

    /* One acquire. */
    baton_lock *l = NULL, *theirs = NULL, *mine = NULL;
    CHECK_RC(baton_lock_new(c, k, NULL, &l), BATON_OK);
    if (!l) return;
    CHECK_RC(baton_lock_acquire(l, PATIENCE_MS, NULL), BATON_OK);
    baton_metrics m = snap(c);
    CHECK(m.acquires[BATON_RECIPE_LOCK][BATON_ACQUIRE_ACQUIRED] == 1);
    CHECK(m.held[BATON_RECIPE_LOCK] == 1);
    CHECK(m.acquire_wait[BATON_RECIPE_LOCK].count == 1);
    CHECK(wait_buckets(&m.acquire_wait[BATON_RECIPE_LOCK]) == 1);
    CHECK(m.lease_left_seconds > 0);

    /* A try of a key another client holds; a wait for it that times out; a cancelled one. */
    CHECK_RC(baton_lock_new(other, taken, NULL, &theirs), BATON_OK);
    CHECK_RC(baton_lock_new(c, taken, NULL, &mine), BATON_OK);
    baton_cancel *cn = NULL;
    CHECK_RC(baton_cancel_new(&cn), BATON_OK);
    if (theirs && mine && cn) {
        CHECK_RC(baton_lock_acquire(theirs, PATIENCE_MS, NULL), BATON_OK);
        CHECK_RC(baton_lock_acquire(mine, 0, NULL), BATON_TIMEOUT);
        CHECK_RC(baton_lock_acquire(mine, 300, NULL), BATON_TIMEOUT);
        struct cancel_after ca = {cn, 200};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, cancel_after_run, &ca) == 0);
        CHECK_RC(baton_lock_acquire(mine, PATIENCE_MS, cn), BATON_CANCELLED);
        pthread_join(t, NULL);
    }
    m = snap(c);
    const uint64_t *a = m.acquires[BATON_RECIPE_LOCK];
    CHECK(a[BATON_ACQUIRE_ACQUIRED] == 1);
    CHECK(a[BATON_ACQUIRE_NOT_ACQUIRED] == 1);
    CHECK(a[BATON_ACQUIRE_TIMED_OUT] == 1);
    CHECK(a[BATON_ACQUIRE_CANCELLED] == 1);
    CHECK(a[BATON_ACQUIRE_ERROR] == 0);
    CHECK(m.acquire_wait[BATON_RECIPE_LOCK].count == 4);
    CHECK(wait_buckets(&m.acquire_wait[BATON_RECIPE_LOCK]) == 4);
    /* The timed-out wait alone took 0.3 s. */
    CHECK(m.acquire_wait[BATON_RECIPE_LOCK].sum >= 0.3);
    CHECK(m.held[BATON_RECIPE_LOCK] == 1);
    /* The other client's acquire is its own. */
    baton_metrics o = snap(other);
    CHECK(o.acquires[BATON_RECIPE_LOCK][BATON_ACQUIRE_ACQUIRED] == 1);
    CHECK(sum_all(o.acquires[BATON_RECIPE_LOCK], BATON_ACQUIRE_OUTCOME_COUNT) == 1);

    /* A release: nothing held, one hold-time sample, no loss. */
    CHECK_RC(baton_lock_release(l), BATON_OK);
    m = snap(c);
    CHECK(m.held[BATON_RECIPE_LOCK] == 0);
    CHECK(m.hold[BATON_RECIPE_LOCK].count == 1);
    CHECK(sum_all(m.hold[BATON_RECIPE_LOCK].buckets, BATON_HOLD_BUCKET_COUNT) == 1);
    CHECK(sum_all(&m.losses[0][0], BATON_RECIPE_COUNT * BATON_LOSS_REASON_COUNT) == 0);

    /* A loss by key change: another client deletes the key. */
    CHECK_RC(baton_lock_acquire(l, PATIENCE_MS, NULL), BATON_OK);
    CHECK_RC(baton_kv_delete(other, k), BATON_OK);
    m = until_loss(c, BATON_RECIPE_LOCK, BATON_LOSS_KEY_CHANGED, 1);
    CHECK(m.losses[BATON_RECIPE_LOCK][BATON_LOSS_KEY_CHANGED] == 1);
    CHECK(m.held[BATON_RECIPE_LOCK] == 0);
    CHECK(m.hold[BATON_RECIPE_LOCK].count == 2);

    /* A loss by session invalidation: another client destroys the holding's session. */
    CHECK_RC(baton_lock_acquire(l, PATIENCE_MS, NULL), BATON_OK);
    baton_kv_entry e;
    bool found = false;
    size_t n = 0;
    CHECK_RC(baton_kv_get_entry(other, k, NULL, NULL, 0, &n, &e, &found), BATON_OK);
    CHECK(found && e.session[0] != '\0');
    if (found) CHECK_RC(baton_client_destroy_session_id(other, e.session), BATON_OK);
    m = until_loss(c, BATON_RECIPE_LOCK, BATON_LOSS_INVALIDATED, 1);
    CHECK(m.losses[BATON_RECIPE_LOCK][BATON_LOSS_INVALIDATED] == 1);
    CHECK(m.losses[BATON_RECIPE_LOCK][BATON_LOSS_KEY_CHANGED] == 1);
    CHECK(sum_all(&m.losses[0][0], BATON_RECIPE_COUNT * BATON_LOSS_REASON_COUNT) == 2);
    CHECK(m.held[BATON_RECIPE_LOCK] == 0);
    CHECK(m.acquires[BATON_RECIPE_LOCK][BATON_ACQUIRE_ACQUIRED] == 3);
    CHECK(sum_all(&m.acquires[0][0], BATON_RECIPE_COUNT * BATON_ACQUIRE_OUTCOME_COUNT) == 6);

    /* A semaphore acquire counts as the semaphore's. */
    char sk[128];
    key_of(sk, sizeof sk, "sem");
    baton_semaphore *sem = NULL;
    CHECK_RC(baton_semaphore_new(c, sk, 2, NULL, &sem), BATON_OK);
    if (sem) {
        CHECK_RC(baton_semaphore_acquire(sem, PATIENCE_MS, NULL), BATON_OK);
        m = snap(c);
        CHECK(m.acquires[BATON_RECIPE_SEMAPHORE][BATON_ACQUIRE_ACQUIRED] == 1);
        CHECK(m.held[BATON_RECIPE_SEMAPHORE] == 1);
        CHECK(m.acquires[BATON_RECIPE_LOCK][BATON_ACQUIRE_ACQUIRED] == 3);
        CHECK_RC(baton_semaphore_release(sem), BATON_OK);
        CHECK(snap(c).held[BATON_RECIPE_SEMAPHORE] == 0);
        baton_semaphore_free(sem);
    }

    /* Requests: answered, none refused for the connection limit. */
    m = snap(c);
    CHECK(m.requests[BATON_FAMILY_KV][BATON_REQUEST_2XX] +
              m.requests[BATON_FAMILY_TXN][BATON_REQUEST_2XX] >
          0);
    uint64_t all429 = 0;
    for (size_t f = 0; f < BATON_FAMILY_COUNT; f++) all429 += m.requests[f][BATON_REQUEST_429];
    CHECK(all429 == 0);

    if (theirs) CHECK_RC(baton_lock_release(theirs), BATON_OK);
    baton_cancel_free(cn);
    baton_lock_free(mine);
    baton_lock_free(theirs);
    baton_lock_free(l);
}

/* A campaign counts as the election's, not the lock's. */
static void test_metrics_count_an_election_as_its_own(baton_client *c) {
    char k[128];
    key_of(k, sizeof k, "elect");
    baton_election *e = NULL;
    CHECK_RC(baton_election_new(c, k, NULL, &e), BATON_OK);
    if (!e) return;
    CHECK_RC(baton_election_campaign(e, (const uint8_t *)"me", 2, PATIENCE_MS, NULL), BATON_OK);
    baton_metrics m = snap(c);
    CHECK(m.acquires[BATON_RECIPE_ELECTION][BATON_ACQUIRE_ACQUIRED] == 1);
    CHECK(m.held[BATON_RECIPE_ELECTION] == 1);
    CHECK(m.acquires[BATON_RECIPE_LOCK][BATON_ACQUIRE_ACQUIRED] == 0);
    CHECK(m.held[BATON_RECIPE_LOCK] == 0);
    CHECK_RC(baton_election_resign(e), BATON_OK);
    CHECK(snap(c).held[BATON_RECIPE_ELECTION] == 0);
    baton_election_free(e);
}

/* NULL client or out, a size below the first version's (nothing written), a larger size
 * (what the library has is filled, the rest untouched, `size` says how much). */
static void test_metrics_refuses_hostile_arguments(baton_client *c) {
    baton_metrics m;
    CHECK_RC(baton_client_metrics(NULL, &m, sizeof m), BATON_NULL_ARGUMENT);
    CHECK(last_error_has("client"));
    CHECK_RC(baton_client_metrics(c, NULL, sizeof m), BATON_NULL_ARGUMENT);
    CHECK(last_error_has("out"));
    CHECK_RC(baton_client_metrics(NULL, NULL, 0), BATON_NULL_ARGUMENT);
    memset(&m, 0x5a, sizeof m);
    CHECK_RC(baton_client_metrics(c, &m, sizeof m - 1), BATON_INVALID_ARGUMENT);
    CHECK(last_error_has("BATON_METRICS_SIZE_V1"));
    CHECK_RC(baton_client_metrics(c, &m, 0), BATON_INVALID_ARGUMENT);
    CHECK_RC(baton_client_metrics(c, &m, 8), BATON_INVALID_ARGUMENT);
    const unsigned char *bytes = (const unsigned char *)&m;
    bool untouched = true;
    for (size_t i = 0; i < sizeof m; i++) untouched = untouched && bytes[i] == 0x5a;
    CHECK(untouched);

    /* A struct from a newer header: 64 more bytes, left as they were. */
    unsigned char *big = malloc(sizeof(baton_metrics) + 64);
    if (!big) return;
    memset(big, 0x5a, sizeof(baton_metrics) + 64);
    CHECK_RC(baton_client_metrics(c, (baton_metrics *)big, sizeof(baton_metrics) + 64), BATON_OK);
    baton_metrics filled;
    memcpy(&filled, big, sizeof filled);
    CHECK(filled.size == sizeof(baton_metrics));
    CHECK(filled.held[BATON_RECIPE_LOCK] == 0);
    bool tail = true;
    for (size_t i = sizeof(baton_metrics); i < sizeof(baton_metrics) + 64; i++)
        tail = tail && big[i] == 0x5a;
    CHECK(tail);
    free(big);

    /* An exact-size allocation (ASan and valgrind catch a byte past it). */
    baton_metrics *exact = malloc(sizeof(baton_metrics));
    if (!exact) return;
    CHECK_RC(baton_client_metrics(c, exact, sizeof *exact), BATON_OK);
    CHECK(exact->size == sizeof *exact);
    free(exact);

    /* A closed client answers with the counts as they ended. */
    baton_client *closed = fixture_client();
    if (closed) {
        CHECK_RC(baton_client_close(closed, 10000), BATON_OK);
        CHECK_RC(baton_client_metrics(closed, &m, sizeof m), BATON_OK);
        CHECK(m.size == sizeof m && m.held[BATON_RECIPE_LOCK] == 0);
        baton_client_free(closed);
    }

    /* Text: NULL client, a size query, an exact-size buffer (no room for the NUL). */
    size_t n = 0;
    CHECK_RC(baton_client_metrics_text(NULL, NULL, 0, &n), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_client_metrics_text(c, NULL, 0, &n), BATON_BUFFER_TOO_SMALL);
    CHECK(n > 0);
    CHECK_RC(baton_client_metrics_text(c, NULL, n + 1024, NULL), BATON_NULL_ARGUMENT);
    char *t = malloc(n);
    if (!t) return;
    size_t n2 = 0;
    CHECK_RC(baton_client_metrics_text(c, t, n, &n2), BATON_BUFFER_TOO_SMALL);
    free(t);
}

/* The value of the series `series` (name and labels exactly as written) in the text
 * exposition `text`; -1 when absent. */
static double sample(const char *text, const char *series) {
    size_t len = strlen(series);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, series, len) == 0 && p[len] == ' ') return strtod(p + len + 1, NULL);
        p = strchr(p, '\n');
        if (p) p++;
    }
    return -1;
}

static char *metrics_text(baton_client *c) {
    size_t n = 0;
    CHECK_RC(baton_client_metrics_text(c, NULL, 0, &n), BATON_BUFFER_TOO_SMALL);
    size_t len = n + 4096; /* the counts may grow between the calls */
    char *t = malloc(len);
    if (!t) return NULL;
    CHECK_RC(baton_client_metrics_text(c, t, len, &n), BATON_OK);
    CHECK(strlen(t) == n);
    return t;
}

/* The Prometheus text exposition holds every metric with its HELP and TYPE lines and the
 * same counts as the struct; the lease gauge is absent without a session. */
static void test_metrics_text_exposition(baton_client *c) {
    char *t = metrics_text(c);
    if (!t) return;
    CHECK(strstr(t, "baton_lease_left_seconds") == NULL);
    free(t);

    char k[128];
    key_of(k, sizeof k, "text");
    baton_lock *l = NULL;
    CHECK_RC(baton_lock_new(c, k, NULL, &l), BATON_OK);
    if (!l) return;
    CHECK_RC(baton_lock_acquire(l, PATIENCE_MS, NULL), BATON_OK);
    t = metrics_text(c);
    if (!t) {
        baton_lock_free(l);
        return;
    }
    for (size_t i = 0; i < baton_metric_count(); i++) {
        char line[512];
        snprintf(line, sizeof line, "# HELP %s %s\n", baton_metric_name(i), baton_metric_help(i));
        CHECK(strstr(t, line) != NULL);
        snprintf(line, sizeof line, "# TYPE %s %s\n", baton_metric_name(i), baton_metric_type(i));
        CHECK(strstr(t, line) != NULL);
    }
    CHECK(sample(t, "baton_held{recipe=\"lock\"}") == 1);
    CHECK(sample(t, "baton_held{recipe=\"semaphore\"}") == 0);
    CHECK(sample(t, "baton_acquires_total{recipe=\"lock\",outcome=\"acquired\"}") == 1);
    CHECK(sample(t, "baton_acquires_total{recipe=\"election\",outcome=\"error\"}") == 0);
    CHECK(sample(t, "baton_acquire_wait_seconds_count{recipe=\"lock\"}") == 1);
    CHECK(sample(t, "baton_acquire_wait_seconds_bucket{recipe=\"lock\",le=\"+Inf\"}") == 1);
    CHECK(sample(t, "baton_acquire_wait_seconds_bucket{recipe=\"lock\",le=\"300\"}") == 1);
    CHECK(sample(t, "baton_acquire_wait_seconds_sum{recipe=\"lock\"}") > 0);
    CHECK(sample(t, "baton_losses_total{recipe=\"lock\",reason=\"key_changed\"}") == 0);
    CHECK(sample(t, "baton_renewals_total{outcome=\"failed\"}") == 0);
    CHECK(sample(t, "baton_renewal_seconds_bucket{le=\"+Inf\"}") >= 0);
    CHECK(sample(t, "baton_lease_left_seconds") > 0);
    CHECK(sample(t, "baton_requests_total{family=\"kv\",outcome=\"429\"}") == 0);
    CHECK(sample(t, "baton_retries_total") == 0);
    CHECK(sample(t, "baton_leaderless_seconds_total") == 0);
    CHECK(sample(t, "baton_owed{kind=\"unlocks\"}") == 0);
    /* Buckets are cumulative: never falling, +Inf equal to the count. */
    double prev = 0;
    size_t nb = 0;
    const double *b = baton_metrics_bounds(BATON_BUCKETS_HOLD, &nb);
    for (size_t i = 0; b && i < nb; i++) {
        char series[128];
        snprintf(series, sizeof series, "baton_hold_seconds_bucket{recipe=\"lock\",le=\"%g\"}",
                 b[i]);
        double v = sample(t, series);
        CHECK(v >= prev);
        prev = v;
    }
    free(t);
    CHECK_RC(baton_lock_release(l), BATON_OK);
    t = metrics_text(c);
    if (t) {
        CHECK(sample(t, "baton_held{recipe=\"lock\"}") == 0);
        CHECK(sample(t, "baton_hold_seconds_count{recipe=\"lock\"}") == 1);
        CHECK(sample(t, "baton_hold_seconds_bucket{recipe=\"lock\",le=\"+Inf\"}") == 1);
        free(t);
    }
    baton_lock_free(l);
}

/* ---- 429s from a dev server's connection limit ---------------------------------------- */

struct devserver {
    pid_t pid;
    FILE *out;
    char addr[64];
};

/* Starts `bin --port 0 --max-conns-per-client limit` and reads its address. */
static bool devserver_start(struct devserver *d, const char *bin, const char *limit) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    char *argv[] = {(char *)bin, "--port", "0", "--max-conns-per-client", (char *)limit, NULL};
    int rc = posix_spawn(&d->pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return false;
    }
    d->out = fdopen(fds[0], "r");
    char line[256];
    while (d->out && fgets(line, sizeof line, d->out)) {
        if (strncmp(line, "BATON_DEVSERVER_ADDR=", 21) == 0) {
            snprintf(d->addr, sizeof d->addr, "%s", line + 21);
            d->addr[strcspn(d->addr, "\r\n")] = '\0';
            return true;
        }
    }
    return false;
}

static void devserver_stop(struct devserver *d) {
    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        waitpid(d->pid, NULL, 0);
    }
    if (d->out) fclose(d->out);
}

/* A raw TCP connection to `addr` (`host:port`, optionally `http://`) on which one request
 * was answered: the server has counted it against the limit when this returns. -1 on error. */
static int counted_connection(const char *addr) {
    const char *hp = strncmp(addr, "http://", 7) == 0 ? addr + 7 : addr;
    char host[64];
    snprintf(host, sizeof host, "%s", hp);
    char *colon = strrchr(host, ':');
    if (!colon) return -1;
    *colon = '\0';
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) return -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    const char req[] = "GET /v1/status/leader HTTP/1.1\r\nHost: baton\r\n\r\n";
    if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
        close(fd);
        return -1;
    }
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 12 || strncmp(buf, "HTTP/1.1 200", 12) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A full connection limit: exactly the 429s caused, all on kv, and none once it frees. */
static void test_metrics_count_exactly_the_429s_of_a_full_connection_limit(void) {
    enum { LIMIT = 4, REFUSED = 3 };
    const char *bin = getenv("BATON_DEVSERVER_BIN");
    if (getenv("BATON_TEST_REAL_CONSUL") || !bin || !*bin) {
        fprintf(stderr, "  (skipped: no dev server binary in BATON_DEVSERVER_BIN)\n");
        return;
    }
    struct devserver d = {0, NULL, ""};
    bool started = devserver_start(&d, bin, "4");
    CHECK(started);
    if (!started) {
        devserver_stop(&d);
        return;
    }
    baton_client_options o = baton_client_options_default();
    o.address = d.addr;
    baton_client *c = NULL;
    CHECK_RC(baton_client_new(&o, &c), BATON_OK);
    /* Fill the limit with connections of our own, each counted by the server. */
    int held[LIMIT];
    bool all = true;
    for (int i = 0; i < LIMIT; i++) {
        held[i] = counted_connection(d.addr);
        all = all && held[i] >= 0;
    }
    CHECK(all);
    if (c && all) {
        char key[128];
        key_of(key, sizeof key, "limited");
        uint8_t v[8];
        size_t n = 0;
        bool found = true;
        for (int i = 0; i < REFUSED; i++) {
            baton_result rc = baton_kv_get(c, key, NULL, v, sizeof v, &n, &found);
            /* Consul's limiter answers 429: a server error worth trying again later. */
            CHECK_RC(rc, BATON_SERVER);
            CHECK(baton_last_error_is_transient());
            CHECK(last_error_has("429"));
        }
        baton_metrics m = snap(c);
        CHECK(m.requests[BATON_FAMILY_KV][BATON_REQUEST_429] == REFUSED);
        uint64_t all429 = 0, answered = 0;
        for (size_t f = 0; f < BATON_FAMILY_COUNT; f++) {
            all429 += m.requests[f][BATON_REQUEST_429];
            answered += m.requests[f][BATON_REQUEST_2XX] + m.requests[f][BATON_REQUEST_4XX];
        }
        CHECK(all429 == REFUSED);
        CHECK(answered == 0);
        /* Answered again once our connections are gone (the server notices in its own
         * time: poll, counting the 429s seen meanwhile). */
        for (int i = 0; i < LIMIT; i++) close(held[i]);
        all = false;
        baton_result rc = BATON_SERVER;
        uint64_t more = 0;
        for (long t = 0; t < PATIENCE_MS; t += 20) {
            rc = baton_kv_get(c, key, NULL, v, sizeof v, &n, &found);
            if (rc == BATON_OK) break;
            CHECK(last_error_has("429"));
            more++;
            sleep_ms(20);
        }
        CHECK_RC(rc, BATON_OK);
        CHECK(!found);
        m = snap(c);
        CHECK(m.requests[BATON_FAMILY_KV][BATON_REQUEST_4XX] == 1); /* the missing key's 404 */
        CHECK(m.requests[BATON_FAMILY_KV][BATON_REQUEST_429] == REFUSED + more);
    } else {
        for (int i = 0; i < LIMIT; i++)
            if (held[i] >= 0) close(held[i]);
    }
    if (c) CHECK_RC(baton_client_close(c, 10000), BATON_OK);
    baton_client_free(c);
    devserver_stop(&d);
}

void test_metrics(void) {
    RUN1(test_metrics_tables_and_a_fresh_client);
    RUN2(test_metrics_count_acquires_and_losses_exactly);
    RUN1(test_metrics_count_an_election_as_its_own);
    RUN1(test_metrics_refuses_hostile_arguments);
    RUN1(test_metrics_text_exposition);
    RUN0(test_metrics_count_exactly_the_429s_of_a_full_connection_limit);
}
