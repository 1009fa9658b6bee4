/* Hostile inputs at every entry point of the C ABI, run under ASan+UBSan and valgrind by
 * `make test-c`: NULL for each pointer, strings that are not UTF-8, strings of 1 MiB,
 * byte buffers without a NUL (values are lengths, not strings), zero-length and exact-size
 * output buffers (malloc'd to their size so that a one-byte overrun is caught), lengths past
 * what any buffer can have, and handles that outlived their client.
 *
 * Not tested, because no test of it can be free of undefined behaviour: a freed handle
 * (use after free, double free), a dangling or misaligned pointer, a string without its NUL,
 * or a buffer shorter than the length passed with it. The library cannot tell such a pointer
 * from a live one; the header states these rules.
 *
 * Every failing call must return its documented code and leave a last error message naming
 * the argument; constructors must not write their out-parameter. A Makefile check makes sure
 * every function of baton.h is named in this file. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* `rc` must be `want`; a non-OK result must leave a last error message containing
 * `needle` (NULL: any non-empty message). */
#define EXPECT(expr, want, needle) expect_((expr), (want), (needle), #expr, __LINE__)

static void expect_(baton_result rc, baton_result want, const char *needle, const char *what,
                    int line) {
    char msg[2048];
    msg[0] = '\0';
    if (rc != BATON_OK) baton_last_error_message(msg, sizeof msg);
    bool ok = rc == want &&
              (rc == BATON_OK || (msg[0] != '\0' && (needle == NULL || strstr(msg, needle))));
    if (ok) {
        atomic_fetch_add(&passed, 1);
    } else {
        atomic_fetch_add(&failed, 1);
        fprintf(stderr, "FAIL test_hostile.c:%d: %s gave %s, want %s (needle %s); last error: %s\n",
                line, what, baton_result_name(rc), baton_result_name(want),
                needle ? needle : "-", msg);
    }
}

/* A failure of some kind (which one depends on the server): never OK, never a panic, and
 * with a message. Prints what it got, for the record. */
#define EXPECT_REFUSED(expr) expect_refused_((expr), #expr, __LINE__)

static void expect_refused_(baton_result rc, const char *what, int line) {
    char msg[512];
    msg[0] = '\0';
    baton_last_error_message(msg, sizeof msg);
    bool ok = rc != BATON_OK && rc != BATON_PANIC && msg[0] != '\0';
    if (ok) {
        atomic_fetch_add(&passed, 1);
        fprintf(stderr, "  (line %d: %s: %.200s)\n", line, baton_result_name(rc), msg);
    } else {
        atomic_fetch_add(&failed, 1);
        fprintf(stderr, "FAIL test_hostile.c:%d: %s gave %s; last error: %s\n", line, what,
                baton_result_name(rc), msg);
    }
}

/* An out-parameter value that a failed constructor must leave alone. */
static int sentinel_obj;
#define SENTINEL ((void *)&sentinel_obj)

static char *long_string(size_t n, char fill) {
    char *s = malloc(n + 1);
    if (!s) abort();
    memset(s, fill, n);
    s[n] = '\0';
    return s;
}

static const size_t MIB = 1024 * 1024;
/* More than any buffer can hold: Rust slices stop at PTRDIFF_MAX bytes. */
static const size_t HUGE_LEN = SIZE_MAX;
static const char SID[] = "adf4238a-882b-9ddc-4a9d-5b6758e4159e";

static void noop_lost(void *userdata, baton_hold_lost reason, baton_lost_reason session_reason) {
    (void)userdata;
    (void)reason;
    (void)session_reason;
}
static void noop_event(void *userdata, const baton_event *ev) {
    (void)userdata;
    (void)ev;
}
static void noop_observe(void *userdata, const baton_leader *leader, uint32_t flags) {
    (void)userdata;
    (void)leader;
    (void)flags;
}

static void hostile_results_and_errors(void) {
    CHECK(baton_version() != NULL);
    uint32_t odd[] = {1, 99, 106, 899, 901, 0xffffffffu};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        CHECK(strcmp(baton_result_name(odd[i]), "BATON_UNKNOWN") == 0);
        CHECK(baton_hold_lost_name(odd[i]) != NULL);
        CHECK(baton_lost_reason_name(odd[i]) != NULL);
    }
    CHECK(strcmp(baton_hold_lost_name(0xffffffffu), "unknown") == 0);
    CHECK(strcmp(baton_lost_reason_name(0xffffffffu), "unknown") == 0);
    EXPECT(baton_client_new_from_env(NULL), BATON_NULL_ARGUMENT, "`client_out`");
    /* A NULL buffer with a length, a one-byte buffer (just the NUL), an exact-size one. */
    size_t n = baton_last_error_message(NULL, 100);
    CHECK(n == strlen("argument `client_out` is NULL"));
    char *one = malloc(1);
    CHECK(baton_last_error_message(one, 1) == n && one[0] == '\0');
    free(one);
    char *exact = malloc(n);
    CHECK(baton_last_error_message(exact, n) == n && strlen(exact) == n - 1);
    free(exact);
    (void)baton_last_error_is_transient();
}

static void hostile_client_options(void) {
    baton_client *c = SENTINEL;
    EXPECT(baton_client_new(NULL, NULL), BATON_NULL_ARGUMENT, "`client_out`");
    const char *fields[] = {"options.address",   "options.token",
                            "options.token_file", "options.ca_file",
                            "options.client_cert_file", "options.client_key_file",
                            "options.datacenter"};
    for (int i = 0; i < 7; i++) {
        baton_client_options o = baton_client_options_default();
        const char **slot[] = {&o.address,  &o.token,          &o.token_file,
                               &o.ca_file,  &o.client_cert_file, &o.client_key_file,
                               &o.datacenter};
        *slot[i] = BAD_UTF8;
        EXPECT(baton_client_new(&o, &c), BATON_INVALID_UTF8, fields[i]);
        CHECK(c == SENTINEL);
    }
    char *big = long_string(MIB, 'a');
    baton_client_options o = baton_client_options_default();
    o.ca_file = big; /* a path of 1 MiB */
    EXPECT(baton_client_new(&o, &c), BATON_INVALID_ARGUMENT, "CA file");
    o = baton_client_options_default();
    o.request_timeout_ms = UINT64_MAX;
    EXPECT(baton_client_new(&o, &c), BATON_INVALID_ARGUMENT, "options.request_timeout_ms");
    CHECK(c == SENTINEL);
    /* No request is made when a client is made: an empty address (the default) and a token
     * of 1 MiB are taken, and refused by the first request; a host name of 1 MiB is refused
     * there or when the client is made, naming the address (issue 31: a malformed address
     * is refused at construction). */
    o = baton_client_options_default();
    o.address = big;
    o.request_timeout_ms = 5000;
    baton_client *t = NULL;
    baton_result made = baton_client_new(&o, &t);
    if (made == BATON_OK) {
        EXPECT_REFUSED(baton_kv_put(t, "ffi/hostile/k", (const uint8_t *)"v", 1));
    } else {
        EXPECT(made, BATON_INVALID_ARGUMENT, "address");
        CHECK(t == NULL);
    }
    baton_client_free(t);
    o.address = "";
    t = NULL;
    baton_result rc = baton_client_new(&o, &t);
    CHECK(rc == BATON_OK || rc == BATON_INVALID_ARGUMENT);
    baton_client_free(t);
    o.address = getenv("CONSUL_HTTP_ADDR");
    o.token = big;
    t = NULL;
    EXPECT(baton_client_new(&o, &t), BATON_OK, NULL);
    EXPECT_REFUSED(baton_kv_put(t, "ffi/hostile/token", (const uint8_t *)"v", 1));
    baton_client_free(t);
    free(big);
    /* The default session's options, checked when the client is made. */
    baton_session_options ds = baton_session_options_default();
    EXPECT(baton_client_new_with_default_session(NULL, &ds, NULL, NULL), BATON_NULL_ARGUMENT,
           "`client_out`");
    EXPECT(baton_client_new_from_env_with_default_session(&ds, NULL, NULL), BATON_NULL_ARGUMENT,
           "`client_out`");
    ds.name = BAD_UTF8;
    EXPECT(baton_client_new_with_default_session(NULL, &ds, NULL, &c), BATON_INVALID_UTF8,
           "name");
    EXPECT(baton_client_new_from_env_with_default_session(&ds, NULL, &c), BATON_INVALID_UTF8,
           "name");
    ds = baton_session_options_default();
    ds.behavior = 42;
    EXPECT(baton_client_new_with_default_session(NULL, &ds, NULL, &c), BATON_INVALID_ARGUMENT,
           "behavior");
    ds = baton_session_options_default();
    ds.ttl_ms = UINT64_MAX - 1; /* UINT64_MAX is BATON_NO_TTL */
    EXPECT(baton_client_new_from_env_with_default_session(&ds, NULL, &c), BATON_INVALID_ARGUMENT,
           "ttl_ms");
    ds.ttl_ms = 0;
    EXPECT(baton_client_new_from_env_with_default_session(&ds, NULL, &c), BATON_INVALID_ARGUMENT,
           "default_session.ttl_ms");
    baton_session_checks dk = baton_session_checks_default();
    dk.node_checks_len = HUGE_LEN;
    dk.node_checks = (const char *const *)&sentinel_obj;
    EXPECT(baton_client_new_with_default_session(NULL, NULL, &dk, &c), BATON_INVALID_ARGUMENT,
           "node_checks");
    dk = baton_session_checks_default();
    dk.service_checks_len = 1;
    EXPECT(baton_client_new_from_env_with_default_session(NULL, &dk, &c), BATON_NULL_ARGUMENT,
           "service_checks");
    const char *bad_list[] = {BAD_UTF8};
    dk.service_checks = bad_list;
    EXPECT(baton_client_new_from_env_with_default_session(NULL, &dk, &c), BATON_INVALID_UTF8,
           "service_checks[0]");
    o = baton_client_options_default();
    o.token = BAD_UTF8;
    EXPECT(baton_client_new_with_default_session(&o, NULL, NULL, &c), BATON_INVALID_UTF8,
           "options.token");
    CHECK(c == SENTINEL);

    EXPECT(baton_client_address(NULL, NULL, 0, NULL), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_client_close(NULL, 0), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_client_destroy_session_id(NULL, SID), BATON_NULL_ARGUMENT, "`client`");
    baton_client_free(NULL);
}

