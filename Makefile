# fennec build. `make` builds, `make test` tests, `make demo` shows the product.
# Knobs: ASAN=1 (address+undefined sanitizers, into build-asan/), TSAN=1 (thread sanitizer,
# into build-tsan/), FAULT=1 (fault injection, into build-fault/: docs/internals/testing.md),
# O=<dir> (build directory), V=1 (echo commands).

CC      ?= cc
DEBIAN_PACKAGES := libzstd-dev libunwind-dev clang libclang-rt-14-dev python3 jq time libdw-dev libelf-dev libiberty-dev zlib1g-dev golang-go libcairo2-dev \
                   libmicrohttpd-dev prometheus chromium wrk openmpi-bin libopenmpi-dev libtcmalloc-minimal4 libjemalloc2 libblas3 \
                   libopenblas0-pthread python3-dev python3-numpy python3-torch python3-scalene python3-venv

ifeq ($(ASAN),1)
  O ?= build-asan
  SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else ifeq ($(TSAN),1)
  O ?= build-tsan
  SANFLAGS := -fsanitize=thread
else ifeq ($(FAULT),1)
  O ?= build-fault
  SANFLAGS := -DFENNEC_FAULT
else
  O ?= build
  SANFLAGS :=
endif

OPT      ?= -O2
WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter
# -MMD -MP: every compile writes beside its output (x.o -> x.d, a program P -> P.d) the
# headers it read, included at the end of this file, so touching a header rebuilds only
# what includes it.
DEPFLAGS := -MMD -MP
CFLAGS   += -std=gnu11 -g $(OPT) $(WARN) -fPIC -D_GNU_SOURCE $(SANFLAGS) -Iinclude -Isrc $(DEPFLAGS)
LDFLAGS  += $(SANFLAGS)
LIBS_COL := -lzstd -lunwind-x86_64 -lunwind -lpthread -ldl -lm
# cairo (PNG charts) and libmicrohttpd (the web server) are loaded when first used, not
# linked: with the libraries under them they cost every fennec command ~5 ms of start-up
# (src/common/lib.h). Their -dev packages give the headers.
LIBS_ANA := -lzstd -lz -lm -lpthread -ldw -lelf -liberty -ldl

ifneq ($(V),1)
  Q := @
endif

# GPU (docs/gpu.md): where CUPTI's headers are found, the collector is built with CUDA
# activity tracing (src/collect/gpu_cupti.c) and the tests with the CUPTI translation test.
# Nothing links a CUDA library: libcupti, libcuda and libnvidia-ml are the program's, loaded
# at run time. NOCUDA=1 builds as if the headers were absent (use its own O=).
CUDA_HOME ?= /usr/local/cuda
ifneq ($(NOCUDA),1)
  CUPTI_INC := $(firstword $(patsubst %/cupti.h,%,$(wildcard $(CUDA_HOME)/include/cupti.h \
                 $(CUDA_HOME)/extras/CUPTI/include/cupti.h)))
endif
ifneq ($(CUPTI_INC),)
  CUPTI_CFLAGS := -DFENNEC_HAVE_CUPTI -I$(CUPTI_INC) -I$(CUDA_HOME)/include
  GPU_TESTS    := $(O)/tests/cupti_test $(O)/tests/nvtx_app
endif

# The Python module's C part (src/python/_fennec.c, docs/python.md), built for the python3
# on the PATH where its headers are (python3-dev); without them python/fennec uses ctypes.
PYTHON    ?= python3
PY_INC    := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_paths()['include'])" 2>/dev/null)
PY_SUFFIX := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX') or '')" 2>/dev/null)
ifneq ($(and $(PY_SUFFIX),$(wildcard $(PY_INC)/Python.h)),)
  PYEXT := $(O)/python/_fennec$(PY_SUFFIX)
endif

