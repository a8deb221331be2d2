// SPDX-License-Identifier: GPL-2.0

//! Queue pairs, RC and (through the RDMA core) UD: creation with their send and receive queues
//! and record in one coherent allocation the process maps, the RESET/INIT/RTR/RTS/ERR state
//! machine with libibverbs' rules on the attributes of each transition, query and destruction.
//! The driver keeps each QP's attributes and gives the device the whole set at every
//! transition, with an RC QP's address vector resolved to a destination IPv4 address
//! (docs/wire.md); a UD QP has a Q_Key instead, its work requests' address handles the rest.

use super::args::{CreateQp, ModifyQp, QpAttr, QpCap, QpStats, QueryQp};
use super::{
    cmd,
    eq::OwnerRoute,
    file::{ring_bytes, Qp, Ring, VerbsFile},
    port::PORT_MAX_MTU,
    MAX_QP_RD_ATOM,
};
use crate::{queue_abi::WQE_SIZE, uapi::*};
use kernel::{page::PAGE_SIZE, prelude::*, rdma::ObjectEvents, types::ScopeGuard};

/// Bytes of the QP record.
const RECORD_SIZE: usize = 16;

/// `IBV_QPS_*`.
const QPS_RESET: u32 = 0;
const QPS_INIT: u32 = 1;
const QPS_RTR: u32 = 2;
const QPS_RTS: u32 = 3;
const QPS_ERR: u32 = 6;
/// Highest `IBV_QPS_*` value (`ERR`).
const QPS_MAX: u32 = QPS_ERR;

/// `IBV_MTU_256`, the smallest path MTU.
const MTU_MIN: u32 = 1;
/// The path MTU the device is given before the QP has one (`INIT->RTR` sets it):
/// `IBV_MTU_1024`.
const MTU_UNSET: u32 = 3;
/// `QP_MODIFY` a15: receive faults use the backup buffer (docs/wire.md).
const QP_WIRE_BACKUP: u32 = 1 << 0;
/// Largest PSN (24 bits) and QPN.
const PSN_MASK: u32 = 0xff_ffff;
/// `QP_CREATE` a13: every send WQE is signalled; the QP takes receives from SRQ a14.
const QP_CREATE_SIGNAL_ALL: u32 = 1 << 0;
const QP_CREATE_SRQ: u32 = 1 << 1;
/// `QP_CREATE` a13: an unreliable datagram QP (device ABI 1.19).
const QP_CREATE_UD: u32 = 1 << 2;
/// `IBV_QP_QKEY`: a UD QP's attribute.
const QP_ATTR_QKEY: u32 = 1 << 6;

/// Every attribute bit the driver knows.
const ALL_ATTRS: u32 = PFNIC_QP_STATE
    | PFNIC_QP_CUR_STATE
    | PFNIC_QP_ACCESS_FLAGS
    | PFNIC_QP_PKEY_INDEX
    | PFNIC_QP_PORT
    | PFNIC_QP_AV
    | PFNIC_QP_PATH_MTU
    | PFNIC_QP_TIMEOUT
    | PFNIC_QP_RETRY_CNT
    | PFNIC_QP_RNR_RETRY
    | PFNIC_QP_RQ_PSN
    | PFNIC_QP_MAX_QP_RD_ATOMIC
    | PFNIC_QP_MIN_RNR_TIMER
    | PFNIC_QP_SQ_PSN
    | PFNIC_QP_MAX_DEST_RD_ATOMIC
    | PFNIC_QP_DEST_QPN;

/// `IBV_ACCESS_*` bits a QP's access flags may hold.
const QP_ACCESS: u32 = PFNIC_ACCESS_LOCAL_WRITE
    | PFNIC_ACCESS_REMOTE_WRITE
    | PFNIC_ACCESS_REMOTE_READ
    | PFNIC_ACCESS_REMOTE_ATOMIC;

/// What a QP's access flags may carry: [`QP_ACCESS`], and `IBV_ACCESS_ON_DEMAND`, which
/// programs pass along with their MR flags and RDMA devices ignore on a QP (it is an MR's).
const QP_ACCESS_ACCEPTED: u32 = QP_ACCESS | PFNIC_ACCESS_ON_DEMAND;

