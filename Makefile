# The two commands a newcomer needs (see README): `make demo` and `make test`.
# Both run scripts/setup.sh first, which installs what is missing and builds incrementally.
BUILD_DIR ?= build
CTEST_ARGS ?=

.PHONY: setup build demo test test-unit docs clean

setup:
	BUILD_DIR=$(BUILD_DIR) bash scripts/setup.sh

build: setup

demo: setup
	bash scripts/demo.sh

test: setup
	cd $(BUILD_DIR) && ctest --output-on-failure --timeout 1500 -j 2 $(CTEST_ARGS)

test-unit: setup
	cd $(BUILD_DIR) && ctest --output-on-failure -L unit $(CTEST_ARGS)

# Regenerates docs/config.md from the config table in src/core/config.cpp.
docs: setup
	$(BUILD_DIR)/roformer config defaults --markdown > docs/config.md

clean:
	rm -rf $(BUILD_DIR)
