/* C tests of the read-write lock, multi-key lock, leader task, group membership, barriers
 * and counter through the C API, against the dev server at CONSUL_HTTP_ADDR. Called from
 * test_baton.c's main. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

/* A session of our own with no lock-delay, so that destroying it frees its keys at once. */
static baton_session *quick_session(baton_client *c) {
    baton_session *s = NULL;
    baton_session_options o = baton_session_options_default();
    o.lock_delay_ms = 0;
    o.ttl_ms = 10000;
    CHECK_RC(baton_session_create(c, &o, &s), BATON_OK);
    return s;
}

static void session_id(baton_session *s, char id[64]) {
    id[0] = 0;
    CHECK_RC(baton_session_id(s, id, 64, NULL), BATON_OK);
}

/* The session part of a sequencer `<lock_index>:<token>:<session>:<key>`. */
static void sequencer_session(const char *seq, char id[64]) {
    id[0] = 0;
    const char *p = strchr(seq, ':');
    p = p ? strchr(p + 1, ':') : NULL;
    if (!p) return;
    p++;
    const char *end = strchr(p, ':');
    size_t n = end ? (size_t)(end - p) : 0;
    if (n >= 64) n = 63;
    memcpy(id, p, n);
    id[n] = 0;
}

/* The session holding `key` ("" when none) into `id`. */
static void key_holder(baton_client *c, const char *key, char id[64]) {
    baton_kv_entry e;
    bool found = false;
    uint8_t buf[64];
    id[0] = 0;
    CHECK_RC(baton_kv_get_entry(c, key, NULL, buf, sizeof buf, NULL, &e, &found), BATON_OK);
    if (found) snprintf(id, 64, "%s", e.session);
}

struct lost_rec {
    atomic_int calls;
    atomic_int reason;
    atomic_int session_reason;
    atomic_int freed;
};

static void lost_cb(void *ud, baton_hold_lost reason, baton_lost_reason session_reason) {
    struct lost_rec *r = ud;
    atomic_store(&r->reason, (int)reason);
    atomic_store(&r->session_reason, (int)session_reason);
    atomic_fetch_add(&r->calls, 1);
}

static void lost_free(void *ud) {
    struct lost_rec *r = ud;
    atomic_fetch_add(&r->freed, 1);
}

/* ---- cancel tokens ------------------------------------------------------------------- */

struct canceller {
    baton_cancel *cancel;
    long after_ms;
};

static void *cancel_later(void *arg) {
    struct canceller *k = arg;
    sleep_ms(k->after_ms);
    (void)baton_cancel_cancel(k->cancel);
    return NULL;
}

static long elapsed_ms(struct timespec a) {
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
}

/* baton_cancel_wait: a timeout when nobody cancels, at once when cancelled, woken by a
 * cancel from another thread. */
static void test_cancel_wait(void) {
    baton_cancel *k = NULL;
    CHECK_RC(baton_cancel_new(&k), BATON_OK);
    if (!k) return;
    CHECK_RC(baton_cancel_wait(k, 0), BATON_TIMEOUT);
    CHECK_RC(baton_cancel_wait(k, 50), BATON_TIMEOUT);
    struct canceller cl = {k, 100};
    pthread_t t;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    CHECK(pthread_create(&t, NULL, cancel_later, &cl) == 0);
    CHECK_RC(baton_cancel_wait(k, BATON_WAIT_FOREVER), BATON_OK);
    CHECK(elapsed_ms(start) < 5000);
    pthread_join(t, NULL);
    CHECK(baton_cancel_is_cancelled(k));
    CHECK_RC(baton_cancel_wait(k, 0), BATON_OK);
    baton_cancel_free(k);
}

/* ---- read-write lock ----------------------------------------------------------------- */

struct acquirer {
    baton_rwlock *rw;
    baton_multilock *ml;
    baton_result rc;
    atomic_int done;
};

static void *rw_acquire_forever(void *arg) {
    struct acquirer *a = arg;
    a->rc = baton_rwlock_acquire(a->rw, BATON_WAIT_FOREVER, NULL);
    atomic_store(&a->done, 1);
    return NULL;
}

/* Readers share; a writer waits for a reader to leave; a reader arriving behind a waiting
 * writer waits for it; sequencers, release, not-held. */
