//! The RDMA device's driver data is declared twice, in the driver's `uapi.rs` and in the C
//! header the rdma-core provider includes (`userspace/include/rdma/pfnic-abi.h`). This test
//! compiles the header with the C compiler against the layout Rust gives `uapi.rs`: every
//! size, offset and constant must agree, or it fails.

use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::path::Path;
use std::process::Command;

use crate::uapi::{
    IbAllocDmResp, IbAllocUcontextReq, IbAllocUcontextResp, IbCreateAhResp, IbCreateCqReq,
    IbCreateCqResp, IbCreateQpReq, IbCreateQpResp, IbCreateSrqResp, PFNIC_AH_FLAG_GRH,
    PFNIC_AH_FLAG_IPV4, PFNIC_IB_ABI_VERSION, PFNIC_MMAP_DOORBELL,
};

/// Every size and field offset of a structure, for [`assertions`].
macro_rules! layout {
    ($check:ident, $c:literal, $t:ty, [$($f:ident),* $(,)?]) => {
        $check(format!("sizeof(struct {})", $c), size_of::<$t>());
        $(
            $check(
                format!("offsetof(struct {}, {})", $c, stringify!($f)),
                offset_of!($t, $f),
            );
        )*
    };
}

/// `_Static_assert`s of the Rust layout, for the C compiler to check against the header.
fn assertions() -> String {
    let mut c = String::from("#include <stddef.h>\n#include <rdma/pfnic-abi.h>\n");
    let mut check = |expr: String, want: usize| {
        writeln!(
            c,
            "_Static_assert({expr} == {want}, \"{expr} is {want} in uapi.rs\");"
        )
        .unwrap();
    };
    check("PFNIC_IB_ABI_VERSION".into(), PFNIC_IB_ABI_VERSION as usize);
    check(
        "PFNIC_IB_MMAP_DOORBELL".into(),
        PFNIC_MMAP_DOORBELL as usize,
    );
    layout!(
        check,
        "pfnic_ib_alloc_ucontext_req",
        IbAllocUcontextReq,
        [mem_mode, reserved]
    );
    for (name, value) in [
        ("PFNIC_IB_MEM_MODE_SVA", crate::uapi::PFNIC_MEM_MODE_SVA),
        (
            "PFNIC_IB_MEM_MODE_PINNED",
            crate::uapi::PFNIC_MEM_MODE_PINNED,
        ),
        ("PFNIC_IB_MEM_MODE_ODP", crate::uapi::PFNIC_MEM_MODE_ODP),
        (
            "PFNIC_IB_CQ_CREATE_TIMESTAMP",
            crate::uapi::PFNIC_CQ_CREATE_TIMESTAMP,
        ),
    ] {
        check(name.into(), value as usize);
    }
    layout!(
        check,
        "pfnic_ib_create_cq_req",
        IbCreateCqReq,
        [flags, reserved]
    );
    layout!(
        check,
        "pfnic_ib_create_cq_resp",
        IbCreateCqResp,
        [
            cqn,
            entries,
            mmap_offset,
            mmap_len,
            record_offset,
            cqe_size,
            reserved
        ]
    );
    layout!(
        check,
        "pfnic_ib_create_qp_req",
        IbCreateQpReq,
        [flags, reserved]
    );
    layout!(
        check,
        "pfnic_ib_create_qp_resp",
        IbCreateQpResp,
        [
            sq_entries,
            rq_entries,
            mmap_offset,
            mmap_len,
            rq_offset,
            record_offset
        ]
    );
    layout!(
        check,
        "pfnic_ib_create_srq_resp",
        IbCreateSrqResp,
        [srqn, entries, mmap_offset, mmap_len, record_offset]
    );
    layout!(
        check,
        "pfnic_ib_alloc_dm_resp",
        IbAllocDmResp,
        [mmap_offset, mmap_len]
    );
    layout!(
        check,
        "pfnic_ib_create_ah_resp",
        IbCreateAhResp,
        [
            dest_ip,
            traffic_class,
            hop_limit,
            ah_flags,
            reserved0,
            dmac,
            reserved1,
            dgid
        ]
    );
    check("PFNIC_AH_FLAG_GRH".into(), PFNIC_AH_FLAG_GRH.into());
    check("PFNIC_AH_FLAG_IPV4".into(), PFNIC_AH_FLAG_IPV4.into());
    let s = "struct pfnic_ib_alloc_ucontext_resp";
    check(format!("sizeof({s})"), size_of::<IbAllocUcontextResp>());
    for (field, off) in [
        (
            "uapi_version",
            offset_of!(IbAllocUcontextResp, uapi_version),
        ),
        ("device_abi", offset_of!(IbAllocUcontextResp, device_abi)),
        ("caps", offset_of!(IbAllocUcontextResp, caps)),
        ("index", offset_of!(IbAllocUcontextResp, index)),
        ("reserved", offset_of!(IbAllocUcontextResp, reserved)),
        ("mem_mode", offset_of!(IbAllocUcontextResp, mem_mode)),
        ("odp_rc_caps", offset_of!(IbAllocUcontextResp, odp_rc_caps)),
        (
            "odp_general_caps",
            offset_of!(IbAllocUcontextResp, odp_general_caps),
        ),
    ] {
        check(format!("offsetof({s}, {field})"), off);
    }
    c
}

/// Compiles `source` with the C compiler (`-I include`, syntax only, warnings as errors);
/// the compiler's complaints if it fails. The header checks' `_Static_assert`s fail here.
pub(crate) fn compile_c(include: &Path, std: &str, source: &str) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!(
        "pfnic-abi-check-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("check.c");
    std::fs::write(&src, source).unwrap();
    let out = Command::new("cc")
        .args([
            "-fsyntax-only",
            &format!("-std={std}"),
            "-Wall",
            "-Werror",
            "-I",
        ])
        .arg(include)
        .arg(&src)
        .output()
        .expect("cc");
    std::fs::remove_dir_all(&dir).unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn rdma_abi_header_matches_uapi() {
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../include");
    if let Err(e) = compile_c(&include, "c11", &assertions()) {
        panic!("pfnic-abi.h disagrees with uapi.rs:\n{e}");
    }
}
