/* Moving money between two accounts under one multi-key lock.
 *
 *   multilock_transfer [AMOUNT]                        (uses CONSUL_HTTP_ADDR)
 *
 * The lock takes both account keys in one transaction, all or none, so two transfers
 * touching the same account never interleave, and one that waits holds neither key. The
 * balances are written in one transaction guarded by the lock's sequencer: should the lock
 * be lost meanwhile (a paused process, a lost session), Consul refuses the write instead
 * of applying a stale transfer. Prints both balances and the fencing token. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <baton.h>

static const char *const ACCOUNTS[2] = {"bank/accounts/alice", "bank/accounts/bob"};
static const char *const BALANCES[2] = {"bank/balances/alice", "bank/balances/bob"};

static int die(const char *what, baton_result rc) {
    char msg[512];
    baton_last_error_message(msg, sizeof msg);
    fprintf(stderr, "multilock_transfer: %s: %s: %s\n", what, baton_result_name(rc), msg);
    return 1;
}

/* A balance as stored (decimal), or `initial` when the key does not exist yet. */
static baton_result read_balance(baton_client *c, const char *key, long initial, long *out) {
    char buf[32] = {0};
    size_t n = 0;
    bool found = false;
    baton_result rc = baton_kv_get(c, key, NULL, (uint8_t *)buf, sizeof buf - 1, &n, &found);
    if (rc == BATON_OK) *out = found ? strtol(buf, NULL, 10) : initial;
    return rc;
}

int main(int argc, char **argv) {
    long amount = argc > 1 ? strtol(argv[1], NULL, 10) : 10;
    if (!getenv("CONSUL_HTTP_ADDR")) {
        fprintf(stderr, "multilock_transfer: set CONSUL_HTTP_ADDR to a Consul agent "
                        "(e.g. 127.0.0.1:8500, or what `baton-devserver --port 0` prints)\n");
        return 2;
    }
    baton_client *c = NULL;
    baton_multilock *lock = NULL;
    baton_result rc = baton_client_new_from_env(&c);
    if (rc != BATON_OK) return die("client", rc);
    rc = baton_multilock_new(c, ACCOUNTS, 2, NULL, &lock);
    if (rc != BATON_OK) return die("multi-key lock", rc);

    int status = 1;
    rc = baton_multilock_acquire(lock, 10000, NULL); /* both accounts, or neither */
    if (rc != BATON_OK) {
        die("acquire", rc);
        goto out;
    }
    long balance[2];
    if ((rc = read_balance(c, BALANCES[0], 100, &balance[0])) != BATON_OK ||
        (rc = read_balance(c, BALANCES[1], 0, &balance[1])) != BATON_OK) {
        die("read balances", rc);
        goto out;
    }
    if (balance[0] < amount) {
        fprintf(stderr, "multilock_transfer: alice has %ld, cannot move %ld\n", balance[0],
                amount);
        goto out;
    }
    balance[0] -= amount;
    balance[1] += amount;

    char seq[512];
    uint64_t token = 0;
    rc = baton_multilock_sequencer(lock, seq, sizeof seq, NULL, &token);
    if (rc != BATON_OK) {
        die("sequencer", rc);
        goto out;
    }
    char text[2][32];
    baton_txn_op ops[2];
    memset(ops, 0, sizeof ops);
    for (int i = 0; i < 2; i++) {
        snprintf(text[i], sizeof text[i], "%ld", balance[i]);
        ops[i].verb = BATON_TXN_SET;
        ops[i].key = BALANCES[i];
        ops[i].value = (const uint8_t *)text[i];
        ops[i].value_len = strlen(text[i]);
    }
    /* Applied only while this holding is current: a stale holder's write is refused. */
    rc = baton_guarded_txn(c, seq, ops, 2);
    if (rc != BATON_OK) {
        die("fenced write", rc);
        goto out;
    }
    printf("moved %ld under token %" PRIu64 ": alice %ld, bob %ld\n", amount, token, balance[0],
           balance[1]);
    status = 0;

out:
    if (baton_multilock_is_held(lock) && (rc = baton_multilock_release(lock)) != BATON_OK) {
        die("release", rc);
        status = 1;
    }
    baton_multilock_free(lock);
    baton_client_close(c, 5000);
    baton_client_free(c);
    return status;
}