static void test_rwlock_exclusion(baton_client *c, baton_client *other) {
    const char *prefix = "ffi/more/rw/excl";
    baton_rwlock *r1 = NULL, *r2 = NULL, *w = NULL, *r3 = NULL;
    CHECK_RC(baton_rwlock_new(c, prefix, BATON_RW_READ, &r1), BATON_OK);
    CHECK_RC(baton_rwlock_new(other, prefix, BATON_RW_READ, &r2), BATON_OK);
    CHECK_RC(baton_rwlock_new(other, prefix, BATON_RW_WRITE, &w), BATON_OK);
    CHECK_RC(baton_rwlock_new(c, prefix, BATON_RW_READ, &r3), BATON_OK);
    if (!r1 || !r2 || !w || !r3) return;
    CHECK_RC(baton_rwlock_release(r1), BATON_NOT_HELD);
    CHECK_RC(baton_rwlock_acquire(r1, 5000, NULL), BATON_OK);
    CHECK_RC(baton_rwlock_acquire(r1, 0, NULL), BATON_CONFLICT);
    CHECK(last_error_has("Lock already held"));
    /* Two readers at once. */
    CHECK_RC(baton_rwlock_acquire(r2, 5000, NULL), BATON_OK);
    CHECK(baton_rwlock_is_held(r1) && baton_rwlock_is_held(r2));
    char seq[512];
    uint64_t t1 = 0;
    size_t n = 0;
    CHECK_RC(baton_rwlock_sequencer(r1, NULL, 0, &n, NULL), BATON_BUFFER_TOO_SMALL);
    CHECK(n > strlen(prefix));
    CHECK_RC(baton_rwlock_sequencer(r1, seq, sizeof seq, &n, &t1), BATON_OK);
    CHECK(t1 > 0 && strstr(seq, prefix) != NULL && n == strlen(seq));
    bool current = false;
    CHECK_RC(baton_check_sequencer(other, seq, &current), BATON_OK);
    CHECK(current);
    /* A writer does not get in while readers hold. */
    CHECK_RC(baton_rwlock_acquire(w, 0, NULL), BATON_TIMEOUT);
    CHECK_RC(baton_rwlock_acquire(w, 200, NULL), BATON_TIMEOUT);
    CHECK(!baton_rwlock_is_held(w));
    CHECK_RC(baton_rwlock_release(r2), BATON_OK);
    struct acquirer wa = {.rw = w};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, rw_acquire_forever, &wa) == 0);
    /* The writer waits for r1, and a reader arriving after it waits for the writer. */
    sleep_ms(300);
    CHECK(atomic_load(&wa.done) == 0 && !baton_rwlock_is_held(w));
    CHECK_RC(baton_rwlock_acquire(r3, 200, NULL), BATON_TIMEOUT);
    CHECK_RC(baton_rwlock_release(r1), BATON_OK);
    pthread_join(t, NULL);
    CHECK_RC(wa.rc, BATON_OK);
    CHECK(baton_rwlock_is_held(w) && !baton_rwlock_is_held(r1));
    CHECK_RC(baton_check_sequencer(other, seq, &current), BATON_OK);
    CHECK(!current);
    uint64_t tw = 0;
    CHECK_RC(baton_rwlock_sequencer(w, seq, sizeof seq, NULL, &tw), BATON_OK);
    CHECK(tw > t1);
    /* Readers are excluded while the writer holds. */
    CHECK_RC(baton_rwlock_acquire(r1, 100, NULL), BATON_TIMEOUT);
    baton_hold_lost why = 0;
    CHECK_RC(baton_rwlock_wait_lost(w, 0, NULL, &why, NULL), BATON_TIMEOUT);
    CHECK_RC(baton_rwlock_release(w), BATON_OK);
    CHECK_RC(baton_rwlock_wait_lost(w, 0, NULL, &why, NULL), BATON_OK);
    CHECK(why == BATON_HOLD_RELEASED);
    CHECK_RC(baton_rwlock_sequencer(w, seq, sizeof seq, NULL, NULL), BATON_NOT_HELD);
    CHECK_RC(baton_rwlock_acquire(r1, 5000, NULL), BATON_OK);
    baton_rwlock_free(r1); /* releases */
    CHECK_RC(baton_rwlock_acquire(w, 5000, NULL), BATON_OK);
    baton_rwlock_free(w);
    baton_rwlock_free(r2);
    baton_rwlock_free(r3);
}

/* Loss: the holding's session destroyed from another client fires the lost callback and
 * wait_lost with the session's reason; a cancel ends an acquire that waits. */
static void test_rwlock_lost_and_cancel(baton_client *c, baton_client *other) {
    const char *prefix = "ffi/more/rw/lost";
    baton_rwlock *w = NULL, *w2 = NULL;
    CHECK_RC(baton_rwlock_new(c, prefix, BATON_RW_WRITE, &w), BATON_OK);
    CHECK_RC(baton_rwlock_new(other, prefix, BATON_RW_WRITE, &w2), BATON_OK);
    if (!w || !w2) return;
    static struct lost_rec rec;
    CHECK_RC(baton_rwlock_on_lost(w, lost_cb, &rec, lost_free), BATON_OK);
    CHECK_RC(baton_rwlock_acquire(w, 5000, NULL), BATON_OK);
    /* A writer that waits is cancelled from another thread. */
    baton_cancel *k = NULL;
    CHECK_RC(baton_cancel_new(&k), BATON_OK);
    struct canceller cl = {k, 100};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cancel_later, &cl) == 0);
    CHECK_RC(baton_rwlock_acquire(w2, BATON_WAIT_FOREVER, k), BATON_CANCELLED);
    pthread_join(t, NULL);
    CHECK(!baton_rwlock_is_held(w2));
    baton_cancel_free(k);
    char seq[512], sid[64];
    CHECK_RC(baton_rwlock_sequencer(w, seq, sizeof seq, NULL, NULL), BATON_OK);
    sequencer_session(seq, sid);
    CHECK(strlen(sid) == 36);
    CHECK_RC(baton_client_destroy_session_id(other, sid), BATON_OK);
    baton_hold_lost why = 0;
    baton_lost_reason sr = BATON_LOST_NONE;
    CHECK_RC(baton_rwlock_wait_lost(w, 10000, NULL, &why, &sr), BATON_OK);
    CHECK(why == BATON_HOLD_SESSION_LOST || why == BATON_HOLD_KEY_CHANGED);
    CHECK(!baton_rwlock_is_held(w));
    CHECK(wait_for(&rec.calls, 1, 10000));
    CHECK(atomic_load(&rec.calls) == 1);
    CHECK_RC(baton_rwlock_release(w), BATON_NOT_HELD);
    /* The other writer gets in once the lost holding's key is gone. */
    CHECK_RC(baton_rwlock_acquire(w2, 20000, NULL), BATON_OK);
    CHECK_RC(baton_rwlock_release(w2), BATON_OK);
    baton_rwlock_free(w);
    CHECK(atomic_load(&rec.freed) == 1);
    baton_rwlock_free(w2);
}

/* ---- multi-key lock ------------------------------------------------------------------ */

static void *ml_acquire_forever(void *arg) {
    struct acquirer *a = arg;
    a->rc = baton_multilock_acquire(a->ml, BATON_WAIT_FOREVER, NULL);
    atomic_store(&a->done, 1);
    return NULL;
}

/* All or none: while a baton lock holds one key, the multi-key lock holds none of the set,
 * even while it waits; it takes them all once that key is released. */
