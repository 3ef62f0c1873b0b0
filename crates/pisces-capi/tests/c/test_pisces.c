/* C test suite of libpisces: every function of pisces.h and its error paths.
 *
 * Build (ci.sh does this):
 *   cc -Wall -Werror -Iinclude tests/c/test_pisces.c -Ltarget/release -lpisces -lpthread
 * Run: ./test_pisces [DIR]   (pools are created in DIR, default a new /tmp directory)
 */
#define _GNU_SOURCE
#include "pisces.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int checks = 0;
static int failures = 0;
static const char *current_test = "";

/* A plain assert that also prints the library's message and keeps counting. */
#define CHECK(cond)                                                                  \
    do {                                                                             \
        checks++;                                                                    \
        if (!(cond)) {                                                               \
            failures++;                                                              \
            fprintf(stderr, "FAIL %s:%d [%s]: %s (errmsg: %s)\n", __FILE__, __LINE__, \
                    current_test, #cond, pisces_errmsg());                           \
        }                                                                            \
    } while (0)

#define EXPECT(call, code) CHECK((call) == (code))
#define OK(call) EXPECT(call, PISCES_OK)

static char dir[256];
static int pool_seq = 0;

static void pool_path(char *buf, size_t n, const char *tag) {
    snprintf(buf, n, "%s/%s-%d.pool", dir, tag, pool_seq++);
}

static pisces_config small_config(const char *engine) {
    pisces_config cfg;
    pisces_config_init(&cfg);
    cfg.size = 16 << 20;
    cfg.max_threads = 4;
    cfg.log_bytes_per_thread = 256 << 10;
    cfg.engine = engine;
    return cfg;
}

static pisces_pool *new_pool(const char *engine, char *path_out, size_t n) {
    char path[512];
    pool_path(path, sizeof path, engine ? engine : "default");
    pisces_config cfg = small_config(engine);
    pisces_pool *p = NULL;
    OK(pisces_pool_create(path, &cfg, &p));
    CHECK(p != NULL);
    if (path_out) snprintf(path_out, n, "%s", path);
    return p;
}

/* ------------------------------------------------------------------------------ */

static void test_engines_and_strings(void) {
    current_test = "engines";
    size_t n = pisces_engine_count();
    CHECK(n >= 4);
    int saw_pisces = 0, saw_undo = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = pisces_engine_name(i);
        CHECK(name != NULL && name[0] != 0);
        if (strcmp(name, "pisces") == 0) saw_pisces = 1;
        if (strcmp(name, "undo") == 0) saw_undo = 1;
        int a = pisces_engine_available(name);
        CHECK(a == 0 || a == 1);
    }
    CHECK(saw_pisces && saw_undo);
    CHECK(pisces_engine_name(n) == NULL);
    CHECK(pisces_engine_available("pisces") == 1);
    CHECK(pisces_engine_available("nope") == -1);
    CHECK(pisces_engine_available(NULL) == -1);

    for (int c = 0; c <= PISCES_EVALUESIZE; c++) {
        const char *s = pisces_strerror(c);
        CHECK(s != NULL && s[0] != 0 && strcmp(s, "unknown code") != 0);
    }
    CHECK(strcmp(pisces_strerror(12345), "unknown code") == 0);
    CHECK(pisces_errmsg() != NULL);

    EXPECT(pisces_config_init(NULL), PISCES_EINVAL);
    CHECK(strstr(pisces_errmsg(), "NULL") != NULL);
    pisces_config cfg;
    OK(pisces_config_init(&cfg));
    CHECK(cfg.size == 64u << 20 && cfg.max_threads == 8 && cfg.engine == NULL);

    CHECK(pisces_value_size_supported(8) == 1);
    CHECK(pisces_value_size_supported(1024) == 1);
    CHECK(pisces_value_size_supported(7) == 0);
    CHECK(pisces_value_size_supported(0) == 0);
}

static void test_pool_lifecycle(void) {
    current_test = "pool";
    char path[512];
    pool_path(path, sizeof path, "life");
    pisces_pool *p = NULL;
    pisces_config cfg = small_config(NULL);

    EXPECT(pisces_pool_create(NULL, &cfg, &p), PISCES_EINVAL);
    EXPECT(pisces_pool_create(path, &cfg, NULL), PISCES_EINVAL);
    EXPECT(pisces_pool_open(NULL, &cfg, &p), PISCES_EINVAL);
    EXPECT(pisces_pool_open(path, &cfg, NULL), PISCES_EINVAL);
    EXPECT(pisces_pool_open(path, &cfg, &p), PISCES_ENOENT);
    CHECK(strstr(pisces_errmsg(), "does not exist") != NULL);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no-such-dir/x.pool", dir);
    EXPECT(pisces_pool_create(missing, &cfg, &p), PISCES_ENOENT);

    pisces_config bad = cfg;
    bad.engine = "no-such-engine";
    EXPECT(pisces_pool_create(path, &bad, &p), PISCES_EENGINE);
    CHECK(strstr(pisces_errmsg(), "pisces") != NULL); /* lists the engines */
    bad = cfg;
    bad.medium = "floppy";
    EXPECT(pisces_pool_create(path, &bad, &p), PISCES_ECONFIG);
    bad = cfg;
    bad.engine_options = "novalue";
    EXPECT(pisces_pool_create(path, &bad, &p), PISCES_ECONFIG);
    bad = cfg;
    bad.engine_options = "no_such_option=1";
    EXPECT(pisces_pool_create(path, &bad, &p), PISCES_ECONFIG);
    bad = cfg;
    bad.size = (16 << 20) + 1;
    EXPECT(pisces_pool_create(path, &bad, &p), PISCES_ECONFIG);

    /* A path that names a device is an invalid argument, said plainly. */
    EXPECT(pisces_pool_create("/dev/null", &cfg, &p), PISCES_EINVAL);
    CHECK(strstr(pisces_errmsg(), "/dev/null is not a regular file") != NULL);
    EXPECT(pisces_pool_open("/dev/null", &cfg, &p), PISCES_EINVAL);
    CHECK(strstr(pisces_errmsg(), "not a regular file") != NULL);

    /* The smallest pool: PISCES_MIN_POOL_SIZE with one thread slot and a 16 KiB log;
     * a page less is refused. */
    char tiny[512];
    pool_path(tiny, sizeof tiny, "tiny");
    bad = cfg;
    bad.max_threads = 1;
    bad.log_bytes_per_thread = 16 << 10;
    bad.size = PISCES_MIN_POOL_SIZE - 4096;
    EXPECT(pisces_pool_create(tiny, &bad, &p), PISCES_ECONFIG);
    bad.size = PISCES_MIN_POOL_SIZE;
    OK(pisces_pool_create(tiny, &bad, &p));
    OK(pisces_pool_close(p));
    p = NULL;

    /* Defaults with a NULL config, and engine options that parse. */
    pisces_config good = cfg;
    good.engine_options = "group_commit=1";
    OK(pisces_pool_create(path, &good, &p));
    CHECK(strcmp(pisces_pool_engine(p), "pisces") == 0);
    CHECK(pisces_pool_engine(NULL) == NULL);
    OK(pisces_pool_sync(p));
    EXPECT(pisces_pool_sync(NULL), PISCES_EINVAL);

    pisces_pool *again = NULL;
    EXPECT(pisces_pool_create(path, &cfg, &again), PISCES_EEXIST);
    EXPECT(pisces_pool_open(path, &cfg, &again), PISCES_ELOCKED);

    /* Root object. */
    uint64_t root = 0, root2 = 0;
    EXPECT(pisces_root(p, 0, &root), PISCES_EINVAL);
    EXPECT(pisces_root(NULL, 64, &root), PISCES_EINVAL);
    EXPECT(pisces_root(p, 64, NULL), PISCES_EINVAL);
    OK(pisces_root(p, 64, &root));
    CHECK(root != 0);
    OK(pisces_root(p, 64, &root2));
    CHECK(root == root2);
    EXPECT(pisces_root(p, 32, &root2), PISCES_EPTR);

    OK(pisces_pool_close(p));
    OK(pisces_pool_close(NULL));

    /* Reopen: the engine comes from the pool; another engine is refused. */
    OK(pisces_pool_open(path, NULL, &p));
    CHECK(strcmp(pisces_pool_engine(p), "pisces") == 0);
    OK(pisces_root(p, 64, &root2));
    CHECK(root == root2);
    OK(pisces_pool_close(p));
    bad = cfg;
    bad.engine = "undo";
    EXPECT(pisces_pool_open(path, &bad, &p), PISCES_EENGINE);

    /* Not a pool. */
    char junk[512];
    snprintf(junk, sizeof junk, "%s/junk.pool", dir);
    FILE *f = fopen(junk, "w");
    CHECK(f != NULL);
    for (int i = 0; i < 100000; i++) fputc('x', f);
    fclose(f);
    int rc = pisces_pool_open(junk, NULL, &p);
    CHECK(rc == PISCES_ECORRUPT);
}

