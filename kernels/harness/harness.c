/* Implementation of harness.h: one place for the command-line contract (docs/contracts.md
 * section 1), so every kernel binary parses, checks the VL, fails and reports identically. */
#define _GNU_SOURCE /* memfd_create */
#include "harness.h"
#include "sve_vl.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __ARM_FEATURE_SVE
#include <sys/prctl.h>
#endif

#define MAX_PARAMS 16
#define MAX_ALLOCS 64

int main(int argc, char **argv); /* the driver's: a batch calls it once per run */

static struct {
    const char *prog;
    unsigned vl_asked;
    unsigned vl_seen;
    size_t size;
    const char *const *keys;
    const char *values[MAX_PARAMS];
    size_t preps; /* harness_prep_begin calls so far in this run */
} h;

/* Batch mode (docs/contracts.md section 1): one process runs several cells, calling main()
 * once per cell, so a count job pays QEMU's start-up once instead of once per run. A run's
 * exit (harness_ok, harness_fail, a usage or VL error) returns to the batch loop instead of
 * ending the process; its buffers are freed before the next run. */
static struct {
    int active;
    jmp_buf back;
    int status;
    size_t n_maps;
    struct {
        void *start;
        size_t len;
    } maps[MAX_ALLOCS];
} batch;

static HARNESS_NORETURN void finish(int status)
{
    if (batch.active) {
        batch.status = status;
        longjmp(batch.back, 1);
    }
    exit(status);
}

static void vmessage(const char *prefix, const char *fmt, va_list ap)
{
    fflush(stdout);
    fputs(prefix, stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void harness_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("FAIL: ", fmt, ap);
    va_end(ap);
    finish(HARNESS_EXIT_FAIL);
}

void harness_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("usage error: ", fmt, ap);
    va_end(ap);
    fprintf(stderr, "usage: %s <vl_bits> <size> [key=value ...]", h.prog ? h.prog : "kernel");
    for (size_t k = 0; h.keys && h.keys[k]; k++)
        fprintf(stderr, " %s=...", h.keys[k]);
    fputc('\n', stderr);
    finish(HARNESS_EXIT_USAGE);
}