static void test_multilock_all_or_none(baton_client *c, baton_client *other) {
    const char *a = "ffi/more/ml/account-a", *b = "ffi/more/ml/account-b";
    const char *keys[] = {b, a, b}; /* a duplicate, unsorted */
    baton_multilock_options o = baton_multilock_options_default();
    CHECK(o.session == NULL && o.flags == BATON_LOCK_FLAGS && o.value_len == 0);
    o.value = (const uint8_t *)"mover";
    o.value_len = 5;
    baton_multilock *ml = NULL;
    baton_lock *lb = NULL, *la = NULL;
    CHECK_RC(baton_multilock_new(c, keys, 3, &o, &ml), BATON_OK);
    CHECK_RC(baton_lock_new(other, b, NULL, &lb), BATON_OK);
    CHECK_RC(baton_lock_new(other, a, NULL, &la), BATON_OK);
    if (!ml || !lb || !la) return;
    CHECK(baton_multilock_key_count(ml) == 2);
    char kbuf[128];
    size_t n = 0;
    CHECK_RC(baton_multilock_key(ml, 0, kbuf, sizeof kbuf, &n), BATON_OK);
    CHECK(strcmp(kbuf, a) == 0 && n == strlen(a));
    CHECK_RC(baton_multilock_key(ml, 1, kbuf, sizeof kbuf, NULL), BATON_OK);
    CHECK(strcmp(kbuf, b) == 0);
    CHECK_RC(baton_multilock_key(ml, 2, kbuf, sizeof kbuf, NULL), BATON_INVALID_ARGUMENT);

    CHECK_RC(baton_lock_acquire(lb, 5000, NULL), BATON_OK);
    CHECK_RC(baton_multilock_acquire(ml, 0, NULL), BATON_TIMEOUT);
    CHECK_RC(baton_multilock_acquire(ml, 200, NULL), BATON_TIMEOUT);
    CHECK(!baton_multilock_is_held(ml));
    char holder[64];
    key_holder(other, a, holder);
    CHECK(holder[0] == 0);
    struct acquirer w = {.ml = ml};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, ml_acquire_forever, &w) == 0);
    /* While it waits, key a (free) is never taken alone. */
    for (int i = 0; i < 30; i++) {
        key_holder(other, a, holder);
        CHECK(holder[0] == 0);
        sleep_ms(10);
    }
    CHECK(atomic_load(&w.done) == 0);
    CHECK_RC(baton_lock_release(lb), BATON_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, BATON_OK);
    CHECK(baton_multilock_is_held(ml));
    CHECK_RC(baton_multilock_acquire(ml, 0, NULL), BATON_CONFLICT);
    CHECK(last_error_has("Lock already held"));
    /* Both keys carry our session and value; a lock on either is excluded. */
    char ha[64], hb[64];
    key_holder(other, a, ha);
    key_holder(other, b, hb);
    CHECK(ha[0] != 0 && strcmp(ha, hb) == 0);
    uint8_t vbuf[16];
    bool found = false;
    CHECK_RC(baton_kv_get(other, a, NULL, vbuf, sizeof vbuf, &n, &found), BATON_OK);
    CHECK(found && n == 5 && memcmp(vbuf, "mover", 5) == 0);
    CHECK_RC(baton_lock_acquire(la, 0, NULL), BATON_TIMEOUT);
    CHECK_RC(baton_lock_acquire(lb, 0, NULL), BATON_TIMEOUT);
    /* Sequencers: the first key's, and one per key sharing the token. */
    char seq[512], seq1[512];
    uint64_t token = 0, token1 = 0;
    CHECK_RC(baton_multilock_sequencer(ml, seq, BATON_SEQUENCER_MAX(strlen(b)), &n, &token),
             BATON_OK);
    CHECK(token > 0 && strstr(seq, a) != NULL && n == strlen(seq));
    CHECK_RC(baton_multilock_sequencer_at(ml, 1, seq1, sizeof seq1, NULL, &token1), BATON_OK);
    CHECK(token1 == token && strstr(seq1, b) != NULL);
    CHECK_RC(baton_multilock_sequencer_at(ml, 0, seq1, sizeof seq1, NULL, NULL), BATON_OK);
    CHECK(strcmp(seq1, seq) == 0);
    CHECK_RC(baton_multilock_sequencer_at(ml, 2, seq1, sizeof seq1, NULL, NULL),
             BATON_INVALID_ARGUMENT);
    bool current = false;
    CHECK_RC(baton_check_sequencer(other, seq, &current), BATON_OK);
    CHECK(current);
    baton_hold_lost why = 0;
    CHECK_RC(baton_multilock_wait_lost(ml, 0, NULL, &why, NULL), BATON_TIMEOUT);
    CHECK_RC(baton_multilock_release(ml), BATON_OK);
    CHECK_RC(baton_multilock_release(ml), BATON_NOT_HELD);
    CHECK_RC(baton_multilock_wait_lost(ml, 0, NULL, &why, NULL), BATON_OK);
    CHECK(why == BATON_HOLD_RELEASED);
    CHECK_RC(baton_multilock_sequencer(ml, seq, sizeof seq, NULL, NULL), BATON_NOT_HELD);
    CHECK_RC(baton_multilock_sequencer_at(ml, 0, seq, sizeof seq, NULL, NULL), BATON_NOT_HELD);
    /* Released: both keys free at once (no lock-delay). */
    CHECK_RC(baton_lock_acquire(la, 0, NULL), BATON_OK);
    CHECK_RC(baton_lock_release(la), BATON_OK);
    baton_multilock_free(ml);
    baton_lock_free(la);
    baton_lock_free(lb);
}

/* Loss of any key's holding (its session destroyed) fires the lost callback once; a
 * waiting acquire is cancelled holding nothing. */
