/* C tests of sessions bound to health checks (the agent API, baton_session_create_with_checks)
 * and adopted sessions, against the dev server at CONSUL_HTTP_ADDR (or BATON_TEST_CONSUL).
 * Called from test_baton.c's main. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* A bound for "eventually", not a speed assertion. */
#define PATIENCE_MS 30000
/* The acceptance bound: lost within the check's TTL + 1 s of its last pass. */
#define SLACK_MS 1000

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool error_has(const char *needle) {
    char m[512];
    baton_last_error_message(m, sizeof m);
    return strstr(m, needle) != NULL;
}

struct keeper {
    baton_client *client;
    const char *check_id;
    long period_ms;
    atomic_bool healthy;
    atomic_int passes;
    _Atomic int64_t last_pass_ns; /* send time of the last successful pass */
    atomic_int errors;
};

/* The recipe's health loop: while healthy, pass the check every period. */
static void *keep_passing(void *arg) {
    struct keeper *k = arg;
    while (atomic_load(&k->healthy)) {
        int64_t sent = now_ns();
        if (baton_agent_check_pass(k->client, k->check_id, "healthy") != BATON_OK) {
            atomic_fetch_add(&k->errors, 1);
            break;
        }
        atomic_store(&k->last_pass_ns, sent);
        atomic_fetch_add(&k->passes, 1);
        sleep_ms(k->period_ms); /* the reporting period, not a wait for a condition */
    }
    return NULL;
}

struct lost_at {
    atomic_int calls;
    atomic_int reason;
    _Atomic int64_t at_ns;
};

static void on_lost(void *ud, baton_hold_lost reason, baton_lost_reason session_reason) {
    (void)session_reason;
    struct lost_at *l = ud;
    atomic_store(&l->at_ns, now_ns());
    atomic_store(&l->reason, (int)reason);
    atomic_fetch_add(&l->calls, 1);
}

struct other {
    baton_lock *lock;
    baton_result rc;
    _Atomic int64_t at_ns;
};

static void *acquire_other(void *arg) {
    struct other *o = arg;
    o->rc = baton_lock_acquire(o->lock, PATIENCE_MS, NULL);
    atomic_store(&o->at_ns, now_ns());
    return NULL;
}

static void test_lock_lost_when_check_stops_passing(void) {
    bool real = getenv("BATON_TEST_REAL_CONSUL") != NULL;
    uint64_t ttl_ms = real ? 2000 : 1000;
    baton_client *a = NULL, *b = NULL;
    CHECK_RC(baton_client_new_from_env(&a), BATON_OK);
    CHECK_RC(baton_client_new_from_env(&b), BATON_OK);
    char check_id[64], key[96];
    snprintf(check_id, sizeof check_id, "baton-c-lock-%ld", (long)getpid());
    snprintf(key, sizeof key, "baton-test/c-checks/%ld/bound-lock", (long)getpid());

    baton_ttl_check tc = baton_ttl_check_default();
    tc.id = check_id;
    tc.ttl_ms = ttl_ms;
    tc.notes = "baton C test";
    CHECK_RC(baton_agent_check_register(a, &tc), BATON_OK);
    CHECK_RC(baton_agent_check_pass(a, check_id, NULL), BATON_OK);

    baton_session_options so = baton_session_options_default();
    so.name = "bound";
    so.ttl_ms = 10000;
    so.lock_delay_ms = 0;
    const char *node_checks[] = {"serfHealth", check_id};
    baton_session_checks sc = baton_session_checks_default();
    sc.node_checks = node_checks;
    sc.node_checks_len = 2;
    baton_session *s = NULL;
    CHECK_RC(baton_session_create_with_checks(a, &so, &sc, &s), BATON_OK);

    baton_lock_options lo = baton_lock_options_default();
    lo.session = s;
    baton_lock *lock = NULL, *lock_b = NULL;
    CHECK_RC(baton_lock_new(a, key, &lo, &lock), BATON_OK);
    CHECK_RC(baton_lock_acquire(lock, PATIENCE_MS, NULL), BATON_OK);
    struct lost_at lost = {0};
    CHECK_RC(baton_lock_on_lost(lock, on_lost, &lost, NULL), BATON_OK);

    struct keeper k = {.client = a, .check_id = check_id, .period_ms = (long)ttl_ms / 4};
    atomic_store(&k.healthy, true);
    pthread_t keeper;
    pthread_create(&keeper, NULL, keep_passing, &k);
    /* Passing keeps the lock: passes spanning three TTLs (13 periods of TTL/4). */
    CHECK(wait_for(&k.passes, 14, PATIENCE_MS));
    CHECK(baton_lock_is_held(lock));
    CHECK(atomic_load(&lost.calls) == 0);

    /* Another process waits for the lock. */
    struct other o = {0};
    CHECK_RC(baton_lock_new(b, key, NULL, &lock_b), BATON_OK);
    o.lock = lock_b;
    pthread_t waiter;
    pthread_create(&waiter, NULL, acquire_other, &o);

    atomic_store(&k.healthy, false); /* the health function fails: no more passes */
    pthread_join(keeper, NULL);
    CHECK(atomic_load(&k.errors) == 0);
    int64_t last = atomic_load(&k.last_pass_ns);

    CHECK(wait_for(&lost.calls, 1, PATIENCE_MS));
    pthread_join(waiter, NULL);
    CHECK_RC(o.rc, BATON_OK);
    int reason = atomic_load(&lost.reason);
    CHECK(reason == BATON_HOLD_SESSION_LOST || reason == BATON_HOLD_KEY_CHANGED);
    long lost_ms = (long)((atomic_load(&lost.at_ns) - last) / 1000000);
    long acquired_ms = (long)((atomic_load(&o.at_ns) - last) / 1000000);
    fprintf(stderr, "check TTL %llu ms: lost %ld ms, acquired by another %ld ms after the last pass\n",
            (unsigned long long)ttl_ms, lost_ms, acquired_ms);
    CHECK(lost_ms <= (long)ttl_ms + SLACK_MS);
    CHECK(acquired_ms <= (long)ttl_ms + SLACK_MS);
    CHECK(!baton_lock_is_held(lock));

    CHECK_RC(baton_lock_release(lock_b), BATON_OK);
    CHECK_RC(baton_agent_check_deregister(a, check_id), BATON_OK);
    baton_lock_free(lock);
    baton_lock_free(lock_b);
    baton_session_free(s);
    CHECK_RC(baton_client_close(b, 10000), BATON_OK);
    CHECK_RC(baton_client_close(a, 10000), BATON_OK);
    baton_client_free(b);
    baton_client_free(a);
}

