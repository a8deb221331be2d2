// SPDX-License-Identifier: GPL-2.0

//! The NIC in the RDMA core: `pfnicN`, as the `rdma` tool, `/sys/class/infiniband/` and the
//! core's clients see it.
//!
//! The answers are the ones `/dev/pfnicN`'s queries give ([`Nic::query_verbs`],
//! [`Nic::query_port`]), so both views of the device agree. A port with a wire is a RoCE v2
//! port; without one it is an InfiniBand-style port alone on its subnet (a LID, GID 0 made of
//! the node GUID). A RoCE port with the port's netdev
//! ([`crate::eth`]) is the netdev's, as on every RoCE device: the core builds its GID table
//! from the netdev's addresses (the first IPv4 one becomes the device's), its state is the
//! netdev's (up, with its carrier), and the core sends its events.

use crate::{
    auxdev,
    ib_uverbs::{self, UContext},
    nic::Nic,
    uapi,
    verbs::{MAX_QP_RD_ATOM, PORT_LID},
};
use kernel::{
    auxiliary,
    device::{Bound, Core, Device},
    mm::virt::VmaNew,
    prelude::*,
    rdma::{
        self,
        attr::{
            device_caps, AtomicCap, DeviceAttr, Mtu, PhysState, PortAttr, PortImmutable,
            PortProtocol, PortState,
        },
        dm::{DmAllocAttr, DmMrAttr},
        qp::{AhAttr, QpAttr, QpInitAttr, QpQuery, SrqAttr},
        udata::UData,
        CqInitAttr, CqNotifier, GidEntry, MrKeys, ObjectEvents, UserMr,
    },
    str::CString,
    sync::Arc,
};
use zerocopy::{FromZeros, IntoBytes};

/// pfnic's only port.
const PORT: u32 = 1;
/// The `IBV_MTU_*` values the verbs engine takes are the core's `IB_MTU_*`.
const MTUS: [Mtu; 5] = [
    Mtu::Mtu256,
    Mtu::Mtu512,
    Mtu::Mtu1024,
    Mtu::Mtu2048,
    Mtu::Mtu4096,
];
/// The device capabilities pfnic has: a port that reports its changes, a system image GUID
/// (the node GUID), and RC QPs that answer a missing receive with an RNR NAK.
const DEVICE_CAP_FLAGS: u64 =
    device_caps::PORT_ACTIVE_EVENT | device_caps::SYS_IMAGE_GUID | device_caps::RC_RNR_NAK_GEN;

/// Every counter of port 1, in order: the port's registers', then the translation ones.
const COUNTERS: [&str; uapi::PFNIC_PORT_COUNTERS + uapi::PFNIC_TRANSLATION_COUNTER_NAMES.len()] = {
    let mut all = [""; uapi::PFNIC_PORT_COUNTERS + uapi::PFNIC_TRANSLATION_COUNTER_NAMES.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = if i < uapi::PFNIC_PORT_COUNTERS {
            uapi::PFNIC_PORT_COUNTER_NAMES[i]
        } else {
            uapi::PFNIC_TRANSLATION_COUNTER_NAMES[i - uapi::PFNIC_PORT_COUNTERS]
        };
        i += 1;
    }
    all
};

// The core's `ibv_advise_mr` advice and flag reach the verbs engine unchanged.
const _: () = {
    assert!(rdma::advise::PREFETCH == uapi::PFNIC_ADVISE_PREFETCH);
    assert!(rdma::advise::PREFETCH_WRITE == uapi::PFNIC_ADVISE_PREFETCH_WRITE);
    assert!(rdma::advise::PREFETCH_NO_FAULT == uapi::PFNIC_ADVISE_PREFETCH_NO_FAULT);
    assert!(rdma::advise::FLAG_FLUSH == uapi::PFNIC_ADVISE_FLAG_FLUSH);
};

/// The RDMA core's operations on a pfnic.
pub(crate) struct PfnicIbDevice;

/// The registration of a pfnic with the RDMA core.
pub(crate) type Registration<'a> = rdma::Registration<'a, PfnicIbDevice>;