static void test_multilock_lost(baton_client *c, baton_client *other) {
    const char *keys[] = {"ffi/more/ml/lost-1", "ffi/more/ml/lost-2"};
    baton_session *s = quick_session(c);
    if (!s) return;
    baton_multilock_options o = baton_multilock_options_default();
    o.session = s;
    baton_multilock *ml = NULL, *ml2 = NULL;
    CHECK_RC(baton_multilock_new(c, keys, 2, &o, &ml), BATON_OK);
    CHECK_RC(baton_multilock_new(other, keys, 2, NULL, &ml2), BATON_OK);
    if (!ml || !ml2) return;
    static struct lost_rec rec;
    CHECK_RC(baton_multilock_on_lost(ml, lost_cb, &rec, lost_free), BATON_OK);
    CHECK_RC(baton_multilock_acquire(ml, 5000, NULL), BATON_OK);
    baton_cancel *k = NULL;
    CHECK_RC(baton_cancel_new(&k), BATON_OK);
    struct canceller cl = {k, 100};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cancel_later, &cl) == 0);
    CHECK_RC(baton_multilock_acquire(ml2, BATON_WAIT_FOREVER, k), BATON_CANCELLED);
    pthread_join(t, NULL);
    baton_cancel_free(k);
    CHECK(!baton_multilock_is_held(ml2));
    char sid[64];
    session_id(s, sid);
    CHECK_RC(baton_client_destroy_session_id(other, sid), BATON_OK);
    baton_hold_lost why = 0;
    baton_lost_reason sr = BATON_LOST_NONE;
    CHECK_RC(baton_multilock_wait_lost(ml, 10000, NULL, &why, &sr), BATON_OK);
    CHECK(why == BATON_HOLD_SESSION_LOST || why == BATON_HOLD_KEY_CHANGED);
    CHECK(!baton_multilock_is_held(ml));
    CHECK(wait_for(&rec.calls, 1, 10000));
    CHECK(atomic_load(&rec.reason) == (int)why);
    CHECK_RC(baton_multilock_acquire(ml2, 10000, NULL), BATON_OK);
    CHECK_RC(baton_multilock_release(ml2), BATON_OK);
    baton_multilock_free(ml);
    CHECK(atomic_load(&rec.freed) == 1);
    baton_multilock_free(ml2);
    baton_session_free(s);
}

/* ---- leader task --------------------------------------------------------------------- */

struct task_rec {
    atomic_int started, stopped, new_leader, leaders_seen, runs, token_fired, freed;
    atomic_int stop_reason, task_result, lost, session_reason;
    int return_value;        /* what the task returns */
    baton_leader_task *task; /* for the sequencer inside the task */
    atomic_int had_sequencer;
};

static void on_started(void *ud) {
    struct task_rec *r = ud;
    atomic_fetch_add(&r->started, 1);
}

static void on_stopped(void *ud, const baton_stopped_leading *s) {
    struct task_rec *r = ud;
    atomic_store(&r->stop_reason, (int)s->reason);
    atomic_store(&r->task_result, s->task_result);
    atomic_store(&r->lost, (int)s->lost);
    atomic_store(&r->session_reason, (int)s->session_reason);
    atomic_fetch_add(&r->stopped, 1);
}

static void on_new_leader(void *ud, const baton_leader *l) {
    struct task_rec *r = ud;
    if (l->has_leader && l->value_len == 6 && memcmp(l->value, "node-1", 6) == 0)
        atomic_fetch_add(&r->leaders_seen, 1);
    atomic_fetch_add(&r->new_leader, 1);
}

static void task_ud_free(void *ud) {
    struct task_rec *r = ud;
    atomic_fetch_add(&r->freed, 1);
}

/* Waits for its token, then returns r->return_value. */
static int wait_token_task(const baton_cancel *token, void *ud) {
    struct task_rec *r = ud;
    atomic_fetch_add(&r->runs, 1);
    char seq[512];
    if (r->task && baton_leader_task_is_leader(r->task) &&
        baton_leader_task_sequencer(r->task, seq, sizeof seq, NULL, NULL) == BATON_OK)
        atomic_fetch_add(&r->had_sequencer, 1);
    if (baton_cancel_wait(token, BATON_WAIT_FOREVER) == BATON_OK &&
        baton_cancel_is_cancelled(token))
        atomic_fetch_add(&r->token_fired, 1);
    return r->return_value;
}

/* Returns at once with r->return_value. */
static int quick_task(const baton_cancel *token, void *ud) {
    struct task_rec *r = ud;
    (void)token;
    atomic_fetch_add(&r->runs, 1);
    return r->return_value;
}

struct runner {
    baton_leader_task *task;
    baton_leader_task_fn fn;
    struct task_rec *rec;
    baton_cancel *stop;
    baton_result rc;
    atomic_int done;
};

static void *run_task(void *arg) {
    struct runner *r = arg;
    r->rc = baton_leader_task_run(r->task, r->fn, r->rec, r->stop);
    atomic_store(&r->done, 1);
    return NULL;
}

/* The task's token fires when leadership is lost (its session destroyed from another
 * client): the task returns, the term ends as lost, and run (requeue off) returns OK. */
static void test_leader_task_lost(baton_client *c, baton_client *other) {
    const char *key = "ffi/more/leader/lost";
    baton_session *s = quick_session(c);
    if (!s) return;
    static struct task_rec rec;
    baton_leader_task_options o = baton_leader_task_options_default();
    CHECK(o.requeue && o.requeue_delay_ms == 500 && o.flags == BATON_LOCK_FLAGS);
    o.session = s;
    o.requeue = false;
    o.on_started = on_started;
    o.on_stopped = on_stopped;
    o.on_new_leader = on_new_leader;
    o.userdata = &rec;
    o.userdata_free = task_ud_free;
    baton_leader_task *task = NULL;
    CHECK_RC(baton_leader_task_new(c, key, (const uint8_t *)"node-1", 6, &o, &task), BATON_OK);
    if (!task) return;
    rec.task = task;
    CHECK(!baton_leader_task_is_leader(task));
    char seq[512];
    CHECK_RC(baton_leader_task_sequencer(task, seq, sizeof seq, NULL, NULL), BATON_NOT_HELD);
    struct runner rn = {.task = task, .fn = wait_token_task, .rec = &rec};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, run_task, &rn) == 0);
    CHECK(wait_for(&rec.runs, 1, 10000));
    CHECK(atomic_load(&rec.started) == 1);
    CHECK(atomic_load(&rec.had_sequencer) == 1);
    CHECK(baton_leader_task_is_leader(task));
    CHECK(wait_for(&rec.leaders_seen, 1, 10000));
    baton_leader ld;
    uint8_t vbuf[16];
    CHECK_RC(baton_election_leader(other, key, &ld, vbuf, sizeof vbuf), BATON_OK);
    CHECK(ld.has_leader && ld.value_len == 6 && memcmp(vbuf, "node-1", 6) == 0);
    CHECK(atomic_load(&rec.token_fired) == 0 && atomic_load(&rn.done) == 0);
    char sid[64];
    session_id(s, sid);
    CHECK_RC(baton_client_destroy_session_id(other, sid), BATON_OK);
    pthread_join(t, NULL);
    CHECK_RC(rn.rc, BATON_OK);
    CHECK(atomic_load(&rec.token_fired) == 1);
    CHECK(atomic_load(&rec.stopped) == 1);
    CHECK(atomic_load(&rec.stop_reason) == BATON_STOP_LOST);
    CHECK(strcmp(baton_stop_reason_name((uint32_t)atomic_load(&rec.stop_reason)), "lost") == 0);
    int lost = atomic_load(&rec.lost);
    CHECK(lost == BATON_HOLD_SESSION_LOST || lost == BATON_HOLD_KEY_CHANGED);
    CHECK(!baton_leader_task_is_leader(task));
    int seen = atomic_load(&rec.new_leader);
    CHECK(seen >= 1);
    baton_leader_task_free(task);
    CHECK(atomic_load(&rec.freed) == 1);
    baton_session_free(s);
}

