/* C tests of the C API's issue-22 additions, against the dev server at CONSUL_HTTP_ADDR (or
 * BATON_TEST_CONSUL): the client's default session configured from C
 * (baton_client_new_with_default_session), KV check-and-set (baton_kv_get_entry,
 * baton_kv_put_cas, baton_kv_delete_cas) and guarded transactions (baton_guarded_txn).
 * Called from test_baton.c's main. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static bool error_has(const char *needle) {
    char m[1024];
    baton_last_error_message(m, sizeof m);
    return strstr(m, needle) != NULL;
}

static bool error_starts_with(const char *prefix) {
    char m[1024];
    baton_last_error_message(m, sizeof m);
    return strncmp(m, prefix, strlen(prefix)) == 0;
}

/* The value of `key` as a NUL-terminated string in `buf` (empty if missing), and its entry. */
static bool read_entry(baton_client *c, const char *key, char *buf, size_t len,
                       baton_kv_entry *entry) {
    size_t n = 0;
    bool found = false;
    baton_result rc =
        baton_kv_get_entry(c, key, NULL, (uint8_t *)buf, len - 1, &n, entry, &found);
    CHECK_RC(rc, BATON_OK);
    buf[rc == BATON_OK && found ? n : 0] = 0;
    return rc == BATON_OK && found;
}

static baton_client *client_with(const baton_session_options *so,
                                 const baton_session_checks *checks, baton_result want) {
    baton_client_options o = baton_client_options_default();
    o.address = getenv("CONSUL_HTTP_ADDR");
    baton_client *c = NULL;
    CHECK_RC(baton_client_new_with_default_session(&o, so, checks, &c), want);
    if (want != BATON_OK) CHECK(c == NULL);
    return c;
}

/* The default session's options, set from C, reach Consul; bad values are refused. */
static void test_default_session(void) {
    /* Bad arguments, each named. */
    CHECK_RC(baton_client_new_with_default_session(NULL, NULL, NULL, NULL), BATON_NULL_ARGUMENT);
    CHECK(error_has("client_out"));
    baton_session_options so = baton_session_options_default();
    so.behavior = 7;
    client_with(&so, NULL, BATON_INVALID_ARGUMENT);
    CHECK(error_has("default_session.behavior 7"));
    CHECK(error_has("BATON_BEHAVIOR_RELEASE"));
    so = baton_session_options_default();
    so.ttl_ms = BATON_WAIT_FOREVER - 1; /* ten years or more, not BATON_NO_TTL */
    client_with(&so, NULL, BATON_INVALID_ARGUMENT);
    CHECK(error_has("default_session.ttl_ms"));
    so.ttl_ms = 0; /* not a way to ask for no TTL (issue 31) */
    client_with(&so, NULL, BATON_INVALID_ARGUMENT);
    CHECK(error_has("default_session.ttl_ms is 0"));
    so = baton_session_options_default();
    so.name = BAD_UTF8;
    client_with(&so, NULL, BATON_INVALID_UTF8);
    CHECK(error_has("default_session.name"));
    baton_session_checks checks = baton_session_checks_default();
    checks.node_checks_len = 2; /* a length without an array */
    client_with(NULL, &checks, BATON_NULL_ARGUMENT);
    CHECK(error_has("default_session_checks.node_checks"));

    /* A TTL Consul refuses (above its 24 h maximum) is refused when the session is made,
     * with the TTL named. */
    so = baton_session_options_default();
    so.ttl_ms = 25ull * 3600 * 1000;
    baton_client *c = client_with(&so, NULL, BATON_OK);
    baton_session *s = NULL;
    CHECK_RC(baton_client_default_session(c, &s), BATON_INVALID_ARGUMENT);
    CHECK(s == NULL);
    CHECK(error_has("session TTL") && error_has("maximum"));
    baton_client_free(c);

    /* NULL options: the default session's defaults (TTL 15 s, so less than that is left). */
    c = client_with(NULL, NULL, BATON_OK);
    CHECK_RC(baton_client_default_session(c, &s), BATON_OK);
    uint64_t left = 0;
    CHECK_RC(baton_session_time_left_ms(s, &left), BATON_OK);
    CHECK(left > 0 && left <= 15000);
    baton_session_free(s);
    s = NULL;
    CHECK_RC(baton_client_close(c, 10000), BATON_OK);
    baton_client_free(c);

    /* Behaviour delete, a 60 s TTL, no lock-delay: the lock taken with the default session
     * carries it, its time left exceeds what the 15 s default could give, and destroying
     * the session deletes the key (a release would have kept it). */
    so = baton_session_options_default();
    so.name = "capi-gaps-default";
    so.ttl_ms = 60000;
    so.lock_delay_ms = 0;
    so.behavior = BATON_BEHAVIOR_DELETE;
    c = client_with(&so, NULL, BATON_OK);
    CHECK_RC(baton_client_default_session(c, &s), BATON_OK);
    char id[BATON_SESSION_ID_BUF];
    CHECK_RC(baton_session_id(s, id, sizeof id, NULL), BATON_OK);
    CHECK_RC(baton_session_time_left_ms(s, &left), BATON_OK);
    CHECK(left > 15000 && left <= 60000);
    baton_lock *l = NULL;
    const char *key = "ffi/gaps/default-session/lock";
    CHECK_RC(baton_lock_new(c, key, NULL, &l), BATON_OK);
    CHECK_RC(baton_lock_acquire(l, 10000, NULL), BATON_OK);
    char v[64];
    baton_kv_entry e;
    CHECK(read_entry(c, key, v, sizeof v, &e));
    CHECK(strcmp(e.session, id) == 0);
    CHECK(e.lock_index >= 1);
    CHECK_RC(baton_session_destroy(s), BATON_OK);
    CHECK(!read_entry(c, key, v, sizeof v, &e));
    CHECK(e.modify_index == 0 && e.session[0] == 0);
    baton_lock_free(l);
    baton_session_free(s);
    CHECK_RC(baton_client_close(c, 10000), BATON_OK);
    baton_client_free(c);

    /* The same from the environment (CONSUL_HTTP_ADDR). */
    CHECK_RC(baton_client_new_from_env_with_default_session(NULL, NULL, NULL),
             BATON_NULL_ARGUMENT);
    c = NULL;
    so.behavior = 9;
    CHECK_RC(baton_client_new_from_env_with_default_session(&so, NULL, &c),
             BATON_INVALID_ARGUMENT);
    CHECK(c == NULL && error_has("default_session.behavior 9"));
    so.behavior = BATON_BEHAVIOR_RELEASE;
    CHECK_RC(baton_client_new_from_env_with_default_session(&so, NULL, &c), BATON_OK);
    CHECK_RC(baton_client_default_session(c, &s), BATON_OK);
    CHECK_RC(baton_session_time_left_ms(s, &left), BATON_OK);
    CHECK(left > 15000 && left <= 60000);
    baton_session_free(s);
    CHECK_RC(baton_client_close(c, 10000), BATON_OK);
    baton_client_free(c);
}

