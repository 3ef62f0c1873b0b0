/* bank: money moves between accounts in transactions; an auditor checks that the
 * total never changes, also across crashes (see bank_crash_loop.sh).
 *
 *   bank POOL init [ACCOUNTS [BALANCE [ENGINE]]]   create the pool and the accounts
 *   bank POOL run [SECONDS [THREADS]]              transfer (0 s = until killed)
 *   bank POOL audit                                open (recovering), check, exit 0/1
 *
 * Accounts live in a persistent hash map (key: account number, value: balance and
 * number of transfers). Transfer threads use pisces_run (callbacks, retried by the
 * library); thread 0 uses explicit transactions (pisces_tx_begin/commit) and retries
 * conflicts itself. An auditor thread sums all balances in read-only transactions:
 * each sees one snapshot, so the sum must always equal the initial total.
 */
#define _GNU_SOURCE
#include "pisces.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x42414e4b424e4b31ull /* "BANKBNK1" */
#define INSUFFICIENT (PISCES_USER + 1)

struct root {
    uint64_t magic;
    uint64_t accounts;
    int64_t total;
    uint64_t unused;
    pisces_hmap map; /* account -> struct account */
};

struct account {
    int64_t balance;
    uint64_t transfers;
};

static pisces_pool *pool;
static uint64_t root_off;
static struct root root; /* a copy: it does not change after init */
static atomic_int stop;
static atomic_ulong committed, insufficient, conflicts_seen, audits;

static void die(const char *what, int rc) {
    fprintf(stderr, "bank: %s: %s (%d): %s\n", what, pisces_strerror(rc), rc, pisces_errmsg());
    exit(2);
}

