//! Device memory (rdma-core's test_device_memory.py): allocation, CPU copies, MRs over it
//! used by every kind of work request on either side (through Debian's libibverbs and pfnic's
//! provider), and the boundaries: between processes (pages go zeroed from one to another,
//! never while one still holds them), and bad arguments.

use crate::common::expect_errno;
use crate::ibv_common::{self as core, ibv_ctx};
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::*;
use ibv::{
    ConnectAttr, SendWr, WcOpcode, WcStatus, WrOpcode, ACCESS_LOCAL_WRITE, ACCESS_ON_DEMAND,
};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_verbs_dm_copy",
        run: test_verbs_dm_copy,
    },
    &Test {
        name: "test_verbs_dm_work_requests",
        run: test_verbs_dm_work_requests,
    },
    &Test {
        name: "test_verbs_dm_isolation",
        run: test_verbs_dm_isolation,
    },
    &Test {
        name: "test_verbs_dm_bad_args",
        run: test_verbs_dm_bad_args,
    },
];

/// A context through libibverbs whose device has device memory (skips otherwise), and its
/// share of it (`max_dm_size`).
fn ibv_dm_ctx() -> Result<(ibv::Context, u64), Failure> {
    let ctx = ibv_ctx()?;
    let max = ctx.query_device_ex()?.max_dm_size;
    if max == 0 {
        expect_errno(
            "ibv_alloc_dm without device memory",
            ctx.alloc_dm(4096, 0).map(drop),
            libc::EOPNOTSUPP,
        )?;
        return Err(Failure::Skip(
            "the device has no memory (max_dm_size 0)".into(),
        ));
    }
    Ok((ctx, max))
}

fn read_dm(dm: &ibv::Dm, off: u64, len: usize) -> Result<Vec<u8>, Failure> {
    let mut v = vec![0u8; len];
    dm.copy_from(off, &mut v)
        .map_err(|e| fail(&format!("ibv_memcpy_from_dm of {len} bytes at {off}"), e))?;
    Ok(v)
}

/// `ibv_memcpy_to_dm` / `_from_dm`: new memory reads as zeros, copies round-trip at any
/// aligned offset and any aligned length inside the allocation (across a page too), and stop
/// at its end (`EINVAL`); an offset or a length that is not a multiple of 4 is refused
/// (`EINVAL`, as mlx5 refuses them).
fn test_verbs_dm_copy() -> TestResult {
    let (ctx, max) = ibv_dm_ctx()?;
    let dm = ctx
        .alloc_dm(6000, 0)
        .map_err(|e| fail("ibv_alloc_dm(6000)", e))?;
    check_eq!(dm.len(), 6000);
    check!(
        read_dm(&dm, 0, 6000)?.iter().all(|&b| b == 0),
        "new device memory is not zeroed"
    );
    let data = pattern(0x5a, 6000);
    dm.copy_to(0, &data)
        .map_err(|e| fail("ibv_memcpy_to_dm of 6000 bytes", e))?;
    check_eq!(read_dm(&dm, 0, 6000)?, data);
    dm.copy_to(4092, &[1, 2, 3, 4, 5, 6, 7, 8])
        .map_err(|e| fail("ibv_memcpy_to_dm of 8 bytes at 4092", e))?;
    check_eq!(
        read_dm(&dm, 4088, 16)?,
        [
            &data[4088..4092],
            &[1, 2, 3, 4, 5, 6, 7, 8],
            &data[4100..4104]
        ]
        .concat()
    );
    check_eq!(read_dm(&dm, 4096, 4)?, vec![5, 6, 7, 8]);
    let mut four = [0u8; 4];
    for off in 4093..4096 {
        expect_errno(
            &format!("a copy to offset {off}"),
            dm.copy_to(off, &[0; 4]),
            libc::EINVAL,
        )?;
        expect_errno(
            &format!("a read from offset {off}"),
            dm.copy_from(off, &mut four),
            libc::EINVAL,
        )?;
    }
    let mut two = [0u8; 2];
    expect_errno("a copy of 2 bytes", dm.copy_to(0, &[0; 2]), libc::EINVAL)?;
    expect_errno("a read of 2 bytes", dm.copy_from(0, &mut two), libc::EINVAL)?;
    expect_errno(
        "a copy past the end",
        dm.copy_to(5996, &[0; 8]),
        libc::EINVAL,
    )?;
    let mut eight = [0u8; 8];
    expect_errno(
        "a read past the end",
        dm.copy_from(5996, &mut eight),
        libc::EINVAL,
    )?;
    // The whole share, in one allocation, beside the first one.
    drop(dm);
    let all = ctx
        .alloc_dm(max, 12)
        .map_err(|e| fail(&format!("ibv_alloc_dm({max}, 4 KiB aligned)"), e))?;
    all.copy_to(max - 4, &[0xee, 0, 0, 0])
        .map_err(|e| fail("ibv_memcpy_to_dm of the share's last word", e))?;
    check_eq!(read_dm(&all, max - 4, 4)?, vec![0xee, 0, 0, 0]);
    Ok(())
}

