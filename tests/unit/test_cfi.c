/*
 * test_cfi.c - unit tests of the collector's fast unwinder (collect/cfi.c), linked from
 * libfennec.a: a walk that starts in a PLT entry of this test program (the linker's CFA
 * expression there, rsp + 8 or + 16 by the entry's offset) finds its caller at the slot the
 * CPU would have put it in. Before cfi.c read that expression, such a walk was refused
 * and left to libunwind, which stops at generated code (CPython 3.12's -X perf trampolines:
 * one Python sample in ten lost the frames below its innermost trampoline).
 */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "collect/cfi.h"

#include "unit.h"

static int bias_of_main(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(uintptr_t *)arg = info->dlpi_addr;
	return 1; /* the first object is the program */
}

/* This program's .plt: its address in memory, or 0 (none: the build links without one). */
static uintptr_t own_plt(uint64_t *size)
{
	uintptr_t bias = 0, at = 0;
	dl_iterate_phdr(bias_of_main, &bias);
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	Elf64_Ehdr eh;
	Elf64_Shdr *sh = NULL;
	char *names = NULL;
	if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    eh.e_shstrndx >= eh.e_shnum)
		goto out;
	sh = calloc(eh.e_shnum, sizeof *sh);
	if (!sh || pread(fd, sh, eh.e_shnum * sizeof *sh, (off_t)eh.e_shoff) != (ssize_t)(eh.e_shnum * sizeof *sh))
		goto out;
	const Elf64_Shdr *str = &sh[eh.e_shstrndx];
	names = calloc(1, str->sh_size + 1);
	if (!names || pread(fd, names, str->sh_size, (off_t)str->sh_offset) != (ssize_t)str->sh_size)
		goto out;
	for (unsigned i = 0; i < eh.e_shnum; i++)
		if (sh[i].sh_name < str->sh_size && !strcmp(names + sh[i].sh_name, ".plt")) {
			at = bias + sh[i].sh_addr;
			*size = sh[i].sh_size;
		}
out:
	free(names);
	free(sh);
	close(fd);
	return at;
}

/* A function with unwind tables: the return address the walks below find is just past
 * its first byte, so the rule of that byte (CFA rsp + 8) ends the walk at the fake stack's
 * top. */
__attribute__((noinline)) static int unit_cfi_callee(int x)
{
	return x * 3 + 1;
}

/* Walk from ip with a fake stack whose slot `slot` holds a return address into
 * unit_cfi_callee (the others 0): 2 frames, the second that address, when the rule of ip
 * puts the CFA at rsp + 8 * (slot + 1). */
static uint32_t walk_from(uint64_t ip, unsigned slot, uint64_t *second)
{
	uint64_t stack[4] = {0};
	uint64_t ret = (uint64_t)(uintptr_t)&unit_cfi_callee + 1;
	stack[slot] = ret;
	uint64_t ips[8] = {0};
	int full = 0;
	/* the stack's top is just past the return address: the next frame's read is outside */
	uint32_t n = cfi_walk_regs(ip, (uint64_t)(uintptr_t)stack, 0, (uint64_t)(uintptr_t)&stack[slot + 1], ips, 8,
				   &full);
	*second = n > 1 ? ips[1] : 0;
	return n;
}

UNIT_TEST(cfi_plt_entries)
{
#if defined(__x86_64__) && defined(DLFO_EH_SEGMENT_TYPE)
	uint64_t size = 0;
	uintptr_t plt = own_plt(&size);
	if (!plt || size < 32) {
		printf("    (this build has no .plt: nothing to walk from)\n");
		return;
	}
	uint64_t want = (uint64_t)(uintptr_t)&unit_cfi_callee + 1, got;
	UNIT_CHECK_EQ(unit_cfi_callee(1), 4);
	/* binutils' x86-64 lazy PLT: PLT0 is push GOT+8 (6 bytes), jmp *GOT+16; each entry is
	 * jmp *slot (6 bytes), push $index (5), jmp PLT0. In an entry, before its push the
	 * return address is at rsp; after it, at rsp + 8 (CFA: rsp + 8 + 8 * ((rip & 15) >= 11)). */
	uint64_t entry = plt + 16;
	UNIT_CHECK_EQ(walk_from(entry, 0, &got), 2);
	UNIT_CHECK_EQ(got, want);
	UNIT_CHECK_EQ(walk_from(entry + 6, 0, &got), 2);
	UNIT_CHECK_EQ(got, want);
	UNIT_CHECK_EQ(walk_from(entry + 11, 1, &got), 2);
	UNIT_CHECK_EQ(got, want);
	/* a later entry: the same expression at another rip */
	if (size >= 64) {
		UNIT_CHECK_EQ(walk_from(plt + 48 + 11, 1, &got), 2);
		UNIT_CHECK_EQ(got, want);
	}
	/* PLT0, whose rules are plain rsp + 16, then + 24 */
	UNIT_CHECK_EQ(walk_from(plt, 1, &got), 2);
	UNIT_CHECK_EQ(got, want);
	UNIT_CHECK_EQ(walk_from(plt + 6, 2, &got), 2);
	UNIT_CHECK_EQ(got, want);
#endif
}