/// Registers `nic` as `pfnicN` (its index) with one port.
///
/// # Safety
///
/// `netdev`, the port's, stays registered until the returned registration is dropped.
unsafe fn register<'a>(
    parent: &'a Device<Bound>,
    nic: &Arc<Nic>,
    netdev: Option<&kernel::net::dev::Device>,
) -> Result<Registration<'a>> {
    let name = CString::try_from_fmt(fmt!("pfnic{}", nic.info.index))?;
    let options = rdma::DeviceOptions {
        name: &name,
        ports: 1,
        node_guid: nic.node_guid(),
        node_desc: c"pfnic",
        num_comp_vectors: nic.info.num_vectors.saturating_sub(1).max(1),
        port_counters: &COUNTERS,
    };
    let module = kernel::module::this_module::<crate::LocalModule>();
    let data = Ok::<_, Error>(nic.clone());
    match netdev {
        // SAFETY: Guaranteed by the caller.
        Some(netdev) => unsafe {
            rdma::Registration::new_with_netdev(parent, module, &options, data, netdev)
        },
        None => rdma::Registration::new(parent, module, &options, data),
    }
}

/// The on-demand paging a user context gets in the memory mode it starts in: all of it with
/// SVA (the device faults in the process's address space), without implicit MRs where only
/// the device's own translation tables fault and cannot cover the whole address space, none
/// where only pinned tables exist. The core checks these at every `IB_ACCESS_ON_DEMAND`
/// registration; the context's mode still decides (`PFNIC_MEM_MODE` may choose another).
fn odp_caps(nic: &Nic, v: &uapi::QueryVerbs) -> (u64, u32) {
    let sva = uapi::PFNIC_CAP_ATS | uapi::PFNIC_CAP_PASID | uapi::PFNIC_CAP_PRI;
    let caps = nic.info.caps;
    if caps & sva == sva {
        (v.odp_general_caps, v.odp_rc_caps)
    } else if caps & uapi::PFNIC_CAP_FAULTS != 0 {
        let general = if nic.info.implicit_tables() {
            v.odp_general_caps
        } else {
            v.odp_general_caps & !uapi::PFNIC_ODP_SUPPORT_IMPLICIT
        };
        (general, v.odp_rc_caps)
    } else {
        (0, 0)
    }
}

/// The port's GID table: the core's, built from the netdev, on a RoCE port that has one; the
/// device's own otherwise.
fn gid_table_len(nic: &Nic, p: &uapi::QueryPort) -> u32 {
    if p.link_layer == uapi::PFNIC_LINK_LAYER_ETHERNET && nic.eth.is_some() {
        crate::verbs::port::CORE_GID_TABLE
    } else {
        p.gid_tbl_len
    }
}

fn mtu(ibv: u32) -> Mtu {
    MTUS[(ibv.clamp(1, MTUS.len() as u32) - 1) as usize]
}