static void test_kv_cas(baton_client *c) {
    const char *key = "ffi/gaps/cas/k";
    bool applied = true, found = true;
    baton_kv_entry e;
    char v[64];
    CHECK_RC(baton_kv_delete(c, key), BATON_OK);

    /* Bad arguments, each named. */
    CHECK_RC(baton_kv_get_entry(NULL, key, NULL, NULL, 0, NULL, &e, &found), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_kv_get_entry(c, NULL, NULL, NULL, 0, NULL, &e, &found), BATON_NULL_ARGUMENT);
    CHECK(error_has("`key`"));
    CHECK_RC(baton_kv_get_entry(c, key, NULL, NULL, 0, NULL, NULL, &found), BATON_NULL_ARGUMENT);
    CHECK(error_has("entry_out"));
    CHECK_RC(baton_kv_get_entry(c, key, NULL, NULL, 0, NULL, &e, NULL), BATON_NULL_ARGUMENT);
    CHECK(error_has("found_out"));
    CHECK_RC(baton_kv_get_entry(c, BAD_UTF8, NULL, NULL, 0, NULL, &e, &found), BATON_INVALID_UTF8);
    CHECK_RC(baton_kv_put_cas(NULL, key, NULL, 0, 0, 0, &applied), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_kv_put_cas(c, NULL, NULL, 0, 0, 0, &applied), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_kv_put_cas(c, key, NULL, 3, 0, 0, &applied), BATON_NULL_ARGUMENT);
    CHECK(error_has("`value`"));
    CHECK_RC(baton_kv_put_cas(c, key, (const uint8_t *)"x", 1, 0, 0, NULL), BATON_NULL_ARGUMENT);
    CHECK(error_has("applied_out"));
    CHECK_RC(baton_kv_put_cas(c, "", (const uint8_t *)"x", 1, 0, 0, &applied),
             BATON_INVALID_ARGUMENT);
    CHECK_RC(baton_kv_delete_cas(NULL, key, 1, &applied), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_kv_delete_cas(c, NULL, 1, &applied), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_kv_delete_cas(c, key, 1, NULL), BATON_NULL_ARGUMENT);
    CHECK(error_has("applied_out"));
    CHECK_RC(baton_kv_delete_cas(c, BAD_UTF8, 1, &applied), BATON_INVALID_UTF8);
    /* A cancelled token ends the read. */
    baton_cancel *cancel = NULL;
    CHECK_RC(baton_cancel_new(&cancel), BATON_OK);
    CHECK_RC(baton_cancel_cancel(cancel), BATON_OK);
    CHECK_RC(baton_kv_get_entry(c, key, cancel, NULL, 0, NULL, &e, &found), BATON_CANCELLED);
    baton_cancel_free(cancel);
    /* Nothing above wrote. */
    CHECK(!read_entry(c, key, v, sizeof v, &e));
    CHECK(e.modify_index == 0 && e.flags == 0 && e.session[0] == 0);

    /* cas 0: create only. */
    CHECK_RC(baton_kv_put_cas(c, key, (const uint8_t *)"one", 3, 42, 0, &applied), BATON_OK);
    CHECK(applied);
    CHECK(read_entry(c, key, v, sizeof v, &e));
    CHECK(strcmp(v, "one") == 0 && e.flags == 42 && e.modify_index > 0 && e.session[0] == 0);
    CHECK(e.create_index == e.modify_index);
    uint64_t first = e.modify_index;
    applied = true;
    CHECK_RC(baton_kv_put_cas(c, key, (const uint8_t *)"again", 5, 0, 0, &applied), BATON_OK);
    CHECK(!applied);
    CHECK(read_entry(c, key, v, sizeof v, &e));
    CHECK(strcmp(v, "one") == 0 && e.modify_index == first);

    /* The current index applies; the same index once more is stale and refused. */
    CHECK_RC(baton_kv_put_cas(c, key, (const uint8_t *)"two", 3, 7, first, &applied), BATON_OK);
    CHECK(applied);
    CHECK(read_entry(c, key, v, sizeof v, &e));
    CHECK(strcmp(v, "two") == 0 && e.flags == 7 && e.modify_index > first);
    CHECK(e.create_index == first);
    uint64_t second = e.modify_index;
    applied = true;
    CHECK_RC(baton_kv_put_cas(c, key, (const uint8_t *)"lost", 4, 0, first, &applied), BATON_OK);
    CHECK(!applied);
    CHECK(read_entry(c, key, v, sizeof v, &e));
    CHECK(strcmp(v, "two") == 0 && e.modify_index == second);

    /* A size query gives the length and the entry; a short buffer too. */
    size_t n = 0;
    baton_kv_entry q;
    memset(&q, 0, sizeof q);
    CHECK_RC(baton_kv_get_entry(c, key, NULL, NULL, 0, &n, &q, &found), BATON_BUFFER_TOO_SMALL);
    CHECK(n == 3 && found && q.modify_index == second && q.flags == 7);
    uint8_t small[2];
    CHECK_RC(baton_kv_get_entry(c, key, NULL, small, sizeof small, &n, &q, &found),
             BATON_BUFFER_TOO_SMALL);
    CHECK(n == 3);

    /* delete-cas: a stale index keeps the key, the current one deletes it, a missing key
     * counts as deleted. */
    applied = true;
    CHECK_RC(baton_kv_delete_cas(c, key, first, &applied), BATON_OK);
    CHECK(!applied);
    CHECK(read_entry(c, key, v, sizeof v, &e));
    CHECK(strcmp(v, "two") == 0);
    CHECK_RC(baton_kv_delete_cas(c, key, second, &applied), BATON_OK);
    CHECK(applied);
    CHECK(!read_entry(c, key, v, sizeof v, &e));
    applied = false;
    CHECK_RC(baton_kv_delete_cas(c, key, second, &applied), BATON_OK);
    CHECK(applied);

    /* The lock holder is reported. */
    baton_session *s = NULL;
    CHECK_RC(baton_session_create(c, NULL, &s), BATON_OK);
    baton_lock_options lo = baton_lock_options_default();
    lo.session = s;
    baton_lock *l = NULL;
    CHECK_RC(baton_lock_new(c, "ffi/gaps/cas/locked", &lo, &l), BATON_OK);
    CHECK_RC(baton_lock_acquire(l, 10000, NULL), BATON_OK);
    char id[BATON_SESSION_ID_BUF];
    CHECK_RC(baton_session_id(s, id, sizeof id, NULL), BATON_OK);
    CHECK(read_entry(c, "ffi/gaps/cas/locked", v, sizeof v, &e));
    CHECK(strcmp(e.session, id) == 0 && e.lock_index >= 1);
    CHECK_RC(baton_lock_release(l), BATON_OK);
    CHECK(read_entry(c, "ffi/gaps/cas/locked", v, sizeof v, &e));
    CHECK(e.session[0] == 0);
    baton_lock_free(l);
    CHECK_RC(baton_session_destroy(s), BATON_OK);
    baton_session_free(s);
    CHECK_RC(baton_kv_delete(c, "ffi/gaps/cas/locked"), BATON_OK);
}

