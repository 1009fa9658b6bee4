/* C tests of libbaton against the dev server at CONSUL_HTTP_ADDR (started by `make test-c`).
 * Last line: "N passed, N failed". */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

atomic_int passed, failed;

const char BAD_UTF8[] = {(char)0xff, (char)0xfe, 0};

bool last_error_has(const char *needle) {
    char m[1024];
    baton_last_error_message(m, sizeof m);
    return strstr(m, needle) != NULL;
}

/* ---- The shared fixture (check.h) ---------------------------------------------------- */

/* Lists the sessions at the server for the fixture; never creates one. */
static baton_client *checker;
/* The sessions the server had when the suite started (a real Consul may have some). */
static char *baseline;

/* The sessions at the server now, one ID and '\n' each (free() it); NULL on failure. */
static char *server_sessions(void) {
    for (int attempt = 0; attempt < 8; attempt++) {
        size_t need = 0;
        baton_result rc = baton_client_session_ids(checker, NULL, 0, &need, NULL);
        if (rc != BATON_BUFFER_TOO_SMALL) return NULL;
        size_t len = need + 1 + 4 * BATON_SESSION_ID_SIZE;
        char *buf = malloc(len);
        if (!buf) return NULL;
        rc = baton_client_session_ids(checker, buf, len, NULL, NULL);
        if (rc == BATON_OK) return buf;
        free(buf);
        if (rc != BATON_BUFFER_TOO_SMALL) return NULL;
    }
    return NULL;
}

static bool listed(const char *list, const char *id) {
    size_t n = strlen(id);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, id, n) == 0) return true;
        p = end ? end + 1 : p + len;
    }
    return false;
}

/* Calls `each(id)` for every session at the server that is not in the baseline; returns
 * how many there were ((size_t)-1 when the server could not be asked). */
static size_t each_new_session(void (*each)(const char *id, const char *test), const char *test) {
    char *now = server_sessions();
    if (!now) return (size_t)-1;
    size_t count = 0;
    for (char *p = now; *p;) {
        char *end = strchr(p, '\n');
        if (end) *end = 0;
        if (*p && !listed(baseline, p)) {
            count++;
            if (each) each(p, test);
        }
        if (!end) break;
        p = end + 1;
    }
    free(now);
    return count;
}

size_t sessions_beyond_baseline(void) { return each_new_session(NULL, NULL); }

static void report_and_destroy(const char *id, const char *test) {
    fprintf(stderr, "FAIL %s: session %s left at the server after its clients were closed\n",
            test, id);
    (void)baton_client_destroy_session_id(checker, id);
}

void check_no_sessions_left(const char *test) {
    size_t left = each_new_session(report_and_destroy, test);
    if (left == 0) {
        atomic_fetch_add(&passed, 1);
    } else {
        atomic_fetch_add(&failed, 1);
        if (left == (size_t)-1) fprintf(stderr, "FAIL %s: could not list the sessions\n", test);
    }
}

baton_client *fixture_client(void) {
    baton_client *c = NULL;
    CHECK_RC(baton_client_new_from_env(&c), BATON_OK);
    return c;
}

