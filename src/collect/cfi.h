/*
 * cfi.h - the ring source's fast unwinder (cfi.c): x86-64 call-frame rules read from the
 * loaded objects' .eh_frame in memory, reduced to the few forms compilers emit for
 * ordinary code and kept in a cache by address, so that a frame costs a lookup and one or
 * two loads from the stack copy instead of libunwind's general step. What it does not
 * take (signal frames, PLT entries, expressions, code without unwind tables) it leaves to
 * libunwind, which unwinds the whole sample instead. Runs on the draining thread only,
 * under the dynamic loader's lock (perfring.c).
 */
#ifndef FENNEC_CFI_H
#define FENNEC_CFI_H

#include <link.h>
#include <stdint.h>

/* Registers in DWARF's x86-64 numbering: 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp,
 * 7 rsp, 8-15 r8-r15, 16 the return address (rip). */
#define CFI_NREGS 17

/* The module table: cfi_modules_reset(), cfi_module_add() for each object that
 * dl_iterate_phdr reports, cfi_modules_done(). Also forgets every cached rule. seg_end
 * says where the loaded segment holding addr ends (0: in none): the only memory besides
 * the stack copy that cfi.c reads. */
void cfi_modules_reset(void);
void cfi_module_add(const struct dl_phdr_info *info);
void cfi_modules_done(uintptr_t (*seg_end)(uintptr_t addr));

/* One sample: registers (DWARF numbering) and the copy of the stack [sp, sp + size). */
typedef struct cfi_sample {
	uint64_t regs[CFI_NREGS];
	const uint8_t *stack;
	uint64_t size;
} cfi_sample;

/*
 * Unwind: frames[0] is regs[16], then the return addresses, at most depth + 1 in all (one
 * more than depth says the stack was cut). Returns how many, or 0 when a frame needs what
 * this unwinder does not do (the caller unwinds the sample another way). Sets *ran_off
 * when the stack went on above the copy.
 */
uint32_t cfi_walk(const cfi_sample *s, uint64_t *frames, uint32_t depth, int *ran_off);

/* Counters for tests and the check mode: rules computed, and of those not taken. */
typedef struct cfi_stats {
	uint64_t computed, refused;
} cfi_stats;
cfi_stats cfi_get_stats(void);

#endif
