# SPDX-License-Identifier: MIT
# Thin wrapper over CMake. `make demo` and `make test` are the README's two set-up commands.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build setup setup-test demo test test-sanitize test-tsan fuzz bench clean install deb \
	test-deb

all: build

# What the build and the demo need; the tests' packages (PyTorch, SLURM, Chromium, clang...) come
# with setup-test, which every test target runs (scripts/setup says which is which).
setup:
	@./scripts/setup

setup-test:
	@./scripts/setup --test

$(BUILD)/Makefile: CMakeLists.txt
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

# The demo needs the program only: its build leaves the tests' executables (half of a full
# build's time in a fresh Debian 12, bench/fresh_setup.md) to `make` and `make test`.
demo: setup $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS) --target ddpc
	./scripts/demo $(BUILD)/ddpc

test: setup-test build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Unit tests under AddressSanitizer + UBSan (Debug build in its own directory). Open MPI's own
# allocations show as leaks at exit, so tests that run the mpi backend (comm_mpi, mpirun across
# the namespace hosts) are left to the other builds. The sanitizer builds, like the .deb's, leave
# CUDA out (-DDDPC_CUDA=OFF): CUDA's static runtime is not built for them, and CI so keeps building
# ddpc without CUDA as well as with it.
test-sanitize: setup-test
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDDPC_SANITIZE=ON $(CMAKE_FLAGS) -DDDPC_CUDA=OFF
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		DDPC_SANITIZE=1 ctest --output-on-failure -j $(JOBS) -E 'parity|cli_|comm_mpi|multihost_mpirun'

# Threaded code (process groups, comm thread, loaders, node 0's store in `ddpc run --nnodes`)
# under ThreadSanitizer. TSan does not know Open MPI's internals, so the mpi backend's tests are
# left to the other builds.
TSAN_TESTS ?= comm_shm|test_comm|test_data_loader|test_data_augment|test_data_combined|cli_run_nodes|multihost_gloo_conformance
test-tsan: setup-test
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DDDPC_TSAN=ON $(CMAKE_FLAGS) -DDDPC_CUDA=OFF
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 DDPC_SANITIZE=1 \
		ctest --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)' -E 'mpi'

# libFuzzer harnesses for every parser of outside bytes (clang), FUZZ_SECONDS each.
FUZZ_SECONDS ?= 30
fuzz: setup-test
	./tests/fuzz/run.sh $(FUZZ_SECONDS)

# `cmake --install` of the program, libddpc (static and shared), headers, ddpc.pc and the CMake
# package under PREFIX (DESTDIR is honoured too); docs/install.md.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The Debian package $(DEB_BUILD)/ddpc_<version>_<arch>.deb (CPack; Depends from dpkg-shlibdeps),
# from its own build without CUDA (cmake/package.cmake says why), and its test (root: apt-get
# installs it, builds examples/embed against /usr, trains, removes it).
DEB_BUILD ?= build-deb
# It is installed under /usr (so GNUInstallDirs picks the multiarch libdir, lib/<triplet>), built
# with Debian's flags (dpkg-buildflags: -g for the -dbgsym package, hardening), and has its man
# pages (DDPC_MAN); lintian checks it in make test-deb. hardening=+all adds -z now (full RELRO)
# to dpkg-buildflags' LDFLAGS, as lintian's hardening-no-bindnow asks.
deb: export DEB_BUILD_MAINT_OPTIONS = hardening=+all
deb: setup
	cmake -S . -B $(DEB_BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) -DDDPC_CUDA=OFF \
		-DDDPC_TESTS=OFF -DDDPC_MAN=ON -DCMAKE_INSTALL_PREFIX=/usr \
		-DCMAKE_C_FLAGS="$$(dpkg-buildflags --get CFLAGS) $$(dpkg-buildflags --get CPPFLAGS)" \
		-DCMAKE_CXX_FLAGS="$$(dpkg-buildflags --get CXXFLAGS) $$(dpkg-buildflags --get CPPFLAGS)" \
		-DCMAKE_EXE_LINKER_FLAGS="$$(dpkg-buildflags --get LDFLAGS)" \
		-DCMAKE_SHARED_LINKER_FLAGS="$$(dpkg-buildflags --get LDFLAGS)"
	cmake --build $(DEB_BUILD) -j $(JOBS)
	cd $(DEB_BUILD) && cpack -G DEB
test-deb: setup-test deb
	./tests/deb/test_deb.sh $(DEB_BUILD) .

bench: setup-test build
	./bench/step_bench.sh $(BUILD)/ddpc

clean:
	rm -rf $(BUILD) $(DEB_BUILD) build-asan build-tsan build-fuzz
