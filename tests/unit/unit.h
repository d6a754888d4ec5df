/*
 * unit.h - self-registering unit tests, the one mechanism of tests/unit/. A file declares
 *
 *     UNIT_TEST(symbol_demangle) { UNIT_CHECK(...); UNIT_CHECK_STR(got, "want"); }
 *
 * and test_main.c's main() runs every registered test, printing "ok unit/<name>" or
 * "FAIL unit/<name>" and counting it in the final line (docs/internals/testing.md). The tests
 * live in a linker section (fennec_unit); GCC and Clang leave such globals out of
 * AddressSanitizer's redzones, so the section stays a plain array.
 */
#ifndef FENNEC_UNIT_H
#define FENNEC_UNIT_H

#include <stdio.h>
#include <string.h>

typedef struct unit_test {
	const char *name;
	void (*fn)(int *failures);
} unit_test;

#define UNIT_TEST(n)                                                                          \
	static void unit_fn_##n(int *unit_failures);                                          \
	static const unit_test unit_reg_##n __attribute__((used, section("fennec_unit"), aligned(8))) = \
		{#n, unit_fn_##n};                                                            \
	static void unit_fn_##n(int *unit_failures)

/* The registered tests: [__start_fennec_unit, __stop_fennec_unit), both NULL when none. */
extern const unit_test __start_fennec_unit[] __attribute__((weak));
extern const unit_test __stop_fennec_unit[] __attribute__((weak));

#define UNIT_CHECK(c)                                                                 \
	do {                                                                          \
		if (!(c)) {                                                           \
			printf("    %s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			(*unit_failures)++;                                           \
		}                                                                     \
	} while (0)

#define UNIT_CHECK_EQ(a, b)                                                                    \
	do {                                                                                   \
		long long a_ = (long long)(a), b_ = (long long)(b);                            \
		if (a_ != b_) {                                                                \
			printf("    %s:%d: %s == %s: got %lld, expected %lld\n", __FILE__, __LINE__, \
			       #a, #b, a_, b_);                                                \
			(*unit_failures)++;                                                    \
		}                                                                              \
	} while (0)

#define UNIT_CHECK_STR(a, b)                                                                    \
	do {                                                                                    \
		const char *a_ = (a), *b_ = (b);                                                \
		if (!a_ || !b_ || strcmp(a_, b_)) {                                             \
			printf("    %s:%d: %s == %s: got \"%s\", expected \"%s\"\n", __FILE__, __LINE__, \
			       #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                 \
			(*unit_failures)++;                                                     \
		}                                                                               \
	} while (0)

#endif
