/* A leader-election worker in C.
 *
 *   leader_worker NAME [KEY]
 *
 * Campaigns for KEY (default "examples/c/leader") with NAME as its value. An
 * observer prints every leader change it sees. While leading, the worker does
 * its "work": every 200 ms it writes "NAME:TOKEN" to KEY/work with a guarded
 * write, so a deposed leader can never overwrite its successor's data. On
 * SIGTERM or SIGINT it steps down (resigns: the next candidate takes over at
 * once) and exits 0. If leadership is lost (session invalidated, key taken) it
 * says so and campaigns again.
 *
 * Signals: they are blocked in every thread and taken by one thread with
 * sigwait(), which cancels the blocking calls through a baton_cancel. A signal
 * handler must not call into the library (it takes locks).
 *
 * Uses CONSUL_HTTP_ADDR (host:port of Consul or baton-devserver). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <baton.h>

static const char *name;
static baton_cancel *stop;
static atomic_int stopping;

static void die(const char *what, baton_result rc) {
    char msg[512];
    baton_last_error_message(msg, sizeof msg);
    fprintf(stderr, "[%s] %s: %s: %s\n", name, what, baton_result_name(rc), msg);
    exit(1);
}

static void *signal_thread(void *arg) {
    sigset_t *set = arg;
    int sig = 0;
    if (sigwait(set, &sig) == 0) {
        printf("[%s] got %s: stepping down\n", name, sig == SIGTERM ? "SIGTERM" : "SIGINT");
        fflush(stdout);
        atomic_store(&stopping, 1);
        (void)baton_cancel_cancel(stop);
    }
    return NULL;
}

static void on_leader(void *ud, const baton_leader *leader, baton_result error) {
    (void)ud;
    if (error != BATON_OK) {
        printf("[%s] observer: %s\n", name, baton_result_name(error));
    } else if (!leader->has_leader) {
        printf("[%s] observer: no leader\n", name);
    } else {
        printf("[%s] observer: leader is %.*s (lock index %llu, fencing token %llu)\n", name,
               (int)leader->value_len, leader->value ? (const char *)leader->value : "",
               (unsigned long long)leader->lock_index, (unsigned long long)leader->token);
    }
    fflush(stdout);
}

static void on_lost(void *ud, baton_hold_lost reason, baton_lost_reason session_reason) {
    (void)ud;
    printf("[%s] leadership lost (reason %u, session reason %u)\n", name, (unsigned)reason,
           (unsigned)session_reason);
    fflush(stdout);
}

/* Works while leading; returns when leadership ends or a stop signal came. */
static void lead(baton_client *client, baton_election *e, const char *work_key) {
    char seq[512];
    uint64_t token = 0;
    baton_result rc = baton_election_sequencer(e, seq, sizeof seq, NULL, &token);
    if (rc != BATON_OK) return; /* lost already */
    printf("[%s] leading with fencing token %llu (sequencer %s)\n", name,
           (unsigned long long)token, seq);
    fflush(stdout);
    char work[128];
    int n = snprintf(work, sizeof work, "%s:%llu", name, (unsigned long long)token);
    for (;;) {
        rc = baton_guarded_put(client, seq, work_key, (const uint8_t *)work, (size_t)n);
        if (rc == BATON_CONFLICT) {
            printf("[%s] guarded write refused: no longer the leader\n", name);
            return;
        }
        if (rc != BATON_OK) die("guarded write", rc);
        /* Sleep 200 ms, waking early if leadership ends or we are told to stop. */
        rc = baton_election_wait_lost(e, 200, stop, NULL, NULL);
        if (rc == BATON_OK || rc == BATON_CANCELLED) return;
        if (rc != BATON_TIMEOUT) die("wait_lost", rc);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s NAME [KEY]\n", argv[0]);
        return 2;
    }
    name = argv[1];
    const char *key = argc > 2 ? argv[2] : "examples/c/leader";
    char work_key[256];
    snprintf(work_key, sizeof work_key, "%s/work", key);

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread starts, library threads included */

    baton_result rc = baton_cancel_new(&stop);
    if (rc != BATON_OK) die("cancel", rc);
    pthread_t sig_thread;
    if (pthread_create(&sig_thread, NULL, signal_thread, &set) != 0) {
        fprintf(stderr, "[%s] cannot start the signal thread\n", name);
        return 1;
    }

    baton_client *client = NULL;
    if ((rc = baton_client_new_from_env(&client)) != BATON_OK) die("client", rc);
    baton_observer *observer = NULL;
    if ((rc = baton_election_observe(client, key, on_leader, NULL, NULL, &observer)) != BATON_OK)
        die("observe", rc);
    baton_election *e = NULL;
    if ((rc = baton_election_new(client, key, NULL, &e)) != BATON_OK) die("election", rc);
    if ((rc = baton_election_on_lost(e, on_lost, NULL, NULL)) != BATON_OK) die("on_lost", rc);

    printf("[%s] campaigning for %s\n", name, key);
    fflush(stdout);
    while (!atomic_load(&stopping)) {
        rc = baton_election_campaign(e, (const uint8_t *)name, strlen(name), BATON_WAIT_FOREVER,
                                     stop);
        if (rc == BATON_CANCELLED) break;
        if (rc != BATON_OK) die("campaign", rc);
        lead(client, e, work_key);
    }
    if (baton_election_is_leader(e)) {
        rc = baton_election_resign(e);
        printf("[%s] resigned: %s\n", name, baton_result_name(rc));
    }
    printf("[%s] done\n", name);
    fflush(stdout);
    baton_election_free(e);
    baton_observer_free(observer);
    rc = baton_client_close(client, 5000);
    baton_client_free(client);
    pthread_join(sig_thread, NULL);
    baton_cancel_free(stop);
    return rc == BATON_OK ? 0 : 1;
}
