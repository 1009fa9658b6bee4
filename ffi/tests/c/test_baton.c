/* C tests of libbaton against the dev server at CONSUL_HTTP_ADDR (started by `make test-c`).
 * Last line: "N passed, N failed". */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

atomic_int passed, failed;

const char BAD_UTF8[] = {(char)0xff, (char)0xfe, 0};

static baton_client *new_client(void) {
    baton_client *c = NULL;
    CHECK_RC(baton_client_new_from_env(&c), BATON_OK);
    return c;
}

static void test_results_and_version(void) {
    CHECK(strcmp(baton_version(), BATON_VERSION_STRING) == 0);
    CHECK(strcmp(baton_result_name(BATON_OK), "BATON_OK") == 0);
    CHECK(strcmp(baton_result_name(BATON_TIMEOUT), "BATON_TIMEOUT") == 0);
    CHECK(strcmp(baton_result_name(BATON_SESSION_INVALIDATED), "BATON_SESSION_INVALIDATED") == 0);
    CHECK(strcmp(baton_result_name(99999), "BATON_UNKNOWN") == 0);
    CHECK_RC(baton_client_new_from_env(NULL), BATON_NULL_ARGUMENT);
    char small[5];
    size_t n = baton_last_error_message(small, sizeof small);
    CHECK(n > 4 && strlen(small) == 4);
    CHECK(baton_last_error_message(NULL, 0) == n);
}