static void hostile_client_calls(baton_client *c) {
    /* The address: a size query, an exact-size buffer (no room for the NUL), then enough. */
    size_t need = 0;
    EXPECT(baton_client_address(c, NULL, 0, &need), BATON_BUFFER_TOO_SMALL, "needed");
    char *addr = malloc(need);
    size_t got = 0;
    EXPECT(baton_client_address(c, addr, need, &got), BATON_BUFFER_TOO_SMALL, "needed");
    CHECK(got == need);
    free(addr);
    addr = malloc(need + 1);
    EXPECT(baton_client_address(c, addr, need + 1, NULL), BATON_OK, NULL);
    CHECK(strlen(addr) == need);
    free(addr);

    EXPECT(baton_client_destroy_session_id(c, NULL), BATON_NULL_ARGUMENT, "`session_id`");
    EXPECT(baton_client_destroy_session_id(c, BAD_UTF8), BATON_INVALID_UTF8, "`session_id`");
    EXPECT(baton_client_destroy_session_id(c, ""), BATON_INVALID_ARGUMENT, "session ID");
    EXPECT(baton_client_destroy_session_id(c, ".."), BATON_INVALID_ARGUMENT, "dot segment");
    char *big = long_string(MIB, 'a');
    EXPECT_REFUSED(baton_client_destroy_session_id(c, big));
    free(big);

    /* The session list: a size query, an exact-size buffer (no room for the NUL), then
     * enough (with room for a few more sessions, as the header advises). */
    EXPECT(baton_client_session_ids(NULL, NULL, 0, NULL, NULL), BATON_NULL_ARGUMENT, "`client`");
    size_t count = 7;
    need = 1;
    EXPECT(baton_client_session_ids(c, NULL, 0, &need, &count), BATON_BUFFER_TOO_SMALL, "needed");
    CHECK(need == count * BATON_SESSION_ID_SIZE);
    char *ids = malloc(need + 1);
    EXPECT(baton_client_session_ids(c, ids, need, NULL, NULL), BATON_BUFFER_TOO_SMALL, "needed");
    free(ids);
    size_t roomy = need + 1 + 8 * BATON_SESSION_ID_SIZE;
    ids = malloc(roomy);
    EXPECT(baton_client_session_ids(c, ids, roomy, &got, &count), BATON_OK, NULL);
    CHECK(got == strlen(ids) && got == count * BATON_SESSION_ID_SIZE);
    free(ids);
    EXPECT(baton_client_session_ids(c, NULL, roomy, NULL, NULL), BATON_NULL_ARGUMENT, "`buf`");
}

static void noop_log(void *userdata, baton_log_level level, const char *target,
                     const char *message) {
    (void)userdata;
    (void)level;
    (void)target;
    (void)message;
}

static atomic_int log_frees;
static void count_log_free(void *userdata) {
    (void)userdata;
    atomic_fetch_add(&log_frees, 1);
}

/* A level that is not one is refused (and the userdata freed); NULL restores stderr, whatever
 * the level. */
static void hostile_log_callback(void) {
    uint32_t odd[] = {6, 99, 0xffffffffu};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        int before = atomic_load(&log_frees);
        EXPECT(baton_set_log_callback(noop_log, NULL, count_log_free, odd[i]),
               BATON_INVALID_ARGUMENT, "max_level");
        CHECK(atomic_load(&log_frees) == before + 1);
        EXPECT(baton_set_log_callback(NULL, NULL, count_log_free, odd[i]), BATON_OK, NULL);
        CHECK(atomic_load(&log_frees) == before + 1);
    }
    EXPECT(baton_set_log_callback(noop_log, NULL, NULL, BATON_LOG_OFF), BATON_OK, NULL);
    EXPECT(baton_set_log_callback(NULL, NULL, NULL, BATON_LOG_TRACE), BATON_OK, NULL);
}

static void hostile_kv(baton_client *c) {
    uint8_t buf[16];
    size_t n = 0;
    bool found = false;
    EXPECT(baton_kv_get(NULL, "k", NULL, buf, sizeof buf, &n, &found), BATON_NULL_ARGUMENT,
           "`client`");
    EXPECT(baton_kv_get(c, NULL, NULL, buf, sizeof buf, &n, &found), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_kv_get(c, BAD_UTF8, NULL, buf, sizeof buf, &n, &found), BATON_INVALID_UTF8,
           "`key`");
    EXPECT(baton_kv_get(c, "k", NULL, buf, sizeof buf, &n, NULL), BATON_NULL_ARGUMENT,
           "`found_out`");
    EXPECT(baton_kv_put(NULL, "k", NULL, 0), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_kv_put(c, NULL, NULL, 0), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_kv_put(c, BAD_UTF8, NULL, 0), BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_kv_put(c, "ffi/hostile/v", NULL, 3), BATON_NULL_ARGUMENT, "`value`");
    EXPECT(baton_kv_put(c, "ffi/hostile/v", buf, HUGE_LEN), BATON_INVALID_ARGUMENT, "`value`");
    EXPECT(baton_kv_put(c, "//ffi/hostile/v", NULL, 0), BATON_INVALID_ARGUMENT, "'/'");
    EXPECT(baton_kv_put(c, "", NULL, 0), BATON_INVALID_ARGUMENT, "missing key");
    EXPECT(baton_kv_delete(NULL, "k"), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_kv_delete(c, NULL), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_kv_delete(c, BAD_UTF8), BATON_INVALID_UTF8, "`key`");

    /* Entries and check-and-set. */
    baton_kv_entry ent;
    EXPECT(baton_kv_get_entry(NULL, "k", NULL, buf, sizeof buf, &n, &ent, &found),
           BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_kv_get_entry(c, NULL, NULL, buf, sizeof buf, &n, &ent, &found),
           BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_kv_get_entry(c, BAD_UTF8, NULL, buf, sizeof buf, &n, &ent, &found),
           BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_kv_get_entry(c, "k", NULL, buf, sizeof buf, &n, NULL, &found),
           BATON_NULL_ARGUMENT, "`entry_out`");
    EXPECT(baton_kv_get_entry(c, "k", NULL, buf, sizeof buf, &n, &ent, NULL),
           BATON_NULL_ARGUMENT, "`found_out`");
    bool applied = false;
    EXPECT(baton_kv_put_cas(NULL, "k", NULL, 0, 0, 0, &applied), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_kv_put_cas(c, NULL, NULL, 0, 0, 0, &applied), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_kv_put_cas(c, BAD_UTF8, NULL, 0, 0, 0, &applied), BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_kv_put_cas(c, "ffi/hostile/cas", NULL, 0, 0, 0, NULL), BATON_NULL_ARGUMENT,
           "`applied_out`");
    EXPECT(baton_kv_put_cas(c, "ffi/hostile/cas", NULL, 2, 0, 0, &applied), BATON_NULL_ARGUMENT,
           "`value`");
    EXPECT(baton_kv_put_cas(c, "ffi/hostile/cas", buf, HUGE_LEN, 0, 0, &applied),
           BATON_INVALID_ARGUMENT, "`value`");
    EXPECT(baton_kv_delete_cas(NULL, "k", 1, &applied), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_kv_delete_cas(c, NULL, 1, &applied), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_kv_delete_cas(c, BAD_UTF8, 1, &applied), BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_kv_delete_cas(c, "ffi/hostile/cas", 1, NULL), BATON_NULL_ARGUMENT,
           "`applied_out`");

    /* A value is bytes, not a string: NULs inside, none at the end, and bytes that are not
     * UTF-8 come back exactly. */
    const uint8_t bin[7] = {0, 'a', 0, 0xff, 0xfe, '\n', 0};
    EXPECT(baton_kv_put(c, "ffi/hostile/bin", bin, sizeof bin), BATON_OK, NULL);
    uint8_t *exact = malloc(sizeof bin);
    EXPECT(baton_kv_get(c, "ffi/hostile/bin", NULL, exact, sizeof bin, &n, &found), BATON_OK,
           NULL);
    CHECK(found && n == sizeof bin && memcmp(exact, bin, sizeof bin) == 0);
    /* One byte short, zero bytes, and a NULL buffer with a length. */
    n = 0;
    EXPECT(baton_kv_get(c, "ffi/hostile/bin", NULL, exact, sizeof bin - 1, &n, &found),
           BATON_BUFFER_TOO_SMALL, NULL);
    CHECK(n == sizeof bin);
    n = 0;
    EXPECT(baton_kv_get(c, "ffi/hostile/bin", NULL, exact, 0, &n, &found), BATON_BUFFER_TOO_SMALL,
           NULL);
    CHECK(n == sizeof bin);
    EXPECT(baton_kv_get(c, "ffi/hostile/bin", NULL, NULL, 64, &n, &found), BATON_NULL_ARGUMENT,
           "`buf`");
    /* The entry comes with a size query too, and a CAS on its index applies once. */
    memset(&ent, 0xaa, sizeof ent);
    EXPECT(baton_kv_get_entry(c, "ffi/hostile/bin", NULL, NULL, 0, &n, &ent, &found),
           BATON_BUFFER_TOO_SMALL, NULL);
    CHECK(found && n == sizeof bin && ent.modify_index > 0 && ent.session[0] == '\0');
    EXPECT(baton_kv_put_cas(c, "ffi/hostile/bin", bin, sizeof bin, UINT64_MAX, ent.modify_index,
                            &applied),
           BATON_OK, NULL);
    CHECK(applied);
    EXPECT(baton_kv_put_cas(c, "ffi/hostile/bin", bin, sizeof bin, 0, ent.modify_index, &applied),
           BATON_OK, NULL);
    CHECK(!applied);
    EXPECT(baton_kv_delete_cas(c, "ffi/hostile/bin", ent.modify_index, &applied), BATON_OK, NULL);
    CHECK(!applied);
    free(exact);
    /* An empty value: NULL with length 0 both ways. */
    EXPECT(baton_kv_put(c, "ffi/hostile/empty", NULL, 0), BATON_OK, NULL);
    EXPECT(baton_kv_get(c, "ffi/hostile/empty", NULL, NULL, 0, &n, &found), BATON_OK, NULL);
    CHECK(found && n == 0);

    /* A key of 1 MiB: refused by Consul (the request head is over its 1 MiB cap) or by the
     * transport, but never a crash. */
    char *big = long_string(MIB, 'k');
    EXPECT_REFUSED(baton_kv_put(c, big, bin, sizeof bin));
    EXPECT_REFUSED(baton_kv_get(c, big, NULL, buf, sizeof buf, &n, &found));
    EXPECT_REFUSED(baton_kv_delete(c, big));
    free(big);

    /* A cancelled signal stops the call at once. */
    baton_cancel *cn = SENTINEL;
    EXPECT(baton_cancel_new(NULL), BATON_NULL_ARGUMENT, "`cancel_out`");
    EXPECT(baton_cancel_new(&cn), BATON_OK, NULL);
    EXPECT(baton_cancel_cancel(cn), BATON_OK, NULL);
    EXPECT(baton_cancel_cancel(cn), BATON_OK, NULL);
    EXPECT(baton_kv_get(c, "ffi/hostile/bin", cn, buf, sizeof buf, &n, &found), BATON_CANCELLED,
           NULL);
    EXPECT(baton_cancel_cancel(NULL), BATON_NULL_ARGUMENT, "`cancel`");
    CHECK(!baton_cancel_is_cancelled(NULL));
    baton_cancel_free(cn);
    baton_cancel_free(NULL);
}

