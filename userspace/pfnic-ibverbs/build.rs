//! Checks `src/ffi.rs` against `userspace/include/infiniband/verbs.h`.
//!
//! Compiles a small C program against the header with the host C compiler (`$CC`, default
//! `cc`); it prints, for every structure the library mirrors, `const` assertions that the Rust
//! size and field offsets equal the C ones. `ffi.rs` includes them: a mismatch fails the build.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

/// A mirrored structure: C type, Rust type, and every field as (C name, Rust name).
type Mirror = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// Every mirrored structure.
const STRUCTS: &[Mirror] = &[
    ("union ibv_gid", "ibv_gid", &[("raw", "raw")]),
    (
        "struct ibv_device",
        "ibv_device",
        &[
            ("node_type", "node_type"),
            ("transport_type", "transport_type"),
            ("name", "name"),
            ("dev_name", "dev_name"),
            ("dev_path", "dev_path"),
            ("ibdev_path", "ibdev_path"),
        ],
    ),
    (
        "struct ibv_context",
        "ibv_context",
        &[
            ("device", "device"),
            ("cmd_fd", "cmd_fd"),
            ("async_fd", "async_fd"),
            ("num_comp_vectors", "num_comp_vectors"),
        ],
    ),
    (
        "struct ibv_device_attr",
        "ibv_device_attr",
        &[
            ("fw_ver", "fw_ver"),
            ("node_guid", "node_guid"),
            ("sys_image_guid", "sys_image_guid"),
            ("max_mr_size", "max_mr_size"),
            ("page_size_cap", "page_size_cap"),
            ("vendor_id", "vendor_id"),
            ("vendor_part_id", "vendor_part_id"),
            ("hw_ver", "hw_ver"),
            ("max_qp", "max_qp"),
            ("max_qp_wr", "max_qp_wr"),
            ("device_cap_flags", "device_cap_flags"),
            ("max_sge", "max_sge"),
            ("max_sge_rd", "max_sge_rd"),
            ("max_cq", "max_cq"),
            ("max_cqe", "max_cqe"),
            ("max_mr", "max_mr"),
            ("max_pd", "max_pd"),
            ("max_qp_rd_atom", "max_qp_rd_atom"),
            ("max_ee_rd_atom", "max_ee_rd_atom"),
            ("max_res_rd_atom", "max_res_rd_atom"),
            ("max_qp_init_rd_atom", "max_qp_init_rd_atom"),
            ("max_ee_init_rd_atom", "max_ee_init_rd_atom"),
            ("atomic_cap", "atomic_cap"),
            ("max_ee", "max_ee"),
            ("max_rdd", "max_rdd"),
            ("max_mw", "max_mw"),
            ("max_raw_ipv6_qp", "max_raw_ipv6_qp"),
            ("max_raw_ethy_qp", "max_raw_ethy_qp"),
            ("max_mcast_grp", "max_mcast_grp"),
            ("max_mcast_qp_attach", "max_mcast_qp_attach"),
            ("max_total_mcast_qp_attach", "max_total_mcast_qp_attach"),
            ("max_ah", "max_ah"),
            ("max_fmr", "max_fmr"),
            ("max_map_per_fmr", "max_map_per_fmr"),
            ("max_srq", "max_srq"),
            ("max_srq_wr", "max_srq_wr"),
            ("max_srq_sge", "max_srq_sge"),
            ("max_pkeys", "max_pkeys"),
            ("local_ca_ack_delay", "local_ca_ack_delay"),
            ("phys_port_cnt", "phys_port_cnt"),
        ],
    ),
    (
        "struct ibv_query_device_ex_input",
        "ibv_query_device_ex_input",
        &[("comp_mask", "comp_mask")],
    ),
    (
        "struct ibv_odp_caps",
        "ibv_odp_caps",
        &[
            ("general_caps", "general_caps"),
            (
                "per_transport_caps.rc_odp_caps",
                "per_transport_caps.rc_odp_caps",
            ),
            (
                "per_transport_caps.uc_odp_caps",
                "per_transport_caps.uc_odp_caps",
            ),
            (
                "per_transport_caps.ud_odp_caps",
                "per_transport_caps.ud_odp_caps",
            ),
        ],
    ),
    (
        "struct ibv_tso_caps",
        "ibv_tso_caps",
        &[("max_tso", "max_tso"), ("supported_qpts", "supported_qpts")],
    ),
    (
        "struct ibv_rss_caps",
        "ibv_rss_caps",
        &[
            ("supported_qpts", "supported_qpts"),
            ("max_rwq_indirection_tables", "max_rwq_indirection_tables"),
            (
                "max_rwq_indirection_table_size",
                "max_rwq_indirection_table_size",
            ),
            ("rx_hash_fields_mask", "rx_hash_fields_mask"),
            ("rx_hash_function", "rx_hash_function"),
        ],
    ),
    (
        "struct ibv_packet_pacing_caps",
        "ibv_packet_pacing_caps",
        &[
            ("qp_rate_limit_min", "qp_rate_limit_min"),
            ("qp_rate_limit_max", "qp_rate_limit_max"),
            ("supported_qpts", "supported_qpts"),
        ],
    ),
    (
        "struct ibv_tm_caps",
        "ibv_tm_caps",
        &[
            ("max_rndv_hdr_size", "max_rndv_hdr_size"),
            ("max_num_tags", "max_num_tags"),
            ("flags", "flags"),
            ("max_ops", "max_ops"),
            ("max_sge", "max_sge"),
        ],
    ),
    (
        "struct ibv_cq_moderation_caps",
        "ibv_cq_moderation_caps",
        &[
            ("max_cq_count", "max_cq_count"),
            ("max_cq_period", "max_cq_period"),
        ],
    ),
    (
        "struct ibv_pci_atomic_caps",
        "ibv_pci_atomic_caps",
        &[
            ("fetch_add", "fetch_add"),
            ("swap", "swap"),
            ("compare_swap", "compare_swap"),
        ],
    ),
    (
        "struct ibv_device_attr_ex",
        "ibv_device_attr_ex",
        &[
            ("orig_attr", "orig_attr"),
            ("comp_mask", "comp_mask"),
            ("odp_caps", "odp_caps"),
            ("completion_timestamp_mask", "completion_timestamp_mask"),
            ("hca_core_clock", "hca_core_clock"),
            ("device_cap_flags_ex", "device_cap_flags_ex"),
            ("tso_caps", "tso_caps"),
            ("rss_caps", "rss_caps"),
            ("max_wq_type_rq", "max_wq_type_rq"),
            ("packet_pacing_caps", "packet_pacing_caps"),
            ("raw_packet_caps", "raw_packet_caps"),
            ("tm_caps", "tm_caps"),
            ("cq_mod_caps", "cq_mod_caps"),
            ("max_dm_size", "max_dm_size"),
            ("pci_atomic_caps", "pci_atomic_caps"),
            ("xrc_odp_caps", "xrc_odp_caps"),
            ("phys_port_cnt_ex", "phys_port_cnt_ex"),
        ],
    ),
    (
        "struct ibv_port_attr",
        "ibv_port_attr",
        &[
            ("state", "state"),
            ("max_mtu", "max_mtu"),
            ("active_mtu", "active_mtu"),
            ("gid_tbl_len", "gid_tbl_len"),
            ("port_cap_flags", "port_cap_flags"),
            ("max_msg_sz", "max_msg_sz"),
            ("bad_pkey_cntr", "bad_pkey_cntr"),
            ("qkey_viol_cntr", "qkey_viol_cntr"),
            ("pkey_tbl_len", "pkey_tbl_len"),
            ("lid", "lid"),
            ("sm_lid", "sm_lid"),
            ("lmc", "lmc"),
            ("max_vl_num", "max_vl_num"),
            ("sm_sl", "sm_sl"),
            ("subnet_timeout", "subnet_timeout"),
            ("init_type_reply", "init_type_reply"),
            ("active_width", "active_width"),
            ("active_speed", "active_speed"),
            ("phys_state", "phys_state"),
            ("link_layer", "link_layer"),
            ("flags", "flags"),
            ("port_cap_flags2", "port_cap_flags2"),
            ("active_speed_ex", "active_speed_ex"),
        ],
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
        "struct ibv_pd",
        "ibv_pd",
        &[("context", "context"), ("handle", "handle")],
    ),
    (
        "struct ibv_mr",
        "ibv_mr",
        &[
            ("context", "context"),
            ("pd", "pd"),
            ("addr", "addr"),
            ("length", "length"),
            ("handle", "handle"),
            ("lkey", "lkey"),
            ("rkey", "rkey"),
        ],
    ),
    (
        "struct ibv_sge",
        "ibv_sge",
        &[("addr", "addr"), ("length", "length"), ("lkey", "lkey")],
    ),
    (
        "struct ibv_comp_channel",
        "ibv_comp_channel",
        &[("context", "context"), ("fd", "fd"), ("refcnt", "refcnt")],
    ),
    (
        "struct ibv_cq",
        "ibv_cq",
        &[
            ("context", "context"),
            ("channel", "channel"),
            ("cq_context", "cq_context"),
            ("handle", "handle"),
            ("cqe", "cqe"),
            ("comp_events_completed", "comp_events_completed"),
            ("async_events_completed", "async_events_completed"),
        ],
    ),
    (
        "struct ibv_global_route",
        "ibv_global_route",
        &[
            ("dgid", "dgid"),
            ("flow_label", "flow_label"),
            ("sgid_index", "sgid_index"),
            ("hop_limit", "hop_limit"),
            ("traffic_class", "traffic_class"),
        ],
    ),
    (
        "struct ibv_ah_attr",
        "ibv_ah_attr",
        &[
            ("grh", "grh"),
            ("dlid", "dlid"),
            ("sl", "sl"),
            ("src_path_bits", "src_path_bits"),
            ("static_rate", "static_rate"),
            ("is_global", "is_global"),
            ("port_num", "port_num"),
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
        "struct ibv_qp_init_attr",
        "ibv_qp_init_attr",
        &[
            ("qp_context", "qp_context"),
            ("send_cq", "send_cq"),
            ("recv_cq", "recv_cq"),
            ("srq", "srq"),
            ("cap", "cap"),
            ("qp_type", "qp_type"),
            ("sq_sig_all", "sq_sig_all"),
        ],
    ),
    (
        "struct ibv_qp_attr",
        "ibv_qp_attr",
        &[
            ("qp_state", "qp_state"),
            ("cur_qp_state", "cur_qp_state"),
            ("path_mtu", "path_mtu"),
            ("path_mig_state", "path_mig_state"),
            ("qkey", "qkey"),
            ("rq_psn", "rq_psn"),
            ("sq_psn", "sq_psn"),
            ("dest_qp_num", "dest_qp_num"),
            ("qp_access_flags", "qp_access_flags"),
            ("cap", "cap"),
            ("ah_attr", "ah_attr"),
            ("alt_ah_attr", "alt_ah_attr"),
            ("pkey_index", "pkey_index"),
            ("alt_pkey_index", "alt_pkey_index"),
            ("en_sqd_async_notify", "en_sqd_async_notify"),
            ("sq_draining", "sq_draining"),
            ("max_rd_atomic", "max_rd_atomic"),
            ("max_dest_rd_atomic", "max_dest_rd_atomic"),
            ("min_rnr_timer", "min_rnr_timer"),
            ("port_num", "port_num"),
            ("timeout", "timeout"),
            ("retry_cnt", "retry_cnt"),
            ("rnr_retry", "rnr_retry"),
            ("alt_port_num", "alt_port_num"),
            ("alt_timeout", "alt_timeout"),
            ("rate_limit", "rate_limit"),
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
            ("events_completed", "events_completed"),
        ],
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

/// The members of `ibv_send_wr`'s `wr` union: (C member, Rust struct, [fields]).
const WR_UNION: &[(&str, &str, &[&str])] = &[
    ("rdma", "ibv_send_wr_rdma", &["remote_addr", "rkey"]),
    (
        "atomic",
        "ibv_send_wr_atomic",
        &["remote_addr", "compare_add", "swap", "rkey"],
    ),
    ("ud", "ibv_send_wr_ud", &["ah", "remote_qpn", "remote_qkey"]),
];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let include = manifest.join("../include");
    let header = include.join("infiniband/verbs.h");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");

    // The C program: one printf per check, each printing a Rust `const` assertion.
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
    writeln!(
        c,
        "    SIZE(wr_union_t, \"ibv_send_wr_wr\");\n    return 0;\n}}"
    )
    .unwrap();

    let src = out.join("layout.c");
    let exe = out.join("layout");
    fs::write(&src, c).expect("write layout.c");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .arg("-std=gnu11")
        .arg("-I")
        .arg(&include)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler '{cc}': {e}"));
    assert!(
        status.success(),
        "'{cc}' failed on {} (the verbs.h layout check)",
        src.display()
    );
    let run = Command::new(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
    assert!(run.status.success(), "{} failed", exe.display());
    fs::write(out.join("layout.rs"), run.stdout).expect("write layout.rs");
}
