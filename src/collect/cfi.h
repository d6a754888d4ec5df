/*
 * cfi.h - fennec's fast unwinder (cfi.c): x86-64 call-frame rules read from the loaded
 * objects' .eh_frame in memory, reduced to the few forms compilers emit for ordinary code
 * and kept in a cache by address, so that a frame costs a lookup and one or two loads
 * instead of libunwind's general step (a PLT entry's CFA expression, rsp plus a constant
 * at each of its addresses, is one of those forms). What it does not take (signal frames,
 * other expressions, code without unwind tables) it leaves to the caller's other unwinder. Two
 * users: the ring source's samples (cfi_walk: a copy of the stack, on the draining thread
 * only, under the dynamic loader's lock, perfring.c) and the heap profiler's stacks
 * (cfi_walk_local: the calling thread's own stack, any thread, heap_stacks.c).
 */
#ifndef FENNEC_CFI_H
#define FENNEC_CFI_H

#include <link.h>
#include <stdatomic.h>
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

/*
 * Walks of the calling thread's own stack (heap_stacks.c's stack cache), with the same rules:
 * objects found with glibc's _dl_find_object (no lock, no table of ours), rules in a cache
 * shared by all threads without a lock, emptied when cfi_local_gen changes (dlclose).
 * Fills ips and sps (each frame's return address and stack pointer; frame 0 is
 * cfi_walk_local's own) up to max frames, reading the stack below stack_hi only; *full
 * when the stack went on. Returns how many, or 0 when a frame needs what these rules do
 * not do (the caller walks another way). x86-64 with glibc 2.35 or later; elsewhere it
 * returns 0.
 */
extern _Atomic uint64_t cfi_local_gen;
/* A stack walked before (return addresses and where each was read, in increasing order of
 * place): the walk stops at the first frame above `above` that is one of them, and *at
 * says which (1 + its index; 0: none), so that the caller takes the rest from there. */
typedef struct cfi_join {
	const uint64_t *ips, *locs;
	uint32_t n;
	uint64_t above;
	uint32_t *at;
} cfi_join;
uint32_t cfi_walk_local(uint64_t stack_hi, uint64_t *ips, uint64_t *sps, uint32_t max, int *full,
			const cfi_join *join);

/*
 * The same rules from a signal handler, for the interrupted code of the handler's thread:
 * from its registers (ip exact, sp, bp), reading the stack in [sp, stack_hi) only (the
 * thread's stack: the caller checks sp is on it). ips[0] is ip. Returns how many frames, or
 * 0 when a frame needs what these rules do not do. A first frame in generated code (in no
 * object) is walked out of by finding its return address on the stack (cfi.c, JIT_SCAN).
 * Async-signal-safe (_dl_find_object, the lock-free rule cache, process_vm_readv).
 */
uint32_t cfi_walk_regs(uint64_t ip, uint64_t sp, uint64_t bp, uint64_t stack_hi, uint64_t *ips, uint32_t max,
		       int *full);
/* Counters for tests and the check mode: rules computed, and of those not taken. */
typedef struct cfi_stats {
	uint64_t computed, refused;
} cfi_stats;
cfi_stats cfi_get_stats(void);

#endif
