//! Memory regions through Debian's libibverbs and pfnic's provider: registration, keys, bad
//! flags, the implicit MR (rdma-core's test_mr.py).

use std::sync::Arc;

use crate::common::{expect_errno, vm_pinned_kb};
use crate::ibv_common::*;
use crate::ktap::{Test, TestResult};
use crate::verbs_common::{fail, ACCESS_ALL, ODP_SEND, PAGE};
use ibv::{
    Buffer, QpInitAttr, SendWr, Sge, WcOpcode, WcStatus, WrOpcode, ACCESS_LOCAL_WRITE,
    ACCESS_ON_DEMAND, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_verbs_mr_reg_dereg",
        run: test_verbs_mr_reg_dereg,
    },
    &Test {
        name: "test_verbs_mr_key_renewed",
        run: test_verbs_mr_key_renewed,
    },
    &Test {
        name: "test_verbs_mr_bad_flags",
        run: test_verbs_mr_bad_flags,
    },
    &Test {
        name: "test_verbs_mr_not_present",
        run: test_verbs_mr_not_present,
    },
    &Test {
        name: "test_verbs_mr_implicit",
        run: test_verbs_mr_implicit,
    },
];

/// Registration with each access combination and sizes from one byte to 1 MiB: lkey equals
/// rkey, keys differ, counters start at zero, nothing is pinned, and a deregistered MR is gone.
fn test_verbs_mr_reg_dereg() -> TestResult {
    let ctx = ibv_ctx()?;
    let pd = ctx.alloc_pd()?;
    let accesses = [
        0,
        ACCESS_LOCAL_WRITE,
        ACCESS_REMOTE_READ,
        ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE,
        ACCESS_LOCAL_WRITE | ACCESS_REMOTE_ATOMIC,
        ACCESS_ALL,
        ACCESS_ALL | ACCESS_ON_DEMAND,
        ACCESS_ON_DEMAND,
    ];
    let pinned = pinned_mode(&ctx)?;
    let plain_pins = plain_mrs_pin()?;
    let mut keys = Vec::new();
    let mut mrs = Vec::new();
    let mut pinned_pages = 0;
    for (i, &access) in accesses.iter().enumerate() {
        if pinned && access & ACCESS_ON_DEMAND != 0 {
            // The pinned mode has no on-demand MRs (test_mode_choice_rules checks the errno).
            continue;
        }
        for len in [1usize, PAGE, 3 * PAGE + 5, 1 << 20] {
            let buf = Arc::new(Buffer::new(len)?);
            if access & ACCESS_ON_DEMAND == 0 {
                buf.fill(i as u8);
            }
            let mr = pd
                .reg_mr(&buf, access)
                .map_err(|e| fail(&format!("reg_mr {len} bytes, access {access:#x}"), e))?;
            check_eq!(mr.lkey(), mr.rkey());
            check_eq!(mr.addr(), buf.addr());
            check_eq!(mr.len(), len as u64);
            // Its counters, as the rdma tool shows them.
            let s = mr_counters(&ctx, &mr)?;
            let pages = len.div_ceil(PAGE) as u64;
            let pinned_now = s.get("pages_pinned")?;
            let pins = plain_pins && access & ACCESS_ON_DEMAND == 0;
            check_eq!(pinned_now, if pins { pages } else { 0 });
            pinned_pages += pinned_now;
            let faults = (s.get("page_faults")?, s.get("page_faults_handled")?);
            let prefetch = s.get("page_prefetch")?;
            if access & ACCESS_ON_DEMAND != 0 {
                // Nothing is touched at registration.
                check_eq!((faults, prefetch), ((0, 0), 0));
            } else {
                // Populated at registration by prefetch, pages the CPU had made present.
                check_eq!(faults, (0, 0));
                check!(
                    prefetch <= pages,
                    "{prefetch} pages prefetched for a {pages}-page MR"
                );
            }
            keys.push(mr.lkey());
            mrs.push(mr);
        }
    }
    let n = keys.len();
    keys.sort();
    keys.dedup();
    check_eq!(keys.len(), n);
    // Pinned only where ordinary MRs pin, and then exactly their pages.
    check_eq!(vm_pinned_kb()?, pinned_pages * (PAGE as u64 / 1024));
    let first = mrs[0].rkey();
    for mr in mrs {
        mr.dereg().map_err(|(_, e)| fail("ibv_dereg_mr", e))?;
    }
    check_eq!(vm_pinned_kb()?, 0);
    // Gone from the RDMA core too.
    let left = crate::rdma_core::rdma(&["resource", "show", "mr"])?;
    check!(
        !left.contains(&format!("rkey {first:#x}")),
        "a deregistered MR is still listed: {left}"
    );
    Ok(())
}