static void test_service_check_and_bad_input(baton_client *c) {
    char service[64], check_id[80];
    snprintf(service, sizeof service, "baton-c-svc-%ld", (long)getpid());
    snprintf(check_id, sizeof check_id, "%s:ttl", service);
    const char *tags[] = {"baton"};
    baton_service svc = baton_service_default();
    svc.name = service;
    svc.tags = tags;
    svc.tags_len = 1;
    svc.port = 8080;
    CHECK_RC(baton_agent_service_register(c, &svc), BATON_OK);
    baton_ttl_check tc = baton_ttl_check_default();
    tc.id = check_id;
    tc.ttl_ms = 30000;
    tc.service_id = service;
    CHECK_RC(baton_agent_check_register(c, &tc), BATON_OK);

    /* A TTL check starts critical: Consul refuses to bind a session to it, naming it. */
    const char *service_checks[] = {check_id};
    baton_session_checks sc = baton_session_checks_default();
    sc.service_checks = service_checks;
    sc.service_checks_len = 1;
    baton_session_options so = baton_session_options_default();
    so.lock_delay_ms = 0;
    baton_session *s = NULL;
    CHECK(baton_session_create_with_checks(c, &so, &sc, &s) != BATON_OK);
    CHECK(error_has(check_id));
    CHECK(s == NULL);

    CHECK_RC(baton_agent_check_update(c, check_id, BATON_CHECK_PASSING, "ready"), BATON_OK);
    CHECK_RC(baton_session_create_with_checks(c, &so, &sc, &s), BATON_OK);
    CHECK_RC(baton_agent_check_warn(c, check_id, "slow"), BATON_OK);
    CHECK_RC(baton_agent_check_fail(c, check_id, "broken"), BATON_OK);
    baton_lost_reason why = BATON_LOST_NONE;
    CHECK_RC(baton_session_wait_lost(s, PATIENCE_MS, NULL, &why), BATON_OK);
    CHECK(why == BATON_LOST_INVALIDATED);
    baton_session_free(s);
    CHECK_RC(baton_agent_service_deregister(c, service), BATON_OK);

    /* Bad input: result code and a message naming the problem. */
    CHECK_RC(baton_agent_check_register(c, NULL), BATON_NULL_ARGUMENT);
    tc = baton_ttl_check_default();
    CHECK_RC(baton_agent_check_register(c, &tc), BATON_NULL_ARGUMENT);
    CHECK(error_has("check.id"));
    tc.id = "x";
    CHECK_RC(baton_agent_check_register(c, &tc), BATON_INVALID_ARGUMENT);
    CHECK(error_has("TTL must be positive"));
    tc.ttl_ms = 1000;
    tc.status = 7;
    CHECK_RC(baton_agent_check_register(c, &tc), BATON_INVALID_ARGUMENT);
    CHECK(error_has("check.status 7"));
    CHECK_RC(baton_agent_check_update(c, "x", BATON_CHECK_DEFAULT, NULL), BATON_INVALID_ARGUMENT);
    CHECK_RC(baton_agent_check_pass(c, "", NULL), BATON_INVALID_ARGUMENT);
    CHECK_RC(baton_agent_check_pass(c, BAD_UTF8, NULL), BATON_INVALID_UTF8);
    CHECK_RC(baton_agent_check_pass(NULL, "x", NULL), BATON_NULL_ARGUMENT);
    sc = baton_session_checks_default();
    sc.service_checks_len = 2;
    CHECK_RC(baton_session_create_with_checks(c, NULL, &sc, &s), BATON_NULL_ARGUMENT);
    const char *empty[] = {"serfHealth", ""};
    sc = baton_session_checks_default();
    sc.node_checks = empty;
    sc.node_checks_len = 2;
    CHECK_RC(baton_session_create_with_checks(c, NULL, &sc, &s), BATON_INVALID_ARGUMENT);
    CHECK(error_has("checks.node_checks[1] must not be empty"));
    CHECK_RC(baton_session_create_with_checks(c, NULL, NULL, NULL), BATON_NULL_ARGUMENT);
    /* The node is sent, not ignored. */
    sc = baton_session_checks_default();
    sc.node = "baton-no-such-node";
    CHECK(baton_session_create_with_checks(c, NULL, &sc, &s) != BATON_OK);
    CHECK(error_has("Missing node registration"));
}