/* ------------------------------------------------------------------------------ */

static int closed_body(pisces_tx tx, void *vctx) {
    (void)tx;
    (void)vctx;
    return 0;
}

/* A pool or handle used after its close (a second close included) is refused with
 * PISCES_ECLOSED, also once a new object may have taken its place, and so is a
 * pisces_tx of a closed handle. (Under valgrind: no read of freed memory.) */
static void test_closed_objects(void) {
    current_test = "closed objects";
    char path[512];
    pisces_pool *p = new_pool(NULL, path, sizeof path);
    pisces_handle *h = NULL, *h2 = NULL;
    OK(pisces_handle_open(p, &h));
    pisces_tx tx;
    OK(pisces_tx_begin(h, NULL, &tx));
    OK(pisces_handle_close(h));
    EXPECT(pisces_handle_close(h), PISCES_ECLOSED);
    EXPECT(pisces_run(h, closed_body, NULL), PISCES_ECLOSED);
    EXPECT(pisces_run_with(h, NULL, closed_body, NULL), PISCES_ECLOSED);
    EXPECT(pisces_tx_begin(h, NULL, &tx), PISCES_ECLOSED);
    EXPECT(pisces_handle_stats(h, NULL, NULL, NULL), PISCES_ECLOSED);
    EXPECT(pisces_handle_wait_durable(h), PISCES_ECLOSED);
    uint64_t v = 0, off = 0;
    EXPECT(pisces_get(tx, 8, 0, &v, sizeof v), PISCES_ECLOSED);
    EXPECT(pisces_alloc(tx, 8, &off), PISCES_ECLOSED);
    EXPECT(pisces_tx_commit(tx), PISCES_ECLOSED);
    EXPECT(pisces_tx_abort(tx), PISCES_ECLOSED);
    CHECK(strcmp(pisces_strerror(PISCES_ECLOSED), "unknown code") != 0);
    /* A new handle (maybe in the old one's place) is not reachable by the old one. */
    OK(pisces_handle_open(p, &h2));
    EXPECT(pisces_handle_close(h), PISCES_ECLOSED);
    OK(pisces_run(h2, closed_body, NULL));
    OK(pisces_handle_close(h2));

    OK(pisces_pool_close(p));
    EXPECT(pisces_pool_close(p), PISCES_ECLOSED);
    EXPECT(pisces_pool_sync(p), PISCES_ECLOSED);
    EXPECT(pisces_handle_open(p, &h), PISCES_ECLOSED);
    uint64_t root = 0;
    EXPECT(pisces_root(p, 64, &root), PISCES_ECLOSED);
    CHECK(pisces_pool_engine(p) == NULL);
    /* Handles outlive their pool's close; a closed pool's reopening is a new pool. */
    pisces_pool *p2 = NULL;
    OK(pisces_pool_open(path, NULL, &p2));
    OK(pisces_handle_open(p2, &h));
    OK(pisces_pool_close(p2));
    EXPECT(pisces_pool_close(p), PISCES_ECLOSED);
    EXPECT(pisces_pool_close(p2), PISCES_ECLOSED);
    OK(pisces_run(h, closed_body, NULL));
    OK(pisces_handle_close(h));
    EXPECT(pisces_handle_close(h), PISCES_ECLOSED);
}

/* ------------------------------------------------------------------------------ */

struct counter_ctx {
    uint64_t off;
    int attempts;
    int fail_first_with_conflict;
    int return_code;
    pisces_tx saved;
};

static int bump(pisces_tx tx, void *vctx) {
    struct counter_ctx *c = vctx;
    c->attempts++;
    c->saved = tx;
    uint64_t *v;
    int rc = pisces_write(tx, c->off, 8, (void **)&v);
    if (rc) return rc;
    *v += 1;
    if (c->fail_first_with_conflict && c->attempts == 1) return PISCES_ECONFLICT;
    return c->return_code;
}

static uint64_t read_u64(pisces_handle *h, uint64_t off);

struct read_ctx {
    uint64_t off;
    uint64_t value;
};

static int do_read(pisces_tx tx, void *vctx) {
    struct read_ctx *r = vctx;
    return pisces_get(tx, r->off, 0, &r->value, 8);
}

