// SPDX-License-Identifier: GPL-2.0

//! Port 1 (docs/wire.md): its registers (device ABI 1.5), the answer to
//! `PFNIC_IOCTL_QUERY_PORT`, the IPv4 address knob, and the GID table QPs' address vectors are
//! resolved against.
//!
//! Without a wire the port is an InfiniBand-style port alone on its subnet (a LID, GID 0 made
//! of the node GUID), as in ABI 1.4. With one it is a RoCEv2 Ethernet port with rxe's GID
//! table: index 0 the link-local `fe80::` + EUI-64 of the MAC, index 1 the IPv4-mapped
//! `::ffff:a.b.c.d`. Only IPv4 goes on the wire, so a QP's destination GID must be
//! IPv4-mapped (or one of ours: loopback). With the port's netdev (device ABI 1.16) the RDMA
//! core keeps its own table, built from the netdev's addresses, and the first IPv4 address it
//! adds becomes the port's (`PORT_IPV4`).

use super::{args, MAX_MSG_SZ, PORT_LID};
use crate::{nic::Nic, regs, uapi};
use kernel::{
    cred::{self, Capability},
    io::{register::Array, Io},
    prelude::*,
    rdma::{gid_type, GidEntry},
};

/// `IBV_PORT_DOWN`, `IBV_PORT_ACTIVE`.
const PORT_DOWN: u32 = 1;
const PORT_ACTIVE: u32 = 4;
/// `IBV_MTU_1024`: the active MTU on 1500-byte Ethernet, as rxe's.
const MTU_1024: u32 = 3;
/// `IBV_MTU_4096`: the largest path MTU the device segments at.
pub(crate) const PORT_MAX_MTU: u32 = 5;

/// What the port registers say, read at once.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PortState {
    /// The device has the port registers (ABI 1.5).
    pub(crate) addresses: bool,
    /// A netdev is attached (`CAPS.WIRE` and `PORT_STATUS.WIRE`).
    pub(crate) wire: bool,
    /// And its link is up.
    pub(crate) link_up: bool,
    pub(crate) mac: [u8; 6],
    /// `PORT_IPV4`, 0: none.
    pub(crate) ipv4: u32,
    pub(crate) counters: [u32; regs::PORT_COUNTERS_NR],
}

impl PortState {
    /// GID table entries.
    pub(crate) fn gid_tbl_len(&self) -> u32 {
        if self.addresses {
            uapi::PFNIC_GID_TBL_LEN as u32
        } else {
            1
        }
    }
}

/// Entries of a RoCE port's GID table in the RDMA core, which builds it from the netdev's
/// addresses (the default GID and one for each IPv4 address).
pub(crate) const CORE_GID_TABLE: u32 = 16;

/// The IPv4 address a RoCE v2 GID entry of the core stands for.
fn roce_v2_ipv4(e: &GidEntry) -> Option<u32> {
    if e.gid_type != gid_type::ROCE_V2 {
        return None;
    }
    gid_ipv4(&e.gid).filter(|&addr| ipv4_is_unicast(addr))
}

/// Whether `addr` may be a unicast host's IPv4 address: not `0.0.0.0/8`, loopback
/// `127.0.0.0/8`, multicast `224.0.0.0/4`, nor `240.0.0.0/4` (reserved, and the broadcast
/// address).
pub(crate) fn ipv4_is_unicast(addr: u32) -> bool {
    let first = addr >> 24;
    first != 0 && first != 127 && first < 224
}

/// `::ffff:a.b.c.d`.
pub(crate) fn ipv4_mapped_gid(addr: u32) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[12..].copy_from_slice(&addr.to_be_bytes());
    gid
}

/// The IPv4 address an IPv4-mapped GID names.
pub(crate) fn gid_ipv4(gid: &[u8; 16]) -> Option<u32> {
    if gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        Some(u32::from_be_bytes([gid[12], gid[13], gid[14], gid[15]]))
    } else {
        None
    }
}

/// `fe80::` followed by `interface_id`.
fn link_local_gid(interface_id: [u8; 8]) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[0] = 0xfe;
    gid[1] = 0x80;
    gid[8..].copy_from_slice(&interface_id);
    gid
}

