/* C tests of capabilities of the README's "Capabilities by language" table that no other C
 * test covered: a session's lock-delay and behaviour as they take effect, and several
 * semaphore slots held in one process. Against the dev server at CONSUL_HTTP_ADDR; called
 * from test_baton.c's main. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

static baton_session *new_session(baton_client *c, uint64_t lock_delay_ms, uint32_t behavior) {
    baton_session *s = NULL;
    baton_session_options o = baton_session_options_default();
    o.ttl_ms = 10000;
    o.lock_delay_ms = lock_delay_ms;
    o.behavior = behavior;
    CHECK_RC(baton_session_create(c, &o, &s), BATON_OK);
    return s;
}

/* Takes `key` with a lock of session `s`, then has `other` destroy the session (as another
 * process would) and waits until the holder has seen the loss. */
static void hold_then_destroy_session(baton_client *c, baton_client *other, baton_session *s,
                                      const char *key) {
    baton_lock_options o = baton_lock_options_default();
    o.session = s;
    o.value = (const uint8_t *)"held";
    o.value_len = 4;
    baton_lock *l = NULL;
    CHECK_RC(baton_lock_new(c, key, &o, &l), BATON_OK);
    if (!l) return;
    CHECK_RC(baton_lock_acquire(l, 5000, NULL), BATON_OK);
    char id[BATON_SESSION_ID_SIZE];
    CHECK_RC(baton_session_id(s, id, sizeof id, NULL), BATON_OK);
    CHECK_RC(baton_client_destroy_session_id(other, id), BATON_OK);
    baton_hold_lost why = 0;
    CHECK_RC(baton_lock_wait_lost(l, 10000, NULL, &why, NULL), BATON_OK);
    CHECK(why == BATON_HOLD_SESSION_LOST);
    baton_lock_free(l);
}

/* Whether `key` exists (read through `c`). */
static bool key_exists(baton_client *c, const char *key) {
    bool found = true;
    uint8_t buf[16];
    CHECK_RC(baton_kv_get(c, key, NULL, buf, sizeof buf, NULL, &found), BATON_OK);
    return found;
}

static void test_lock_delay_and_behavior_delete(baton_client *c, baton_client *other) {
    /* Behaviour delete: the held key goes with the session. */
    baton_session *del = new_session(c, 0, BATON_BEHAVIOR_DELETE);
    if (del) {
        hold_then_destroy_session(c, other, del, "ffi/parity/behavior-delete");
        CHECK(!key_exists(other, "ffi/parity/behavior-delete"));
    }
    baton_session_free(del);

    /* Behaviour release (the default), lock-delay 0: the key stays, free at once. */
    baton_session *rel = new_session(c, 0, BATON_BEHAVIOR_RELEASE);
    baton_lock *next = NULL;
    if (rel) {
        hold_then_destroy_session(c, other, rel, "ffi/parity/delay-0");
        CHECK(key_exists(other, "ffi/parity/delay-0"));
        CHECK_RC(baton_lock_new(other, "ffi/parity/delay-0", NULL, &next), BATON_OK);
        if (next) {
            CHECK_RC(baton_lock_acquire(next, 0, NULL), BATON_OK);
            CHECK_RC(baton_lock_release(next), BATON_OK);
        }
        baton_lock_free(next);
    }
    baton_session_free(rel);

    /* Consul's lock-delay (the default, 15 s): a key freed by an invalidated session cannot
     * be taken right away. */
    baton_session_options defaults = baton_session_options_default();
    CHECK(defaults.lock_delay_ms == 15000);
    baton_session *delayed = new_session(c, defaults.lock_delay_ms, BATON_BEHAVIOR_RELEASE);
    if (delayed) {
        hold_then_destroy_session(c, other, delayed, "ffi/parity/delay-default");
        next = NULL;
        CHECK_RC(baton_lock_new(other, "ffi/parity/delay-default", NULL, &next), BATON_OK);
        if (next) CHECK_RC(baton_lock_acquire(next, 0, NULL), BATON_TIMEOUT);
        baton_lock_free(next);
    }
    baton_session_free(delayed);
}

/* Semaphores given no session each get one of their own: one client holds several slots. */
static void test_semaphores_of_one_client_hold_several_slots(baton_client *c) {
    const char *prefix = "ffi/parity/several-slots";
    baton_semaphore *s[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 4; i++) CHECK_RC(baton_semaphore_new(c, prefix, 3, NULL, &s[i]), BATON_OK);
    if (s[0] && s[1] && s[2] && s[3]) {
        for (int i = 0; i < 3; i++) CHECK_RC(baton_semaphore_acquire(s[i], 5000, NULL), BATON_OK);
        for (int i = 0; i < 3; i++) CHECK(baton_semaphore_is_held(s[i]));
        CHECK_RC(baton_semaphore_acquire(s[3], 0, NULL), BATON_TIMEOUT); /* all 3 taken */
        CHECK_RC(baton_semaphore_release(s[0]), BATON_OK);
        CHECK_RC(baton_semaphore_acquire(s[3], 5000, NULL), BATON_OK);
        for (int i = 1; i < 4; i++) CHECK_RC(baton_semaphore_release(s[i]), BATON_OK);
    }
    for (int i = 0; i < 4; i++) baton_semaphore_free(s[i]);
}

void test_parity_gaps(void) {
    RUN2(test_lock_delay_and_behavior_delete);
    RUN1(test_semaphores_of_one_client_hold_several_slots);
}