/// Every kind of work request with device memory on either side: a SEND from device memory
/// into a host buffer, a SEND into device memory, an RDMA WRITE into it and a READ from it
/// (zero-based remote addresses), both atomics on it; the key range is checked against the
/// MR's length, not the allocation's.
fn test_verbs_dm_work_requests() -> TestResult {
    let (ctx, _) = ibv_dm_ctx()?;
    let pair = core::Pair::build(&ctx, &ibv_ctx()?, &core::PairOpts::default())?;
    let (a, b) = (&pair.a, &pair.b);
    let dm = ctx.alloc_dm(8192, 0)?;
    // The MR covers 4096 bytes from 1024 on: its address 0 is the allocation's byte 1024.
    let dmr = a.pd.reg_dm_mr(&dm, 1024, 4096, ACCESS_ALL)?;
    check_eq!(dmr.addr(), 0);
    let src = pattern(0x11, 300);
    dm.copy_to(1024 + 100, &src)?;
    // SEND from device memory.
    b.post_recv(1, 0, 512)?;
    a.send_ok(b, SendWr::new(2, WrOpcode::Send, &[dmr.sge(100, 300)]))?;
    check_bytes("a SEND from device memory", &b.buf, 0, &src)?;
    // RDMA WRITE from b into device memory, zero-based.
    let w = pattern(0x22, 200);
    b.buf.write(1000, &w);
    b.post_ok(SendWr::new(3, WrOpcode::RdmaWrite, &[b.sge(1000, 200)]).remote(500, dmr.rkey()))?;
    check_eq!(read_dm(&dm, 1024 + 500, 200)?, w);
    // RDMA READ from device memory.
    b.post_ok(SendWr::new(4, WrOpcode::RdmaRead, &[b.sge(2000, 300)]).remote(100, dmr.rkey()))?;
    check_bytes("an RDMA READ of device memory", &b.buf, 2000, &src)?;
    // Atomics on device memory.
    dm.copy_to(1024 + 8, &7u64.to_le_bytes())?;
    let fa_sge = [b.sge(3000, 8)];
    let mut fa = SendWr::new(5, WrOpcode::AtomicFetchAndAdd, &fa_sge).remote(8, dmr.rkey());
    fa.compare_add = 5;
    b.post_ok(fa)?;
    check_bytes("the original value", &b.buf, 3000, &7u64.to_le_bytes())?;
    check_eq!(read_dm(&dm, 1024 + 8, 8)?, 12u64.to_le_bytes().to_vec());
    let cs_sge = [b.sge(3008, 8)];
    let mut cs = SendWr::new(6, WrOpcode::AtomicCmpAndSwp, &cs_sge).remote(8, dmr.rkey());
    cs.compare_add = 12;
    cs.swap = 99;
    b.post_ok(cs)?;
    check_eq!(read_dm(&dm, 1024 + 8, 8)?, 99u64.to_le_bytes().to_vec());
    // A SEND into a receive buffer in device memory.
    let sge = [dmr.sge(2048, 512)];
    a.qp.post_recv(&[ibv::RecvWr {
        wr_id: 7,
        sg_list: &sge,
    }])
    .map_err(|e| Failure::Fail(format!("post_recv: {e}")))?;
    let m = pattern(0x33, 400);
    b.buf.write(0, &m);
    b.post_ok(SendWr::new(8, WrOpcode::Send, &[b.sge(0, 400)]))?;
    let wc = a.wait_wc(WcStatus::SUCCESS, Some(WcOpcode::RECV))?;
    check_eq!((wc.wr_id, wc.byte_len), (7, 400));
    check_eq!(read_dm(&dm, 1024 + 2048, 400)?, m);
    // Past the MR's end (inside the allocation): refused remotely and locally.
    b.post(SendWr::new(9, WrOpcode::RdmaWrite, &[b.sge(0, 16)]).remote(4090, dmr.rkey()))?;
    b.wait_wc(WcStatus::REM_ACCESS_ERR, None)?;
    check_eq!(read_dm(&dm, 1024 + 4088, 8)?, vec![0; 8]);
    // Nothing of it went through page requests.
    check_eq!(core::mr_counter(&ctx, &dmr, "page_faults")?, 0);
    Ok(())
}