/// The attributes an RC transition from `cur` to `next` requires and those it allows besides
/// (the kernel's `ib_modify_qp_is_ok` table, for the states the device implements); `None`
/// when the transition is not allowed.
fn transition(cur: u32, next: u32) -> Option<(u32, u32)> {
    let rtr_required = PFNIC_QP_AV
        | PFNIC_QP_PATH_MTU
        | PFNIC_QP_DEST_QPN
        | PFNIC_QP_RQ_PSN
        | PFNIC_QP_MAX_DEST_RD_ATOMIC
        | PFNIC_QP_MIN_RNR_TIMER;
    let rts_required = PFNIC_QP_SQ_PSN
        | PFNIC_QP_TIMEOUT
        | PFNIC_QP_RETRY_CNT
        | PFNIC_QP_RNR_RETRY
        | PFNIC_QP_MAX_QP_RD_ATOMIC;
    let rts_optional = PFNIC_QP_CUR_STATE | PFNIC_QP_ACCESS_FLAGS | PFNIC_QP_MIN_RNR_TIMER;
    let init_attrs = PFNIC_QP_PKEY_INDEX | PFNIC_QP_PORT | PFNIC_QP_ACCESS_FLAGS;
    match (cur, next) {
        (_, QPS_RESET) | (_, QPS_ERR) => Some((0, 0)),
        (QPS_RESET, QPS_INIT) => Some((init_attrs, 0)),
        (QPS_INIT, QPS_INIT) => Some((0, init_attrs)),
        (QPS_INIT, QPS_RTR) => Some((rtr_required, PFNIC_QP_ACCESS_FLAGS | PFNIC_QP_PKEY_INDEX)),
        (QPS_RTR, QPS_RTS) => Some((rts_required, rts_optional)),
        (QPS_RTS, QPS_RTS) => Some((0, rts_optional)),
        _ => None,
    }
}

/// [`transition`] for a special QP (the SMI's or GSI's, QPN 0 or 1; the kernel's table):
/// a UD QP whose port is its creation's, so RESET to INIT takes no port.
fn transition_special(cur: u32, next: u32) -> Option<(u32, u32)> {
    let init_attrs = PFNIC_QP_PKEY_INDEX | QP_ATTR_QKEY;
    match (cur, next) {
        (QPS_RESET, QPS_INIT) => Some((init_attrs, 0)),
        (QPS_INIT, QPS_INIT) => Some((0, init_attrs)),
        _ => transition_ud(cur, next),
    }
}

/// [`transition`] for a UD QP (the kernel's table again): no address vector, no transport
/// attributes, a Q_Key.
fn transition_ud(cur: u32, next: u32) -> Option<(u32, u32)> {
    let init_attrs = PFNIC_QP_PKEY_INDEX | PFNIC_QP_PORT | QP_ATTR_QKEY;
    match (cur, next) {
        (_, QPS_RESET) | (_, QPS_ERR) => Some((0, 0)),
        (QPS_RESET, QPS_INIT) => Some((init_attrs, 0)),
        (QPS_INIT, QPS_INIT) => Some((0, init_attrs)),
        (QPS_INIT, QPS_RTR) => Some((0, PFNIC_QP_PKEY_INDEX | QP_ATTR_QKEY)),
        (QPS_RTR, QPS_RTS) => Some((PFNIC_QP_SQ_PSN, PFNIC_QP_CUR_STATE | QP_ATTR_QKEY)),
        (QPS_RTS, QPS_RTS) => Some((0, PFNIC_QP_CUR_STATE | QP_ATTR_QKEY)),
        _ => None,
    }
}