void fixture_close(baton_client *c) {
    if (!c) return;
    CHECK_RC(baton_client_close(c, 10000), BATON_OK);
    baton_client_free(c);
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
    s = NULL;

    o.ttl_ms = BATON_NO_TTL; /* no TTL: no local deadline */
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

/* ---- Issue 31: what a newcomer still hits ------------------------------------------- */

/* Item 5: a TTL of 0 is refused, naming the field (Consul would read it as "no TTL": a
 * session that keeps its locks after a crash); BATON_NO_TTL is the explicit way to it. */
static void test_zero_ttl_is_refused(baton_client *c) {
    baton_session_options o = baton_session_options_default();
    o.ttl_ms = 0;
    baton_session *s = NULL;
    CHECK_RC(baton_session_create(c, &o, &s), BATON_INVALID_ARGUMENT);
    CHECK(last_error_has("options.ttl_ms") && last_error_has("BATON_NO_TTL"));
    CHECK(s == NULL);
    baton_session_checks k = baton_session_checks_default();
    CHECK_RC(baton_session_create_with_checks(c, &o, &k, &s), BATON_INVALID_ARGUMENT);
    CHECK(last_error_has("options.ttl_ms"));
    baton_client *d = NULL;
    baton_client_options co = baton_client_options_default();
    co.address = getenv("CONSUL_HTTP_ADDR");
    CHECK_RC(baton_client_new_with_default_session(&co, &o, NULL, &d), BATON_INVALID_ARGUMENT);
    CHECK(last_error_has("default_session.ttl_ms"));
    CHECK(d == NULL);
    baton_client_free(d);
    d = NULL;
    CHECK_RC(baton_client_new_from_env_with_default_session(&o, NULL, &d), BATON_INVALID_ARGUMENT);
    CHECK(last_error_has("default_session.ttl_ms"));
    CHECK(d == NULL);
    baton_client_free(d);
    d = NULL;
    CHECK(sessions_beyond_baseline() == 0); /* nothing was created */

    o.ttl_ms = BATON_NO_TTL;
    s = NULL;
    CHECK_RC(baton_session_create(c, &o, &s), BATON_OK);
    uint64_t left = 0;
    if (s) CHECK_RC(baton_session_time_left_ms(s, &left), BATON_OK);
    CHECK(left == BATON_WAIT_FOREVER);
    baton_session_free(s); /* closing c destroys it: the fixture checks */
    CHECK_RC(baton_client_new_from_env_with_default_session(&o, NULL, &d), BATON_OK);
    baton_session *ds = NULL;
    if (d) CHECK_RC(baton_client_default_session(d, &ds), BATON_OK);
    left = 0;
    if (ds) CHECK_RC(baton_session_time_left_ms(ds, &left), BATON_OK);
    CHECK(left == BATON_WAIT_FOREVER);
    baton_session_free(ds);
    fixture_close(d);
}

static baton_session *short_session(baton_client *c) {
    baton_session *s = NULL;
    baton_session_options o = baton_session_options_default();
    o.lock_delay_ms = 0;
    o.ttl_ms = 10000;
    CHECK_RC(baton_session_create(c, &o, &s), BATON_OK);
    return s;
}

static void destroy_elsewhere(baton_client *other, baton_session *s) {
    char id[BATON_SESSION_ID_SIZE] = "";
    CHECK_RC(baton_session_id(s, id, sizeof id, NULL), BATON_OK);
    CHECK_RC(baton_client_destroy_session_id(other, id), BATON_OK);
}

/* Item 5: a release of something not held says why, in the core's words (as Python does):
 * never acquired or already released, lost and why, its client closed. */
static void test_not_held_says_why(baton_client *c, baton_client *other) {
    baton_session *s = short_session(c);
    baton_lock_options lo = baton_lock_options_default();
    lo.session = s;
    baton_lock *l = NULL;
    CHECK_RC(baton_lock_new(c, "ffi/issue31/not-held", &lo, &l), BATON_OK);
    CHECK_RC(baton_lock_release(l), BATON_NOT_HELD);
    CHECK(last_error_has("lock \"ffi/issue31/not-held\"") && last_error_has("never acquired"));
    CHECK_RC(baton_lock_acquire(l, 5000, NULL), BATON_OK);
    CHECK_RC(baton_lock_release(l), BATON_OK);
    CHECK_RC(baton_lock_release(l), BATON_NOT_HELD);
    CHECK(last_error_has("already released"));
    CHECK_RC(baton_lock_acquire(l, 5000, NULL), BATON_OK);
    destroy_elsewhere(other, s);
    CHECK_RC(baton_lock_wait_lost(l, 10000, NULL, NULL, NULL), BATON_OK);
    CHECK_RC(baton_lock_release(l), BATON_NOT_HELD);
    CHECK(last_error_has("was lost") && last_error_has("invalidated"));
    baton_lock_free(l);
    baton_session_free(s);

    s = short_session(c);
    baton_semaphore_options so = baton_semaphore_options_default();
    so.session = s;
    baton_semaphore *m = NULL;
    CHECK_RC(baton_semaphore_new(c, "ffi/issue31/not-held-sem", 2, &so, &m), BATON_OK);
    CHECK_RC(baton_semaphore_release(m), BATON_NOT_HELD);
    CHECK(last_error_has("semaphore \"ffi/issue31/not-held-sem\"") &&
          last_error_has("never acquired"));
    CHECK_RC(baton_semaphore_acquire(m, 5000, NULL), BATON_OK);
    destroy_elsewhere(other, s);
    CHECK_RC(baton_semaphore_wait_lost(m, 10000, NULL, NULL, NULL), BATON_OK);
    CHECK_RC(baton_semaphore_release(m), BATON_NOT_HELD);
    CHECK(last_error_has("was lost"));
    baton_semaphore_free(m);
    baton_session_free(s);

    s = short_session(c);
    baton_election *e = NULL;
    CHECK_RC(baton_election_new(c, "ffi/issue31/not-held-election", s, &e), BATON_OK);
    CHECK_RC(baton_election_resign(e), BATON_NOT_HELD);
    CHECK(last_error_has("never acquired") && last_error_has("leadership of election"));
    CHECK_RC(baton_election_campaign(e, (const uint8_t *)"a", 1, 5000, NULL), BATON_OK);
    destroy_elsewhere(other, s);
    CHECK_RC(baton_election_wait_lost(e, 10000, NULL, NULL, NULL), BATON_OK);
    CHECK_RC(baton_election_resign(e), BATON_NOT_HELD);
    CHECK(last_error_has("was lost") && last_error_has("invalidated"));
    baton_election_free(e);
    baton_session_free(s);

    baton_client *k = fixture_client();
    if (!k) return;
    CHECK_RC(baton_lock_new(k, "ffi/issue31/not-held-closed", NULL, &l), BATON_OK);
    CHECK_RC(baton_lock_acquire(l, 5000, NULL), BATON_OK);
    CHECK_RC(baton_client_close(k, 10000), BATON_OK);
    CHECK_RC(baton_lock_release(l), BATON_NOT_HELD);
    CHECK(last_error_has("client was closed"));
    baton_lock_free(l);
    baton_client_free(k);
}

/* Item 1: semaphores with sessions of their own, freed just before close(): close destroys
 * their sessions too (it used to return BATON_OK with one left at Consul). */
static void test_close_destroys_the_sessions_of_freed_semaphores(void) {
    baton_client *k = fixture_client();
    if (!k) return;
    for (int i = 0; i < 4; i++) {
        baton_semaphore *m = NULL;
        CHECK_RC(baton_semaphore_new(k, "ffi/issue31/encoders", 3, NULL, &m), BATON_OK);
        CHECK_RC(baton_semaphore_acquire(m, 5000, NULL), BATON_OK);
        CHECK_RC(baton_semaphore_release(m), BATON_OK);
        baton_semaphore_free(m);
    }
    CHECK_RC(baton_client_close(k, 5000), BATON_OK);
    size_t left = sessions_beyond_baseline();
    if (left != 0) fprintf(stderr, "  %zu session(s) left after close\n", left);
    CHECK(left == 0);
    baton_client_free(k);
}

/* Log records as a callback sees them. */
struct logged {
    pthread_mutex_t mu;
    char want[128]; /* only records whose message contains this count */
    atomic_int records;
    atomic_int warnings;
    atomic_int freed;
    atomic_int restore_inside; /* set: the callback restores stderr from inside itself */
    char target[128];
    char message[1024];
};

static void log_cb(void *ud, baton_log_level level, const char *target, const char *message) {
    struct logged *g = ud;
    pthread_mutex_lock(&g->mu);
    bool wanted = strstr(message, g->want) != NULL;
    if (wanted && level <= BATON_LOG_WARN) {
        snprintf(g->target, sizeof g->target, "%s", target);
        snprintf(g->message, sizeof g->message, "%s", message);
    }
    pthread_mutex_unlock(&g->mu);
    atomic_fetch_add(&g->records, 1);
    if (wanted && level <= BATON_LOG_WARN) {
        atomic_fetch_add(&g->warnings, 1);
        /* Calling back into the library from the callback, replacing itself. */
        if (atomic_exchange(&g->restore_inside, 0))
            (void)baton_set_log_callback(NULL, NULL, NULL, BATON_LOG_OFF);
    }
}

static void log_free(void *ud) {
    struct logged *g = ud;
    atomic_fetch_add(&g->freed, 1);
}

/* Item 2: warnings reach a callback set with baton_set_log_callback (here: a lock lost),
 * with a target naming baton; replacing the callback frees its userdata once, also from
 * inside the callback. */
static void test_log_callback(baton_client *c, baton_client *other) {
    static struct logged g = {.mu = PTHREAD_MUTEX_INITIALIZER};
    baton_session *s = short_session(c);
    if (!s) return;
    CHECK_RC(baton_session_id(s, g.want, sizeof g.want, NULL), BATON_OK);
    CHECK_RC(baton_set_log_callback(log_cb, &g, log_free, BATON_LOG_DEBUG), BATON_OK);
    baton_lock_options lo = baton_lock_options_default();
    lo.session = s;
    baton_lock *l = NULL;
    CHECK_RC(baton_lock_new(c, "ffi/issue31/logged", &lo, &l), BATON_OK);
    CHECK_RC(baton_lock_acquire(l, 5000, NULL), BATON_OK);
    atomic_store(&g.restore_inside, 1);
    destroy_elsewhere(other, s);
    CHECK(wait_for(&g.warnings, 1, 10000));
    pthread_mutex_lock(&g.mu);
    CHECK(strncmp(g.target, "baton", 5) == 0);
    CHECK(strstr(g.message, g.want) != NULL);
    pthread_mutex_unlock(&g.mu);
    /* The callback restored stderr from inside: its userdata is freed after that run. */
    CHECK(wait_for(&g.freed, 1, 5000));
    CHECK_RC(baton_lock_wait_lost(l, 10000, NULL, NULL, NULL), BATON_OK);
    baton_lock_free(l);
    baton_session_free(s);

    /* Replaced from outside: freed once, by then. */
    static struct logged h = {.mu = PTHREAD_MUTEX_INITIALIZER};
    CHECK_RC(baton_set_log_callback(log_cb, &h, log_free, BATON_LOG_WARN), BATON_OK);
    CHECK_RC(baton_set_log_callback(log_cb, &h, NULL, BATON_LOG_WARN), BATON_OK);
    CHECK(wait_for(&h.freed, 1, 5000));
    CHECK_RC(baton_set_log_callback(NULL, NULL, NULL, BATON_LOG_OFF), BATON_OK);
    CHECK(atomic_load(&g.freed) == 1 && atomic_load(&h.freed) == 1);
}

/* A port on 127.0.0.1 nobody listens on (bound, then closed). */
static int closed_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static baton_client *unreachable_client(char addr[32]) {
    snprintf(addr, 32, "127.0.0.1:%d", closed_port());
    baton_client_options o = baton_client_options_default();
    o.address = addr;
    o.request_timeout_ms = 1000;
    baton_client *k = NULL;
    CHECK_RC(baton_client_new(&o, &k), BATON_OK);
    return k;
}

struct waiter {
    baton_lock *l;
    baton_cancel *cancel;
    baton_result rc;
};

static void *acquire_forever(void *arg) {
    struct waiter *w = arg;
    w->rc = baton_lock_acquire(w->l, BATON_WAIT_FOREVER, w->cancel);
    return NULL;
}

/* Item 2: an acquire without a time limit against an address nobody answers keeps waiting,
 * but says so at warn level within about a second (it used to wait in silence for 10 s),
 * and is still cancelled cleanly. Needs the core change (issue 31, item 2). */
static void test_untimed_wait_warns_when_consul_is_unreachable(void) {
    static struct logged g = {.mu = PTHREAD_MUTEX_INITIALIZER};
    char addr[32];
    baton_client *k = unreachable_client(addr);
    if (!k) return;
    snprintf(g.want, sizeof g.want, "%s", addr);
    CHECK_RC(baton_set_log_callback(log_cb, &g, log_free, BATON_LOG_WARN), BATON_OK);
    struct waiter w = {NULL, NULL, BATON_OK};
    CHECK_RC(baton_lock_new(k, "ffi/issue31/unreachable", NULL, &w.l), BATON_OK);
    CHECK_RC(baton_cancel_new(&w.cancel), BATON_OK);
    pthread_t t;
    if (w.l && w.cancel && pthread_create(&t, NULL, acquire_forever, &w) == 0) {
        bool warned = wait_for(&g.warnings, 1, 3000);
        CHECK(warned);
        if (!warned) fprintf(stderr, "  no warning naming %s within 3 s (about 1 s expected; it was 10 s)\n", addr);
        CHECK_RC(baton_cancel_cancel(w.cancel), BATON_OK);
        pthread_join(t, NULL);
        CHECK_RC(w.rc, BATON_CANCELLED);
    }
    CHECK_RC(baton_set_log_callback(NULL, NULL, NULL, BATON_LOG_OFF), BATON_OK);
    CHECK(atomic_load(&g.freed) == 1);
    baton_lock_free(w.l);
    baton_cancel_free(w.cancel);
    baton_client_free(k);
}

/* Item 2: a timed wait in which no request got an answer ends with BATON_CONNECTION naming
 * the address, not BATON_TIMEOUT "not acquired" (which means someone else holds it): lock,
 * semaphore and campaign. Needs the core change (issue 31, item 2). */
static void test_timed_waits_report_an_unreachable_consul(void) {
    char addr[32];
    baton_client *k = unreachable_client(addr);
    if (!k) return;
    baton_lock *l = NULL;
    CHECK_RC(baton_lock_new(k, "ffi/issue31/unreachable", NULL, &l), BATON_OK);
    CHECK_RC(baton_lock_acquire(l, 2000, NULL), BATON_CONNECTION);
    CHECK(last_error_has(addr));
    baton_semaphore *m = NULL;
    CHECK_RC(baton_semaphore_new(k, "ffi/issue31/unreachable-sem", 2, NULL, &m), BATON_OK);
    CHECK_RC(baton_semaphore_acquire(m, 2000, NULL), BATON_CONNECTION);
    CHECK(last_error_has(addr));
    baton_election *e = NULL;
    CHECK_RC(baton_election_new(k, "ffi/issue31/unreachable-election", NULL, &e), BATON_OK);
    CHECK_RC(baton_election_campaign(e, (const uint8_t *)"a", 1, 2000, NULL), BATON_CONNECTION);
    CHECK(last_error_has(addr));
    baton_election_free(e);
    baton_semaphore_free(m);
    baton_lock_free(l);
    baton_client_free(k);
}

static void test_issue31(void) {
    RUN1(test_zero_ttl_is_refused);
    RUN2(test_not_held_says_why);
    RUN0(test_close_destroys_the_sessions_of_freed_semaphores);
    RUN2(test_log_callback);
    RUN0(test_untimed_wait_warns_when_consul_is_unreachable);
    RUN0(test_timed_waits_report_an_unreachable_consul);
}

int main(void) {
    if (!getenv("CONSUL_HTTP_ADDR")) {
        fprintf(stderr, "CONSUL_HTTP_ADDR is not set\n");
        return 2;
    }
    checker = fixture_client();
    baseline = checker ? server_sessions() : NULL;
    if (!baseline) {
        fprintf(stderr, "cannot list the sessions at the server\n");
        baton_client_free(checker);
        return 2;
    }
    RUN0(test_results_and_version);
    RUN0(test_client);
    RUN1(test_kv);
    RUN1(test_session_basics);
    RUN2(test_session_lost);
    RUN2(test_session_time_left);
    RUN2(test_no_callback_after_free);
    RUN2(test_free_inside_callback);
    RUN1(test_cancel_from_thread);
    test_recipes();
    test_recipes_more();
    test_checks();
    test_parity_gaps();
    test_capi_gaps();
    test_hostile();
    test_metrics();
    test_issue31();
    if (!getenv("BATON_TEST_NO_FORK")) RUN1(test_fork);
    fixture_close(checker);
    free(baseline);
    printf("%d passed, %d failed\n", atomic_load(&passed), atomic_load(&failed));
    fflush(stdout);
    return atomic_load(&failed) == 0 ? 0 : 1;
}
