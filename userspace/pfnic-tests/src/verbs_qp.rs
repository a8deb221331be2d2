//! RC queue pairs through Debian's libibverbs and pfnic's provider: state machine, every
//! opcode, scatter/gather, posting limits, error completions that put only the failing QP in
//! ERR, and two processes (rdma-core's test_qp.py and test_rdmacm-like traffic).

use pfnic_cli::{errln, outln};
use std::io::{Read, Write};

use crate::common::{expect_errno, meminfo_kb, pipe, Child};
use crate::ibv_common::*;
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::{fail, refill_at_once, MrKind, ACCESS_ALL, PAGE};
use ibv::{
    qp_attr, ConnectAttr, QpAttr, QpState, RecvWr, SendWr, Sge, WcOpcode, WcStatus, WrOpcode,
    ACCESS_LOCAL_WRITE, ACCESS_ON_DEMAND, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE, SEND_SIGNALED,
    SEND_SOLICITED, WC_WITH_IMM,
};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_verbs_qp_state_machine",
        run: test_verbs_qp_state_machine,
    },
    &Test {
        name: "test_verbs_slot_free_at_completion",
        run: test_verbs_slot_free_at_completion,
    },
    &Test {
        name: "test_verbs_rc_send_recv",
        run: test_verbs_rc_send_recv,
    },
    &Test {
        name: "test_verbs_rc_send_imm",
        run: test_verbs_rc_send_imm,
    },
    &Test {
        name: "test_verbs_rc_rdma_write",
        run: test_verbs_rc_rdma_write,
    },
    &Test {
        name: "test_verbs_rc_rdma_write_imm",
        run: test_verbs_rc_rdma_write_imm,
    },
    &Test {
        name: "test_verbs_rc_rdma_read",
        run: test_verbs_rc_rdma_read,
    },
    &Test {
        name: "test_verbs_rc_atomics",
        run: test_verbs_rc_atomics,
    },
    &Test {
        name: "test_verbs_rc_multi_sge",
        run: test_verbs_rc_multi_sge,
    },
    &Test {
        name: "test_verbs_rc_unsignaled",
        run: test_verbs_rc_unsignaled,
    },
    &Test {
        name: "test_verbs_post_limits",
        run: test_verbs_post_limits,
    },
    &Test {
        name: "test_verbs_err_local_key",
        run: test_verbs_err_local_key,
    },
    &Test {
        name: "test_verbs_err_remote_key",
        run: test_verbs_err_remote_key,
    },
    &Test {
        name: "test_verbs_err_protection",
        run: test_verbs_err_protection,
    },
    &Test {
        name: "test_verbs_err_recv_too_small",
        run: test_verbs_err_recv_too_small,
    },
    &Test {
        name: "test_verbs_err_rnr_retry",
        run: test_verbs_err_rnr_retry,
    },
    &Test {
        name: "test_verbs_err_dest_not_ready",
        run: test_verbs_err_dest_not_ready,
    },
    &Test {
        name: "test_verbs_two_processes",
        run: test_verbs_two_processes,
    },
    &Test {
        name: "test_verbs_destroy_frees_rings",
        run: test_verbs_destroy_frees_rings,
    },
];

/// RESET→INIT→RTR→RTS with libibverbs' required attributes; skipping a state or missing a
/// required attribute is refused; `IBV_ACCESS_ON_DEMAND` among the access flags is ignored;
/// ERR and back to RESET; a reset QP reconnects and works.
fn test_verbs_qp_state_machine() -> TestResult {
    let ctx = ibv_ctx()?;
    let a = Side::basic(&ctx, PAGE, MrKind::Plain)?;
    let b = Side::basic(&ctx, PAGE, MrKind::Plain)?;
    check_eq!(a.state()?, QpState::Reset);
    check!(
        a.qp.qp_num() >= 2,
        "QPN {} (0 and 1 are reserved)",
        a.qp.qp_num()
    );
    check!(a.qp.qp_num() != b.qp.qp_num());
    let cap = a.qp.cap();
    check!(cap.max_send_wr >= 8 && cap.max_recv_wr >= 8 && cap.max_send_sge >= 4);
    // RESET→RTR skips INIT.
    let rtr = QpAttr {
        qp_state: QpState::Rtr as u32,
        path_mtu: 5,
        dest_qp_num: b.qp.qp_num(),
        min_rnr_timer: 1,
        max_dest_rd_atomic: 1,
        ..Default::default()
    };
    expect_errno("RESET→RTR", a.qp.modify(&rtr, RTR_MASK), libc::EINVAL)?;
    // RESET→INIT without the port and access flags.
    let init = init_attr(ACCESS_REMOTE_WRITE);
    expect_errno(
        "RESET→INIT without PORT",
        a.qp.modify(&init, qp_attr::STATE),
        libc::EINVAL,
    )?;
    check_eq!(a.state()?, QpState::Reset);
    // Programs pass their MR flags: IBV_ACCESS_ON_DEMAND is ignored on a QP, as RDMA devices
    // do (the query below reports REMOTE_WRITE alone).
    a.qp.modify(
        &init_attr(ACCESS_REMOTE_WRITE | ACCESS_ON_DEMAND),
        INIT_MASK,
    )?;
    check_eq!(a.state()?, QpState::Init);
    // INIT→RTR without the destination QPN.
    expect_errno(
        "INIT→RTR without DEST_QPN",
        a.qp.modify(&rtr, RTR_MASK & !qp_attr::DEST_QPN),
        libc::EINVAL,
    )?;
    a.qp.modify(&rtr, RTR_MASK)?;
    check_eq!(a.state()?, QpState::Rtr);
    let q = a.qp.query()?;
    check_eq!(q.attr.dest_qp_num, b.qp.qp_num());
    check_eq!(q.attr.qp_access_flags, ACCESS_REMOTE_WRITE);
    // Into ERR, back to RESET, and a full connection again.
    a.modify_state(QpState::Err)?;
    check_eq!(a.state()?, QpState::Err);
    a.modify_state(QpState::Reset)?;
    check_eq!(a.state()?, QpState::Reset);
    a.qp.connect(b.qp.qp_num(), &ConnectAttr::default())?;
    b.qp.connect(a.qp.qp_num(), &ConnectAttr::default())?;
    check_eq!(a.state()?, QpState::Rts);
    check_eq!(b.state()?, QpState::Rts);
    // Traffic after the reset: the queues start empty.
    b.post_recv(7, 0, 64)?;
    a.buf.write(0, &pattern(1, 64));
    a.send_ok(&b, SendWr::new(8, WrOpcode::Send, &[a.sge(0, 64)]))?;
    check_bytes("send after a reset", &b.buf, 0, &pattern(1, 64))?;
    Ok(())
}

