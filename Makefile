# The two commands the README promises: `make demo` and `make test`.
BUILD    ?= build
TYPE     ?= RelWithDebInfo
JOBS     ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: setup configure build test demo clean asan tsan

setup:
	@bash scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	@$(BUILD)/demos/cli/banyan demo

# Tests under AddressSanitizer and UndefinedBehaviorSanitizer. Optimized (with debug info):
# at -O0 the emulated-cluster suite, millions of messages, outgrows even its sanitizer
# timeout; `make asan ASAN_TYPE=Debug` gives the unoptimized build.
ASAN_TYPE ?= RelWithDebInfo
asan:
	@$(MAKE) test BUILD=build-asan TYPE=$(ASAN_TYPE) CMAKE_FLAGS=-DBANYAN_SANITIZE=ON

# The threaded parts (transport, banyan::node, real processes) under ThreadSanitizer.
tsan: setup
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBANYAN_TSAN=ON >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target test_net_tcp_transport test_actors_node \
	  test_actors_node_collectives
	@cd build-tsan && TSAN_OPTIONS="suppressions=$(CURDIR)/scripts/tsan.supp halt_on_error=1" \
	  ctest --output-on-failure -R "net_tcp_transport|actors_node$$|actors_node_collectives"

clean:
	rm -rf $(BUILD) build-asan build-tsan
