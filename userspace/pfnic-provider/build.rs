//! Checks `src/ffi.rs` against rdma-core's own `<infiniband/verbs.h>`.
//!
//! Compiles a small C program with the host C compiler (`$CC`, default `cc`) against
//! rdma-core's headers in `$PFNIC_RDMA_CORE_INCLUDE`, which `scripts/build-userspace.sh`
//! unpacks from Debian's `libibverbs-dev` (the libibverbs the provider is loaded by); it
//! prints, for every structure the provider mirrors, `const` assertions that the Rust size and
//! field offsets equal the C ones. `ffi.rs` includes them (`layout_rdma_core.rs`): a mismatch
//! fails the build. Without that variable (a bare `cargo build`) the check is skipped with a
//! warning; the build scripts always set it.

// A build script speaks to cargo on standard output with `println!`.
#![expect(clippy::disallowed_macros, reason = "cargo's build script protocol")]

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A mirrored structure: C type, Rust type, and every field as (C name, Rust name).
type Mirror = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// Every mirrored structure.
const STRUCTS: &[Mirror] = &[
    (
        "struct ibv_values_ex",
        "ibv_values_ex",
        &[("comp_mask", "comp_mask"), ("raw_clock", "raw_clock")],
    ),
    (
        "struct ibv_wc",
        "ibv_wc",
        &[
            ("wr_id", "wr_id"),
            ("status", "status"),
            ("opcode", "opcode"),
            ("vendor_err", "vendor_err"),
            ("byte_len", "byte_len"),
            ("imm_data", "imm_data"),
            ("invalidated_rkey", "imm_data"),
            ("qp_num", "qp_num"),
            ("src_qp", "src_qp"),
            ("wc_flags", "wc_flags"),
            ("pkey_index", "pkey_index"),
            ("slid", "slid"),
            ("sl", "sl"),
            ("dlid_path_bits", "dlid_path_bits"),
        ],
    ),
    (
        "struct ibv_sge",
        "ibv_sge",
        &[("addr", "addr"), ("length", "length"), ("lkey", "lkey")],
    ),
    (
        "struct ibv_cq_init_attr_ex",
        "ibv_cq_init_attr_ex",
        &[
            ("cqe", "cqe"),
            ("cq_context", "cq_context"),
            ("channel", "channel"),
            ("comp_vector", "comp_vector"),
            ("wc_flags", "wc_flags"),
            ("comp_mask", "comp_mask"),
            ("flags", "flags"),
            ("parent_domain", "parent_domain"),
        ],
    ),
    (
        "struct ibv_qp_cap",
        "ibv_qp_cap",
        &[
            ("max_send_wr", "max_send_wr"),
            ("max_recv_wr", "max_recv_wr"),
            ("max_send_sge", "max_send_sge"),
            ("max_recv_sge", "max_recv_sge"),
            ("max_inline_data", "max_inline_data"),
        ],
    ),
    (
        "struct ibv_qp",
        "ibv_qp",
        &[
            ("context", "context"),
            ("qp_context", "qp_context"),
            ("pd", "pd"),
            ("send_cq", "send_cq"),
            ("recv_cq", "recv_cq"),
            ("srq", "srq"),
            ("handle", "handle"),
            ("qp_num", "qp_num"),
            ("state", "state"),
            ("qp_type", "qp_type"),
            ("mutex", "mutex"),
            ("cond", "cond"),
            ("events_completed", "events_completed"),
        ],
    ),
    (
        "struct ibv_rx_hash_conf",
        "ibv_rx_hash_conf",
        &[
            ("rx_hash_function", "rx_hash_function"),
            ("rx_hash_key_len", "rx_hash_key_len"),
            ("rx_hash_key", "rx_hash_key"),
            ("rx_hash_fields_mask", "rx_hash_fields_mask"),
        ],
    ),
    (
        "struct ibv_qp_init_attr_ex",
        "ibv_qp_init_attr_ex",
        &[
            ("qp_context", "qp_context"),
            ("send_cq", "send_cq"),
            ("recv_cq", "recv_cq"),
            ("srq", "srq"),
            ("cap", "cap"),
            ("qp_type", "qp_type"),
            ("sq_sig_all", "sq_sig_all"),
            ("comp_mask", "comp_mask"),
            ("pd", "pd"),
            ("xrcd", "xrcd"),
            ("create_flags", "create_flags"),
            ("max_tso_header", "max_tso_header"),
            ("rwq_ind_tbl", "rwq_ind_tbl"),
            ("rx_hash_conf", "rx_hash_conf"),
            ("source_qpn", "source_qpn"),
            ("send_ops_flags", "send_ops_flags"),
        ],
    ),
    (
        "struct ibv_qp_ex",
        "ibv_qp_ex",
        &[
            ("qp_base", "qp_base"),
            ("comp_mask", "comp_mask"),
            ("wr_id", "wr_id"),
            ("wr_flags", "wr_flags"),
            ("wr_atomic_cmp_swp", "wr_atomic_cmp_swp"),
            ("wr_atomic_fetch_add", "wr_atomic_fetch_add"),
            ("wr_bind_mw", "wr_bind_mw"),
            ("wr_local_inv", "wr_local_inv"),
            ("wr_rdma_read", "wr_rdma_read"),
            ("wr_rdma_write", "wr_rdma_write"),
            ("wr_rdma_write_imm", "wr_rdma_write_imm"),
            ("wr_send", "wr_send"),
            ("wr_send_imm", "wr_send_imm"),
            ("wr_send_inv", "wr_send_inv"),
            ("wr_send_tso", "wr_send_tso"),
            ("wr_set_ud_addr", "wr_set_ud_addr"),
            ("wr_set_xrc_srqn", "wr_set_xrc_srqn"),
            ("wr_set_inline_data", "wr_set_inline_data"),
            ("wr_set_inline_data_list", "wr_set_inline_data_list"),
            ("wr_set_sge", "wr_set_sge"),
            ("wr_set_sge_list", "wr_set_sge_list"),
            ("wr_start", "wr_start"),
            ("wr_complete", "wr_complete"),
            ("wr_abort", "wr_abort"),
            ("wr_atomic_write", "wr_atomic_write"),
        ],
    ),
    (
        "struct ibv_data_buf",
        "ibv_data_buf",
        &[("addr", "addr"), ("length", "length")],
    ),
    (
        "struct ibv_send_wr",
        "ibv_send_wr",
        &[
            ("wr_id", "wr_id"),
            ("next", "next"),
            ("sg_list", "sg_list"),
            ("num_sge", "num_sge"),
            ("opcode", "opcode"),
            ("send_flags", "send_flags"),
            ("imm_data", "imm_data"),
            ("invalidate_rkey", "imm_data"),
            ("wr", "wr"),
            ("qp_type", "qp_type"),
            ("bind_mw", "bind_mw_tso"),
        ],
    ),
    (
        "struct ibv_recv_wr",
        "ibv_recv_wr",
        &[
            ("wr_id", "wr_id"),
            ("next", "next"),
            ("sg_list", "sg_list"),
            ("num_sge", "num_sge"),
        ],
    ),
];