static uint64_t read_u64(pisces_handle *h, uint64_t off) {
    struct read_ctx r = {off, 0};
    pisces_tx_options ro = {.read_only = 1};
    OK(pisces_run_with(h, &ro, do_read, &r));
    return r.value;
}

static int accesses(pisces_tx tx, void *vctx) {
    uint64_t root = *(uint64_t *)vctx;
    const void *rp = NULL;
    void *wp = NULL;
    uint64_t off = 0;

    EXPECT(pisces_read(tx, root, 8, NULL), PISCES_EINVAL);
    EXPECT(pisces_write(tx, root, 8, NULL), PISCES_EINVAL);
    EXPECT(pisces_alloc(tx, 8, NULL), PISCES_EINVAL);
    EXPECT(pisces_alloc(tx, 0, &off), PISCES_EINVAL);
    EXPECT(pisces_get(tx, root, 0, NULL, 8), PISCES_EINVAL);
    EXPECT(pisces_put(tx, root, 0, NULL, 8), PISCES_EINVAL);
    char tmp[8];
    EXPECT(pisces_get(tx, root, SIZE_MAX, tmp, 8), PISCES_EINVAL); /* at + len overflows */
    EXPECT(pisces_get(tx, root, 1 << 20, tmp, 8), PISCES_EPTR); /* past the root object */
    EXPECT(pisces_put(tx, root, 1 << 20, tmp, 8), PISCES_EPTR);
    EXPECT(pisces_read(tx, 12345, 8, &rp), PISCES_EPTR); /* not an object */
    EXPECT(pisces_write(tx, 1 << 30, 8, &wp), PISCES_EPTR);
    EXPECT(pisces_free(tx, 12345), PISCES_EPTR);
    EXPECT(pisces_read(tx, root, 4096, &rp), PISCES_EPTR); /* longer than the object */

    /* Bounds are the sizes asked for, not the allocator's rounded blocks: the root
     * has 64 bytes and so does obj (each in a block of 72 payload bytes or more). */
    char big[80] = {0};
    uint64_t obj = 0;
    OK(pisces_alloc(tx, 64, &obj));
    uint64_t objs[2] = {root, obj};
    for (int i = 0; i < 2; i++) {
        uint64_t o = objs[i];
        OK(pisces_read(tx, o, 64, &rp));
        OK(pisces_write(tx, o, 64, &wp));
        for (size_t n = 65; n <= 72; n++) {
            EXPECT(pisces_read(tx, o, n, &rp), PISCES_EPTR);
            EXPECT(pisces_write(tx, o, n, &wp), PISCES_EPTR);
            EXPECT(pisces_get(tx, o, 0, big, n), PISCES_EPTR);
            EXPECT(pisces_put(tx, o, 0, big, n), PISCES_EPTR);
        }
        CHECK(strstr(pisces_errmsg(), "which has 64") != NULL);
        EXPECT(pisces_get(tx, o, 60, big, 8), PISCES_EPTR);
        EXPECT(pisces_put(tx, o, 64, big, 1), PISCES_EPTR);
        OK(pisces_get(tx, o, 56, big, 8));
        OK(pisces_put(tx, o, 56, big, 8));
    }
    EXPECT(pisces_free(tx, obj + 8), PISCES_EPTR); /* inside the object */
    OK(pisces_free(tx, obj));

    OK(pisces_alloc(tx, 100, &off));
    CHECK(off != 0 && off % 8 == 0);
    OK(pisces_read(tx, off, 100, &rp));
    for (int i = 0; i < 100; i++) CHECK(((const unsigned char *)rp)[i] == 0);
    OK(pisces_write(tx, off, 100, &wp));
    memcpy(wp, "hello", 6);
    char buf[6];
    OK(pisces_get(tx, off, 0, buf, 6));
    CHECK(strcmp(buf, "hello") == 0);
    OK(pisces_put(tx, off, 0, "world", 6));
    OK(pisces_read(tx, off, 6, &rp));
    CHECK(strcmp(rp, "world") == 0);
    /* Keep the object: link it from root[1]. */
    OK(pisces_put(tx, root, 8, &off, 8));
    return 0;
}

static int free_linked(pisces_tx tx, void *vctx) {
    uint64_t root = *(uint64_t *)vctx;
    uint64_t off;
    OK(pisces_get(tx, root, 8, &off, 8));
    OK(pisces_free(tx, off));
    uint64_t zero = 0;
    return pisces_put(tx, root, 8, &zero, 8);
}

static int check_world(pisces_tx tx, void *vctx) {
    uint64_t root = *(uint64_t *)vctx;
    uint64_t off;
    char buf[6];
    OK(pisces_get(tx, root, 8, &off, 8));
    OK(pisces_get(tx, off, 0, buf, 6));
    CHECK(strcmp(buf, "world") == 0);
    return 0;
}

static int try_write(pisces_tx tx, void *vctx) {
    uint64_t root = *(uint64_t *)vctx;
    void *wp;
    uint64_t off = 0;
    EXPECT(pisces_write(tx, root, 8, &wp), PISCES_EREADONLY);
    EXPECT(pisces_alloc(tx, 8, &off), PISCES_EREADONLY);
    EXPECT(pisces_free(tx, root), PISCES_EREADONLY);
    EXPECT(pisces_put(tx, root, 0, &off, 8), PISCES_EREADONLY);
    return 0;
}

struct nest_ctx {
    pisces_handle *self;
    pisces_handle *other;
    pisces_pool *pool;
};

static int nest(pisces_tx tx, void *vctx) {
    struct nest_ctx *n = vctx;
    struct read_ctx r = {0, 0};
    pisces_tx inner;
    (void)tx;
    EXPECT(pisces_run(n->self, do_read, &r), PISCES_EBUSY);
    EXPECT(pisces_run(n->other, do_read, &r), PISCES_ENESTED);
    EXPECT(pisces_tx_begin(n->other, NULL, &inner), PISCES_ENESTED);
    EXPECT(pisces_tx_begin(n->self, NULL, &inner), PISCES_EBUSY);
    EXPECT(pisces_handle_close(n->self), PISCES_EBUSY);
    EXPECT(pisces_handle_wait_durable(n->self), PISCES_EBUSY);
    EXPECT(pisces_handle_stats(n->self, NULL, NULL, NULL), PISCES_EBUSY);
    /* Pool-wide work that could wait for this transaction is refused. */
    uint64_t off;
    EXPECT(pisces_root(n->pool, 64, &off), PISCES_ENESTED);
    EXPECT(pisces_pool_sync(n->pool), PISCES_ENESTED);
    EXPECT(pisces_handle_wait_durable(n->other), PISCES_ENESTED);
    EXPECT(pisces_handle_close(n->other), PISCES_ENESTED);
    EXPECT(pisces_tx_commit(tx), PISCES_ESTALE); /* not explicit */
    EXPECT(pisces_tx_abort(tx), PISCES_ESTALE);
    return 0;
}

