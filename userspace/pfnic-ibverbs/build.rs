//! Checks `src/ffi.rs` against `userspace/include/infiniband/verbs.h`, and both against
//! rdma-core's own `<infiniband/verbs.h>`.
//!
//! Compiles a small C program against a header with the host C compiler (`$CC`, default
//! `cc`); it prints, for every structure the library mirrors, `const` assertions that the Rust
//! size and field offsets equal the C ones. `ffi.rs` includes them: a mismatch fails the build.
//! The program is compiled twice: against our header (`layout.rs`) and against rdma-core's
//! headers in `$PFNIC_RDMA_CORE_INCLUDE` (`layout_rdma_core.rs`), which
//! `scripts/build-userspace.sh` unpacks from Debian's `libibverbs-dev`. So our header, the
//! Rust mirror and rdma-core's layout are one layout, and programs built against either header
//! run on `libibverbs.so.1`. Without that variable (a bare `cargo build`) the second check is
//! skipped with a warning; the build scripts always set it.

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
    ("union ibv_gid", "ibv_gid", &[("raw", "raw")]),
    (
        "struct ibv_gid_entry",
        "ibv_gid_entry",
        &[
            ("gid", "gid"),
            ("gid_index", "gid_index"),
            ("port_num", "port_num"),
            ("gid_type", "gid_type"),
            ("ndev_ifindex", "ndev_ifindex"),
        ],
    ),
    (
        "struct ibv_async_event",
        "ibv_async_event",
        &[("element", "element"), ("event_type", "event_type")],
    ),
    (
        "struct ibv_values_ex",
        "ibv_values_ex",
        &[("comp_mask", "comp_mask"), ("raw_clock", "raw_clock")],
    ),
    (
        "struct ibv_alloc_dm_attr",
        "ibv_alloc_dm_attr",
        &[
            ("length", "length"),
            ("log_align_req", "log_align_req"),
            ("comp_mask", "comp_mask"),
        ],
    ),
    (
        "struct ibv_dm",
        "ibv_dm",
        &[
            ("context", "context"),
            ("memcpy_to_dm", "memcpy_to_dm"),
            ("memcpy_from_dm", "memcpy_from_dm"),
            ("comp_mask", "comp_mask"),
            ("handle", "handle"),
        ],
    ),
    (
        "struct ibv_ece",
        "ibv_ece",
        &[
            ("vendor_id", "vendor_id"),
            ("options", "options"),
            ("comp_mask", "comp_mask"),
        ],
    ),
    (
        "struct ibv_device",
        "ibv_device",
        &[
            ("_ops", "_ops"),
            ("node_type", "node_type"),
            ("transport_type", "transport_type"),
            ("name", "name"),
            ("dev_name", "dev_name"),
            ("dev_path", "dev_path"),
            ("ibdev_path", "ibdev_path"),
        ],
    ),
    (
        "struct ibv_context_ops",
        "ibv_context_ops",
        &[
            ("_compat_query_device", "_compat_query_device"),
            ("_compat_query_port", "_compat_query_port"),
            ("_compat_alloc_pd", "_compat_alloc_pd"),
            ("_compat_dealloc_pd", "_compat_dealloc_pd"),
            ("_compat_reg_mr", "_compat_reg_mr"),
            ("_compat_rereg_mr", "_compat_rereg_mr"),
            ("_compat_dereg_mr", "_compat_dereg_mr"),
            ("alloc_mw", "alloc_mw"),
            ("bind_mw", "bind_mw"),
            ("dealloc_mw", "dealloc_mw"),
            ("_compat_create_cq", "_compat_create_cq"),
            ("poll_cq", "poll_cq"),
            ("req_notify_cq", "req_notify_cq"),
            ("_compat_cq_event", "_compat_cq_event"),
            ("_compat_resize_cq", "_compat_resize_cq"),
            ("_compat_destroy_cq", "_compat_destroy_cq"),
            ("_compat_create_srq", "_compat_create_srq"),
            ("_compat_modify_srq", "_compat_modify_srq"),
            ("_compat_query_srq", "_compat_query_srq"),
            ("_compat_destroy_srq", "_compat_destroy_srq"),
            ("post_srq_recv", "post_srq_recv"),
            ("_compat_create_qp", "_compat_create_qp"),
            ("_compat_query_qp", "_compat_query_qp"),
            ("_compat_modify_qp", "_compat_modify_qp"),
            ("_compat_destroy_qp", "_compat_destroy_qp"),
            ("post_send", "post_send"),
            ("post_recv", "post_recv"),
            ("_compat_create_ah", "_compat_create_ah"),
            ("_compat_destroy_ah", "_compat_destroy_ah"),
            ("_compat_attach_mcast", "_compat_attach_mcast"),
            ("_compat_detach_mcast", "_compat_detach_mcast"),
            ("_compat_async_event", "_compat_async_event"),
        ],
    ),
    (
        "struct ibv_context",
        "ibv_context",
        &[
            ("device", "device"),
            ("ops", "ops"),
            ("cmd_fd", "cmd_fd"),
            ("async_fd", "async_fd"),
            ("num_comp_vectors", "num_comp_vectors"),
            ("mutex", "mutex"),
            ("abi_compat", "abi_compat"),
        ],
    ),
    (
        "struct verbs_context",
        "verbs_context",
        &[
            ("query_port", "query_port"),
            ("advise_mr", "advise_mr"),
            ("alloc_null_mr", "alloc_null_mr"),
            ("read_counters", "read_counters"),
            ("attach_counters_point_flow", "attach_counters_point_flow"),
            ("create_counters", "create_counters"),
            ("destroy_counters", "destroy_counters"),
            ("reg_dm_mr", "reg_dm_mr"),
            ("alloc_dm", "alloc_dm"),
            ("free_dm", "free_dm"),
            ("modify_flow_action_esp", "modify_flow_action_esp"),
            ("destroy_flow_action", "destroy_flow_action"),
            ("create_flow_action_esp", "create_flow_action_esp"),
            ("modify_qp_rate_limit", "modify_qp_rate_limit"),
            ("alloc_parent_domain", "alloc_parent_domain"),
            ("dealloc_td", "dealloc_td"),
            ("alloc_td", "alloc_td"),
            ("modify_cq", "modify_cq"),
            ("post_srq_ops", "post_srq_ops"),
            ("destroy_rwq_ind_table", "destroy_rwq_ind_table"),
            ("create_rwq_ind_table", "create_rwq_ind_table"),
            ("destroy_wq", "destroy_wq"),
            ("modify_wq", "modify_wq"),
            ("create_wq", "create_wq"),
            ("query_rt_values", "query_rt_values"),
            ("create_cq_ex", "create_cq_ex"),
            ("priv", "priv_"),
            ("query_device_ex", "query_device_ex"),
            ("ibv_destroy_flow", "ibv_destroy_flow"),
            ("ABI_placeholder2", "ABI_placeholder2"),
            ("ibv_create_flow", "ibv_create_flow"),
            ("ABI_placeholder1", "ABI_placeholder1"),
            ("open_qp", "open_qp"),
            ("create_qp_ex", "create_qp_ex"),
            ("get_srq_num", "get_srq_num"),
            ("create_srq_ex", "create_srq_ex"),
            ("open_xrcd", "open_xrcd"),
            ("close_xrcd", "close_xrcd"),
            ("_ABI_placeholder3", "_ABI_placeholder3"),
            ("sz", "sz"),
            ("context", "context"),
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
        "struct _compat_ibv_port_attr",
        "_compat_ibv_port_attr",
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
            ("mutex", "mutex"),
            ("cond", "cond"),
            ("comp_events_completed", "comp_events_completed"),
            ("async_events_completed", "async_events_completed"),
        ],
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
        "struct ibv_poll_cq_attr",
        "ibv_poll_cq_attr",
        &[("comp_mask", "comp_mask")],
    ),
    (
        "struct ibv_cq_ex",
        "ibv_cq_ex",
        &[
            ("context", "context"),
            ("channel", "channel"),
            ("cq_context", "cq_context"),
            ("handle", "handle"),
            ("cqe", "cqe"),
            ("mutex", "mutex"),
            ("cond", "cond"),
            ("comp_events_completed", "comp_events_completed"),
            ("async_events_completed", "async_events_completed"),
            ("comp_mask", "comp_mask"),
            ("status", "status"),
            ("wr_id", "wr_id"),
            ("start_poll", "start_poll"),
            ("next_poll", "next_poll"),
            ("end_poll", "end_poll"),
            ("read_opcode", "read_opcode"),
            ("read_vendor_err", "read_vendor_err"),
            ("read_byte_len", "read_byte_len"),
            ("read_imm_data", "read_imm_data"),
            ("read_qp_num", "read_qp_num"),
            ("read_src_qp", "read_src_qp"),
            ("read_wc_flags", "read_wc_flags"),
            ("read_slid", "read_slid"),
            ("read_sl", "read_sl"),
            ("read_dlid_path_bits", "read_dlid_path_bits"),
            ("read_completion_ts", "read_completion_ts"),
            ("read_cvlan", "read_cvlan"),
            ("read_flow_tag", "read_flow_tag"),
            ("read_tm_info", "read_tm_info"),
            (
                "read_completion_wallclock_ns",
                "read_completion_wallclock_ns",
            ),
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
        "struct ibv_srq_attr",
        "ibv_srq_attr",
        &[
            ("max_wr", "max_wr"),
            ("max_sge", "max_sge"),
            ("srq_limit", "srq_limit"),
        ],
    ),
    (
        "struct ibv_srq_init_attr",
        "ibv_srq_init_attr",
        &[("srq_context", "srq_context"), ("attr", "attr")],
    ),
    (
        "struct ibv_srq",
        "ibv_srq",
        &[
            ("context", "context"),
            ("srq_context", "srq_context"),
            ("pd", "pd"),
            ("handle", "handle"),
            ("mutex", "mutex"),
            ("cond", "cond"),
            ("events_completed", "events_completed"),
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

/// The kernel's uverbs structures and rdma-core's `ibv_sa_path_rec` that `src/kern_abi.rs`
/// converts between (checked against rdma-core's headers and the kernel's uAPI only).
const KERN_ABI_STRUCTS: &[Mirror] = &[
    (
        "struct ib_uverbs_global_route",
        "ib_uverbs_global_route",
        &[
            ("dgid", "dgid"),
            ("flow_label", "flow_label"),
            ("sgid_index", "sgid_index"),
            ("hop_limit", "hop_limit"),
            ("traffic_class", "traffic_class"),
            ("reserved", "reserved"),
        ],
    ),
    (
        "struct ib_uverbs_ah_attr",
        "ib_uverbs_ah_attr",
        &[
            ("grh", "grh"),
            ("dlid", "dlid"),
            ("sl", "sl"),
            ("src_path_bits", "src_path_bits"),
            ("static_rate", "static_rate"),
            ("is_global", "is_global"),
            ("port_num", "port_num"),
            ("reserved", "reserved"),
        ],
    ),
    (
        "struct ib_uverbs_qp_attr",
        "ib_uverbs_qp_attr",
        &[
            ("qp_attr_mask", "qp_attr_mask"),
            ("qp_state", "qp_state"),
            ("cur_qp_state", "cur_qp_state"),
            ("path_mtu", "path_mtu"),
            ("path_mig_state", "path_mig_state"),
            ("qkey", "qkey"),
            ("rq_psn", "rq_psn"),
            ("sq_psn", "sq_psn"),
            ("dest_qp_num", "dest_qp_num"),
            ("qp_access_flags", "qp_access_flags"),
            ("ah_attr", "ah_attr"),
            ("alt_ah_attr", "alt_ah_attr"),
            ("max_send_wr", "max_send_wr"),
            ("max_recv_wr", "max_recv_wr"),
            ("max_send_sge", "max_send_sge"),
            ("max_recv_sge", "max_recv_sge"),
            ("max_inline_data", "max_inline_data"),
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
            ("reserved", "reserved"),
        ],
    ),
    (
        "struct ib_user_path_rec",
        "ib_user_path_rec",
        &[
            ("dgid", "dgid"),
            ("sgid", "sgid"),
            ("dlid", "dlid"),
            ("slid", "slid"),
            ("raw_traffic", "raw_traffic"),
            ("flow_label", "flow_label"),
            ("reversible", "reversible"),
            ("mtu", "mtu"),
            ("pkey", "pkey"),
            ("hop_limit", "hop_limit"),
            ("traffic_class", "traffic_class"),
            ("numb_path", "numb_path"),
            ("sl", "sl"),
            ("mtu_selector", "mtu_selector"),
            ("rate_selector", "rate_selector"),
            ("rate", "rate"),
            ("packet_life_time_selector", "packet_life_time_selector"),
            ("packet_life_time", "packet_life_time"),
            ("preference", "preference"),
        ],
    ),
    (
        "struct ibv_sa_path_rec",
        "ibv_sa_path_rec",
        &[
            ("dgid", "dgid"),
            ("sgid", "sgid"),
            ("dlid", "dlid"),
            ("slid", "slid"),
            ("raw_traffic", "raw_traffic"),
            ("flow_label", "flow_label"),
            ("hop_limit", "hop_limit"),
            ("traffic_class", "traffic_class"),
            ("reversible", "reversible"),
            ("numb_path", "numb_path"),
            ("pkey", "pkey"),
            ("sl", "sl"),
            ("mtu_selector", "mtu_selector"),
            ("mtu", "mtu"),
            ("rate_selector", "rate_selector"),
            ("rate", "rate"),
            ("packet_life_time_selector", "packet_life_time_selector"),
            ("packet_life_time", "packet_life_time"),
            ("preference", "preference"),
        ],
    ),
];

/// Fields newer than the rdma-core the check runs against (Debian bookworm's 44.0): the
/// verbs that fill them take the caller's structure size, so older callers get a prefix. The
/// rdma-core check skips them, and the size of their structures.
const NEWER_THAN_RDMA_CORE: &[(&str, &str)] = &[("struct ibv_port_attr", "active_speed_ex")];

/// Structures rdma-core's public header only declares (its library defines them).
const PRIVATE_IN_RDMA_CORE: &[&str] = &["struct _compat_ibv_port_attr"];

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

/// The C program: one printf per check, each printing a Rust `const` assertion.
fn layout_program(rdma_core: bool, structs: &[Mirror]) -> String {
    let mut c = String::from(if rdma_core {
        "#include <infiniband/sa.h>\n#include <rdma/ib_user_verbs.h>\n\
         #include <rdma/ib_user_sa.h>\n"
    } else {
        ""
    });
    c.push_str(
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
    for (cty, rty, fields) in structs {
        if rdma_core && PRIVATE_IN_RDMA_CORE.contains(cty) {
            continue;
        }
        let newer = |f: &str| rdma_core && NEWER_THAN_RDMA_CORE.contains(&(*cty, f));
        if !fields.iter().any(|(cf, _)| newer(cf)) {
            writeln!(c, "    SIZE({cty}, \"{rty}\");").unwrap();
        }
        writeln!(c, "    ALIGN({cty}, \"{rty}\");").unwrap();
        for (cf, rf) in fields.iter().filter(|(cf, _)| !newer(cf)) {
            writeln!(
                c,
                "    OFF(\"{rty}\", \"{rf}\", offsetof({cty}, {cf}), \"{cty}.{cf}\");"
            )
            .unwrap();
        }
    }
    for (member, rty, fields) in WR_UNION.iter().filter(|_| structs.len() == STRUCTS.len()) {
        for f in *fields {
            writeln!(
                c,
                "    OFF(\"{rty}\", \"{f}\", offsetof(struct ibv_send_wr, wr.{member}.{f}) - \
                 offsetof(struct ibv_send_wr, wr), \"struct ibv_send_wr.wr.{member}.{f}\");"
            )
            .unwrap();
        }
    }
    if structs.len() == STRUCTS.len() {
        writeln!(c, "    SIZE(wr_union_t, \"ibv_send_wr_wr\");").unwrap();
    }
    writeln!(c, "    return 0;\n}}").unwrap();

    c
}

/// Compiles the layout program against the headers in `include` and writes its assertions
/// to `OUT_DIR/<name>.rs`.
fn check_against(include: &Path, out: &Path, name: &str, rdma_core: bool, structs: &[Mirror]) {
    let src = out.join(format!("{name}.c"));
    let exe = out.join(name);
    fs::write(&src, layout_program(rdma_core, structs)).expect("write the layout program");
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
    // Each assertion's message names the header it came from.
    let text = String::from_utf8(run.stdout).expect("the layout program prints ASCII");
    let text = text.replace(", \"", &format!(", \"{}: ", include.display()));
    fs::write(out.join(format!("{name}.rs")), text).expect("write the assertions");
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let include = manifest.join("../include");
    let header = include.join("infiniband/verbs.h");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=PFNIC_RDMA_CORE_INCLUDE");

    check_against(&include, &out, "layout", false, STRUCTS);
    match env::var_os("PFNIC_RDMA_CORE_INCLUDE") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            println!(
                "cargo:rerun-if-changed={}",
                dir.join("infiniband/verbs.h").display()
            );
            check_against(&dir, &out, "layout_rdma_core", true, STRUCTS);
            check_against(&dir, &out, "layout_kern_abi", true, KERN_ABI_STRUCTS);
        }
        None => {
            println!(
                "cargo:warning=PFNIC_RDMA_CORE_INCLUDE is not set: the layouts are not checked \
                 against rdma-core's headers (scripts/build-userspace.sh sets it)"
            );
            fs::write(out.join("layout_rdma_core.rs"), "").expect("write layout_rdma_core.rs");
            fs::write(out.join("layout_kern_abi.rs"), "").expect("write layout_kern_abi.rs");
        }
    }
}
