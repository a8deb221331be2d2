//! Verbs device, port and PD: query_device(_ex) with its ODP caps, port and GID, and PD
//! lifetime, through Debian's libibverbs and pfnic's provider.

use pfnic_cli::outln;
use std::sync::Arc;

use crate::common::{expect_errno, nic};
use crate::ibv_common::{ibv_ctx, mem_mode, pinned_mode};
use crate::ktap::{Test, TestResult};
use crate::verbs_common::*;
use ibv::{Buffer, QpInitAttr, ACCESS_LOCAL_WRITE};
use pfnic_sys::uapi;

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_verbs_query_device",
        run: test_verbs_query_device,
    },
    &Test {
        name: "test_verbs_query_port_gid",
        run: test_verbs_query_port_gid,
    },
    &Test {
        name: "test_verbs_pd_alloc_dealloc",
        run: test_verbs_pd_alloc_dealloc,
    },
    &Test {
        name: "test_verbs_dealloc_pd_in_use",
        run: test_verbs_dealloc_pd_in_use,
    },
];

/// `ibv_query_device_ex`: the limits of docs/verbs.md and the ODP capabilities of an mlx5
/// with implicit ODP, each feature reported exactly when the device has it.
fn test_verbs_query_device() -> TestResult {
    let ctx = ibv_ctx()?;
    // The device's own identity (`/dev/pfnicN`): which features it has.
    let caps = nic()?.dev.query()?.caps;
    check!(caps & uapi::PFNIC_CAP_VERBS != 0);
    let d = ctx.query_device_ex()?;
    let v = &d.orig_attr;
    check_eq!(v.max_qp, 256);
    check_eq!(v.max_cq, 256);
    check_eq!(v.max_mr, 4096);
    check_eq!(v.max_qp_wr, 4096);
    check_eq!(v.max_cqe, 4096);
    check_eq!(v.max_sge, 4);
    check_eq!(v.atomic_cap, ibv::sys::ibv_atomic_cap_IBV_ATOMIC_HCA);
    check!(v.max_pd > 0, "max_pd is 0");
    check!(v.max_qp_rd_atom > 0, "max_qp_rd_atom is 0");
    check!(v.node_guid != 0, "node GUID is 0");
    check!(
        v.page_size_cap & 4096 != 0,
        "page_size_cap {:#x} lacks 4 KiB",
        v.page_size_cap
    );
    check!(v.max_mr_size >= 1 << 30, "max_mr_size {:#x}", v.max_mr_size);
    let (general, rc): (u64, u32) = (
        d.odp_caps.general_caps,
        d.odp_caps.per_transport_caps.rc_odp_caps,
    );
    if pinned_mode(&ctx)? {
        // No on-demand paging in the pinned memory mode.
        check_eq!((general, rc), (0, 0));
    } else {
        // Implicit ODP: the IOMMU's page tables (`sva`), or a sparse device table (`odp`,
        // device ABI 1.10 on).
        let implicit = if mem_mode()? == pfnic_verbs::MemMode::Sva
            || crate::mem_modes::implicit_tables(&nic()?.dev.query()?)
        {
            uapi::PFNIC_ODP_SUPPORT_IMPLICIT
        } else {
            0
        };
        check_eq!(
            general & (uapi::PFNIC_ODP_SUPPORT | uapi::PFNIC_ODP_SUPPORT_IMPLICIT),
            uapi::PFNIC_ODP_SUPPORT | implicit
        );
        check_eq!(rc, uapi::PFNIC_ODP_RC_CAPS);
    }
    // SRQs exactly when the device has them, as large as a receive queue.
    if caps & uapi::PFNIC_CAP_SRQ != 0 {
        check!(v.max_srq > 0, "max_srq is 0 on a device with SRQs");
        check_eq!(v.max_srq_wr, v.max_qp_wr);
        check_eq!(v.max_srq_sge, v.max_sge);
    } else {
        check_eq!((v.max_srq, v.max_srq_wr, v.max_srq_sge), (0, 0, 0));
    }
    // Device memory exactly when the device has it: a quarter of it per context.
    if caps & uapi::PFNIC_CAP_DM != 0 {
        check!(
            d.max_dm_size >= 4096 && d.max_dm_size.is_multiple_of(4096),
            "max_dm_size {}",
            d.max_dm_size
        );
    } else {
        check_eq!(d.max_dm_size, 0);
    }
    // Timestamps exactly when the device has them: a 64-bit nanosecond clock (in kHz).
    if caps & uapi::PFNIC_CAP_TIMESTAMPS != 0 {
        check_eq!(
            (d.completion_timestamp_mask, d.hca_core_clock),
            (u64::MAX, 1_000_000)
        );
    } else {
        check_eq!((d.completion_timestamp_mask, d.hca_core_clock), (0, 0));
    }
    outln!(
        "# verbs: guid {:016x}, {} QPs x {} WRs, {} CQs x {} CQEs, {} MRs, {} PDs, {} SGEs, {} SRQs, ODP {general:#x}/rc {rc:#x}",
        u64::from_be(v.node_guid), v.max_qp, v.max_qp_wr, v.max_cq, v.max_cqe, v.max_mr,
        v.max_pd, v.max_sge, v.max_srq
    );
    Ok(())
}

