//! The queue formats the driver writes and reads for the RDMA core's kernel clients are
//! declared twice: in the device's `pfnic_regs.h` (`PfnicWqe`, `PfnicCqe`, the opcodes, flags
//! and doorbells) and in the driver's `queue_abi.rs`. This test compiles the header with the C
//! compiler against what `queue_abi.rs` says: every offset and value must agree, or it fails.

use std::fmt::Write as _;
use std::mem::offset_of;
use std::path::Path;

use crate::uapi::IbCreateAhResp;

#[path = "../../../drivers/pfnic/queue_abi.rs"]
#[allow(dead_code)]
mod queue_abi;

use queue_abi::*;

/// `_Static_assert`s of `queue_abi.rs`, for the C compiler to check against the header.
fn assertions() -> String {
    let mut c =
        String::from("#include <stddef.h>\n#include <stdint.h>\n#include \"pfnic_regs.h\"\n");
    let mut check = |expr: &str, want: usize| {
        writeln!(
            c,
            "_Static_assert({expr} == {want}, \"{expr} is {want} in queue_abi.rs\");"
        )
        .unwrap();
    };
    check("sizeof(PfnicWqe)", WQE_SIZE);
    check("PFNIC_MAX_SGE", WQE_MAX_SGE);
    check("sizeof(PfnicWqeSge)", WQE_SGE_SIZE);
    for (field, at) in [
        ("opcode", WQE_OPCODE),
        ("flags", WQE_FLAGS),
        ("num_sge", WQE_NUM_SGE),
        ("imm_data", WQE_IMM),
        ("wr_id", WQE_WR_ID),
        ("remote_addr", WQE_REMOTE_ADDR),
        ("rkey", WQE_RKEY),
        ("compare_add", WQE_COMPARE_ADD),
        ("swap", WQE_SWAP),
        ("ud.remote_qpn", WQE_UD_REMOTE_QPN),
        ("ud.remote_qkey", WQE_UD_REMOTE_QKEY),
        (
            "ud.dest_ip",
            WQE_UD_AV + offset_of!(IbCreateAhResp, dest_ip),
        ),
        (
            "ud.traffic_class",
            WQE_UD_AV + offset_of!(IbCreateAhResp, traffic_class),
        ),
        (
            "ud.hop_limit",
            WQE_UD_AV + offset_of!(IbCreateAhResp, hop_limit),
        ),
        (
            "ud.ah_flags",
            WQE_UD_AV + offset_of!(IbCreateAhResp, ah_flags),
        ),
        ("ud.dmac", WQE_UD_AV + offset_of!(IbCreateAhResp, dmac)),
        ("ud.dgid", WQE_UD_AV + offset_of!(IbCreateAhResp, dgid)),
        ("reg.iova", WQE_REG_IOVA),
        ("reg.key", WQE_REG_KEY),
        ("reg.access", WQE_REG_ACCESS),
        ("reg.length", WQE_REG_LENGTH),
        ("reg.pbl", WQE_REG_PBL),
        ("reg.pages", WQE_REG_PAGES),
        ("sge", WQE_SGE),
    ] {
        check(&format!("offsetof(PfnicWqe, {field})"), at);
    }
    for (name, v) in [
        ("RDMA_WRITE", WR_RDMA_WRITE),
        ("RDMA_WRITE_WITH_IMM", WR_RDMA_WRITE_WITH_IMM),
        ("SEND", WR_SEND),
        ("SEND_WITH_IMM", WR_SEND_WITH_IMM),
        ("RDMA_READ", WR_RDMA_READ),
        ("ATOMIC_CMP_AND_SWP", WR_ATOMIC_CMP_AND_SWP),
        ("ATOMIC_FETCH_AND_ADD", WR_ATOMIC_FETCH_AND_ADD),
        ("LOCAL_INV", WR_LOCAL_INV),
        ("SEND_WITH_INV", WR_SEND_WITH_INV),
        ("REG_MR", WR_REG_MR),
    ] {
        check(&format!("PFNIC_WR_{name}"), v.into());
    }
    check("PFNIC_FAST_MAX_PAGES", FAST_MAX_PAGES as usize);
    for (field, at) in [
        ("wr_id", CQE_WR_ID),
        ("byte_len", CQE_BYTE_LEN),
        ("imm_data", CQE_IMM),
        ("qp_num", CQE_QP_NUM),
        ("src_qp", CQE_SRC_QP),
        ("status", CQE_STATUS),
        ("opcode", CQE_OPCODE),
        ("wc_flags", CQE_FLAGS),
        ("owner", CQE_OWNER),
        ("vendor_err", CQE_VENDOR_ERR),
    ] {
        check(&format!("offsetof(PfnicCqe, {field})"), at);
    }
    check("PFNIC_WC_GRH", CQE_FLAG_GRH.into());
    check("PFNIC_WC_WITH_IMM", CQE_FLAG_WITH_IMM.into());
    check("PFNIC_WC_WITH_INV", CQE_FLAG_WITH_INV.into());
    check("PFNIC_DB_SQ", DB_SQ);
    check("PFNIC_DB_RQ", DB_RQ);
    check("PFNIC_DB_CQ_ARM", DB_CQ_ARM);
    check("PFNIC_DB_SRQ", DB_SRQ);
    c
}

#[test]
fn regs_header_matches_queue_abi() {
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../qemu-device/hw/pfnic");
    if let Err(e) = crate::rdma_abi_check::compile_c(&include, "gnu11", &assertions()) {
        panic!("pfnic_regs.h disagrees with queue_abi.rs:\n{e}");
    }
}

/// The check fails when a value disagrees: the header is really read.
#[test]
fn a_wrong_offset_is_caught() {
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../qemu-device/hw/pfnic");
    let wrong = assertions().replace(
        &format!("offsetof(PfnicWqe, reg.pbl) == {WQE_REG_PBL}"),
        &format!("offsetof(PfnicWqe, reg.pbl) == {}", WQE_REG_PBL + 8),
    );
    assert!(crate::rdma_abi_check::compile_c(&include, "gnu11", &wrong).is_err());
}
