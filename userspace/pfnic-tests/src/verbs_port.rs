//! Port 1 and addressing (docs/wire.md, device ABI 1.5): the port without a wire, its IPv4
//! address knob and GID table, and QP address vectors (global routes) resolved against it.

use pfnic_cli::outln;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::common::{expect_errno, nic};
use crate::ibv_common::ibv_ctx;
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::*;
use pfnic_sys::uapi;
use pfnic_verbs::{
    gid_from_ipv4, set_global_route, ConnectAttr, GlobalRoute, PortAttr, QpAttr, QpState, SendWr,
    WcOpcode, WrOpcode, LINK_LAYER_ETHERNET, LINK_LAYER_INFINIBAND,
};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_verbs_port_no_wire",
        run: test_verbs_port_no_wire,
    },
    &Test {
        name: "test_verbs_port_set_ipv4",
        run: test_verbs_port_set_ipv4,
    },
    &Test {
        name: "test_verbs_port_set_ipv4_bad",
        run: test_verbs_port_set_ipv4_bad,
    },
    &Test {
        name: "test_verbs_port_set_ipv4_needs_net_admin",
        run: test_verbs_port_set_ipv4_needs_net_admin,
    },
    &Test {
        name: "test_verbs_qp_av_own_gid_loopback",
        run: test_verbs_qp_av_own_gid_loopback,
    },
    &Test {
        name: "test_verbs_qp_av_bad",
        run: test_verbs_qp_av_bad,
    },
];

/// An address for the tests, from TEST-NET-2 (RFC 5737): no real network uses it.
pub const TEST_ADDR: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

/// The port's attributes from the device file, skipping the test on a device without the
/// port registers (ABI 1.4).
pub fn port_with_addresses() -> Result<PortAttr, Failure> {
    let p = port_attr()?;
    if !p.has_addresses() {
        skip!("the device has no port registers (device ABI 1.4)");
    }
    Ok(p)
}

