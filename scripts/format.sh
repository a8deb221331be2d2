#!/usr/bin/env bash
# Format the Rust code the way scripts/check.sh expects.
# usage: scripts/format.sh
source "$(dirname "$0")/lib.sh"
rustfmt --edition 2021 --config-path "$KERNEL_SRC/.rustfmt.toml" "$PFNIC_ROOT"/drivers/pfnic/*.rs
(cd "$PFNIC_ROOT/userspace" && cargo fmt --all)
