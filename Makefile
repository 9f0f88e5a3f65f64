# aor — one non-recursive Makefile.
#   make            build/aord, build/aor, build/libaor.so (optimised, no sanitizers)
#   make test       sanitizer build (ASan+UBSan) + unit tests + end-to-end tests
#   make check      format check + banned functions + make test + ThreadSanitizer stress
#   make demo       mock provider + aord + curl through the shim, with a trace
#   make bench      benchmarks (optimised build), see docs/performance.md
#   make fuzz       libFuzzer targets (clang), FUZZ_SECONDS each, see docs/fuzzing.md
#   make install PREFIX=~/.local
#   make clean

BUILD    ?= build
PREFIX   ?= $(HOME)/.local
SANITIZE ?=
CC       ?= cc

PKGS := libevent libevent_openssl libcurl openssl sqlite3 libcjson inih
# llhttp (Node.js's HTTP/1.1 parser, the maintained successor of http_parser): Debian 12's
# node-llhttp ships its C sources, which are compiled in (docs/architecture.md, "Parsing").
LLHTTP_DIR ?= /usr/share/llhttp
LLHTTP_INC ?= /usr/share/include/llhttp
WARN := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O2 $(WARN) -Icommon -Idaemon -Ishim -I$(LLHTTP_INC)
# aord and aor: position-independent executables (the compiler's default, not -fPIC, so
# calls inside a file can be inlined), calls into shared libraries through the GOT
# (-fno-plt), and link-time optimisation across files in the optimised build. Together
# about 7 % fewer instructions per proxied request (docs/performance.md, change 47).
EXE_CFLAGS := -fno-plt
LTO_FLAGS := -O2 -flto=auto
ifneq ($(SANITIZE),)
SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=undefined
BASE_CFLAGS := $(filter-out -O2,$(BASE_CFLAGS)) -O1
LTO_FLAGS :=
endif
# clang's LTO objects are LLVM bitcode that gcc-ar cannot index: clang builds go without.
ifneq ($(findstring clang,$(shell $(CC) --version 2>/dev/null)),)
LTO_FLAGS :=
endif
# An archive of gcc LTO objects needs gcc-ar (the LTO plugin) for its symbol index.
ARCHIVER = $(if $(LTO_FLAGS),gcc-ar,ar)
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm
# aord does not link libcurl (it loads it only when a proxy needs it: daemon/curl_api.h)
# nor libevent_openssl (its TLS sockets are read and written with OpenSSL directly).
AORD_LIBS  = $(shell pkg-config --libs $(filter-out libcurl libevent_openssl,$(PKGS)) 2>/dev/null) -lm
# aord's marker in its dynamic symbol table: a preloaded libaor.so finds it and stays out
# of aord's way whatever aord's file is called (daemon/main.c, shim/env.c; spec §2).
AORD_LIBS += $(if $(filter Darwin,$(shell uname -s)),,-Wl,--export-dynamic-symbol=aor_daemon_marker)
CFLAGS_ALL = $(BASE_CFLAGS) $(EXE_CFLAGS) $(LTO_FLAGS) $(SAN_FLAGS) $(PKG_CFLAGS) $(CFLAGS)
# The shim lives inside other programs: libc, libdl and pthread only, never sanitized.
SHIM_CFLAGS = $(BASE_CFLAGS) -fPIC -fvisibility=hidden $(CFLAGS)