static void hostile_sessions(baton_client *c) {
    baton_session *s = SENTINEL;
    baton_session_options o = baton_session_options_default();
    EXPECT(baton_session_create(NULL, &o, &s), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_session_create(c, &o, NULL), BATON_NULL_ARGUMENT, "`session_out`");
    o.name = BAD_UTF8;
    EXPECT(baton_session_create(c, &o, &s), BATON_INVALID_UTF8, "options.name");
    o = baton_session_options_default();
    o.behavior = 99;
    EXPECT(baton_session_create(c, &o, &s), BATON_INVALID_ARGUMENT, "options.behavior");
    o = baton_session_options_default();
    o.ttl_ms = UINT64_MAX - 1;
    EXPECT(baton_session_create(c, &o, &s), BATON_INVALID_ARGUMENT, "options.ttl_ms");
    o.ttl_ms = 0;
    EXPECT(baton_session_create(c, &o, &s), BATON_INVALID_ARGUMENT, "options.ttl_ms is 0");
    o = baton_session_options_default();
    o.lock_delay_ms = UINT64_MAX;
    EXPECT(baton_session_create(c, &o, &s), BATON_INVALID_ARGUMENT, "options.lock_delay_ms");
    o = baton_session_options_default();
    o.ttl_ms = 1; /* below Consul's minimum */
    EXPECT_REFUSED(baton_session_create(c, &o, &s));
    CHECK(s == SENTINEL);
    char *big = long_string(MIB, 'n');
    o = baton_session_options_default();
    o.name = big;
    /* A name of 1 MiB goes in the JSON body (Consul takes it); it must not crash either way. */
    baton_result rc = baton_session_create(c, &o, &s);
    CHECK(rc != BATON_PANIC);
    if (rc == BATON_OK) {
        EXPECT(baton_session_destroy(s), BATON_OK, NULL);
        baton_session_free(s);
        s = SENTINEL;
    } else {
        CHECK(s == SENTINEL);
    }

    /* Checks: NULL lists with lengths, NULL and non-UTF-8 entries, impossible lengths. */
    baton_session_checks k = baton_session_checks_default();
    EXPECT(baton_session_create_with_checks(NULL, NULL, &k, &s), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_session_create_with_checks(c, NULL, &k, NULL), BATON_NULL_ARGUMENT,
           "`session_out`");
    k.node = BAD_UTF8;
    EXPECT(baton_session_create_with_checks(c, NULL, &k, &s), BATON_INVALID_UTF8, "checks.node");
    k = baton_session_checks_default();
    k.node_checks_len = 2;
    EXPECT(baton_session_create_with_checks(c, NULL, &k, &s), BATON_NULL_ARGUMENT,
           "checks.node_checks");
    const char *with_null[] = {"serfHealth", NULL};
    k.node_checks = with_null;
    EXPECT(baton_session_create_with_checks(c, NULL, &k, &s), BATON_NULL_ARGUMENT,
           "checks.node_checks[1]");
    const char *with_bad[] = {BAD_UTF8};
    k.node_checks = with_bad;
    k.node_checks_len = 1;
    EXPECT(baton_session_create_with_checks(c, NULL, &k, &s), BATON_INVALID_UTF8,
           "checks.node_checks[0]");
    const char *with_empty[] = {""};
    k.node_checks = with_empty;
    EXPECT(baton_session_create_with_checks(c, NULL, &k, &s), BATON_INVALID_ARGUMENT,
           "checks.node_checks[0]");
    k = baton_session_checks_default();
    k.service_checks = with_null;
    k.service_checks_len = HUGE_LEN;
    EXPECT(baton_session_create_with_checks(c, NULL, &k, &s), BATON_INVALID_ARGUMENT,
           "checks.service_checks");
    k.service_checks = NULL;
    k.service_checks_len = 1;
    EXPECT(baton_session_create_with_checks(c, NULL, &k, &s), BATON_NULL_ARGUMENT,
           "checks.service_checks");
    CHECK(s == SENTINEL);

    /* Adopting: not a UUID, of any length. */
    EXPECT(baton_session_adopt(NULL, SID, &s), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_session_adopt(c, NULL, &s), BATON_NULL_ARGUMENT, "`session_id`");
    EXPECT(baton_session_adopt(c, BAD_UTF8, &s), BATON_INVALID_UTF8, "`session_id`");
    EXPECT(baton_session_adopt(c, SID, NULL), BATON_NULL_ARGUMENT, "`session_out`");
    EXPECT(baton_session_adopt(c, "", &s), BATON_INVALID_ARGUMENT, "not a UUID");
    EXPECT(baton_session_adopt(c, "../../v1/kv/x", &s), BATON_INVALID_ARGUMENT, "not a UUID");
    EXPECT(baton_session_adopt(c, big, &s), BATON_INVALID_ARGUMENT, "not a UUID");
    EXPECT(baton_session_adopt(c, SID, &s), BATON_NOT_FOUND, SID);
    CHECK(s == SENTINEL);
    free(big);

    EXPECT(baton_client_default_session(NULL, &s), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_client_default_session(c, NULL), BATON_NULL_ARGUMENT, "`session_out`");
    CHECK(s == SENTINEL);

    /* Calls on a session handle. */
    s = NULL;
    EXPECT(baton_session_create(c, NULL, &s), BATON_OK, NULL);
    char id[BATON_SESSION_ID_SIZE];
    size_t n = 0;
    EXPECT(baton_session_id(NULL, id, sizeof id, &n), BATON_NULL_ARGUMENT, "`session`");
    EXPECT(baton_session_id(s, NULL, 0, &n), BATON_BUFFER_TOO_SMALL, NULL);
    CHECK(n == 36);
    char *exact = malloc(36);
    EXPECT(baton_session_id(s, exact, 36, NULL), BATON_BUFFER_TOO_SMALL, NULL);
    free(exact);
    EXPECT(baton_session_id(s, id, sizeof id, NULL), BATON_OK, NULL);
    CHECK(strlen(id) == 36);
    CHECK(!baton_session_is_valid(NULL));
    uint64_t left = 0;
    EXPECT(baton_session_time_left_ms(NULL, &left), BATON_NULL_ARGUMENT, "`session`");
    EXPECT(baton_session_time_left_ms(s, NULL), BATON_NULL_ARGUMENT, "`ms_out`");
    baton_lost_reason r = BATON_LOST_NONE;
    EXPECT(baton_session_wait_lost(NULL, 0, NULL, &r), BATON_NULL_ARGUMENT, "`session`");
    EXPECT(baton_session_wait_lost(s, 0, NULL, NULL), BATON_TIMEOUT, NULL);
    EXPECT(baton_session_on_event(NULL, noop_event, NULL, NULL), BATON_NULL_ARGUMENT,
           "`session`");
    EXPECT(baton_session_on_event(s, NULL, NULL, NULL), BATON_NULL_ARGUMENT, "`callback`");
    EXPECT(baton_session_destroy(NULL), BATON_NULL_ARGUMENT, "`session`");
    EXPECT(baton_session_destroy(s), BATON_OK, NULL);
    EXPECT(baton_session_destroy(s), BATON_OK, NULL);
    baton_session_free(s);
    baton_session_free(NULL);
}

static void hostile_agent(baton_client *c) {
    baton_ttl_check k = baton_ttl_check_default();
    EXPECT(baton_agent_check_register(NULL, &k), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_agent_check_register(c, NULL), BATON_NULL_ARGUMENT, "`check`");
    EXPECT(baton_agent_check_register(c, &k), BATON_NULL_ARGUMENT, "check.id");
    k.id = BAD_UTF8;
    EXPECT(baton_agent_check_register(c, &k), BATON_INVALID_UTF8, "check.id");
    k.id = "ffi-hostile";
    k.ttl_ms = 10000;
    k.name = BAD_UTF8;
    EXPECT(baton_agent_check_register(c, &k), BATON_INVALID_UTF8, "check.name");
    k.name = NULL;
    k.service_id = BAD_UTF8;
    EXPECT(baton_agent_check_register(c, &k), BATON_INVALID_UTF8, "check.service_id");
    k.service_id = NULL;
    k.notes = BAD_UTF8;
    EXPECT(baton_agent_check_register(c, &k), BATON_INVALID_UTF8, "check.notes");
    k.notes = NULL;
    k.status = 77;
    EXPECT(baton_agent_check_register(c, &k), BATON_INVALID_ARGUMENT, "check.status");
    k.status = BATON_CHECK_DEFAULT;
    k.ttl_ms = 0;
    EXPECT(baton_agent_check_register(c, &k), BATON_INVALID_ARGUMENT, "TTL");
    k.ttl_ms = UINT64_MAX;
    EXPECT_REFUSED(baton_agent_check_register(c, &k));
    char *big = long_string(MIB, 'c');
    k.ttl_ms = 10000;
    k.notes = big; /* in the JSON body */
    baton_result rc = baton_agent_check_register(c, &k);
    CHECK(rc != BATON_PANIC);
    if (rc == BATON_OK) EXPECT(baton_agent_check_deregister(c, "ffi-hostile"), BATON_OK, NULL);
    k.notes = NULL;

    const char *ids[] = {NULL, BAD_UTF8};
    baton_result want[] = {BATON_NULL_ARGUMENT, BATON_INVALID_UTF8};
    for (int i = 0; i < 2; i++) {
        EXPECT(baton_agent_check_deregister(c, ids[i]), want[i], "`check_id`");
        EXPECT(baton_agent_check_pass(c, ids[i], NULL), want[i], "`check_id`");
        EXPECT(baton_agent_check_warn(c, ids[i], NULL), want[i], "`check_id`");
        EXPECT(baton_agent_check_fail(c, ids[i], NULL), want[i], "`check_id`");
        EXPECT(baton_agent_check_update(c, ids[i], BATON_CHECK_PASSING, NULL), want[i],
               "`check_id`");
        EXPECT(baton_agent_service_deregister(c, ids[i]), want[i], "`service_id`");
    }
    EXPECT(baton_agent_check_deregister(NULL, "x"), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_agent_check_pass(NULL, "x", NULL), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_agent_check_warn(NULL, "x", NULL), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_agent_check_fail(NULL, "x", NULL), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_agent_check_update(NULL, "x", BATON_CHECK_PASSING, NULL), BATON_NULL_ARGUMENT,
           "`client`");
    EXPECT(baton_agent_check_pass(c, "x", BAD_UTF8), BATON_INVALID_UTF8, "`note`");
    EXPECT(baton_agent_check_warn(c, "x", BAD_UTF8), BATON_INVALID_UTF8, "`note`");
    EXPECT(baton_agent_check_fail(c, "x", BAD_UTF8), BATON_INVALID_UTF8, "`note`");
    EXPECT(baton_agent_check_update(c, "x", 99, NULL), BATON_INVALID_ARGUMENT, "status");
    EXPECT(baton_agent_check_update(c, "x", BATON_CHECK_DEFAULT, NULL), BATON_INVALID_ARGUMENT,
           "status");
    EXPECT(baton_agent_check_update(c, "x", BATON_CHECK_PASSING, BAD_UTF8), BATON_INVALID_UTF8,
           "`output`");
    EXPECT_REFUSED(baton_agent_check_pass(c, big, NULL));
    EXPECT_REFUSED(baton_agent_check_deregister(c, big));

    baton_service sv = baton_service_default();
    EXPECT(baton_agent_service_register(NULL, &sv), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_agent_service_register(c, NULL), BATON_NULL_ARGUMENT, "`service`");
    EXPECT(baton_agent_service_register(c, &sv), BATON_NULL_ARGUMENT, "service.name");
    sv.name = BAD_UTF8;
    EXPECT(baton_agent_service_register(c, &sv), BATON_INVALID_UTF8, "service.name");
    sv.name = "ffi-hostile";
    sv.id = BAD_UTF8;
    EXPECT(baton_agent_service_register(c, &sv), BATON_INVALID_UTF8, "service.id");
    sv.id = NULL;
    sv.address = BAD_UTF8;
    EXPECT(baton_agent_service_register(c, &sv), BATON_INVALID_UTF8, "service.address");
    sv.address = NULL;
    sv.tags_len = 3;
    EXPECT(baton_agent_service_register(c, &sv), BATON_NULL_ARGUMENT, "service.tags");
    const char *tags[] = {"a", BAD_UTF8};
    sv.tags = tags;
    sv.tags_len = 2;
    EXPECT(baton_agent_service_register(c, &sv), BATON_INVALID_UTF8, "service.tags[1]");
    sv.tags_len = HUGE_LEN;
    EXPECT(baton_agent_service_register(c, &sv), BATON_INVALID_ARGUMENT, "service.tags");
    sv.tags_len = HUGE_LEN / 8 + 1;
    EXPECT(baton_agent_service_register(c, &sv), BATON_INVALID_ARGUMENT, "service.tags");
    EXPECT(baton_agent_service_deregister(NULL, "x"), BATON_NULL_ARGUMENT, "`client`");
    free(big);
}