static void test_callback_transactions(void) {
    current_test = "run";
    pisces_pool *p = new_pool(NULL, NULL, 0);
    uint64_t root;
    OK(pisces_root(p, 64, &root));
    pisces_handle *h = NULL, *h2 = NULL;
    EXPECT(pisces_handle_open(NULL, &h), PISCES_EINVAL);
    EXPECT(pisces_handle_open(p, NULL), PISCES_EINVAL);
    OK(pisces_handle_open(p, &h));
    OK(pisces_handle_open(p, &h2));

    struct counter_ctx c = {root, 0, 0, 0, {0}};
    EXPECT(pisces_run(NULL, bump, &c), PISCES_EINVAL);
    EXPECT(pisces_run(h, NULL, &c), PISCES_EINVAL);
    OK(pisces_run(h, bump, &c));
    CHECK(c.attempts == 1);
    CHECK(read_u64(h, root) == 1);

    /* The tx of a finished transaction is stale. */
    const void *rp;
    EXPECT(pisces_read(c.saved, root, 8, &rp), PISCES_ESTALE);
    CHECK(strstr(pisces_errmsg(), "ended") != NULL);
    void *wp;
    EXPECT(pisces_write(c.saved, root, 8, &wp), PISCES_ESTALE);
    pisces_hmap some_map = {root, 16};
    EXPECT(pisces_hmap_find(c.saved, some_map, 1, &rp), PISCES_ESTALE);
    CHECK(strstr(pisces_errmsg(), "ended") != NULL);
    pisces_tx null_tx = {NULL, 0};
    EXPECT(pisces_read(null_tx, root, 8, &rp), PISCES_EINVAL);

    /* A user code rolls back and comes back unchanged. */
    c.attempts = 0;
    c.return_code = PISCES_USER + 7;
    EXPECT(pisces_run(h, bump, &c), PISCES_USER + 7);
    CHECK(strstr(pisces_errmsg(), "1007") != NULL);
    CHECK(read_u64(h, root) == 1);

    /* Returning PISCES_ECONFLICT retries, counted as a conflict, not a failure. */
    c.attempts = 0;
    c.return_code = 0;
    c.fail_first_with_conflict = 1;
    uint64_t conflicts0 = 0, failed0 = 0, conflicts1 = 0, failed1 = 0;
    OK(pisces_handle_stats(h, NULL, &conflicts0, &failed0));
    OK(pisces_run(h, bump, &c));
    OK(pisces_handle_stats(h, NULL, &conflicts1, &failed1));
    CHECK(c.attempts == 2);
    CHECK(read_u64(h, root) == 2);
    CHECK(conflicts1 == conflicts0 + 1);
    CHECK(failed1 == failed0);

    /* Accesses and their errors. */
    OK(pisces_run(h, accesses, &root));
    OK(pisces_run(h, check_world, &root));
    OK(pisces_run(h, free_linked, &root));

    /* Read-only transactions and options. */
    pisces_tx_options ro = {.read_only = 1};
    OK(pisces_run_with(h, &ro, try_write, &root));
    pisces_tx_options bad_iso = {.isolation = 42};
    EXPECT(pisces_run_with(h, &bad_iso, do_read, &c), PISCES_EINVAL);
    pisces_tx_options ser = {.isolation = PISCES_ISOLATION_SERIALIZABLE};
    EXPECT(pisces_run_with(h, &ser, do_read, &c), PISCES_EISOLATION);
    pisces_tx_options snap = {.isolation = PISCES_ISOLATION_SNAPSHOT};
    struct read_ctx r = {root, 0};
    OK(pisces_run_with(h, &snap, do_read, &r));
    pisces_tx_options lazy = {.deferred_durability = 1};
    c.fail_first_with_conflict = 0;
    OK(pisces_run_with(h, &lazy, bump, &c));
    OK(pisces_handle_wait_durable(h));
    EXPECT(pisces_handle_wait_durable(NULL), PISCES_EINVAL);
    CHECK(read_u64(h, root) == 3);

    uint64_t commits = 0, conflicts = 0, failed = 0;
    OK(pisces_handle_stats(h, &commits, &conflicts, &failed));
    CHECK(commits >= 8);
    CHECK(failed >= 1);
    OK(pisces_handle_stats(h, NULL, NULL, NULL));
    EXPECT(pisces_handle_stats(NULL, NULL, NULL, NULL), PISCES_EINVAL);

    /* No nesting. */
    struct nest_ctx n = {h, h2, p};
    OK(pisces_run(h, nest, &n));

    /* Thread slots: max_threads = 4, two handles open. */
    pisces_handle *h3 = NULL, *h4 = NULL, *h5 = NULL;
    OK(pisces_handle_open(p, &h3));
    OK(pisces_handle_open(p, &h4));
    EXPECT(pisces_handle_open(p, &h5), PISCES_ETHREADS);
    OK(pisces_handle_close(h4));
    OK(pisces_handle_open(p, &h5));
    OK(pisces_handle_close(h5));
    OK(pisces_handle_close(h3));
    OK(pisces_handle_close(NULL));

    /* Handles outlive the pool object. */
    OK(pisces_pool_close(p));
    OK(pisces_run(h, bump, &c));
    CHECK(read_u64(h2, root) == 4);
    OK(pisces_handle_close(h));
    OK(pisces_handle_close(h2));
}

/* ------------------------------------------------------------------------------ */

struct conflict_ctx {
    pisces_handle *h;
    uint64_t off;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage;
    int commit_rc;
    pisces_tx tx; /* for the wrong-thread check */
};