/// `ibv_query_port(1)` and `ibv_query_gid(1, 0)`: without a wire, an active InfiniBand-style
/// port whose GID 0 is the link-local prefix and the node GUID; with one, a RoCE port
/// (Ethernet link layer, no LID, MTU 1024) whose GID 0 is the EUI-64 of its MAC. Without a
/// wire the table has 2 GIDs on a device with the port registers (ABI 1.5), else 1; other
/// ports and GID indexes are refused.
fn test_verbs_query_port_gid() -> TestResult {
    let ctx = ibv_ctx()?;
    let own = port_attr()?;
    let p = ctx.query_port(1)?;
    check_eq!(p.max_mtu, ibv::sys::ibv_mtu_IBV_MTU_4096);
    let gid = ctx.query_gid(1, 0)?;
    check_eq!(gid[..8], [0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
    check!(p.max_msg_sz >= 1 << 20, "max_msg_sz {}", p.max_msg_sz);
    expect_errno("query_port(2)", ctx.query_port(2), libc::EINVAL)?;
    if u32::from(p.link_layer) == pfnic_verbs::LINK_LAYER_ETHERNET {
        let active = ibv::sys::ibv_port_state_IBV_PORT_ACTIVE;
        check_eq!(p.state == active, own.link_up());
        check_eq!(p.active_mtu, ibv::sys::ibv_mtu_IBV_MTU_1024);
        check_eq!(p.lid, 0);
        let m = own.mac();
        check_eq!(
            gid[8..],
            [m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]
        );
        // The RDMA core keeps a RoCE port's GID table from its netdev.
        return Ok(());
    }
    check_eq!(u32::from(p.link_layer), pfnic_verbs::LINK_LAYER_INFINIBAND);
    check_eq!(p.state, ibv::sys::ibv_port_state_IBV_PORT_ACTIVE);
    check_eq!(p.active_mtu, ibv::sys::ibv_mtu_IBV_MTU_4096);
    check!(p.lid != 0, "LID 0");
    check_eq!(p.sm_lid, p.lid);
    let guid = ctx.query_device()?.node_guid;
    // The node GUID in network order, as the GID holds it.
    check_eq!(gid[8..], guid.to_ne_bytes());
    let gids = if own.has_addresses() { 2 } else { 1 };
    check_eq!(p.gid_tbl_len, gids);
    check!(
        ctx.query_gid(1, gids as u32).is_err(),
        "query_gid beyond the table succeeded"
    );
    Ok(())
}

/// PDs get distinct handles, and a PD in use stays: `ibv_dealloc_pd` is `EBUSY` while an MR
/// or a QP uses it (the core counts the users of a PD, and the driver's PD must outlive
/// them), and works once they are gone.
fn test_verbs_pd_alloc_dealloc() -> TestResult {
    let ctx = ibv_ctx()?;
    let pds: Vec<_> = (0..8).map(|_| ctx.alloc_pd()).collect::<Result<_, _>>()?;
    let mut handles: Vec<u32> = pds.iter().map(|p| p.handle()).collect();
    handles.sort();
    handles.dedup();
    check_eq!(handles.len(), 8);
    for pd in pds {
        pd.dealloc().map_err(|(_, e)| fail("ibv_dealloc_pd", e))?;
    }
    Ok(())
}

/// `ibv_dealloc_pd` is `EBUSY` while an MR or a QP uses the PD, and works once they are gone.
fn test_verbs_dealloc_pd_in_use() -> TestResult {
    let ctx = ibv_ctx()?;
    let pd = ctx.alloc_pd()?;
    let buf = Arc::new(Buffer::new(PAGE)?);
    buf.fill(0);
    let mr = pd.reg_mr(&buf, ACCESS_LOCAL_WRITE)?;
    let pd = match pd.dealloc() {
        Ok(()) => fail!("ibv_dealloc_pd with an MR in it succeeded"),
        Err((pd, e)) => {
            check_eq!(e.raw_os_error(), Some(libc::EBUSY));
            pd
        }
    };
    mr.dereg().map_err(|(_, e)| fail("ibv_dereg_mr", e))?;
    let cq = ctx.create_cq(4, None, 0)?;
    let qp = pd.create_qp(&QpInitAttr::new(&cq, &cq, 4, 1))?;
    // The QP holds the PD in this crate; ask libibverbs directly.
    // SAFETY: the PD is alive (the QP and `pd` hold it); a failed dealloc leaves it so.
    let rc = unsafe { ibv::sys::ibv_dealloc_pd(pd.as_ptr()) };
    check_eq!(rc, libc::EBUSY);
    qp.destroy().map_err(|(_, e)| fail("ibv_destroy_qp", e))?;
    pd.dealloc().map_err(|(_, e)| fail("ibv_dealloc_pd", e))?;
    Ok(())
}
