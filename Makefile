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

.PHONY: all build test test-rust test-python python-install test-node node-build lint fmt demo devserver bench bench-devserver bench-sessions clean

all: build

build:
	$(CARGO) build --workspace --all-targets

## The whole test suite: formatting, lints, docs, and every test (what .ci/run calls).
test: lint test-rust test-python test-node

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) fmt --manifest-path $(PY_MANIFEST) -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --manifest-path $(PY_MANIFEST) -- -D warnings
	$(CARGO) fmt --manifest-path $(NODE_DIR)/Cargo.toml -- --check
	$(CARGO) clippy --manifest-path $(NODE_DIR)/Cargo.toml -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

test-rust:
	$(CARGO) test --workspace

fmt:
	$(CARGO) fmt --all
	$(CARGO) fmt --manifest-path $(PY_MANIFEST)
	$(CARGO) fmt --manifest-path $(NODE_DIR)/Cargo.toml

$(PY):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r bindings/python/requirements-dev.txt

## Builds the abi3 wheel (maturin) and installs it into the venv.
python-install: $(PY)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/pip install -q --no-build-isolation --force-reinstall --no-deps ./bindings/python

## The pytest suite, against a baton-devserver process its fixture starts.
test-python: python-install
	$(CARGO) build -p baton-devserver
	$(PY) -m pytest -q bindings/python/tests

## The main job. Until the language bindings land it walks through a lock hand-over on the
## dev server (or on the Consul at CONSUL_HTTP_ADDR).
demo:
	$(CARGO) build --release -p baton-devserver
	bash scripts/demo.sh

## Run the Consul-compatible dev server in the foreground (Ctrl-C stops it).
devserver:
	$(CARGO) run --release -p baton-devserver -- --addr $(DEVSERVER_ADDR) --session-ttl-min 1s

## Builds the Node addon (napi-rs) and regenerates its loader and typings (committed).
node-build:
	# `npm ci` refuses this lock file (npm 11 leaves the other platforms' optional packages of
	# @napi-rs/cli out of it), so install from the lock with `npm install`.
	cd $(NODE_DIR) && npm install --no-audit --no-fund
	cd $(NODE_DIR) && npx napi build --platform --release --js native.js --dts native.d.ts

## node --test against a baton-devserver process; fails when the generated typings drifted.
test-node: node-build
	git diff --exit-code -- $(NODE_DIR)/native.js $(NODE_DIR)/native.d.ts
	$(CARGO) build -p baton-devserver
	cd $(NODE_DIR) && node --test __test__/

bench: bench-devserver bench-sessions

bench-devserver:
	$(CARGO) run --release -p bench-devserver

clean:
	$(CARGO) clean

bench-sessions:
	$(CARGO) run --release -p bench-sessions
