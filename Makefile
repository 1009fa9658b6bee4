# baton — the two commands that matter: `make demo` and `make test`.
# Everything here installs or builds what it needs; nothing assumes a Consul binary.

CARGO ?= cargo
# Where `make devserver` listens (Consul's default port, like `consul agent -dev`).
DEVSERVER_ADDR ?= 127.0.0.1:8500

# The Python venv `make test` creates for the wheel and pytest.
VENV ?= .venv
PY := $(VENV)/bin/python
PY_MANIFEST := bindings/python/Cargo.toml
NODE_DIR := bindings/node

.PHONY: all build ffi-lib install test-c examples-c demo-workers test-cross test-readme test test-rust test-python python-install test-node node-build examples-node lint fmt demo devserver bench bench-devserver bench-sessions bench-locks examples-rust clean

all: build

build:
	$(CARGO) build --workspace --all-targets

## The whole test suite: formatting, lints, docs, and every test (what .ci/run calls).
test: lint test-make test-rust test-cli examples-rust test-c examples-c test-python test-node test-parity test-pretty test-versions test-unix test-tls test-cross test-faults test-readme docs stress-short test-pyconsul test-packages

lint: check-version check-msrv
	$(CARGO) fmt --all -- --check
	$(CARGO) fmt --manifest-path $(PY_MANIFEST) -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p consul-baton --all-targets --features prometheus -- -D warnings
	$(CARGO) clippy --manifest-path $(PY_MANIFEST) -- -D warnings
	$(CARGO) fmt --manifest-path $(NODE_DIR)/Cargo.toml -- --check
	$(CARGO) clippy --manifest-path $(NODE_DIR)/Cargo.toml -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

## The core crate on its own (`-p`: the build test-versions and test-pretty reuse; cargo resolves
## features per selection, so a workspace-wide run would build every core test twice), then the
## rest of the workspace but the command line (test-cli).
test-rust:
	$(CARGO) test -p consul-baton
	$(CARGO) test -p consul-baton --features prometheus --test metrics
	$(CARGO) test -p consul-baton --features tokio --test aio_tokio --test aio_warm
	$(CARGO) test --workspace --exclude consul-baton-cli --exclude consul-baton

## The `baton` command (cli/): its unit tests, and integration tests that run the built binary
## against in-process dev servers (loss -> SIGTERM timings are printed; --nocapture shows them).
## `make demo` says what it builds before each long step (tests/make/check_progress.py).
.PHONY: test-make
test-make:
	python3 tests/make/check_progress.py --self-test
	python3 tests/make/check_progress.py

.PHONY: test-cli
test-cli:
	$(CARGO) test -p consul-baton-cli -- --nocapture

## The Rust examples, each against CONSUL_HTTP_ADDR or its own dev server; a failing one fails the target.
RUST_EXAMPLES := leader_election semaphore_workers fenced_write health_checked_lock async_tokio async_smol double_barrier_batch
examples-rust:
	$(CARGO) build -p baton-examples --bins
	set -e; for ex in $(RUST_EXAMPLES); do echo "== example $$ex"; ./target/debug/$$ex; done

fmt:
	$(CARGO) fmt --all
	$(CARGO) fmt --manifest-path $(PY_MANIFEST)
	$(CARGO) fmt --manifest-path $(NODE_DIR)/Cargo.toml

## The venv, made again when bindings/python/requirements-dev.txt changes (its stamp file).
$(PY): $(VENV)/.requirements-dev

$(VENV)/.requirements-dev: bindings/python/requirements-dev.txt
	@echo "== $(VENV): a Python venv with maturin and pytest (bindings/python/requirements-dev.txt)"
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r bindings/python/requirements-dev.txt
	touch $@