static void wait_stage(struct conflict_ctx *c, int s) {
    pthread_mutex_lock(&c->mu);
    while (c->stage < s) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static void set_stage(struct conflict_ctx *c, int s) {
    pthread_mutex_lock(&c->mu);
    c->stage = s;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void *conflict_thread(void *arg) {
    struct conflict_ctx *c = arg;
    pisces_tx tx;
    void *wp;
    for (;;) { /* an earlier commit's write-back may still be pending: retry */
        OK(pisces_tx_begin(c->h, NULL, &tx));
        int rc = pisces_write(tx, c->off, 8, &wp);
        if (rc == PISCES_OK) break;
        CHECK(rc == PISCES_ECONFLICT);
        OK(pisces_tx_abort(tx));
        usleep(1000);
    }
    *(uint64_t *)wp = 100;
    c->tx = tx;
    set_stage(c, 1); /* holds the write */
    wait_stage(c, 2);
    c->commit_rc = pisces_tx_commit(tx);
    set_stage(c, 3);
    return NULL;
}

static void test_explicit_transactions(void) {
    current_test = "explicit";
    pisces_pool *p = new_pool(NULL, NULL, 0);
    uint64_t root;
    OK(pisces_root(p, 64, &root));
    pisces_handle *h, *h2;
    OK(pisces_handle_open(p, &h));
    OK(pisces_handle_open(p, &h2));
    pisces_tx tx, tx2;
    void *wp;
    const void *rp;

    EXPECT(pisces_tx_begin(NULL, NULL, &tx), PISCES_EINVAL);
    EXPECT(pisces_tx_begin(h, NULL, NULL), PISCES_EINVAL);

    /* Commit. */
    OK(pisces_tx_begin(h, NULL, &tx));
    EXPECT(pisces_tx_begin(h, NULL, &tx2), PISCES_EBUSY);
    EXPECT(pisces_tx_begin(h2, NULL, &tx2), PISCES_ENESTED);
    struct read_ctx r = {root, 0};
    EXPECT(pisces_run(h2, do_read, &r), PISCES_ENESTED);
    EXPECT(pisces_run(h, do_read, &r), PISCES_EBUSY);
    uint64_t off0;
    EXPECT(pisces_root(p, 64, &off0), PISCES_ENESTED);
    EXPECT(pisces_pool_sync(p), PISCES_ENESTED);
    EXPECT(pisces_handle_close(h2), PISCES_ENESTED);
    OK(pisces_write(tx, root, 8, &wp));
    *(uint64_t *)wp = 41;
    OK(pisces_read(tx, root, 8, &rp));
    CHECK(*(const uint64_t *)rp == 41);
    uint64_t off;
    OK(pisces_alloc(tx, 16, &off));
    OK(pisces_put(tx, off, 0, "explicit-alloc", 15));
    OK(pisces_put(tx, root, 8, &off, 8));
    EXPECT(pisces_read(tx, 12345, 8, &rp), PISCES_EPTR); /* the library's error text */
    CHECK(strstr(pisces_errmsg(), "invalid persistent pointer") != NULL);
    OK(pisces_tx_commit(tx));
    EXPECT(pisces_tx_commit(tx), PISCES_ESTALE);
    EXPECT(pisces_tx_abort(tx), PISCES_ESTALE);
    EXPECT(pisces_read(tx, root, 8, &rp), PISCES_ESTALE);
    CHECK(read_u64(h, root) == 41);

    /* Abort. */
    OK(pisces_tx_begin(h, NULL, &tx));
    OK(pisces_put(tx, root, 0, &(uint64_t){99}, 8));
    uint64_t linked;
    OK(pisces_get(tx, root, 8, &linked, 8));
    OK(pisces_free(tx, linked));
    OK(pisces_tx_abort(tx));
    CHECK(read_u64(h, root) == 41);
    OK(pisces_tx_begin(h, NULL, &tx));
    char buf[15];
    OK(pisces_get(tx, linked, 0, buf, 15));
    CHECK(strcmp(buf, "explicit-alloc") == 0);
    OK(pisces_free(tx, linked));
    OK(pisces_tx_commit(tx));

    /* Options. */
    pisces_tx_options ro = {.read_only = 1};
    OK(pisces_tx_begin(h, &ro, &tx));
    EXPECT(pisces_write(tx, root, 8, &wp), PISCES_EREADONLY);
    OK(pisces_tx_commit(tx));
    pisces_tx_options ser = {.isolation = PISCES_ISOLATION_SERIALIZABLE};
    EXPECT(pisces_tx_begin(h, &ser, &tx), PISCES_EISOLATION);
    OK(pisces_tx_begin(h, NULL, &tx)); /* the handle is usable after a failed begin */
    OK(pisces_tx_abort(tx));
    pisces_tx_options lazy = {.deferred_durability = 1};
    OK(pisces_tx_begin(h, &lazy, &tx));
    OK(pisces_put(tx, root, 0, &(uint64_t){42}, 8));
    OK(pisces_tx_commit(tx));
    OK(pisces_handle_wait_durable(h));
    CHECK(read_u64(h, root) == 42);

    /* A conflict between two threads' explicit transactions. */
    struct conflict_ctx c = {h2, root, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1, {0}};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, conflict_thread, &c) == 0);
    wait_stage(&c, 1);
    EXPECT(pisces_tx_commit(c.tx), PISCES_EINVAL); /* not the thread that began it */
    OK(pisces_tx_begin(h, NULL, &tx));
    int rc = pisces_write(tx, root, 8, &wp);
    if (rc == PISCES_OK) {
        *(uint64_t *)wp = 7;
        set_stage(&c, 2);
        wait_stage(&c, 3);
        rc = pisces_tx_commit(tx);
        CHECK(rc == PISCES_ECONFLICT || c.commit_rc == PISCES_ECONFLICT);
        CHECK(rc == PISCES_OK || rc == PISCES_ECONFLICT);
    } else {
        CHECK(rc == PISCES_ECONFLICT);
        OK(pisces_tx_abort(tx));
        set_stage(&c, 2);
        wait_stage(&c, 3);
        CHECK(c.commit_rc == PISCES_OK);
        CHECK(read_u64(h, root) == 100);
    }
    pthread_join(t, NULL);

    /* Closing a handle with an open transaction aborts it. */
    OK(pisces_tx_begin(h2, NULL, &tx2));
    OK(pisces_put(tx2, root, 0, &(uint64_t){555}, 8));
    OK(pisces_handle_close(h2));
    CHECK(read_u64(h, root) != 555);

    /* Callback and explicit transactions alternate on one handle. */
    struct counter_ctx cc = {root, 0, 0, 0, {0}};
    uint64_t before = read_u64(h, root);
    OK(pisces_run(h, bump, &cc));
    OK(pisces_tx_begin(h, NULL, &tx));
    OK(pisces_tx_commit(tx));
    OK(pisces_run(h, bump, &cc));
    CHECK(read_u64(h, root) == before + 2);
    uint64_t commits = 0;
    OK(pisces_handle_stats(h, &commits, NULL, NULL));
    CHECK(commits > 5);

    OK(pisces_handle_close(h));
    OK(pisces_pool_close(p));
}

/* ------------------------------------------------------------------------------ */

struct map_ctx {
    uint64_t root;
    int explicit_mode;
};

struct iter_ctx {
    pisces_tx tx;
    pisces_hmap map;
    pisces_btree tree;
    uint64_t count;
    uint64_t key_sum;
    uint64_t last_key;
    int ordered;
    uint64_t stop_after;
};