static void hostile_locks(baton_client *c) {
    baton_lock *l = SENTINEL;
    baton_lock_options o = baton_lock_options_default();
    EXPECT(baton_lock_new(NULL, "k", NULL, &l), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_lock_new(c, NULL, NULL, &l), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_lock_new(c, BAD_UTF8, NULL, &l), BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_lock_new(c, "k", NULL, NULL), BATON_NULL_ARGUMENT, "`lock_out`");
    o.value_len = 5;
    EXPECT(baton_lock_new(c, "k", &o, &l), BATON_NULL_ARGUMENT, "options.value");
    o.value = (const uint8_t *)"v";
    o.value_len = HUGE_LEN;
    EXPECT(baton_lock_new(c, "k", &o, &l), BATON_INVALID_ARGUMENT, "options.value");
    CHECK(l == SENTINEL);

    EXPECT(baton_lock_acquire(NULL, 0, NULL), BATON_NULL_ARGUMENT, "`lock`");
    EXPECT(baton_lock_release(NULL), BATON_NULL_ARGUMENT, "`lock`");
    CHECK(!baton_lock_is_held(NULL));
    size_t n = 0;
    EXPECT(baton_lock_value(NULL, NULL, 0, &n), BATON_NULL_ARGUMENT, "`lock`");
    EXPECT(baton_lock_set_value(NULL, NULL, 0), BATON_NULL_ARGUMENT, "`lock`");
    uint64_t token = 0;
    EXPECT(baton_lock_sequencer(NULL, NULL, 0, &n, &token), BATON_NULL_ARGUMENT, "`lock`");
    EXPECT(baton_lock_on_lost(NULL, noop_lost, NULL, NULL), BATON_NULL_ARGUMENT, "`lock`");
    EXPECT(baton_lock_wait_lost(NULL, 0, NULL, NULL, NULL), BATON_NULL_ARGUMENT, "`lock`");
    EXPECT(baton_lock_delete_key(NULL), BATON_NULL_ARGUMENT, "`lock`");
    baton_lock_free(NULL);

    /* A held lock whose value is bytes with NULs and no terminator. */
    const uint8_t bin[5] = {'x', 0, 0xff, 0, 'y'};
    o = baton_lock_options_default();
    o.value = bin;
    o.value_len = sizeof bin;
    l = NULL;
    EXPECT(baton_lock_new(c, "ffi/hostile/lock", &o, &l), BATON_OK, NULL);
    EXPECT(baton_lock_sequencer(l, NULL, 0, &n, &token), BATON_NOT_HELD, NULL);
    EXPECT(baton_lock_acquire(l, 10000, NULL), BATON_OK, NULL);
    uint8_t *exact = malloc(sizeof bin);
    EXPECT(baton_lock_value(l, exact, sizeof bin, &n), BATON_OK, NULL);
    CHECK(n == sizeof bin && memcmp(exact, bin, sizeof bin) == 0);
    EXPECT(baton_lock_value(l, exact, 0, &n), BATON_BUFFER_TOO_SMALL, NULL);
    EXPECT(baton_lock_value(l, NULL, 64, &n), BATON_NULL_ARGUMENT, "`buf`");
    free(exact);
    EXPECT(baton_lock_set_value(l, NULL, 2), BATON_NULL_ARGUMENT, "`value`");
    EXPECT(baton_lock_set_value(l, bin, HUGE_LEN), BATON_INVALID_ARGUMENT, "`value`");
    EXPECT(baton_lock_set_value(l, NULL, 0), BATON_OK, NULL);
    /* The sequencer: a size query, one byte short (ASan sees an overrun), then enough. */
    size_t need = 0;
    EXPECT(baton_lock_sequencer(l, NULL, 0, &need, NULL), BATON_BUFFER_TOO_SMALL, NULL);
    char *seq = malloc(need);
    EXPECT(baton_lock_sequencer(l, seq, need, &n, &token), BATON_BUFFER_TOO_SMALL, NULL);
    free(seq);
    seq = malloc(need + 1);
    EXPECT(baton_lock_sequencer(l, seq, need + 1, &n, &token), BATON_OK, NULL);
    CHECK(strlen(seq) == need && token > 0);
    EXPECT(baton_lock_on_lost(l, NULL, NULL, NULL), BATON_NULL_ARGUMENT, "`callback`");
    EXPECT(baton_lock_wait_lost(l, 0, NULL, NULL, NULL), BATON_TIMEOUT, NULL);

    /* Fencing with that sequencer and with hostile ones. */
    bool current = false;
    EXPECT(baton_check_sequencer(NULL, seq, &current), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_check_sequencer(c, NULL, &current), BATON_NULL_ARGUMENT, "`sequencer`");
    EXPECT(baton_check_sequencer(c, BAD_UTF8, &current), BATON_INVALID_UTF8, "`sequencer`");
    EXPECT(baton_check_sequencer(c, seq, NULL), BATON_NULL_ARGUMENT, "`current_out`");
    EXPECT(baton_check_sequencer(c, seq, &current), BATON_OK, NULL);
    CHECK(current);
    const char *bad_seqs[] = {"", "garbage", "k:1", "\x1b[2J:1:2", "a:b:c:d:e"};
    for (size_t i = 0; i < sizeof bad_seqs / sizeof bad_seqs[0]; i++)
        EXPECT(baton_check_sequencer(c, bad_seqs[i], &current), BATON_INVALID_ARGUMENT,
               "sequencer");
    char *big = long_string(MIB, '9');
    EXPECT(baton_check_sequencer(c, big, &current), BATON_INVALID_ARGUMENT, "sequencer");
    EXPECT(baton_guarded_put(NULL, seq, "k", NULL, 0), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_guarded_put(c, NULL, "k", NULL, 0), BATON_NULL_ARGUMENT, "`sequencer`");
    EXPECT(baton_guarded_put(c, seq, NULL, NULL, 0), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_guarded_put(c, seq, BAD_UTF8, NULL, 0), BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_guarded_put(c, seq, "ffi/hostile/g", NULL, 4), BATON_NULL_ARGUMENT, "`value`");
    EXPECT(baton_guarded_put(c, seq, "ffi/hostile/g", bin, HUGE_LEN), BATON_INVALID_ARGUMENT,
           "`value`");
    EXPECT(baton_guarded_put(c, "garbage", "ffi/hostile/g", bin, 1), BATON_INVALID_ARGUMENT,
           "sequencer");
    EXPECT(baton_guarded_put(c, seq, "ffi/hostile/g", bin, sizeof bin), BATON_OK, NULL);
    EXPECT_REFUSED(baton_guarded_put(c, seq, big, bin, sizeof bin));
    EXPECT(baton_guarded_delete(NULL, seq, "k"), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_guarded_delete(c, NULL, "k"), BATON_NULL_ARGUMENT, "`sequencer`");
    EXPECT(baton_guarded_delete(c, seq, NULL), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_guarded_delete(c, seq, BAD_UTF8), BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_guarded_delete(c, seq, "ffi/hostile/g"), BATON_OK, NULL);
    /* Guarded transactions: NULL arrays, too many ops, bad verbs, NULL fields. */
    baton_txn_op ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].verb = BATON_TXN_SET;
    ops[0].key = "ffi/hostile/t";
    ops[1].verb = BATON_TXN_DELETE;
    ops[1].key = "ffi/hostile/t";
    EXPECT(baton_guarded_txn(NULL, seq, ops, 2), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_guarded_txn(c, NULL, ops, 2), BATON_NULL_ARGUMENT, "`sequencer`");
    EXPECT(baton_guarded_txn(c, BAD_UTF8, ops, 2), BATON_INVALID_UTF8, "`sequencer`");
    EXPECT(baton_guarded_txn(c, "garbage", ops, 2), BATON_INVALID_ARGUMENT, "sequencer");
    EXPECT(baton_guarded_txn(c, seq, NULL, 2), BATON_NULL_ARGUMENT, "`ops`");
    EXPECT(baton_guarded_txn(c, seq, ops, HUGE_LEN), BATON_INVALID_ARGUMENT, "at most");
    EXPECT(baton_guarded_txn(c, seq, ops, 128), BATON_INVALID_ARGUMENT, "at most");
    ops[1].verb = 0;
    EXPECT(baton_guarded_txn(c, seq, ops, 2), BATON_INVALID_ARGUMENT, "ops[1].verb");
    ops[1].verb = 0xffffffffu;
    EXPECT(baton_guarded_txn(c, seq, ops, 2), BATON_INVALID_ARGUMENT, "ops[1].verb");
    ops[1].verb = BATON_TXN_DELETE;
    ops[1].key = NULL;
    EXPECT(baton_guarded_txn(c, seq, ops, 2), BATON_NULL_ARGUMENT, "ops[1].key");
    ops[1].key = BAD_UTF8;
    EXPECT(baton_guarded_txn(c, seq, ops, 2), BATON_INVALID_UTF8, "ops[1].key");
    ops[1].key = "ffi/hostile/t";
    ops[0].value_len = 3;
    EXPECT(baton_guarded_txn(c, seq, ops, 2), BATON_NULL_ARGUMENT, "ops[0].value");
    ops[0].value = bin;
    ops[0].value_len = HUGE_LEN;
    EXPECT(baton_guarded_txn(c, seq, ops, 2), BATON_INVALID_ARGUMENT, "ops[0].value");
    ops[0].value_len = sizeof bin;
    ops[1].verb = BATON_TXN_CHECK_SESSION;
    ops[1].session = NULL;
    EXPECT(baton_guarded_txn(c, seq, ops, 2), BATON_NULL_ARGUMENT, "ops[1].session");
    ops[1].session = BAD_UTF8;
    EXPECT(baton_guarded_txn(c, seq, ops, 2), BATON_INVALID_UTF8, "ops[1].session");
    ops[1].verb = BATON_TXN_DELETE;
    EXPECT(baton_guarded_txn(c, seq, ops, 2), BATON_OK, NULL);
    EXPECT(baton_guarded_txn(c, seq, ops, 0), BATON_OK, NULL);
    ops[0].key = big;
    EXPECT_REFUSED(baton_guarded_txn(c, seq, ops, 1));
    free(seq);

    EXPECT(baton_lock_release(l), BATON_OK, NULL);
    EXPECT(baton_lock_release(l), BATON_NOT_HELD, NULL);
    EXPECT(baton_lock_delete_key(l), BATON_OK, NULL);
    baton_lock_free(l);

    /* A lock on a key of 1 MiB: made (no request), refused when acquired. */
    l = NULL;
    EXPECT(baton_lock_new(c, big, NULL, &l), BATON_OK, NULL);
    EXPECT_REFUSED(baton_lock_acquire(l, 2000, NULL));
    CHECK(!baton_lock_is_held(l));
    baton_lock_free(l);
    free(big);
}