/* A task that fails with requeue off: run returns its code and the stopped callback says
 * failed with the value; a value that is not a baton_result is refused by name; stop ends
 * a requeueing run (stopped) while the task waits on its token. */
static void test_leader_task_failed_and_stopped(baton_client *c, baton_client *other) {
    const char *key = "ffi/more/leader/failed";
    static struct task_rec rec;
    baton_leader_task_options o = baton_leader_task_options_default();
    o.requeue = false;
    o.on_stopped = on_stopped;
    o.userdata = &rec;
    baton_leader_task *task = NULL;
    CHECK_RC(baton_leader_task_new(c, key, NULL, 0, &o, &task), BATON_OK);
    if (!task) return;
    rec.return_value = BATON_CONFLICT;
    CHECK_RC(baton_leader_task_run(task, quick_task, &rec, NULL), BATON_CONFLICT);
    CHECK(last_error_has("the task returned 204"));
    CHECK(atomic_load(&rec.stopped) == 1);
    CHECK(atomic_load(&rec.stop_reason) == BATON_STOP_FAILED);
    CHECK(atomic_load(&rec.task_result) == BATON_CONFLICT);
    CHECK(!baton_leader_task_is_leader(task)); /* resigned */
    rec.return_value = -1;
    CHECK_RC(baton_leader_task_run(task, quick_task, &rec, NULL), BATON_INVALID_ARGUMENT);
    CHECK(last_error_has("not a baton_result"));
    rec.return_value = 0;
    CHECK_RC(baton_leader_task_run(task, quick_task, &rec, NULL), BATON_OK);
    CHECK(atomic_load(&rec.stop_reason) == BATON_STOP_RETURNED);
    CHECK(atomic_load(&rec.runs) == 3);
    baton_leader_task_free(task);

    /* Requeue on: stop while the task runs; a second candidate leads meanwhile only after. */
    static struct task_rec rec2;
    o = baton_leader_task_options_default();
    o.on_stopped = on_stopped;
    o.userdata = &rec2;
    baton_leader_task *t1 = NULL;
    CHECK_RC(baton_leader_task_new(c, "ffi/more/leader/stop", NULL, 0, &o, &t1), BATON_OK);
    baton_election *rival = NULL;
    CHECK_RC(baton_election_new(other, "ffi/more/leader/stop", NULL, &rival), BATON_OK);
    if (!t1 || !rival) return;
    baton_cancel *stop = NULL;
    CHECK_RC(baton_cancel_new(&stop), BATON_OK);
    struct runner rn = {.task = t1, .fn = wait_token_task, .rec = &rec2, .stop = stop};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, run_task, &rn) == 0);
    CHECK(wait_for(&rec2.runs, 1, 10000));
    CHECK_RC(baton_election_campaign(rival, (const uint8_t *)"r", 1, 0, NULL), BATON_TIMEOUT);
    CHECK_RC(baton_cancel_cancel(stop), BATON_OK);
    pthread_join(t, NULL);
    CHECK_RC(rn.rc, BATON_OK);
    CHECK(atomic_load(&rec2.token_fired) == 1);
    CHECK(atomic_load(&rec2.stop_reason) == BATON_STOP_STOPPED);
    CHECK_RC(baton_election_campaign(rival, (const uint8_t *)"r", 1, 5000, NULL), BATON_OK);
    /* A run with stop already fired returns at once, nothing held. */
    CHECK_RC(baton_leader_task_run(t1, wait_token_task, &rec2, stop), BATON_OK);
    CHECK(atomic_load(&rec2.runs) == 1);
    baton_election_free(rival);
    baton_leader_task_free(t1);
    baton_cancel_free(stop);
}

/* ---- group membership ---------------------------------------------------------------- */

static baton_membership_event *next_event(baton_members_watch *w) {
    baton_membership_event *ev = NULL;
    CHECK_RC(baton_members_watch_next(w, 10000, NULL, &ev), BATON_OK);
    return ev;
}