/// SEND/RECV from one byte to several pages: the data, and every completion field.
/// A work request's queue slot is free once its completion can be polled: a post into the
/// slot right after the poll must never find the queue full (libibverbs' contract; the
/// device once wrote completions before the queue's head, and a fast poller that took a
/// burst of completions got ENOMEM). Send queue: full of RDMA WRITEs, every batch of
/// completions refilled at once. Receive queue: every receive completion followed at once
/// by a new receive.
fn test_verbs_slot_free_at_completion() -> TestResult {
    const WRITES: usize = 20_000;
    const RECVS: usize = 2000;
    let p = Pair::new(&PairOpts {
        max_wr: 64,
        cqe: 128,
        ..Default::default()
    })?;
    let (sq, bursts) = send_slots_reused_at_once(&p, WrOpcode::RdmaWrite, WRITES)?;
    // The receive queue, one completion at a time.
    let q = Pair::new(&PairOpts {
        max_wr: 2,
        cqe: 16,
        ..Default::default()
    })?;
    let rq = q.b.qp.cap().max_recv_wr as usize;
    for i in 0..rq {
        q.b.post_recv(i as u64, 0, 8)?;
    }
    let ssge = [q.a.sge(0, 8)];
    for i in 0..RECVS {
        q.a.post_ok(SendWr::new(i as u64, WrOpcode::Send, &ssge))?;
        let r = q.b.wait_wc(WcStatus::SUCCESS, Some(WcOpcode::RECV))?;
        q.b.post_recv((rq + i) as u64, 0, 8).map_err(|e| {
            Failure::Fail(format!(
                "receive {}, right after receive {}: {e:?}",
                rq + i,
                r.wr_id
            ))
        })?;
    }
    outln!(
        "# {WRITES} writes through {sq} send slots ({bursts} bursts of completions refilled at once), {RECVS} receives through {rq} receive slots: every slot reusable as soon as its completion was polled"
    );
    Ok(())
}

/// Keeps `p.a`'s send queue full of `total` signaled `op`s (RDMA WRITE or READ) into `p.b`
/// ([`refill_at_once`]).
pub fn send_slots_reused_at_once(
    p: &Pair,
    op: WrOpcode,
    total: usize,
) -> Result<(usize, usize), Failure> {
    let sge = [p.a.sge(0, 8)];
    refill_at_once(
        p.a.qp.cap().max_send_wr as usize,
        op,
        total,
        |i| {
            p.a.qp
                .post_send(&[p
                    .a
                    .rdma_wr(i as u64, op, &sge, &p.b, 0)
                    .flags(SEND_SIGNALED)])
                .map_err(|e| e.error)
        },
        |wcs| p.a.cq.poll(wcs),
    )
}

fn test_verbs_rc_send_recv() -> TestResult {
    let p = Pair::new(&PairOpts {
        len: 16 * PAGE,
        ..Default::default()
    })?;
    for (i, len) in [1usize, 63, PAGE, PAGE + 1, 5 * PAGE + 77, 16 * PAGE]
        .into_iter()
        .enumerate()
    {
        let data = pattern(i as u8, len);
        p.a.buf.write(0, &data);
        p.b.buf.fill(0);
        p.b.post_recv(100 + i as u64, 0, 16 * PAGE)?;
        let s = p.a.post_ok(SendWr::new(
            200 + i as u64,
            WrOpcode::Send,
            &[p.a.sge(0, len)],
        ))?;
        check_eq!(s.wr_id, 200 + i as u64);
        check_eq!(s.qp_num, p.a.qp.qp_num());
        let r = p.b.wait_wc(WcStatus::SUCCESS, Some(WcOpcode::RECV))?;
        check_eq!(r.wr_id, 100 + i as u64);
        check_eq!(r.byte_len, len as u32);
        check_eq!(r.qp_num, p.b.qp.qp_num());
        check_eq!(r.src_qp, p.a.qp.qp_num());
        check_eq!(r.wc_flags & WC_WITH_IMM, 0);
        check_bytes(&format!("send of {len} bytes"), &p.b.buf, 0, &data)?;
        check_bytes(
            "beyond the message",
            &p.b.buf,
            len,
            &vec![0; 64.min(16 * PAGE - len)],
        )?;
    }
    // The QP's counters, as the rdma tool shows them.
    let wqes = qp_counter(&p.a.ctx, &p.a.qp, "wqes")?;
    check!(wqes >= 6, "QP counted {wqes} WQEs");
    let bytes = qp_counter(&p.a.ctx, &p.a.qp, "bytes")?;
    check!(
        bytes >= (1 + 63 + PAGE + PAGE + 1 + 5 * PAGE + 77 + 16 * PAGE) as u64,
        "QP counted {bytes} bytes"
    );
    Ok(())
}