static void test_adopt(baton_client *c) {
    baton_session *s = NULL;
    CHECK_RC(baton_session_adopt(c, "not-a-uuid", &s), BATON_INVALID_ARGUMENT);
    CHECK(error_has("not a UUID"));
    CHECK_RC(baton_session_adopt(c, "00000000-0000-4000-8000-000000000000", &s), BATON_NOT_FOUND);
    CHECK(error_has("does not exist"));
    CHECK_RC(baton_session_adopt(c, NULL, &s), BATON_NULL_ARGUMENT);
    CHECK(s == NULL);

    /* A session made by another client; an adopter's close leaves it alone. */
    baton_session_options so = baton_session_options_default();
    so.ttl_ms = 10000;
    so.lock_delay_ms = 0;
    baton_session *theirs = NULL;
    CHECK_RC(baton_session_create(c, &so, &theirs), BATON_OK);
    char id[64] = {0};
    CHECK_RC(baton_session_id(theirs, id, sizeof id, NULL), BATON_OK);
    baton_client *adopter = NULL;
    CHECK_RC(baton_client_new_from_env(&adopter), BATON_OK);
    CHECK_RC(baton_session_adopt(adopter, id, &s), BATON_OK);
    CHECK(baton_session_is_valid(s));
    char key[96];
    snprintf(key, sizeof key, "baton-test/c-checks/%ld/adopted", (long)getpid());
    baton_lock_options lo = baton_lock_options_default();
    lo.session = s;
    baton_lock *lock = NULL;
    CHECK_RC(baton_lock_new(adopter, key, &lo, &lock), BATON_OK);
    CHECK_RC(baton_lock_acquire(lock, 0, NULL), BATON_OK);
    baton_lock_free(lock); /* releases */
    baton_session_free(s);
    CHECK_RC(baton_client_close(adopter, 10000), BATON_OK);
    baton_client_free(adopter);
    CHECK(baton_session_is_valid(theirs));
    /* The owner can still use it: the adopter's close did not destroy it. */
    lo.session = theirs;
    CHECK_RC(baton_lock_new(c, key, &lo, &lock), BATON_OK);
    CHECK_RC(baton_lock_acquire(lock, 0, NULL), BATON_OK);
    CHECK_RC(baton_lock_release(lock), BATON_OK);
    baton_lock_free(lock);
    CHECK_RC(baton_session_destroy(theirs), BATON_OK);
    baton_session_free(theirs);
}

void test_checks(void) {
    RUN0(test_lock_lost_when_check_stops_passing);
    RUN1(test_service_check_and_bad_input);
    RUN1(test_adopt);
}
