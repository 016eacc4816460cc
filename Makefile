# The two commands a newcomer needs (see README): `make demo` and `make test`.
# Both run scripts/setup.sh first, which installs what is missing and builds incrementally:
# `make demo` only what the demo needs (the roformer program), `make test` everything.
BUILD_DIR ?= build
CTEST_ARGS ?=
SETUP = BUILD_DIR=$(BUILD_DIR) bash scripts/setup.sh

.PHONY: setup build demo test test-unit docs clean

setup:
	$(SETUP) all

build: setup

demo:
	$(SETUP) demo
	BUILD_DIR=$(BUILD_DIR) bash scripts/demo.sh

test: setup
	cd $(BUILD_DIR) && ctest --output-on-failure --timeout 1500 -j 2 $(CTEST_ARGS)

test-unit: setup
	cd $(BUILD_DIR) && ctest --output-on-failure -L unit $(CTEST_ARGS)

# Regenerates docs/config.md from the config table in src/core/config.cpp.
docs:
	$(SETUP) demo
	$(BUILD_DIR)/roformer config defaults --markdown > docs/config.md

clean:
	rm -rf $(BUILD_DIR)