/// Between processes: another context's allocation comes zeroed, whatever a context wrote
/// into the memory it freed, and never shows what a context still holds; a context's own
/// memory comes back zeroed too.
fn test_verbs_dm_isolation() -> TestResult {
    let (a, max) = ibv_dm_ctx()?;
    let (b, _) = ibv_dm_ctx()?;
    let freed = a.alloc_dm(max, 0)?;
    freed.copy_to(0, &vec![0xaa; max as usize])?;
    drop(freed);
    let held = a.alloc_dm(4096, 0)?;
    held.copy_to(0, &[0xa5; 4096])?;
    let bdm = b.alloc_dm(4096, 0)?;
    check!(
        read_dm(&bdm, 0, 4096)?.iter().all(|&x| x == 0),
        "another process's device memory is not zeroed"
    );
    bdm.copy_to(0, &[0xbb; 4096])?;
    check!(
        read_dm(&held, 0, 4096)?.iter().all(|&x| x == 0xa5),
        "another process's allocation changed memory a context holds"
    );
    drop((bdm, held));
    let again = a.alloc_dm(max, 0)?;
    check!(
        read_dm(&again, 0, max as usize)?.iter().all(|&x| x == 0),
        "a context's own freed memory came back with its old bytes"
    );
    Ok(())
}

/// Bad arguments, each with its errno: allocations of nothing, beyond `max_dm_size`, of an
/// impossible alignment or past the context's share, and MRs past the allocation, at an
/// offset that is not a multiple of 4, on demand or with remote write alone. A QP cannot use
/// another context's device memory key.
fn test_verbs_dm_bad_args() -> TestResult {
    let (ctx, max) = ibv_dm_ctx()?;
    expect_errno("length 0", ctx.alloc_dm(0, 0).map(drop), libc::EINVAL)?;
    expect_errno(
        "beyond max_dm_size",
        ctx.alloc_dm(max + 1, 0).map(drop),
        libc::EINVAL,
    )?;
    expect_errno(
        "an alignment of 2^64",
        ctx.alloc_dm(64, 64).map(drop),
        libc::EINVAL,
    )?;
    let held = ctx.alloc_dm(max, 0)?;
    expect_errno(
        "beyond the context's share",
        ctx.alloc_dm(4096, 0).map(drop),
        libc::EDQUOT,
    )?;
    drop(held);
    let dm = ctx.alloc_dm(8192, 0)?;
    let pd = ctx.alloc_pd()?;
    for (what, off, len, access) in [
        ("past the allocation", 4096, 4097, ACCESS_LOCAL_WRITE),
        ("an empty one at the end", 8192, 0, ACCESS_LOCAL_WRITE),
        ("an offset that wraps", u64::MAX - 3, 8, ACCESS_LOCAL_WRITE),
        (
            "an offset not a multiple of 4",
            1026,
            64,
            ACCESS_LOCAL_WRITE,
        ),
        ("ON_DEMAND", 0, 64, ACCESS_LOCAL_WRITE | ACCESS_ON_DEMAND),
        (
            "remote write without local write",
            0,
            64,
            ibv::ACCESS_REMOTE_WRITE,
        ),
    ] {
        expect_errno(
            what,
            pd.reg_dm_mr(&dm, off, len, access).map(drop),
            libc::EINVAL,
        )?;
    }
    // An empty one is a key that covers no byte (device ABI 1.18), as rdma-core lets a
    // program register.
    drop(pd.reg_dm_mr(&dm, 0, 0, ACCESS_LOCAL_WRITE)?);
    // A context's QP cannot use another context's device memory key.
    let (other, _) = ibv_dm_ctx()?;
    let odm = other.alloc_dm(4096, 0)?;
    let omr = other.alloc_pd()?.reg_dm_mr(&odm, 0, 4096, ACCESS_ALL)?;
    let s = core::Side::basic(&ctx, PAGE, MrKind::Plain)?;
    let d = core::Side::basic(&ctx, PAGE, MrKind::Plain)?;
    s.qp.connect(d.qp.qp_num(), &ConnectAttr::default())?;
    d.qp.connect(s.qp.qp_num(), &ConnectAttr::default())?;
    s.qp.post_send(&[
        SendWr::new(1, WrOpcode::RdmaWrite, &[omr.sge(0, 8)]).remote(d.buf.addr(), d.mr.rkey())
    ])?;
    s.wait_wc(WcStatus::LOC_PROT_ERR, None)?;
    Ok(())
}