/* Join, list, watch (snapshot, joined, updated, left), leave. */
static void test_group(baton_client *c, baton_client *other) {
    const char *prefix = "ffi/more/group/";
    baton_group *g = NULL, *g2 = NULL;
    CHECK_RC(baton_group_new(c, prefix, &g), BATON_OK);
    CHECK_RC(baton_group_new(other, "ffi/more/group", &g2), BATON_OK);
    if (!g || !g2) return;
    baton_member_info *ms = NULL;
    size_t count = 7;
    CHECK_RC(baton_group_members(g, &ms, &count), BATON_OK);
    CHECK(ms == NULL && count == 0);
    baton_members_free(ms, count);
    baton_member *a = NULL, *b = NULL, *c2 = NULL;
    CHECK_RC(baton_group_join(g, "alpha", (const uint8_t *)"10.0.0.1", 8, NULL, &a), BATON_OK);
    CHECK_RC(baton_group_join(g2, "beta", NULL, 0, NULL, &b), BATON_OK);
    if (!a || !b) return;
    CHECK(baton_member_is_member(a) && baton_member_is_member(b));
    CHECK_RC(baton_group_join(g2, "alpha", NULL, 0, NULL, &c2), BATON_CONFLICT);
    CHECK(last_error_has("taken"));
    CHECK(c2 == NULL);
    char key[128];
    size_t n = 0;
    CHECK_RC(baton_member_key(a, key, sizeof key, &n), BATON_OK);
    CHECK(strcmp(key, "ffi/more/group/alpha") == 0 && n == strlen(key));
    CHECK_RC(baton_member_key(a, key, 4, &n), BATON_BUFFER_TOO_SMALL);

    CHECK_RC(baton_group_members(g2, &ms, &count), BATON_OK);
    CHECK(count == 2);
    if (count == 2) {
        CHECK(strcmp(ms[0].id, "alpha") == 0 && strcmp(ms[1].id, "beta") == 0);
        CHECK(ms[0].value_len == 8 && memcmp(ms[0].value, "10.0.0.1", 8) == 0);
        CHECK(ms[1].value_len == 0 && ms[1].value == NULL);
        CHECK(strlen(ms[0].session) == 36 && strlen(ms[1].session) == 36);
        CHECK(strcmp(ms[0].session, ms[1].session) != 0);
        CHECK(ms[0].create_index < ms[1].create_index && ms[0].modify_index > 0);
    }
    baton_members_free(ms, count);

    baton_members_watch *w = NULL;
    CHECK_RC(baton_group_watch(g2, &w), BATON_OK);
    if (!w) return;
    baton_membership_event *ev = next_event(w);
    CHECK(ev && ev->kind == BATON_MEMBERSHIP_SNAPSHOT && ev->members_len == 2);
    baton_membership_event_free(ev);
    CHECK_RC(baton_members_watch_next(w, 100, NULL, &ev), BATON_TIMEOUT);

    CHECK_RC(baton_group_join(g, "gamma", (const uint8_t *)"g", 1, NULL, &c2), BATON_OK);
    ev = next_event(w);
    CHECK(ev && ev->kind == BATON_MEMBERSHIP_JOINED && strcmp(ev->id, "gamma") == 0 &&
          ev->members_len == 1 && strcmp(ev->members[0].id, "gamma") == 0);
    baton_membership_event_free(ev);
    CHECK_RC(baton_member_update_value(a, (const uint8_t *)"10.0.0.9", 8), BATON_OK);
    ev = next_event(w);
    CHECK(ev && ev->kind == BATON_MEMBERSHIP_UPDATED && strcmp(ev->id, "alpha") == 0 &&
          ev->members_len == 1 && ev->members[0].value_len == 8 &&
          memcmp(ev->members[0].value, "10.0.0.9", 8) == 0);
    baton_membership_event_free(ev);
    CHECK_RC(baton_member_leave(b), BATON_OK);
    CHECK(!baton_member_is_member(b));
    CHECK_RC(baton_member_leave(b), BATON_NOT_HELD);
    CHECK(last_error_has("left"));
    baton_member_lost why = 0;
    baton_lost_reason sr = BATON_LOST_INVALIDATED;
    CHECK_RC(baton_member_wait_lost(b, 0, NULL, &why, &sr), BATON_OK);
    CHECK(why == BATON_MEMBER_LEFT && sr == BATON_LOST_NONE);
    CHECK(strcmp(baton_member_lost_name(why), "left") == 0);
    CHECK_RC(baton_member_update_value(b, (const uint8_t *)"x", 1), BATON_CONFLICT);
    ev = next_event(w);
    CHECK(ev && ev->kind == BATON_MEMBERSHIP_LEFT && strcmp(ev->id, "beta") == 0 &&
          ev->members_len == 0 && ev->members == NULL);
    baton_membership_event_free(ev);
    /* Freeing a member leaves. */
    baton_member_free(c2);
    ev = next_event(w);
    CHECK(ev && ev->kind == BATON_MEMBERSHIP_LEFT && strcmp(ev->id, "gamma") == 0);
    baton_membership_event_free(ev);
    /* A cancelled wait for the next event. */
    baton_cancel *k = NULL;
    CHECK_RC(baton_cancel_new(&k), BATON_OK);
    CHECK_RC(baton_cancel_cancel(k), BATON_OK);
    CHECK_RC(baton_members_watch_next(w, BATON_WAIT_FOREVER, k, &ev), BATON_CANCELLED);
    baton_cancel_free(k);
    CHECK_RC(baton_member_wait_lost(a, 0, NULL, &why, NULL), BATON_TIMEOUT);
    baton_members_watch_free(w);
    baton_member_free(a);
    baton_member_free(b);
    CHECK_RC(baton_group_members(g, &ms, &count), BATON_OK);
    CHECK(count == 0);
    baton_members_free(ms, count);
    baton_group_free(g);
    baton_group_free(g2);
}

/* A member whose session is destroyed from another client is lost, and says why. */
static void test_member_lost(baton_client *c, baton_client *other) {
    baton_session *s = quick_session(c);
    if (!s) return;
    baton_group *g = NULL;
    CHECK_RC(baton_group_new(c, "ffi/more/group-lost", &g), BATON_OK);
    baton_member *m = NULL;
    CHECK_RC(baton_group_join(g, "m1", NULL, 0, s, &m), BATON_OK);
    if (!g || !m) return;
    char sid[64];
    session_id(s, sid);
    CHECK_RC(baton_client_destroy_session_id(other, sid), BATON_OK);
    baton_member_lost why = 0;
    baton_lost_reason sr = BATON_LOST_NONE;
    CHECK_RC(baton_member_wait_lost(m, 10000, NULL, &why, &sr), BATON_OK);
    CHECK(why == BATON_MEMBER_SESSION_LOST || why == BATON_MEMBER_KEY_CHANGED);
    if (why == BATON_MEMBER_SESSION_LOST) CHECK(sr != BATON_LOST_NONE);
    CHECK(!baton_member_is_member(m));
    CHECK_RC(baton_member_leave(m), BATON_NOT_HELD);
    baton_member_free(m);
    baton_group_free(g);
    baton_session_free(s);
}

/* ---- barriers ------------------------------------------------------------------------ */