static void hostile_semaphores(baton_client *c) {
    baton_semaphore *m = SENTINEL;
    baton_semaphore_options o = baton_semaphore_options_default();
    EXPECT(baton_semaphore_new(NULL, "p", 2, NULL, &m), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_semaphore_new(c, NULL, 2, NULL, &m), BATON_NULL_ARGUMENT, "`prefix`");
    EXPECT(baton_semaphore_new(c, BAD_UTF8, 2, NULL, &m), BATON_INVALID_UTF8, "`prefix`");
    EXPECT(baton_semaphore_new(c, "p", 2, NULL, NULL), BATON_NULL_ARGUMENT, "`semaphore_out`");
    EXPECT(baton_semaphore_new(c, "p", 0, NULL, &m), BATON_INVALID_ARGUMENT, "limit");
    o.value_len = 1;
    EXPECT(baton_semaphore_new(c, "p", 2, &o, &m), BATON_NULL_ARGUMENT, "options.value");
    o.value = (const uint8_t *)"v";
    o.value_len = HUGE_LEN;
    EXPECT(baton_semaphore_new(c, "p", 2, &o, &m), BATON_INVALID_ARGUMENT, "options.value");
    CHECK(m == SENTINEL);
    EXPECT(baton_semaphore_acquire(NULL, 0, NULL), BATON_NULL_ARGUMENT, "`semaphore`");
    EXPECT(baton_semaphore_release(NULL), BATON_NULL_ARGUMENT, "`semaphore`");
    CHECK(!baton_semaphore_is_held(NULL));
    EXPECT(baton_semaphore_on_lost(NULL, noop_lost, NULL, NULL), BATON_NULL_ARGUMENT,
           "`semaphore`");
    EXPECT(baton_semaphore_wait_lost(NULL, 0, NULL, NULL, NULL), BATON_NULL_ARGUMENT,
           "`semaphore`");
    EXPECT(baton_semaphore_delete_key(NULL), BATON_NULL_ARGUMENT, "`semaphore`");
    baton_semaphore_free(NULL);

    /* A contender value with NULs and no terminator; a broken `.lock` written by someone
     * else is a BATON_BAD_RESPONSE naming the key. */
    const uint8_t bin[3] = {0, 0xff, 0};
    o = baton_semaphore_options_default();
    o.value = bin;
    o.value_len = sizeof bin;
    m = NULL;
    EXPECT(baton_semaphore_new(c, "ffi/hostile/sem", 2, &o, &m), BATON_OK, NULL);
    EXPECT(baton_semaphore_on_lost(m, NULL, NULL, NULL), BATON_NULL_ARGUMENT, "`callback`");
    EXPECT(baton_semaphore_acquire(m, 10000, NULL), BATON_OK, NULL);
    EXPECT(baton_semaphore_release(m), BATON_OK, NULL);
    EXPECT(baton_kv_put(c, "ffi/hostile/sem/.lock", (const uint8_t *)"{\"Limit\":\"x\"}", 13),
           BATON_OK, NULL);
    /* (flags 0 on .lock: the flag conflict comes first) */
    EXPECT(baton_semaphore_acquire(m, 2000, NULL), BATON_CONFLICT, "semaphore use");
    EXPECT(baton_semaphore_delete_key(m), BATON_CONFLICT, NULL);
    EXPECT(baton_kv_delete(c, "ffi/hostile/sem/.lock"), BATON_OK, NULL);
    baton_semaphore_free(m);
}

static void hostile_elections(baton_client *c) {
    baton_election *e = SENTINEL;
    EXPECT(baton_election_new(NULL, "k", NULL, &e), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_election_new(c, NULL, NULL, &e), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_election_new(c, BAD_UTF8, NULL, &e), BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_election_new(c, "k", NULL, NULL), BATON_NULL_ARGUMENT, "`election_out`");
    baton_election_options eo = baton_election_options_default();
    EXPECT(baton_election_new_with(NULL, "k", &eo, &e), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_election_new_with(c, NULL, &eo, &e), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_election_new_with(c, BAD_UTF8, &eo, &e), BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_election_new_with(c, "k", &eo, NULL), BATON_NULL_ARGUMENT, "`election_out`");
    EXPECT(baton_election_new_with(c, "//k", NULL, &e), BATON_INVALID_ARGUMENT, "'/'");
    CHECK(e == SENTINEL);
    EXPECT(baton_election_campaign(NULL, NULL, 0, 0, NULL), BATON_NULL_ARGUMENT, "`election`");
    EXPECT(baton_election_resign(NULL), BATON_NULL_ARGUMENT, "`election`");
    EXPECT(baton_election_proclaim(NULL, NULL, 0), BATON_NULL_ARGUMENT, "`election`");
    CHECK(!baton_election_is_leader(NULL));
    size_t n = 0;
    uint64_t token = 0;
    EXPECT(baton_election_sequencer(NULL, NULL, 0, &n, &token), BATON_NULL_ARGUMENT,
           "`election`");
    EXPECT(baton_election_on_lost(NULL, noop_lost, NULL, NULL), BATON_NULL_ARGUMENT,
           "`election`");
    EXPECT(baton_election_wait_lost(NULL, 0, NULL, NULL, NULL), BATON_NULL_ARGUMENT,
           "`election`");
    baton_election_free(NULL);

    baton_leader ld;
    uint8_t vb[8];
    EXPECT(baton_election_leader(NULL, "k", &ld, vb, sizeof vb), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_election_leader(c, NULL, &ld, vb, sizeof vb), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_election_leader(c, BAD_UTF8, &ld, vb, sizeof vb), BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_election_leader(c, "k", NULL, vb, sizeof vb), BATON_NULL_ARGUMENT,
           "`leader_out`");
    baton_observer *ob = SENTINEL;
    EXPECT(baton_election_observe(NULL, "k", noop_observe, NULL, NULL, &ob), BATON_NULL_ARGUMENT,
           "`client`");
    EXPECT(baton_election_observe(c, NULL, noop_observe, NULL, NULL, &ob), BATON_NULL_ARGUMENT,
           "`key`");
    EXPECT(baton_election_observe(c, BAD_UTF8, noop_observe, NULL, NULL, &ob), BATON_INVALID_UTF8,
           "`key`");
    EXPECT(baton_election_observe(c, "k", NULL, NULL, NULL, &ob), BATON_NULL_ARGUMENT,
           "`callback`");
    EXPECT(baton_election_observe(c, "k", noop_observe, NULL, NULL, NULL), BATON_NULL_ARGUMENT,
           "`observer_out`");
    CHECK(ob == SENTINEL);
    baton_observer_free(NULL);

    /* A leader whose value is binary and longer than the caller's buffer. */
    e = NULL;
    EXPECT(baton_election_new(c, "ffi/hostile/elect", NULL, &e), BATON_OK, NULL);
    EXPECT(baton_election_campaign(e, NULL, 4, 0, NULL), BATON_NULL_ARGUMENT, "`value`");
    const uint8_t bin[12] = {0, 1, 2, 0, 0xff, 0xfe, 0, 7, 8, 9, 10, 0};
    EXPECT(baton_election_campaign(e, bin, HUGE_LEN, 0, NULL), BATON_INVALID_ARGUMENT, "`value`");
    EXPECT(baton_election_campaign(e, bin, sizeof bin, 10000, NULL), BATON_OK, NULL);
    EXPECT(baton_election_proclaim(e, NULL, 1), BATON_NULL_ARGUMENT, "`value`");
    EXPECT(baton_election_proclaim(e, bin, HUGE_LEN), BATON_INVALID_ARGUMENT, "`value`");
    EXPECT(baton_election_on_lost(e, NULL, NULL, NULL), BATON_NULL_ARGUMENT, "`callback`");
    /* A buffer too small, or none: the length is still reported. */
    memset(&ld, 0xaa, sizeof ld);
    EXPECT(baton_election_leader(c, "ffi/hostile/elect", &ld, vb, sizeof vb),
           BATON_BUFFER_TOO_SMALL, "value has 12");
    CHECK(ld.value_len == sizeof bin);
    EXPECT(baton_election_leader(c, "ffi/hostile/elect", &ld, NULL, 0), BATON_BUFFER_TOO_SMALL,
           NULL);
    CHECK(ld.value_len == sizeof bin);
    EXPECT(baton_election_leader(c, "ffi/hostile/elect", &ld, NULL, 64), BATON_NULL_ARGUMENT,
           NULL);
    uint8_t *exact = malloc(sizeof bin);
    EXPECT(baton_election_leader(c, "ffi/hostile/elect", &ld, exact, sizeof bin), BATON_OK, NULL);
    CHECK(ld.has_leader && strlen(ld.session) == 36);
    CHECK(ld.value_len == sizeof bin && memcmp(ld.value, bin, sizeof bin) == 0);
    free(exact);
    size_t need = 0;
    EXPECT(baton_election_sequencer(e, NULL, 0, &need, NULL), BATON_BUFFER_TOO_SMALL, NULL);
    char *seq = malloc(need);
    EXPECT(baton_election_sequencer(e, seq, need, &n, &token), BATON_BUFFER_TOO_SMALL, NULL);
    free(seq);
    EXPECT(baton_election_resign(e), BATON_OK, NULL);
    baton_election_free(e);
}

/* Handles that outlive their client stay valid (the one freed-handle case that can be tested
 * without undefined behaviour): freeing the client closes it, so its lock is released and
 * its session destroyed; calls that need the client return BATON_CLOSED, local queries
 * answer what is true now (not held, no time left). */
static void hostile_outlived_client(void) {
    baton_client *h = NULL;
    EXPECT(baton_client_new_from_env(&h), BATON_OK, NULL);
    if (!h) return;
    baton_session *s = NULL;
    baton_lock *l = NULL;
    baton_semaphore *m = NULL;
    baton_election *e = NULL;
    baton_cancel *cn = NULL;
    EXPECT(baton_session_create(h, NULL, &s), BATON_OK, NULL);
    EXPECT(baton_lock_new(h, "ffi/hostile/outlived/lock", NULL, &l), BATON_OK, NULL);
    EXPECT(baton_semaphore_new(h, "ffi/hostile/outlived/sem", 1, NULL, &m), BATON_OK, NULL);
    EXPECT(baton_election_new(h, "ffi/hostile/outlived/elect", NULL, &e), BATON_OK, NULL);
    EXPECT(baton_cancel_new(&cn), BATON_OK, NULL);
    EXPECT(baton_lock_acquire(l, 10000, cn), BATON_OK, NULL);
    baton_client_free(h);

    char id[BATON_SESSION_ID_SIZE];
    uint64_t left = 0;
    size_t n = 0;
    uint64_t token = 0;
    CHECK(!baton_session_is_valid(s));
    EXPECT(baton_session_id(s, id, sizeof id, NULL), BATON_OK, NULL);
    left = 1;
    EXPECT(baton_session_time_left_ms(s, &left), BATON_OK, NULL);
    CHECK(left == 0);
    EXPECT(baton_session_destroy(s), BATON_CLOSED, NULL);
    /* Registered, never run (session_free frees it). */
    EXPECT(baton_session_on_event(s, noop_event, NULL, NULL), BATON_OK, NULL);
    CHECK(!baton_lock_is_held(l));
    EXPECT(baton_lock_acquire(l, 0, NULL), BATON_CLOSED, "closed");
    EXPECT(baton_lock_release(l), BATON_NOT_HELD, NULL);
    EXPECT(baton_lock_sequencer(l, NULL, 0, &n, &token), BATON_NOT_HELD, NULL);
    EXPECT(baton_lock_delete_key(l), BATON_CLOSED, "closed");
    EXPECT(baton_semaphore_acquire(m, 0, NULL), BATON_CLOSED, "closed");
    EXPECT(baton_semaphore_delete_key(m), BATON_CLOSED, "closed");
    EXPECT(baton_election_campaign(e, NULL, 0, 0, NULL), BATON_CLOSED, "closed");
    EXPECT(baton_election_proclaim(e, NULL, 0), BATON_NOT_HELD, NULL);
    CHECK(!baton_election_is_leader(e));
    baton_session_free(s);
    baton_lock_free(l);
    baton_semaphore_free(m);
    baton_election_free(e);
    baton_cancel_free(cn);
}

