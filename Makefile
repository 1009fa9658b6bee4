# baton — the two commands that matter: `make demo` and `make test`.
# Everything here installs or builds what it needs; nothing assumes a Consul binary.

CARGO ?= cargo
# Where `make devserver` listens (Consul's default port, like `consul agent -dev`).
DEVSERVER_ADDR ?= 127.0.0.1:8500

.PHONY: all build test test-rust lint fmt demo devserver bench bench-devserver bench-sessions clean

all: build

build:
	$(CARGO) build --workspace --all-targets

## The whole test suite: formatting, lints, docs, and every test (what .ci/run calls).
test: lint test-rust

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

test-rust:
	$(CARGO) test --workspace

fmt:
	$(CARGO) fmt --all

## The main job. Until the language bindings land it walks through a lock hand-over on the
## dev server (or on the Consul at CONSUL_HTTP_ADDR).
demo:
	$(CARGO) build --release -p baton-devserver
	bash scripts/demo.sh

## Run the Consul-compatible dev server in the foreground (Ctrl-C stops it).
devserver:
	$(CARGO) run --release -p baton-devserver -- --addr $(DEVSERVER_ADDR) --session-ttl-min 1s

bench: bench-devserver bench-sessions

bench-devserver:
	$(CARGO) run --release -p bench-devserver

clean:
	$(CARGO) clean

bench-sessions:
	$(CARGO) run --release -p bench-sessions