struct waiter {
    baton_barrier *b;
    baton_double_barrier *d;
    baton_result rc;
    atomic_int done;
};

static void *barrier_wait_forever(void *arg) {
    struct waiter *w = arg;
    w->rc = baton_barrier_wait(w->b, BATON_WAIT_FOREVER, NULL);
    atomic_store(&w->done, 1);
    return NULL;
}

/* Hold, is_held, a wait that times out while held and ends when another client releases. */
static void test_barrier(baton_client *c, baton_client *other) {
    const char *key = "ffi/more/barrier/gate";
    baton_barrier *b = NULL, *b2 = NULL;
    CHECK_RC(baton_barrier_new(c, key, &b), BATON_OK);
    CHECK_RC(baton_barrier_new(other, key, &b2), BATON_OK);
    if (!b || !b2) return;
    bool held = true, raised = false, lowered = true;
    CHECK_RC(baton_barrier_is_held(b, &held), BATON_OK);
    CHECK(!held);
    CHECK_RC(baton_barrier_wait(b2, 0, NULL), BATON_OK); /* not up: at once */
    CHECK_RC(baton_barrier_release(b, &lowered), BATON_OK);
    CHECK(!lowered);
    CHECK_RC(baton_barrier_hold(b, NULL, &raised), BATON_OK);
    CHECK(raised);
    CHECK_RC(baton_barrier_hold(b2, NULL, &raised), BATON_OK);
    CHECK(!raised);
    CHECK_RC(baton_barrier_is_held(b2, &held), BATON_OK);
    CHECK(held);
    CHECK_RC(baton_barrier_wait(b2, 0, NULL), BATON_TIMEOUT);
    CHECK_RC(baton_barrier_wait(b2, 200, NULL), BATON_TIMEOUT);
    struct waiter w = {.b = b2};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, barrier_wait_forever, &w) == 0);
    sleep_ms(200);
    CHECK(atomic_load(&w.done) == 0);
    CHECK_RC(baton_barrier_release(b, &lowered), BATON_OK);
    CHECK(lowered);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, BATON_OK);
    CHECK_RC(baton_barrier_is_held(b2, &held), BATON_OK);
    CHECK(!held);
    /* Bound to a session: it falls when the session ends. */
    baton_session *s = quick_session(c);
    if (s) {
        CHECK_RC(baton_barrier_hold(b, s, &raised), BATON_OK);
        CHECK(raised);
        CHECK_RC(baton_barrier_wait(b2, 0, NULL), BATON_TIMEOUT);
        char sid[64];
        session_id(s, sid);
        CHECK_RC(baton_client_destroy_session_id(other, sid), BATON_OK);
        CHECK_RC(baton_barrier_wait(b2, 10000, NULL), BATON_OK);
        baton_session_free(s);
    }
    baton_cancel *k = NULL;
    CHECK_RC(baton_cancel_new(&k), BATON_OK);
    CHECK_RC(baton_barrier_hold(b, NULL, NULL), BATON_OK);
    CHECK_RC(baton_cancel_cancel(k), BATON_OK);
    CHECK_RC(baton_barrier_wait(b2, BATON_WAIT_FOREVER, k), BATON_CANCELLED);
    baton_cancel_free(k);
    CHECK_RC(baton_barrier_release(b2, NULL), BATON_OK);
    baton_barrier_free(b);
    baton_barrier_free(b2);
}

static void *double_enter_leave(void *arg) {
    struct waiter *w = arg;
    w->rc = baton_double_barrier_enter(w->d, 20000, NULL);
    atomic_store(&w->done, 1);
    return NULL;
}

static void *double_leave(void *arg) {
    struct waiter *w = arg;
    w->rc = baton_double_barrier_leave(w->d, 20000, NULL);
    atomic_store(&w->done, 2);
    return NULL;
}

/* A double barrier of 2: one participant alone times out leaving nothing; two threads
 * enter together and leave together. */