/* ---- read-write and multi-key locks, leader tasks, groups, barriers, counters ---------- */

static void hostile_rwlocks(baton_client *c) {
    baton_rwlock *l = SENTINEL;
    EXPECT(baton_rwlock_new(NULL, "p", BATON_RW_READ, &l), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_rwlock_new(c, NULL, BATON_RW_READ, &l), BATON_NULL_ARGUMENT, "`prefix`");
    EXPECT(baton_rwlock_new(c, BAD_UTF8, BATON_RW_READ, &l), BATON_INVALID_UTF8, "`prefix`");
    EXPECT(baton_rwlock_new(c, "", BATON_RW_WRITE, &l), BATON_INVALID_ARGUMENT, NULL);
    EXPECT(baton_rwlock_new(c, "/", BATON_RW_WRITE, &l), BATON_INVALID_ARGUMENT, NULL);
    EXPECT(baton_rwlock_new(c, "p", 0, &l), BATON_INVALID_ARGUMENT, "mode 0");
    EXPECT(baton_rwlock_new(c, "p", 3, &l), BATON_INVALID_ARGUMENT, "BATON_RW_READ");
    EXPECT(baton_rwlock_new(c, "p", BATON_RW_READ, NULL), BATON_NULL_ARGUMENT, "`rwlock_out`");
    CHECK(l == SENTINEL);
    /* A prefix of 1 MiB is taken (no request is made). Not acquired here: the core's
     * refused acquire leaves a clean-up of its contender key that can never be sent, so
     * the client's close would time out (reported to the core's owner). */
    char *big = long_string(MIB, 'r');
    baton_rwlock *bl = NULL;
    EXPECT(baton_rwlock_new(c, big, BATON_RW_READ, &bl), BATON_OK, NULL);
    free(big);
    CHECK(!baton_rwlock_is_held(bl));
    baton_rwlock_free(bl);
    EXPECT(baton_rwlock_acquire(NULL, 0, NULL), BATON_NULL_ARGUMENT, "`rwlock`");
    EXPECT(baton_rwlock_release(NULL), BATON_NULL_ARGUMENT, "`rwlock`");
    CHECK(!baton_rwlock_is_held(NULL));
    size_t n = 0;
    uint64_t token = 0;
    EXPECT(baton_rwlock_sequencer(NULL, NULL, 0, &n, &token), BATON_NULL_ARGUMENT, "`rwlock`");
    EXPECT(baton_rwlock_on_lost(NULL, noop_lost, NULL, NULL), BATON_NULL_ARGUMENT, "`rwlock`");
    EXPECT(baton_rwlock_wait_lost(NULL, 0, NULL, NULL, NULL), BATON_NULL_ARGUMENT, "`rwlock`");
    baton_rwlock_free(NULL);
    l = NULL;
    EXPECT(baton_rwlock_new(c, "ffi/hostile/rw", BATON_RW_WRITE, &l), BATON_OK, NULL);
    if (!l) return;
    EXPECT(baton_rwlock_on_lost(l, NULL, NULL, NULL), BATON_NULL_ARGUMENT, "`callback`");
    EXPECT(baton_rwlock_sequencer(l, NULL, 0, &n, NULL), BATON_NOT_HELD, "no sequencer");
    EXPECT(baton_rwlock_release(l), BATON_NOT_HELD, "not held");
    EXPECT(baton_rwlock_wait_lost(l, 0, NULL, NULL, NULL), BATON_OK, NULL);
    EXPECT(baton_rwlock_acquire(l, UINT64_MAX - 1, NULL), BATON_OK, NULL);
    /* A size query, an exact-size buffer (no room for the NUL), then exactly enough. */
    EXPECT(baton_rwlock_sequencer(l, NULL, 0, &n, &token), BATON_BUFFER_TOO_SMALL, "needed");
    char *exact = malloc(n);
    EXPECT(baton_rwlock_sequencer(l, exact, n, NULL, NULL), BATON_BUFFER_TOO_SMALL, "needed");
    free(exact);
    exact = malloc(n + 1);
    EXPECT(baton_rwlock_sequencer(l, exact, n + 1, NULL, NULL), BATON_OK, NULL);
    CHECK(strlen(exact) == n);
    free(exact);
    EXPECT(baton_rwlock_sequencer(l, NULL, n + 1, NULL, NULL), BATON_NULL_ARGUMENT, "`buf`");
    baton_rwlock_free(l); /* releases */
}

static void hostile_multilocks(baton_client *c) {
    baton_multilock *m = SENTINEL;
    const char *keys[] = {"ffi/hostile/ml/a", "ffi/hostile/ml/b"};
    const char *bad[] = {"ffi/hostile/ml/a", BAD_UTF8};
    const char *nulls[] = {"ffi/hostile/ml/a", NULL};
    const char *empty[] = {""};
    baton_multilock_options o = baton_multilock_options_default();
    EXPECT(baton_multilock_new(NULL, keys, 2, NULL, &m), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_multilock_new(c, NULL, 2, NULL, &m), BATON_NULL_ARGUMENT, "`keys`");
    EXPECT(baton_multilock_new(c, NULL, 0, NULL, &m), BATON_NULL_ARGUMENT, "`keys`");
    EXPECT(baton_multilock_new(c, keys, 0, NULL, &m), BATON_INVALID_ARGUMENT, NULL);
    EXPECT(baton_multilock_new(c, bad, 2, NULL, &m), BATON_INVALID_UTF8, "keys[1]");
    EXPECT(baton_multilock_new(c, nulls, 2, NULL, &m), BATON_NULL_ARGUMENT, "keys[1]");
    EXPECT(baton_multilock_new(c, empty, 1, NULL, &m), BATON_INVALID_ARGUMENT, "keys[0]");
    EXPECT(baton_multilock_new(c, keys, HUGE_LEN, NULL, &m), BATON_INVALID_ARGUMENT, "`keys`");
    EXPECT(baton_multilock_new(c, keys, 2, NULL, NULL), BATON_NULL_ARGUMENT, "`multilock_out`");
    o.value_len = 3;
    EXPECT(baton_multilock_new(c, keys, 2, &o, &m), BATON_NULL_ARGUMENT, "options.value");
    o.value = (const uint8_t *)"v";
    o.value_len = HUGE_LEN;
    EXPECT(baton_multilock_new(c, keys, 2, &o, &m), BATON_INVALID_ARGUMENT, "options.value");
    const char *many[65];
    char names[65][32];
    for (int i = 0; i < 65; i++) {
        snprintf(names[i], sizeof names[i], "ffi/hostile/ml/k%d", i);
        many[i] = names[i];
    }
    EXPECT(baton_multilock_new(c, many, 65, NULL, &m), BATON_INVALID_ARGUMENT, NULL);
    CHECK(m == SENTINEL);
    EXPECT(baton_multilock_acquire(NULL, 0, NULL), BATON_NULL_ARGUMENT, "`multilock`");
    EXPECT(baton_multilock_release(NULL), BATON_NULL_ARGUMENT, "`multilock`");
    CHECK(!baton_multilock_is_held(NULL));
    CHECK(baton_multilock_key_count(NULL) == 0);
    size_t n = 0;
    uint64_t token = 0;
    EXPECT(baton_multilock_key(NULL, 0, NULL, 0, &n), BATON_NULL_ARGUMENT, "`multilock`");
    EXPECT(baton_multilock_sequencer(NULL, NULL, 0, &n, &token), BATON_NULL_ARGUMENT,
           "`multilock`");
    EXPECT(baton_multilock_sequencer_at(NULL, 0, NULL, 0, &n, &token), BATON_NULL_ARGUMENT,
           "`multilock`");
    EXPECT(baton_multilock_on_lost(NULL, noop_lost, NULL, NULL), BATON_NULL_ARGUMENT,
           "`multilock`");
    EXPECT(baton_multilock_wait_lost(NULL, 0, NULL, NULL, NULL), BATON_NULL_ARGUMENT,
           "`multilock`");
    baton_multilock_free(NULL);
    m = NULL;
    EXPECT(baton_multilock_new(c, keys, 2, NULL, &m), BATON_OK, NULL);
    if (!m) return;
    EXPECT(baton_multilock_on_lost(m, NULL, NULL, NULL), BATON_NULL_ARGUMENT, "`callback`");
    EXPECT(baton_multilock_key(m, 2, NULL, 0, &n), BATON_INVALID_ARGUMENT, "index 2");
    EXPECT(baton_multilock_key(m, SIZE_MAX, NULL, 0, &n), BATON_INVALID_ARGUMENT, "index");
    EXPECT(baton_multilock_key(m, 0, NULL, 0, &n), BATON_BUFFER_TOO_SMALL, "needed");
    CHECK(n == strlen(keys[0]));
    char *exact = malloc(n + 1);
    EXPECT(baton_multilock_key(m, 0, exact, n, NULL), BATON_BUFFER_TOO_SMALL, "needed");
    EXPECT(baton_multilock_key(m, 0, exact, n + 1, NULL), BATON_OK, NULL);
    CHECK(strcmp(exact, keys[0]) == 0);
    free(exact);
    EXPECT(baton_multilock_sequencer(m, NULL, 0, &n, NULL), BATON_NOT_HELD, "no sequencer");
    EXPECT(baton_multilock_sequencer_at(m, 0, NULL, 0, &n, NULL), BATON_NOT_HELD, NULL);
    EXPECT(baton_multilock_sequencer_at(m, 5, NULL, 0, &n, NULL), BATON_INVALID_ARGUMENT,
           "index 5");
    EXPECT(baton_multilock_release(m), BATON_NOT_HELD, "not held");
    EXPECT(baton_multilock_wait_lost(m, 0, NULL, NULL, NULL), BATON_OK, NULL);
    EXPECT(baton_multilock_acquire(m, 10000, NULL), BATON_OK, NULL);
    EXPECT(baton_multilock_sequencer_at(m, 1, NULL, 0, &n, &token), BATON_BUFFER_TOO_SMALL,
           "needed");
    CHECK(token > 0 && n > strlen(keys[1]));
    EXPECT(baton_multilock_sequencer(m, NULL, n + 1, NULL, NULL), BATON_NULL_ARGUMENT, "`buf`");
    baton_multilock_free(m); /* releases */
}

static int hostile_task(const baton_cancel *token, void *userdata) {
    (void)token;
    (void)userdata;
    return 0;
}