/// The modified EUI-64 of a MAC address (RFC 4291, appendix A): `ff:fe` in the middle and the
/// universal/local bit flipped.
fn eui64(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// Whether the calling task may administer the network (`CAP_NET_ADMIN` in the initial user
/// namespace), as the kernel requires to configure an interface's address.
fn net_admin_capable() -> bool {
    cred::capable(Capability::NET_ADMIN)
}

impl Nic {
    /// Whether the device has the port registers (device ABI 1.5 or later).
    pub(crate) fn has_port_registers(&self) -> bool {
        self.info.device_abi & 0xffff >= regs::ABI_MINOR_PORT
    }

    /// Whether QPs can be given their peer's MAC (`QP_SET_DMAC`).
    pub(crate) fn has_qp_dmac(&self) -> bool {
        self.info.device_abi & 0xffff >= regs::ABI_MINOR_DMAC
    }

    /// Whether an MR's PD and access can change in place (`MR_MODIFY`), and a device memory MR
    /// may be empty.
    pub(crate) fn has_mr_modify(&self) -> bool {
        self.info.device_abi & 0xffff >= regs::ABI_MINOR_MR_MODIFY
    }

    /// Whether the device has UD QPs (device ABI 1.19).
    pub(crate) fn has_ud(&self) -> bool {
        self.info.device_abi & 0xffff >= regs::ABI_MINOR_UD
    }

    /// Whether the device has DMA MRs and the special QPs (ABI 1.20), which the RDMA core's
    /// kernel clients need.
    pub(crate) fn has_dma_mrs(&self) -> bool {
        self.info.device_abi & 0xffff >= regs::ABI_MINOR_KERNEL_VERBS
    }

    /// Whether the device has fast registration (ABI 1.21): `FAST` MRs, `REG_MR`, `LOCAL_INV`
    /// and `SEND_WITH_INV`.
    pub(crate) fn has_fast_reg(&self) -> bool {
        self.info.device_abi & 0xffff >= regs::ABI_MINOR_FAST_REG
    }

    /// Reads the port registers (all zero on a device without them).
    pub(crate) fn port_state(&self) -> Result<PortState> {
        if !self.has_port_registers() {
            self.with_bar(|_| ())?;
            return Ok(PortState::default());
        }
        let wire_cap = self.info.caps & uapi::PFNIC_CAP_WIRE != 0;
        self.with_bar(|bar| {
            let lo = bar.read(regs::PORT_MAC_LO).value().get().to_le_bytes();
            let hi = bar.read(regs::PORT_MAC_HI).value().get().to_le_bytes();
            let status = bar.read(regs::PORT_STATUS);
            let mut counters = [0u32; regs::PORT_COUNTERS_NR];
            for (i, c) in counters.iter_mut().enumerate() {
                if let Some(loc) = regs::PORT_COUNTERS::try_at(i) {
                    *c = bar.read(loc).count().get();
                }
            }
            PortState {
                addresses: true,
                wire: wire_cap && status.wire(),
                link_up: wire_cap && status.wire() && status.link_up(),
                mac: [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1]],
                ipv4: bar.read(regs::PORT_IPV4).addr().get(),
                counters,
            }
        })
    }

    /// The GID table: GID 0 link-local (the EUI-64 of the MAC with a wire, the node GUID
    /// without), GID 1 the IPv4-mapped address (zero when none is set).
    pub(crate) fn gids(&self, port: &PortState) -> [[u8; 16]; uapi::PFNIC_GID_TBL_LEN] {
        let gid0 = if port.wire {
            link_local_gid(eui64(port.mac))
        } else {
            link_local_gid(self.node_guid().to_be_bytes())
        };
        let gid1 = if port.addresses && port.ipv4 != 0 {
            ipv4_mapped_gid(port.ipv4)
        } else {
            [0; 16]
        };
        [gid0, gid1]
    }

    /// The answer to `PFNIC_IOCTL_QUERY_PORT`.
    pub(crate) fn query_port(&self) -> Result<uapi::QueryPort> {
        self.verbs()?;
        let port = self.port_state()?;
        let mut flags = 0;
        if port.addresses {
            flags |= uapi::PFNIC_PORT_ADDRESSES;
        }
        if port.wire {
            flags |= uapi::PFNIC_PORT_WIRE;
        }
        if port.link_up {
            flags |= uapi::PFNIC_PORT_LINK_UP;
        }
        let (state, active_mtu, link_layer, lid) = if port.wire {
            let state = if port.link_up { PORT_ACTIVE } else { PORT_DOWN };
            (state, MTU_1024, uapi::PFNIC_LINK_LAYER_ETHERNET, 0)
        } else {
            (
                PORT_ACTIVE,
                PORT_MAX_MTU,
                uapi::PFNIC_LINK_LAYER_INFINIBAND,
                PORT_LID,
            )
        };
        Ok(uapi::QueryPort {
            state,
            max_mtu: PORT_MAX_MTU,
            active_mtu,
            link_layer,
            max_msg_sz: MAX_MSG_SZ,
            gid_tbl_len: port.gid_tbl_len(),
            lid,
            sm_lid: lid,
            active_width: 2,  // IBV_WIDTH_4X
            active_speed: 32, // IBV_SPEED_EDR
            reserved0: 0,
            gids: self.gids(&port),
            port_flags: flags,
            ipv4: port.ipv4,
            mac: port.mac,
            reserved1: 0,
            counters: port.counters,
            reserved: [0; 2],
        })
    }

    /// `PFNIC_IOCTL_SET_PORT_IPV4`: sets (or, with 0, clears) the port's IPv4 address.
    pub(crate) fn set_port_ipv4(&self, arg: &uapi::PortIpv4) -> Result {
        self.verbs()?;
        self.with_bar(|_| ())?;
        if !self.has_port_registers() {
            return Err(EOPNOTSUPP);
        }
        if !net_admin_capable() {
            return Err(EPERM);
        }
        if arg.reserved != 0 || (arg.ipv4 != 0 && !ipv4_is_unicast(arg.ipv4)) {
            return Err(EINVAL);
        }
        self.write_port_ipv4(arg.ipv4)
    }

    /// Writes `PORT_IPV4`; the RDMA core hears of a real change only (GID 1 appears, goes or
    /// moves), and passes it on to every user context.
    fn write_port_ipv4(&self, addr: u32) -> Result {
        let verbs = self.verbs()?;
        let changed = self.with_bar(|bar| {
            let old = bar.read(regs::PORT_IPV4).addr().get();
            bar.write_reg(regs::PORT_IPV4::zeroed().with_addr(addr));
            old != addr
        })?;
        if changed {
            verbs.eq.port_event(uapi::PFNIC_EVENT_GID_CHANGE);
        }
        Ok(())
    }

    /// The RDMA core added entry `e` to the port's GID table, from an address of the port's
    /// netdev. The device sends RoCE from one IPv4 address: the first the netdev has (in the
    /// order the core adds them) becomes `PORT_IPV4`.
    pub(crate) fn core_gid_added(&self, e: &GidEntry) -> Result {
        let Some(addr) = roce_v2_ipv4(e) else {
            return Ok(());
        };
        let eth = self.eth.as_deref().ok_or(ENODEV)?;
        let first = {
            let mut addrs = eth.addresses.lock();
            addrs.retain(|&mut (index, _)| index != e.index);
            addrs.push((e.index, addr), GFP_KERNEL)?;
            addrs[0].1
        };
        self.write_port_ipv4(first)
    }

    /// The RDMA core removed entry `e` (its address left the netdev): the port takes the next
    /// address, or none.
    pub(crate) fn core_gid_deleted(&self, e: &GidEntry) -> Result {
        if roce_v2_ipv4(e).is_none() {
            return Ok(());
        }
        let eth = self.eth.as_deref().ok_or(ENODEV)?;
        let first = {
            let mut addrs = eth.addresses.lock();
            addrs.retain(|&mut (index, _)| index != e.index);
            addrs.first().map_or(0, |&(_, addr)| addr)
        };
        self.write_port_ipv4(first)
    }

    /// Resolves a QP's address vector to the destination IPv4 address `QP_MODIFY` takes (a7):
    /// 0 for this device (loopback: no global route, or a destination GID that is one of the
    /// port's own), the address an IPv4-mapped GID names otherwise. `EINVAL` for a source GID
    /// index outside the table, another kind of GID (real IPv6), an address no host can have,
    /// or a remote destination the port cannot reach (no wire, or no address of its own).
    pub(crate) fn resolve_dest(&self, a: &args::QpAttr) -> Result<u32> {
        let port = self.port_state()?;
        if a.is_global == 0 {
            return Ok(0);
        }
        // A QP of the RDMA core names an entry of the core's table, built from the netdev.
        let table = if self.eth.is_some() {
            CORE_GID_TABLE
        } else {
            port.gid_tbl_len()
        };
        if a.sgid_index >= table {
            return Err(EINVAL);
        }
        let ours = self.gids(&port);
        if a.dgid == ours[0] || (port.ipv4 != 0 && a.dgid == ours[1]) {
            return Ok(0);
        }
        let addr = gid_ipv4(&a.dgid).ok_or(EINVAL)?;
        if !ipv4_is_unicast(addr) || !port.wire || port.ipv4 == 0 {
            return Err(EINVAL);
        }
        Ok(addr)
    }
}