/// Checks the value of every attribute in `mask`.
fn check_values(mask: u32, a: &QpAttr) -> Result {
    let has = |bit: u32| mask & bit != 0;
    let ok = (!has(PFNIC_QP_PKEY_INDEX) || a.pkey_index == 0)
        && (!has(PFNIC_QP_PORT) || a.port_num == 1)
        && (!has(PFNIC_QP_ACCESS_FLAGS) || a.qp_access_flags & !QP_ACCESS_ACCEPTED == 0)
        && (!has(PFNIC_QP_AV)
            || (a.sl <= 15
                && a.hop_limit <= 0xff
                && a.traffic_class <= 0xff
                && a.flow_label <= 0xf_ffff))
        && (!has(PFNIC_QP_PATH_MTU) || (MTU_MIN..=PORT_MAX_MTU).contains(&a.path_mtu))
        && (!has(PFNIC_QP_RQ_PSN) || a.rq_psn <= PSN_MASK)
        && (!has(PFNIC_QP_SQ_PSN) || a.sq_psn <= PSN_MASK)
        && (!has(PFNIC_QP_MIN_RNR_TIMER) || a.min_rnr_timer <= 31)
        && (!has(PFNIC_QP_TIMEOUT) || a.timeout <= 31)
        && (!has(PFNIC_QP_RETRY_CNT) || a.retry_cnt <= 7)
        && (!has(PFNIC_QP_RNR_RETRY) || a.rnr_retry <= 7)
        && (!has(PFNIC_QP_MAX_QP_RD_ATOMIC) || a.max_rd_atomic <= MAX_QP_RD_ATOM)
        && (!has(PFNIC_QP_MAX_DEST_RD_ATOMIC) || a.max_dest_rd_atomic <= MAX_QP_RD_ATOM);
    if !ok {
        return Err(EINVAL);
    }
    Ok(())
}

