/* Semaphore-limited workers in C.
 *
 *   semaphore_worker [WORKERS [LIMIT [JOBS]]]       (defaults 5 2 3)
 *
 * WORKERS threads, each with its own session (as separate processes would
 * have), share a semaphore of LIMIT slots under "examples/c/pool". Each does
 * JOBS jobs; a job runs only while its worker holds a slot. The program counts
 * how many jobs run at once and exits 1 if that ever exceeds LIMIT, or if a
 * worker fails. Uses CONSUL_HTTP_ADDR. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <baton.h>

static baton_client *client;
static int limit = 2, jobs = 3;
static atomic_int running, max_running, failures, done_jobs;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void fail(int id, const char *what, baton_result rc) {
    char msg[512];
    baton_last_error_message(msg, sizeof msg);
    fprintf(stderr, "worker %d: %s: %s: %s\n", id, what, baton_result_name(rc), msg);
    atomic_fetch_add(&failures, 1);
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    baton_session *session = NULL;
    baton_session_options so = baton_session_options_default();
    so.ttl_ms = 10000;
    so.lock_delay_ms = 0;
    so.behavior = BATON_BEHAVIOR_DELETE; /* a dead worker's contender key disappears */
    baton_result rc = baton_session_create(client, &so, &session);
    if (rc != BATON_OK) {
        fail(id, "session", rc);
        return NULL;
    }
    char value[32];
    int n = snprintf(value, sizeof value, "worker-%d", id);
    baton_semaphore_options o = baton_semaphore_options_default();
    o.session = session;
    o.value = (const uint8_t *)value;
    o.value_len = (size_t)n;
    baton_semaphore *sem = NULL;
    rc = baton_semaphore_new(client, "examples/c/pool", (uint32_t)limit, &o, &sem);
    if (rc != BATON_OK) {
        fail(id, "semaphore", rc);
        baton_session_free(session);
        return NULL;
    }
    for (int j = 0; j < jobs; j++) {
        rc = baton_semaphore_acquire(sem, 60000, NULL);
        if (rc != BATON_OK) {
            fail(id, "acquire", rc);
            break;
        }
        int now = atomic_fetch_add(&running, 1) + 1;
        int seen = atomic_load(&max_running);
        while (now > seen && !atomic_compare_exchange_weak(&max_running, &seen, now)) {
        }
        printf("worker %d: job %d started (%d running)\n", id, j + 1, now);
        fflush(stdout);
        sleep_ms(50); /* the job */
        atomic_fetch_sub(&running, 1);
        atomic_fetch_add(&done_jobs, 1);
        if ((rc = baton_semaphore_release(sem)) != BATON_OK) {
            fail(id, "release", rc);
            break;
        }
    }
    baton_semaphore_free(sem);
    if ((rc = baton_session_destroy(session)) != BATON_OK) fail(id, "session destroy", rc);
    baton_session_free(session);
    return NULL;
}

int main(int argc, char **argv) {
    int workers = argc > 1 ? atoi(argv[1]) : 5;
    if (argc > 2) limit = atoi(argv[2]);
    if (argc > 3) jobs = atoi(argv[3]);
    if (workers < 1 || workers > 64 || limit < 1 || jobs < 1) {
        fprintf(stderr, "usage: %s [WORKERS(1-64) [LIMIT(>=1) [JOBS(>=1)]]]\n", argv[0]);
        return 2;
    }
    baton_result rc = baton_client_new_from_env(&client);
    if (rc != BATON_OK) {
        fail(0, "client", rc);
        return 1;
    }
    pthread_t t[64];
    for (int i = 0; i < workers; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(i + 1));
    for (int i = 0; i < workers; i++) pthread_join(t[i], NULL);
    rc = baton_client_close(client, 5000);
    baton_client_free(client);
    int max = atomic_load(&max_running), bad = atomic_load(&failures);
    printf("%d jobs done by %d workers, at most %d at once (limit %d), %d failures\n",
           atomic_load(&done_jobs), workers, max, limit, bad);
    return (bad == 0 && max <= limit && atomic_load(&done_jobs) == workers * jobs && rc == BATON_OK)
               ? 0
               : 1;
}