/// SEND_WITH_IMM: the receiver gets the immediate data as posted (network order).
fn test_verbs_rc_send_imm() -> TestResult {
    let p = Pair::new(&PairOpts::default())?;
    p.a.buf.write(0, &pattern(2, 100));
    p.b.post_recv(1, 0, PAGE)?;
    let r = p.a.send_ok(
        &p.b,
        SendWr::new(2, WrOpcode::SendWithImm, &[p.a.sge(0, 100)]).imm(0x1234_5678),
    )?;
    check!(r.wc_flags & WC_WITH_IMM != 0, "no IBV_WC_WITH_IMM");
    check_eq!(u32::from_be(r.imm_data), 0x1234_5678);
    check_eq!(r.byte_len, 100);
    check_bytes("send with immediate", &p.b.buf, 0, &pattern(2, 100))?;
    Ok(())
}

/// RDMA WRITE at an offset: exactly the target range changes; no receive is consumed.
fn test_verbs_rc_rdma_write() -> TestResult {
    let p = Pair::new(&PairOpts {
        len: 8 * PAGE,
        ..Default::default()
    })?;
    p.b.buf.fill(0xaa);
    let len = 3 * PAGE + 10;
    let data = pattern(5, len);
    p.a.buf.write(0, &data);
    p.b.post_recv(9, 0, PAGE)?;
    let sge = [p.a.sge(0, len)];
    p.a.post_ok(p.a.rdma_wr(1, WrOpcode::RdmaWrite, &sge, &p.b, 100))?;
    check_bytes("RDMA write", &p.b.buf, 100, &data)?;
    check_bytes("before the target", &p.b.buf, 0, &[0xaa; 100])?;
    check_bytes("after the target", &p.b.buf, 100 + len, &[0xaa; 64])?;
    check_cq_empty(&p.b.cq)?;
    Ok(())
}

/// RDMA WRITE_WITH_IMM: data lands at the remote address and consumes a receive that
/// completes `RECV_RDMA_WITH_IMM` with the immediate data.
fn test_verbs_rc_rdma_write_imm() -> TestResult {
    let p = Pair::new(&PairOpts::default())?;
    let data = pattern(6, 2 * PAGE);
    p.a.buf.write(0, &data);
    p.b.post_recv(11, 0, 0)?;
    let sge = [p.a.sge(0, 2 * PAGE)];
    p.a.post_ok(
        p.a.rdma_wr(12, WrOpcode::RdmaWriteWithImm, &sge, &p.b, PAGE)
            .imm(0xfeed_f00d),
    )?;
    let r =
        p.b.wait_wc(WcStatus::SUCCESS, Some(WcOpcode::RECV_RDMA_WITH_IMM))?;
    check_eq!(r.wr_id, 11);
    check!(r.wc_flags & WC_WITH_IMM != 0, "no IBV_WC_WITH_IMM");
    check_eq!(u32::from_be(r.imm_data), 0xfeed_f00d);
    check_eq!(r.byte_len, 2 * PAGE as u32);
    check_bytes("RDMA write with immediate", &p.b.buf, PAGE, &data)?;
    Ok(())
}

/// RDMA READ brings remote data into the local buffer.
fn test_verbs_rc_rdma_read() -> TestResult {
    let p = Pair::new(&PairOpts::default())?;
    let data = pattern(7, 3 * PAGE - 3);
    p.b.buf.write(3, &data);
    let sge = [p.a.sge(PAGE, data.len())];
    let s =
        p.a.post_ok(p.a.rdma_wr(3, WrOpcode::RdmaRead, &sge, &p.b, 3))?;
    check_eq!(s.byte_len, data.len() as u32);
    check_bytes("RDMA read", &p.a.buf, PAGE, &data)?;
    Ok(())
}

/// Compare-and-swap (hit and miss) and fetch-and-add return the old value and change the
/// remote one as specified.
fn test_verbs_rc_atomics() -> TestResult {
    let p = Pair::new(&PairOpts::default())?;
    p.b.buf.write_u64(64, 100);
    let local = [p.a.sge(0, 8)];
    let mut cas = p.a.rdma_wr(1, WrOpcode::AtomicCmpAndSwp, &local, &p.b, 64);
    cas.compare_add = 100;
    cas.swap = 0xdead_beef_0000_0001;
    p.a.post_ok(cas)?;
    check_eq!(p.a.buf.read_u64(0), 100);
    check_eq!(p.b.buf.read_u64(64), 0xdead_beef_0000_0001);
    // A compare that misses leaves the target alone and still returns the old value.
    cas.wr_id = 2;
    cas.compare_add = 5;
    cas.swap = 7;
    p.a.post_ok(cas)?;
    check_eq!(p.a.buf.read_u64(0), 0xdead_beef_0000_0001);
    check_eq!(p.b.buf.read_u64(64), 0xdead_beef_0000_0001);
    let mut fadd =
        p.a.rdma_wr(3, WrOpcode::AtomicFetchAndAdd, &local, &p.b, 64);
    fadd.compare_add = 0xffff_ffff;
    p.a.post_ok(fadd)?;
    check_eq!(p.a.buf.read_u64(0), 0xdead_beef_0000_0001);
    check_eq!(p.b.buf.read_u64(64), 0xdead_bef0_0000_0000);
    check_eq!(p.b.buf.read_u64(56), 0);
    check_eq!(p.b.buf.read_u64(72), 0);
    // Misaligned target and wrong local length: LOC_QP_OP_ERR.
    let mut bad =
        p.a.rdma_wr(4, WrOpcode::AtomicFetchAndAdd, &local, &p.b, 64 + 4);
    bad.compare_add = 1;
    p.a.post(bad)?;
    p.a.wait_wc(WcStatus::LOC_QP_OP_ERR, None)?;
    check_eq!(p.b.buf.read_u64(64), 0xdead_bef0_0000_0000);
    Ok(())
}