/// The members of `ibv_send_wr`'s `wr` union that the provider mirrors: (C member, Rust
/// struct, [fields]).
const WR_UNION: &[(&str, &str, &[&str])] = &[
    ("rdma", "ibv_send_wr_rdma", &["remote_addr", "rkey"]),
    (
        "atomic",
        "ibv_send_wr_atomic",
        &["remote_addr", "compare_add", "swap", "rkey"],
    ),
    ("ud", "ibv_send_wr_ud", &["ah", "remote_qpn", "remote_qkey"]),
];

/// The C program: one printf per check, each printing a Rust `const` assertion.
fn layout_program() -> String {
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\n\
         #define SIZE(c, r) printf(\"const _: () = assert!(core::mem::size_of::<%s>() == %zu, \
         \\\"size of %s\\\");\\n\", r, sizeof(c), #c)\n\
         #define ALIGN(c, r) printf(\"const _: () = assert!(core::mem::align_of::<%s>() == %zu, \
         \\\"alignment of %s\\\");\\n\", r, _Alignof(c), #c)\n\
         #define OFF(r, rf, v, what) printf(\"const _: () = assert!(core::mem::offset_of!(%s, \
         %s) == %zu, \\\"offset of %s\\\");\\n\", r, rf, (size_t)(v), what)\n\
         typedef __typeof__(((struct ibv_send_wr *)0)->wr) wr_union_t;\n\
         int main(void)\n{\n",
    );
    for (cty, rty, fields) in STRUCTS {
        writeln!(c, "    SIZE({cty}, \"{rty}\");").unwrap();
        writeln!(c, "    ALIGN({cty}, \"{rty}\");").unwrap();
        for (cf, rf) in *fields {
            writeln!(
                c,
                "    OFF(\"{rty}\", \"{rf}\", offsetof({cty}, {cf}), \"{cty}.{cf}\");"
            )
            .unwrap();
        }
    }
    for (member, rty, fields) in WR_UNION {
        for f in *fields {
            writeln!(
                c,
                "    OFF(\"{rty}\", \"{f}\", offsetof(struct ibv_send_wr, wr.{member}.{f}) - \
                 offsetof(struct ibv_send_wr, wr), \"struct ibv_send_wr.wr.{member}.{f}\");"
            )
            .unwrap();
        }
    }
    writeln!(c, "    SIZE(wr_union_t, \"ibv_send_wr_wr\");").unwrap();
    writeln!(c, "    return 0;\n}}").unwrap();

    c
}

/// Compiles the layout program against the headers in `include` and writes its assertions
/// to `OUT_DIR/layout_rdma_core.rs`.
fn check_against(include: &Path, out: &Path) {
    let src = out.join("layout_rdma_core.c");
    let exe = out.join("layout_rdma_core");
    fs::write(&src, layout_program()).expect("write the layout program");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .arg("-std=gnu11")
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler '{cc}': {e}"));
    assert!(
        status.success(),
        "'{cc}' failed on {} against {} (the verbs.h layout check)",
        src.display(),
        include.display()
    );
    let run = Command::new(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
    assert!(run.status.success(), "{} failed", exe.display());
    // Each assertion's message names the headers it came from.
    let text = String::from_utf8(run.stdout).expect("the layout program prints ASCII");
    let text = text.replace(", \"", &format!(", \"{}: ", include.display()));
    fs::write(out.join("layout_rdma_core.rs"), text).expect("write the assertions");
}

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=PFNIC_RDMA_CORE_INCLUDE");

    match env::var_os("PFNIC_RDMA_CORE_INCLUDE") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            println!(
                "cargo:rerun-if-changed={}",
                dir.join("infiniband/verbs.h").display()
            );
            check_against(&dir, &out);
        }
        None => {
            println!(
                "cargo:warning=PFNIC_RDMA_CORE_INCLUDE is not set: the layouts are not checked \
                 against rdma-core's headers (scripts/build-userspace.sh sets it)"
            );
            fs::write(out.join("layout_rdma_core.rs"), "").expect("write layout_rdma_core.rs");
        }
    }
}