/// Checks the destination QP number of a QP whose destination is `dest_ipv4`: on this device
/// (0) the QP may belong to any process, but it must exist; on another one, it is 24 bits.
fn check_dest_qpn(file: &VerbsFile, dest_ipv4: u32, dest_qp_num: u32) -> Result {
    let ok = if dest_ipv4 == 0 {
        file.nic.verbs()?.qp_exists(dest_qp_num)
    } else {
        dest_qp_num <= PSN_MASK
    };
    if ok {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// Copies the attributes in `mask` from `from` to `to`.
fn merge(mask: u32, from: &QpAttr, to: &mut QpAttr) {
    let has = |bit: u32| mask & bit != 0;
    if has(PFNIC_QP_ACCESS_FLAGS) {
        // What applies to the QP (a query reports that).
        to.qp_access_flags = from.qp_access_flags & QP_ACCESS;
    }
    if has(PFNIC_QP_PKEY_INDEX) {
        to.pkey_index = from.pkey_index;
    }
    if has(PFNIC_QP_PORT) {
        to.port_num = from.port_num;
    }
    if has(PFNIC_QP_AV) {
        to.dlid = from.dlid;
        to.sl = from.sl;
        to.is_global = from.is_global;
        to.sgid_index = from.sgid_index;
        to.hop_limit = from.hop_limit;
        to.traffic_class = from.traffic_class;
        to.flow_label = from.flow_label;
        to.dgid = from.dgid;
    }
    if has(PFNIC_QP_PATH_MTU) {
        to.path_mtu = from.path_mtu;
    }
    if has(PFNIC_QP_TIMEOUT) {
        to.timeout = from.timeout;
    }
    if has(PFNIC_QP_RETRY_CNT) {
        to.retry_cnt = from.retry_cnt;
    }
    if has(PFNIC_QP_RNR_RETRY) {
        to.rnr_retry = from.rnr_retry;
    }
    if has(PFNIC_QP_RQ_PSN) {
        to.rq_psn = from.rq_psn;
    }
    if has(PFNIC_QP_SQ_PSN) {
        to.sq_psn = from.sq_psn;
    }
    if has(PFNIC_QP_MAX_QP_RD_ATOMIC) {
        to.max_rd_atomic = from.max_rd_atomic;
    }
    if has(PFNIC_QP_MAX_DEST_RD_ATOMIC) {
        to.max_dest_rd_atomic = from.max_dest_rd_atomic;
    }
    if has(PFNIC_QP_MIN_RNR_TIMER) {
        to.min_rnr_timer = from.min_rnr_timer;
    }
    if has(PFNIC_QP_DEST_QPN) {
        to.dest_qp_num = from.dest_qp_num;
    }
}

/// Entries of a queue asked to hold `wr` work requests.
fn queue_entries(wr: u32, max: u32) -> Result<u32> {
    if wr > max {
        return Err(EINVAL);
    }
    Ok(wr.max(1).next_power_of_two())
}

impl VerbsFile {
    /// `ibv_create_qp`, with the asynchronous events of the QP going to `core`, the RDMA
    /// core's.
    pub(crate) fn create_qp_for(
        &self,
        arg: &mut CreateQp,
        core: Option<ObjectEvents>,
    ) -> Result<Ring> {
        let verbs = self.nic.verbs()?;
        let l = verbs.limits;
        let known = PFNIC_QP_CREATE_RECV_FAULT_BACKUP | PFNIC_QP_CREATE_SRQ;
        // UD through the RDMA core only: the address handles its work requests name are the
        // core's.
        let ud = arg.qp_type == PFNIC_QPT_UD && core.is_some();
        if arg.flags & !known != 0 || (arg.qp_type != PFNIC_QPT_RC && !ud) {
            return Err(EINVAL);
        }
        if ud && !self.nic.has_ud() {
            return Err(EOPNOTSUPP);
        }
        // The special QPs are the kernel clients' (ib_mad's), UD.
        if arg.special_qpn.is_some() && (!ud || !self.kernel) {
            return Err(EINVAL);
        }
        if ud && arg.flags & PFNIC_QP_CREATE_RECV_FAULT_BACKUP != 0 {
            // The backup buffer serves RC's responder; a datagram that faults is lost.
            return Err(EINVAL);
        }
        let srq = if arg.flags & PFNIC_QP_CREATE_SRQ != 0 {
            Some(arg.srq)
        } else if arg.srq != 0 {
            return Err(EINVAL);
        } else {
            None
        };
        let backup = arg.flags & PFNIC_QP_CREATE_RECV_FAULT_BACKUP != 0;
        if backup && verbs.backup.is_none() {
            return Err(EOPNOTSUPP);
        }
        let mut cap = arg.cap;
        if srq.is_some() {
            // libibverbs ignores the receive capabilities of a QP with an SRQ.
            cap.max_recv_wr = 0;
            cap.max_recv_sge = 0;
        }
        if cap.max_send_sge > l.max_sge || cap.max_recv_sge > l.max_sge || cap.max_inline_data != 0
        {
            return Err(EINVAL);
        }
        let sq_entries = queue_entries(cap.max_send_wr, l.max_wqes)?;
        // A QP with an SRQ has no receive queue of its own.
        let rq_entries = match srq {
            Some(_) => 0,
            None => queue_entries(cap.max_recv_wr, l.max_wqes)?,
        };
        let rq_offset = sq_entries as usize * WQE_SIZE;
        let record_offset = rq_offset + rq_entries as usize * WQE_SIZE;
        let bytes = ring_bytes(record_offset + RECORD_SIZE)?;
        let objects_exist = |o: &super::file::Objects| {
            o.pds.get(&arg.pd).is_some()
                && o.cqs.get(&arg.send_cq).is_some()
                && o.cqs.get(&arg.recv_cq).is_some()
                && srq.is_none_or(|srqn| o.srqs.get(&srqn).is_some())
        };
        if !objects_exist(&self.objects.lock()) {
            return Err(EINVAL);
        }
        let ring = Ring::new(&self.nic, bytes)?;
        let mem = ring.mem.clone();

        let mut o = self.objects.lock();
        // Checked again: the lock was dropped for the allocation.
        if !objects_exist(&o) {
            return Err(EINVAL);
        }
        let qpn = match arg.special_qpn {
            Some(n) => verbs.ids.lock().take_special_qpn(n)?,
            None => verbs.ids.lock().qpns.alloc()?,
        };
        let free_qpn = ScopeGuard::new(|| verbs.ids.lock().free_qpn(qpn));
        // Route events before the QP exists, so none is lost.
        verbs.eq.set_qp_owner(qpn, Some(OwnerRoute { core }));
        let unroute = ScopeGuard::new(|| verbs.eq.set_qp_owner(qpn, None));
        let sq = mem.dma_address();
        let [sq_lo, sq_hi] = cmd::split(sq);
        let [rq_lo, rq_hi] = cmd::split(sq + rq_offset as u64);
        let [rec_lo, rec_hi] = cmd::split(sq + record_offset as u64);
        let sig_all = arg.sq_sig_all != 0;
        let mut create_flags = if sig_all { QP_CREATE_SIGNAL_ALL } else { 0 };
        if srq.is_some() {
            create_flags |= QP_CREATE_SRQ;
        }
        if ud {
            create_flags |= QP_CREATE_UD;
        }
        self.nic.command(&cmd::QpCreate {
            qpn,
            ctx: self.ctx,
            pd: arg.pd,
            send_cqn: arg.send_cq,
            recv_cqn: arg.recv_cq,
            sq_lo,
            sq_hi,
            sq_log2: sq_entries.trailing_zeros(),
            rq_lo: if srq.is_some() { 0 } else { rq_lo },
            rq_hi: if srq.is_some() { 0 } else { rq_hi },
            rq_log2: if srq.is_some() {
                0
            } else {
                rq_entries.trailing_zeros()
            },
            record_lo: rec_lo,
            record_hi: rec_hi,
            flags: create_flags,
            srqn: srq.unwrap_or(0),
        })?;
        let destroy = ScopeGuard::new(|| {
            let _ = self.nic.command(&cmd::QpDestroy { index: qpn });
        });
        let actual = QpCap {
            max_send_wr: sq_entries,
            max_recv_wr: rq_entries,
            max_send_sge: l.max_sge,
            max_recv_sge: if srq.is_some() { 0 } else { l.max_sge },
            max_inline_data: 0,
        };
        // A clone: on failure, `mem` outlives the guards that destroy the object in the device.
        let token = o.add_ring(mem.clone())?;
        let qp = Qp {
            pd: arg.pd,
            srq,
            send_cq: arg.send_cq,
            recv_cq: arg.recv_cq,
            sq_sig_all: sig_all,
            cap: actual,
            attr: QpAttr::default(),
            dest_ipv4: 0,
            backup,
            ring: token,
            dmac: [0; 6],
            ud,
            qkey: 0,
        };
        if let Err(e) = o.qps.try_create_and_insert(qpn, qp, GFP_KERNEL) {
            o.remove_ring(token);
            return Err(e);
        }
        // Cannot fail from here on.
        if let Some(pd) = o.pds.get_mut(&arg.pd) {
            pd.qps += 1;
        }
        for cqn in [arg.send_cq, arg.recv_cq] {
            if let Some(cq) = o.cqs.get_mut(&cqn) {
                cq.qps += 1;
            }
        }
        if let Some(srq) = srq.and_then(|srqn| o.srqs.get_mut(&srqn)) {
            srq.qps += 1;
        }
        destroy.dismiss();
        unroute.dismiss();
        free_qpn.dismiss();
        arg.cap = actual;
        arg.qpn = qpn;
        arg.sq_entries = sq_entries;
        arg.rq_entries = rq_entries;
        arg.mmap_offset = token * PAGE_SIZE as u64;
        arg.mmap_len = bytes as u64;
        arg.rq_offset = rq_offset as u64;
        arg.record_offset = record_offset as u64;
        Ok(ring)
    }

    /// The QP's state as the device has it (the device moves QPs to ERR by itself): the first
    /// word of `QP_QUERY`'s results, read alone.
    fn device_qp_state(&self, qpn: u32) -> Result<u32> {
        let r: cmd::QpStateReply = self.nic.command_part(&cmd::QpQuery { index: qpn })?;
        Ok(r.state)
    }

    /// Sets the MAC the device sends the QP's packets to (all zeroes: its neighbour cache's).
    fn set_qp_dmac(&self, qpn: u32, mac: [u8; 6]) -> Result {
        self.nic
            .command(&cmd::QpSetDmac {
                qpn,
                mac_hi: u32::from_be_bytes([mac[0], mac[1], mac[2], mac[3]]),
                mac_lo: u32::from(u16::from_be_bytes([mac[4], mac[5]])) << 16,
            })
            .map(drop)
    }

    /// [`VerbsFile::modify_qp`] that, with an address vector, also gives the device the peer's
    /// MAC `dmac` as the RDMA core resolved it from the netdev's neighbours (all zeroes where
    /// the core has none), so that the device needs no ARP of its own. On a device without
    /// `QP_SET_DMAC` the MAC is left to the device. The old MAC is put back if the
    /// modification fails. A UD QP takes `qkey` with `IBV_QP_QKEY` in the mask.
    pub(crate) fn modify_qp_to(&self, arg: &ModifyQp, dmac: Option<[u8; 6]>, qkey: u32) -> Result {
        self.nic.verbs()?;
        let mask = arg.attr_mask;
        let a = &arg.attr;
        let mut o = self.objects.lock();
        let qp = o.qps.get_mut(&arg.qpn).ok_or(EINVAL)?;
        if qp.ud {
            return self.modify_ud_qp(arg, qp, qkey);
        }
        let next = self.next_state(arg, ALL_ATTRS, transition)?;
        check_values(mask, a)?;
        let mut attr = qp.attr;
        merge(mask, a, &mut attr);
        let dest_ipv4 = if mask & PFNIC_QP_AV != 0 {
            self.nic.resolve_dest(&attr)?
        } else {
            qp.dest_ipv4
        };
        if mask & (PFNIC_QP_AV | PFNIC_QP_DEST_QPN) != 0 && next != QPS_RESET {
            check_dest_qpn(self, dest_ipv4, attr.dest_qp_num)?;
        }
        let local = cmd::QpModify {
            qpn: arg.qpn,
            state: next,
            access: attr.qp_access_flags,
            dest_qpn: attr.dest_qp_num,
            min_rnr_timer: attr.min_rnr_timer,
            rnr_retry: attr.rnr_retry,
            retry_cnt: attr.retry_cnt,
            ..Default::default()
        };
        // Device ABI 1.5 (docs/wire.md): the rest of the connection.
        let args = if self.nic.has_port_registers() {
            cmd::QpModify {
                dest_ip: dest_ipv4,
                sq_psn: attr.sq_psn,
                rq_psn: attr.rq_psn,
                path_mtu: if attr.path_mtu == 0 {
                    MTU_UNSET
                } else {
                    attr.path_mtu
                },
                timeout: attr.timeout,
                max_dest_rd_atomic: attr.max_dest_rd_atomic,
                hop_limit_tclass: attr.hop_limit | (attr.traffic_class << 8),
                max_rd_atomic: attr.max_rd_atomic,
                wire_flags: if qp.backup { QP_WIRE_BACKUP } else { 0 },
                ..local
            }
        } else {
            local
        };
        let old_dmac = qp.dmac;
        let new_dmac =
            dmac.filter(|m| mask & PFNIC_QP_AV != 0 && *m != old_dmac && self.nic.has_qp_dmac());
        if let Some(m) = new_dmac {
            self.set_qp_dmac(arg.qpn, m)?;
        }
        if let Err(e) = self.nic.command(&args) {
            if new_dmac.is_some() {
                let _ = self.set_qp_dmac(arg.qpn, old_dmac);
            }
            return Err(e);
        }
        attr.qp_state = next;
        qp.attr = attr;
        qp.dest_ipv4 = dest_ipv4;
        if let Some(m) = new_dmac {
            qp.dmac = m;
        }
        Ok(())
    }

    /// The state a modification takes the QP to, once its mask holds only `known` attributes
    /// and those that `table`'s transition from the device's current state requires and
    /// allows (`EINVAL` otherwise).
    fn next_state(
        &self,
        arg: &ModifyQp,
        known: u32,
        table: fn(u32, u32) -> Option<(u32, u32)>,
    ) -> Result<u32> {
        let mask = arg.attr_mask;
        let a = &arg.attr;
        if mask & !known != 0 {
            return Err(EINVAL);
        }
        let cur = self.device_qp_state(arg.qpn)?;
        if mask & PFNIC_QP_CUR_STATE != 0 && a.cur_qp_state != cur {
            return Err(EINVAL);
        }
        let next = if mask & PFNIC_QP_STATE != 0 {
            a.qp_state
        } else {
            cur
        };
        if next > QPS_MAX {
            return Err(EINVAL);
        }
        let (required, optional) = table(cur, next).ok_or(EINVAL)?;
        if mask & required != required || mask & !(required | optional | PFNIC_QP_STATE) != 0 {
            return Err(EINVAL);
        }
        Ok(next)
    }

    /// [`VerbsFile::modify_qp_to`] of a UD QP `qp` (its objects locked): the state, with the
    /// Q_Key, port and P_Key index the kernel's table asks for, and the send PSN.
    fn modify_ud_qp(&self, arg: &ModifyQp, qp: &mut Qp, qkey: u32) -> Result {
        let mask = arg.attr_mask;
        let a = &arg.attr;
        let known = PFNIC_QP_STATE
            | PFNIC_QP_CUR_STATE
            | PFNIC_QP_PKEY_INDEX
            | PFNIC_QP_PORT
            | QP_ATTR_QKEY
            | PFNIC_QP_SQ_PSN;
        let table = if arg.qpn < 2 {
            transition_special
        } else {
            transition_ud
        };
        let next = self.next_state(arg, known, table)?;
        check_values(mask, a)?;
        let mut attr = qp.attr;
        merge(mask, a, &mut attr);
        let qkey = if mask & QP_ATTR_QKEY != 0 {
            qkey
        } else {
            qp.qkey
        };
        // Device ABI 1.19: a UD QP's Q_Key goes where RC's destination QPN does, and of the
        // rest only the send PSN counts.
        self.nic.command(&cmd::QpModify {
            qpn: arg.qpn,
            state: next,
            dest_qpn: qkey,
            sq_psn: attr.sq_psn,
            ..Default::default()
        })?;
        attr.qp_state = next;
        qp.attr = attr;
        qp.qkey = qkey;
        Ok(())
    }

    /// A UD QP's Q_Key, for the RDMA core's `query_qp` (`QueryQp` has no field for it).
    pub(crate) fn qp_qkey(&self, qpn: u32) -> Result<u32> {
        let o = self.objects.lock();
        Ok(o.qps.get(&qpn).ok_or(EINVAL)?.qkey)
    }

    /// `ibv_query_qp`.
    pub(crate) fn query_qp(&self, arg: &mut QueryQp) -> Result {
        self.nic.verbs()?;
        let o = self.objects.lock();
        let qp = o.qps.get(&arg.qpn).ok_or(EINVAL)?;
        let r = self.nic.command(&cmd::QpQuery { index: arg.qpn })?;
        arg.sq_sig_all = u32::from(qp.sq_sig_all);
        arg.attr = qp.attr;
        arg.attr.qp_state = r.state;
        arg.attr.cur_qp_state = r.state;
        arg.cap = qp.cap;
        arg.stats = QpStats {
            page_requests: u64::from(r.page_requests),
            rnr_waits: u64::from(r.rnr_waits),
            wqes: u64::from(r.completed),
            bytes: cmd::join(r.bytes_lo, r.bytes_hi),
            refused: u64::from(r.refused),
            ..Default::default()
        };
        if self.nic.has_port_registers() {
            let s = &mut arg.stats;
            s.next_send_psn = r.next_psn;
            s.expected_recv_psn = r.expected_psn;
            s.retransmits = u64::from(r.retransmits);
            s.rnr_naks_sent = u64::from(r.rnr_naks_sent);
            s.rnr_naks_received = u64::from(r.rnr_naks_received);
            s.seq_naks_sent = u64::from(r.seq_naks_sent);
            s.duplicates = u64::from(r.duplicates);
        }
        Ok(())
    }

    /// `ibv_destroy_qp` of QP `num`. Its ring memory goes once no mapping uses it.
    pub(crate) fn destroy_qp(&self, num: u32) -> Result {
        let verbs = self.nic.verbs()?;
        let mut o = self.objects.lock();
        // One the device does not let go of is quarantined (its ring and QPN kept).
        let Some(qp) = o.qps.remove(&num) else {
            return Err(EINVAL);
        };
        let released = verbs.destroy_queue(
            &self.nic,
            &mut o,
            &cmd::QpDestroy { index: num },
            "QP",
            qp.ring,
        );
        if let Some(pd) = o.pds.get_mut(&qp.pd) {
            pd.qps -= 1;
        }
        for cqn in [qp.send_cq, qp.recv_cq] {
            if let Some(cq) = o.cqs.get_mut(&cqn) {
                cq.qps -= 1;
            }
        }
        if let Some(srq) = qp.srq.and_then(|srqn| o.srqs.get_mut(&srqn)) {
            srq.qps -= 1;
        }
        verbs.eq.set_qp_owner(num, None);
        // Without the object lock, the QPN still taken: see `destroy_cq`.
        drop(o);
        if released {
            verbs.ids.lock().free_qpn(num);
        }
        Ok(())
    }
}