static int hmap_visit(uint64_t key, const void *value, void *vctx) {
    struct iter_ctx *c = vctx;
    char v[16];
    int found = 0;
    CHECK(((const uint64_t *)value)[0] == key * 10);
    /* Reads are allowed inside; updates are not. */
    OK(pisces_hmap_get(c->tx, c->map, key, v, &found));
    CHECK(found == 1);
    const void *p = NULL;
    OK(pisces_hmap_find(c->tx, c->map, key, &p));
    CHECK(p != NULL && ((const uint64_t *)p)[0] == key * 10);
    EXPECT(pisces_hmap_insert(c->tx, c->map, key, v, NULL), PISCES_EBUSY);
    int rc = pisces_tx_commit(c->tx); /* never inside an iteration */
    CHECK(rc == PISCES_EBUSY || rc == PISCES_ESTALE);
    c->count++;
    c->key_sum += key;
    return c->stop_after && c->count >= c->stop_after;
}

static int btree_visit(uint64_t key, const void *value, void *vctx) {
    struct iter_ctx *c = vctx;
    CHECK(((const uint64_t *)value)[0] == key + 1);
    if (c->count > 0 && key <= c->last_key) c->ordered = 0;
    c->last_key = key;
    c->count++;
    c->key_sum += key;
    EXPECT(pisces_btree_remove(c->tx, c->tree, key, NULL, NULL), PISCES_EBUSY);
    return c->stop_after && c->count >= c->stop_after;
}

static int container_body(pisces_tx tx, struct map_ctx *m) {
    pisces_hmap map;
    pisces_btree tree;
    char v16[16] = {0};
    char out[16];
    uint64_t v8 = 0;
    int found = -1, replaced = -1;
    uint64_t len = 0;

    /* Errors. */
    EXPECT(pisces_hmap_create(tx, 16, 7, &map), PISCES_EVALUESIZE);
    EXPECT(pisces_hmap_create(tx, 0, 16, &map), PISCES_ECONFIG);
    EXPECT(pisces_hmap_create(tx, PISCES_HMAP_MAX_BUCKETS + 1, 16, &map), PISCES_ECONFIG);
    EXPECT(pisces_hmap_create(tx, 16, 16, NULL), PISCES_EINVAL);
    EXPECT(pisces_btree_create(tx, 3, &tree), PISCES_EVALUESIZE);
    EXPECT(pisces_btree_create(tx, 8, NULL), PISCES_EINVAL);
    pisces_hmap null_map = {0, 16};
    EXPECT(pisces_hmap_get(tx, null_map, 1, out, &found), PISCES_EPTR);
    pisces_btree null_tree = {0, 8};
    EXPECT(pisces_btree_get(tx, null_tree, 1, out, &found), PISCES_EPTR);

    /* Hash map with 16-byte values. */
    OK(pisces_hmap_create(tx, 64, 16, &map));
    CHECK(map.header != 0 && map.value_size == 16);
    EXPECT(pisces_hmap_insert(tx, map, 1, NULL, NULL), PISCES_EINVAL);
    for (uint64_t k = 1; k <= 100; k++) {
        ((uint64_t *)v16)[0] = k * 10;
        OK(pisces_hmap_insert(tx, map, k, v16, &replaced));
        CHECK(replaced == 0);
    }
    ((uint64_t *)v16)[0] = 50 * 10;
    OK(pisces_hmap_insert(tx, map, 50, v16, &replaced));
    CHECK(replaced == 1);
    OK(pisces_hmap_get(tx, map, 50, out, &found));
    CHECK(found == 1 && ((uint64_t *)out)[0] == 500);
    OK(pisces_hmap_get(tx, map, 5000, out, &found));
    CHECK(found == 0);
    OK(pisces_hmap_get(tx, map, 50, NULL, NULL)); /* both optional */
    /* Lookups in place: a pointer to the value, NULL when absent. */
    const void *vp = NULL;
    OK(pisces_hmap_find(tx, map, 50, &vp));
    CHECK(vp != NULL && ((const uint64_t *)vp)[0] == 500);
    OK(pisces_hmap_find(tx, map, 5000, &vp));
    CHECK(vp == NULL);
    EXPECT(pisces_hmap_find(tx, map, 50, NULL), PISCES_EINVAL);
    CHECK(strstr(pisces_errmsg(), "value is NULL") != NULL);
    EXPECT(pisces_hmap_find(tx, null_map, 1, &vp), PISCES_EPTR);
    OK(pisces_hmap_len(tx, map, &len));
    CHECK(len == 100);
    EXPECT(pisces_hmap_len(tx, map, NULL), PISCES_EINVAL);
    pisces_hmap wrong = map;
    wrong.value_size = 8;
    int rc = pisces_hmap_get(tx, wrong, 50, out, &found);
    CHECK(rc == PISCES_EPTR || rc == PISCES_ECORRUPT);
    rc = pisces_hmap_find(tx, wrong, 50, &vp);
    CHECK(rc == PISCES_EPTR || rc == PISCES_ECORRUPT);
    wrong.value_size = 5;
    EXPECT(pisces_hmap_get(tx, wrong, 50, out, &found), PISCES_EVALUESIZE);
    EXPECT(pisces_hmap_find(tx, wrong, 50, &vp), PISCES_EVALUESIZE);
    CHECK(strstr(pisces_errmsg(), "value size 5") != NULL);

    struct iter_ctx it = {tx, map, {0, 0}, 0, 0, 0, 1, 0};
    EXPECT(pisces_hmap_foreach(tx, map, NULL, &it), PISCES_EINVAL);
    OK(pisces_hmap_foreach(tx, map, hmap_visit, &it));
    CHECK(it.count == 100 && it.key_sum == 5050);
    struct iter_ctx stop = {tx, map, {0, 0}, 0, 0, 0, 1, 10};
    OK(pisces_hmap_foreach(tx, map, hmap_visit, &stop));
    CHECK(stop.count == 10);

    OK(pisces_hmap_remove(tx, map, 50, out, &found));
    CHECK(found == 1 && ((uint64_t *)out)[0] == 500);
    OK(pisces_hmap_remove(tx, map, 50, out, &found));
    CHECK(found == 0);
    OK(pisces_hmap_remove(tx, map, 51, NULL, NULL));
    OK(pisces_hmap_len(tx, map, &len));
    CHECK(len == 98);

    /* B+-tree with 8-byte values. */
    OK(pisces_btree_create(tx, 8, &tree));
    for (uint64_t k = 0; k < 200; k++) {
        uint64_t key = (k * 37) % 200; /* out of order */
        v8 = key + 1;
        OK(pisces_btree_insert(tx, tree, key, &v8, &replaced));
        CHECK(replaced == 0);
    }
    v8 = 8;
    OK(pisces_btree_insert(tx, tree, 7, &v8, &replaced));
    CHECK(replaced == 1);
    EXPECT(pisces_btree_insert(tx, tree, 7, NULL, NULL), PISCES_EINVAL);
    OK(pisces_btree_get(tx, tree, 7, &v8, &found));
    CHECK(found == 1 && v8 == 8);
    OK(pisces_btree_get(tx, tree, 7000, &v8, &found));
    CHECK(found == 0);
    OK(pisces_btree_len(tx, tree, &len));
    CHECK(len == 200);
    EXPECT(pisces_btree_len(tx, tree, NULL), PISCES_EINVAL);
    struct iter_ctx ti = {tx, {0, 0}, tree, 0, 0, 0, 1, 0};
    OK(pisces_btree_range(tx, tree, 10, 19, btree_visit, &ti));
    CHECK(ti.count == 10 && ti.key_sum == 145 && ti.ordered);
    struct iter_ctx all = {tx, {0, 0}, tree, 0, 0, 0, 1, 0};
    OK(pisces_btree_range(tx, tree, 0, UINT64_MAX, btree_visit, &all));
    CHECK(all.count == 200 && all.ordered);
    struct iter_ctx st = {tx, {0, 0}, tree, 0, 0, 0, 1, 3};
    OK(pisces_btree_range(tx, tree, 0, UINT64_MAX, btree_visit, &st));
    CHECK(st.count == 3);
    EXPECT(pisces_btree_range(tx, tree, 0, 1, NULL, NULL), PISCES_EINVAL);
    OK(pisces_btree_remove(tx, tree, 7, &v8, &found));
    CHECK(found == 1 && v8 == 8);
    OK(pisces_btree_remove(tx, tree, 7, &v8, &found));
    CHECK(found == 0);
    OK(pisces_btree_len(tx, tree, &len));
    CHECK(len == 199);

    /* Keep both in the root object for the next transaction. */
    OK(pisces_put(tx, m->root, 0, &map, sizeof map));
    OK(pisces_put(tx, m->root, 16, &tree, sizeof tree));
    return 0;
}

