/*
 * simdjson's stage 1 (ondemand::parser::iterate) over one file, a given
 * number of times, through benches/simdjson_shim.cpp's library: the
 * simdjson side of tools/stage1_insns.sh, as benches/insns.rs is qjson's.
 * Two runs that differ only in the number of scans differ by exactly
 * that many scans' instructions. Prints "entries N": the structurals
 * stage 1 indexed (none printed by a shim older than that count).
 *
 *   simdjson_stage1 SHIM KERNEL SCANS FILE    (KERNEL: haswell, fallback, ...)
 *
 * Exits non-zero if the kernel is missing or a scan fails.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *(*open_fn)(const char *kernel, const char *bytes, size_t len);
typedef int (*parse_fn)(void *parsers);
typedef size_t (*count_fn)(void *parsers);

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: simdjson_stage1 SHIM KERNEL SCANS FILE\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (lib == NULL) {
        fprintf(stderr, "simdjson_stage1: %s\n", dlerror());
        return 1;
    }
    open_fn open_parsers = (open_fn)dlsym(lib, "qjson_simdjson_open");
    parse_fn stage1 = (parse_fn)dlsym(lib, "qjson_simdjson_stage1");
    if (open_parsers == NULL || stage1 == NULL) {
        fprintf(stderr, "simdjson_stage1: %s is not the shim\n", argv[1]);
        return 1;
    }
    FILE *f = fopen(argv[4], "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0) {
        perror(argv[4]);
        return 1;
    }
    long len = ftell(f);
    char *bytes = malloc(len > 0 ? (size_t)len : 1);
    rewind(f);
    if (len < 0 || bytes == NULL || fread(bytes, 1, (size_t)len, f) != (size_t)len) {
        perror(argv[4]);
        return 1;
    }
    fclose(f);
    void *parsers = open_parsers(argv[2], bytes, (size_t)len);
    if (parsers == NULL) {
        fprintf(stderr, "simdjson_stage1: no kernel %s here, or %s is rejected\n", argv[2], argv[4]);
        return 1;
    }
    long scans = atol(argv[3]);
    for (long i = 0; i < scans; i++) {
        if (stage1(parsers) != 0) {
            fprintf(stderr, "simdjson_stage1: %s is rejected\n", argv[4]);
            return 1;
        }
    }
    count_fn structurals = (count_fn)dlsym(lib, "qjson_simdjson_structurals");
    if (structurals != NULL) {
        printf("entries %zu\n", structurals(parsers));
    }
    return 0;
}