/* Non-negative decimal integer, digits only (leading zeros allowed); 0 on failure. */
static int parse_size(const char *s, size_t *out)
{
    size_t v = 0;
    if (!s || !*s)
        return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        size_t d = (size_t)(*s - '0');
        if (v > (SIZE_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

static unsigned read_vl_bits(void)
{
#ifdef __ARM_FEATURE_SVE
    uint64_t bytes;
    __asm__ volatile("rdvl %0, #1" : "=r"(bytes));
    return (unsigned)(bytes * 8);
#else
    return 0; /* a host build without SVE: the perf backend's host-native baselines */
#endif
}

static int key_index(const char *key, size_t len)
{
    for (int k = 0; h.keys && h.keys[k]; k++)
        if (strlen(h.keys[k]) == len && strncmp(h.keys[k], key, len) == 0)
            return k;
    return -1;
}

/* A marker the counting plugins watch for (armie_clients/tbstats.h): a hint, a NOP to
 * everything else; nothing in a host build. */
#ifdef __aarch64__
#define PLUGIN_MARK(hint) __asm__ volatile("hint #" #hint ::: "memory")
#else
#define PLUGIN_MARK(hint) __asm__ volatile("" ::: "memory")
#endif

/* The boundary between two runs of a batch: its own translation block (a call target) that
 * the counting plugins take as the end of one run's counts and the start of the next
 * (armie_clients/tbstats.h). A NOP to everything else. */
static HARNESS_NOIPA void run_mark(void)
{
    PLUGIN_MARK(0x42);
}

/* The run's VL, set before its main() runs; a VL the CPU refuses shows up as the run's
 * VL mismatch (exit 3). Without sve_vl_valid's upper bound: main() refuses a longer VL as a
 * usage error before any SVE code runs, and the bound would change the harness's code (see
 * harness_init_vls). */
static void set_vl(const char *arg)
{
#ifdef __ARM_FEATURE_SVE
    size_t bits;
    if (parse_size(arg, &bits) && bits >= SVE_VL_MIN && bits % SVE_VL_STEP == 0)
        prctl(PR_SVE_SET_VL, (unsigned long)(bits / 8));
#else
    (void)arg;
#endif
}

/* One run of a batch: main() until it exits through finish() or returns; then its buffers
 * are freed. Only statics are read after the longjmp. */
static HARNESS_NOIPA int one_run(int run_argc, char **run)
{
    batch.active = 1;
    batch.n_maps = 0;
    if (!setjmp(batch.back))
        batch.status = main(run_argc, run); /* a main() that returns ends its run too */
    batch.active = 0;
    for (size_t i = 0; i < batch.n_maps; i++)
        munmap(batch.maps[i].start, batch.maps[i].len);
    return batch.status;
}

/* `<binary> --batch <run> -- <run> -- ...`, each <run> the arguments of a one-run process.
 * Every run is parsed out first, so each run's share of the process (between two marks)
 * executes the same code whatever its place in the batch. The batch stops at the first run
 * that does not exit 0, with its status: the runs before it have their counts, and the
 * number of `ok` lines names the one that failed. */
static HARNESS_NORETURN void run_batch(int argc, char **argv)
{
    /* stdout's buffer allocated now, not by the first run's ok line: each run's share of the
     * process then executes the same code whatever its place in the batch. */
    static char out_buf[4096];
    setvbuf(stdout, out_buf, _IOFBF, sizeof out_buf);
    char **args = calloc(2 * (size_t)argc + 2, sizeof *args); /* each run: argv[0], its words, NULL */
    int *starts = calloc((size_t)argc, sizeof *starts), *counts = calloc((size_t)argc, sizeof *counts);
    if (!args || !starts || !counts) {
        fputs("FAIL: cannot allocate the batch\n", stderr);
        exit(HARNESS_EXIT_FAIL);
    }
    int runs = 0, n = 0;
    for (int a = 2; a <= argc; a++) {
        if (a == argc || strcmp(argv[a], "--") == 0) {
            args[n++] = NULL;
            continue;
        }
        if (n == 0 || args[n - 1] == NULL) {
            starts[runs++] = n;
            args[n++] = argv[0];
            counts[runs - 1] = 1;
        }
        args[n++] = argv[a];
        counts[runs - 1]++;
    }
    /* Each run's argument strings copied to a page of their own, laid out alike: string
     * functions (strlen, strcmp) run a number of instructions that depends on the string's
     * address, and each run must count as it would alone. */
    char *pages = aligned_alloc(HARNESS_PAGE, (size_t)runs * HARNESS_PAGE + 1);
    if (!pages) {
        fputs("FAIL: cannot allocate the batch\n", stderr);
        exit(HARNESS_EXIT_FAIL);
    }
    for (int r = 0; r < runs; r++) {
        size_t used = 0;
        for (int a = 0; a < counts[r]; a++) {
            char **arg = &args[starts[r] + a];
            size_t len = strlen(*arg) + 1;
            if (used + len > HARNESS_PAGE) {
                fputs("usage error: the arguments of a batch run exceed 4096 bytes\n", stderr);
                exit(HARNESS_EXIT_USAGE);
            }
            *arg = memcpy(pages + (size_t)r * HARNESS_PAGE + used, *arg, len);
            used += len;
        }
    }
    /* The first output on stdout runs code the later ones do not: done here, outside every
     * run's share (the line is not an `ok` line, so the runner passes over it). */
    printf("batch of %d runs\n", runs);
    fflush(stdout);
    /* One mark before each run and one after the last, each run's share ending with the
     * same jump back to the mark, so the last run counts as the others do. */
    for (int r = 0;; r++) {
        run_mark();
        if (r == runs)
            break;
        set_vl(counts[r] > 1 ? args[starts[r] + 1] : "");
        int status = one_run(counts[r], args + starts[r]);
        if (status != HARNESS_EXIT_OK) {
            fflush(stdout);
            exit(status);
        }
    }
    exit(HARNESS_EXIT_OK);
}

void harness_init_vls(int argc, char **argv, const char *const *keys, unsigned built_bits)
{
    static const char *const none[] = {NULL};
    size_t vl;

    if (argc > 1 && strcmp(argv[1], "--batch") == 0 && !batch.active)
        run_batch(argc, argv);
    memset(&h, 0, sizeof h); /* a batch calls main(), and so this, once per run */
    h.prog = argc > 0 ? argv[0] : "kernel";
    h.keys = keys ? keys : none;
    int nkeys = 0;
    while (h.keys[nkeys])
        nkeys++;
    if (nkeys > MAX_PARAMS)
        harness_usage_error("internal: more than %d parameters declared", MAX_PARAMS);

    if (argc < 3)
        harness_usage_error("expected at least 2 arguments, got %d", argc > 0 ? argc - 1 : 0);
#ifdef __ARM_FEATURE_SVE
    /* sve_vl_valid's rule, spelled out: with the inlined call GCC and clang compile this
     * function to other code, and the harness's code is pinned by the regression set's
     * whole-program counts. */
    if (!parse_size(argv[1], &vl) || vl < SVE_VL_MIN || vl > SVE_VL_MAX || vl % SVE_VL_STEP != 0)
        harness_usage_error("vl_bits '%s' is not " SVE_VL_RULE, argv[1]);
#else
    if (!parse_size(argv[1], &vl) || vl != 0)
        harness_usage_error("vl_bits '%s': this build has no SVE, the only VL is 0", argv[1]);
#endif
    if (!parse_size(argv[2], &h.size))
        harness_usage_error("size '%s' is not a non-negative decimal integer", argv[2]);
    h.vl_asked = (unsigned)vl;

    for (int a = 3; a < argc; a++) {
        const char *eq = strchr(argv[a], '=');
        if (!eq || eq == argv[a])
            harness_usage_error("argument '%s' is not key=value", argv[a]);
        int k = key_index(argv[a], (size_t)(eq - argv[a]));
        if (k < 0)
            harness_usage_error("unknown parameter '%.*s'", (int)(eq - argv[a]), argv[a]);
        if (h.values[k])
            harness_usage_error("parameter '%s' given twice", h.keys[k]);
        h.values[k] = eq + 1;
    }
    for (int k = 0; k < nkeys; k++)
        if (!h.values[k])
            harness_usage_error("missing parameter '%s'", h.keys[k]);

    h.vl_seen = read_vl_bits();
    if (h.vl_seen != h.vl_asked) {
        fprintf(stderr, "FAIL: VL mismatch: asked %u bits, running at %u bits\n", h.vl_asked,
                h.vl_seen);
        finish(HARNESS_EXIT_VL);
    }
    if (built_bits == 0)
        built_bits = HARNESS_BUILT_SVE_BITS;
    if (built_bits != 0 && built_bits != h.vl_asked) {
        fprintf(stderr,
                "FAIL: VL mismatch: asked %u bits, binary built for %u bits "
                "(-msve-vector-bits), running at %u bits\n",
                h.vl_asked, built_bits, h.vl_seen);
        finish(HARNESS_EXIT_VL);
    }
}

unsigned harness_vl_bits(void) { return h.vl_seen; }
size_t harness_size(void) { return h.size; }

const char *harness_param(const char *key)
{
    int k = key_index(key, strlen(key));
    if (k < 0)
        harness_usage_error("internal: parameter '%s' was not declared to harness_init", key);
    return h.values[k];
}

size_t harness_param_size(const char *key)
{
    size_t v;
    const char *s = harness_param(key);
    if (!parse_size(s, &v))
        harness_usage_error("%s='%s' is not a non-negative decimal integer", key, s);
    return v;
}

int harness_param_choice(const char *key, const char *const *choices)
{
    const char *s = harness_param(key);
    for (int c = 0; choices[c]; c++)
        if (strcmp(s, choices[c]) == 0)
            return c;
    fprintf(stderr, "usage error: %s='%s' is not one of:", key, s);
    for (int c = 0; choices[c]; c++)
        fprintf(stderr, " %s", choices[c]);
    fputc('\n', stderr);
    finish(HARNESS_EXIT_USAGE);
}

/* Each buffer is a mapping of its own, at the offset into its page that glibc's aligned_alloc
 * gives a large block (its 16-byte header rounded up to `align`): a buffer's address modulo
 * the page, and so the path alignment-sensitive code such as memcpy takes, is the same for
 * every size, every backend, and whatever a batch ran before it. The pages come zeroed. */
void *harness_alloc(size_t bytes, size_t align)
{
    if (align == 0 || (align & (align - 1)) != 0 || align > HARNESS_PAGE)
        harness_fail("alignment %zu is not a power of two up to %u", align, HARNESS_PAGE);
    size_t offset = align == HARNESS_PAGE ? 0 : align < 16 ? 16 : align;
    size_t rounded = bytes < align ? align : (bytes + align - 1) / align * align;
    size_t len = rounded + offset;
    if (rounded < bytes || len < rounded)
        harness_fail("allocation of %zu bytes overflows", bytes);
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        harness_fail("cannot allocate %zu bytes aligned to %zu", bytes, align);
    if (batch.active && batch.n_maps < MAX_ALLOCS) {
        batch.maps[batch.n_maps].start = m;
        batch.maps[batch.n_maps++].len = len;
    }
    return (char *)m + offset;
}

/* ---- preparations shared by the runs of a batch (harness.h) ---------------------------- */

#define MAX_PREPS 8

/* The preparations remembered for one size and parameter set: the runs of a batch that
 * share them are consecutive (the runner orders a batch so), so one set is kept. */
static struct {
    int valid;
    size_t size;
    char *values[MAX_PARAMS];
    size_t n;
    struct prep_copy {
        unsigned char *data[2];
        size_t bytes[2];
        void *map[2];
        size_t map_len[2];
        int in_file[2]; /* kept in fd[k] (a memfd), not at data[k] */
        int fd[2];
#ifdef HARNESS_REPEAT
        void *to[2]; /* the buffers it was made in (a repeated call's reset makes it again) */
#endif
    } copies[MAX_PREPS];
} memo;

#ifdef HARNESS_REPEAT
int harness_resetting;
#endif

/* The preparation between harness_prep_begin and harness_prep_end. */
static struct {
    void *to[2];
    size_t bytes[2];
    struct prep_copy *copy; /* NULL: past MAX_PREPS, computed in every run */
    int computing;
} prep;

static int same_key(void)
{
    if (!memo.valid || memo.size != h.size)
        return 0;
    for (size_t k = 0; h.keys[k]; k++)
        if (strcmp(memo.values[k], h.values[k]) != 0)
            return 0;
    return 1;
}

static void forget(void)
{
    for (size_t i = 0; i < memo.n; i++)
        for (int k = 0; k < 2; k++) {
            if (memo.copies[i].map[k])
                munmap(memo.copies[i].map[k], memo.copies[i].map_len[k]);
            if (memo.copies[i].in_file[k])
                close(memo.copies[i].fd[k]);
        }
    for (size_t k = 0; k < MAX_PARAMS; k++)
        free(memo.values[k]);
    memset(&memo, 0, sizeof memo);
    memo.valid = 1;
    memo.size = h.size;
    for (size_t k = 0; h.keys[k]; k++)
        if (!(memo.values[k] = strdup(h.values[k])))
            harness_fail("cannot remember the run's parameters");
}

/* Copying a preparation (to remember it, and back in every run) in Advanced SIMD, 64 bytes
 * per iteration: glibc's memcpy is SVE here, which QEMU emulates several times slower per
 * byte, and compilers turn a plain C copy loop back into a memcpy call. */
static void copy_prep(unsigned char *to, const unsigned char *from, size_t n)
{
#ifdef __aarch64__
    size_t blocks = n / 64;
    if (blocks)
        __asm__ volatile("1: ldp q0, q1, [%[f]], #32\n"
                         "   ldp q2, q3, [%[f]], #32\n"
                         "   stp q0, q1, [%[t]], #32\n"
                         "   stp q2, q3, [%[t]], #32\n"
                         "   subs %[b], %[b], #1\n"
                         "   b.ne 1b\n"
                         : [t] "+r"(to), [f] "+r"(from), [b] "+r"(blocks)
                         :
                         : "v0", "v1", "v2", "v3", "memory", "cc");
    n %= 64;
#endif
    for (size_t i = 0; i < n; i++)
        to[i] = from[i];
}

/* In a batch (QEMU's count runs), a preparation is kept in a memfd and goes back into the run's
 * buffer with one pread: the host kernel copies, where an emulated copy loop costs QEMU a
 * translated load and store per 16 bytes (with the counting clients, 8 % of a default sweep's
 * QEMU time, and as much again to keep the copy). A timing build's repeated calls keep it in
 * memory (an emulated copy); other runs outside a batch keep nothing (prep_decide). 0: not kept this way. */
static int remember_in_file(struct prep_copy *c, int k, const void *p, size_t bytes)
{
    if (!batch.active)
        return 0;
    int fd = memfd_create("harness-prep", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    for (size_t done = 0; done < bytes;) {
        ssize_t w = pwrite(fd, (const char *)p + done, bytes - done, (off_t)done);
        if (w <= 0) {
            close(fd);
            return 0;
        }
        done += (size_t)w;
    }
    c->in_file[k] = 1;
    c->fd[k] = fd;
    c->bytes[k] = bytes;
    return 1;
}

/* A kept preparation back into the run's buffer (counted in every run). */
static void copy_back(struct prep_copy *c, int k, void *to, size_t bytes)
{
    if (!c->in_file[k]) {
        copy_prep(to, c->data[k], bytes);
        return;
    }
    for (size_t done = 0; done < bytes;) {
        ssize_t r = pread(c->fd[k], (char *)to + done, bytes - done, (off_t)done);
        if (r <= 0)
            harness_fail("cannot read back a preparation of %zu bytes", bytes);
        done += (size_t)r;
    }
}

/* A copy of `bytes` at `p`, at the same offset into its page as `p`. */
static void remember(struct prep_copy *c, int k, const void *p, size_t bytes)
{
    if (remember_in_file(c, k, p, bytes))
        return;
    size_t offset = (uintptr_t)p % HARNESS_PAGE, len = offset + bytes + 1;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        harness_fail("cannot remember a preparation of %zu bytes", bytes);
    c->map[k] = m;
    c->map_len[k] = len;
    c->data[k] = (unsigned char *)m + offset;
    c->bytes[k] = bytes;
    copy_prep(c->data[k], p, bytes);
}

/* Preparations shared between processes: the code is at the end of this file, in sections of
 * its own (SHARE_TEXT, SHARE_DATA). */
static int prep_decide(void);
void harness_prep_end(void) __attribute__((noinline, section(".text.harness_share")));
void harness_prep_end_counted(void) __attribute__((noinline));

int harness_prep_begin(void *a, size_t a_bytes, void *b, size_t b_bytes)
{
    /* From here to harness_prep_end's marker nothing counts (tbstats.h): the branches below
     * differ between the run that computes and those that copy. */
    PLUGIN_MARK(0x43);
    if (h.preps == 0 && !same_key())
        forget();
    size_t i = h.preps++;
    prep.to[0] = a;
    prep.to[1] = b;
    prep.bytes[0] = a_bytes;
    prep.bytes[1] = b ? b_bytes : 0;
    prep.copy = i < MAX_PREPS ? &memo.copies[i] : NULL;
    prep.computing = !prep.copy || i >= memo.n;
    if (!prep.computing && (prep.copy->bytes[0] != prep.bytes[0] || prep.copy->bytes[1] != prep.bytes[1]))
        harness_fail("preparation %zu of this run is %zu+%zu bytes, the run that computed it had %zu+%zu: "
                     "a preparation must depend only on the size and parameters", i, prep.bytes[0],
                     prep.bytes[1], prep.copy->bytes[0], prep.copy->bytes[1]);
#ifdef HARNESS_REPEAT
    /* A timing build repeats its call, and the call's reset (harness.h) makes again a
     * preparation this run made before, in the same buffers: copied back from memory as every
     * call after the first was meant to be, not computed again and again (reduce's fill cost
     * ten times its kernel per call in the emulated guest, docs/guide/arm64-vm.md), and
     * taking no index of its own. Outside the measured window, like every reset. Only in a
     * reset: before the calls two preparations may fill one buffer in turn (reduce's copy of
     * inout into expect, then the reference reducing into it), the second no repeat of the first. */
    for (size_t j = 0; prep.computing && harness_resetting && j < memo.n; j++)
        if (memo.copies[j].to[0] == a && memo.copies[j].to[1] == b && memo.copies[j].bytes[0] == prep.bytes[0] &&
            memo.copies[j].bytes[1] == prep.bytes[1]) {
            prep.copy = &memo.copies[j];
            prep.computing = 0;
            h.preps--;
        }
#endif
    return prep_decide();
}

void harness_prep_end_counted(void)
{
    if (prep.computing && prep.copy) {
        for (int k = 0; k < 2; k++)
            if (prep.to[k])
                remember(prep.copy, k, prep.to[k], prep.bytes[k]);
#ifdef HARNESS_REPEAT
        prep.copy->to[0] = prep.to[0];
        prep.copy->to[1] = prep.to[1];
#endif
        memo.n++;
    }
    struct prep_copy *c = prep.copy;
    PLUGIN_MARK(0x44);
    /* Counted in every run: the copy back (the run that computed copies its own result). */
    if (c)
        for (int k = 0; k < 2; k++)
            if (prep.to[k])
                copy_back(c, k, prep.to[k], prep.bytes[k]);
}

uint64_t harness_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Stateless per word (hash of seed + index), so the compiler can vectorize it; a
 * preparation, so a batch computes it once per size. */
void harness_fill_bytes(void *p, size_t bytes, uint64_t seed)
{
    if (harness_prep_begin(p, bytes, NULL, 0)) {
        unsigned char *b = p;
        size_t words = bytes / 8;
        for (size_t i = 0; i < words; i++) {
            uint64_t r = harness_hash(seed + i);
            memcpy(b + 8 * i, &r, 8);
        }
        uint64_t r = harness_hash(seed + words);
        for (size_t j = 8 * words; j < bytes; j++, r >>= 8)
            b[j] = (unsigned char)r;
    }
    harness_prep_end();
}

/* FNV-1a over little-endian 64-bit words, then the remaining bytes: a word at a time, eight
 * words per iteration (two loads and a branch less per word than one at a time), keeps
 * checksumming a 4 MiB result cheap under emulation. */
uint64_t harness_fnv1a(const void *p, size_t bytes)
{
    const unsigned char *b = p;
    uint64_t x = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 64 <= bytes; i += 64) {
        uint64_t w0, w1, w2, w3, w4, w5, w6, w7;   /* not an array: GCC would copy it to the stack */
        memcpy(&w0, b + i, 8);
        memcpy(&w1, b + i + 8, 8);
        memcpy(&w2, b + i + 16, 8);
        memcpy(&w3, b + i + 24, 8);
        memcpy(&w4, b + i + 32, 8);
        memcpy(&w5, b + i + 40, 8);
        memcpy(&w6, b + i + 48, 8);
        memcpy(&w7, b + i + 56, 8);
        x = (x ^ w0) * 0x100000001b3ull;
        x = (x ^ w1) * 0x100000001b3ull;
        x = (x ^ w2) * 0x100000001b3ull;
        x = (x ^ w3) * 0x100000001b3ull;
        x = (x ^ w4) * 0x100000001b3ull;
        x = (x ^ w5) * 0x100000001b3ull;
        x = (x ^ w6) * 0x100000001b3ull;
        x = (x ^ w7) * 0x100000001b3ull;
    }
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        x = (x ^ w) * 0x100000001b3ull;
    }
    for (; i < bytes; i++)
        x = (x ^ b[i]) * 0x100000001b3ull;
    return x;
}

static HARNESS_SCALAR size_t first_difference(const unsigned char *a, const unsigned char *b, size_t n)
{
    HARNESS_NOVEC_LOOP
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return n;
}

/* Whether the first `words` 64-bit words at x and y differ: scalar 64-bit loads, xor and or,
 * eight words per iteration. QEMU runs these several times faster per byte than Advanced SIMD's
 * 128-bit ones (which it runs faster than SVE's at every VL but the longest): with the counting
 * clients, about 0.25 against 1.2 ms per MiB compared. In assembly, as copy_prep: clang
 * vectorizes the same C with Advanced SIMD (SLP). No early exit: an equal buffer is read to its
 * end anyway. */
static HARNESS_NO_SVE uint64_t words_differ(const unsigned char *x, const unsigned char *y, size_t words)
{
    uint64_t diff = 0;
#ifdef __aarch64__
    size_t blocks = words / 8;
    if (blocks)
        __asm__("1: .rept 4\n" /* four pairs of words of each buffer */
                "   ldp x4, x5, [%[x]], #16\n"
                "   ldp x6, x7, [%[y]], #16\n"
                "   eor x4, x4, x6\n"
                "   eor x5, x5, x7\n"
                "   orr %[d], %[d], x4\n"
                "   orr %[d], %[d], x5\n"
                "   .endr\n"
                "   subs %[b], %[b], #1\n"
                "   b.ne 1b\n"
                : [x] "+r"(x), [y] "+r"(y), [b] "+r"(blocks), [d] "+r"(diff)
                :
                : "x4", "x5", "x6", "x7", "memory", "cc");
    words %= 8;
#endif
    for (size_t i = 0; i < words; i++) {
        uint64_t u, v;
        memcpy(&u, x + 8 * i, 8);
        memcpy(&v, y + 8 * i, 8);
        diff |= u ^ v;
    }
    return diff;
}

HARNESS_NO_SVE size_t harness_first_mismatch(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    size_t words = n / 8;
    uint64_t diff = words_differ(x, y, words);
    for (size_t i = 8 * words; i < n; i++)
        diff |= (uint64_t)(x[i] ^ y[i]);
    return diff ? first_difference(x, y, n) : n;
}

/* The VL is read again here, not taken from harness_init: gem5 runs the program up to the ROI
 * once and forks one simulation per VL there (gem5_scripts/se_sve.py), so this line states the
 * VL the ROI and the check ran at. */
void harness_ok(uint64_t checksum)
{
    printf("ok vl=%u size=%zu checksum=%016llx\n", read_vl_bits(), h.size,
           (unsigned long long)checksum);
    fflush(stdout);
    finish(HARNESS_EXIT_OK);
}

/* Preparations shared between processes (docs/contracts.md section 1): a count job's runner
 * links ./prep in the process's working directory to a folder shared by the binaries whose
 * preparations are the same (same driver sources, flags and compiler: VLA and VLS builds,
 * variants of a family). The first process to compute a preparation writes it there; the
 * others read it instead of computing it again (a VLS binary runs one VL, so the in-process
 * memory above never spares it anything). Reading and writing happen between the preparation
 * markers, which the counts leave out, with plain system calls (no stdio, no malloc: the heap
 * the runs see stays as it was). No ./prep (a replay, a run by hand): computed as before.
 *
 * Why the sections: whole.total counts every instruction outside the preparation markers, and
 * it moved when this code was first added inline. GCC aligns functions and loops with a
 * bounded skip (.p2align 4,,11 and 3,,7), so a function that moves by 4 bytes can gain or lose
 * a nop that runs, and glibc's string functions take paths that depend on a string's address.
 * So nothing here is placed among the harness's own code or strings: its code, constant strings
 * and state go to sections of their own, which the linker places after this object's; the
 * counted code before harness_prep_begin's marker and after harness_prep_end_counted's marker
 * is instruction for instruction what it was (tests/test_prep_cache.py checks by disassembly). */
#define SHARE_TEXT __attribute__((noinline, section(".text.harness_share")))
#define SHARE_DATA __attribute__((section(".rodata.harness_share")))
#define PREP_DIR "prep/"

static struct {
    int loaded;     /* read from the shared folder: the caller computes nothing */
    char name[200]; /* its file in the shared folder, "" when it has none */
} share __attribute__((section(".bss.harness_share")));

static const char share_name_format[] SHARE_DATA = PREP_DIR "p%zu-%zu-%zu-%zu";
static const char share_value_format[] SHARE_DATA = "-%s";
static const char share_tmp_format[] SHARE_DATA = PREP_DIR ".%ld-%s";
static const char share_read_failed[] SHARE_DATA = "cannot read the shared preparation %s";

/* "prep/p<index>-<size>-<bytes a>-<bytes b>-<value>..." or "" when a parameter value holds a
 * character a file name should not (it is then computed, never shared). */
SHARE_TEXT static void share_file_name(size_t index)
{
    int n = snprintf(share.name, sizeof share.name, share_name_format, index, h.size, prep.bytes[0],
                     prep.bytes[1]);
    for (size_t k = 0; h.keys[k] && n > 0 && (size_t)n < sizeof share.name; k++) {
        for (const char *c = h.values[k]; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
                  *c == '.' || *c == '+'))
                n = -1;
        if (n > 0)
            n += snprintf(share.name + n, sizeof share.name - (size_t)n, share_value_format, h.values[k]);
    }
    if (n <= 0 || (size_t)n >= sizeof share.name)
        share.name[0] = '\0';
}

SHARE_TEXT static int read_all(int fd, void *to, size_t bytes)
{
    for (size_t done = 0; done < bytes;) {
        ssize_t r = read(fd, (char *)to + done, bytes - done);
        if (r <= 0)
            return 0;
        done += (size_t)r;
    }
    return 1;
}

SHARE_TEXT static int write_all(int fd, const void *from, size_t bytes)
{
    for (size_t done = 0; done < bytes;) {
        ssize_t w = write(fd, (const char *)from + done, bytes - done);
        if (w <= 0)
            return 0;
        done += (size_t)w;
    }
    return 1;
}

/* The shared copy into the run's buffers; 0 when there is none. A file of another length is
 * not this preparation (skipped); a read that fails halfway has overwritten the buffers, and
 * a preparation may keep what the run wrote before it (unpack's gap sentinel): that fails. */
SHARE_TEXT static int load_shared(void)
{
    if (!share.name[0])
        return 0;
    int fd = open(share.name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != prep.bytes[0] + prep.bytes[1]) {
        close(fd);
        return 0;
    }
    for (int k = 0; k < 2; k++)
        if (prep.bytes[k] && !read_all(fd, prep.to[k], prep.bytes[k]))
            harness_fail(share_read_failed, share.name);
    close(fd);
    return 1;
}

/* Offer what this run computed to the other processes: written whole under a name of its
 * own, then renamed, so a reader sees a complete file or none. Failing to share costs only
 * time: the others compute it too. */
SHARE_TEXT static void store_shared(void)
{
    char tmp[sizeof share.name + 32];
    if (!share.name[0] || snprintf(tmp, sizeof tmp, share_tmp_format, (long)getpid(),
                                   share.name + sizeof PREP_DIR - 1) >= (int)sizeof tmp)
        return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    int ok = 1;
    for (int k = 0; k < 2; k++)
        if (prep.bytes[k])
            ok = ok && write_all(fd, prep.to[k], prep.bytes[k]);
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, share.name) != 0)
        unlink(tmp);
}