/// Re-registering gets a new key (the device draws 20 new random bits), and the old key no
/// longer reaches the memory: a peer's RDMA write with it completes `REM_ACCESS_ERR`.
fn test_verbs_mr_key_renewed() -> TestResult {
    let p = Pair::new(&PairOpts::default())?;
    let old = p.b.mr.rkey();
    let (mut mr, mut tries) = (None, 0);
    // A new key can equal the old one by chance (1 in 2^20 - 1): try a few times.
    while tries < 4 {
        let m = p.b.pd.reg_mr(&p.b.buf, ACCESS_ALL)?;
        if m.rkey() != old {
            mr = Some(m);
            break;
        }
        tries += 1;
    }
    let Some(new) = mr else {
        fail!("4 re-registrations all got the old key {old:#x}");
    };
    // Deregister the original: its key must die with it.
    let Pair { a, b } = p;
    let Side {
        qp: b_qp,
        cq: b_cq,
        mr: b_mr,
        buf: b_buf,
        pd: b_pd,
        ..
    } = b;
    b_mr.dereg().map_err(|(_, e)| fail("dereg_mr", e))?;
    let src = a.sge(0, 64);
    a.buf.write(0, &pattern(3, 64));
    a.post(SendWr::new(1, WrOpcode::RdmaWrite, &[src]).remote(b_buf.addr(), old))?;
    check_wc(&a.wait(1)?[0], WcStatus::REM_ACCESS_ERR, None)?;
    check_bytes("target after a write with a stale key", &b_buf, 0, &[0; 64])?;
    // The new key works, on a new connection (the first QP is in ERR now).
    drop(b_qp);
    let qa = a.pd.create_qp(&QpInitAttr::new(&a.cq, &a.cq, 8, 4))?;
    let qb = b_pd.create_qp(&QpInitAttr::new(&b_cq, &b_cq, 8, 4))?;
    qa.connect(qb.qp_num(), &Default::default())?;
    qb.connect(qa.qp_num(), &Default::default())?;
    a.buf.write(0, &pattern(4, 64));
    let src = [a.sge(0, 64)];
    qa.post_send(&[SendWr::new(2, WrOpcode::RdmaWrite, &src).remote(b_buf.addr(), new.rkey())])?;
    check_wc(
        &a.wait(1)?[0],
        WcStatus::SUCCESS,
        Some(WcOpcode::RDMA_WRITE),
    )?;
    check_bytes(
        "target after a write with the new key",
        &b_buf,
        0,
        &pattern(4, 64),
    )?;
    Ok(())
}

/// libibverbs' rules: remote write or atomic access needs local write; unknown bits, a zero
/// length and the whole address space without on-demand paging are refused with `EINVAL`;
/// binding memory windows (`IBV_ACCESS_MW_BIND`), which pfnic lacks, with `EOPNOTSUPP`; the
/// optional bits a device may ignore (`IBV_ACCESS_RELAXED_ORDERING`) are accepted.
fn test_verbs_mr_bad_flags() -> TestResult {
    let ctx = ibv_ctx()?;
    let pd = ctx.alloc_pd()?;
    let buf = Buffer::new(PAGE)?;
    buf.fill(0);
    for access in [
        ACCESS_REMOTE_WRITE,
        ACCESS_REMOTE_ATOMIC,
        ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ,
        0x20,
        0x80,
        1 << 12,
    ] {
        // SAFETY: the registration is refused; were it not, the MR is dropped at once.
        let r = unsafe { pd.reg_mr_raw(buf.addr(), PAGE as u64, access) };
        expect_errno(&format!("reg_mr access {access:#x}"), r, libc::EINVAL)?;
    }
    // SAFETY: as above.
    let r = unsafe { pd.reg_mr_raw(buf.addr(), PAGE as u64, ACCESS_LOCAL_WRITE | 0x10) };
    expect_errno("reg_mr with IBV_ACCESS_MW_BIND", r, libc::EOPNOTSUPP)?;
    // SAFETY: as above.
    let r = unsafe { pd.reg_mr_raw(buf.addr(), 0, ACCESS_LOCAL_WRITE) };
    expect_errno("reg_mr of 0 bytes", r, libc::EINVAL)?;
    // SAFETY: as above.
    let r = unsafe { pd.reg_mr_raw(0, u64::MAX, ACCESS_LOCAL_WRITE) };
    expect_errno("implicit MR without ON_DEMAND", r, libc::EINVAL)?;
    // SAFETY: as above.
    let r = unsafe { pd.reg_mr_raw(buf.addr(), u64::MAX - buf.addr() + 2, ACCESS_ON_DEMAND) };
    expect_errno("range wrapping around", r, libc::EINVAL)?;
    // SAFETY: as above.
    let r = unsafe { pd.reg_mr_raw(buf.addr(), PAGE as u64, ACCESS_LOCAL_WRITE | 1 << 20) };
    drop(r.map_err(|e| fail("reg_mr with IBV_ACCESS_RELAXED_ORDERING", e))?);
    // The PD still works.
    let b2 = Arc::new(Buffer::new(PAGE)?);
    b2.fill(0);
    pd.reg_mr(&b2, ACCESS_LOCAL_WRITE)?;
    Ok(())
}