static int container_body_cb(pisces_tx tx, void *vctx) { return container_body(tx, vctx); }

static int container_destroy(pisces_tx tx, void *vctx) {
    struct map_ctx *m = vctx;
    pisces_hmap map;
    pisces_btree tree;
    uint64_t len;
    OK(pisces_get(tx, m->root, 0, &map, sizeof map));
    OK(pisces_get(tx, m->root, 16, &tree, sizeof tree));
    OK(pisces_hmap_len(tx, map, &len));
    CHECK(len == 98);
    OK(pisces_btree_len(tx, tree, &len));
    CHECK(len == 199);
    OK(pisces_hmap_destroy(tx, map));
    OK(pisces_btree_destroy(tx, tree));
    pisces_hmap z = {0, 0};
    OK(pisces_put(tx, m->root, 0, &z, sizeof z));
    OK(pisces_put(tx, m->root, 16, &z, sizeof z));
    return 0;
}

static void test_containers(void) {
    current_test = "containers";
    pisces_pool *p = new_pool(NULL, NULL, 0);
    uint64_t root;
    OK(pisces_root(p, 64, &root));
    pisces_handle *h;
    OK(pisces_handle_open(p, &h));
    struct map_ctx m = {root, 0};

    /* In a callback transaction. */
    OK(pisces_run(h, container_body_cb, &m));
    OK(pisces_run(h, container_destroy, &m));

    /* In an explicit transaction (accesses run on the handle's worker). */
    current_test = "containers-explicit";
    pisces_tx tx;
    OK(pisces_tx_begin(h, NULL, &tx));
    container_body(tx, &m);
    OK(pisces_tx_commit(tx));
    OK(pisces_tx_begin(h, NULL, &tx));
    container_destroy(tx, &m);
    OK(pisces_tx_commit(tx));

    pisces_hmap map;
    EXPECT(pisces_hmap_create(tx, 16, 16, &map), PISCES_ESTALE);
    OK(pisces_handle_close(h));
    OK(pisces_pool_close(p));
}

/* ------------------------------------------------------------------------------ */

struct transfer_ctx {
    uint64_t accounts;
    pisces_hmap map;
};

static int engine_round(pisces_tx tx, void *vctx) {
    struct transfer_ctx *c = vctx;
    int64_t *a;
    int rc = pisces_write(tx, c->accounts, 16, (void **)&a);
    if (rc) return rc;
    a[0] -= 10;
    a[1] += 10;
    uint64_t v = (uint64_t)a[1];
    return pisces_hmap_insert(tx, c->map, v, &v, NULL);
}

static int free_ctx_object(pisces_tx tx, void *vctx) {
    return pisces_free(tx, *(uint64_t *)vctx);
}

/* The root object (and only it) can never be freed, from a callback or an explicit
 * transaction; a double free is refused; so no allocation ever returns the root. */
static void check_root_protected(pisces_pool *p, pisces_handle *h, uint64_t root) {
    uint64_t r = root;
    EXPECT(pisces_run(h, free_ctx_object, &r), PISCES_EPTR);
    pisces_tx tx;
    OK(pisces_tx_begin(h, NULL, &tx));
    EXPECT(pisces_free(tx, root), PISCES_EPTR);
    OK(pisces_tx_commit(tx)); /* nothing was freed: the commit changes nothing */
    uint64_t obj = 0;
    OK(pisces_tx_begin(h, NULL, &tx));
    OK(pisces_alloc(tx, 24, &obj));
    OK(pisces_tx_commit(tx));
    OK(pisces_tx_begin(h, NULL, &tx));
    OK(pisces_free(tx, obj));
    EXPECT(pisces_free(tx, obj), PISCES_EPTR);
    pisces_tx_abort(tx);
    OK(pisces_run(h, free_ctx_object, &obj));
    EXPECT(pisces_run(h, free_ctx_object, &obj), PISCES_EPTR);
    for (int k = 0; k < 3; k++) {
        OK(pisces_tx_begin(h, NULL, &tx));
        uint64_t a = 0;
        OK(pisces_alloc(tx, 48, &a));
        CHECK(a != root);
        OK(pisces_tx_commit(tx));
    }
    uint64_t again = 0;
    OK(pisces_handle_close(h));
    OK(pisces_root(p, 48, &again));
    CHECK(again == root);
}