/// Gather from four SGEs into one receive, scatter one message over three receive SGEs,
/// and an RDMA write and read gathering four SGEs.
fn test_verbs_rc_multi_sge() -> TestResult {
    let p = Pair::new(&PairOpts {
        len: 8 * PAGE,
        ..Default::default()
    })?;
    let data = pattern(8, 4 * PAGE);
    p.a.buf.write(0, &data);
    // Pieces of uneven sizes, out of order in memory.
    let pieces = [
        (3 * PAGE, 1000),
        (0, 3000),
        (PAGE + 17, 2 * PAGE),
        (3 * PAGE + 1000, 5),
    ];
    let gather: Vec<Sge> = pieces.iter().map(|&(o, l)| p.a.sge(o, l)).collect();
    let expect: Vec<u8> = pieces
        .iter()
        .flat_map(|&(o, l)| data[o..o + l].to_vec())
        .collect();
    // Receive into three SGEs.
    let scatter = [
        p.b.sge(5 * PAGE, 100),
        p.b.sge(0, 2 * PAGE),
        p.b.sge(7 * PAGE, PAGE),
    ];
    p.b.qp.post_recv(&[RecvWr {
        wr_id: 1,
        sg_list: &scatter,
    }])?;
    let r = p.a.send_ok(&p.b, SendWr::new(2, WrOpcode::Send, &gather))?;
    check_eq!(r.byte_len, expect.len() as u32);
    check_bytes("scatter 1", &p.b.buf, 5 * PAGE, &expect[..100])?;
    check_bytes("scatter 2", &p.b.buf, 0, &expect[100..100 + 2 * PAGE])?;
    check_bytes("scatter 3", &p.b.buf, 7 * PAGE, &expect[100 + 2 * PAGE..])?;
    // RDMA write gathering four pieces.
    p.a.post_ok(p.a.rdma_wr(3, WrOpcode::RdmaWrite, &gather, &p.b, 4 * PAGE))?;
    check_bytes("gathered RDMA write", &p.b.buf, 4 * PAGE, &expect)?;
    // RDMA read scattering into four pieces of the local buffer.
    p.a.buf.fill(0);
    let dst: Vec<Sge> = pieces.iter().map(|&(o, l)| p.a.sge(o, l)).collect();
    p.a.post_ok(p.a.rdma_wr(4, WrOpcode::RdmaRead, &dst, &p.b, 4 * PAGE))?;
    for &(o, l) in &pieces {
        check_bytes("scattered RDMA read", &p.a.buf, o, &data[o..o + l])?;
    }
    Ok(())
}

/// Unsignaled work requests complete silently; a signaled one after them completes, and the
/// send queue drains (the device's head moves, so posting more than the queue holds works).
fn test_verbs_rc_unsignaled() -> TestResult {
    let p = Pair::new(&PairOpts {
        max_wr: 4,
        ..Default::default()
    })?;
    let entries = u64::from(p.a.qp.cap().max_send_wr);
    p.a.buf.write(0, &pattern(10, 64));
    let sge = [p.a.sge(0, 64)];
    for round in 0..3 * entries {
        let flags = if (round + 1) % entries == 0 {
            SEND_SIGNALED
        } else {
            0
        };
        let off = 64 * (round % 32) as usize;
        p.a.post(
            p.a.rdma_wr(round, WrOpcode::RdmaWrite, &sge, &p.b, off)
                .flags(flags),
        )?;
        if flags != 0 {
            let wc = p.a.wait_wc(WcStatus::SUCCESS, Some(WcOpcode::RDMA_WRITE))?;
            check_eq!(wc.wr_id, round);
        }
    }
    for i in 0..(3 * entries).min(32) as usize {
        check_bytes("unsignaled write", &p.b.buf, 64 * i, &pattern(10, 64))?;
    }
    Ok(())
}

