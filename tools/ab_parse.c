/*
 * Two builds of libqjson.so timed against each other in one process: the
 * full validating parse (qjson_parse) of one file, in rounds of at least
 * 50 ms that alternate between the builds (25 rounds each unless ROUNDS
 * says, after one to warm up).
 *
 *   cc -O2 -o target/ab_parse tools/ab_parse.c -ldl
 *   QJSON_KERNEL=avx2 target/ab_parse A/libqjson.so B/libqjson.so FILE [ROUNDS]
 *
 * prints each build's best round in GB/s, and B's speed over A's as the
 * median over the rounds of B's time against A's in the same round (the
 * two back to back, in turn first). On a shared machine, builds timed by
 * separate processes meet different neighbours: alternating rounds in one
 * process lets both see the same ones, as benches/core.rs does for
 * simdjson, and a neighbour that slows the machine for a while slows both
 * halves of a pair, where the best rounds may come from different
 * moments. Each library is loaded into a namespace of its own (dlmopen),
 * so the two may be the same file: that run (A against A) shows the noise
 * a difference has to exceed. QJSON_KERNEL pins the kernel of both;
 * ALIGN=N places the text N bytes (0-63) past the start of a cache line
 * (by default it is where malloc puts it: 16 bytes past one for a file of
 * megabytes, where a large Lua string's text is 40 bytes past one);
 * DUPLICATE_KEYS=error parses under that policy (default: last wins);
 * tools/ab_parse.sh builds revisions and runs this over several files
 * (docs/benchmarks.md, "Comparing two builds").
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    uint32_t max_depth;
    int32_t duplicate_keys;
} options;

struct build {
    const char *path;
    void *(*parse)(const char *, size_t, const options *, void *);
    void (*free)(void *);
    const char *(*kernel)(void);
    void *reader;
    double *round_secs;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int load(struct build *b) {
    void *lib = dlmopen(LM_ID_NEWLM, b->path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "ab_parse: %s\n", dlerror());
        return -1;
    }
    void *(*reader_new)(void) = (void *(*)(void))dlsym(lib, "qjson_reader_new");
    b->parse = (void *(*)(const char *, size_t, const options *, void *))dlsym(lib, "qjson_parse");
    b->free = (void (*)(void *))dlsym(lib, "qjson_free");
    b->kernel = (const char *(*)(void))dlsym(lib, "qjson_kernel");
    if (!reader_new || !b->parse || !b->free || !b->kernel) {
        fprintf(stderr, "ab_parse: %s is not a libqjson build\n", b->path);
        return -1;
    }
    b->reader = reader_new();
    return 0;
}

static int by_value(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: ab_parse LIB_A LIB_B FILE [ROUNDS]\n");
        return 2;
    }
    int rounds = argc == 5 ? atoi(argv[4]) : 25;
    FILE *f = fopen(argv[3], "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0) {
        perror(argv[3]);
        return 1;
    }
    long len = ftell(f);
    const char *align = getenv("ALIGN");
    if (align && !*align) {
        align = NULL;
    }
    size_t skew = align ? (size_t)atoi(align) % 64 : 0;
    char *buffer = malloc((len > 0 ? (size_t)len : 1) + (align ? 128 : 0));
    char *text = buffer;
    if (align && buffer) {
        text = buffer + (64 - (uintptr_t)buffer % 64) % 64 + skew;
    }
    if (len <= 0 || !buffer || fseek(f, 0, SEEK_SET) != 0 || fread(text, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "ab_parse: cannot read %s\n", argv[3]);
        return 1;
    }
    fclose(f);

    struct build builds[2] = {{.path = argv[1]}, {.path = argv[2]}};
    const char *policy = getenv("DUPLICATE_KEYS");
    const int strict = policy && !strcmp(policy, "error");
    if (policy && *policy && !strict && strcmp(policy, "last")) {
        fprintf(stderr, "ab_parse: DUPLICATE_KEYS is error or last, not %s\n", policy);
        return 2;
    }
    const options opts = {1000, strict};
    if (rounds < 1) {
        fprintf(stderr, "ab_parse: ROUNDS must be at least 1\n");
        return 2;
    }
    double *ratios = malloc(sizeof(double) * (size_t)rounds);
    for (int i = 0; i < 2; i++) {
        builds[i].round_secs = malloc(sizeof(double) * (size_t)rounds);
        if (!ratios || !builds[i].round_secs || load(&builds[i]) != 0) {
            return 1;
        }
    }
    /* Round 0 warms both up and is not counted. Which build goes first
     * alternates, so that neither always follows the other. */
    for (int round = 0; round <= rounds; round++) {
        for (int turn = 0; turn < 2; turn++) {
            struct build *b = &builds[turn ^ (round & 1)];
            double start = now(), elapsed;
            long calls = 0;
            do {
                void *doc = b->parse(text, (size_t)len, &opts, b->reader);
                if (!doc) {
                    fprintf(stderr, "ab_parse: %s rejects %s\n", b->path, argv[3]);
                    return 1;
                }
                b->free(doc);
                calls++;
                elapsed = now() - start;
            } while (elapsed < 0.05 || calls < 3);
            if (round > 0) {
                b->round_secs[round - 1] = elapsed / (double)calls;
            }
        }
    }
    double best[2] = {builds[0].round_secs[0], builds[1].round_secs[0]};
    for (int r = 0; r < rounds; r++) {
        ratios[r] = builds[0].round_secs[r] / builds[1].round_secs[r];
        for (int i = 0; i < 2; i++) {
            if (builds[i].round_secs[r] < best[i]) {
                best[i] = builds[i].round_secs[r];
            }
        }
    }
    qsort(ratios, (size_t)rounds, sizeof(double), by_value);
    double median = rounds % 2 ? ratios[rounds / 2] : (ratios[rounds / 2 - 1] + ratios[rounds / 2]) / 2;
    printf("%s kernel %s: A %.2f GB/s, B %.2f GB/s (best rounds), B/A %.3f (median of %d pairs)\n",
           argv[3], builds[0].kernel(), (double)len / best[0] / 1e9,
           (double)len / best[1] / 1e9, median, rounds);
    return 0;
}