static void hostile_leader_tasks(baton_client *c) {
    baton_leader_task *t = SENTINEL;
    baton_leader_task_options o = baton_leader_task_options_default();
    EXPECT(baton_leader_task_new(NULL, "k", NULL, 0, NULL, &t), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_leader_task_new(c, NULL, NULL, 0, NULL, &t), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_leader_task_new(c, BAD_UTF8, NULL, 0, NULL, &t), BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_leader_task_new(c, "", NULL, 0, NULL, &t), BATON_INVALID_ARGUMENT, NULL);
    EXPECT(baton_leader_task_new(c, "k", NULL, 4, NULL, &t), BATON_NULL_ARGUMENT, "`value`");
    EXPECT(baton_leader_task_new(c, "k", (const uint8_t *)"v", HUGE_LEN, NULL, &t),
           BATON_INVALID_ARGUMENT, "`value`");
    EXPECT(baton_leader_task_new(c, "k", NULL, 0, NULL, NULL), BATON_NULL_ARGUMENT,
           "`leader_task_out`");
    o.requeue_delay_ms = UINT64_MAX;
    EXPECT(baton_leader_task_new(c, "k", NULL, 0, &o, &t), BATON_INVALID_ARGUMENT,
           "requeue_delay_ms");
    CHECK(t == SENTINEL);
    EXPECT(baton_leader_task_run(NULL, hostile_task, NULL, NULL), BATON_NULL_ARGUMENT,
           "`leader_task`");
    CHECK(!baton_leader_task_is_leader(NULL));
    size_t n = 0;
    EXPECT(baton_leader_task_sequencer(NULL, NULL, 0, &n, NULL), BATON_NULL_ARGUMENT,
           "`leader_task`");
    baton_leader_task_free(NULL);
    CHECK(strcmp(baton_stop_reason_name(0), "unknown") == 0);
    CHECK(strcmp(baton_stop_reason_name(0xffffffffu), "unknown") == 0);
    CHECK(strcmp(baton_stop_reason_name(BATON_STOP_STOPPED), "stopped") == 0);
    /* A binary value with NULs, no terminator. */
    const uint8_t bin[3] = {0, 0xff, 0};
    o = baton_leader_task_options_default();
    o.requeue = false;
    t = NULL;
    EXPECT(baton_leader_task_new(c, "ffi/hostile/leader", bin, sizeof bin, &o, &t), BATON_OK,
           NULL);
    if (!t) return;
    EXPECT(baton_leader_task_run(t, NULL, NULL, NULL), BATON_NULL_ARGUMENT, "`task_fn`");
    EXPECT(baton_leader_task_sequencer(t, NULL, 0, &n, NULL), BATON_NOT_HELD, "no sequencer");
    EXPECT(baton_leader_task_run(t, hostile_task, NULL, NULL), BATON_OK, NULL);
    baton_leader_task_free(t);
}

static void hostile_groups(baton_client *c) {
    baton_group *g = SENTINEL;
    EXPECT(baton_group_new(NULL, "g", &g), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_group_new(c, NULL, &g), BATON_NULL_ARGUMENT, "`prefix`");
    EXPECT(baton_group_new(c, BAD_UTF8, &g), BATON_INVALID_UTF8, "`prefix`");
    EXPECT(baton_group_new(c, "", &g), BATON_INVALID_ARGUMENT, NULL);
    EXPECT(baton_group_new(c, "g", NULL), BATON_NULL_ARGUMENT, "`group_out`");
    CHECK(g == SENTINEL);
    baton_member *m = SENTINEL;
    baton_member_info *ms = SENTINEL;
    size_t count = 0, n = 0;
    baton_members_watch *w = SENTINEL;
    baton_membership_event *ev = SENTINEL;
    EXPECT(baton_group_join(NULL, "id", NULL, 0, NULL, &m), BATON_NULL_ARGUMENT, "`group`");
    EXPECT(baton_group_members(NULL, &ms, &count), BATON_NULL_ARGUMENT, "`group`");
    EXPECT(baton_group_watch(NULL, &w), BATON_NULL_ARGUMENT, "`group`");
    EXPECT(baton_members_watch_next(NULL, 0, NULL, &ev), BATON_NULL_ARGUMENT, "`watch`");
    EXPECT(baton_member_leave(NULL), BATON_NULL_ARGUMENT, "`member`");
    CHECK(!baton_member_is_member(NULL));
    EXPECT(baton_member_update_value(NULL, NULL, 0), BATON_NULL_ARGUMENT, "`member`");
    EXPECT(baton_member_key(NULL, NULL, 0, &n), BATON_NULL_ARGUMENT, "`member`");
    EXPECT(baton_member_wait_lost(NULL, 0, NULL, NULL, NULL), BATON_NULL_ARGUMENT, "`member`");
    CHECK(strcmp(baton_member_lost_name(0), "unknown") == 0);
    CHECK(strcmp(baton_member_lost_name(BATON_MEMBER_SESSION_LOST), "session_lost") == 0);
    baton_member_free(NULL);
    baton_members_free(NULL, 0);
    baton_members_free(NULL, 5);
    baton_membership_event_free(NULL);
    baton_members_watch_free(NULL);
    baton_group_free(NULL);
    CHECK(m == SENTINEL && ms == SENTINEL && w == SENTINEL && ev == SENTINEL);

    g = NULL;
    EXPECT(baton_group_new(c, "ffi/hostile/group", &g), BATON_OK, NULL);
    if (!g) return;
    EXPECT(baton_group_join(g, NULL, NULL, 0, NULL, &m), BATON_NULL_ARGUMENT, "`id`");
    EXPECT(baton_group_join(g, BAD_UTF8, NULL, 0, NULL, &m), BATON_INVALID_UTF8, "`id`");
    EXPECT(baton_group_join(g, "", NULL, 0, NULL, &m), BATON_INVALID_ARGUMENT, "empty");
    EXPECT(baton_group_join(g, "a/b", NULL, 0, NULL, &m), BATON_INVALID_ARGUMENT, "'/'");
    EXPECT(baton_group_join(g, "..", NULL, 0, NULL, &m), BATON_INVALID_ARGUMENT, "'..'");
    char *big = long_string(MIB, 'i');
    EXPECT(baton_group_join(g, big, NULL, 0, NULL, &m), BATON_INVALID_ARGUMENT, NULL);
    free(big);
    big = long_string(257, 'i');
    EXPECT(baton_group_join(g, big, NULL, 0, NULL, &m), BATON_INVALID_ARGUMENT, "longer");
    free(big);
    EXPECT(baton_group_join(g, "id", NULL, 2, NULL, &m), BATON_NULL_ARGUMENT, "`value`");
    EXPECT(baton_group_join(g, "id", (const uint8_t *)"v", HUGE_LEN, NULL, &m),
           BATON_INVALID_ARGUMENT, "`value`");
    EXPECT(baton_group_join(g, "id", NULL, 0, NULL, NULL), BATON_NULL_ARGUMENT, "`member_out`");
    CHECK(m == SENTINEL);
    EXPECT(baton_group_members(g, NULL, &count), BATON_NULL_ARGUMENT, "`members_out`");
    EXPECT(baton_group_members(g, &ms, NULL), BATON_NULL_ARGUMENT, "`count_out`");
    EXPECT(baton_group_watch(g, NULL), BATON_NULL_ARGUMENT, "`watch_out`");
    /* A member whose value has NULs; its key through a size query and an exact buffer. */
    const uint8_t bin[4] = {'a', 0, 0xff, 0};
    m = NULL;
    EXPECT(baton_group_join(g, "m", bin, sizeof bin, NULL, &m), BATON_OK, NULL);
    if (!m) return;
    EXPECT(baton_member_update_value(m, NULL, 1), BATON_NULL_ARGUMENT, "`value`");
    EXPECT(baton_member_key(m, NULL, 0, &n), BATON_BUFFER_TOO_SMALL, "needed");
    char *exact = malloc(n + 1);
    EXPECT(baton_member_key(m, exact, n, NULL), BATON_BUFFER_TOO_SMALL, "needed");
    EXPECT(baton_member_key(m, exact, n + 1, NULL), BATON_OK, NULL);
    CHECK(strcmp(exact, "ffi/hostile/group/m") == 0);
    free(exact);
    EXPECT(baton_member_key(m, NULL, n + 1, NULL), BATON_NULL_ARGUMENT, "`buf`");
    ms = NULL;
    EXPECT(baton_group_members(g, &ms, &count), BATON_OK, NULL);
    CHECK(count == 1 && ms && ms[0].value_len == 4 && memcmp(ms[0].value, bin, 4) == 0);
    baton_members_free(ms, count);
    w = NULL;
    EXPECT(baton_group_watch(g, &w), BATON_OK, NULL);
    EXPECT(baton_members_watch_next(w, 0, NULL, NULL), BATON_NULL_ARGUMENT, "`event_out`");
    ev = NULL;
    EXPECT(baton_members_watch_next(w, 10000, NULL, &ev), BATON_OK, NULL);
    CHECK(ev && ev->kind == BATON_MEMBERSHIP_SNAPSHOT && ev->members_len == 1 &&
          ev->id && ev->id[0] == '\0');
    baton_membership_event_free(ev);
    baton_members_watch_free(w);
    baton_member_free(m);
    baton_group_free(g);
}

static void hostile_barriers(baton_client *c) {
    baton_barrier *b = SENTINEL;
    bool flag = false;
    EXPECT(baton_barrier_new(NULL, "k", &b), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_barrier_new(c, NULL, &b), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_barrier_new(c, BAD_UTF8, &b), BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_barrier_new(c, "", &b), BATON_INVALID_ARGUMENT, NULL);
    EXPECT(baton_barrier_new(c, "k", NULL), BATON_NULL_ARGUMENT, "`barrier_out`");
    CHECK(b == SENTINEL);
    EXPECT(baton_barrier_hold(NULL, NULL, &flag), BATON_NULL_ARGUMENT, "`barrier`");
    EXPECT(baton_barrier_release(NULL, &flag), BATON_NULL_ARGUMENT, "`barrier`");
    EXPECT(baton_barrier_is_held(NULL, &flag), BATON_NULL_ARGUMENT, "`barrier`");
    EXPECT(baton_barrier_wait(NULL, 0, NULL), BATON_NULL_ARGUMENT, "`barrier`");
    baton_barrier_free(NULL);
    b = NULL;
    EXPECT(baton_barrier_new(c, "ffi/hostile/barrier", &b), BATON_OK, NULL);
    if (!b) return;
    EXPECT(baton_barrier_is_held(b, NULL), BATON_NULL_ARGUMENT, "`held_out`");
    EXPECT(baton_barrier_wait(b, UINT64_MAX - 1, NULL), BATON_OK, NULL); /* not up */
    EXPECT(baton_barrier_hold(b, NULL, NULL), BATON_OK, NULL);
    EXPECT(baton_barrier_release(b, NULL), BATON_OK, NULL);
    baton_barrier_free(b);

    baton_double_barrier *d = SENTINEL;
    EXPECT(baton_double_barrier_new(NULL, "p", 2, NULL, &d), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_double_barrier_new(c, NULL, 2, NULL, &d), BATON_NULL_ARGUMENT, "`prefix`");
    EXPECT(baton_double_barrier_new(c, BAD_UTF8, 2, NULL, &d), BATON_INVALID_UTF8, "`prefix`");
    EXPECT(baton_double_barrier_new(c, "", 2, NULL, &d), BATON_INVALID_ARGUMENT, NULL);
    EXPECT(baton_double_barrier_new(c, "p", 0, NULL, &d), BATON_INVALID_ARGUMENT, "count");
    EXPECT(baton_double_barrier_new(c, "p", 127, NULL, &d), BATON_INVALID_ARGUMENT, "count");
    EXPECT(baton_double_barrier_new(c, "p", SIZE_MAX, NULL, &d), BATON_INVALID_ARGUMENT,
           "count");
    EXPECT(baton_double_barrier_new(c, "p", 2, NULL, NULL), BATON_NULL_ARGUMENT,
           "`double_barrier_out`");
    CHECK(d == SENTINEL);
    EXPECT(baton_double_barrier_enter(NULL, 0, NULL), BATON_NULL_ARGUMENT, "`double_barrier`");
    EXPECT(baton_double_barrier_leave(NULL, 0, NULL), BATON_NULL_ARGUMENT, "`double_barrier`");
    CHECK(!baton_double_barrier_is_entered(NULL));
    baton_double_barrier_free(NULL);
    d = NULL;
    EXPECT(baton_double_barrier_new(c, "ffi/hostile/double", 1, NULL, &d), BATON_OK, NULL);
    if (!d) return;
    EXPECT(baton_double_barrier_leave(d, 0, NULL), BATON_CONFLICT, NULL);
    EXPECT(baton_double_barrier_enter(d, UINT64_MAX - 1, NULL), BATON_OK, NULL);
    CHECK(baton_double_barrier_is_entered(d));
    baton_double_barrier_free(d); /* entered, not left: its key is removed */
}