/// `ibv_post_send`/`ibv_post_recv` errors: too many SGEs and unsupported flags are `EINVAL`,
/// a full queue is `ENOMEM`; `bad_wr` names the first work request not posted.
fn test_verbs_post_limits() -> TestResult {
    let ctx = ibv_ctx()?;
    let a = Side::from_opts(
        &ctx,
        &PairOpts {
            len: PAGE,
            max_wr: 4,
            ..Default::default()
        },
    )?;
    let cap = a.qp.cap();
    let (sq, rq) = (cap.max_send_wr, cap.max_recv_wr);
    check!(sq >= 4 && rq >= 4, "queues of {sq} and {rq} work requests");
    // INIT: work requests queue but do not execute.
    a.modify_to_init(0)?;
    let sges = vec![a.sge(0, 8); cap.max_send_sge as usize + 1];
    let ok = SendWr::new(1, WrOpcode::Send, &sges[..1]);
    let too_many = SendWr::new(2, WrOpcode::Send, &sges);
    let r = a.qp.post_send(&[ok, too_many, ok]);
    match r {
        Err(e) if e.bad_wr == 1 && e.errno() == libc::EINVAL => {}
        other => fail!("post_send with {} SGEs: {other:?}", sges.len()),
    }
    let inline = ok.flags(SEND_SIGNALED | 8);
    match a.qp.post_send(&[inline]) {
        Err(e) if e.bad_wr == 0 && e.errno() == libc::EINVAL => {}
        other => fail!("post_send with IBV_SEND_INLINE: {other:?}"),
    }
    // One was posted above; fill the rest, then one more.
    let fill = vec![ok; sq as usize - 1];
    a.qp.post_send(&fill)?;
    match a.qp.post_send(&[ok, ok]) {
        Err(e) if e.bad_wr == 0 && e.errno() == libc::ENOMEM => {}
        other => fail!("post_send on a full send queue: {other:?}"),
    }
    let rsge = vec![a.sge(0, 8); cap.max_recv_sge as usize + 1];
    match a.qp.post_recv(&[RecvWr {
        wr_id: 1,
        sg_list: &rsge,
    }]) {
        Err(e) if e.bad_wr == 0 && e.errno() == libc::EINVAL => {}
        other => fail!("post_recv with {} SGEs: {other:?}", rsge.len()),
    }
    let rwr = RecvWr {
        wr_id: 2,
        sg_list: &rsge[..1],
    };
    let fill = vec![rwr; rq as usize + 1];
    match a.qp.post_recv(&fill) {
        Err(e) if e.bad_wr == rq as usize && e.errno() == libc::ENOMEM => {}
        other => fail!("post_recv of {} on {rq} entries: {other:?}", rq + 1),
    }
    // Nothing ran: no completion, the QP still in INIT.
    check_cq_empty(&a.cq)?;
    check_eq!(a.state()?, QpState::Init);
    // ERR flushes everything posted: one completion per WQE.
    a.modify_state(QpState::Err)?;
    let wcs = wait_cq(&a.cq, (sq + rq) as usize)?;
    for w in &wcs {
        check_wc(w, WcStatus::WR_FLUSH_ERR, None)?;
    }
    check_eq!(
        wcs.iter().filter(|w| w.opcode == WcOpcode::RECV).count(),
        rq as usize
    );
    Ok(())
}

/// Checks the aftermath of a failed work request on `p.a`: `p.a` is in ERR, a work request
/// posted afterwards is flushed, `p.b` is still usable, and an unrelated pair in the same
/// contexts moves data.
fn check_only_a_in_err(p: &Pair, peer_state: QpState) -> TestResult {
    check_eq!(p.a.state()?, QpState::Err);
    check_eq!(p.b.state()?, peer_state);
    let sge = [p.a.sge(0, 8)];
    p.a.post(p.a.rdma_wr(0xf1, WrOpcode::RdmaWrite, &sge, &p.b, 0))?;
    let wc = p.a.wait_wc(WcStatus::WR_FLUSH_ERR, None)?;
    check_eq!(wc.wr_id, 0xf1);
    // Another pair of the same contexts works.
    let q = Pair::build(&p.a.ctx, &p.b.ctx, &PairOpts::default())?;
    q.a.buf.write(0, &pattern(11, 256));
    q.b.post_recv(1, 0, PAGE)?;
    q.a.send_ok(&q.b, SendWr::new(2, WrOpcode::Send, &[q.a.sge(0, 256)]))?;
    check_bytes("other pair", &q.b.buf, 0, &pattern(11, 256))?;
    Ok(())
}

/// A bad local key (wrong key, another PD's key, out of range, missing local write for a
/// read) completes `LOC_PROT_ERR` and puts only that QP in ERR.
fn test_verbs_err_local_key() -> TestResult {
    type Case = fn(&Pair, &ibv::Mr) -> (Vec<Sge>, WrOpcode);
    let cases: [(&str, Case); 4] = [
        ("wrong lkey", |p, _| {
            (
                vec![Sge {
                    lkey: p.a.mr.lkey() ^ 0x80,
                    ..p.a.sge(0, 64)
                }],
                WrOpcode::RdmaWrite,
            )
        }),
        ("lkey of another PD", |p, _| {
            (vec![p.b.sge(0, 64)], WrOpcode::RdmaWrite)
        }),
        ("beyond the MR", |p, _| {
            (vec![p.a.sge(4 * PAGE - 32, 64)], WrOpcode::RdmaWrite)
        }),
        ("RDMA read into an MR without local write", |_, ro| {
            (vec![ro.sge(0, 64)], WrOpcode::RdmaRead)
        }),
    ];
    for (what, case) in cases {
        let p = Pair::same_context(&PairOpts::default())?;
        let ro_buf = filled_buffer(PAGE, 0x55)?;
        let ro = p.a.pd.reg_mr(&ro_buf, ACCESS_REMOTE_READ)?;
        let (sges, op) = case(&p, &ro);
        p.b.buf.fill(0x33);
        p.a.post(p.a.rdma_wr(1, op, &sges, &p.b, 0))?;
        p.a.wait_wc(WcStatus::LOC_PROT_ERR, None)
            .map_err(|e| ctx_err(what, e))?;
        check_bytes(what, &p.b.buf, 0, &[0x33; 64])?;
        check_bytes(what, &ro_buf, 0, &[0x55; 64])?;
        check_only_a_in_err(&p, QpState::Rts).map_err(|e| ctx_err(what, e))?;
    }
    Ok(())
}

