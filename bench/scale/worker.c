/* The C worker of `make bench-scale` (bench/scale/run.py drives it; same protocol as
 * src/main.rs, worker.py and worker.js), held mode only (C has no waiting call without a
 * thread of its caller's):
 *
 *   worker-c ADDR held N NAMES HOLD   N locks held for HOLD seconds, named prefixed, flat,
 *                                     segments or random (see run.py)
 *
 * Prints HOLDING and RELEASING around the hold, then one line, `RESULT {json}`. */
#define _XOPEN_SOURCE 700
#include <baton.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fail(const char *what, baton_result rc) {
    char msg[512];
    baton_last_error_message(msg, sizeof msg);
    fprintf(stderr, "bench-scale worker.c: %s: %s: %s\n", what, baton_result_name(rc), msg);
}

/* A number from /proc/self/status ("Threads:", "VmRSS:"). */
static long status_field(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    long v = 0;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, n) == 0) {
            v = strtol(line + n, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

static long sockets(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 0;
    long count = 0;
    struct dirent *e;
    char path[300], target[128];
    while ((e = readdir(d)) != NULL) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len > 0) {
            target[len] = 0;
            if (strncmp(target, "socket:", 7) == 0) count++;
        }
    }
    closedir(d);
    return count;
}

static void key_name(char *out, size_t size, const char *names, const char *run, size_t i) {
    if (strcmp(names, "prefixed") == 0) {
        snprintf(out, size, "scale/%s/k-%zu", run, i);
    } else if (strcmp(names, "flat") == 0) {
        snprintf(out, size, "%s-k-%zu", run, i);
    } else if (strcmp(names, "random") == 0) {
        /* 32 hex digits shared with nothing (drand48 seeded by the process and the clock). */
        snprintf(out, size, "%08lx%08lx%08lx%08lx", (unsigned long)lrand48(),
                 (unsigned long)lrand48(), (unsigned long)lrand48(), (unsigned long)lrand48());
    } else {
        snprintf(out, size, "%s-%zu/lock", run, i);
    }
}

int main(int argc, char **argv) {
    if (argc != 6 || strcmp(argv[2], "held") != 0) {
        fprintf(stderr, "usage: worker-c ADDR held N NAMES HOLD\n");
        return 2;
    }
    const char *addr = argv[1], *names = argv[4];
    size_t n = (size_t)strtoul(argv[3], NULL, 10);
    double hold = strtod(argv[5], NULL);
    srand48((long)getpid() ^ (long)(now_s() * 1e6));
    char run[32];
    snprintf(run, sizeof run, "c%ld", (long)getpid());

    struct baton_client_options o = baton_client_options_default();
    o.address = addr;
    struct baton_client *c = NULL;
    baton_result rc = baton_client_new(&o, &c);
    if (rc != BATON_OK) {
        fail("client", rc);
        return 1;
    }
    long threads_before = status_field("Threads:");
    struct baton_lock **locks = calloc(n, sizeof *locks);
    if (!locks) return 1;
    char key[128];
    for (size_t i = 0; i < n; i++) {
        key_name(key, sizeof key, names, run, i);
        rc = baton_lock_new(c, key, NULL, &locks[i]);
        if (rc != BATON_OK) {
            fail("lock", rc);
            return 1;
        }
    }
    size_t failed = 0, lost = 0, release_failed = 0;
    double started = now_s();
    for (size_t i = 0; i < n; i++) {
        rc = baton_lock_acquire(locks[i], 30000, NULL);
        if (rc != BATON_OK) {
            fail("acquire", rc);
            failed++;
        }
    }
    double acquire_secs = now_s() - started;
    long pt = status_field("Threads:"), ps = sockets(), pr = status_field("VmRSS:");
    printf("HOLDING\n");
    fflush(stdout);
    double end = now_s() + hold;
    while (now_s() < end) {
        struct timespec pause = {0, 200 * 1000 * 1000};
        nanosleep(&pause, NULL);
        long t = status_field("Threads:"), s = sockets(), r = status_field("VmRSS:");
        if (t > pt) pt = t;
        if (s > ps) ps = s;
        if (r > pr) pr = r;
    }
    printf("RELEASING\n");
    fflush(stdout);
    for (size_t i = 0; i < n; i++) {
        if (!baton_lock_is_held(locks[i])) lost++;
    }
    lost -= failed;
    started = now_s();
    for (size_t i = 0; i < n; i++) {
        rc = baton_lock_release(locks[i]);
        if (rc != BATON_OK) {
            fail("release", rc);
            release_failed++;
        }
    }
    double release_secs = now_s() - started;
    for (size_t i = 0; i < n; i++) baton_lock_free(locks[i]);
    free(locks);
    rc = baton_client_close(c, 30000);
    if (rc != BATON_OK) fail("close", rc);
    baton_client_free(c);
    printf("RESULT {\"lang\": \"c\", \"mode\": \"held\", \"n\": %zu, \"names\": \"%s\", "
           "\"hold_secs\": %g, \"threads_before\": %ld, \"threads_peak\": %ld, "
           "\"threads_after\": %ld, \"sockets_peak\": %ld, \"rss_peak_kib\": %ld, "
           "\"acquire_failed\": %zu, \"lost\": %zu, \"release_failed\": %zu, "
           "\"acquire_secs\": %.3f, \"release_secs\": %.3f}\n",
           n, names, hold, threads_before, pt, status_field("Threads:"), ps, pr, failed, lost,
           release_failed, acquire_secs, release_secs);
    return rc == BATON_OK ? 0 : 1;
}
