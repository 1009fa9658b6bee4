/* Smoke test of the installed C library (built against a `make install` prefix with
 * pkg-config, outside the repository), against the packaged dev server in CONSUL_HTTP_ADDR:
 * a lock, an election, and a loss. It prints "HELD" once it holds both; the harness
 * (tests/packages/run.py) then restarts the dev server, and this program must see the lock
 * and the leadership lost, print "LOST" and exit 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <baton.h>

static void check(const char *what, baton_result rc, baton_result want) {
    if (rc != want) {
        char msg[512];
        baton_last_error_message(msg, sizeof msg);
        fprintf(stderr, "smoke.c: %s: %s (wanted %s): %s\n", what, baton_result_name(rc),
                baton_result_name(want), msg);
        exit(1);
    }
}

int main(void) {
    baton_client *a = NULL, *b = NULL;
    check("client a", baton_client_new_from_env(&a), BATON_OK);
    check("client b", baton_client_new_from_env(&b), BATON_OK);

    baton_session_options so = baton_session_options_default();
    so.ttl_ms = 1000;
    so.lock_delay_ms = 0;
    baton_session *session = NULL;
    check("session", baton_session_create(a, &so, &session), BATON_OK);

    baton_lock_options lo = baton_lock_options_default();
    lo.session = session;
    lo.value = (const uint8_t *)"a";
    lo.value_len = 1;
    baton_lock *lock = NULL, *other = NULL;
    check("lock", baton_lock_new(a, "smoke/lock", &lo, &lock), BATON_OK);
    check("acquire", baton_lock_acquire(lock, 10000, NULL), BATON_OK);
    check("lock b", baton_lock_new(b, "smoke/lock", NULL, &other), BATON_OK);
    check("second holder refused", baton_lock_acquire(other, 0, NULL), BATON_TIMEOUT);

    baton_election *election = NULL;
    check("election", baton_election_new(a, "smoke/leader", session, &election), BATON_OK);
    check("campaign", baton_election_campaign(election, (const uint8_t *)"leader-a", 8, 10000, NULL),
          BATON_OK);
    baton_leader leader;
    uint8_t value[64];
    check("leader read", baton_election_leader(b, "smoke/leader", &leader, value, sizeof value),
          BATON_OK);
    if (!leader.has_leader || leader.value_len != 8 || memcmp(leader.value, "leader-a", 8) != 0) {
        fprintf(stderr, "smoke.c: leader read gave the wrong leader\n");
        return 1;
    }

    printf("HELD\n");
    fflush(stdout);
    baton_hold_lost why;
    baton_lost_reason session_why;
    check("lock lost", baton_lock_wait_lost(lock, 30000, NULL, &why, &session_why), BATON_OK);
    if (baton_lock_is_held(lock)) {
        fprintf(stderr, "smoke.c: still held after the loss\n");
        return 1;
    }
    check("leadership lost", baton_election_wait_lost(election, 30000, NULL, &why, &session_why),
          BATON_OK);
    check("reacquire", baton_lock_acquire(other, 10000, NULL), BATON_OK);
    printf("LOST\n");
    fflush(stdout);

    baton_election_free(election);
    baton_lock_free(other);
    baton_lock_free(lock);
    baton_session_free(session);
    baton_client_free(b);
    baton_client_free(a);
    return 0;
}