fn ctx_err(what: &str, f: Failure) -> Failure {
    match f {
        Failure::Fail(m) => Failure::Fail(format!("{what}: {m}")),
        s => s,
    }
}

/// A bad remote key (wrong, of another PD, out of range, MR without the access, QP without
/// the access) completes `REM_ACCESS_ERR`, leaves the target alone, and errors only the
/// requester.
fn test_verbs_err_remote_key() -> TestResult {
    struct Case {
        what: &'static str,
        op: WrOpcode,
        /// (remote address offset, use the wrong key kind)
        target: fn(&Pair, &ibv::Mr, &ibv::Mr) -> (u64, u32),
        qp_access: u32,
    }
    let cases = [
        Case {
            what: "wrong rkey",
            op: WrOpcode::RdmaWrite,
            target: |p, _, _| (p.b.buf.addr(), p.b.mr.rkey() ^ 0x40),
            qp_access: ACCESS_ALL,
        },
        Case {
            what: "rkey of another PD",
            op: WrOpcode::RdmaWrite,
            target: |_, other_pd, _| (other_pd.addr(), other_pd.rkey()),
            qp_access: ACCESS_ALL,
        },
        Case {
            what: "beyond the remote MR",
            op: WrOpcode::RdmaWrite,
            target: |p, _, _| (p.b.buf.addr() + 4 * PAGE as u64 - 8, p.b.mr.rkey()),
            qp_access: ACCESS_ALL,
        },
        Case {
            what: "write to an MR without remote write",
            op: WrOpcode::RdmaWrite,
            target: |_, _, ro| (ro.addr(), ro.rkey()),
            qp_access: ACCESS_ALL,
        },
        Case {
            what: "atomic on an MR without remote atomic",
            op: WrOpcode::AtomicFetchAndAdd,
            target: |_, _, ro| (ro.addr(), ro.rkey()),
            qp_access: ACCESS_ALL,
        },
        Case {
            what: "read through a QP without remote read",
            op: WrOpcode::RdmaRead,
            target: |p, _, _| (p.b.buf.addr(), p.b.mr.rkey()),
            qp_access: ACCESS_REMOTE_WRITE,
        },
        Case {
            what: "write through a QP without remote write",
            op: WrOpcode::RdmaWrite,
            target: |p, _, _| (p.b.buf.addr(), p.b.mr.rkey()),
            qp_access: ACCESS_REMOTE_READ,
        },
    ];
    for c in &cases {
        let ca = ibv_ctx()?;
        let cb = ibv_ctx()?;
        let a = Side::basic(&ca, 4 * PAGE, MrKind::Plain)?;
        let b = Side::basic(&cb, 4 * PAGE, MrKind::Plain)?;
        a.qp.connect(b.qp.qp_num(), &ConnectAttr::default())?;
        b.qp.connect(
            a.qp.qp_num(),
            &ConnectAttr {
                access: c.qp_access,
                ..Default::default()
            },
        )?;
        let p = Pair { a, b };
        // An MR of another PD in b's context, and a read-only MR of b's PD.
        let other = cb.alloc_pd()?;
        let obuf = filled_buffer(PAGE, 0x44)?;
        let other_mr = other.reg_mr(&obuf, ACCESS_ALL)?;
        let robuf = filled_buffer(PAGE, 0x66)?;
        let ro =
            p.b.pd
                .reg_mr(&robuf, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ)?;
        p.b.buf.fill(0x22);
        p.a.buf.fill(0x77);
        let (addr, rkey) = (c.target)(&p, &other_mr, &ro);
        let sge = [p.a.sge(
            0,
            if matches!(c.op, WrOpcode::AtomicFetchAndAdd) {
                8
            } else {
                64
            },
        )];
        let mut wr = SendWr::new(1, c.op, &sge).remote(addr, rkey);
        wr.compare_add = 1;
        p.a.post(wr)?;
        p.a.wait_wc(WcStatus::REM_ACCESS_ERR, None)
            .map_err(|e| ctx_err(c.what, e))?;
        check_bytes(c.what, &p.b.buf, 4 * PAGE - 64, &[0x22; 64])?;
        check_bytes(c.what, &p.b.buf, 0, &[0x22; 64])?;
        check_bytes(c.what, &obuf, 0, &[0x44; 64])?;
        check_bytes(c.what, &robuf, 0, &[0x66; 64])?;
        check_bytes(c.what, &p.a.buf, 0, &[0x77; 64])?;
        check_only_a_in_err(&p, QpState::Rts).map_err(|e| ctx_err(c.what, e))?;
    }
    Ok(())
}

