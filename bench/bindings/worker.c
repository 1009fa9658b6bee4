/* The C worker of `make bench-bindings` (bench/bindings/run.py drives it; same protocol as
 * worker.rs):
 *
 *   worker-c ADDR cycles N KEY     N uncontended acquire+release cycles on KEY
 *   worker-c ADDR handoff N KEY    N hand-offs of KEY between two holders (threads)
 *
 * ADDR as worker.rs takes it: `HOST:PORT`, `https://HOST:PORT` or `unix:///PATH`. The client is
 * made with `baton_client_new` as a C application makes it: the address, and over HTTPS the CA
 * file in `ca_file`, taken from `CONSUL_CACERT` (run.py sets it; `baton_client_new` itself reads
 * no environment).
 *
 * Prints one line, `RESULT {json}` (see worker.rs for the fields; cpu_secs: the process's
 * user+sys CPU time over the measured cycles). */
#define _POSIX_C_SOURCE 200809L
#include <baton.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const uint64_t LONG_MS = 30000;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void check(const char *what, baton_result rc) {
    if (rc == BATON_OK) return;
    char msg[512];
    baton_last_error_message(msg, sizeof msg);
    fprintf(stderr, "bench-bindings worker.c: %s: %s: %s\n", what, baton_result_name(rc), msg);
    exit(1);
}

/* User+sys CPU time of the process so far (every thread), in seconds. */
static double cpu_secs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *sorted, size_t n, double p) {
    if (n == 0) return 0;
    return sorted[(size_t)((double)(n - 1) * p + 0.5)];
}

static struct baton_client *client(const char *addr) {
    struct baton_client_options o = baton_client_options_default();
    o.address = addr;
    o.ca_file = getenv("CONSUL_CACERT"); /* NULL when unset: no CA file */
    struct baton_client *c = NULL;
    check("client", baton_client_new(&o, &c));
    return c;
}

static struct baton_lock *lock_on(struct baton_client *c, const char *key) {
    struct baton_lock *l = NULL;
    check("lock", baton_lock_new(c, key, NULL, &l));
    return l;
}

static void cycles(const char *addr, size_t n, const char *key) {
    struct baton_client *c = client(addr);
    struct baton_lock *l = lock_on(c, key);
    for (int i = 0; i < 300; i++) { /* warm-up: see run.py */
        check("acquire", baton_lock_acquire(l, LONG_MS, NULL));
        check("release", baton_lock_release(l));
    }
    double *lat = calloc(n, sizeof *lat);
    if (!lat) exit(1);
    double cpu = cpu_secs();
    double start = now_us();
    for (size_t i = 0; i < n; i++) {
        double t = now_us();
        check("acquire", baton_lock_acquire(l, LONG_MS, NULL));
        check("release", baton_lock_release(l));
        lat[i] = now_us() - t;
    }
    double secs = (now_us() - start) / 1e6;
    cpu = cpu_secs() - cpu;
    qsort(lat, n, sizeof *lat, cmp);
    printf("RESULT {\"cycles\": %zu, \"secs\": %f, \"p50_us\": %f, \"p99_us\": %f, \"cpu_secs\": %f}\n",
           n, secs, pct(lat, n, 0.5), pct(lat, n, 0.99), cpu);
    free(lat);
    baton_lock_free(l);
    check("close", baton_client_close(c, 5000));
    baton_client_free(c);
}

struct waiter {
    struct baton_lock *lock;
    double acquired_us;
};

static void *wait_for(void *arg) {
    struct waiter *w = arg;
    check("acquire (waiter)", baton_lock_acquire(w->lock, LONG_MS, NULL));
    w->acquired_us = now_us();
    return NULL;
}

static void handoff(const char *addr, size_t rounds, const char *key) {
    struct baton_client *a = client(addr), *b = client(addr);
    struct baton_lock *la = lock_on(a, key), *lb = lock_on(b, key);
    check("acquire", baton_lock_acquire(la, LONG_MS, NULL));
    double *lat = calloc(rounds, sizeof *lat);
    if (!lat) exit(1);
    struct baton_lock *holder = la, *waiting = lb;
    for (size_t i = 0; i < rounds; i++) {
        struct waiter w = {waiting, 0};
        pthread_t t;
        if (pthread_create(&t, NULL, wait_for, &w) != 0) exit(1);
        /* Let the waiter find the key held and park on it. */
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
        double released = now_us();
        check("release", baton_lock_release(holder));
        pthread_join(t, NULL);
        lat[i] = w.acquired_us - released;
        struct baton_lock *x = holder;
        holder = waiting;
        waiting = x;
    }
    check("release", baton_lock_release(holder));
    qsort(lat, rounds, sizeof *lat, cmp);
    printf("RESULT {\"rounds\": %zu, \"p50_us\": %f, \"p99_us\": %f}\n", rounds, pct(lat, rounds, 0.5),
           pct(lat, rounds, 0.99));
    free(lat);
    baton_lock_free(la);
    baton_lock_free(lb);
    check("close", baton_client_close(a, 5000));
    check("close", baton_client_close(b, 5000));
    baton_client_free(a);
    baton_client_free(b);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: worker-c ADDR cycles|handoff N KEY\n");
        return 2;
    }
    size_t n = (size_t)strtoul(argv[3], NULL, 10);
    if (strcmp(argv[2], "cycles") == 0) {
        cycles(argv[1], n, argv[4]);
    } else if (strcmp(argv[2], "handoff") == 0) {
        handoff(argv[1], n, argv[4]);
    } else {
        fprintf(stderr, "unknown mode %s (cycles or handoff)\n", argv[2]);
        return 2;
    }
    return 0;
}