static void test_double_barrier(baton_client *c, baton_client *other) {
    const char *prefix = "ffi/more/double";
    baton_double_barrier *d1 = NULL, *d2 = NULL;
    CHECK_RC(baton_double_barrier_new(c, prefix, 2, NULL, &d1), BATON_OK);
    CHECK_RC(baton_double_barrier_new(other, prefix, 2, NULL, &d2), BATON_OK);
    if (!d1 || !d2) return;
    CHECK_RC(baton_double_barrier_leave(d1, 0, NULL), BATON_CONFLICT);
    CHECK_RC(baton_double_barrier_enter(d1, 200, NULL), BATON_TIMEOUT);
    CHECK(!baton_double_barrier_is_entered(d1));
    struct waiter w1 = {.d = d1}, w2 = {.d = d2};
    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, double_enter_leave, &w1) == 0);
    sleep_ms(200);
    CHECK(atomic_load(&w1.done) == 0); /* alone, it waits */
    CHECK(pthread_create(&t2, NULL, double_enter_leave, &w2) == 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK_RC(w1.rc, BATON_OK);
    CHECK_RC(w2.rc, BATON_OK);
    CHECK(baton_double_barrier_is_entered(d1) && baton_double_barrier_is_entered(d2));
    CHECK_RC(baton_double_barrier_enter(d1, 0, NULL), BATON_CONFLICT);
    CHECK(pthread_create(&t1, NULL, double_leave, &w1) == 0);
    sleep_ms(200);
    CHECK(atomic_load(&w1.done) == 1); /* waits for the other to leave */
    CHECK(pthread_create(&t2, NULL, double_leave, &w2) == 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK_RC(w1.rc, BATON_OK);
    CHECK_RC(w2.rc, BATON_OK);
    CHECK(!baton_double_barrier_is_entered(d1) && !baton_double_barrier_is_entered(d2));
    baton_double_barrier_free(d1);
    baton_double_barrier_free(d2);
}

/* ---- counter ------------------------------------------------------------------------- */

struct adder {
    baton_counter *k;
    int n;
    atomic_int ok;
};

static void *add_many(void *arg) {
    struct adder *a = arg;
    for (int i = 0; i < a->n; i++) {
        int64_t v = 0;
        if (baton_counter_add(a->k, 1, &v) == BATON_OK) atomic_fetch_add(&a->ok, 1);
    }
    return NULL;
}

/* get, set, add, compare-and-set, concurrent adds from two clients, a key that is not a
 * counter. */
static void test_counter(baton_client *c, baton_client *other) {
    const char *key = "ffi/more/counter/jobs";
    baton_counter *k = NULL, *k2 = NULL;
    CHECK_RC(baton_counter_new(c, key, &k), BATON_OK);
    CHECK_RC(baton_counter_new(other, "/ffi/more/counter/jobs", &k2), BATON_OK);
    if (!k || !k2) return;
    int64_t v = 99;
    uint64_t index = 99;
    CHECK_RC(baton_counter_get(k, &v, &index), BATON_OK);
    CHECK(v == 0 && index == 0);
    CHECK_RC(baton_counter_add(k, 5, &v), BATON_OK);
    CHECK(v == 5);
    CHECK_RC(baton_counter_get(k2, &v, &index), BATON_OK);
    CHECK(v == 5 && index > 0);
    bool swapped = false;
    CHECK_RC(baton_counter_compare_and_set(k2, 5, 7, &swapped), BATON_OK);
    CHECK(swapped);
    CHECK_RC(baton_counter_compare_and_set(k, 5, 9, &swapped), BATON_OK);
    CHECK(!swapped);
    CHECK_RC(baton_counter_get(k, &v, NULL), BATON_OK);
    CHECK(v == 7);
    CHECK_RC(baton_counter_add(k, -10, NULL), BATON_OK);
    CHECK_RC(baton_counter_get(k, &v, NULL), BATON_OK);
    CHECK(v == -3);
    CHECK_RC(baton_counter_set(k, INT64_MAX), BATON_OK);
    CHECK_RC(baton_counter_add(k, 1, &v), BATON_INVALID_ARGUMENT);
    CHECK_RC(baton_counter_set(k, 0), BATON_OK);
    struct adder a1 = {k, 25, 0}, a2 = {k2, 25, 0};
    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, add_many, &a1) == 0);
    CHECK(pthread_create(&t2, NULL, add_many, &a2) == 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK(atomic_load(&a1.ok) == 25 && atomic_load(&a2.ok) == 25);
    CHECK_RC(baton_counter_get(k, &v, NULL), BATON_OK);
    CHECK(v == 50);
    /* A key that holds something else is never taken as 0. */
    baton_counter *bad = NULL;
    CHECK_RC(baton_kv_put(c, "ffi/more/counter/bad", (const uint8_t *)"abc", 3), BATON_OK);
    CHECK_RC(baton_counter_new(c, "ffi/more/counter/bad", &bad), BATON_OK);
    CHECK_RC(baton_counter_get(bad, &v, NULL), BATON_BAD_RESPONSE);
    CHECK_RC(baton_counter_add(bad, 1, &v), BATON_BAD_RESPONSE);
    CHECK_RC(baton_counter_compare_and_set(bad, 0, 1, &swapped), BATON_BAD_RESPONSE);
    CHECK_RC(baton_counter_set(bad, 3), BATON_OK);
    CHECK_RC(baton_counter_get(bad, &v, NULL), BATON_OK);
    CHECK(v == 3);
    baton_counter_free(bad);
    baton_counter_free(k);
    baton_counter_free(k2);
}

struct watcher {
    baton_counter_watch *w;
    int64_t want;
    baton_result rc;
    int64_t got;
};

static void *watch_for(void *arg) {
    struct watcher *w = arg;
    for (int i = 0; i < 20; i++) {
        w->rc = baton_counter_watch_next(w->w, 10000, NULL, &w->got);
        if (w->rc != BATON_OK || w->got == w->want) break;
    }
    return NULL;
}

/* The first next is the current value; later ones each new value; a timeout when
 * nothing changes; a cancel. */
static void test_counter_watch(baton_client *c, baton_client *other) {
    const char *key = "ffi/more/counter/watched";
    baton_counter *k = NULL, *k2 = NULL;
    CHECK_RC(baton_counter_new(c, key, &k), BATON_OK);
    CHECK_RC(baton_counter_new(other, key, &k2), BATON_OK);
    if (!k || !k2) return;
    CHECK_RC(baton_counter_set(k, 41), BATON_OK);
    baton_counter_watch *w = NULL;
    CHECK_RC(baton_counter_watch_new(k, &w), BATON_OK);
    if (!w) return;
    int64_t v = 0;
    CHECK_RC(baton_counter_watch_next(w, 10000, NULL, &v), BATON_OK);
    CHECK(v == 41);
    v = 7;
    CHECK_RC(baton_counter_watch_next(w, 100, NULL, &v), BATON_TIMEOUT);
    CHECK(v == 7);
    struct watcher wt = {.w = w, .want = 42};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, watch_for, &wt) == 0);
    CHECK_RC(baton_counter_add(k2, 1, NULL), BATON_OK);
    pthread_join(t, NULL);
    CHECK_RC(wt.rc, BATON_OK);
    CHECK(wt.got == 42);
    baton_cancel *kc = NULL;
    CHECK_RC(baton_cancel_new(&kc), BATON_OK);
    CHECK_RC(baton_cancel_cancel(kc), BATON_OK);
    CHECK_RC(baton_counter_watch_next(w, BATON_WAIT_FOREVER, kc, &v), BATON_CANCELLED);
    baton_cancel_free(kc);
    baton_counter_watch_free(w);
    baton_counter_free(k);
    baton_counter_free(k2);
}

void test_recipes_more(void) {
    RUN0(test_cancel_wait);
    RUN2(test_rwlock_exclusion);
    RUN2(test_rwlock_lost_and_cancel);
    RUN2(test_multilock_all_or_none);
    RUN2(test_multilock_lost);
    RUN2(test_leader_task_lost);
    RUN2(test_leader_task_failed_and_stopped);
    RUN2(test_group);
    RUN2(test_member_lost);
    RUN2(test_barrier);
    RUN2(test_double_barrier);
    RUN2(test_counter);
    RUN2(test_counter_watch);
}
