/* TLS, mutual TLS and ACLs through the C ABI, configured with the CONSUL_* variables as a C
 * program's user would (baton_client_new_from_env), against the dev servers that
 * with-tls-devservers.sh starts. Each refusal's message is checked for what it tells to set. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton.h"

static atomic_int passed, failed;

static char last[2048];

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (cond) {                                                                    \
            atomic_fetch_add(&passed, 1);                                              \
        } else {                                                                       \
            atomic_fetch_add(&failed, 1);                                              \
            fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
                    last);                                                             \
        }                                                                              \
    } while (0)

static const char *need(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) {
        fprintf(stderr, "%s is not set: run under with-tls-devservers.sh\n", name);
        exit(2);
    }
    return v;
}

/* A path in BATON_TLS_DIR (a static buffer per call site is enough: used at once). */
static const char *in_dir(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/%s", need("BATON_TLS_DIR"), name);
    return buf;
}

static const char *VARS[] = {"CONSUL_HTTP_ADDR",   "CONSUL_HTTP_SSL",   "CONSUL_HTTP_SSL_VERIFY",
                             "CONSUL_CACERT",      "CONSUL_CAPATH",     "CONSUL_CLIENT_CERT",
                             "CONSUL_CLIENT_KEY",  "CONSUL_TLS_SERVER_NAME", "CONSUL_HTTP_TOKEN"};

/* A client from exactly these NAME, VALUE pairs (NULL-terminated), the rest unset. */
static baton_client *client_with(const char *first, ...) {
    for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) unsetenv(VARS[i]);
    va_list ap;
    va_start(ap, first);
    for (const char *name = first; name; name = va_arg(ap, const char *)) {
        const char *value = va_arg(ap, const char *);
        setenv(name, value, 1);
    }
    va_end(ap);
    baton_client *c = NULL;
    baton_result rc = baton_client_new_from_env(&c);
    baton_last_error_message(last, sizeof last);
    CHECK(rc == BATON_OK);
    return c;
}

/* A put and a read back. */
static bool round_trip(baton_client *c) {
    const char *v = "over tls";
    baton_result rc = baton_kv_put(c, "tls/c", (const uint8_t *)v, strlen(v));
    baton_last_error_message(last, sizeof last);
    if (rc != BATON_OK) return false;
    uint8_t buf[64];
    size_t n = 0;
    bool found = false;
    rc = baton_kv_get(c, "tls/c", NULL, buf, sizeof buf, &n, &found);
    return rc == BATON_OK && found && n == strlen(v) && memcmp(buf, v, n) == 0;
}

/* The result of a put, its message in `last`. */
static baton_result refused(baton_client *c) {
    baton_result rc = baton_kv_put(c, "tls/c", (const uint8_t *)"x", 1);
    baton_last_error_message(last, sizeof last);
    printf("refused as: %s\n", last);
    return rc;
}

static bool says(const char *needle) { return strstr(last, needle) != NULL; }