static void test_every_engine(void) {
    for (size_t i = 0; i < pisces_engine_count(); i++) {
        const char *name = pisces_engine_name(i);
        current_test = name;
        char path[512];
        pool_path(path, sizeof path, name);
        pisces_config cfg = small_config(name);
        pisces_pool *p = NULL;
        int rc = pisces_pool_create(path, &cfg, &p);
        if (pisces_engine_available(name) != 1) {
            CHECK(rc == PISCES_EENGINE);
            printf("  engine %-9s not available in this build: %s\n", name, pisces_errmsg());
            continue;
        }
        if (rc != PISCES_OK) {
            CHECK(rc == PISCES_OK);
            continue;
        }
        CHECK(strcmp(pisces_pool_engine(p), name) == 0);
        uint64_t root;
        OK(pisces_root(p, 48, &root));
        pisces_handle *h;
        OK(pisces_handle_open(p, &h));
        struct transfer_ctx c = {0, {0, 0}};
        pisces_tx tx;
        /* Set up explicitly: an accounts object and a map, linked from the root. */
        OK(pisces_tx_begin(h, NULL, &tx));
        OK(pisces_alloc(tx, 16, &c.accounts));
        OK(pisces_put(tx, c.accounts, 0, &(int64_t[2]){1000, 0}, 16));
        OK(pisces_hmap_create(tx, 16, 8, &c.map));
        OK(pisces_put(tx, root, 0, &c.accounts, 8));
        OK(pisces_put(tx, root, 8, &c.map, 16));
        OK(pisces_tx_commit(tx));
        for (int k = 0; k < 5; k++) OK(pisces_run(h, engine_round, &c));
        check_root_protected(p, h, root);
        OK(pisces_pool_close(p));

        /* Reopen with the engine taken from the pool. */
        OK(pisces_pool_open(path, NULL, &p));
        if (p == NULL) continue;
        CHECK(strcmp(pisces_pool_engine(p), name) == 0);
        uint64_t root_again = 0;
        OK(pisces_root(p, 48, &root_again));
        CHECK(root_again == root);
        OK(pisces_handle_open(p, &h));
        OK(pisces_tx_begin(h, NULL, &tx));
        struct transfer_ctx d;
        OK(pisces_get(tx, root, 0, &d.accounts, 8));
        OK(pisces_get(tx, root, 8, &d.map, 16));
        int64_t a[2] = {0, 0};
        uint64_t len = 0;
        OK(pisces_get(tx, d.accounts, 0, a, 16));
        /* The exact sizes hold after a reopen, on every engine: the object's own
         * record, and the root's once pisces_root returned it. */
        char over[64];
        EXPECT(pisces_get(tx, d.accounts, 0, over, 17), PISCES_EPTR);
        EXPECT(pisces_get(tx, root, 0, over, 49), PISCES_EPTR);
        OK(pisces_get(tx, root, 0, over, 48));
        OK(pisces_hmap_len(tx, d.map, &len));
        CHECK(a[0] + a[1] == 1000);
        if (strcmp(name, "volatile") != 0) { /* the one engine that keeps nothing */
            CHECK(a[1] == 50);
            CHECK(len == 5);
        }
        OK(pisces_tx_commit(tx));
        OK(pisces_handle_close(h));
        OK(pisces_pool_close(p));
        printf("  engine %-9s ok\n", name);
    }
}

/* ------------------------------------------------------------------------------ */

/* A pool opened shared twice (two opens stand for two processes: the locks are per open
 * file description): both run transactions, an exclusive open is refused meanwhile,
 * an engine that cannot share is refused, and the last close leaves every commit for
 * the next exclusive open. */
static void test_shared_pool(void) {
    current_test = "shared";
    char path[512];
    pisces_pool *p = new_pool(NULL, path, sizeof path);
    uint64_t root = 0;
    OK(pisces_root(p, 64, &root));
    OK(pisces_pool_close(p));
    pisces_config cfg = small_config(NULL);
    pisces_pool *a = NULL, *b = NULL, *x = NULL;
    EXPECT(pisces_pool_open_shared(NULL, &cfg, &a), PISCES_EINVAL);
    EXPECT(pisces_pool_open_shared(path, &cfg, NULL), PISCES_EINVAL);
    OK(pisces_pool_open_shared(path, &cfg, &a));
    OK(pisces_pool_open_shared(path, &cfg, &b));
    EXPECT(pisces_pool_open(path, &cfg, &x), PISCES_ELOCKED);
    pisces_handle *ha = NULL, *hb = NULL;
    OK(pisces_handle_open(a, &ha));
    OK(pisces_handle_open(b, &hb));
    struct counter_ctx c = {root, 0, 0, 0, {0}};
    for (int i = 0; i < 10; i++) {
        OK(pisces_run(ha, bump, &c));
        OK(pisces_run(hb, bump, &c));
    }
    CHECK(read_u64(ha, root) == 20);
    CHECK(read_u64(hb, root) == 20);
    OK(pisces_handle_close(ha));
    OK(pisces_handle_close(hb));
    OK(pisces_pool_close(a));
    OK(pisces_pool_close(b));
    OK(pisces_pool_open(path, &cfg, &p));
    OK(pisces_handle_open(p, &ha));
    CHECK(read_u64(ha, root) == 20);
    OK(pisces_handle_close(ha));
    OK(pisces_pool_close(p));

    char undo_path[512];
    p = new_pool("undo", undo_path, sizeof undo_path);
    OK(pisces_pool_close(p));
    EXPECT(pisces_pool_open_shared(undo_path, NULL, &a), PISCES_ECONFIG);
    CHECK(strstr(pisces_errmsg(), "undo") != NULL);
    CHECK(strstr(pisces_strerror(PISCES_EPEERDIED), "died") != NULL);
}

int main(int argc, char **argv) {
    if (argc > 1) {
        snprintf(dir, sizeof dir, "%s", argv[1]);
    } else {
        snprintf(dir, sizeof dir, "/tmp/pisces-ctest-XXXXXX");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            return 2;
        }
    }
    struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"engines and strings", test_engines_and_strings},
        {"pool lifecycle", test_pool_lifecycle},
        {"closed objects", test_closed_objects},
        {"callback transactions", test_callback_transactions},
        {"explicit transactions", test_explicit_transactions},
        {"containers", test_containers},
        {"every engine", test_every_engine},
        {"shared pool", test_shared_pool},
    };
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int before = failures;
        tests[i].fn();
        if (failures == before) {
            passed++;
            printf("ok   %s\n", tests[i].name);
        } else {
            failed++;
            printf("FAIL %s (%d failed checks)\n", tests[i].name, failures - before);
        }
    }
    printf("%d checks\n", checks);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