fn check_port(port: u32) -> Result {
    if port == PORT {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

#[vtable]
impl rdma::Operations for PfnicIbDevice {
    type RegistrationData<'a> = Arc<Nic>;
    /// A hardware context and its verbs objects ([`ib_uverbs`]).
    type UContext = Pin<KBox<UContext>>;
    type Pd = ib_uverbs::Pd;
    type Cq = ib_uverbs::Cq;
    type Mr = ib_uverbs::Mr;
    type Qp = ib_uverbs::Qp;
    type Srq = ib_uverbs::Srq;
    type Dm = ib_uverbs::Dm;
    type Ah = ib_uverbs::Ah;
    const UVERBS_ABI_VERSION: u32 = uapi::PFNIC_IB_ABI_VERSION;

    /// Creates the process's hardware context in the memory mode the provider asked for and
    /// tells the provider which device, interface and mode it talks to.
    fn alloc_ucontext(
        _dev: &rdma::Device<Self>,
        nic: &Arc<Nic>,
        udata: &mut UData<'_>,
    ) -> Result<Self::UContext> {
        let mut req = uapi::IbAllocUcontextReq::new_zeroed();
        udata.read(req.as_mut_bytes())?;
        if req.reserved != 0 {
            return Err(EINVAL);
        }
        let uctx = UContext::new(nic, req.mem_mode)?;
        let (mem_mode, odp_general_caps, odp_rc_caps) = uctx.mem_mode()?;
        let i = &nic.info;
        let resp = uapi::IbAllocUcontextResp {
            uapi_version: uapi::PFNIC_UAPI_VERSION,
            device_abi: i.device_abi,
            caps: i.caps,
            index: i.index,
            reserved: 0,
            mem_mode,
            odp_rc_caps,
            odp_general_caps,
        };
        udata.write(resp.as_bytes())?;
        Ok(uctx)
    }

    fn disassociate_ucontext(uctx: &Self::UContext) {
        uctx.disassociate();
    }

    fn mmap(uctx: &Self::UContext, vma: &VmaNew) -> Result {
        uctx.mmap(vma)
    }

    fn alloc_pd(uctx: &Self::UContext, udata: &mut UData<'_>) -> Result<Self::Pd> {
        uctx.alloc_pd(udata)
    }

    fn dealloc_pd(uctx: &Self::UContext, pd: &Self::Pd) -> Result {
        uctx.dealloc_pd(pd)
    }

    fn create_cq(
        uctx: &Self::UContext,
        attr: &CqInitAttr,
        notifier: CqNotifier,
        udata: &mut UData<'_>,
    ) -> Result<(Self::Cq, u32)> {
        uctx.create_cq(attr, notifier, udata)
    }

    fn destroy_cq(uctx: &Self::UContext, cq: &Self::Cq) -> Result {
        uctx.destroy_cq(cq)
    }

    fn reg_user_mr(
        uctx: &Self::UContext,
        pd: &Self::Pd,
        region: &UserMr,
        udata: &mut UData<'_>,
    ) -> Result<(Self::Mr, MrKeys)> {
        uctx.reg_user_mr(pd, region, udata)
    }

    fn rereg_user_mr(
        uctx: &Self::UContext,
        mr: &Self::Mr,
        flags: u32,
        region: &UserMr,
        pd: &Self::Pd,
        udata: &mut UData<'_>,
    ) -> Result<Option<(Self::Mr, MrKeys)>> {
        uctx.rereg_user_mr(mr, flags, region, pd, udata)
    }

    /// The core's advice values and flag are `ibv_advise_mr`'s, as the verbs engine's.
    fn advise_mr(
        uctx: &Self::UContext,
        pd: &Self::Pd,
        advice: u32,
        flags: u32,
        sges: &[rdma::Sge],
    ) -> Result {
        uctx.advise_mr(pd, advice, flags, sges)
    }

    fn dereg_mr(uctx: &Self::UContext, mr: &Self::Mr) -> Result {
        uctx.dereg_mr(mr)
    }

    fn alloc_dm(
        uctx: &Self::UContext,
        attr: &DmAllocAttr,
        udata: &mut UData<'_>,
    ) -> Result<Self::Dm> {
        uctx.alloc_dm(attr, udata)
    }

    fn dealloc_dm(uctx: &Self::UContext, dm: &Self::Dm) -> Result {
        uctx.dealloc_dm(dm)
    }

    fn reg_dm_mr(
        uctx: &Self::UContext,
        pd: &Self::Pd,
        dm: &Self::Dm,
        attr: &DmMrAttr,
    ) -> Result<(Self::Mr, MrKeys)> {
        uctx.reg_dm_mr(pd, dm, attr)
    }

    fn create_qp(
        uctx: &Self::UContext,
        pd: &Self::Pd,
        attr: &mut QpInitAttr<'_, Self>,
        events: ObjectEvents,
        udata: &mut UData<'_>,
    ) -> Result<(Self::Qp, u32)> {
        uctx.create_qp(pd, attr, events, udata)
    }

    fn modify_qp(
        uctx: &Self::UContext,
        qp: &Self::Qp,
        attr: &QpAttr,
        mask: u32,
        udata: &mut UData<'_>,
    ) -> Result {
        uctx.modify_qp(qp, attr, mask, udata)
    }

    fn create_srq(
        uctx: &Self::UContext,
        pd: &Self::Pd,
        attr: &mut SrqAttr,
        events: ObjectEvents,
        udata: &mut UData<'_>,
    ) -> Result<Self::Srq> {
        uctx.create_srq(pd, attr, events, udata)
    }

    fn modify_srq(
        uctx: &Self::UContext,
        srq: &Self::Srq,
        attr: &SrqAttr,
        mask: u32,
        udata: &mut UData<'_>,
    ) -> Result {
        uctx.modify_srq(srq, attr, mask, udata)
    }

    fn query_srq(uctx: &Self::UContext, srq: &Self::Srq) -> Result<SrqAttr> {
        uctx.query_srq(srq)
    }

    fn destroy_srq(uctx: &Self::UContext, srq: &Self::Srq) -> Result {
        uctx.destroy_srq(srq)
    }

    fn create_ah(
        uctx: &Self::UContext,
        pd: &Self::Pd,
        attr: &AhAttr,
        udata: &mut UData<'_>,
    ) -> Result<Self::Ah> {
        uctx.create_ah(pd, attr, udata)
    }

    fn destroy_ah(uctx: &Self::UContext, ah: &Self::Ah) -> Result {
        uctx.destroy_ah(ah)
    }

    fn query_qp(uctx: &Self::UContext, qp: &Self::Qp) -> Result<QpQuery> {
        uctx.query_qp(qp)
    }

    fn qp_details(
        uctx: &Self::UContext,
        qp: &Self::Qp,
        details: &mut rdma::restrack::DriverDetails<'_>,
    ) -> Result {
        uctx.qp_details(qp, details)
    }

    fn ctx_details(
        uctx: &Self::UContext,
        details: &mut rdma::restrack::DriverDetails<'_>,
    ) -> Result {
        uctx.ctx_details(details)
    }

    fn mr_counters(
        uctx: &Self::UContext,
        mr: &Self::Mr,
        counters: &mut rdma::restrack::Counters<'_>,
    ) -> Result {
        uctx.mr_counters(mr, counters)
    }

    fn destroy_qp(uctx: &Self::UContext, qp: &Self::Qp) -> Result {
        uctx.destroy_qp(qp)
    }

    /// The kernel clients' context: with it (and the data path below) the core offers pfnic
    /// to ib_mad, the connection manager and the other kernel consumers.
    fn alloc_kernel_context(_dev: &rdma::Device<Self>, nic: &Arc<Nic>) -> Result<Self::UContext> {
        UContext::new_kernel(nic)
    }

    fn get_dma_mr(uctx: &Self::UContext, pd: &Self::Pd, access: u32) -> Result<(Self::Mr, MrKeys)> {
        uctx.get_dma_mr(pd, access)
    }

    fn alloc_mr(
        uctx: &Self::UContext,
        pd: &Self::Pd,
        max_pages: u32,
    ) -> Result<(Self::Mr, MrKeys)> {
        uctx.alloc_mr(pd, max_pages)
    }

    fn map_mr_start(mr: &Self::Mr, page_size: u32) -> Result {
        UContext::fast_pages(mr)?.start(page_size)
    }

    fn map_mr_page(mr: &Self::Mr, addr: u64) -> Result {
        UContext::fast_pages(mr)?.add(addr)
    }

    fn post_send(
        uctx: &Self::UContext,
        qp: &Self::Qp,
        wrs: &mut rdma::kverbs::SendWrs<'_, Self::Ah, Self::Mr>,
    ) -> Result {
        uctx.post_send(qp, wrs)
    }

    fn post_recv(
        uctx: &Self::UContext,
        qp: &Self::Qp,
        wrs: &mut rdma::kverbs::RecvWrs<'_>,
    ) -> Result {
        uctx.post_recv(qp, wrs)
    }

    fn post_srq_recv(
        uctx: &Self::UContext,
        srq: &Self::Srq,
        wrs: &mut rdma::kverbs::RecvWrs<'_>,
    ) -> Result {
        uctx.post_srq_recv(srq, wrs)
    }

    fn poll_cq(uctx: &Self::UContext, cq: &Self::Cq, out: &mut rdma::kverbs::WcSink<'_>) -> Result {
        uctx.poll_cq(cq, out)
    }

    fn req_notify_cq(
        uctx: &Self::UContext,
        cq: &Self::Cq,
        how: rdma::kverbs::CqNotify,
    ) -> Result<bool> {
        uctx.req_notify_cq(cq, how)
    }

    fn query_device(_dev: &rdma::Device<Self>, nic: &Arc<Nic>) -> Result<DeviceAttr> {
        let v = nic.query_verbs()?;
        let odp = odp_caps(nic, &v);
        let i = &nic.info;
        let fw = i.fw_version;
        Ok(DeviceAttr {
            // As providers decode it: major 47:32, minor 31:16, patch 15:0.
            fw_ver: (u64::from(fw >> 24) << 32)
                | (u64::from((fw >> 16) & 0xff) << 16)
                | u64::from(fw & 0xffff),
            sys_image_guid: v.node_guid,
            max_mr_size: v.max_mr_size,
            page_size_cap: v.page_size_cap,
            vendor_id: u32::from(i.vendor_id),
            vendor_part_id: u32::from(i.device_id),
            hw_ver: u32::from(i.revision),
            // Fast registration, for the kernel clients that need it (NVMe over RDMA).
            device_cap_flags: if nic.has_fast_reg() {
                DEVICE_CAP_FLAGS | device_caps::MEM_MGT_EXTENSIONS
            } else {
                DEVICE_CAP_FLAGS
            },
            max_fast_reg_page_list_len: if nic.has_fast_reg() {
                crate::queue_abi::FAST_MAX_PAGES
            } else {
                0
            },
            // `IBV_ATOMIC_HCA` in the device's answer.
            atomic_cap: if v.atomic_cap == 1 {
                AtomicCap::Hca
            } else {
                AtomicCap::None
            },
            max_qp: v.max_qp,
            max_qp_wr: v.max_qp_wr,
            max_send_sge: v.max_sge,
            max_recv_sge: v.max_sge,
            max_sge_rd: v.max_sge,
            max_cq: v.max_cq,
            max_cqe: v.max_cqe,
            max_mr: v.max_mr,
            max_pd: v.max_pd,
            max_qp_rd_atom: v.max_qp_rd_atom,
            max_qp_init_rd_atom: v.max_qp_rd_atom,
            max_res_rd_atom: v
                .max_qp_rd_atom
                .saturating_mul(v.max_qp)
                .max(MAX_QP_RD_ATOM),
            max_srq: v.max_srq,
            max_srq_wr: v.max_srq_wr,
            max_srq_sge: v.max_srq_sge,
            max_pkeys: 1,
            timestamp_mask: v.completion_timestamp_mask,
            hca_core_clock: v.hca_core_clock,
            max_dm_size: u64::from(v.max_dm_size),
            odp_general_caps: odp.0,
            odp_rc_caps: odp.1,
            ..DeviceAttr::default()
        })
    }

    fn query_port(_dev: &rdma::Device<Self>, nic: &Arc<Nic>, port: u32) -> Result<PortAttr> {
        check_port(port)?;
        let p = nic.query_port()?;
        let roce = p.link_layer == uapi::PFNIC_LINK_LAYER_ETHERNET;
        // A RoCE port with a netdev is as active as the netdev (up, carrier on), as the core's
        // port events say.
        let up = match (&nic.eth, roce) {
            (_, false) => true,
            (Some(eth), true) => eth.netdev_active(),
            (None, true) => p.port_flags & uapi::PFNIC_PORT_LINK_UP != 0,
        };
        Ok(PortAttr {
            state: if up {
                PortState::Active
            } else {
                PortState::Down
            },
            phys_state: if up {
                PhysState::LinkUp
            } else {
                PhysState::Disabled
            },
            max_mtu: mtu(p.max_mtu),
            active_mtu: mtu(p.active_mtu),
            gid_tbl_len: gid_table_len(nic, &p),
            ip_gids: roce,
            max_msg_sz: p.max_msg_sz,
            pkey_tbl_len: 1,
            lid: if roce { 0 } else { u32::from(PORT_LID) },
            sm_lid: if roce { 0 } else { u32::from(PORT_LID) },
            active_width: p.active_width,
            active_speed: u16::from(p.active_speed),
            ..PortAttr::default()
        })
    }

    fn port_immutable(
        _dev: &rdma::Device<Self>,
        nic: &Arc<Nic>,
        port: u32,
    ) -> Result<PortImmutable> {
        check_port(port)?;
        let p = nic.query_port()?;
        Ok(PortImmutable {
            protocol: if p.link_layer == uapi::PFNIC_LINK_LAYER_ETHERNET {
                PortProtocol::RoceV2
            } else {
                PortProtocol::InfiniBand
            },
            pkey_tbl_len: 1,
            gid_tbl_len: gid_table_len(nic, &p),
            max_mad_size: rdma::attr::MGMT_MAD_SIZE,
        })
    }

    /// The port's counters (zero on a device without the port registers) and the device's
    /// translation counters.
    fn port_counters(
        _dev: &rdma::Device<Self>,
        nic: &Arc<Nic>,
        port: u32,
        values: &mut [u64],
    ) -> Result {
        check_port(port)?;
        let counters = nic.port_state()?.counters;
        let t = nic.stats()?.translation;
        let translation = [
            t.page_requests,
            t.pri_success,
            t.pri_failed,
            t.atc_hits,
            t.atc_misses,
            t.invalidations,
        ];
        for (v, c) in values
            .iter_mut()
            .zip(Iterator::chain(counters.iter(), translation.iter()))
        {
            *v = u64::from(*c);
        }
        Ok(())
    }

    fn query_pkey(
        _dev: &rdma::Device<Self>,
        _nic: &Arc<Nic>,
        port: u32,
        index: u16,
    ) -> Result<u16> {
        check_port(port)?;
        match index {
            0 => Ok(rdma::attr::DEFAULT_PKEY_FULL),
            _ => Err(EINVAL),
        }
    }

    fn query_gid(
        _dev: &rdma::Device<Self>,
        nic: &Arc<Nic>,
        port: u32,
        index: u32,
    ) -> Result<rdma::Gid> {
        check_port(port)?;
        let state = nic.port_state()?;
        let gids = nic.gids(&state);
        let index = usize::try_from(index).map_err(|_| EINVAL)?;
        if index >= state.gid_tbl_len() as usize {
            return Err(EINVAL);
        }
        gids.get(index).copied().ok_or(EINVAL)
    }

    fn add_gid(_dev: &rdma::Device<Self>, nic: &Arc<Nic>, entry: &GidEntry) -> Result {
        nic.core_gid_added(entry)
    }

    fn del_gid(_dev: &rdma::Device<Self>, nic: &Arc<Nic>, entry: &GidEntry) -> Result {
        nic.core_gid_deleted(entry)
    }

    fn fw_version(
        _dev: &rdma::Device<Self>,
        nic: &Arc<Nic>,
        out: &mut dyn core::fmt::Write,
    ) -> core::fmt::Result {
        let v = nic.info.fw_version;
        write!(out, "{}.{}.{}", v >> 24, (v >> 16) & 0xff, v & 0xffff)
    }
}

/// The driver of `pfnic.rdma.N` ([`crate::auxdev`]): the NIC in the RDMA core.
pub(crate) struct RdmaDriver;

kernel::auxiliary_device_table!(
    RDMA_TABLE,
    <RdmaDriver as auxiliary::Driver>::IdInfo,
    [(auxdev::id(auxdev::RDMA), ())]
);

/// A bound `pfnic.rdma.N`: `pfnicN` registered, its port tied to the port's netdev if the
/// Ethernet driver registered one.
pub(crate) struct RdmaBinding<'bound> {
    _reg: Registration<'bound>,
    nic: Arc<Nic>,
}

impl auxiliary::Driver for RdmaDriver {
    type IdInfo = ();
    type Data<'bound> = RdmaBinding<'bound>;
    const ID_TABLE: auxiliary::IdTable<Self::IdInfo> = &RDMA_TABLE;

    fn probe<'bound>(
        adev: &'bound auxiliary::Device<Core<'_>>,
        _info: &'bound Self::IdInfo,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        RdmaBinding::new(adev)
    }

    fn unbind<'bound>(_adev: &'bound auxiliary::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        // The core's device goes with the data; the device's own port events stop first.
        if let Ok(v) = this.nic.verbs() {
            v.eq.set_core_port_events(None);
        }
    }
}