/// `ibv_query_port(1)` on a device without a wire (every guest of this suite): the
/// InfiniBand-style loopback port of ABI 1.4, unchanged: active, a LID, MTU 4096, GID 0 the
/// link-local prefix and the node GUID. A device with the port registers has a second GID
/// (the IPv4-mapped address) and reports a MAC; indexes beyond the table are refused.
fn test_verbs_port_no_wire() -> TestResult {
    let ctx = ibv_ctx()?;
    let p = port_attr()?;
    if p.has_wire() {
        skip!("the device has a wire");
    }
    let q = p.0;
    check_eq!(q.link_layer, LINK_LAYER_INFINIBAND);
    check_eq!(q.state, 4);
    check_eq!(q.active_mtu, 5);
    check_eq!(q.max_mtu, 5);
    check!(q.lid != 0, "LID 0");
    check_eq!(q.sm_lid, q.lid);
    check_eq!(q.port_flags & uapi::PFNIC_PORT_LINK_UP, 0);
    let guid = ctx.query_device()?.node_guid;
    let gid0 = ctx.query_gid(1, 0)?;
    check_eq!(gid0[..8], [0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
    check_eq!(gid0[8..], guid.to_ne_bytes());
    if p.has_addresses() {
        check_eq!(q.gid_tbl_len, 2);
        let gid1 = ctx.query_gid(1, 1)?;
        match p.ipv4() {
            Some(a) => check_eq!(gid1, gid_from_ipv4(a)),
            None => check_eq!(gid1, [0u8; 16]),
        }
    } else {
        check_eq!(q.gid_tbl_len, 1);
        check_eq!(q.mac, [0u8; 6]);
        check_eq!(q.counters, [0u32; uapi::PFNIC_PORT_COUNTERS]);
    }
    expect_errno(
        "query_gid beyond the table",
        ctx.query_gid(1, q.gid_tbl_len),
        libc::EINVAL,
    )?;
    check_eq!(q.reserved, [0u64; 2]);
    outln!(
        "# port: link layer {}, {} GIDs, MAC {:02x?}, IPv4 {:?}",
        q.link_layer,
        q.gid_tbl_len,
        q.mac,
        p.ipv4()
    );
    Ok(())
}

/// Setting the IPv4 address makes it GID 1 (`::ffff:a.b.c.d`), in `QUERY_PORT` and
/// `ibv_query_gid`; clearing it zeroes GID 1. The register exists on every ABI 1.5 device,
/// wire or not. On a RoCE port GID 0 is the EUI-64 of the MAC, whatever the address.
fn test_verbs_port_set_ipv4() -> TestResult {
    let ctx = ibv_ctx()?;
    let dev = nic()?.dev;
    port_with_addresses()?;
    let _restore = PortAddress::keep()?;
    let gid0 = ctx.query_gid(1, 0)?;
    for addr in [TEST_ADDR, Ipv4Addr::new(10, 0, 0, 1)] {
        dev.set_port_ipv4(Some(addr))?;
        // The RDMA core's copy of the table follows in a work item, as after any port event.
        core_gid1_is(Some(addr))?;
        let p = port_attr()?;
        check_eq!(p.ipv4(), Some(addr));
        check_eq!(p.0.ipv4, u32::from(addr));
        let want: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
            .into_iter()
            .chain(addr.octets())
            .collect::<Vec<u8>>()
            .try_into()
            .map_err(|_| fail("GID", "length"))?;
        check_eq!(ctx.query_gid(1, 1)?, want);
        check_eq!(p.0.gids[1], want);
        // GID 0 does not depend on the address.
        check_eq!(ctx.query_gid(1, 0)?, gid0);
        if p.link_layer() == LINK_LAYER_ETHERNET {
            let m = p.mac();
            let eui = [m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]];
            check_eq!(gid0[8..], eui);
        }
    }
    dev.set_port_ipv4(None)?;
    core_gid1_is(None)?;
    let p = port_attr()?;
    check_eq!(p.ipv4(), None);
    check_eq!(ctx.query_gid(1, 1)?, [0u8; 16]);
    Ok(())
}

/// Addresses no host can have are refused with `EINVAL` and change nothing: 0.x, loopback,
/// multicast, reserved and broadcast; so is a nonzero reserved field.
fn test_verbs_port_set_ipv4_bad() -> TestResult {
    let dev = nic()?.dev;
    port_with_addresses()?;
    let _restore = PortAddress::keep()?;
    dev.set_port_ipv4(Some(TEST_ADDR))?;
    for bad in [
        Ipv4Addr::new(0, 1, 2, 3),
        Ipv4Addr::new(127, 0, 0, 1),
        Ipv4Addr::new(127, 255, 0, 9),
        Ipv4Addr::new(224, 0, 0, 1),
        Ipv4Addr::new(239, 255, 255, 250),
        Ipv4Addr::new(240, 0, 0, 1),
        Ipv4Addr::BROADCAST,
    ] {
        expect_errno(
            &format!("set_port_ipv4({bad})"),
            dev.set_port_ipv4(Some(bad)),
            libc::EINVAL,
        )?;
        check_eq!(port_attr()?.ipv4(), Some(TEST_ADDR));
    }
    let mut arg = uapi::PortIpv4 {
        ipv4: u32::from(Ipv4Addr::new(10, 1, 2, 3)),
        reserved: 1,
    };
    // SAFETY: `arg` is a valid `PortIpv4`, the size the ioctl number encodes.
    let r = unsafe { dev.ioctl(uapi::PFNIC_IOCTL_SET_PORT_IPV4, (&raw mut arg).cast()) };
    expect_errno("reserved field set", r, libc::EINVAL)?;
    check_eq!(port_attr()?.ipv4(), Some(TEST_ADDR));
    Ok(())
}

/// `capget`/`capset` header (`struct __user_cap_header_struct`).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`.
const CAP_VERSION_3: u32 = 0x2008_0522;
/// `CAP_NET_ADMIN`.
const CAP_NET_ADMIN: u32 = 12;

/// Drops `CAP_NET_ADMIN` from the calling thread's effective set (capabilities are per
/// thread; the rest of the process keeps it).
fn drop_net_admin_in_this_thread() -> std::io::Result<()> {
    let mut hdr = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget with a valid header and room for the two data words of version 3.
    if unsafe { libc::syscall(libc::SYS_capget, &raw mut hdr, data.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    data[0].effective &= !(1 << CAP_NET_ADMIN);
    // SAFETY: capset of the calling thread (pid 0) with the sets capget returned, less one
    // effective capability.
    if unsafe { libc::syscall(libc::SYS_capset, &raw mut hdr, data.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Setting the address needs `CAP_NET_ADMIN`: a thread without it gets `EPERM`, and the
/// address stays; the same call succeeds with it.
fn test_verbs_port_set_ipv4_needs_net_admin() -> TestResult {
    let dev = nic()?.dev;
    port_with_addresses()?;
    let _restore = PortAddress::keep()?;
    match dev.set_port_ipv4(Some(TEST_ADDR)) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            skip!("the suite runs without CAP_NET_ADMIN")
        }
        r => r?,
    }
    let other = Ipv4Addr::new(10, 9, 8, 7);
    let c = dev.try_clone()?;
    let r = std::thread::spawn(move || -> std::io::Result<std::io::Result<()>> {
        drop_net_admin_in_this_thread()?;
        Ok(c.set_port_ipv4(Some(other)))
    })
    .join()
    .map_err(|_| fail("thread", "panicked"))?
    .map_err(|e| fail("capset", e))?;
    expect_errno("set_port_ipv4 without CAP_NET_ADMIN", r, libc::EPERM)?;
    check_eq!(port_attr()?.ipv4(), Some(TEST_ADDR));
    dev.set_port_ipv4(Some(other))?;
    check_eq!(port_attr()?.ipv4(), Some(other));
    Ok(())
}

/// A global route whose destination GID is one of the port's own is loopback: QPs connected
/// through libibverbs with GID 1 (the IPv4-mapped address, sgid_index 1) and GID 0 carry
/// SENDs and WRITEs between two processes' contexts as without one, and `ibv_query_qp`
/// returns the route as set.
fn test_verbs_qp_av_own_gid_loopback() -> TestResult {
    use crate::ibv_common as core;
    port_with_addresses()?;
    let _address = PortAddress::set(Some(port_attr()?.ipv4().unwrap_or(TEST_ADDR)))?;
    let ib = core::ibv_ctx()?;
    for (index, what) in [(1u8, "GID 1"), (0, "GID 0")] {
        let grh = GlobalRoute {
            dgid: ib.query_gid(1, index.into())?,
            sgid_index: index,
            hop_limit: 64,
            traffic_class: 0x10,
            flow_label: 0,
        };
        let p = core::Pair::new(&core::PairOpts {
            connect: ConnectAttr {
                grh: Some(grh),
                path_mtu: 3,
                sq_psn: 0x12_3456,
                rq_psn: 0x12_3456,
                ..Default::default()
            },
            ..Default::default()
        })?;
        let q = p.a.qp.query()?;
        check_eq!(q.attr.is_global, 1);
        check_eq!(q.attr.dgid, grh.dgid);
        check_eq!(q.attr.sgid_index, u32::from(index));
        check_eq!(q.attr.hop_limit, 64);
        check_eq!(q.attr.traffic_class, 0x10);
        check_eq!(q.attr.path_mtu, 3);
        check_eq!(q.attr.sq_psn, 0x12_3456);
        check_eq!(p.a.state()?, QpState::Rts);
        p.write_ok(0x31 + index, 3 * PAGE, what)?;
        let data = pattern(0x41 + index, 2 * PAGE + 5);
        p.a.buf.write(0, &data);
        p.b.post_recv(7, 0, 2 * PAGE + 5)?;
        let wc = p.a.send_ok(
            &p.b,
            SendWr::new(8, WrOpcode::Send, &[p.a.sge(0, 2 * PAGE + 5)]),
        )?;
        check_eq!(wc.byte_len as usize, 2 * PAGE + 5);
        check_eq!(wc.opcode, WcOpcode::RECV);
        check_bytes(what, &p.b.buf, 0, &data)?;
        check_eq!(core::qp_counter(&p.a.ctx, &p.a.qp, "refused")?, 0);
    }
    Ok(())
}

/// A QP in INIT and the RTR attributes of a loopback connection to `dest`, with a global
/// route to the port's GID 0.
fn rtr_attr(ctx: &ibv::Context, dest: u32) -> Result<QpAttr, Failure> {
    let mut a = QpAttr {
        qp_state: QpState::Rtr as u32,
        path_mtu: 3,
        dest_qp_num: dest,
        min_rnr_timer: 1,
        max_dest_rd_atomic: 1,
        ..Default::default()
    };
    set_global_route(
        &mut a,
        &GlobalRoute {
            dgid: ctx.query_gid(1, 0)?,
            ..Default::default()
        },
    );
    Ok(a)
}

/// Address vectors and connection attributes the port cannot honour are `EINVAL` from
/// `ibv_modify_qp`, and leave the QP where it was: a real IPv6 destination, a source GID
/// index beyond the table, an IPv4-mapped address no host has, a remote address on a port
/// without a wire, a path MTU outside 256..4096, more than 16 outstanding READs/atomics
/// either way. Each bad attribute is changed alone from a set that then succeeds. (A hop
/// limit or traffic class past 255 does not fit libibverbs' structures, and a flow label is
/// taken as its low 20 bits, as other devices take UCX's all ones.)
fn test_verbs_qp_av_bad() -> TestResult {
    use crate::ibv_common as core;
    let port = port_attr()?;
    let ctx = core::ibv_ctx()?;
    let a = core::Side::basic(&ctx, PAGE, MrKind::Plain)?;
    let b = core::Side::basic(&ctx, PAGE, MrKind::Plain)?;
    a.modify_to_init(ACCESS_ALL)?;
    let good = rtr_attr(&ctx, b.qp.qp_num())?;
    let ipv6: Ipv6Addr = "2001:db8::1".parse().map_err(|e| fail("parse", e))?;
    let mut cases: Vec<(String, QpAttr)> = Vec::new();
    let mut add = |what: &str, f: &dyn Fn(&mut QpAttr)| {
        let mut x = good;
        f(&mut x);
        cases.push((what.to_string(), x));
    };
    add("a real IPv6 destination", &|x| x.dgid = ipv6.octets());
    add("sgid_index beyond the table", &|x| {
        x.sgid_index = port.0.gid_tbl_len
    });
    add("IPv4-mapped loopback 127.0.0.1", &|x| {
        x.dgid = gid_from_ipv4(Ipv4Addr::LOCALHOST)
    });
    add("IPv4-mapped multicast", &|x| {
        x.dgid = gid_from_ipv4(Ipv4Addr::new(224, 0, 0, 5))
    });
    add("IPv4-mapped 0.0.0.0", &|x| {
        x.dgid = gid_from_ipv4(Ipv4Addr::UNSPECIFIED)
    });
    if !port.has_wire() {
        add("a remote address without a wire", &|x| {
            x.dgid = gid_from_ipv4(Ipv4Addr::new(10, 200, 0, 1))
        });
    }
    add("path_mtu 0", &|x| x.path_mtu = 0);
    add("path_mtu 6", &|x| x.path_mtu = 6);
    add("max_dest_rd_atomic 17", &|x| x.max_dest_rd_atomic = 17);
    for (what, attr) in &cases {
        expect_errno(
            &format!("INIT→RTR with {what}"),
            a.qp.modify(attr, RTR_MASK),
            libc::EINVAL,
        )?;
        check_eq!(a.state()?, QpState::Init);
    }
    a.qp.modify(&good, RTR_MASK)?;
    check_eq!(a.state()?, QpState::Rtr);
    let rts = QpAttr {
        qp_state: QpState::Rts as u32,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 17,
        ..Default::default()
    };
    expect_errno(
        "RTR→RTS with max_rd_atomic 17",
        a.qp.modify(&rts, RTS_MASK),
        libc::EINVAL,
    )?;
    check_eq!(a.state()?, QpState::Rtr);
    a.qp.modify(
        &QpAttr {
            max_rd_atomic: 16,
            ..rts
        },
        RTS_MASK,
    )?;
    check_eq!(a.state()?, QpState::Rts);
    // Without `is_global` the route's fields are not looked at: loopback by LID, as in 1.4.
    let c = core::Side::basic(&ctx, PAGE, MrKind::Plain)?;
    c.modify_to_init(ACCESS_ALL)?;
    let mut no_grh = good;
    no_grh.is_global = 0;
    no_grh.dgid = ipv6.octets();
    c.qp.modify(&no_grh, RTR_MASK)?;
    check_eq!(c.state()?, QpState::Rtr);
    check_eq!(c.qp.query()?.attr.is_global, 0);
    Ok(())
}