/// Pages the process itself cannot use that way: a `PROT_NONE` or read-only target completes
/// `REM_ACCESS_ERR`; a `PROT_NONE` local source `LOC_PROT_ERR`; memory is left alone.
fn test_verbs_err_protection() -> TestResult {
    for (what, remote, prot) in [
        ("PROT_NONE target", true, libc::PROT_NONE),
        ("read-only target", true, libc::PROT_READ),
        ("PROT_NONE source", false, libc::PROT_NONE),
    ] {
        let p = Pair::odp(ODP_WRITE, 4 * PAGE)?;
        p.a.buf.write(0, &pattern(12, PAGE));
        p.b.buf.fill(0x5a);
        let victim = if remote { &p.b.buf } else { &p.a.buf };
        // SAFETY: the victim buffer is not read by the CPU until restored below.
        unsafe { victim.protect(prot) }?;
        let sge = [p.a.sge(0, PAGE)];
        p.a.post(p.a.rdma_wr(1, WrOpcode::RdmaWrite, &sge, &p.b, 0))?;
        let wc = p.a.wait(1)?;
        // SAFETY: back to read/write before any CPU access.
        unsafe { victim.protect(libc::PROT_READ | libc::PROT_WRITE) }?;
        let want = if remote {
            WcStatus::REM_ACCESS_ERR
        } else {
            WcStatus::LOC_PROT_ERR
        };
        check_wc(&wc[0], want, None).map_err(|e| ctx_err(what, e))?;
        check_bytes(what, &p.b.buf, 0, &[0x5a; PAGE])?;
        check_only_a_in_err(&p, QpState::Rts).map_err(|e| ctx_err(what, e))?;
    }
    Ok(())
}

/// A SEND larger than the receive buffer: the receiver completes `LOC_LEN_ERR` and enters
/// ERR, the sender completes `REM_INV_REQ_ERR`.
fn test_verbs_err_recv_too_small() -> TestResult {
    let p = Pair::new(&PairOpts::default())?;
    p.a.buf.write(0, &pattern(13, 200));
    p.b.post_recv(1, 0, 100)?;
    p.a.post(SendWr::new(2, WrOpcode::Send, &[p.a.sge(0, 200)]))?;
    p.a.wait_wc(WcStatus::REM_INV_REQ_ERR, None)?;
    let r = p.b.wait_wc(WcStatus::LOC_LEN_ERR, None)?;
    check_eq!(r.wr_id, 1);
    check_eq!(p.a.state()?, QpState::Err);
    check_eq!(p.b.state()?, QpState::Err);
    Ok(())
}

/// No receive posted: after `rnr_retry` retries the sender completes `RNR_RETRY_EXC_ERR`; the
/// receiver is untouched and takes the next send once a receive is posted on a new pair.
fn test_verbs_err_rnr_retry() -> TestResult {
    let p = Pair::new(&PairOpts {
        connect: ConnectAttr {
            rnr_retry: 2,
            min_rnr_timer: 1,
            ..Default::default()
        },
        ..Default::default()
    })?;
    p.a.buf.write(0, &pattern(14, 64));
    p.a.post(SendWr::new(1, WrOpcode::Send, &[p.a.sge(0, 64)]))?;
    p.a.wait_wc(WcStatus::RNR_RETRY_EXC_ERR, None)?;
    let waits = qp_counter(&p.a.ctx, &p.a.qp, "rnr_waits")?;
    check!(waits >= 1, "{waits} RNR waits counted for 2 retries");
    check_only_a_in_err(&p, QpState::Rts)?;
    // With retries forever, a late receive is found.
    let q = Pair::new(&PairOpts::default())?;
    q.a.buf.write(0, &pattern(15, 64));
    q.a.post(
        SendWr::new(3, WrOpcode::Send, &[q.a.sge(0, 64)]).flags(SEND_SIGNALED | SEND_SOLICITED),
    )?;
    std::thread::sleep(std::time::Duration::from_millis(50));
    check_cq_empty(&q.a.cq)?;
    q.b.post_recv(4, 0, PAGE)?;
    q.a.wait_wc(WcStatus::SUCCESS, Some(WcOpcode::SEND))?;
    q.b.wait_wc(WcStatus::SUCCESS, Some(WcOpcode::RECV))?;
    check_bytes("send after an RNR wait", &q.b.buf, 0, &pattern(15, 64))?;
    Ok(())
}

/// A destination QP that is not ready (INIT) or gone: `RETRY_EXC_ERR`.
fn test_verbs_err_dest_not_ready() -> TestResult {
    let ctx = ibv_ctx()?;
    let a = Side::basic(&ctx, PAGE, MrKind::Plain)?;
    let b = Side::basic(&ctx, PAGE, MrKind::Plain)?;
    a.qp.connect(b.qp.qp_num(), &ConnectAttr::default())?;
    b.modify_to_init(ACCESS_ALL)?;
    b.buf.fill(0x11);
    let sge = [a.sge(0, 64)];
    a.post(a.rdma_wr(1, WrOpcode::RdmaWrite, &sge, &b, 0))?;
    a.wait_wc(WcStatus::RETRY_EXC_ERR, None)?;
    check_bytes("target of a QP in INIT", &b.buf, 0, &[0x11; 64])?;
    check_eq!(b.state()?, QpState::Init);
    // Destroyed destination.
    let c = Side::basic(&ctx, PAGE, MrKind::Plain)?;
    let d = Side::basic(&ctx, PAGE, MrKind::Plain)?;
    c.qp.connect(d.qp.qp_num(), &ConnectAttr::default())?;
    let Side {
        qp: dqp,
        buf: dbuf,
        mr: dmr,
        ..
    } = d;
    dqp.destroy().map_err(|(_, e)| fail("destroy_qp", e))?;
    c.post(SendWr::new(2, WrOpcode::RdmaWrite, &[c.sge(0, 64)]).remote(dbuf.addr(), dmr.rkey()))?;
    c.wait_wc(WcStatus::RETRY_EXC_ERR, None)?;
    Ok(())
}