static baton_txn_op op(uint32_t verb, const char *key, const char *value) {
    baton_txn_op o;
    memset(&o, 0, sizeof o);
    o.verb = verb;
    o.key = key;
    o.value = (const uint8_t *)value;
    o.value_len = value ? strlen(value) : 0;
    return o;
}

static void test_guarded_txn(baton_client *c) {
    const char *a = "ffi/gaps/txn/a", *b = "ffi/gaps/txn/b", *absent = "ffi/gaps/txn/absent";
    CHECK_RC(baton_kv_delete(c, a), BATON_OK);
    CHECK_RC(baton_kv_delete(c, b), BATON_OK);
    CHECK_RC(baton_kv_delete(c, absent), BATON_OK);
    baton_session *s = NULL;
    CHECK_RC(baton_session_create(c, NULL, &s), BATON_OK);
    baton_lock_options lo = baton_lock_options_default();
    lo.session = s;
    baton_lock *l = NULL;
    const char *lkey = "ffi/gaps/txn/leader";
    CHECK_RC(baton_lock_new(c, lkey, &lo, &l), BATON_OK);
    CHECK_RC(baton_lock_acquire(l, 10000, NULL), BATON_OK);
    char seq[BATON_SEQUENCER_MAX(sizeof "ffi/gaps/txn/leader")];
    CHECK_RC(baton_lock_sequencer(l, seq, sizeof seq, NULL, NULL), BATON_OK);
    char v[64];
    baton_kv_entry e;

    /* Bad arguments, refused before anything is sent. */
    baton_txn_op bad[2] = {op(BATON_TXN_SET, a, "x"), op(BATON_TXN_SET, b, "y")};
    CHECK_RC(baton_guarded_txn(NULL, seq, bad, 2), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_guarded_txn(c, NULL, bad, 2), BATON_NULL_ARGUMENT);
    CHECK_RC(baton_guarded_txn(c, "not a sequencer", bad, 2), BATON_INVALID_ARGUMENT);
    CHECK_RC(baton_guarded_txn(c, seq, NULL, 2), BATON_NULL_ARGUMENT);
    CHECK(error_has("ops"));
    CHECK_RC(baton_guarded_txn(c, seq, NULL, 128), BATON_INVALID_ARGUMENT);
    CHECK(error_has("at most 127"));
    CHECK_RC(baton_guarded_txn(c, seq, bad, SIZE_MAX), BATON_INVALID_ARGUMENT);
    bad[1].verb = 0;
    CHECK_RC(baton_guarded_txn(c, seq, bad, 2), BATON_INVALID_ARGUMENT);
    CHECK(error_has("ops[1].verb 0"));
    bad[1].verb = 99;
    CHECK_RC(baton_guarded_txn(c, seq, bad, 2), BATON_INVALID_ARGUMENT);
    CHECK(error_has("ops[1].verb 99"));
    bad[1] = op(BATON_TXN_SET, NULL, "y");
    CHECK_RC(baton_guarded_txn(c, seq, bad, 2), BATON_NULL_ARGUMENT);
    CHECK(error_has("ops[1].key"));
    bad[1] = op(BATON_TXN_SET, b, NULL);
    bad[1].value_len = 5;
    CHECK_RC(baton_guarded_txn(c, seq, bad, 2), BATON_NULL_ARGUMENT);
    CHECK(error_has("ops[1].value"));
    bad[1] = op(BATON_TXN_LOCK, b, "y");
    CHECK_RC(baton_guarded_txn(c, seq, bad, 2), BATON_NULL_ARGUMENT);
    CHECK(error_has("ops[1].session"));
    bad[1].session = "";
    CHECK_RC(baton_guarded_txn(c, seq, bad, 2), BATON_INVALID_ARGUMENT);
    CHECK(error_has("ops[1].session"));
    bad[1] = op(BATON_TXN_SET, BAD_UTF8, "y");
    CHECK_RC(baton_guarded_txn(c, seq, bad, 2), BATON_INVALID_UTF8);
    bad[1] = op(BATON_TXN_SET, "", "y");
    CHECK_RC(baton_guarded_txn(c, seq, bad, 2), BATON_INVALID_ARGUMENT);
    /* None of it wrote. */
    CHECK(!read_entry(c, a, v, sizeof v, &e));

    /* While current: every op applies, together. */
    baton_txn_op ok[4] = {op(BATON_TXN_SET, a, "one"), op(BATON_TXN_CAS, b, "two"),
                          op(BATON_TXN_CHECK_NOT_EXISTS, absent, NULL),
                          op(BATON_TXN_CHECK_SESSION, lkey, NULL)};
    ok[0].flags = 5;
    ok[1].index = 0; /* create only */
    char id[BATON_SESSION_ID_BUF];
    CHECK_RC(baton_session_id(s, id, sizeof id, NULL), BATON_OK);
    ok[3].session = id;
    CHECK_RC(baton_guarded_txn(c, seq, ok, 4), BATON_OK);
    CHECK(read_entry(c, a, v, sizeof v, &e));
    CHECK(strcmp(v, "one") == 0 && e.flags == 5);
    uint64_t a_index = e.modify_index;
    CHECK(read_entry(c, b, v, sizeof v, &e));
    CHECK(strcmp(v, "two") == 0);
    uint64_t b_index = e.modify_index;
    /* No ops: only the check. */
    CHECK_RC(baton_guarded_txn(c, seq, NULL, 0), BATON_OK);

    /* An op that fails: nothing is written, the failing ops are named as in ops[]. */
    baton_txn_op fail[3] = {op(BATON_TXN_SET, a, "changed"), op(BATON_TXN_CAS, b, "again"),
                            op(BATON_TXN_GET, absent, NULL)};
    fail[1].index = 0; /* b exists */
    CHECK_RC(baton_guarded_txn(c, seq, fail, 3), BATON_CONFLICT);
    CHECK(error_has("nothing was written"));
    CHECK(error_has("ops[1] (cas \"ffi/gaps/txn/b\")"));
    CHECK(error_has("ops[2] (get \"ffi/gaps/txn/absent\")"));
    CHECK(!error_has("ops[0]"));
    CHECK(read_entry(c, a, v, sizeof v, &e));
    CHECK(strcmp(v, "one") == 0 && e.modify_index == a_index);
    /* A CAS on the index just read, and a delete-cas on a stale one. */
    baton_txn_op cas[2] = {op(BATON_TXN_CAS, b, "three"), op(BATON_TXN_DELETE_CAS, a, NULL)};
    cas[0].index = b_index;
    cas[1].index = a_index - 1;
    CHECK_RC(baton_guarded_txn(c, seq, cas, 2), BATON_CONFLICT);
    CHECK(error_has("ops[1] (delete-cas"));
    cas[1].index = a_index;
    CHECK_RC(baton_guarded_txn(c, seq, cas, 2), BATON_OK);
    CHECK(read_entry(c, b, v, sizeof v, &e));
    CHECK(strcmp(v, "three") == 0);
    CHECK(!read_entry(c, a, v, sizeof v, &e));

    /* Stale once the lock is released: BATON_CONFLICT, the core's message, nothing written. */
    CHECK_RC(baton_lock_release(l), BATON_OK);
    baton_txn_op late[2] = {op(BATON_TXN_SET, a, "stale write"), op(BATON_TXN_DELETE, b, NULL)};
    CHECK_RC(baton_guarded_txn(c, seq, late, 2), BATON_CONFLICT);
    CHECK(error_starts_with("stale sequencer "));
    CHECK(error_has(lkey));
    CHECK_RC(baton_guarded_txn(c, seq, NULL, 0), BATON_CONFLICT);
    CHECK(error_starts_with("stale sequencer "));
    CHECK(!read_entry(c, a, v, sizeof v, &e));
    CHECK(read_entry(c, b, v, sizeof v, &e));
    CHECK(strcmp(v, "three") == 0);

    baton_lock_free(l);
    CHECK_RC(baton_session_destroy(s), BATON_OK);
    baton_session_free(s);
    CHECK_RC(baton_kv_delete(c, b), BATON_OK);
    CHECK_RC(baton_kv_delete(c, lkey), BATON_OK);
}

void test_capi_gaps(void) {
    RUN0(test_default_session);
    RUN1(test_kv_cas);
    RUN1(test_guarded_txn);
}
