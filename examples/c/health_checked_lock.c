/* A lock that follows the holder's health: a session bound to a TTL check.
 *
 *   health_checked_lock                                   (uses CONSUL_HTTP_ADDR)
 *
 * The worker registers a TTL check, binds its session to it and keeps the check
 * passing from a health function while it holds the lock. When the health function
 * starts failing (here: after a few rounds, as if a dependency went away) it stops
 * reporting; the check turns critical at the end of its TTL, Consul invalidates the
 * session, the lock is lost (the lost callback fires) and a standby, waiting on another
 * thread with its own client, takes over. Exits 1 if that does not happen. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <baton.h>

#define CHECK_TTL_MS 2000 /* without a pass for this long the check turns critical */
#define HEALTHY_ROUNDS 6  /* the health function succeeds this many times, then fails */

static atomic_int lost;
static char key[128];

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int die(const char *what, baton_result rc) {
    char msg[512];
    baton_last_error_message(msg, sizeof msg);
    fprintf(stderr, "%s: %s: %s\n", what, baton_result_name(rc), msg);
    return 1;
}

/* The application's own health function (here: healthy for HEALTHY_ROUNDS calls). */
static bool healthy(void) {
    static int rounds;
    return ++rounds <= HEALTHY_ROUNDS;
}

/* Runs on the library's dispatcher thread: hand the news over and return. */
static void on_lost(void *ud, baton_hold_lost reason, baton_lost_reason session_reason) {
    (void)ud;
    printf("worker: lock lost (hold %d, session %d)\n", (int)reason, (int)session_reason);
    fflush(stdout);
    atomic_store(&lost, 1);
}

/* The standby: another client waiting for the lock. */
static void *standby(void *arg) {
    baton_result *out = arg;
    baton_client *c = NULL;
    baton_lock *l = NULL;
    *out = baton_client_new_from_env(&c);
    if (*out == BATON_OK) *out = baton_lock_new(c, key, NULL, &l);
    if (*out == BATON_OK) *out = baton_lock_acquire(l, 30000, NULL);
    if (*out == BATON_OK) {
        printf("standby: took over the lock\n");
        (void)baton_lock_release(l);
    }
    baton_lock_free(l);
    if (c) (void)baton_client_close(c, 5000);
    baton_client_free(c);
    return NULL;
}

int main(void) {
    baton_client *c = NULL;
    baton_result rc = baton_client_new_from_env(&c);
    if (rc != BATON_OK) return die("client", rc);
    char check[64];
    snprintf(check, sizeof check, "worker-health-%ld", (long)getpid());
    snprintf(key, sizeof key, "baton-examples/c/health-checked-lock/%ld", (long)getpid());

    /* 1. A TTL check, passing from the start (a TTL check starts critical, and Consul
     *    refuses to bind a session to a check that is not passing). */
    baton_ttl_check tc = baton_ttl_check_default();
    tc.id = check;
    tc.name = "worker health";
    tc.ttl_ms = CHECK_TTL_MS;
    tc.status = BATON_CHECK_PASSING;
    if ((rc = baton_agent_check_register(c, &tc)) != BATON_OK) return die("check register", rc);

    /* 2. A session bound to it (and to the node's serfHealth, as by default); lock delay 0
     *    so the standby can take over as soon as the session ends. */
    baton_session_options so = baton_session_options_default();
    so.name = "health-checked worker";
    so.ttl_ms = 10000;
    so.lock_delay_ms = 0;
    const char *node_checks[] = {"serfHealth", check};
    baton_session_checks sc = baton_session_checks_default();
    sc.node_checks = node_checks;
    sc.node_checks_len = 2;
    baton_session *s = NULL;
    if ((rc = baton_session_create_with_checks(c, &so, &sc, &s)) != BATON_OK) return die("session", rc);
    baton_lock_options lo = baton_lock_options_default();
    lo.session = s;
    baton_lock *lock = NULL;
    if ((rc = baton_lock_new(c, key, &lo, &lock)) != BATON_OK) return die("lock", rc);
    if ((rc = baton_lock_acquire(lock, 10000, NULL)) != BATON_OK) return die("acquire", rc);
    if ((rc = baton_lock_on_lost(lock, on_lost, NULL, NULL)) != BATON_OK) return die("on_lost", rc);
    printf("worker: holding %s\n", key);
    baton_result standby_rc = BATON_OK;
    pthread_t t;
    pthread_create(&t, NULL, standby, &standby_rc);

    /* 3. Keep the check passing from the health function, more often than its TTL. */
    while (healthy()) {
        if ((rc = baton_agent_check_pass(c, check, "ok")) != BATON_OK) return die("pass", rc);
        printf("worker: healthy, check passed\n");
        fflush(stdout);
        sleep_ms(CHECK_TTL_MS / 3); /* the reporting period */
        if (atomic_load(&lost)) {
            fprintf(stderr, "the lock was lost while the check was passing\n");
            return 1;
        }
    }
    printf("worker: health function failed: no more passes\n");
    fflush(stdout);

    /* 4. The check turns critical after its TTL: the session and the lock are gone. The
     *    standby's acquire returns with the lock; this process learns of the loss from its
     *    own watch, which may come a moment after the standby's acquire: wait for it (the
     *    lost callback runs on the library's dispatcher thread, around the same time). */
    pthread_join(t, NULL);
    int status = 0;
    baton_hold_lost why = BATON_HOLD_RELEASED;
    rc = baton_lock_wait_lost(lock, 10000, NULL, &why, NULL);
    for (int i = 0; i < 500 && !atomic_load(&lost); i++) sleep_ms(10); /* the callback */
    if (rc != BATON_OK || why == BATON_HOLD_RELEASED || !atomic_load(&lost)) {
        fprintf(stderr, "the lock was not lost after the health function failed (%s, %s)\n",
                baton_result_name(rc), baton_hold_lost_name(why));
        status = 1;
    }
    if (standby_rc != BATON_OK) status = die("standby", standby_rc);
    (void)baton_agent_check_deregister(c, check);
    baton_lock_free(lock);
    baton_session_free(s);
    (void)baton_client_close(c, 5000);
    baton_client_free(c);
    return status;
}
