/* C tests of locks, semaphores, elections, observers and fencing through the C API,
 * against the dev server at CONSUL_HTTP_ADDR. Called from test_baton.c's main. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

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

/* Every bad input of the lock functions gives a result code. */
static void test_lock_args(baton_client *c) {
    baton_lock *l = NULL;
    char buf[128];
    uint8_t vbuf[8];
    CHECK_RC(baton_lock_new(NULL, "ffi/lock/args", NULL, &l), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_lock_new(c, NULL, NULL, &l), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_lock_new(c, BAD_UTF8, NULL, &l), BATON_INVALID_UTF8);
    CHECK_RC(baton_lock_new(c, "", NULL, &l), BATON_INVALID_ARGUMENT);
    CHECK(last_error_has("missing key"));
    CHECK_RC(baton_lock_new(c, "/", NULL, &l), BATON_INVALID_ARGUMENT);
    CHECK_RC(baton_lock_new(c, "ffi/lock/args", NULL, NULL), BATON_NULL_ARGUMENT);
    baton_lock_options o = baton_lock_options_default();
    o.value_len = 4; /* a length without bytes */
    CHECK_RC(baton_lock_new(c, "ffi/lock/args", &o, &l), BATON_NULL_ARGUMENT);
    CHECK(l == NULL);
    CHECK_RC(baton_lock_acquire(NULL, 0, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_lock_release(NULL), BATON_NULL_ARGUMENT);
    CHECK(!baton_lock_is_held(NULL));
    CHECK_RC(baton_lock_on_lost(NULL, lost_cb, NULL, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_lock_wait_lost(NULL, 0, NULL, NULL, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_lock_sequencer(NULL, buf, sizeof buf, NULL, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_lock_value(NULL, vbuf, sizeof vbuf, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_lock_set_value(NULL, vbuf, 1), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_lock_delete_key(NULL), BATON_NULL_ARGUMENT);
    baton_lock_free(NULL);

    CHECK_RC(baton_lock_new(c, "ffi/lock/args", NULL, &l), BATON_OK);
    CHECK_RC(baton_lock_release(l), BATON_NOT_HELD);
    CHECK_RC(baton_lock_on_lost(l, NULL, NULL, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_lock_sequencer(l, buf, sizeof buf, NULL, NULL), BATON_NOT_HELD);
    CHECK_RC(baton_lock_set_value(l, NULL, 3), BATON_NULL_ARGUMENT);
    /* A huge timeout means "no limit"; the key is free, so it returns at once. */
    CHECK_RC(baton_lock_acquire(l, UINT64_MAX - 1, NULL), BATON_OK);
    /* A size query (buf NULL, len 0), as baton_lock_value takes (issue 22). */
    size_t qn = 0;
    uint64_t qtoken = 0;
    CHECK_RC(baton_lock_sequencer(l, NULL, 0, &qn, &qtoken), BATON_BUFFER_TOO_SMALL);
    CHECK(qn > 0 && qtoken > 0);
    CHECK_RC(baton_lock_sequencer(l, NULL, qn + 1, NULL, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_lock_release(l), BATON_OK);
    CHECK_RC(baton_lock_release(l), BATON_NOT_HELD);
    baton_lock_free(l);

    /* A key that is not a lock's is never overwritten. */
    CHECK_RC(baton_kv_put(c, "ffi/lock/foreign", (const uint8_t *)"data", 4), BATON_OK);
    CHECK_RC(baton_lock_new(c, "ffi/lock/foreign", NULL, &l), BATON_OK);
    CHECK_RC(baton_lock_acquire(l, 1000, NULL), BATON_CONFLICT);
    CHECK(last_error_has("Existing key does not match lock use"));
    CHECK(!baton_lock_is_held(l));
    baton_lock_free(l);
    size_t n = 0;
    bool found = false;
    CHECK_RC(baton_kv_get(c, "ffi/lock/foreign", NULL, vbuf, sizeof vbuf, &n, &found), BATON_OK);
    CHECK(found && n == 4 && memcmp(vbuf, "data", 4) == 0);
}

/* Mutual exclusion across clients, sequencers, guarded writes, values, delete_key. */
static void test_lock_exclusion(baton_client *c, baton_client *other) {
    const char *key = "ffi/lock/excl";
    baton_lock_options o = baton_lock_options_default();
    o.value = (const uint8_t *)"node-a";
    o.value_len = 6;
    baton_lock *a = NULL, *b = NULL;
    CHECK_RC(baton_lock_new(c, key, &o, &a), BATON_OK);
    CHECK_RC(baton_lock_new(other, key, NULL, &b), BATON_OK);
    if (!a || !b) return;
    CHECK_RC(baton_lock_acquire(a, 5000, NULL), BATON_OK);
    CHECK(baton_lock_is_held(a));
    /* Acquiring twice: the core's code and text, as in Python and Node (issue 22). */
    CHECK_RC(baton_lock_acquire(a, 0, NULL), BATON_CONFLICT);
    CHECK(last_error_has("Lock already held"));
    CHECK(baton_lock_is_held(a));
    CHECK_RC(baton_lock_acquire(b, 0, NULL), BATON_TIMEOUT);
    CHECK(last_error_has("held by another session"));
    CHECK_RC(baton_lock_acquire(b, 200, NULL), BATON_TIMEOUT);
    CHECK(!baton_lock_is_held(b));
    uint8_t vbuf[16];
    size_t n = 0;
    bool found = false;
    CHECK_RC(baton_kv_get(other, key, NULL, vbuf, sizeof vbuf, &n, &found), BATON_OK);
    CHECK(found && n == 6 && memcmp(vbuf, "node-a", 6) == 0);

    char seq[256];
    uint64_t token = 0;
    CHECK_RC(baton_lock_sequencer(a, seq, 4, &n, &token), BATON_BUFFER_TOO_SMALL);
    CHECK(n > 4);
    CHECK_RC(baton_lock_sequencer(a, seq, sizeof seq, &n, &token), BATON_OK);
    CHECK(n == strlen(seq) && token > 0 && strstr(seq, key) != NULL);
    bool current = false;
    CHECK_RC(baton_check_sequencer(other, seq, &current), BATON_OK);
    CHECK(current);
    CHECK_RC(baton_check_sequencer(other, "not a sequencer", &current), BATON_INVALID_ARGUMENT);
    CHECK_RC(baton_check_sequencer(other, seq, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_check_sequencer(other, BAD_UTF8, &current), BATON_INVALID_UTF8);
    CHECK_RC(baton_guarded_put(other, seq, "ffi/lock/excl-data", (const uint8_t *)"x", 1),
             BATON_OK);
    CHECK_RC(baton_guarded_put(other, seq, NULL, (const uint8_t *)"x", 1), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_guarded_put(other, NULL, "ffi/lock/excl-data", NULL, 0), BATON_NULL_ARGUMENT);

    CHECK_RC(baton_lock_release(a), BATON_OK);
    CHECK_RC(baton_check_sequencer(other, seq, &current), BATON_OK);
    CHECK(!current);
    CHECK_RC(baton_guarded_put(other, seq, "ffi/lock/excl-data", (const uint8_t *)"y", 1),
             BATON_CONFLICT);
    CHECK(last_error_has("stale sequencer"));
    CHECK_RC(baton_guarded_delete(other, seq, "ffi/lock/excl-data"), BATON_CONFLICT);
    CHECK_RC(baton_kv_get(other, "ffi/lock/excl-data", NULL, vbuf, sizeof vbuf, &n, &found),
             BATON_OK);
    CHECK(found && n == 1 && vbuf[0] == 'x');

    /* A release hands over at once (no lock-delay). */
    CHECK_RC(baton_lock_acquire(b, 5000, NULL), BATON_OK);
    uint64_t token_b = 0;
    CHECK_RC(baton_lock_sequencer(b, seq, sizeof seq, NULL, &token_b), BATON_OK);
    CHECK(token_b > token);
    CHECK_RC(baton_guarded_delete(other, seq, "ffi/lock/excl-data"), BATON_OK);
    baton_hold_lost why = 0;
    baton_lost_reason sr = BATON_LOST_NONE;
    CHECK_RC(baton_lock_wait_lost(b, 0, NULL, &why, &sr), BATON_TIMEOUT);
    CHECK_RC(baton_lock_delete_key(a), BATON_CONFLICT);
    CHECK(last_error_has("Lock in use"));
    CHECK_RC(baton_lock_release(b), BATON_OK);
    CHECK_RC(baton_lock_wait_lost(b, 0, NULL, &why, &sr), BATON_OK);
    CHECK(why == BATON_HOLD_RELEASED && sr == BATON_LOST_NONE);
    CHECK(strcmp(baton_hold_lost_name(why), "released") == 0);

    CHECK_RC(baton_lock_set_value(a, (const uint8_t *)"zz", 2), BATON_OK);
    CHECK_RC(baton_lock_value(a, vbuf, 1, &n), BATON_BUFFER_TOO_SMALL);
    CHECK(n == 2);
    CHECK_RC(baton_lock_value(a, vbuf, sizeof vbuf, &n), BATON_OK);
    CHECK(n == 2 && memcmp(vbuf, "zz", 2) == 0);
    CHECK_RC(baton_lock_delete_key(a), BATON_OK);
    CHECK_RC(baton_kv_get(other, key, NULL, vbuf, sizeof vbuf, &n, &found), BATON_OK);
    CHECK(!found);
    baton_lock_free(a);
    baton_lock_free(b);
}

/* Every hold_lost and lost_reason value has the name Python and Node report (issue 22). */
static void test_lost_names(void) {
    CHECK(strcmp(baton_hold_lost_name(BATON_HOLD_RELEASED), "released") == 0);
    CHECK(strcmp(baton_hold_lost_name(BATON_HOLD_KEY_CHANGED), "key_changed") == 0);
    CHECK(strcmp(baton_hold_lost_name(BATON_HOLD_REMOVED), "removed") == 0);
    CHECK(strcmp(baton_hold_lost_name(BATON_HOLD_SESSION_LOST), "session_lost") == 0);
    CHECK(strcmp(baton_hold_lost_name(BATON_HOLD_CLIENT_CLOSED), "client_closed") == 0);
    CHECK(strcmp(baton_hold_lost_name(0), "unknown") == 0);
    CHECK(strcmp(baton_hold_lost_name(99), "unknown") == 0);
    CHECK(strcmp(baton_lost_reason_name(BATON_LOST_NONE), "none") == 0);
    CHECK(strcmp(baton_lost_reason_name(BATON_LOST_INVALIDATED), "invalidated") == 0);
    CHECK(strcmp(baton_lost_reason_name(BATON_LOST_DEADLINE_EXCEEDED), "deadline_exceeded") == 0);
    CHECK(strcmp(baton_lost_reason_name(BATON_LOST_DESTROYED), "destroyed") == 0);
    CHECK(strcmp(baton_lost_reason_name(BATON_LOST_CLIENT_CLOSED), "client_closed") == 0);
    CHECK(strcmp(baton_lost_reason_name(99), "unknown") == 0);
}

/* BATON_SEQUENCER_MAX(strlen(key)) holds the sequencer of a lock or election on
 * `key`, also for a long key given with a leading '/' (issue 22). */
#define SEQ_LONG_KEY                                                                 \
    "/ffi/lock/seqmax/0123456789abcdef0123456789abcdef0123456789abcdef0123456789" \
    "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
static void test_sequencer_max(baton_client *c) {
    CHECK(BATON_SEQUENCER_OVERHEAD == 80);
    baton_lock *l = NULL;
    CHECK_RC(baton_lock_new(c, SEQ_LONG_KEY, NULL, &l), BATON_OK);
    if (!l) return;
    CHECK_RC(baton_lock_acquire(l, 5000, NULL), BATON_OK);
    char seq[BATON_SEQUENCER_MAX(sizeof SEQ_LONG_KEY - 1)];
    size_t n = 0;
    uint64_t token = 0;
    CHECK_RC(baton_lock_sequencer(l, NULL, 0, &n, &token), BATON_BUFFER_TOO_SMALL);
    CHECK(n > sizeof SEQ_LONG_KEY - 1 && n + 1 <= sizeof seq && token > 0);
    CHECK_RC(baton_lock_sequencer(l, seq, sizeof seq, &n, NULL), BATON_OK);
    CHECK(n == strlen(seq) && strstr(seq, SEQ_LONG_KEY + 1) != NULL);
    CHECK_RC(baton_lock_sequencer(l, seq, n + 1, NULL, NULL), BATON_OK);
    CHECK_RC(baton_lock_sequencer(l, seq, n, NULL, NULL), BATON_BUFFER_TOO_SMALL);
    CHECK_RC(baton_lock_release(l), BATON_OK);
    CHECK_RC(baton_lock_delete_key(l), BATON_OK);
    baton_lock_free(l);

    baton_election *e = NULL;
    CHECK_RC(baton_election_new(c, "ffi/election/seqmax", NULL, &e), BATON_OK);
    if (!e) return;
    CHECK_RC(baton_election_campaign(e, (const uint8_t *)"me", 2, 5000, NULL), BATON_OK);
    char eseq[BATON_SEQUENCER_MAX(sizeof "ffi/election/seqmax" - 1)];
    CHECK_RC(baton_election_sequencer(e, NULL, 0, &n, NULL), BATON_BUFFER_TOO_SMALL);
    CHECK(n + 1 <= sizeof eseq);
    CHECK_RC(baton_election_sequencer(e, eseq, sizeof eseq, &n, NULL), BATON_OK);
    CHECK_RC(baton_election_resign(e), BATON_OK);
    baton_election_free(e);
}

/* A lock lost while held: the callback fires once, with the right reason. */
static void test_lock_lost(baton_client *c, baton_client *other) {
    baton_session *s = quick_session(c);
    baton_lock_options o = baton_lock_options_default();
    o.session = s;
    baton_lock *l = NULL;
    CHECK_RC(baton_lock_new(c, "ffi/lock/lost-session", &o, &l), BATON_OK);
    if (!l) return;
    struct lost_rec rec = {0};
    CHECK_RC(baton_lock_on_lost(l, lost_cb, &rec, lost_free), BATON_OK);
    CHECK_RC(baton_lock_acquire(l, 5000, NULL), BATON_OK);
    char id[64];
    session_id(s, id);
    CHECK_RC(baton_client_destroy_session_id(other, id), BATON_OK);
    baton_hold_lost why = 0;
    baton_lost_reason sr = BATON_LOST_NONE;
    CHECK_RC(baton_lock_wait_lost(l, 10000, NULL, &why, &sr), BATON_OK);
    CHECK(why == BATON_HOLD_SESSION_LOST && sr == BATON_LOST_INVALIDATED);
    /* The names Python and Node report for these reasons (issue 22). */
    CHECK(strcmp(baton_hold_lost_name(why), "session_lost") == 0);
    CHECK(strcmp(baton_lost_reason_name(sr), "invalidated") == 0);
    CHECK(wait_for(&rec.calls, 1, 5000));
    sleep_ms(300);
    CHECK(atomic_load(&rec.calls) == 1);
    CHECK(atomic_load(&rec.reason) == BATON_HOLD_SESSION_LOST);
    CHECK(atomic_load(&rec.session_reason) == BATON_LOST_INVALIDATED);
    CHECK(!baton_lock_is_held(l));
    CHECK_RC(baton_lock_release(l), BATON_NOT_HELD);
    /* Its explicit session is gone: acquiring again says so. */
    CHECK_RC(baton_lock_acquire(l, 1000, NULL), BATON_SESSION_INVALIDATED);
    CHECK(atomic_load(&rec.freed) == 0);
    baton_lock_free(l);
    CHECK(atomic_load(&rec.freed) == 1);
    baton_session_free(s);

    /* Someone deletes the key of a held lock. */
    struct lost_rec rec2 = {0};
    CHECK_RC(baton_lock_new(c, "ffi/lock/lost-key", NULL, &l), BATON_OK);
    if (!l) return;
    CHECK_RC(baton_lock_on_lost(l, lost_cb, &rec2, NULL), BATON_OK);
    CHECK_RC(baton_lock_acquire(l, 5000, NULL), BATON_OK);
    CHECK_RC(baton_kv_delete(other, "ffi/lock/lost-key"), BATON_OK);
    CHECK(wait_for(&rec2.calls, 1, 10000));
    CHECK(atomic_load(&rec2.reason) == BATON_HOLD_KEY_CHANGED);
    CHECK(strcmp(baton_hold_lost_name((uint32_t)atomic_load(&rec2.reason)), "key_changed") == 0);
    CHECK(strcmp(baton_lost_reason_name((uint32_t)atomic_load(&rec2.session_reason)), "none") == 0);
    CHECK(atomic_load(&rec2.session_reason) == BATON_LOST_NONE);
    CHECK(!baton_lock_is_held(l));
    sleep_ms(200);
    CHECK(atomic_load(&rec2.calls) == 1);
    baton_lock_free(l);
}

struct self_free_lock {
    baton_lock *l;
    atomic_int called;
    atomic_int freed;
};

static void lock_free_self_cb(void *ud, baton_hold_lost reason, baton_lost_reason sr) {
    (void)reason;
    (void)sr;
    struct self_free_lock *f = ud;
    char seq[128];
    /* Calling back into the library, then freeing the handle from its own callback. */
    (void)baton_lock_is_held(f->l);
    (void)baton_lock_sequencer(f->l, seq, sizeof seq, NULL, NULL);
    baton_lock_free(f->l);
    atomic_fetch_add(&f->called, 1);
}

static void lock_self_free_ud(void *ud) {
    struct self_free_lock *f = ud;
    atomic_fetch_add(&f->freed, 1);
}

static void test_lock_free_inside_callback(baton_client *c, baton_client *other) {
    baton_session *s = quick_session(c);
    baton_lock_options o = baton_lock_options_default();
    o.session = s;
    static struct self_free_lock f;
    atomic_store(&f.called, 0);
    atomic_store(&f.freed, 0);
    CHECK_RC(baton_lock_new(c, "ffi/lock/self-free", &o, &f.l), BATON_OK);
    if (!f.l) return;
    CHECK_RC(baton_lock_on_lost(f.l, lock_free_self_cb, &f, lock_self_free_ud), BATON_OK);
    CHECK_RC(baton_lock_acquire(f.l, 5000, NULL), BATON_OK);
    char id[64];
    session_id(s, id);
    baton_session_free(s); /* the lock keeps its own reference */
    CHECK_RC(baton_client_destroy_session_id(other, id), BATON_OK);
    CHECK(wait_for(&f.freed, 1, 10000));
    CHECK(atomic_load(&f.called) == 1);
    sleep_ms(100);
    CHECK(atomic_load(&f.freed) == 1);
}

struct canceller {
    baton_cancel *cancel;
    long after_ms;
};

static void *cancel_after(void *arg) {
    struct canceller *k = arg;
    sleep_ms(k->after_ms);
    (void)baton_cancel_cancel(k->cancel);
    return NULL;
}

/* A blocked acquire cancelled from a second thread returns BATON_CANCELLED and leaves nothing behind. */
static void test_lock_cancel(baton_client *c, baton_client *other) {
    const char *key = "ffi/lock/cancel";
    baton_lock *a = NULL, *b = NULL;
    CHECK_RC(baton_lock_new(c, key, NULL, &a), BATON_OK);
    CHECK_RC(baton_lock_new(other, key, NULL, &b), BATON_OK);
    if (!a || !b) return;
    CHECK_RC(baton_lock_acquire(a, 5000, NULL), BATON_OK);
    struct canceller k = {NULL, 200};
    CHECK_RC(baton_cancel_new(&k.cancel), BATON_OK);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cancel_after, &k) == 0);
    CHECK_RC(baton_lock_acquire(b, BATON_WAIT_FOREVER, k.cancel), BATON_CANCELLED);
    pthread_join(t, NULL);
    CHECK(!baton_lock_is_held(b));
    /* An already-cancelled signal stops a wait at once, too. */
    CHECK_RC(baton_lock_acquire(b, BATON_WAIT_FOREVER, k.cancel), BATON_CANCELLED);
    baton_cancel_free(k.cancel);
    CHECK_RC(baton_lock_release(a), BATON_OK);
    CHECK_RC(baton_lock_acquire(b, 5000, NULL), BATON_OK);
    CHECK_RC(baton_lock_release(b), BATON_OK);
    baton_lock_free(a);
    baton_lock_free(b);
}

#define CONTENDERS 8
#define ROUNDS 5

struct contention {
    baton_client *clients[2];
    atomic_int inside;
    atomic_int overlaps;
    atomic_int acquired;
};

static void *contend(void *arg) {
    struct contention *k = arg;
    static atomic_int next;
    int me = atomic_fetch_add(&next, 1);
    baton_lock *l = NULL;
    CHECK_RC(baton_lock_new(k->clients[me % 2], "ffi/lock/contended", NULL, &l), BATON_OK);
    if (!l) return NULL;
    for (int i = 0; i < ROUNDS; i++) {
        baton_result rc = baton_lock_acquire(l, 60000, NULL);
        CHECK_RC(rc, BATON_OK);
        if (rc != BATON_OK) break;
        if (atomic_fetch_add(&k->inside, 1) != 0) atomic_fetch_add(&k->overlaps, 1);
        atomic_fetch_add(&k->acquired, 1);
        sleep_ms(2);
        atomic_fetch_sub(&k->inside, 1);
        CHECK_RC(baton_lock_release(l), BATON_OK);
    }
    baton_lock_free(l);
    return NULL;
}

/* 8 threads, two clients, one key: never two holders at once. */
static void test_lock_contention(baton_client *c, baton_client *other) {
    struct contention k = {{c, other}, 0, 0, 0};
    pthread_t t[CONTENDERS];
    for (int i = 0; i < CONTENDERS; i++) CHECK(pthread_create(&t[i], NULL, contend, &k) == 0);
    for (int i = 0; i < CONTENDERS; i++) pthread_join(t[i], NULL);
    CHECK(atomic_load(&k.acquired) == CONTENDERS * ROUNDS);
    CHECK(atomic_load(&k.overlaps) == 0);
}

static void test_semaphore(baton_client *c, baton_client *other) {
    const char *prefix = "ffi/sem/pool";
    baton_semaphore *x = NULL;
    CHECK_RC(baton_semaphore_new(c, prefix, 0, NULL, &x), BATON_INVALID_ARGUMENT);
    CHECK_RC(baton_semaphore_new(c, "", 2, NULL, &x), BATON_INVALID_ARGUMENT);
    CHECK_RC(baton_semaphore_new(c, BAD_UTF8, 2, NULL, &x), BATON_INVALID_UTF8);
    CHECK_RC(baton_semaphore_new(NULL, prefix, 2, NULL, &x), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_semaphore_new(c, prefix, 2, NULL, NULL), BATON_NULL_ARGUMENT);
    CHECK(x == NULL);
    CHECK_RC(baton_semaphore_acquire(NULL, 0, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_semaphore_release(NULL), BATON_NULL_ARGUMENT);
    CHECK(!baton_semaphore_is_held(NULL));
    CHECK_RC(baton_semaphore_on_lost(NULL, lost_cb, NULL, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_semaphore_wait_lost(NULL, 0, NULL, NULL, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_semaphore_delete_key(NULL), BATON_NULL_ARGUMENT);
    baton_semaphore_free(NULL);

    baton_session *ss[3];
    baton_semaphore *h[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        ss[i] = quick_session(c);
        baton_semaphore_options o = baton_semaphore_options_default();
        o.session = ss[i];
        o.value = (const uint8_t *)"worker";
        o.value_len = 6;
        CHECK_RC(baton_semaphore_new(c, prefix, 2, &o, &h[i]), BATON_OK);
        if (!h[i]) return;
    }
    CHECK_RC(baton_semaphore_acquire(h[0], 5000, NULL), BATON_OK);
    CHECK_RC(baton_semaphore_acquire(h[1], 5000, NULL), BATON_OK);
    CHECK_RC(baton_semaphore_acquire(h[1], 0, NULL), BATON_CONFLICT);
    CHECK(last_error_has("Semaphore already held"));
    CHECK_RC(baton_semaphore_acquire(h[2], 0, NULL), BATON_TIMEOUT);
    CHECK(last_error_has("slots taken"));
    CHECK_RC(baton_semaphore_acquire(h[2], 200, NULL), BATON_TIMEOUT);
    CHECK(baton_semaphore_is_held(h[0]) && baton_semaphore_is_held(h[1]));
    CHECK(!baton_semaphore_is_held(h[2]));
    CHECK_RC(baton_semaphore_release(h[0]), BATON_OK);
    CHECK_RC(baton_semaphore_release(h[0]), BATON_NOT_HELD);
    CHECK_RC(baton_semaphore_acquire(h[2], 5000, NULL), BATON_OK);

    /* Another limit on the same prefix is a conflict, in Go's words. */
    baton_semaphore *wrong = NULL;
    baton_semaphore_options wo = baton_semaphore_options_default();
    wo.session = ss[0];
    CHECK_RC(baton_semaphore_new(c, prefix, 3, &wo, &wrong), BATON_OK);
    CHECK_RC(baton_semaphore_acquire(wrong, 1000, NULL), BATON_CONFLICT);
    CHECK(last_error_has("semaphore limit conflict"));
    baton_semaphore_free(wrong);

    /* A holder whose session dies loses its slot: callback once. */
    struct lost_rec rec = {0};
    CHECK_RC(baton_semaphore_on_lost(h[1], lost_cb, &rec, lost_free), BATON_OK);
    char id[64];
    session_id(ss[1], id);
    CHECK_RC(baton_client_destroy_session_id(other, id), BATON_OK);
    baton_hold_lost why = 0;
    CHECK_RC(baton_semaphore_wait_lost(h[1], 10000, NULL, &why, NULL), BATON_OK);
    CHECK(why == BATON_HOLD_SESSION_LOST || why == BATON_HOLD_REMOVED);
    CHECK(wait_for(&rec.calls, 1, 5000));
    sleep_ms(200);
    CHECK(atomic_load(&rec.calls) == 1);
    CHECK(atomic_load(&rec.reason) == (int)why);
    CHECK(!baton_semaphore_is_held(h[1]));
    /* The slot it had is free again. */
    CHECK_RC(baton_semaphore_acquire(h[0], 5000, NULL), BATON_OK);
    CHECK_RC(baton_semaphore_delete_key(h[1]), BATON_CONFLICT);
    CHECK_RC(baton_semaphore_release(h[0]), BATON_OK);
    CHECK_RC(baton_semaphore_release(h[2]), BATON_OK);
    CHECK_RC(baton_semaphore_delete_key(h[2]), BATON_OK);
    for (int i = 0; i < 3; i++) {
        baton_semaphore_free(h[i]);
        baton_session_free(ss[i]);
    }
    CHECK(atomic_load(&rec.freed) == 1);
}

struct observed {
    pthread_mutex_t mu;
    atomic_int events;
    atomic_int leaders;
    atomic_int no_leader;
    atomic_int errors;
    atomic_int freed;
    char value[64];
    uint64_t token;
};

static void observe_cb(void *ud, const baton_leader *leader, baton_result error) {
    struct observed *o = ud;
    if (error != BATON_OK || leader == NULL) {
        atomic_fetch_add(&o->errors, 1);
        return;
    }
    pthread_mutex_lock(&o->mu);
    if (leader->has_leader) {
        size_t n = leader->value_len < sizeof o->value - 1 ? leader->value_len : sizeof o->value - 1;
        if (n) memcpy(o->value, leader->value, n);
        o->value[n] = 0;
        o->token = leader->token;
    } else {
        o->value[0] = 0;
    }
    pthread_mutex_unlock(&o->mu);
    atomic_fetch_add(leader->has_leader ? &o->leaders : &o->no_leader, 1);
    atomic_fetch_add(&o->events, 1);
}

static void observe_free(void *ud) {
    struct observed *o = ud;
    atomic_fetch_add(&o->freed, 1);
}

static bool observed_value_is(struct observed *o, const char *want, long ms) {
    for (long t = 0; t <= ms; t += 10) {
        pthread_mutex_lock(&o->mu);
        bool same = strcmp(o->value, want) == 0;
        pthread_mutex_unlock(&o->mu);
        if (same) return true;
        sleep_ms(10);
    }
    return false;
}

struct campaigner {
    baton_election *e;
    baton_result rc;
};

static void *campaign_forever(void *arg) {
    struct campaigner *k = arg;
    k->rc = baton_election_campaign(k->e, (const uint8_t *)"beta", 4, BATON_WAIT_FOREVER, NULL);
    return NULL;
}

static void test_election(baton_client *c, baton_client *other) {
    const char *key = "ffi/election/leader";
    static struct observed seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
    baton_observer *obs = NULL;
    CHECK_RC(baton_election_observe(other, key, NULL, NULL, NULL, &obs), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_election_observe(other, "", observe_cb, NULL, NULL, &obs), BATON_INVALID_ARGUMENT);
    CHECK_RC(baton_election_observe(other, key, observe_cb, &seen, observe_free, NULL),
             BATON_NULL_ARGUMENT);
    CHECK_RC(baton_election_observe(other, key, observe_cb, &seen, observe_free, &obs), BATON_OK);
    CHECK(wait_for(&seen.no_leader, 1, 10000)); /* the first call: the current state */

    baton_election *e1 = NULL, *e2 = NULL;
    CHECK_RC(baton_election_new(c, NULL, NULL, &e1), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_election_new(c, key, NULL, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_election_new(c, key, NULL, &e1), BATON_OK);
    CHECK_RC(baton_election_new(other, key, NULL, &e2), BATON_OK);
    if (!e1 || !e2) return;
    CHECK_RC(baton_election_campaign(e1, NULL, 5, 0, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_election_campaign(e1, (const uint8_t *)"alpha", 5, 5000, NULL), BATON_OK);
    CHECK(baton_election_is_leader(e1));
    CHECK_RC(baton_election_campaign(e1, (const uint8_t *)"alpha", 5, 0, NULL), BATON_CONFLICT);
    CHECK(last_error_has("Lock already held"));
    CHECK(baton_election_is_leader(e1));
    CHECK_RC(baton_election_campaign(e2, (const uint8_t *)"beta", 4, 0, NULL), BATON_TIMEOUT);
    CHECK(last_error_has("another leader"));
    CHECK(!baton_election_is_leader(e2));
    CHECK(observed_value_is(&seen, "alpha", 10000));

    baton_leader ld;
    uint8_t vbuf[16];
    CHECK_RC(baton_election_leader(other, key, &ld, vbuf, sizeof vbuf), BATON_OK);
    CHECK(ld.has_leader && ld.value_len == 5 && ld.value == vbuf && memcmp(vbuf, "alpha", 5) == 0);
    CHECK(strlen(ld.session) == 36);
    uint64_t first_index = ld.lock_index;
    CHECK_RC(baton_election_leader(other, key, &ld, vbuf, 2), BATON_BUFFER_TOO_SMALL);
    CHECK(ld.value_len == 5 && ld.has_leader);
    CHECK_RC(baton_election_leader(other, key, NULL, vbuf, 2), BATON_NULL_ARGUMENT);

    char seq[256];
    uint64_t token = 0;
    CHECK_RC(baton_election_sequencer(e1, seq, sizeof seq, NULL, &token), BATON_OK);
    CHECK_RC(baton_election_sequencer(e2, seq, sizeof seq, NULL, &token), BATON_NOT_HELD);
    CHECK_RC(baton_election_proclaim(e1, (const uint8_t *)"alpha2", 6), BATON_OK);
    CHECK_RC(baton_election_proclaim(e2, (const uint8_t *)"beta", 4), BATON_NOT_HELD);
    CHECK(observed_value_is(&seen, "alpha2", 10000));
    CHECK_RC(baton_election_leader(other, key, &ld, vbuf, sizeof vbuf), BATON_OK);
    CHECK(ld.lock_index == first_index && ld.value_len == 6);

    /* Failover: e2 waits, e1 resigns, e2 leads, the observer sees it. */
    struct lost_rec rec = {0};
    CHECK_RC(baton_election_on_lost(e1, lost_cb, &rec, NULL), BATON_OK);
    struct campaigner k = {e2, BATON_PANIC};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, campaign_forever, &k) == 0);
    sleep_ms(100);
    CHECK_RC(baton_election_resign(e1), BATON_OK);
    pthread_join(t, NULL);
    CHECK_RC(k.rc, BATON_OK);
    CHECK(baton_election_is_leader(e2));
    CHECK_RC(baton_election_resign(e1), BATON_NOT_HELD);
    baton_hold_lost why = 0;
    CHECK_RC(baton_election_wait_lost(e1, 0, NULL, &why, NULL), BATON_OK);
    CHECK(why == BATON_HOLD_RELEASED);
    CHECK(observed_value_is(&seen, "beta", 10000));
    pthread_mutex_lock(&seen.mu);
    CHECK(seen.token > token);
    pthread_mutex_unlock(&seen.mu);
    CHECK(atomic_load(&rec.calls) == 0); /* a resign is not a loss */

    baton_election_free(e2); /* resigns */
    CHECK(wait_for(&seen.no_leader, 2, 10000));
    CHECK_RC(baton_election_leader(c, key, &ld, vbuf, sizeof vbuf), BATON_OK);
    CHECK(!ld.has_leader && ld.value_len == 0);
    baton_observer_free(obs);
    CHECK(atomic_load(&seen.freed) == 1);
    int events = atomic_load(&seen.events);
    CHECK_RC(baton_election_campaign(e1, (const uint8_t *)"late", 4, 5000, NULL), BATON_OK);
    sleep_ms(200);
    CHECK(atomic_load(&seen.events) == events);
    CHECK(atomic_load(&seen.errors) == 0);
    baton_election_free(e1);
    baton_observer_free(NULL);
}

struct observer_self_free {
    _Atomic(baton_observer *) obs;
    atomic_int called;
    atomic_int freed;
};

static void observer_free_self_cb(void *ud, const baton_leader *leader, baton_result error) {
    (void)leader;
    (void)error;
    struct observer_self_free *f = ud;
    if (atomic_fetch_add(&f->called, 1) == 0) {
        /* The handle may not be written yet when the first call comes; wait for it. */
        baton_observer *obs;
        while ((obs = atomic_load(&f->obs)) == NULL) sleep_ms(1);
        baton_observer_free(obs);
    }
}

static void observer_self_free_ud(void *ud) {
    struct observer_self_free *f = ud;
    atomic_fetch_add(&f->freed, 1);
}

static void test_observer_free_inside_callback(baton_client *c) {
    static struct observer_self_free f;
    baton_observer *obs = NULL;
    CHECK_RC(baton_election_observe(c, "ffi/election/self-free", observer_free_self_cb, &f,
                                    observer_self_free_ud, &obs),
             BATON_OK);
    atomic_store(&f.obs, obs);
    CHECK(wait_for(&f.freed, 1, 10000));
    sleep_ms(100);
    CHECK(atomic_load(&f.called) == 1 && atomic_load(&f.freed) == 1);
}

/* Closing a client releases its locks at once (no lock-delay), and its handles stay safe to use. */
static void test_close_with_held_lock(baton_client *other) {
    baton_client *c3 = NULL;
    CHECK_RC(baton_client_new_from_env(&c3), BATON_OK);
    if (!c3) return;
    baton_lock *l = NULL, *b = NULL;
    CHECK_RC(baton_lock_new(c3, "ffi/lock/close", NULL, &l), BATON_OK);
    CHECK_RC(baton_lock_new(other, "ffi/lock/close", NULL, &b), BATON_OK);
    if (!l || !b) return;
    CHECK_RC(baton_lock_acquire(l, 5000, NULL), BATON_OK);
    CHECK_RC(baton_client_close(c3, 10000), BATON_OK);
    CHECK(!baton_lock_is_held(l));
    CHECK_RC(baton_lock_acquire(l, 0, NULL), BATON_CLOSED);
    CHECK_RC(baton_lock_acquire(b, 2000, NULL), BATON_OK);
    CHECK_RC(baton_lock_release(b), BATON_OK);
    baton_lock_free(l);
    baton_lock_free(b);
    baton_client_free(c3);
}

/* Elections in the format of Consul's leader-election guide (flags 0, what curl and most
 * scripts write): a campaign with Go's default flags is refused naming the option; one with
 * flags 0 shares the key; the leader is read either way (issue 22). */
static void test_election_guide_flags(baton_client *c, baton_client *other) {
    const char *key = "ffi/election/guide-flags";
    baton_election_options guide = baton_election_options_default();
    CHECK(guide.session == NULL && guide.flags == BATON_LOCK_FLAGS);
    guide.flags = 0;
    baton_election *g = NULL, *go = NULL, *g2 = NULL;
    CHECK_RC(baton_election_new_with(c, key, &guide, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_election_new_with(c, key, &guide, &g), BATON_OK);
    CHECK_RC(baton_election_new_with(other, key, NULL, &go), BATON_OK); /* NULL: defaults */
    CHECK_RC(baton_election_new_with(other, key, &guide, &g2), BATON_OK);
    if (!g || !go || !g2) return;
    CHECK_RC(baton_election_campaign(g, (const uint8_t *)"guide", 5, 5000, NULL), BATON_OK);
    CHECK_RC(baton_election_campaign(go, (const uint8_t *)"go", 2, 0, NULL), BATON_CONFLICT);
    CHECK(last_error_has("has flags 0"));
    CHECK(last_error_has("baton_election_options.flags = 0"));
    CHECK_RC(baton_election_campaign(g2, (const uint8_t *)"g2", 2, 0, NULL), BATON_TIMEOUT);
    baton_leader ld;
    uint8_t vbuf[16];
    CHECK_RC(baton_election_leader(other, key, &ld, vbuf, sizeof vbuf), BATON_OK);
    CHECK(ld.has_leader && ld.value_len == 5 && memcmp(vbuf, "guide", 5) == 0);
    CHECK_RC(baton_election_resign(g), BATON_OK);
    CHECK_RC(baton_election_campaign(g2, (const uint8_t *)"g2", 2, 5000, NULL), BATON_OK);
    CHECK_RC(baton_election_leader(c, key, &ld, vbuf, sizeof vbuf), BATON_OK);
    CHECK(ld.has_leader && ld.value_len == 2 && memcmp(vbuf, "g2", 2) == 0);
    CHECK_RC(baton_election_resign(g2), BATON_OK);
    baton_election_free(g);
    baton_election_free(go);
    baton_election_free(g2);
}

void test_recipes(void) {
    RUN0(test_lost_names);
    RUN1(test_lock_args);
    RUN1(test_sequencer_max);
    RUN2(test_lock_exclusion);
    RUN2(test_lock_lost);
    RUN2(test_lock_free_inside_callback);
    RUN2(test_lock_cancel);
    RUN2(test_lock_contention);
    RUN2(test_semaphore);
    RUN2(test_election);
    RUN2(test_election_guide_flags);
    RUN1(test_observer_free_inside_callback);
    RUN1(test_close_with_held_lock);
}