COMMON_SRC  := $(wildcard src/common/*.c)
COLLECT_SRC := $(wildcard src/collect/*.c) src/format/writer.c
ANALYZE_SRC := $(wildcard src/format/reader*.c) src/format/pipe.c $(wildcard src/analyze/*.c) $(wildcard src/symbol/*.c) $(wildcard src/report/*.c) \
               $(wildcard src/export/*.c) $(wildcard src/plot/*.c)
CLI_SRC     := $(wildcard src/cli/*.c) $(wildcard src/view/*.c)

COMMON_OBJ  := $(COMMON_SRC:%.c=$(O)/obj/%.o)
COLLECT_OBJ := $(COLLECT_SRC:%.c=$(O)/obj/%.o)
ANALYZE_OBJ := $(ANALYZE_SRC:%.c=$(O)/obj/%.o)
CLI_OBJ     := $(CLI_SRC:%.c=$(O)/obj/%.o)

SOLIB   := $(O)/lib/libfennec.so
MMAPLIB := $(O)/lib/libfennec-mmap.so
STLIB   := $(O)/lib/libfennec.a
ANALIB  := $(O)/lib/libfennec-analysis.a
FENNEC  := $(O)/bin/fennec

EXAMPLES := $(patsubst examples/%.c,$(O)/examples/%,$(wildcard examples/*.c))
FIXTURES := $(patsubst tests/fixtures/%.c,$(O)/fixtures/%,$(wildcard tests/fixtures/*.c))
BENCHES  := $(patsubst bench/%.c,$(O)/bench/%,$(wildcard bench/*.c))
UNIT_SRC := $(wildcard tests/unit/*.c)
UNIT_OBJ := $(UNIT_SRC:%.c=$(O)/obj/%.o)
UNIT     := $(O)/tests/unit

.PHONY: all lib cli pyext examples fixtures bench deps consumers demo test test-quick test-asan test-tsan test-fault \
        fuzz fuzz-run clean

all: lib cli examples fixtures $(UNIT) $(GPU_TESTS) $(PYEXT)
lib: $(SOLIB) $(STLIB) $(MMAPLIB)
cli: $(FENNEC)
# The module's C part alone (nothing without python3-dev): what pip's build asks for.
pyext: $(PYEXT)
examples: $(EXAMPLES)
fixtures: $(FIXTURES)
bench: lib cli $(BENCHES)

$(O)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# The collector: hidden visibility, only FENNEC_API symbols are exported.
$(O)/obj/src/collect/%.o $(O)/obj/src/format/writer.o $(O)/obj/src/common/%.o: CFLAGS += -fvisibility=hidden -ftls-model=initial-exec

$(O)/obj/src/collect/gpu_cupti.o $(O)/obj/src/cli/gpu.o: CFLAGS += $(CUPTI_CFLAGS)

$(SOLIB): $(COLLECT_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -shared -Wl,-soname,libfennec.so -Wl,--no-undefined -Wl,-z,now $(LDFLAGS) $^ -o $@ $(LIBS_COL)

# fennec record --memory-mmap preloads it beside libfennec.so (src/mmap/mmap.c).
$(MMAPLIB): src/mmap/mmap.c src/collect/mmap_event.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -fvisibility=hidden -shared -Wl,-soname,libfennec-mmap.so $(LDFLAGS) $< -o $@ -ldl

$(STLIB): $(COLLECT_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(ANALIB): $(ANALYZE_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

# FAULT=1: fennec's own allocations go through src/cli/fault.c first.
ifeq ($(FAULT),1)
  FAULT_LDFLAGS := $(foreach f,malloc calloc realloc strdup strndup posix_memalign,-Wl,--wrap=$(f))
endif
$(FENNEC): $(CLI_OBJ) $(O)/obj/web_assets.o $(ANALIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) $(FAULT_LDFLAGS) $^ -o $@ $(LIBS_ANA)

# The web front end (web/, docs/html.md): our template, style and script, and Apache
# ECharts from npm (web/package-lock.json, installed into $(O)/web at build time, nothing
# third-party in the tree), assembled into the binary with .incbin. Node and npm come from
# Debian when none is on the PATH.
WEB_NPM    := $(O)/web/node_modules/.fennec-installed
WEB_CHARTS := $(O)/web/node_modules/echarts/dist/echarts.min.js
WEB_FILES  := page:web/index.html style:web/fennec.css common:web/common.js app:web/fennec.js \
              comparepage:web/compare.html compareapp:web/compare.js charts:$(WEB_CHARTS)
$(WEB_NPM): web/package.json web/package-lock.json
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
		echo "fennec: installing Debian packages: nodejs npm"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs npm >/dev/null; \
	fi
	@mkdir -p $(O)/web
	$(Q)cp web/package.json web/package-lock.json $(O)/web/
	$(Q)cd $(O)/web && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $@
$(O)/obj/web_assets.o: web/index.html web/fennec.css web/common.js web/fennec.js web/compare.html web/compare.js $(WEB_NPM)
	@mkdir -p $(dir $@)
	$(Q){ echo '.section .rodata'; for f in $(WEB_FILES); do n=$${f%%:*}; \
		printf '.globl cli_web_%s\n.globl cli_web_%s_end\ncli_web_%s:\n.incbin "%s"\ncli_web_%s_end:\n.byte 0\n' \
			$$n $$n $$n "$${f#*:}" $$n; done; \
		echo '.section .note.GNU-stack,"",@progbits'; } > $(O)/obj/web_assets.s
	$(Q)$(CC) -c $(O)/obj/web_assets.s -o $@

# Programs that use the API link the shared collector and find it next to themselves.
PROG_LINK = $(CC) $(CFLAGS) $(LDFLAGS) $< -o $@ -L$(O)/lib -lfennec -Wl,-rpath,'$$ORIGIN/../lib' -lm -lpthread

$(O)/examples/%: examples/%.c include/fennec.h $(SOLIB)
	@mkdir -p $(dir $@)
	$(Q)$(PROG_LINK)

$(O)/fixtures/%: tests/fixtures/%.c $(wildcard tests/fixtures/*.h) include/fennec.h $(SOLIB)
	@mkdir -p $(dir $@)
	$(Q)$(PROG_LINK)

# Plain fixtures (tests/fixtures/plain/NAME.c -> $(O)/fixtures/NAME): no libfennec at all, so
# that a run outside `fennec record` pays none of it (test_overhead.py's baselines).
fixtures: $(patsubst tests/fixtures/plain/%.c,$(O)/fixtures/%,$(wildcard tests/fixtures/plain/*.c))
$(O)/fixtures/%: tests/fixtures/plain/%.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $< -o $@ -ldl -lm

# MPI fixtures (tests/fixtures/mpi/NAME.c -> $(O)/fixtures/NAME): built with mpicc when it
# is installed (Open MPI: openmpi-bin, libopenmpi-dev); their tests skip without it.
MPICC := $(shell command -v mpicc 2>/dev/null)
ifneq ($(MPICC),)
fixtures: $(patsubst tests/fixtures/mpi/%.c,$(O)/fixtures/%,$(wildcard tests/fixtures/mpi/*.c))
$(O)/fixtures/%: tests/fixtures/mpi/%.c $(wildcard tests/fixtures/*.h) include/fennec.h $(SOLIB)
	@mkdir -p $(dir $@)
	$(Q)OMPI_CC=$(CC) $(MPICC) $(CFLAGS) $(LDFLAGS) $< -o $@ -L$(O)/lib -lfennec -Wl,-rpath,'$$ORIGIN/../lib' -lm -lpthread
endif

# Shared libraries that fixtures dlopen: tests/fixtures/lib/NAME.c -> $(O)/fixtures/libNAME.so
FIXTURE_LIBS := $(patsubst tests/fixtures/lib/%.c,$(O)/fixtures/lib%.so,$(wildcard tests/fixtures/lib/*.c))
fixtures: $(FIXTURE_LIBS)
$(O)/fixtures/lib%.so: tests/fixtures/lib/%.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -shared $< -o $@

$(O)/bench/%: bench/%.c bench/alloc_mix.h include/fennec.h $(SOLIB) $(ANALIB)
	@mkdir -p $(dir $@)
	$(Q)$(PROG_LINK) $(ANALIB) -lzstd

# The sampling benchmark's workloads keep frame pointers, so that `perf record -g` (frame-
# pointer mode) walks their stacks as it would in code built for it; without them its
# stacks end at the sampled function (one frame), and it is timed doing no unwinding at all.
# fennec and perf's DWARF mode do not need them; every variant runs the same binary.
$(O)/bench/work_calls $(O)/bench/work_compute $(O)/bench/sample_cost: CFLAGS += -fno-omit-frame-pointer

# The unit tests (tests/unit/, docs/internals/testing.md) link both libraries: the
# analysis and the collector's libfennec.a.
$(UNIT): $(UNIT_OBJ) $(ANALIB) $(STLIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) $(UNIT_OBJ) $(ANALIB) $(STLIB) -o $@ $(LIBS_ANA) $(LIBS_COL)

# Drives the CUPTI translation and the writer with activity records built from CUPTI's
# structs (tests/gpu/): only where the headers are.
$(O)/tests/cupti_test: tests/gpu/cupti_test.c $(STLIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(CUPTI_CFLAGS) $(LDFLAGS) $< -o $@ $(STLIB) $(LIBS_COL)

# A program annotated with NVTX (header-only, from the toolkit), not linked with libfennec.
$(O)/tests/nvtx_app: tests/gpu/nvtx_app.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -I$(CUDA_HOME)/include $(LDFLAGS) $< -o $@ -ldl

# Not instrumented in the sanitizer builds: the interpreter that loads it is not.
$(PYEXT): src/python/_fennec.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=gnu11 -g $(OPT) $(WARN) -fPIC -shared -I$(PY_INC) $< -o $@ -ldl

# Installs the Debian packages the build, the tests and the demo need (only what is missing).
deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "fennec: installing Debian packages:$$missing"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	@echo "== fennec record -o $(O)/demo.fnc -- $(O)/examples/mlp_train"
	$(Q)$(FENNEC) record -o $(O)/demo.fnc -- $(O)/examples/mlp_train
	@echo "== fennec analyze $(O)/demo.fnc"
	$(Q)$(FENNEC) analyze $(O)/demo.fnc

# The whole suite: plain build, then ASan+UBSan over the same tests, TSan over the
# collector, and a short fuzz run of the reader. Prints one 'N passed, N failed' line.
test: deps consumers
	$(Q)tests/run-all

# Real consumers of `fennec export` for the tests (tests/consumers/package.json, pinned by
# its lock file): installed from npm into tests/consumers/node_modules. Node and npm come
# from Debian when none is on the PATH.
CONSUMERS := tests/consumers/node_modules/.fennec-installed
consumers: $(CONSUMERS)
$(CONSUMERS): tests/consumers/package.json tests/consumers/package-lock.json
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
		echo "fennec: installing Debian packages: nodejs npm"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs npm >/dev/null; \
	fi
	$(Q)cd tests/consumers && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $@

# The plain build's tests only (unit + integration).
test-quick: all
	$(Q)FENNEC_BUILD=$(O) python3 tests/run.py

test-asan:
	$(Q)$(MAKE) --no-print-directory ASAN=1 all
	$(Q)FENNEC_BUILD=build-asan FENNEC_SANITIZER=asan python3 tests/run.py

# The fault-injection sweep (tests/integration/test_fault.py) on its own build.
test-fault:
	$(Q)$(MAKE) --no-print-directory FAULT=1 lib cli fixtures
	$(Q)FENNEC_BUILD=build-fault python3 tests/run.py -k test_fault

test-tsan:
	$(Q)$(MAKE) --no-print-directory TSAN=1 lib fixtures
	$(Q)FENNEC_BUILD=build-tsan FENNEC_SANITIZER=tsan python3 tests/run.py --collector-only

# Two fuzzers (tests/fuzz/): the reader alone, and the whole analysis (load, rules, JSON,
# text). Both recompute chunk CRCs in their mutator (fuzz_crc.h). Their objects are in
# build-fuzz/obj, instrumented for coverage (fuzzer-no-link); libFuzzer's main comes at the
# link. fuzz-run gives each FUZZ_SECONDS, seeded with tests/corpus/ and its regression
# corpus, tests/corpus/regress/. An input that runs FUZZ_TIMEOUT s is a finding (libFuzzer's
# default is 20 minutes, longer than the run: a 34 s input once went unseen). UBSan does
# not recover: undefined behaviour stops the fuzzer and leaves the input, as a crash does
# (with recovery it printed "runtime error" and went on, and the run passed).
FUZZ     := build-fuzz/reader_fuzz build-fuzz/analysis_fuzz
FUZZ_LIB_OBJ := $(patsubst %.c,build-fuzz/obj/%.o,$(ANALYZE_SRC) $(COMMON_SRC))
FUZZ_OBJ := $(FUZZ_LIB_OBJ) build-fuzz/obj/tests/fuzz/reader_fuzz.o build-fuzz/obj/tests/fuzz/analysis_fuzz.o
build-fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(Q)clang -std=gnu11 -g -O1 -D_GNU_SOURCE -Iinclude -Isrc $(DEPFLAGS) \
		-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -c $< -o $@
build-fuzz/reader_fuzz: build-fuzz/obj/tests/fuzz/reader_fuzz.o $(FUZZ_LIB_OBJ)
build-fuzz/analysis_fuzz: build-fuzz/obj/tests/fuzz/analysis_fuzz.o $(FUZZ_LIB_OBJ)
$(FUZZ):
	@mkdir -p $(dir $@)
	$(Q)clang -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined $^ -o $@ $(LIBS_ANA)
fuzz: $(FUZZ)
FUZZ_SECONDS ?= 30
FUZZ_TIMEOUT ?= 10
fuzz-run: $(FUZZ)
	@for h in $(FUZZ); do \
		n=$$(basename $$h); mkdir -p build-fuzz/corpus-$$n; \
		echo "== $$n, $(FUZZ_SECONDS) s"; \
		$$h -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) -max_len=65536 -print_final_stats=1 \
			build-fuzz/corpus-$$n tests/corpus tests/corpus/regress || exit 1; \
	done

clean:
	rm -rf build build-asan build-tsan build-fault build-fuzz

# Header dependencies (DEPFLAGS): each object's .d beside it; programs built from one
# source in one command (fixtures, examples, benchmarks) have theirs beside them. An object
# without its .d (a build directory from before -MMD) is rebuilt once. (The .d is not a
# prerequisite: clang writes it after the object.)
DEP_OBJ  := $(COMMON_OBJ) $(COLLECT_OBJ) $(ANALYZE_OBJ) $(CLI_OBJ) $(UNIT_OBJ) $(FUZZ_OBJ)
DEP_HAVE := $(wildcard $(DEP_OBJ:.o=.d))
$(filter-out $(DEP_HAVE:.d=.o),$(DEP_OBJ)): FORCE
.PHONY: FORCE
FORCE:
-include $(DEP_HAVE) \
	$(shell find $(O) \( -path $(O)/obj -o -path $(O)/web \) -prune -o -type f -name '*.d' -print 2>/dev/null)
