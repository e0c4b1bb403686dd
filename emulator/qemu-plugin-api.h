/*
 * qemu-plugin-api.h — the part of QEMU's TCG plugin API that the trace unit
 * uses, declared here because Debian ships no qemu-plugin.h.
 *
 * These are the documented declarations of plugin API version 1 (QEMU 4.2
 * to 8.2, and Debian 12's QEMU 7.2).  Every function and type below kept its
 * signature and meaning through API versions 2 to 4 (QEMU 9.x), which is
 * why the plugin can announce version 2 there (see trace-plugin.c).  Nothing
 * else from the API may be used without adding it here from the QEMU
 * documentation of "TCG Plugins".
 */
#ifndef COPROF_QEMU_PLUGIN_API_H
#define COPROF_QEMU_PLUGIN_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))

/* The plugin's opaque id, given to qemu_plugin_install. */
typedef uint64_t qemu_plugin_id_t;

/* Read by QEMU when it loads the plugin, before qemu_plugin_install. */
extern QEMU_PLUGIN_EXPORT int qemu_plugin_version;

/* What QEMU tells the plugin about itself; valid during install only. */
typedef struct qemu_info_t {
    const char *target_name;            /* e.g. "riscv32" */
    struct {
        int min;                        /* oldest API version accepted */
        int cur;                        /* newest API version provided */
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;

/* Called once at load; non-zero refuses the plugin and QEMU exits.  argv
 * holds the "name=value" options that followed the file name. */
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
                                           const qemu_info_t *info,
                                           int argc, char **argv);

/* Opaque handles, valid only during the translation callback. */
struct qemu_plugin_tb;
struct qemu_plugin_insn;

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index,
                                            void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id,
                                               struct qemu_plugin_tb *tb);

/* Whether an execution callback reads or writes guest registers; NO_REGS
 * lets TCG skip saving its register globals around the call. */
enum qemu_plugin_cb_flags {
    QEMU_PLUGIN_CB_NO_REGS,
    QEMU_PLUGIN_CB_R_REGS,
    QEMU_PLUGIN_CB_RW_REGS,
};

/* Called at every translation of a block; may register the callbacks below
 * on the block or its instructions. */
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                           qemu_plugin_vcpu_tb_trans_cb_t cb);

/* cb runs each time the translated block starts executing. */
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
                                          qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags,
                                          void *userdata);

/* cb runs each time the instruction is about to execute. */
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags,
                                            void *userdata);

/* A memory access's details (size, sign, endianness, store), opaque here;
 * and which accesses a memory callback is for. */
typedef uint32_t qemu_plugin_meminfo_t;
enum qemu_plugin_mem_rw {
    QEMU_PLUGIN_MEM_R = 1,
    QEMU_PLUGIN_MEM_W,
    QEMU_PLUGIN_MEM_RW,
};
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index,
                                          qemu_plugin_meminfo_t info,
                                          uint64_t vaddr, void *userdata);

/* cb runs after each access of the instruction to guest memory (`vaddr`
 * is the accessed address); an access that faults runs no callback. */
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn,
                                      qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags,
                                      enum qemu_plugin_mem_rw rw,
                                      void *userdata);

/* cb runs when QEMU exits. */
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
                                    qemu_plugin_udata_cb_t cb,
                                    void *userdata);

/* Drops every translated block and every callback of the plugin (as safe
 * work, before the vCPU runs its next block), then calls cb, which may
 * register callbacks again. */
typedef void (*qemu_plugin_simple_cb_t)(qemu_plugin_id_t id);
void qemu_plugin_reset(qemu_plugin_id_t id, qemu_plugin_simple_cb_t cb);

size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *
qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);

/* The instruction's bytes as translated, and their number.  API 3 (QEMU
 * 9.1) changed qemu_plugin_insn_data to copy into a buffer; the plugin uses
 * it only under API 1 and 2 (trace-plugin.c, counts=). */
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);

/* The instruction's disassembly, to be freed by the caller. */
char *qemu_plugin_insn_disas(const struct qemu_plugin_insn *insn);

#endif /* COPROF_QEMU_PLUGIN_API_H */
