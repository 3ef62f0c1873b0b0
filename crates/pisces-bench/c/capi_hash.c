/*
 * The operations of the `capi` workload of `pisces-bench`, issued from C through the C
 * interface (include/pisces.h): the hash-table operations of the `hash` workload, one
 * transaction (`pisces_run`) per operation, on a `pisces_hmap` with 8-byte keys and
 * 64-byte values.
 *
 * An update removes the key if present and inserts it (with its 64-byte value) if
 * absent; a lookup finds the value in place (pisces_hmap_find, no copy, as the Rust
 * side's get_ref) and reads its last byte. The Rust side of the
 * harness picks the keys and times each call, exactly as for the `hash` workload, so
 * the two differ only in how the transaction is issued.
 *
 * Compiled by the bench crate's build.rs (the `cc` crate) and linked into the harness,
 * which links the C interface (`pisces-capi`) too.
 */
#include "pisces.h"

/* One operation's arguments and results; the Rust side fills in `map` and `key` and
 * reads the results (its `OpCtx` has the same layout). */
struct op_ctx {
    pisces_hmap map;
    uint64_t key;
    uint64_t changed; /* bytes the program changed (the `hash` workload's count) */
    unsigned char seen;
};

/* The 64-byte value of key k: word i is k ^ i, little-endian (as the Rust side). */
static void value_of(uint64_t k, unsigned char v[64]) {
    for (int i = 0; i < 8; i++) {
        uint64_t w = k ^ (uint64_t)i;
        for (int b = 0; b < 8; b++) v[8 * i + b] = (unsigned char)(w >> (8 * b));
    }
}

static int update_tx(pisces_tx tx, void *p) {
    struct op_ctx *c = p;
    int found = 0;
    int rc = pisces_hmap_remove(tx, c->map, c->key, NULL, &found);
    if (rc != PISCES_OK) return rc;
    if (found) {
        c->changed = 8;
        return PISCES_OK;
    }
    unsigned char v[64];
    value_of(c->key, v);
    rc = pisces_hmap_insert(tx, c->map, c->key, v, NULL);
    if (rc != PISCES_OK) return rc;
    c->changed = 80; /* key, value and the link to the node (hash.rs INSERT_CHANGED) */
    return PISCES_OK;
}

static int lookup_tx(pisces_tx tx, void *p) {
    struct op_ctx *c = p;
    const unsigned char *v;
    int rc = pisces_hmap_find(tx, c->map, c->key, (const void **)&v);
    if (rc != PISCES_OK) return rc;
    c->seen = v ? v[63] : 0;
    return PISCES_OK;
}

/*
 * One operation through handle `h` on `c->map` and `c->key`: an update if `update`,
 * else a lookup. Returns the pisces_run code; on success `c->changed` = bytes changed
 * (8 for a remove, 80 for an insert, 0 for a lookup) and `c->seen` = the last byte of
 * the value looked up (0 when absent).
 */
int pisces_bench_hash_op(pisces_handle *h, struct op_ctx *c, int update) {
    c->changed = 0;
    c->seen = 0;
    return pisces_run(h, update ? update_tx : lookup_tx, c);
}