static void test_client(void) {
    baton_client *c = NULL;
    baton_client_options o = baton_client_options_default();
    o.address = BAD_UTF8;
    CHECK_RC(baton_client_new(&o, &c), BATON_INVALID_UTF8);
    CHECK(c == NULL);
    o.address = getenv("CONSUL_HTTP_ADDR");
    o.datacenter = "dc1";
    o.request_timeout_ms = 5000;
    CHECK_RC(baton_client_new(&o, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_client_new(&o, &c), BATON_OK);
    char addr[128];
    size_t len = 0;
    CHECK_RC(baton_client_address(c, addr, sizeof addr, &len), BATON_OK);
    CHECK(len == strlen(addr) && strncmp(addr, "http://", 7) == 0);
    CHECK_RC(baton_client_address(c, addr, 3, &len), BATON_BUFFER_TOO_SMALL);
    /* A size query (buf NULL, len 0), as baton_kv_get takes (issue 22). */
    size_t qlen = 0;
    CHECK_RC(baton_client_address(c, NULL, 0, &qlen), BATON_BUFFER_TOO_SMALL);
    CHECK(qlen == len);
    CHECK_RC(baton_client_address(c, NULL, sizeof addr, &qlen), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_client_address(NULL, addr, sizeof addr, &len), BATON_NULL_ARGUMENT);
    o.request_timeout_ms = BATON_WAIT_FOREVER;
    baton_client *c2 = NULL;
    CHECK_RC(baton_client_new(&o, &c2), BATON_INVALID_ARGUMENT);
    o.request_timeout_ms = 0;
    o.ca_file = "/nonexistent/ca.pem";
    o.address = "https://127.0.0.1:1";
    baton_result rc = baton_client_new(&o, &c2);
    CHECK(rc == BATON_INVALID_ARGUMENT || rc == BATON_OK);
    baton_client_free(c2);
    CHECK_RC(baton_client_close(c, 5000), BATON_OK);
    CHECK_RC(baton_client_close(c, 0), BATON_OK);
    CHECK_RC(baton_kv_put(c, "k", NULL, 0), BATON_CLOSED);
    CHECK(!baton_last_error_is_transient()); /* a closed client is not an outage */
    CHECK_RC(baton_client_close(NULL, 0), BATON_NULL_ARGUMENT);
    /* Nobody listens on port 1: a connection failure, worth trying again later. */
    baton_client_options down = baton_client_options_default();
    down.address = "127.0.0.1:1";
    down.request_timeout_ms = 2000;
    baton_client *c3 = NULL;
    CHECK_RC(baton_client_new(&down, &c3), BATON_OK);
    CHECK_RC(baton_kv_put(c3, "k", NULL, 0), BATON_CONNECTION);
    CHECK(baton_last_error_is_transient());
    baton_client_free(c3);
    baton_client_free(c);
    baton_client_free(NULL);
}

static void test_kv(baton_client *c) {
    CHECK_RC(baton_kv_put(c, "ffi/test/a", (const uint8_t *)"hello", 5), BATON_OK);
    uint8_t buf[16];
    size_t n = 0;
    bool found = false;
    CHECK_RC(baton_kv_get(c, "ffi/test/a", NULL, buf, sizeof buf, &n, &found), BATON_OK);
    CHECK(found && n == 5 && memcmp(buf, "hello", 5) == 0);
    CHECK_RC(baton_kv_get(c, "ffi/test/a", NULL, buf, 2, &n, &found), BATON_BUFFER_TOO_SMALL);
    CHECK(n == 5);
    CHECK_RC(baton_kv_get(c, "ffi/test/none", NULL, buf, sizeof buf, &n, &found), BATON_OK);
    CHECK(!found);
    CHECK_RC(baton_kv_get(c, "ffi/test/a", NULL, buf, sizeof buf, &n, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_kv_get(c, BAD_UTF8, NULL, buf, sizeof buf, &n, &found), BATON_INVALID_UTF8);
    CHECK_RC(baton_kv_put(c, NULL, NULL, 0), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_kv_put(c, "ffi/test/a", NULL, 3), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_kv_delete(c, "ffi/test/a"), BATON_OK);
    CHECK_RC(baton_kv_delete(c, BAD_UTF8), BATON_INVALID_UTF8);
    /* The core's key rule, the same in every language (issue 22): one leading '/' is
     * dropped for writes as for reads; more than one is refused, naming the problem. */
    CHECK_RC(baton_kv_put(c, "/ffi/test/slash", (const uint8_t *)"s", 1), BATON_OK);
    CHECK_RC(baton_kv_get(c, "ffi/test/slash", NULL, buf, sizeof buf, &n, &found), BATON_OK);
    CHECK(found && n == 1 && buf[0] == 's');
    CHECK_RC(baton_kv_put(c, "//ffi/test/slash", NULL, 0), BATON_INVALID_ARGUMENT);
    char m[512];
    baton_last_error_message(m, sizeof m);
    CHECK(strstr(m, "more than one '/'") != NULL);
    CHECK_RC(baton_kv_put(c, "", NULL, 0), BATON_INVALID_ARGUMENT);
    baton_last_error_message(m, sizeof m);
    CHECK(strstr(m, "missing key") != NULL);
    CHECK_RC(baton_kv_delete(c, "/ffi/test/slash"), BATON_OK);
    baton_cancel *cn = NULL;
    CHECK_RC(baton_cancel_new(&cn), BATON_OK);
    CHECK_RC(baton_cancel_cancel(cn), BATON_OK);
    CHECK(baton_cancel_is_cancelled(cn));
    CHECK(!baton_cancel_is_cancelled(NULL));
    CHECK_RC(baton_kv_get(c, "ffi/test/a", cn, buf, sizeof buf, &n, &found), BATON_CANCELLED);
    CHECK_RC(baton_cancel_cancel(NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_cancel_new(NULL), BATON_NULL_ARGUMENT);
    baton_cancel_free(cn);
    baton_cancel_free(NULL);
}

struct counter {
    atomic_int events;
    atomic_int lost;
    atomic_int reason;
    atomic_int freed;
};

static void count_cb(void *ud, const baton_event *ev) {
    struct counter *k = ud;
    atomic_fetch_add(&k->events, 1);
    if (ev->kind == BATON_EVENT_LOST) {
        atomic_fetch_add(&k->lost, 1);
        atomic_store(&k->reason, (int)ev->reason);
    }
}

static void count_free(void *ud) {
    struct counter *k = ud;
    atomic_fetch_add(&k->freed, 1);
}

bool wait_for(atomic_int *v, int want, long ms) {
    for (long t = 0; t < ms; t += 10) {
        if (atomic_load(v) >= want) return true;
        sleep_ms(10);
    }
    return atomic_load(v) >= want;
}

static void test_session_basics(baton_client *c) {
    baton_session *s = NULL;
    baton_session_options o = baton_session_options_default();
    o.name = "ffi-test";
    o.ttl_ms = 10000;
    o.lock_delay_ms = 0;
    CHECK_RC(baton_session_create(c, &o, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_session_create(NULL, &o, &s), BATON_NULL_ARGUMENT);
    o.behavior = 7;
    CHECK_RC(baton_session_create(c, &o, &s), BATON_INVALID_ARGUMENT);
    o.behavior = BATON_BEHAVIOR_DELETE;
    o.name = BAD_UTF8;
    CHECK_RC(baton_session_create(c, &o, &s), BATON_INVALID_UTF8);
    o.name = "ffi-test";
    o.ttl_ms = 1; /* below the server's minimum: Consul's text comes through */
    CHECK_RC(baton_session_create(c, &o, &s), BATON_INVALID_ARGUMENT);
    char msg[512];
    baton_last_error_message(msg, sizeof msg);
    CHECK(strstr(msg, "TTL") != NULL);
    o.ttl_ms = 10000;
    CHECK(s == NULL);
    CHECK_RC(baton_session_create(c, &o, &s), BATON_OK);
    char id[64];
    size_t n = 0;
    CHECK_RC(baton_session_id(s, id, sizeof id, &n), BATON_OK);
    CHECK(n == 36 && strlen(id) == 36);
    CHECK_RC(baton_session_id(s, id, 36, &n), BATON_BUFFER_TOO_SMALL);
    /* A size query (buf NULL, len 0), as baton_kv_get takes (issue 22). */
    n = 0;
    CHECK_RC(baton_session_id(s, NULL, 0, &n), BATON_BUFFER_TOO_SMALL);
    CHECK(n == 36);
    CHECK_RC(baton_session_id(s, NULL, sizeof id, &n), BATON_NULL_ARGUMENT);
    CHECK(baton_session_is_valid(s));
    CHECK(!baton_session_is_valid(NULL));
    baton_lost_reason r = BATON_LOST_NONE;
    CHECK_RC(baton_session_wait_lost(s, 0, NULL, &r), BATON_TIMEOUT);
    CHECK_RC(baton_session_wait_lost(s, 50, NULL, &r), BATON_TIMEOUT);
    CHECK_RC(baton_session_wait_lost(NULL, 0, NULL, &r), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_session_on_event(s, NULL, NULL, NULL), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_session_destroy(s), BATON_OK);
    CHECK(!baton_session_is_valid(s));
    CHECK_RC(baton_session_wait_lost(s, BATON_WAIT_FOREVER, NULL, &r), BATON_OK);
    CHECK(r == BATON_LOST_DESTROYED);
    CHECK_RC(baton_session_destroy(NULL), BATON_NULL_ARGUMENT);
    baton_session_free(s);
    baton_session_free(NULL);

    baton_session *d1 = NULL, *d2 = NULL;
    CHECK_RC(baton_client_default_session(c, &d1), BATON_OK);
    CHECK_RC(baton_client_default_session(c, &d2), BATON_OK);
    char id1[64], id2[64];
    CHECK_RC(baton_session_id(d1, id1, sizeof id1, NULL), BATON_OK);
    CHECK_RC(baton_session_id(d2, id2, sizeof id2, NULL), BATON_OK);
    CHECK(strcmp(id1, id2) == 0);
    CHECK_RC(baton_client_default_session(c, NULL), BATON_NULL_ARGUMENT);
    baton_session_free(d1);
    baton_session_free(d2);
}

/* Session lost while held: destroyed through a second client; the callback fires once. */
static void test_session_lost(baton_client *c, baton_client *other) {
    baton_session *s = NULL;
    baton_session_options o = baton_session_options_default();
    o.ttl_ms = 10000;
    CHECK_RC(baton_session_create(c, &o, &s), BATON_OK);
    struct counter k = {0};
    CHECK_RC(baton_session_on_event(s, count_cb, &k, count_free), BATON_OK);
    char id[64];
    CHECK_RC(baton_session_id(s, id, sizeof id, NULL), BATON_OK);
    CHECK_RC(baton_client_destroy_session_id(other, id), BATON_OK);
    CHECK_RC(baton_client_destroy_session_id(other, BAD_UTF8), BATON_INVALID_UTF8);
    baton_lost_reason r = BATON_LOST_NONE;
    CHECK_RC(baton_session_wait_lost(s, 10000, NULL, &r), BATON_OK);
    CHECK(r == BATON_LOST_INVALIDATED);
    CHECK(wait_for(&k.lost, 1, 5000));
    sleep_ms(200);
    CHECK(atomic_load(&k.lost) == 1);
    CHECK(atomic_load(&k.reason) == BATON_LOST_INVALIDATED);
    CHECK(atomic_load(&k.freed) == 0);
    baton_session_free(s);
    CHECK(atomic_load(&k.freed) == 1);
}

/* The time left until the local lease deadline: within the TTL, moved forward by renewals,
 * 0 once lost, BATON_WAIT_FOREVER for a session without a TTL. */
static void test_session_time_left(baton_client *c, baton_client *other) {
    baton_session *s = NULL;
    baton_session_options o = baton_session_options_default();
    /* A real Consul refuses TTLs under 10 s (with-devserver.sh sets BATON_TEST_REAL_CONSUL). */
    o.ttl_ms = getenv("BATON_TEST_REAL_CONSUL") ? 10000 : 1000;
    o.lock_delay_ms = 0;
    CHECK_RC(baton_session_create(c, &o, &s), BATON_OK);
    uint64_t left = 0;
    CHECK_RC(baton_session_time_left_ms(s, &left), BATON_OK);
    CHECK(left > 0 && left <= o.ttl_ms);
    CHECK_RC(baton_session_time_left_ms(NULL, &left), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_session_time_left_ms(s, NULL), BATON_NULL_ARGUMENT);
    /* A renew (every ~TTL/3) moves the deadline forward: a later reading is larger. */
    bool moved = false;
    uint64_t prev = left;
    for (int i = 0; i < 2000 && !moved; i++) {
        sleep_ms(5);
        CHECK_RC(baton_session_time_left_ms(s, &left), BATON_OK);
        moved = left > prev;
        prev = left;
    }
    CHECK(moved);
    char id[64];
    CHECK_RC(baton_session_id(s, id, sizeof id, NULL), BATON_OK);
    CHECK_RC(baton_client_destroy_session_id(other, id), BATON_OK);
    CHECK_RC(baton_session_wait_lost(s, 10000, NULL, NULL), BATON_OK);
    CHECK_RC(baton_session_time_left_ms(s, &left), BATON_OK);
    CHECK(left == 0);
    baton_session_free(s);

    o.ttl_ms = 0; /* no TTL: no local deadline */
    CHECK_RC(baton_session_create(c, &o, &s), BATON_OK);
    CHECK_RC(baton_session_time_left_ms(s, &left), BATON_OK);
    CHECK(left == BATON_WAIT_FOREVER);
    CHECK_RC(baton_session_destroy(s), BATON_OK);
    CHECK_RC(baton_session_time_left_ms(s, &left), BATON_OK);
    CHECK(left == 0);
    baton_session_free(s);
}

/* No callback after _free returns, and userdata_free exactly once. */
static void test_no_callback_after_free(baton_client *c, baton_client *other) {
    baton_session *s = NULL;
    CHECK_RC(baton_session_create(c, NULL, &s), BATON_OK);
    struct counter k = {0};
    CHECK_RC(baton_session_on_event(s, count_cb, &k, count_free), BATON_OK);
    CHECK_RC(baton_session_on_event(s, count_cb, &k, NULL), BATON_OK);
    char id[64];
    CHECK_RC(baton_session_id(s, id, sizeof id, NULL), BATON_OK);
    baton_session_free(s);
    CHECK(atomic_load(&k.freed) == 1);
    CHECK_RC(baton_client_destroy_session_id(other, id), BATON_OK);
    sleep_ms(300);
    CHECK(atomic_load(&k.events) == 0);
    CHECK(atomic_load(&k.freed) == 1);
}

struct self_free {
    baton_session *s;
    atomic_int called;
    atomic_int freed;
};

static void free_self_cb(void *ud, const baton_event *ev) {
    struct self_free *f = ud;
    if (ev->kind != BATON_EVENT_LOST) return;
    char id[64];
    /* Calling back into the library, then freeing the handle from its own callback. */
    (void)baton_session_id(f->s, id, sizeof id, NULL);
    (void)baton_session_is_valid(f->s);
    baton_session_free(f->s);
    atomic_fetch_add(&f->called, 1);
}

static void self_free_ud(void *ud) {
    struct self_free *f = ud;
    atomic_fetch_add(&f->freed, 1);
}

static void test_free_inside_callback(baton_client *c, baton_client *other) {
    struct self_free f = {0};
    CHECK_RC(baton_session_create(c, NULL, &f.s), BATON_OK);
    CHECK_RC(baton_session_on_event(f.s, free_self_cb, &f, self_free_ud), BATON_OK);
    char id[64];
    CHECK_RC(baton_session_id(f.s, id, sizeof id, NULL), BATON_OK);
    CHECK_RC(baton_client_destroy_session_id(other, id), BATON_OK);
    CHECK(wait_for(&f.freed, 1, 10000));
    CHECK(atomic_load(&f.called) == 1);
    sleep_ms(100);
    CHECK(atomic_load(&f.freed) == 1);
}

static void *cancel_later(void *arg) {
    sleep_ms(200);
    (void)baton_cancel_cancel(arg);
    return NULL;
}

static void test_cancel_from_thread(baton_client *c) {
    baton_session *s = NULL;
    CHECK_RC(baton_session_create(c, NULL, &s), BATON_OK);
    baton_cancel *cn = NULL;
    CHECK_RC(baton_cancel_new(&cn), BATON_OK);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cancel_later, cn) == 0);
    CHECK_RC(baton_session_wait_lost(s, BATON_WAIT_FOREVER, cn, NULL), BATON_CANCELLED);
    pthread_join(t, NULL);
    CHECK(strcmp(baton_result_name(BATON_CANCELLED), "BATON_CANCELLED") == 0);
    baton_cancel_free(cn);
    CHECK_RC(baton_session_destroy(s), BATON_OK);
    baton_session_free(s);
}

/* The child reports its result through a pipe, not its exit status: under valgrind
 * the child's own leak check (everything the parent's threads own looks lost from
 * there) would change the status. */
static void test_fork(baton_client *c) {
    baton_lock *l = NULL;
    CHECK_RC(baton_lock_new(c, "ffi/test/fork-lock", NULL, &l), BATON_OK);
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        uint32_t rc[3] = {(uint32_t)baton_kv_put(c, "ffi/test/fork", NULL, 0),
                          (uint32_t)baton_lock_acquire(l, 0, NULL),
                          (uint32_t)baton_lock_is_held(l)};
        baton_lock_free(l); /* leaks in the child on purpose, never touches the parent's state */
        ssize_t w = write(fds[1], rc, sizeof rc);
        _exit(w == (ssize_t)sizeof rc ? 0 : 1);
    }
    close(fds[1]);
    uint32_t child_rc[3] = {0, 0, 1};
    CHECK(pid > 0 && read(fds[0], child_rc, sizeof child_rc) == (ssize_t)sizeof child_rc);
    close(fds[0]);
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_RC((baton_result)child_rc[0], BATON_FORKED);
    CHECK_RC((baton_result)child_rc[1], BATON_FORKED);
    CHECK(child_rc[2] == 0);
    /* The parent's handle is untouched. */
    CHECK_RC(baton_lock_acquire(l, 5000, NULL), BATON_OK);
    CHECK_RC(baton_lock_release(l), BATON_OK);
    baton_lock_free(l);
}

int main(void) {
    if (!getenv("CONSUL_HTTP_ADDR")) {
        fprintf(stderr, "CONSUL_HTTP_ADDR is not set\n");
        return 2;
    }
    test_results_and_version();
    test_client();
    baton_client *c = new_client();
    baton_client *other = new_client();
    if (c && other) {
        test_kv(c);
        test_session_basics(c);
        test_session_lost(c, other);
        test_session_time_left(c, other);
        test_no_callback_after_free(c, other);
        test_free_inside_callback(c, other);
        test_cancel_from_thread(c);
        test_recipes(c, other);
        test_checks(c);
        test_parity_gaps(c, other);
        test_capi_gaps(c);
        test_hostile(c);
        if (!getenv("BATON_TEST_NO_FORK")) test_fork(c);
        CHECK_RC(baton_client_close(c, 10000), BATON_OK);
    }
    baton_client_free(c);
    baton_client_free(other);
    printf("%d passed, %d failed\n", atomic_load(&passed), atomic_load(&failed));
    fflush(stdout);
    return atomic_load(&failed) == 0 ? 0 : 1;
}
