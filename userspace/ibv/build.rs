//! Links the crate with rdma-core's libibverbs.so.1 and the bindings of its `<infiniband/verbs.h>`.
//!
//! `scripts/build-userspace.sh` generates the bindings with bindgen from the headers of Debian's
//! libibverbs-dev (the library the guests have) into `$PFNIC_IBV_SYS` (`ibv_sys_bindings` in
//! `scripts/lib.sh`): `bindings.rs`, and `libibv_static_fns.a`, the header's static inline
//! functions (`ibv_post_send`, `ibv_poll_cq`, ...) made callable. `$PFNIC_IBVERBS_LIB` is the
//! directory of the `libibverbs.so.1` to link with (the guest loads its own, Debian's).

// A build script speaks to cargo on standard output with `println!`.
#![expect(clippy::disallowed_macros, reason = "cargo's build script protocol")]

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=PFNIC_IBV_SYS");
    println!("cargo:rerun-if-env-changed=PFNIC_IBVERBS_LIB");
    let Ok(sys) = env::var("PFNIC_IBV_SYS") else {
        panic!("PFNIC_IBV_SYS is not set: build userspace/ with scripts/build-userspace.sh");
    };
    let bindings = Path::new(&sys).join("bindings.rs");
    assert!(
        bindings.exists(),
        "no {}: run scripts/build-userspace.sh",
        bindings.display()
    );
    println!("cargo:rerun-if-changed={}", bindings.display());
    println!("cargo:rustc-env=PFNIC_IBV_BINDINGS={}", bindings.display());
    println!("cargo:rustc-link-search=native={sys}");
    println!("cargo:rustc-link-lib=static=ibv_static_fns");
    if let Ok(lib) = env::var("PFNIC_IBVERBS_LIB") {
        println!("cargo:rustc-link-search=native={lib}");
    }
    println!("cargo:rustc-link-lib=dylib:+verbatim=libibverbs.so.1");
}
