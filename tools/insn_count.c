/*
 * A QEMU TCG plugin (user mode) that counts the guest instructions a
 * program executes and prints "insns N" to stderr at exit.
 *
 * Each translation block gets one inline add of its instruction count,
 * executed on entry: exact for blocks that run to their end, which every
 * block does except one cut short by a fault or signal. tools/aarch64.sh
 * counts a scan as the difference between two runs doing different
 * numbers of scans, so whatever is fixed per run cancels.
 *
 * QEMU's plugin ABI is C; the few entry points used are declared here
 * (API version 1, QEMU 5.2 to 8.0, Debian 12's qemu-user 7.2) so that
 * building needs no QEMU source.
 *
 *   gcc -shared -fPIC -O2 -o insn_count.so tools/insn_count.c
 *   qemu-aarch64 -plugin ./insn_count.so PROGRAM ARGS...
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

typedef uint64_t plugin_id;
struct qemu_plugin_tb;

#define EXPORT __attribute__((visibility("default")))

EXPORT int qemu_plugin_version = 1;

enum { INLINE_ADD_U64 = 0 };

extern void qemu_plugin_register_vcpu_tb_trans_cb(
    plugin_id id, void (*cb)(plugin_id, struct qemu_plugin_tb *));
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
extern void qemu_plugin_register_vcpu_tb_exec_inline(
    struct qemu_plugin_tb *tb, int op, void *ptr, uint64_t imm);
extern void qemu_plugin_register_atexit_cb(
    plugin_id id, void (*cb)(plugin_id, void *), void *userdata);

/* The programs counted are single-threaded, so one plain counter. */
static uint64_t insns;

static void on_translate(plugin_id id, struct qemu_plugin_tb *tb)
{
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, INLINE_ADD_U64, &insns,
                                             qemu_plugin_tb_n_insns(tb));
}

static void at_exit(plugin_id id, void *userdata)
{
    (void)id;
    (void)userdata;
    fprintf(stderr, "insns %" PRIu64 "\n", insns);
}

EXPORT int qemu_plugin_install(plugin_id id, const void *info, int argc,
                               char **argv)
{
    (void)info;
    (void)argc;
    (void)argv;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