fn send_u64s(f: &mut std::fs::File, v: &[u64]) -> std::io::Result<()> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    f.write_all(&bytes)
}

fn recv_u64s(f: &mut std::fs::File, n: usize) -> std::io::Result<Vec<u64>> {
    let mut b = vec![0; 8 * n];
    f.read_exact(&mut b)?;
    Ok(b.chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

/// The child's side of [`test_verbs_two_processes`]: 0 on success.
fn two_processes_child(mut rx: std::fs::File, mut tx: std::fs::File) -> i32 {
    let r = (|| -> Result<(), Failure> {
        let ctx = ibv_ctx()?;
        let s = Side::basic(&ctx, 4 * PAGE, MrKind::Odp)?;
        s.buf.write(2 * PAGE, &pattern(21, 2 * PAGE));
        send_u64s(
            &mut tx,
            &[
                u64::from(s.qp.qp_num()),
                s.buf.addr(),
                u64::from(s.mr.rkey()),
            ],
        )?;
        let peer = recv_u64s(&mut rx, 1)?[0] as u32;
        s.qp.connect(peer, &ConnectAttr::default())?;
        // Out of RESET, where a QP takes no work request, before the parent writes.
        s.post_recv(1, 0, 0)?;
        send_u64s(&mut tx, &[1])?;
        // The parent writes our first pages with an immediate, then reads our last ones.
        let wc = s.wait_wc(WcStatus::SUCCESS, Some(WcOpcode::RECV_RDMA_WITH_IMM))?;
        check_eq!(u32::from_be(wc.imm_data), 0xc0ffee);
        check_eq!(wc.src_qp, peer);
        check_bytes("written by the parent", &s.buf, 0, &pattern(20, 2 * PAGE))?;
        send_u64s(&mut tx, &[2])?;
        // Wait for the parent to be done before tearing down.
        recv_u64s(&mut rx, 1)?;
        Ok(())
    })();
    match r {
        Ok(()) => 0,
        Err(Failure::Fail(m)) | Err(Failure::Skip(m)) => {
            errln!("two_processes child: {m}");
            1
        }
    }
}

/// Two processes, each with its own context, exchange QPN, address and rkey over a pipe and
/// move data both ways: RDMA WRITE_WITH_IMM into the child, RDMA READ from it.
fn test_verbs_two_processes() -> TestResult {
    requires_odp(&ibv_ctx()?, ODP_WRITE | ODP_READ | ODP_RECV, false)?;
    let (mut p_rx, c_tx) = pipe()?;
    let (c_rx, mut p_tx) = pipe()?;
    let child = Child::spawn(move || two_processes_child(c_rx, c_tx))?;
    let ctx = ibv_ctx()?;
    let s = Side::basic(&ctx, 4 * PAGE, MrKind::Odp)?;
    let v = recv_u64s(&mut p_rx, 3).map_err(|e| fail("from the child", e))?;
    let (peer, addr, rkey) = (v[0] as u32, v[1], v[2] as u32);
    send_u64s(&mut p_tx, &[u64::from(s.qp.qp_num())])?;
    s.qp.connect(peer, &ConnectAttr::default())?;
    recv_u64s(&mut p_rx, 1).map_err(|e| fail("child connect", e))?;
    s.buf.write(0, &pattern(20, 2 * PAGE));
    s.post_ok(
        SendWr::new(1, WrOpcode::RdmaWriteWithImm, &[s.sge(0, 2 * PAGE)])
            .remote(addr, rkey)
            .imm(0xc0ffee),
    )?;
    s.post_ok(
        SendWr::new(2, WrOpcode::RdmaRead, &[s.sge(2 * PAGE, 2 * PAGE)])
            .remote(addr + 2 * PAGE as u64, rkey),
    )?;
    check_bytes(
        "read from the child",
        &s.buf,
        2 * PAGE,
        &pattern(21, 2 * PAGE),
    )?;
    let checked = recv_u64s(&mut p_rx, 1);
    let _ = send_u64s(&mut p_tx, &[3]);
    let code = child.wait()?;
    checked.map_err(|e| fail("child's check", e))?;
    check_eq!(code, 0);
    Ok(())
}

/// Destroying a QP lets go of its ring memory rather than keeping it until the context is
/// closed: creating and destroying 64 QPs of the largest send and receive queues in a loop on
/// one context does not eat the guest's memory.
fn test_verbs_destroy_frees_rings() -> TestResult {
    let ctx = ibv_ctx()?;
    let max_wr = ctx.query_device()?.max_qp_wr as u32;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(4, None, 0)?;
    // Each QP's rings: a send and a receive queue of `max_wr` WQEs of 128 bytes
    // (docs/verbs.md).
    let rings = |qp: &ibv::Qp| {
        let c = qp.cap();
        u64::from(c.max_send_wr + c.max_recv_wr) * 128
    };
    let mut created = 0;
    let before = meminfo_kb("MemFree:")? * 1024;
    for _ in 0..64 {
        let qp = pd.create_qp(&ibv::QpInitAttr::new(&cq, &cq, max_wr, 1))?;
        created += rings(&qp);
        qp.destroy().map_err(|(_, e)| fail("ibv_destroy_qp", e))?;
    }
    let lost = before.saturating_sub(meminfo_kb("MemFree:")? * 1024);
    check!(
        lost < created / 2,
        "64 QPs created and destroyed ({} MiB of rings) took {} MiB for good",
        created >> 20,
        lost >> 20
    );
    Ok(())
}