impl<'bound> RdmaBinding<'bound> {
    fn new(adev: &'bound auxiliary::Device<Core<'_>>) -> Result<Self> {
        let nic = auxdev::nic(adev)?;
        let parent = adev.parent();
        let netdev = nic.eth.as_ref().map(|port| port.netdev.lock());
        let reg = {
            let netdev = netdev.as_ref().and_then(|n| n.as_ref()).map(|r| r.device());
            // SAFETY: The port's netdev stays registered until `pfnic.eth.N` is unbound, which
            // happens only when the PCI driver removes it (its driver suppresses sysfs unbinds,
            // `crate::auxdev`), after it removed `pfnic.rdma.N`, which unbinds this driver
            // and drops the registration; the module unregisters the PCI driver before this
            // one.
            unsafe { register(parent, &nic, netdev) }.inspect_err(|e| {
                dev_warn!(parent, "not registered with the RDMA core: {:?}\n", e)
            })?
        };
        // With a netdev the core sends the port's events itself, from the netdev's state.
        let with_netdev = netdev.as_ref().is_some_and(|n| n.is_some());
        drop(netdev);
        if let (Ok(v), false) = (nic.verbs(), with_netdev) {
            v.eq.set_core_port_events(Some(reg.port_events()));
        }
        Ok(Self { _reg: reg, nic })
    }
}