static void hostile_counters(baton_client *c) {
    baton_counter *k = SENTINEL;
    int64_t v = 0;
    bool swapped = false;
    EXPECT(baton_counter_new(NULL, "k", &k), BATON_NULL_ARGUMENT, "`client`");
    EXPECT(baton_counter_new(c, NULL, &k), BATON_NULL_ARGUMENT, "`key`");
    EXPECT(baton_counter_new(c, BAD_UTF8, &k), BATON_INVALID_UTF8, "`key`");
    EXPECT(baton_counter_new(c, "", &k), BATON_INVALID_ARGUMENT, NULL);
    EXPECT(baton_counter_new(c, "k", NULL), BATON_NULL_ARGUMENT, "`counter_out`");
    CHECK(k == SENTINEL);
    EXPECT(baton_counter_get(NULL, &v, NULL), BATON_NULL_ARGUMENT, "`counter`");
    EXPECT(baton_counter_set(NULL, 1), BATON_NULL_ARGUMENT, "`counter`");
    EXPECT(baton_counter_add(NULL, 1, &v), BATON_NULL_ARGUMENT, "`counter`");
    EXPECT(baton_counter_compare_and_set(NULL, 0, 1, &swapped), BATON_NULL_ARGUMENT,
           "`counter`");
    baton_counter_watch *w = SENTINEL;
    EXPECT(baton_counter_watch_new(NULL, &w), BATON_NULL_ARGUMENT, "`counter`");
    EXPECT(baton_counter_watch_next(NULL, 0, NULL, &v), BATON_NULL_ARGUMENT, "`watch`");
    CHECK(w == SENTINEL);
    baton_counter_watch_free(NULL);
    baton_counter_free(NULL);
    k = NULL;
    EXPECT(baton_counter_new(c, "ffi/hostile/counter", &k), BATON_OK, NULL);
    if (!k) return;
    EXPECT(baton_counter_get(k, NULL, NULL), BATON_NULL_ARGUMENT, "`value_out`");
    EXPECT(baton_counter_compare_and_set(k, 0, 1, NULL), BATON_NULL_ARGUMENT, "`swapped_out`");
    EXPECT(baton_counter_watch_new(k, NULL), BATON_NULL_ARGUMENT, "`watch_out`");
    EXPECT(baton_counter_set(k, INT64_MIN), BATON_OK, NULL);
    EXPECT(baton_counter_add(k, -1, NULL), BATON_INVALID_ARGUMENT, "overflow");
    EXPECT(baton_counter_get(k, &v, NULL), BATON_OK, NULL);
    CHECK(v == INT64_MIN);
    w = NULL;
    EXPECT(baton_counter_watch_new(k, &w), BATON_OK, NULL);
    EXPECT(baton_counter_watch_next(w, 0, NULL, NULL), BATON_NULL_ARGUMENT, "`value_out`");
    baton_counter_watch_free(w);
    baton_counter_free(k);
}

static void hostile_cancel_wait(void) {
    EXPECT(baton_cancel_wait(NULL, 0), BATON_NULL_ARGUMENT, "`cancel`");
    baton_cancel *k = NULL;
    EXPECT(baton_cancel_new(&k), BATON_OK, NULL);
    EXPECT(baton_cancel_wait(k, 0), BATON_TIMEOUT, "not cancelled");
    EXPECT(baton_cancel_cancel(k), BATON_OK, NULL);
    EXPECT(baton_cancel_wait(k, UINT64_MAX - 1), BATON_OK, NULL);
    baton_cancel_free(k);
}

/* Handles of the new recipes that outlived their client: never a crash, closed or not held. */
static void hostile_outlived_recipes(void) {
    baton_client *h = NULL;
    EXPECT(baton_client_new_from_env(&h), BATON_OK, NULL);
    if (!h) return;
    const char *keys[] = {"ffi/hostile/outlived/ml"};
    baton_rwlock *rw = NULL;
    baton_multilock *ml = NULL;
    baton_leader_task *lt = NULL;
    baton_group *g = NULL;
    baton_member *m = NULL;
    baton_barrier *b = NULL;
    baton_double_barrier *d = NULL;
    baton_counter *k = NULL;
    EXPECT(baton_rwlock_new(h, "ffi/hostile/outlived/rw", BATON_RW_READ, &rw), BATON_OK, NULL);
    EXPECT(baton_multilock_new(h, keys, 1, NULL, &ml), BATON_OK, NULL);
    EXPECT(baton_leader_task_new(h, "ffi/hostile/outlived/lt", NULL, 0, NULL, &lt), BATON_OK,
           NULL);
    EXPECT(baton_group_new(h, "ffi/hostile/outlived/g", &g), BATON_OK, NULL);
    EXPECT(baton_barrier_new(h, "ffi/hostile/outlived/b", &b), BATON_OK, NULL);
    EXPECT(baton_double_barrier_new(h, "ffi/hostile/outlived/d", 2, NULL, &d), BATON_OK, NULL);
    EXPECT(baton_counter_new(h, "ffi/hostile/outlived/k", &k), BATON_OK, NULL);
    if (g) EXPECT(baton_group_join(g, "m", NULL, 0, NULL, &m), BATON_OK, NULL);
    EXPECT(baton_rwlock_acquire(rw, 10000, NULL), BATON_OK, NULL);
    EXPECT(baton_multilock_acquire(ml, 10000, NULL), BATON_OK, NULL);
    baton_client_free(h);

    CHECK(!baton_rwlock_is_held(rw) && !baton_multilock_is_held(ml));
    EXPECT(baton_rwlock_acquire(rw, 0, NULL), BATON_CLOSED, "closed");
    EXPECT(baton_rwlock_release(rw), BATON_NOT_HELD, NULL);
    EXPECT(baton_multilock_acquire(ml, 0, NULL), BATON_CLOSED, "closed");
    EXPECT(baton_multilock_release(ml), BATON_NOT_HELD, NULL);
    EXPECT(baton_leader_task_run(lt, hostile_task, NULL, NULL), BATON_CLOSED, "closed");
    CHECK(!baton_member_is_member(m));
    EXPECT_REFUSED(baton_member_update_value(m, NULL, 0));
    EXPECT_REFUSED(baton_barrier_hold(b, NULL, NULL));
    EXPECT_REFUSED(baton_double_barrier_enter(d, 0, NULL));
    EXPECT_REFUSED(baton_counter_add(k, 1, NULL));
    baton_rwlock_free(rw);
    baton_multilock_free(ml);
    baton_leader_task_free(lt);
    baton_member_free(m);
    baton_group_free(g);
    baton_barrier_free(b);
    baton_double_barrier_free(d);
    baton_counter_free(k);
}

/* ---- metrics (test_metrics.c has the counts) ------------------------------------------ */

static void hostile_metrics(baton_client *c) {
    baton_metrics m;
    EXPECT(baton_client_metrics(NULL, &m, sizeof m), BATON_NULL_ARGUMENT, "client");
    EXPECT(baton_client_metrics(c, NULL, sizeof m), BATON_NULL_ARGUMENT, "out");
    EXPECT(baton_client_metrics(c, &m, 0), BATON_INVALID_ARGUMENT, "BATON_METRICS_SIZE_V1");
    EXPECT(baton_client_metrics(c, &m, sizeof m), BATON_OK, NULL);
    CHECK(m.size == sizeof m);
    size_t n = 0;
    EXPECT(baton_client_metrics_text(NULL, NULL, 0, &n), BATON_NULL_ARGUMENT, "client");
    EXPECT(baton_client_metrics_text(c, NULL, 0, NULL), BATON_BUFFER_TOO_SMALL, NULL);
    EXPECT(baton_client_metrics_text(c, NULL, 0, &n), BATON_BUFFER_TOO_SMALL, NULL);
    EXPECT(baton_client_metrics_text(c, NULL, HUGE_LEN, &n), BATON_NULL_ARGUMENT, "buf");
    char *one = malloc(1);
    EXPECT(baton_client_metrics_text(c, one, 1, &n), BATON_BUFFER_TOO_SMALL, NULL);
    free(one);
    /* Out-of-range tables and indices give NULL (or 0), never a crash. */
    CHECK(baton_metrics_label(UINT32_MAX, 0) == NULL);
    CHECK(baton_metrics_label(BATON_LABELS_RECIPE, SIZE_MAX) == NULL);
    CHECK(baton_metrics_bounds(UINT32_MAX, NULL) == NULL);
    CHECK(baton_metrics_bounds(BATON_BUCKETS_WAIT, NULL) != NULL);
    CHECK(baton_metric_count() > 0);
    CHECK(baton_metric_name(SIZE_MAX) == NULL);
    CHECK(baton_metric_help(SIZE_MAX) == NULL);
    CHECK(baton_metric_type(SIZE_MAX) == NULL);
    CHECK(baton_metric_label_count(SIZE_MAX) == 0);
    CHECK(baton_metric_label_name(SIZE_MAX, 0) == NULL);
    CHECK(baton_metric_label_name(0, SIZE_MAX) == NULL);
}

void test_hostile(void) {
    RUN0(hostile_results_and_errors);
    RUN0(hostile_client_options);
    RUN0(hostile_log_callback);
    RUN1(hostile_client_calls);
    RUN1(hostile_kv);
    RUN1(hostile_sessions);
    RUN1(hostile_agent);
    RUN1(hostile_locks);
    RUN1(hostile_semaphores);
    RUN1(hostile_elections);
    RUN0(hostile_outlived_client);
    RUN0(hostile_cancel_wait);
    RUN1(hostile_rwlocks);
    RUN1(hostile_multilocks);
    RUN1(hostile_leader_tasks);
    RUN1(hostile_groups);
    RUN1(hostile_barriers);
    RUN1(hostile_counters);
    RUN0(hostile_outlived_recipes);
    RUN1(hostile_metrics);
}