static uint64_t rng(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* ---- init ------------------------------------------------------------------- */

struct init_ctx {
    uint64_t accounts;
    int64_t balance;
};

static int init_tx(pisces_tx tx, void *vctx) {
    struct init_ctx *c = vctx;
    struct root *r;
    int rc = pisces_write(tx, root_off, sizeof *r, (void **)&r);
    if (rc) return rc;
    r->magic = MAGIC;
    r->accounts = c->accounts;
    r->total = (int64_t)c->accounts * c->balance;
    pisces_hmap map;
    /* r is not used after this point: pisces_hmap_create may move it. */
    rc = pisces_hmap_create(tx, c->accounts / 4 + 1, sizeof(struct account), &map);
    if (rc) return rc;
    for (uint64_t a = 0; a < c->accounts; a++) {
        struct account acct = {c->balance, 0};
        rc = pisces_hmap_insert(tx, map, a, &acct, NULL);
        if (rc) return rc;
    }
    return pisces_put(tx, root_off, offsetof(struct root, map), &map, sizeof map);
}

/* ---- audit ------------------------------------------------------------------ */

struct audit_ctx {
    int64_t sum;
    uint64_t count;
    uint64_t transfers;
    int negative;
};

static int audit_entry(uint64_t key, const void *value, void *vctx) {
    (void)key;
    struct audit_ctx *a = vctx;
    const struct account *acct = value;
    a->sum += acct->balance;
    a->transfers += acct->transfers;
    a->count++;
    if (acct->balance < 0) a->negative++;
    return 0;
}

static int audit_tx(pisces_tx tx, void *vctx) {
    struct audit_ctx *a = vctx;
    memset(a, 0, sizeof *a);
    return pisces_hmap_foreach(tx, root.map, audit_entry, a);
}

/* 0 if the invariant holds; prints what it found. */
static int audit(pisces_handle *h, int verbose) {
    struct audit_ctx a;
    pisces_tx_options ro = {.read_only = 1};
    int rc = pisces_run_with(h, &ro, audit_tx, &a);
    if (rc) die("audit transaction", rc);
    int ok = a.sum == root.total && a.count == root.accounts && a.negative == 0;
    if (!ok || verbose)
        printf("audit %s: %llu accounts, total %lld (expected %lld), %llu transfers%s\n",
               ok ? "ok" : "FAILED", (unsigned long long)a.count, (long long)a.sum,
               (long long)root.total, (unsigned long long)(a.transfers / 2),
               a.negative ? ", NEGATIVE BALANCES" : "");
    return ok ? 0 : 1;
}

static void *auditor(void *arg) {
    (void)arg;
    pisces_handle *h;
    int rc = pisces_handle_open(pool, &h);
    if (rc) die("auditor handle", rc);
    while (!atomic_load(&stop)) {
        if (audit(h, 0) != 0) {
            fprintf(stderr, "bank: the auditor found a broken invariant\n");
            exit(1);
        }
        atomic_fetch_add(&audits, 1);
        usleep(20000);
    }
    pisces_handle_close(h);
    return NULL;
}

/* ---- transfers -------------------------------------------------------------- */

struct transfer {
    uint64_t from, to;
    int64_t amount;
};

/* The body of one transfer; works in callback and explicit transactions alike. */
static int transfer_body(pisces_tx tx, const struct transfer *t) {
    struct account a, b;
    int found;
    int rc = pisces_hmap_get(tx, root.map, t->from, &a, &found);
    if (rc) return rc;
    if (!found) return PISCES_EPTR;
    if (a.balance < t->amount) return INSUFFICIENT; /* rolls back: nothing written */
    rc = pisces_hmap_get(tx, root.map, t->to, &b, &found);
    if (rc) return rc;
    if (!found) return PISCES_EPTR;
    a.balance -= t->amount;
    a.transfers++;
    b.balance += t->amount;
    b.transfers++;
    rc = pisces_hmap_insert(tx, root.map, t->from, &a, NULL);
    if (rc) return rc;
    return pisces_hmap_insert(tx, root.map, t->to, &b, NULL);
}

static int transfer_cb(pisces_tx tx, void *vctx) { return transfer_body(tx, vctx); }

static void pick(uint64_t *s, struct transfer *t) {
    t->from = rng(s) % root.accounts;
    do t->to = rng(s) % root.accounts;
    while (t->to == t->from);
    t->amount = (int64_t)(rng(s) % 100) + 1;
}

static void *transferrer(void *arg) {
    long id = (long)arg;
    uint64_t seed = 0x9E3779B97F4A7C15ull * (uint64_t)(id + 1) ^ (uint64_t)time(NULL);
    pisces_handle *h;
    int rc = pisces_handle_open(pool, &h);
    if (rc) die("transfer handle", rc);
    while (!atomic_load(&stop)) {
        struct transfer t;
        pick(&seed, &t);
        if (id == 0) {
            /* Explicit transactions: retry conflicts by hand. */
            for (;;) {
                pisces_tx tx;
                rc = pisces_tx_begin(h, NULL, &tx);
                if (rc) die("begin", rc);
                rc = transfer_body(tx, &t);
                if (rc == PISCES_OK) {
                    rc = pisces_tx_commit(tx);
                    if (rc == PISCES_ECONFLICT) {
                        atomic_fetch_add(&conflicts_seen, 1);
                        continue;
                    }
                    if (rc) die("commit", rc);
                    break;
                }
                int arc = pisces_tx_abort(tx);
                if (arc) die("abort", arc);
                if (rc == PISCES_ECONFLICT) {
                    atomic_fetch_add(&conflicts_seen, 1);
                    usleep(50);
                    continue;
                }
                break; /* INSUFFICIENT or a real error, handled below */
            }
        } else {
            rc = pisces_run(h, transfer_cb, &t);
        }
        if (rc == PISCES_OK)
            atomic_fetch_add(&committed, 1);
        else if (rc == INSUFFICIENT)
            atomic_fetch_add(&insufficient, 1);
        else
            die("transfer", rc);
    }
    pisces_handle_close(h);
    return NULL;
}

/* ---- main ------------------------------------------------------------------- */

static void load_root(void) {
    int rc = pisces_root(pool, sizeof(struct root), &root_off);
    if (rc) die("root", rc);
    pisces_handle *h;
    rc = pisces_handle_open(pool, &h);
    if (rc) die("handle", rc);
    pisces_tx tx;
    rc = pisces_tx_begin(h, NULL, &tx);
    if (rc) die("begin", rc);
    const struct root *r;
    rc = pisces_read(tx, root_off, sizeof root, (const void **)&r);
    if (rc) die("read root", rc);
    root = *r; /* copy before the transaction ends */
    rc = pisces_tx_commit(tx);
    if (rc) die("commit", rc);
    pisces_handle_close(h);
    if (root.magic != MAGIC) {
        fprintf(stderr, "bank: the pool has no bank (run `bank POOL init` first)\n");
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s POOL init [ACCOUNTS [BALANCE [ENGINE]]] | run [SECONDS [THREADS]] | audit\n",
                argv[0]);
        return 2;
    }
    const char *path = argv[1], *cmd = argv[2];
    pisces_config cfg;
    pisces_config_init(&cfg);
    cfg.size = 64 << 20;
    cfg.max_threads = 8;
    int rc;

    if (strcmp(cmd, "init") == 0) {
        struct init_ctx c = {argc > 3 ? strtoull(argv[3], NULL, 10) : 64,
                             argc > 4 ? strtoll(argv[4], NULL, 10) : 1000};
        cfg.engine = argc > 5 ? argv[5] : NULL;
        if (c.accounts < 2) c.accounts = 2;
        rc = pisces_pool_create(path, &cfg, &pool);
        if (rc) die("create", rc);
        rc = pisces_root(pool, sizeof(struct root), &root_off);
        if (rc) die("root", rc);
        pisces_handle *h;
        rc = pisces_handle_open(pool, &h);
        if (rc) die("handle", rc);
        rc = pisces_run(h, init_tx, &c);
        if (rc) die("init", rc);
        pisces_handle_close(h);
        load_root();
        printf("bank: %llu accounts of %lld on engine %s\n", (unsigned long long)root.accounts,
               (long long)c.balance, pisces_pool_engine(pool));
        return pisces_pool_close(pool) ? 2 : 0;
    }

    rc = pisces_pool_open(path, &cfg, &pool);
    if (rc) die("open", rc);
    load_root();

    if (strcmp(cmd, "audit") == 0) {
        pisces_handle *h;
        rc = pisces_handle_open(pool, &h);
        if (rc) die("handle", rc);
        int bad = audit(h, 1);
        pisces_handle_close(h);
        pisces_pool_close(pool);
        return bad;
    }

    if (strcmp(cmd, "run") == 0) {
        double seconds = argc > 3 ? atof(argv[3]) : 2;
        long threads = argc > 4 ? atol(argv[4]) : 3;
        if (threads < 1) threads = 1;
        if (threads > 6) threads = 6;
        pthread_t aud, tr[6];
        pthread_create(&aud, NULL, auditor, NULL);
        for (long i = 0; i < threads; i++) pthread_create(&tr[i], NULL, transferrer, (void *)i);
        if (seconds > 0) {
            usleep((useconds_t)(seconds * 1e6));
            atomic_store(&stop, 1);
        } else {
            for (;;) pause(); /* until killed */
        }
        for (long i = 0; i < threads; i++) pthread_join(tr[i], NULL);
        pthread_join(aud, NULL);
        printf("bank: %lu transfers, %lu refused (insufficient funds), %lu explicit conflicts retried, %lu audits\n",
               atomic_load(&committed), atomic_load(&insufficient), atomic_load(&conflicts_seen),
               atomic_load(&audits));
        pisces_handle *h;
        rc = pisces_handle_open(pool, &h);
        if (rc) die("handle", rc);
        int bad = audit(h, 1);
        pisces_handle_close(h);
        pisces_pool_close(pool);
        return bad;
    }
    fprintf(stderr, "bank: unknown command %s\n", cmd);
    return 2;
}
