//! bindgen's bindings of rdma-core's `<infiniband/verbs.h>` (see `build.rs`).

#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::pedantic,
    missing_docs
)]

include!(env!("PFNIC_IBV_BINDINGS"));