/// Without on-demand paging the range is made present at registration: memory the process
/// cannot access (`PROT_NONE`, unmapped) is refused with `EFAULT`, and nothing gets pinned.
fn test_verbs_mr_not_present() -> TestResult {
    let ctx = ibv_ctx()?;
    let pd = ctx.alloc_pd()?;
    let buf = Buffer::new(4 * PAGE)?;
    // SAFETY: the buffer is not accessed by the CPU while PROT_NONE.
    unsafe { buf.protect(libc::PROT_NONE) }?;
    // SAFETY: refused; were it not, the MR is dropped at once.
    let r = unsafe { pd.reg_mr_raw(buf.addr(), buf.len() as u64, ACCESS_LOCAL_WRITE) };
    expect_errno("reg_mr of PROT_NONE memory", r, libc::EFAULT)?;
    if !pinned_mode(&ctx)? {
        // On demand, the same registration is accepted: nothing is touched until used.
        // SAFETY: the MR lives only in this scope, shorter than `buf`.
        let odp = unsafe { pd.reg_mr_raw(buf.addr(), buf.len() as u64, ACCESS_ON_DEMAND) }?;
        drop(odp);
    }
    // An unmapped range.
    let gone = Buffer::new(4 * PAGE)?;
    let addr = gone.addr();
    drop(gone);
    // SAFETY: refused; were it not, the MR is dropped at once.
    let r = unsafe { pd.reg_mr_raw(addr, 4 * PAGE as u64, ACCESS_LOCAL_WRITE) };
    expect_errno("reg_mr of unmapped memory", r, libc::EFAULT)?;
    // A read-only range registered for local write.
    let ro = Buffer::new(PAGE)?;
    ro.fill(7);
    // SAFETY: only read while read-only.
    unsafe { ro.protect(libc::PROT_READ) }?;
    // SAFETY: refused; were it not, the MR is dropped at once.
    let r = unsafe { pd.reg_mr_raw(ro.addr(), PAGE as u64, ACCESS_LOCAL_WRITE) };
    expect_errno("reg_mr(LOCAL_WRITE) of read-only memory", r, libc::EFAULT)?;
    // Read-only memory registered without write access is fine.
    // SAFETY: the MR has no write access and lives shorter than `ro`.
    let r = unsafe { pd.reg_mr_raw(ro.addr(), PAGE as u64, ACCESS_REMOTE_READ) }?;
    drop(r);
    check_eq!(vm_pinned_kb()?, 0);
    Ok(())
}

/// The implicit MR covers the whole address space: its key moves data between buffers
/// registered nowhere else.
fn test_verbs_mr_implicit() -> TestResult {
    let ctx = ibv_ctx()?;
    requires_odp(&ctx, ODP_SEND | ODP_RECV | ODP_WRITE, true)?;
    let p = Pair::build(&ctx, &ibv_ctx()?, &PairOpts::default())?;
    // SAFETY: the implicit MR lets the device reach every byte of this process; the test
    // only posts work requests into the `Buffer`s below, which are accessed atomically.
    let (ia, ib) = unsafe {
        (
            p.a.pd.reg_implicit_mr(ACCESS_ALL)?,
            p.b.pd.reg_implicit_mr(ACCESS_ALL)?,
        )
    };
    check_eq!((ia.addr(), ia.len()), (0, u64::MAX));
    check!(ia.access() & ACCESS_ON_DEMAND != 0);
    let faults_before = mr_counter(&p.b.ctx, &ib, "page_faults")?;
    let (src, dst) = (Buffer::new(2 * PAGE)?, Buffer::new(2 * PAGE)?);
    let data = pattern(9, 2 * PAGE);
    src.write(0, &data);
    let sge = Sge {
        addr: src.addr(),
        length: data.len() as u32,
        lkey: ia.lkey(),
    };
    p.a.post(SendWr::new(1, WrOpcode::RdmaWrite, &[sge]).remote(dst.addr(), ib.rkey()))?;
    check_wc(
        &p.a.wait(1)?[0],
        WcStatus::SUCCESS,
        Some(WcOpcode::RDMA_WRITE),
    )?;
    check_bytes("implicit-MR RDMA write", &dst, 0, &data)?;
    let faults = mr_counter(&p.b.ctx, &ib, "page_faults")? - faults_before;
    check!(
        faults >= 2,
        "the implicit MR counted {faults} page faults for 2 untouched target pages"
    );
    Ok(())
}