static void test_tls(void) {
    char ca[512], other[512], capath[512], cert[512], key[512], self[512];
    in_dir(ca, sizeof ca, "consul-agent-ca.pem");
    in_dir(other, sizeof other, "other/other-agent-ca.pem");
    in_dir(capath, sizeof capath, "capath");
    in_dir(cert, sizeof cert, "dc1-client-consul-0.pem");
    in_dir(key, sizeof key, "dc1-client-consul-0-key.pem");
    in_dir(self, sizeof self, "self-signed.pem");
    const char *https = need("BATON_TLS_HTTPS"), *mtls = need("BATON_TLS_MTLS"),
               *selfsigned = need("BATON_TLS_SELF_SIGNED");
    baton_client *c;

    /* Verified server. */
    c = client_with("CONSUL_HTTP_ADDR", https, "CONSUL_CACERT", ca, NULL);
    CHECK(round_trip(c));
    baton_client_free(c);

    /* Unknown CA: none configured, then the wrong one. */
    c = client_with("CONSUL_HTTP_ADDR", https, NULL);
    CHECK(refused(c) == BATON_CONNECTION);
    CHECK(!baton_last_error_is_transient());
    CHECK(says("signed by a CA this client does not trust: set CONSUL_CACERT"));
    baton_client_free(c);
    c = client_with("CONSUL_HTTP_ADDR", https, "CONSUL_CACERT", other, NULL);
    CHECK(refused(c) == BATON_CONNECTION);
    CHECK(says("signed by none of the CAs in CONSUL_CACERT="));
    baton_client_free(c);

    /* Wrong name, then the right one through CONSUL_TLS_SERVER_NAME. */
    c = client_with("CONSUL_HTTP_ADDR", https, "CONSUL_CACERT", ca, "CONSUL_TLS_SERVER_NAME",
                    "consul.example.com", NULL);
    CHECK(refused(c) == BATON_CONNECTION);
    CHECK(says("not valid for the name \"consul.example.com\""));
    CHECK(says("set CONSUL_TLS_SERVER_NAME to a name the certificate holds"));
    baton_client_free(c);
    c = client_with("CONSUL_HTTP_ADDR", https, "CONSUL_CACERT", ca, "CONSUL_TLS_SERVER_NAME",
                    "server.dc1.consul", NULL);
    CHECK(round_trip(c));
    baton_client_free(c);

    /* CONSUL_HTTP_SSL_VERIFY=false and CONSUL_CAPATH. */
    c = client_with("CONSUL_HTTP_ADDR", https, "CONSUL_HTTP_SSL_VERIFY", "false", NULL);
    CHECK(round_trip(c));
    baton_client_free(c);
    c = client_with("CONSUL_HTTP_ADDR", https, "CONSUL_CAPATH", capath, NULL);
    CHECK(round_trip(c));
    baton_client_free(c);

    /* A CA:TRUE certificate as the server's. */
    c = client_with("CONSUL_HTTP_ADDR", selfsigned, "CONSUL_CACERT", self, NULL);
    CHECK(refused(c) == BATON_CONNECTION);
    CHECK(says("CaUsedAsEndEntity"));
    CHECK(says("the server presents a CA certificate (CA:TRUE"));
    baton_client_free(c);

    /* mTLS without, then with a client certificate. */
    c = client_with("CONSUL_HTTP_ADDR", mtls, "CONSUL_CACERT", ca, NULL);
    CHECK(refused(c) == BATON_CONNECTION);
    CHECK(says("set CONSUL_CLIENT_CERT and CONSUL_CLIENT_KEY"));
    baton_client_free(c);
    c = client_with("CONSUL_HTTP_ADDR", mtls, "CONSUL_CACERT", ca, "CONSUL_CLIENT_CERT", cert,
                    "CONSUL_CLIENT_KEY", key, NULL);
    CHECK(round_trip(c));

    /* A lock and an election over mTLS. */
    baton_client *b = client_with("CONSUL_HTTP_ADDR", mtls, "CONSUL_CACERT", ca,
                                  "CONSUL_CLIENT_CERT", cert, "CONSUL_CLIENT_KEY", key,
                                  "CONSUL_TLS_SERVER_NAME", "server.dc1.consul", NULL);
    baton_lock *la = NULL, *lb = NULL;
    CHECK(baton_lock_new(c, "tls/c-lock", NULL, &la) == BATON_OK);
    CHECK(baton_lock_new(b, "tls/c-lock", NULL, &lb) == BATON_OK);
    CHECK(baton_lock_acquire(la, 20000, NULL) == BATON_OK);
    CHECK(baton_lock_is_held(la));
    CHECK(baton_lock_acquire(lb, 0, NULL) == BATON_TIMEOUT);
    CHECK(baton_lock_release(la) == BATON_OK);
    CHECK(baton_lock_acquire(lb, 20000, NULL) == BATON_OK);
    CHECK(baton_lock_release(lb) == BATON_OK);
    baton_lock_free(la);
    baton_lock_free(lb);
    baton_election *e = NULL;
    CHECK(baton_election_new(c, "tls/c-leader", NULL, &e) == BATON_OK);
    CHECK(baton_election_campaign(e, (const uint8_t *)"c", 1, 20000, NULL) == BATON_OK);
    baton_leader leader;
    uint8_t value[16];
    CHECK(baton_election_leader(b, "tls/c-leader", &leader, value, sizeof value) == BATON_OK);
    CHECK(leader.has_leader && leader.value_len == 1 && value[0] == 'c');
    CHECK(baton_election_resign(e) == BATON_OK);
    baton_election_free(e);
    CHECK(baton_client_close(c, 10000) == BATON_OK);
    CHECK(baton_client_close(b, 10000) == BATON_OK);
    baton_client_free(c);
    baton_client_free(b);
}

/* Acquiring `key` with `token` (NULL: none): the result, its message in `last`. */
static baton_result lock_as(const char *token, const char *key) {
    const char *addr = need("BATON_ACL_ADDR");
    baton_client *c = token ? client_with("CONSUL_HTTP_ADDR", addr, "CONSUL_HTTP_TOKEN", token, NULL)
                            : client_with("CONSUL_HTTP_ADDR", addr, NULL);
    baton_lock *l = NULL;
    baton_result rc = baton_lock_new(c, key, NULL, &l);
    if (rc == BATON_OK) {
        rc = baton_lock_acquire(l, 20000, NULL);
        baton_last_error_message(last, sizeof last);
        if (rc == BATON_OK) {
            baton_result released = baton_lock_release(l);
            CHECK(released == BATON_OK);
        } else {
            printf("refused as: %s\n", last);
        }
    }
    baton_lock_free(l);
    baton_client_free(c);
    return rc;
}

static void test_acl(void) {
    const char *reader = need("BATON_ACL_READER"), *no_session = need("BATON_ACL_NO_SESSION"),
               *locker = need("BATON_ACL_LOCKER");
    CHECK(lock_as(locker, "jobs/c") == BATON_OK);

    CHECK(lock_as(reader, "jobs/c") == BATON_PERMISSION_DENIED);
    CHECK(says("key:write on \"jobs/c\""));
    CHECK(!says("session:write"));
    CHECK(!says(reader));

    CHECK(lock_as(no_session, "jobs/c") == BATON_PERMISSION_DENIED);
    CHECK(says("lacks permission 'session:write' on \"baton-dev\""));
    CHECK(says("the ACL token lacks session:write on the node \"baton-dev\""));
    CHECK(!says(no_session));

    CHECK(lock_as(NULL, "jobs/c") == BATON_PERMISSION_DENIED);
    CHECK(says("no ACL token was sent"));
    CHECK(says("set CONSUL_HTTP_TOKEN"));

    CHECK(lock_as("unknown-s3cret-token", "jobs/c") == BATON_PERMISSION_DENIED);
    CHECK(says("ACL not found"));
    CHECK(!says("unknown-s3cret-token"));
}

int main(void) {
    test_tls();
    test_acl();
    printf("%d passed, %d failed\n", atomic_load(&passed), atomic_load(&failed));
    fflush(stdout);
    return atomic_load(&failed) == 0 ? 0 : 1;
}