/* harness_prep_begin's answer, after its marker: compute (1) unless this process remembers
 * the preparation or the shared folder holds it (then it is in the run's buffers already). */
SHARE_TEXT static int prep_decide(void)
{
    share.loaded = 0;
#ifndef HARNESS_REPEAT
    /* Outside a batch the process makes one run (gem5, SimEng): what it computes is in its
     * buffers already and no other run will ask for it, so it is neither kept nor copied back.
     * Keeping it doubled what the program touched before the ROI, and in gem5 the kept copies
     * evicted the kernel's inputs from the L2 (copy 1 MiB: every source line an L2 miss).
     * Decided here, past the begin marker in the sharing section, so that harness_prep_begin's
     * counted code stays instruction for instruction as it was (tests/test_prep_cache.py). */
    if (!batch.active)
        prep.copy = NULL;
#endif
    if (!prep.computing)
        return 0;
    share_file_name(h.preps - 1);
    share.loaded = load_shared();
    return !share.loaded;
}

/* The drivers' harness_prep_end: offer a computed preparation, then the remembering and the
 * counted copy back, unchanged (a tail call, so nothing of this function runs after the
 * marker). */
SHARE_TEXT void harness_prep_end(void)
{
    if (prep.computing && !share.loaded)
        store_shared();
    harness_prep_end_counted();
}