## Builds the abi3 wheel with `maturin build --release` (cargo's progress shows; tests/packages/run.py
## builds it the same way, so the two share one build) into a directory of its own (two makes at
## once each install their own wheel) and installs it into the venv.
python-install: $(PY)
	@echo "== python-install: the consul-baton wheel (maturin, release); the first build compiles the Rust core and its dependencies, minutes on 2 cores"
	@mkdir -p target
	set -e; out=$$(mktemp -d $(CURDIR)/target/python-install.XXXXXX); trap 'rm -rf "$$out"' EXIT; \
		$(VENV)/bin/maturin build --release --manifest-path $(PY_MANIFEST) --out "$$out"; \
		$(VENV)/bin/pip install -q --force-reinstall --no-deps "$$out"/*.whl

## The pytest suite, against a baton-devserver process its fixture starts.
test-python: python-install
	$(CARGO) build -p consul-baton-devserver
	$(PY) -m pytest -q -s bindings/python/tests
	$(PY) examples/python/leader_election.py
	$(PY) examples/python/semaphore_worker.py
	$(PY) examples/python/health_checked_lock.py
	$(PY) examples/python/leader_task.py
	$(PY) examples/python/group_membership.py

## py-consul's own test suite (PyPI's sdist of py-consul $(PYCONSUL_VERSION)) against baton-devserver,
## through our conftest (tests/pyconsul/); fails when a test in tests/pyconsul/expected-pass.txt fails.
.PHONY: test-pyconsul
PYCONSUL_VERSION ?= 1.8.0
test-pyconsul: $(PY)
	$(CARGO) build -p consul-baton-devserver
	$(PY) -m pip install -q -r tests/pyconsul/requirements.txt
	$(PY) tests/pyconsul/run.py --version $(PYCONSUL_VERSION)

## The main job: C, Python and Node workers elect a leader, fail over after a SIGKILL, hand over
## on a resign, then share a 2-slot semaphore (demo/run.py). Uses CONSUL_HTTP_ADDR if set, else
## starts the dev server; stops everything it started and checks that no session is left.
DEMO_OUT := target/demo
demo: python-install node-build demo-workers
	@echo "== demo: baton-devserver (release); the first build takes a few minutes on 2 cores"
	$(CARGO) build --release -p consul-baton-devserver
	$(PY) demo/run.py

## The C worker of the demo and of the cross-language test (the Python one needs the wheel).
demo-workers:
	@echo "== demo-workers: libbaton (debug) and the C worker; the first build takes minutes on 2 cores"
	$(MAKE) ffi-lib FFI_PROFILE=debug
	mkdir -p $(DEMO_OUT)
	cc -std=c11 $(CWARN) -Iinclude demo/worker.c -Ltarget/debug/baton-lib -lbaton -pthread \
		-Wl,-rpath,$(CURDIR)/target/debug/baton-lib -o $(DEMO_OUT)/worker

## Rust, C, Python and Node processes contend for one lock and one 2-slot semaphore; an
## external checker proves from their logs that no holdings overlapped and tokens only grew.
test-cross: python-install node-build demo-workers
	$(CARGO) build -p consul-baton-devserver -p baton-examples --bins
	$(PY) tests/cross/run.py --self-test
	$(PY) tests/cross/run.py

## The Rust lock, election, semaphore, fencing, session and watch suites, and the whole Python and
## Node suites, against dev servers emulating each Consul version in CONSUL_VERSIONS (`baton-devserver --consul-version`; see the
## README's compatibility table): 1.0.8 (txn numbers through float64, identical writes bump the
## index, legacy session `Checks`, no get-or-empty, 64 txn ops, pretty JSON), 1.6.1 (float64 txn
## numbers, the txn no-op index quirk) and the current behaviour. core/tests/versions.rs checks
## each version boundary on its own.
.PHONY: test-versions
CONSUL_VERSIONS ?= 1.0.8 1.6.1 current
RUST_VERSION_SUITES := --test locks --test election --test semaphore --test holding --test sessions --test watch --test checks --test failover --test keys --test lowlevel --test parity_gaps --test cancel_settles --test close_owed --test aio --test aio_parity --test warm --test direct --test multilock --test rwlock --test membership --test barrier --test counter --test leader_task --test aio_warm --test aio_recipes --test watch_scale --test metrics
test-versions: python-install node-build
	$(CARGO) build -p consul-baton-devserver
	set -e; for v in $(CONSUL_VERSIONS); do \
		echo "== Consul $$v (emulated)"; \
		BATON_TEST_CONSUL_VERSION=$$v $(CARGO) test -q -p consul-baton $(RUST_VERSION_SUITES); \
		BATON_TEST_CONSUL_VERSION=$$v $(PY) -m pytest -q bindings/python/tests; \
		(cd $(NODE_DIR) && BATON_TEST_CONSUL_VERSION=$$v node --test __test__/); \
	done

## The fault harness (tests/faults/README.md): Rust, C, Python and Node workers contend for a lock
## and a 2-slot semaphore, Rust ones for a read-write lock (readers and writers) and a multi-key lock
## sharing a key with the lock, each through its own fault proxy, under partitions, SIGSTOP, SIGKILL, dev server
## restarts, no-leader windows, latency spikes, destroyed sessions and node failures; an external
## checker proves from their logs that no two believed they held at once (frozen holders aside;
## readers of the read-write lock may), no fenced update was lost, loss was signalled before the next holder, the lock came back
## within its budget, and no session was left. FAULT_EPISODES episodes (default 16: about 35 s on the 2-core VM).
## `make bench-faults EPISODES=N` is the long soak (logs in target/faults/soak).
.PHONY: test-faults bench-faults faults-workers
FAULT_EPISODES ?= 16
EPISODES ?= 1000
faults-workers: python-install node-build
	$(CARGO) build -p consul-baton-devserver -p faults-worker
	$(MAKE) --no-print-directory ffi-lib FFI_PROFILE=debug
	mkdir -p target/faults
	cc -std=c11 $(CWARN) -Iinclude tests/faults/worker.c -Ltarget/debug/baton-lib -lbaton -pthread \
		-Wl,-rpath,$(CURDIR)/target/debug/baton-lib -o target/faults/worker-c
test-faults: faults-workers
	$(PY) tests/faults/run.py --self-test
	$(PY) tests/faults/run.py --episodes $(FAULT_EPISODES) --logdir target/faults/test
bench-faults: faults-workers
	$(PY) tests/faults/run.py --episodes $(EPISODES) --logdir target/faults/soak

## ---- Packages (tests/packages/run.py) ----------------------------------------------------
## Every artifact a user installs (the crates, the wheel and sdist, the npm tarball, the C
## install and dist tarball), each installed OUTSIDE the repository (a new venv, a new npm
## project, a scratch cargo project, a pkg-config build against a new prefix) and smoke-tested
## against its packaged dev server: lock, election, loss. Ends with `N passed, N failed`.
## PACKAGES_ONLY=python,node runs a subset (versions,rust,c,python,node).
.PHONY: test-packages check-version set-version check-msrv
test-packages: $(PY) node-build
	$(CARGO) build --release -p consul-baton-devserver
	$(PY) tests/packages/run.py $(if $(PACKAGES_ONLY),--only $(PACKAGES_ONLY))

## The npm tarball, target/packages/dist/consul-baton-$(VERSION).tgz: the addon (node-build), the
## release dev server as bin/baton-devserver-linux-x64 and LICENSE are staged into bindings/node
## (git-ignored there) and packed with `npm pack`.
.PHONY: npm-pack
npm-pack: node-build
	$(CARGO) build --release -p consul-baton-devserver
	install -m 755 target/release/baton-devserver $(NODE_DIR)/bin/baton-devserver-linux-x64
	strip --strip-debug $(NODE_DIR)/bin/baton-devserver-linux-x64
	install -m 644 LICENSE $(NODE_DIR)/LICENSE
	mkdir -p target/packages/dist
	cd $(NODE_DIR) && npm pack --pack-destination $(CURDIR)/target/packages/dist

## The version is set once, in the root Cargo.toml ([workspace.package]); check-version fails
## when another file that carries it differs; `make set-version V=X.Y.Z` rewrites them all.
check-version:
	python3 tests/packages/versions.py check
set-version:
	python3 tests/packages/versions.py set $(V)

## The declared rust-version (root Cargo.toml) against every dependency's in Cargo.lock; clippy's
## incompatible_msrv lint (make lint) checks our own use of std against it.
check-msrv:
	python3 tests/packages/versions.py msrv

## Run the Consul-compatible dev server in the foreground (Ctrl-C stops it).
devserver:
	$(CARGO) run --release -p consul-baton-devserver -- --addr $(DEVSERVER_ADDR) --session-ttl-min 1s

## Builds the Node addon (napi-rs) and regenerates its loader and typings (committed).
## package.json pins (overrides) build-tool dependencies of @napi-rs/cli: @napi-rs/tar and
## wasm-tools to releases published for every platform in the registry we install from (for
## their newest releases it answers 404 for the other platforms' optional packages, so npm 11
## left those out of the lock file and `npm ci` then refused it); @napi-rs/lzma 1.4.5 and
## content-type 2.1.0 because their newest releases declare Node >= 22 (EBADENGINE under the
## Node 20 we test). `npm ci` failing on an EBADENGINE warning keeps it that way.
node-build:
	@mkdir -p target
	@echo "== node-build: npm ci (output below when it ends), then the Node addon (napi-rs, release); the first build takes minutes on 2 cores"
	cd $(NODE_DIR) && npm ci --no-audit --no-fund > $(CURDIR)/target/npm-ci.log 2>&1; rc=$$?; cat $(CURDIR)/target/npm-ci.log; exit $$rc
	@if grep -q EBADENGINE target/npm-ci.log; then \
		echo "npm ci: a dependency does not support Node $$(node --version) (EBADENGINE above); pin it in package.json overrides" >&2; exit 1; fi
	cd $(NODE_DIR) && npx napi build --platform --release --js native.js --dts native.d.ts

## node --test against a baton-devserver process, then the Node examples; fails when the
## generated typings drifted.
test-node: node-build
	git diff --exit-code -- $(NODE_DIR)/native.js $(NODE_DIR)/native.d.ts
	$(CARGO) build -p consul-baton-devserver
	cd $(NODE_DIR) && node --test __test__/
	$(MAKE) --no-print-directory examples-node

## The book's "Capabilities by language" page (docs/src/reference/capabilities.md, tests/parity/check.py): every cell names an
## API that resolves (Rust crate, include/baton.h, the installed wheel, the Node addon) and a
## test that exists, or says why not; `— missing` and blank cells fail. Its self-test runs
## first: faults planted in a copy of the table must be reported, exactly those.
.PHONY: test-parity
test-parity: python-install node-build
	$(CARGO) build -p consul-baton --features prometheus
	$(PY) tests/parity/check.py --self-test
	$(PY) tests/parity/check.py

## The Rust core, Python and Node suites against dev servers that pretty-print like
## `consul agent -dev` (indented JSON ending with a newline): tests must parse JSON, not bytes.
## The lock, semaphore, election, session, watch, ACL and aio suites again, every client of them
## on the dev server's unix socket (`unix:///path`, as an agent with addresses.http =
## "unix:///..."), then on its HTTPS listener (a CA made per fixture, trusted by the clients):
## the same build as test-rust, the same tests, other connections.
.PHONY: test-unix test-tls
RUST_TRANSPORT_SUITES := --test locks --test election --test semaphore --test holding --test sessions --test watch --test keys --test acl --test aio --test aio_warm --test aio_parity --test warm --test direct --test cancel_settles --test close_owed --test hostile --test hostile_answers --test hostile_kv
test-unix:
	BATON_TEST_TRANSPORT=unix $(CARGO) test -q -p consul-baton $(RUST_TRANSPORT_SUITES)
	BATON_TEST_TRANSPORT=unix $(CARGO) test -q -p consul-baton --features tokio --test aio_tokio --test aio_warm
test-tls:
	BATON_TEST_TRANSPORT=https $(CARGO) test -q -p consul-baton $(RUST_TRANSPORT_SUITES)
	BATON_TEST_TRANSPORT=https $(CARGO) test -q -p consul-baton --features tokio --test aio_tokio --test aio_warm

.PHONY: test-pretty
test-pretty: python-install node-build
	$(CARGO) build -p consul-baton-devserver
	BATON_TEST_DEVSERVER_PRETTY=1 $(CARGO) test -p consul-baton
	BATON_TEST_DEVSERVER_PRETTY=1 $(PY) -m pytest -q bindings/python/tests
	cd $(NODE_DIR) && BATON_TEST_DEVSERVER_PRETTY=1 node --test __test__/

## The Node examples (addon and dev server already built), each against CONSUL_HTTP_ADDR or a
## dev server it starts; a failing one fails the target.
NODE_EXAMPLES := leader_election semaphore_worker health_checked_lock rwlock_cache counter
examples-node:
	set -e; for ex in $(NODE_EXAMPLES); do echo "== example $$ex"; node examples/node/$$ex.js; done

## The lock and semaphore contention examples of every language (Rust, C, Python, Node),
## RUNS times each, STRESS_J at a time (default: the number of CPUs), each run against its own
## dev server; fails if any run failed (exit status, 120 s timeout, output checks) and keeps
## those runs' output in target/stress/ (tests/stress/run.py). `make stress RUNS=200` is the
## long run; make test runs stress-short (STRESS_SHORT_RUNS each).
.PHONY: stress stress-short
RUNS ?= 20
STRESS_SHORT_RUNS ?= 3
stress stress-short: python-install node-build examples-c-build
	$(CARGO) build -p consul-baton-devserver -p baton-examples --bins
	$(PY) tests/stress/run.py --self-test
	$(PY) tests/stress/run.py --runs $(if $(filter stress-short,$@),$(STRESS_SHORT_RUNS),$(RUNS)) $(if $(STRESS_J),-j $(STRESS_J))

bench: bench-devserver bench-sessions bench-locks

bench-devserver:
	$(CARGO) run --release -p bench-devserver

clean:
	$(CARGO) clean

bench-sessions:
	$(CARGO) run --release -p bench-sessions

bench-locks:
	$(CARGO) build --release -p consul-baton-devserver -p bench-locks
	./target/release/bench-locks

## The async API (baton::aio) against the blocking one, side by side: cycles/s and CPU per
## cycle, and threads and RSS with 10,000 async acquires pending vs 10,000 blocking holdings.
.PHONY: bench-async
bench-async:
	$(CARGO) build --release -p consul-baton-devserver -p bench-async
	./target/release/bench-async $(BENCH_ASYNC_ARGS)

## Holders and waiters across Consul leader elections: N "no cluster leader" windows of TTL/2
## and 2xTTL on the dev server (client-agent 500s, requests held as rpc_hold_timeout does);
## prints holdings kept, false losses, keys left held by an unrenewed session, and the time
## from the new leader to the next holder. Options: BENCH_FAILOVER_ARGS="--windows 20 --ttl-ms 2000".
.PHONY: bench-failover
bench-failover:
	$(CARGO) build --release -p bench-failover
	./target/release/bench-failover $(BENCH_FAILOVER_ARGS)

## How soon each loss signal (is_held false, callback, wait_lost, cancel token / lostSignal)
## fires after the local lease deadline, in Rust, C, Python and Node, with the dev server paused
## and with each holder blackholed through its own proxy; prints p50/p99/max and signals late
## after a contender acquired (bench/loss/README.md). Options: BENCH_LOSS_ARGS="--episodes 50".
.PHONY: bench-loss
BENCH_LOSS_OUT := target/bench-loss
bench-loss: python-install node-build
	$(CARGO) build --release -p consul-baton-devserver -p bench-loss
	$(MAKE) --no-print-directory ffi-lib FFI_PROFILE=release
	mkdir -p $(BENCH_LOSS_OUT)
	cc -std=c11 -O2 $(CWARN) -Iinclude bench/loss/holder.c -Ltarget/release/baton-lib -lbaton -pthread \
		-Wl,-rpath,$(CURDIR)/target/release/baton-lib -o $(BENCH_LOSS_OUT)/holder
	$(PY) bench/loss/run.py $(BENCH_LOSS_ARGS)

## What each binding costs on top of the Rust core (bench/bindings/run.py): one dev server in its
## own process; Rust, C, Python (sync and baton.aio) and Node workers each run uncontended
## acquire+release cycles (cycles/s, p50/p99) and contended hand-offs, then `ratio <lang>/rust`
## lines, Node event-loop lag and Python asyncio loop lag with 1,000 pending acquires. Each round
## also runs the floor clients (two raw PUTs on one keep-alive connection: what the wire allows;
## floor-txn, the same with baton's own txn requests), and every figure comes with the worker's
## and the dev server's CPU per cycle, requests per cycle and the load average. Every client runs
## over plain HTTP, HTTPS (an https:// address and CONSUL_CACERT; the floor is then the TLS floor,
## rustls) and the dev server's unix socket (unix:///path), in the same rounds: rows rust,
## rust/https, rust/unix, ratios per transport (`ratio rust/floor over https`) and per client
## (`ratio rust https/http`, `ratio rust unix/http`). With 2 CPUs or
## more the dev server runs on the first and the workers on the others (--no-pin: unpinned).
## LATENCY_MS=0.5 runs at that server latency (a precise proxy in front of each of the dev
## server's listeners, bench/bindings/latency.rs); LATENCY_MS=0,0.3,1 sweeps. Options:
## BENCH_BINDINGS_ARGS="--rounds 9 --cycles 1000 --langs floor,rust,node,node-nospin
## --transports http,https" (node-nospin, python-aio-nospin: the event loop's polling switched
## off; --transports: any of http, https, unix, default all).
.PHONY: bench-bindings
LATENCY_MS ?= 0
BENCH_BINDINGS_OUT := target/bench-bindings
bench-bindings: python-install node-build
	$(CARGO) build --release -p consul-baton-devserver -p bench-bindings
	$(MAKE) --no-print-directory ffi-lib FFI_PROFILE=release
	mkdir -p $(BENCH_BINDINGS_OUT)
	cc -std=c11 -O2 $(CWARN) -Iinclude bench/bindings/worker.c -Ltarget/release/baton-lib -lbaton -pthread \
		-Wl,-rpath,$(CURDIR)/target/release/baton-lib -o $(BENCH_BINDINGS_OUT)/worker-c
	$(PY) bench/bindings/run.py --out $(BENCH_BINDINGS_OUT) --latency-ms $(LATENCY_MS) $(BENCH_BINDINGS_ARGS)

## User-space instructions per acquire+release cycle of each client (bench/bindings/instructions.py:
## valgrind's callgrind, every thread of the worker, the difference of runs of 1,500 and 3,000
## cycles against one dev server, after the workers' warm-up: Node's JIT is still compiling the
## lock path before), where timing cannot tell a few percent of a binding's own work
## from a shared machine's noise. Needs valgrind. Options: BENCH_INSTRUCTIONS_ARGS="--langs
## rust,python-aio,node --cycles 2000,4000".
.PHONY: bench-instructions
bench-instructions: python-install node-build
	$(CARGO) build --release -p consul-baton-devserver -p bench-bindings
	$(PY) bench/bindings/instructions.py --out $(BENCH_BINDINGS_OUT) $(BENCH_INSTRUCTIONS_ARGS)

## What waiting and holding cost as the count grows (bench/scale/run.py), side by side in one
## run against one dev server with its default 200-connection limit per client: threads, RSS
## per pending acquire, loop lag and lateness for 1,000 and 10,000 pending acquires (Rust
## baton::aio, Python baton.aio, Node), and threads, sockets, failed or lost calls for 1,000
## and 10,000 held locks named with a shared prefix, flat, or with distinct first segments
## (Rust, C, Python, Node), each held for a minute. Options: BENCH_SCALE_ARGS="--pending 1000
## --held 1000 --hold 5 --langs rust,node".
.PHONY: bench-scale
bench-scale: python-install node-build
	$(CARGO) build --release -p consul-baton-devserver -p bench-scale
	$(MAKE) --no-print-directory ffi-lib FFI_PROFILE=release
	mkdir -p target/bench-scale
	cc -std=c11 -O2 $(CWARN) -Iinclude bench/scale/worker.c -Ltarget/release/baton-lib -lbaton \
		-Wl,-rpath,$(CURDIR)/target/release/baton-lib -o target/bench-scale/worker-c
	$(PY) bench/scale/run.py $(BENCH_SCALE_ARGS)

## ---- C ABI (ffi/) --------------------------------------------------------------------------
## The crate's lib is named baton_ffi (a lib named "baton" would collide with the core crate's
## libbaton.rlib); ffi-lib copies its artifacts to libbaton.{so,a} (build.rs sets the soname).
FFI_PROFILE ?= release
FFI_CARGO_FLAGS := $(if $(filter release,$(FFI_PROFILE)),--release,)
FFI_TARGET := target/$(if $(filter release,$(FFI_PROFILE)),release,debug)
FFI_LIB := $(FFI_TARGET)/baton-lib
PREFIX ?= /usr/local
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
CWARN := -Wall -Wextra -Werror
C_TEST_SRC := ffi/tests/c/test_baton.c ffi/tests/c/test_recipes.c ffi/tests/c/test_recipes_more.c ffi/tests/c/test_checks.c ffi/tests/c/test_parity_gaps.c ffi/tests/c/test_capi_gaps.c ffi/tests/c/test_hostile.c ffi/tests/c/test_metrics.c
C_TEST_OUT := target/ffi-c-tests
STATIC_LIBS := -lpthread -ldl -lm -lrt

# The shared library's ABI version (its soname is libbaton.so.$(SOVERSION); ffi/build.rs sets
# it): the major version from 1.0 on, 0.<minor> before (a 0.x minor release may break the ABI,
# as Cargo's semver reads it; patch releases never do).
SOVERSION := $(shell echo $(VERSION) | awk -F. '{ if ($$1 == 0) print $$1 "." $$2; else print $$1 }')

ffi-lib:
	@echo "== libbaton ($(FFI_PROFILE)): the first build compiles the Rust core and its dependencies, minutes on 2 cores"
	$(CARGO) build -p baton-ffi $(FFI_CARGO_FLAGS)
	mkdir -p $(FFI_LIB)
	rm -f $(FFI_LIB)/libbaton.so*
	cp $(FFI_TARGET)/libbaton_ffi.so $(FFI_LIB)/libbaton.so.$(VERSION)
	ln -s libbaton.so.$(VERSION) $(FFI_LIB)/libbaton.so.$(SOVERSION)
	ln -s libbaton.so.$(SOVERSION) $(FFI_LIB)/libbaton.so
	cp $(FFI_TARGET)/libbaton_ffi.a $(FFI_LIB)/libbaton.a

## Installs include/baton.h, libbaton.so.$(VERSION) (links libbaton.so.$(SOVERSION), the soname,
## and libbaton.so), libbaton.a, lib/pkgconfig/baton.pc and bin/baton-devserver (release; the
## dev server the getting-started page runs) under PREFIX (default /usr/local). What is installed
## is stripped: libbaton.so of its debug info and local symbols (`--strip-unneeded` keeps the
## exported baton_* dynamic symbols), libbaton.a and baton-devserver of debug info only (an
## archive's symbols are what links against it). STRIP=true installs them as built, for
## distributions that split the debug info off themselves. baton.pc carries no rpath (see
## docs/src/getting-started/c.md): a program finds libbaton.so in PREFIX/lib through its own
## -Wl,-rpath, ldconfig or LD_LIBRARY_PATH.
STRIP ?= strip
install: ffi-lib
	@echo "== baton-devserver (release), for $(PREFIX)/bin; the first build takes minutes on 2 cores"
	$(CARGO) build --release -p consul-baton-devserver
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/baton.h $(DESTDIR)$(PREFIX)/include/baton.h
	install -m 755 $(FFI_LIB)/libbaton.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libbaton.so.$(VERSION)
	$(STRIP) --strip-unneeded $(DESTDIR)$(PREFIX)/lib/libbaton.so.$(VERSION)
	ln -sfn libbaton.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libbaton.so.$(SOVERSION)
	ln -sfn libbaton.so.$(SOVERSION) $(DESTDIR)$(PREFIX)/lib/libbaton.so
	install -m 644 $(FFI_LIB)/libbaton.a $(DESTDIR)$(PREFIX)/lib/libbaton.a
	$(STRIP) --strip-debug $(DESTDIR)$(PREFIX)/lib/libbaton.a
	install -m 755 target/release/baton-devserver $(DESTDIR)$(PREFIX)/bin/baton-devserver
	$(STRIP) --strip-debug $(DESTDIR)$(PREFIX)/bin/baton-devserver
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' ffi/baton.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/baton.pc
	$(if $(DESTDIR),@true,@echo "installed under $(PREFIX); build a program with  cc app.c -o app \$$(pkg-config --cflags --libs baton) -Wl,-rpath,$(PREFIX)/lib  (docs/src/getting-started/c.md)")

## The C release tarball, target/dist/baton-$(VERSION)-<arch>-linux-gnu.tar.gz: what `make install`
## puts under a prefix (include/baton.h, lib/libbaton.{so*,a}, lib/pkgconfig/baton.pc, relocatable:
## its prefix is where it lies, bin/baton-devserver, the dev server for C users' tests), README.md,
## CHANGELOG.md, LICENSE. Unpack anywhere; `PKG_CONFIG_PATH=<dir>/lib/pkgconfig pkg-config --cflags --libs baton`.
DIST_DIR := target/dist
DIST_NAME := baton-$(VERSION)-$(shell uname -m)-linux-gnu
.PHONY: dist
dist:
	rm -rf $(DIST_DIR)/$(DIST_NAME) $(DIST_DIR)/$(DIST_NAME).tar.gz
	$(MAKE) --no-print-directory install FFI_PROFILE=release PREFIX=/ DESTDIR=$(CURDIR)/$(DIST_DIR)/$(DIST_NAME)
	sed -i 's|^prefix=.*|prefix=$${pcfiledir}/../..|' $(DIST_DIR)/$(DIST_NAME)/lib/pkgconfig/baton.pc
	install -m 644 README.md CHANGELOG.md LICENSE $(DIST_DIR)/$(DIST_NAME)/
	tar -C $(DIST_DIR) -czf $(DIST_DIR)/$(DIST_NAME).tar.gz $(DIST_NAME)
	@echo "$(DIST_DIR)/$(DIST_NAME).tar.gz"

## C tests: header as C11/C++17, the C suite under ASan+UBSan and under valgrind against a
## dev server, and a C++17 consumer built with pkg-config from a temporary install.
test-c:
	$(MAKE) ffi-lib FFI_PROFILE=debug
	$(CARGO) build -p consul-baton-devserver
	mkdir -p $(C_TEST_OUT)
	cc -std=c11 $(CWARN) -Iinclude -fsyntax-only ffi/tests/c/header_c.c
	c++ -std=c++17 $(CWARN) -Iinclude -fsyntax-only ffi/tests/c/header_cpp.cpp
	# Every function of baton.h meets hostile inputs in test_hostile.c.
	set -e; missing=$$(for f in $$(grep -v '^\s*//' include/baton.h | grep -o 'baton_[a-z_]*(' | tr -d '(' | sort -u); do \
		grep -q "\b$$f(" ffi/tests/c/test_hostile.c || echo "$$f"; done); \
		if [ -n "$$missing" ]; then echo "not called in ffi/tests/c/test_hostile.c:" $$missing >&2; exit 1; fi
	if cc -std=c11 $(CWARN) -Iinclude -c -o /dev/null ffi/tests/c/must_use.c 2>/dev/null; then \
		echo "an ignored baton_lock_acquire result compiled: BATON_MUST_USE has no effect" >&2; exit 1; fi
	cc -std=c11 $(CWARN) -g -Iinclude -fsanitize=address,undefined -fno-omit-frame-pointer \
		$(C_TEST_SRC) target/debug/baton-lib/libbaton.a $(STATIC_LIBS) -pthread -o $(C_TEST_OUT)/test_asan
	cc -std=c11 $(CWARN) -g -Iinclude $(C_TEST_SRC) -Ltarget/debug/baton-lib -lbaton -pthread \
		-Wl,-rpath,$(CURDIR)/target/debug/baton-lib -o $(C_TEST_OUT)/test_shared
	# LeakSanitizer is on (ASan's default); valgrind fails on any definite or indirect leak.
	# ("Possibly lost" blocks are process-lifetime statics and thread-locals, not shown.)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		ffi/tests/c/with-devserver.sh target/debug/baton-devserver $(C_TEST_OUT)/test_asan
	# TLS, mutual TLS and ACLs (CONSUL_* variables, baton_client_new_from_env), under ASan.
	cc -std=c11 $(CWARN) -g -Iinclude -fsanitize=address,undefined -fno-omit-frame-pointer \
		ffi/tests/c/test_tls.c target/debug/baton-lib/libbaton.a $(STATIC_LIBS) -pthread -o $(C_TEST_OUT)/test_tls
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		ffi/tests/c/with-tls-devservers.sh target/debug/baton-devserver $(C_TEST_OUT)/test_tls
	ffi/tests/c/with-devserver.sh target/debug/baton-devserver \
		valgrind -q --leak-check=full --show-leak-kinds=definite,indirect \
		--errors-for-leak-kinds=definite,indirect --error-exitcode=1 --child-silent-after-fork=yes \
		$(C_TEST_OUT)/test_shared
	set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
		$(MAKE) --no-print-directory install FFI_PROFILE=debug PREFIX=$$tmp/prefix; \
		cp ffi/tests/consumer/consumer.cpp $$tmp/; \
		cd $$tmp && PKG_CONFIG_PATH=$$tmp/prefix/lib/pkgconfig \
		c++ -std=c++17 $(CWARN) consumer.cpp $$(PKG_CONFIG_PATH=$$tmp/prefix/lib/pkgconfig pkg-config --cflags --libs baton) \
			-Wl,-rpath,$$tmp/prefix/lib -o consumer && ./consumer

## The C examples against a fresh dev server each: semaphore-limited workers (fails if more
## than LIMIT jobs ever run at once) and three leader-election workers stepping down on SIGTERM.
C_EXAMPLES_OUT := target/c-examples
examples-c: examples-c-build
	ffi/tests/c/with-devserver.sh target/debug/baton-devserver $(C_EXAMPLES_OUT)/semaphore_worker 5 2 3
	ffi/tests/c/with-devserver.sh target/debug/baton-devserver examples/c/leader_demo.sh $(C_EXAMPLES_OUT)
	ffi/tests/c/with-devserver.sh target/debug/baton-devserver $(C_EXAMPLES_OUT)/health_checked_lock
	ffi/tests/c/with-devserver.sh target/debug/baton-devserver $(C_EXAMPLES_OUT)/multilock_transfer 25

## Builds the C examples (and the debug libbaton and dev server they run against).
.PHONY: examples-c-build
examples-c-build:
	$(MAKE) ffi-lib FFI_PROFILE=debug
	$(CARGO) build -p consul-baton-devserver
	mkdir -p $(C_EXAMPLES_OUT)
	set -e; for ex in leader_worker semaphore_worker health_checked_lock multilock_transfer; do \
		cc -std=c11 $(CWARN) -Iinclude examples/c/$$ex.c -Ltarget/debug/baton-lib -lbaton -pthread \
			-Wl,-rpath,$(CURDIR)/target/debug/baton-lib -o $(C_EXAMPLES_OUT)/$$ex; done

## Every snippet of README.md, the book (docs/src) and the package pages, run as written, each
## against a fresh dev server: Rust (edition 2024, as `cargo new` makes a project), Python,
## JavaScript, C and the `baton` command (tests/readme/run_snippets.py says which blocks run).
## Its self-test first: a planted failing snippet of each language must fail.
test-readme: python-install node-build
	$(MAKE) --no-print-directory ffi-lib FFI_PROFILE=debug
	$(CARGO) build -p consul-baton-devserver -p consul-baton-cli
	$(PY) tests/readme/run_snippets.py --self-test
	$(PY) tests/readme/run_snippets.py

## ---- The book (docs/) ----------------------------------------------------------------------
## mdBook, pinned, installed from crates.io into target/tools (search only: no server, no watcher).
## `make docs` builds docs/ into target/book, fails on any mdBook warning, then checks every link
## and anchor of the book, README.md and the package pages offline (tests/docs/check_links.py),
## and copies the API reference pages (generated) and rustdoc beside the book.
MDBOOK_VERSION := 0.4.52
TOOLS := $(CURDIR)/target/tools
MDBOOK := $(TOOLS)/bin/mdbook
$(MDBOOK):
	$(CARGO) install mdbook --version $(MDBOOK_VERSION) --locked --no-default-features --features search \
		--root $(TOOLS) --target-dir $(TOOLS)/build
	@$(MDBOOK) --version | grep -qx 'mdbook v$(MDBOOK_VERSION)' || { echo "mdbook is not $(MDBOOK_VERSION)" >&2; exit 1; }
.PHONY: mdbook docs docs-snippets
mdbook: $(MDBOOK)

## The rustdoc of the workspace (as `make lint` builds it) goes to target/book/api/rust; the
## Python, Node and C pages are generated into docs/src/reference/api-*.md (git-ignored).
docs: $(MDBOOK)
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps
	python3 docs/tools/apigen.py docs/src/reference
	rm -rf target/book
	$(MDBOOK) build docs > target/mdbook.log 2>&1; rc=$$?; cat target/mdbook.log; exit $$rc
	@if grep -E '\[(WARN|ERROR)\]' target/mdbook.log >/dev/null; then echo "make docs: mdBook warned (above); warnings are errors" >&2; exit 1; fi
	mkdir -p target/book/api
	cp -r target/doc target/book/api/rust
	python3 docs/tools/check_links.py --self-test
	python3 docs/tools/check_links.py