COMMON_SRCS := $(sort $(wildcard common/*.c))
SHIM_SRCS   := $(sort $(wildcard shim/*.c)) common/preamble.c common/builtin_hosts.c common/sysca.c \
               common/envflag.c
DAEMON_ALL  := $(sort $(wildcard daemon/*.c))
CLI_SRCS    := $(filter daemon/cli%.c,$(DAEMON_ALL))
AORD_SRCS   := $(filter-out daemon/cli%.c,$(DAEMON_ALL))
UNIT_SRCS   := $(sort $(wildcard tests/unit/test_*.c))
PROG_SRCS   := $(sort $(wildcard tests/progs/*.c))

COMMON_OBJS := $(COMMON_SRCS:%.c=$(BUILD)/obj/%.o)
SHIM_OBJS   := $(SHIM_SRCS:%.c=$(BUILD)/shimobj/%.o)
AORD_OBJS   := $(AORD_SRCS:%.c=$(BUILD)/obj/%.o)
CLI_OBJS    := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
LLHTTP_OBJS := $(BUILD)/obj/llhttp/llhttp.o $(BUILD)/obj/llhttp/api.o $(BUILD)/obj/llhttp/http.o
DAEMON_LIB_OBJS := $(filter-out $(BUILD)/obj/daemon/main.o,$(AORD_OBJS)) $(LLHTTP_OBJS)
UNIT_BINS   := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
PROG_BINS   := $(PROG_SRCS:tests/progs/%.c=$(BUILD)/tests/progs/%)

PHONY_EXTRA := deps-demo deps-test fuzz
.PHONY: all binaries testbins test-binaries deps $(PHONY_EXTRA) test unit e2e check format format-check banned demo bench install clean tsan
.DEFAULT_GOAL := all

# The binaries are made by a second make once deps has run, so that with -j nothing is
# compiled or looked up (llhttp's sources) before missing packages are installed.
all: deps
	@$(MAKE) --no-print-directory DEPS_DONE=1 binaries

binaries: $(BUILD)/aord $(BUILD)/aor $(BUILD)/libaor.so

# Install missing Debian packages / npm clients (scripts/install-deps) when needed:
# deps for building, deps-demo for the demo, deps-test for the tests.
deps:
	@pkg-config --exists $(PKGS) 2>/dev/null && [ -f $(LLHTTP_DIR)/llhttp.c ] \
	  && [ -f /usr/include/xxhash.h ] \
	  || scripts/install-deps

deps-demo: deps
	@command -v curl >/dev/null && command -v python3 >/dev/null \
	  && command -v openssl >/dev/null || scripts/install-deps

deps-test: deps-demo
	@pkg-config --exists cmocka 2>/dev/null && command -v clang-format >/dev/null \
	  && command -v node >/dev/null && command -v setpriv >/dev/null \
	  && [ -x /usr/sbin/dnsmasq ] && [ -f tests/clients/node_modules/.stamp ] \
	  && [ ! tests/clients/package-lock.json -nt tests/clients/node_modules/.stamp ] \
	  || scripts/install-deps

# Order-only on deps: with -j the compilers must not start before missing headers are
# installed (a fresh machine's `make -j2` failed on curl/curl.h). A second make started
# after deps (DEPS_DONE=1) does not check again.
DEPS_FIRST := $(if $(DEPS_DONE),,deps)
$(BUILD)/obj/%.o: %.c | $(DEPS_FIRST)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

# Generated third-party code: its own warnings are not ours to fix (-w), sanitizers still apply.
$(BUILD)/obj/llhttp/%.o: $(LLHTTP_DIR)/%.c | $(DEPS_FIRST)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out $(WARN),$(CFLAGS_ALL)) -w -c $< -o $@

$(BUILD)/shimobj/%.o: %.c | $(DEPS_FIRST)
	@mkdir -p $(dir $@)
	$(CC) $(SHIM_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libaorcommon.a: $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && $(ARCHIVER) rcs $@ $^

$(BUILD)/aord: $(AORD_OBJS) $(LLHTTP_OBJS) $(BUILD)/libaorcommon.a
	$(CC) $(LTO_FLAGS) $(SAN_FLAGS) -o $@ $^ $(AORD_LIBS) $(LDFLAGS)

$(BUILD)/aor: $(CLI_OBJS) $(BUILD)/libaorcommon.a
	$(CC) $(LTO_FLAGS) $(SAN_FLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

$(BUILD)/libaor.so: $(SHIM_OBJS)
	$(CC) -shared -o $@ $^ -ldl -lpthread -Wl,-z,defs

# Unit tests: test_shim_* link the shim objects, test_daemon_* the daemon objects,
# the rest the common library. A test reads a row its call fills only when it returns 1,
# after asserting that it did; cmocka's failed assert leaves the test by longjmp, which
# gcc's LTO at -O2 does not see: its "may be used uninitialized" is a false alarm there
# (the release build of the tests, `make testbins`, failed on it), so it is not an error
# in test code. Product code keeps every warning an error.
UNIT_CFLAGS = $(CFLAGS_ALL) -Wno-error=maybe-uninitialized -Wno-maybe-uninitialized
$(BUILD)/tests/test_shim_%: tests/unit/test_shim_%.c $(SHIM_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(UNIT_CFLAGS) -o $@ $^ -lcmocka -ldl -lpthread

$(BUILD)/tests/test_daemon_%: tests/unit/test_daemon_%.c $(DAEMON_LIB_OBJS) $(BUILD)/libaorcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(UNIT_CFLAGS) -o $@ $^ -lcmocka $(PKG_LIBS)

$(BUILD)/tests/test_%: tests/unit/test_%.c $(BUILD)/libaorcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(UNIT_CFLAGS) -o $@ $^ -lcmocka $(PKG_LIBS)

$(BUILD)/tests/progs/%: tests/progs/%.c $(wildcard tests/progs/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -g -O1 $(WARN) -o $@ $< -lpthread $(if $(findstring static,$*),-static,)

# --- tests -------------------------------------------------------------------
TEST_BUILD := build/san

test: deps-test
	@$(MAKE) --no-print-directory BUILD=$(TEST_BUILD) SANITIZE=address,undefined DEPS_DONE=1 test-binaries
	@AOR_BUILD=$(TEST_BUILD) tests/run-all

# The test binaries (daemon, CLI, shim, unit tests, C test programs), after deps-test as
# for all.
testbins: deps-test
	@$(MAKE) --no-print-directory DEPS_DONE=1 test-binaries

test-binaries: $(BUILD)/aord $(BUILD)/aor $(BUILD)/libaor.so $(UNIT_BINS) $(PROG_BINS)

unit: deps-test
	@$(MAKE) --no-print-directory BUILD=$(TEST_BUILD) SANITIZE=address,undefined DEPS_DONE=1 test-binaries
	@AOR_BUILD=$(TEST_BUILD) AOR_ONLY=unit tests/run-all

e2e: deps-test
	@$(MAKE) --no-print-directory BUILD=$(TEST_BUILD) SANITIZE=address,undefined DEPS_DONE=1 test-binaries
	@AOR_BUILD=$(TEST_BUILD) AOR_ONLY=e2e tests/run-all

FMT_FILES = $(wildcard common/*.[ch] shim/*.[ch] daemon/*.[ch] tests/unit/*.[ch] tests/progs/*.[ch] tests/mockprov/*.[ch] tests/fuzz/*.[ch] bench/*.[ch])

format:
	clang-format -i $(FMT_FILES)

format-check: deps-test
	@clang-format --dry-run --Werror $(FMT_FILES) && echo "format: ok"

banned:
	@if grep -nE '\b(sprintf|vsprintf|strcpy|strcat|atoi|atol|strtok|gets)[[:space:]]*\(' \
	    $(filter %.c %.h,$(FMT_FILES)); then echo "banned functions used (see above)"; exit 1; \
	 else echo "banned: ok"; fi

check: format-check banned test tsan

tsan: deps-test
	@if [ -x tests/tsan-stress ]; then tests/tsan-stress; else echo "tsan: no stress test yet"; fi

demo: deps-demo all
	@scripts/demo

bench: deps-demo
	@scripts/install-deps --bench
	@$(MAKE) --no-print-directory BUILD=build/bench all
	@scripts/bench

fuzz: deps
	@scripts/install-deps --fuzz
	@scripts/fuzz

# Quoted: PREFIX may hold spaces (then LD_PRELOAD cannot name PREFIX/lib/libaor.so: aor
# says so and how to use a symbolic link, docs/cli.md).
# A leading ~ is the home directory also when the shell left it as written (dash, the
# /bin/sh of Debian, does not expand it in `make install PREFIX=~/.local`, and a directory
# named ~ was made here).
install: all
	@p="$(PREFIX)"; case "$$p" in "~") p="$$HOME";; "~/"*) p="$$HOME/$${p#"~/"}";; esac; \
	 set -x; install -d "$(DESTDIR)$$p/bin" "$(DESTDIR)$$p/lib" && \
	 install -m 0755 "$(BUILD)/aord" "$(BUILD)/aor" "$(DESTDIR)$$p/bin/" && \
	 install -m 0755 "$(BUILD)/libaor.so" "$(DESTDIR)$$p/lib/"

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
