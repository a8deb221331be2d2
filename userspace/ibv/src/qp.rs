//! Queue pairs: `ibv_qp`.

use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::cq::CqInner;
use crate::mr::PdInner;
use crate::srq::{Srq, SrqInner};
use crate::{
    check, non_null, qp_attr, sys, ConnectAttr, Cq, Pd, PostError, QpAttr, QpCap, QpState, RecvWr,
    SendWr,
};

/// `ibv_qp_type`: the transports this crate creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    Rc,
    Ud,
}

/// `ibv_qp_init_attr`.
#[derive(Clone, Copy)]
pub struct QpInitAttr<'a> {
    pub send_cq: &'a Cq,
    pub recv_cq: &'a Cq,
    /// Requested capabilities; [`Qp::cap`] gives the actual ones.
    pub cap: QpCap,
    /// Signal every send work request (`sq_sig_all`).
    pub sq_sig_all: bool,
    pub qp_type: QpType,
    /// The SRQ the QP takes its receives from (its receive capabilities are then ignored).
    pub srq: Option<&'a Srq>,
    /// Returned with the QP's asynchronous events.
    pub qp_context: u64,
}

impl<'a> QpInitAttr<'a> {
    /// An RC QP of `max_wr` send and receive work requests of up to `max_sge` SGEs each.
    pub fn new(send_cq: &'a Cq, recv_cq: &'a Cq, max_wr: u32, max_sge: u32) -> Self {
        Self {
            send_cq,
            recv_cq,
            cap: QpCap {
                max_send_wr: max_wr,
                max_recv_wr: max_wr,
                max_send_sge: max_sge,
                max_recv_sge: max_sge,
                max_inline_data: 0,
            },
            sq_sig_all: false,
            qp_type: QpType::Rc,
            srq: None,
            qp_context: 0,
        }
    }
}

/// What `ibv_query_qp` returns.
#[derive(Clone, Copy, Debug)]
pub struct QpQuery {
    pub attr: QpAttr,
    pub cap: QpCap,
    pub sq_sig_all: bool,
}

fn ibv_cap(c: &QpCap) -> sys::ibv_qp_cap {
    sys::ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

fn cap_of(c: &sys::ibv_qp_cap) -> QpCap {
    QpCap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// `QpAttr` as `ibv_qp_attr` (fields narrower in libibverbs are truncated as C would).
fn ibv_attr(a: &QpAttr) -> sys::ibv_qp_attr {
    // SAFETY: all-zero bytes are a valid `ibv_qp_attr` (integers and arrays).
    let mut r: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
    r.qp_state = a.qp_state;
    r.cur_qp_state = a.cur_qp_state;
    r.path_mtu = a.path_mtu;
    r.qp_access_flags = a.qp_access_flags;
    r.pkey_index = a.pkey_index as u16;
    r.port_num = a.port_num as u8;
    r.dest_qp_num = a.dest_qp_num;
    r.rq_psn = a.rq_psn;
    r.sq_psn = a.sq_psn;
    r.min_rnr_timer = a.min_rnr_timer as u8;
    r.timeout = a.timeout as u8;
    r.retry_cnt = a.retry_cnt as u8;
    r.rnr_retry = a.rnr_retry as u8;
    r.max_rd_atomic = a.max_rd_atomic as u8;
    r.max_dest_rd_atomic = a.max_dest_rd_atomic as u8;
    r.ah_attr.dlid = a.dlid as u16;
    r.ah_attr.sl = a.sl as u8;
    // The address vector's port: the device has one.
    r.ah_attr.port_num = 1;
    r.ah_attr.is_global = a.is_global as u8;
    r.ah_attr.grh.dgid.raw = a.dgid;
    r.ah_attr.grh.sgid_index = a.sgid_index as u8;
    r.ah_attr.grh.hop_limit = a.hop_limit as u8;
    r.ah_attr.grh.traffic_class = a.traffic_class as u8;
    r.ah_attr.grh.flow_label = a.flow_label;
    r
}

fn attr_of(r: &sys::ibv_qp_attr) -> QpAttr {
    QpAttr {
        qp_state: r.qp_state,
        cur_qp_state: r.cur_qp_state,
        path_mtu: r.path_mtu,
        qp_access_flags: r.qp_access_flags,
        pkey_index: r.pkey_index.into(),
        port_num: r.port_num.into(),
        dest_qp_num: r.dest_qp_num,
        rq_psn: r.rq_psn,
        sq_psn: r.sq_psn,
        min_rnr_timer: r.min_rnr_timer.into(),
        timeout: r.timeout.into(),
        retry_cnt: r.retry_cnt.into(),
        rnr_retry: r.rnr_retry.into(),
        max_rd_atomic: r.max_rd_atomic.into(),
        max_dest_rd_atomic: r.max_dest_rd_atomic.into(),
        dlid: r.ah_attr.dlid.into(),
        sl: r.ah_attr.sl.into(),
        is_global: r.ah_attr.is_global.into(),
        sgid_index: r.ah_attr.grh.sgid_index.into(),
        hop_limit: r.ah_attr.grh.hop_limit.into(),
        traffic_class: r.ah_attr.grh.traffic_class.into(),
        flow_label: r.ah_attr.grh.flow_label,
        // SAFETY: every bit pattern is a valid byte array.
        dgid: unsafe { r.ah_attr.grh.dgid.raw },
    }
}

/// A queue pair: `ibv_qp`. Destroyed on drop.
pub struct Qp {
    ptr: NonNull<sys::ibv_qp>,
    cap: QpCap,
    pd: Arc<PdInner>,
    _send_cq: Arc<CqInner>,
    _recv_cq: Arc<CqInner>,
    _srq: Option<Arc<SrqInner>>,
    /// Not yet destroyed by [`Qp::destroy`].
    live: bool,
}

// SAFETY: libibverbs' QPs may be used from any thread (the provider locks its queues).
unsafe impl Send for Qp {}
// SAFETY: as for `Send`.
unsafe impl Sync for Qp {}

impl Pd {
    /// `ibv_create_qp` in this PD.
    pub fn create_qp(&self, attr: &QpInitAttr<'_>) -> io::Result<Qp> {
        let mut init = sys::ibv_qp_init_attr {
            qp_context: attr.qp_context as *mut libc::c_void,
            send_cq: attr.send_cq.as_ptr(),
            recv_cq: attr.recv_cq.as_ptr(),
            srq: attr.srq.map_or(std::ptr::null_mut(), |s| s.as_ptr()),
            cap: ibv_cap(&attr.cap),
            qp_type: match attr.qp_type {
                QpType::Rc => sys::ibv_qp_type_IBV_QPT_RC,
                QpType::Ud => sys::ibv_qp_type_IBV_QPT_UD,
            },
            sq_sig_all: i32::from(attr.sq_sig_all),
        };
        // SAFETY: the PD and CQs exist (the QP keeps them), `init` is complete; libibverbs
        // writes the actual capabilities back into it.
        let ptr = non_null(unsafe { sys::ibv_create_qp(self.as_ptr(), &mut init) })?;
        Ok(Qp {
            ptr,
            cap: cap_of(&init.cap),
            pd: self.inner.clone(),
            _send_cq: attr.send_cq.inner.clone(),
            _recv_cq: attr.recv_cq.inner.clone(),
            _srq: attr.srq.map(|s| s.inner.clone()),
            live: true,
        })
    }
}

impl Qp {
    /// The `ibv_qp` pointer, for calls this crate does not wrap.
    pub fn as_ptr(&self) -> *mut sys::ibv_qp {
        self.ptr.as_ptr()
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: the QP exists.
        unsafe { (*self.as_ptr()).qp_num }
    }

    /// The capabilities `ibv_create_qp` gave.
    pub fn cap(&self) -> QpCap {
        self.cap
    }

    /// The PD the QP is in.
    pub fn pd(&self) -> Pd {
        Pd {
            inner: self.pd.clone(),
        }
    }

    /// `ibv_modify_qp` with the attributes `attr_mask` ([`qp_attr`]) names.
    pub fn modify(&self, attr: &QpAttr, attr_mask: u32) -> io::Result<()> {
        let mut a = ibv_attr(attr);
        // SAFETY: the QP exists and `a` is complete.
        check(unsafe { sys::ibv_modify_qp(self.as_ptr(), &mut a, attr_mask as i32) })
    }

    /// `ibv_query_qp` of every attribute.
    pub fn query(&self) -> io::Result<QpQuery> {
        // SAFETY: all-zero bytes are valid for both structures (integers, arrays, null
        // pointers).
        let (mut a, mut init): (sys::ibv_qp_attr, sys::ibv_qp_init_attr) =
            unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        // Every attribute libibverbs knows (it refuses bits it does not with EOPNOTSUPP).
        let mask = sys::ibv_qp_attr_mask_IBV_QP_RATE_LIMIT - 1;
        // SAFETY: the QP exists and both structures are writable.
        check(unsafe { sys::ibv_query_qp(self.as_ptr(), &mut a, mask as i32, &mut init) })?;
        Ok(QpQuery {
            attr: attr_of(&a),
            cap: cap_of(&init.cap),
            sq_sig_all: init.sq_sig_all != 0,
        })
    }

    /// The QP's state as the device reports it.
    pub fn state(&self) -> io::Result<QpState> {
        let s = self.query()?.attr.qp_state;
        QpState::from_raw(s).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, format!("unknown QP state {s}"))
        })
    }

    /// Takes an RC QP from RESET through INIT and RTR to RTS, connected to QP `dest_qpn`,
    /// with libibverbs' required attributes for each transition: addressed by the port's LID
    /// without a global route (InfiniBand), or at the GID of `c.grh`.
    pub fn connect(&self, dest_qpn: u32, c: &ConnectAttr) -> io::Result<()> {
        // SAFETY: the QP's context is open as long as the QP.
        let ctx = unsafe { (*self.as_ptr()).context };
        // SAFETY: all-zero bytes are a valid `ibv_port_attr`.
        let mut port: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open and `port` a whole `ibv_port_attr`.
        check(unsafe { sys::___ibv_query_port(ctx, 1, &mut port) })?;
        let mut a = QpAttr {
            qp_state: QpState::Init as u32,
            pkey_index: 0,
            port_num: 1,
            qp_access_flags: c.access,
            ..Default::default()
        };
        self.modify(
            &a,
            qp_attr::STATE | qp_attr::PKEY_INDEX | qp_attr::PORT | qp_attr::ACCESS_FLAGS,
        )?;
        a.qp_state = QpState::Rtr as u32;
        a.path_mtu = if c.path_mtu == 0 {
            port.active_mtu
        } else {
            c.path_mtu
        };
        a.dest_qp_num = dest_qpn;
        a.rq_psn = c.rq_psn;
        a.max_dest_rd_atomic = c.max_dest_rd_atomic.unwrap_or(c.max_rd_atomic);
        a.min_rnr_timer = c.min_rnr_timer;
        a.dlid = port.lid.into();
        if let Some(g) = &c.grh {
            pfnic_verbs::set_global_route(&mut a, g);
        }
        self.modify(
            &a,
            qp_attr::STATE
                | qp_attr::AV
                | qp_attr::PATH_MTU
                | qp_attr::DEST_QPN
                | qp_attr::RQ_PSN
                | qp_attr::MAX_DEST_RD_ATOMIC
                | qp_attr::MIN_RNR_TIMER,
        )?;
        a.qp_state = QpState::Rts as u32;
        a.sq_psn = c.sq_psn;
        a.timeout = c.timeout;
        a.retry_cnt = c.retry_cnt;
        a.rnr_retry = c.rnr_retry;
        a.max_rd_atomic = c.max_rd_atomic;
        self.modify(
            &a,
            qp_attr::STATE
                | qp_attr::TIMEOUT
                | qp_attr::RETRY_CNT
                | qp_attr::RNR_RETRY
                | qp_attr::SQ_PSN
                | qp_attr::MAX_QP_RD_ATOMIC,
        )
    }

    /// `ibv_post_send` of `wrs`, as one list. UD work requests go through
    /// [`Qp::post_send_ud`] (`EINVAL` here: they need an `ibv_ah`).
    pub fn post_send(&self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        if let Some(i) = wrs.iter().position(|wr| wr.ud.is_some()) {
            return Err(PostError {
                bad_wr: i,
                error: io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        self.post_send_list(wrs, |_| {})
    }

    /// `ibv_post_send` of `wrs` as one list, `ud` filling in each one's destination.
    pub(crate) fn post_send_list(
        &self,
        wrs: &[SendWr<'_>],
        ud: impl Fn(&mut sys::ibv_send_wr),
    ) -> Result<(), PostError> {
        let sges: Vec<Vec<sys::ibv_sge>> = wrs.iter().map(|wr| ibv_sges(wr.sg_list)).collect();
        let mut list = Vec::with_capacity(wrs.len());
        for (i, wr) in wrs.iter().enumerate() {
            // SAFETY: all-zero bytes are a valid `ibv_send_wr` (integers, unions of integers,
            // null pointers).
            let mut w: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
            w.wr_id = wr.wr_id;
            w.sg_list = sges[i].as_ptr().cast_mut();
            w.num_sge = sges[i].len() as i32;
            w.opcode = wr.opcode as u32;
            w.send_flags = wr.send_flags;
            w.__bindgen_anon_1.imm_data = wr.imm_data;
            match wr.opcode {
                crate::WrOpcode::AtomicCmpAndSwp | crate::WrOpcode::AtomicFetchAndAdd => {
                    w.wr.atomic.remote_addr = wr.remote_addr;
                    w.wr.atomic.rkey = wr.rkey;
                    w.wr.atomic.compare_add = wr.compare_add;
                    w.wr.atomic.swap = wr.swap;
                }
                _ => {
                    w.wr.rdma.remote_addr = wr.remote_addr;
                    w.wr.rdma.rkey = wr.rkey;
                }
            }
            ud(&mut w);
            list.push(w);
        }
        let base = list.as_mut_ptr();
        for i in 1..list.len() {
            // SAFETY: `i - 1` and `i` are inside `list`, which does not move until the post.
            unsafe { (*base.add(i - 1)).next = base.add(i) };
        }
        if list.is_empty() {
            return Ok(());
        }
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP exists; the list and its SGE arrays live until the call returns
        // (libibverbs copies what it keeps).
        let rc = unsafe { sys::ibv_post_send(self.as_ptr(), base, &mut bad) };
        post_result(rc, bad.cast_const(), base.cast_const())
    }

    /// `ibv_post_recv` of `wrs`, as one list.
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        post_recv_list(wrs, |base, bad| {
            // SAFETY: the QP exists; the list is valid for the call.
            unsafe { sys::ibv_post_recv(self.as_ptr(), base, bad) }
        })
    }

    /// `ibv_destroy_qp`; the QP back with the errno on failure.
    pub fn destroy(mut self) -> Result<(), (Qp, io::Error)> {
        // SAFETY: the QP exists; on success it is not used again (dropped below).
        match check(unsafe { sys::ibv_destroy_qp(self.as_ptr()) }) {
            Ok(()) => {
                // Destroyed: the drop lets go of the rest only.
                self.live = false;
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        if self.live {
            // SAFETY: the QP exists and is not used after this.
            unsafe { sys::ibv_destroy_qp(self.as_ptr()) };
        }
    }
}

/// Posts `wrs` as one list of `ibv_recv_wr` through `post` (given the list and where to put
/// the failing one), which must not keep the list.
pub(crate) fn post_recv_list(
    wrs: &[RecvWr<'_>],
    post: impl FnOnce(*mut sys::ibv_recv_wr, *mut *mut sys::ibv_recv_wr) -> libc::c_int,
) -> Result<(), PostError> {
    let sges: Vec<Vec<sys::ibv_sge>> = wrs.iter().map(|wr| ibv_sges(wr.sg_list)).collect();
    let mut list: Vec<sys::ibv_recv_wr> = wrs
        .iter()
        .zip(&sges)
        .map(|(wr, s)| sys::ibv_recv_wr {
            wr_id: wr.wr_id,
            next: std::ptr::null_mut(),
            sg_list: s.as_ptr().cast_mut(),
            num_sge: s.len() as i32,
        })
        .collect();
    if list.is_empty() {
        return Ok(());
    }
    let base = list.as_mut_ptr();
    for i in 1..list.len() {
        // SAFETY: `i - 1` and `i` are inside `list`, which does not move until the post.
        unsafe { (*base.add(i - 1)).next = base.add(i) };
    }
    let mut bad = std::ptr::null_mut();
    let rc = post(base, &mut bad);
    post_result(rc, bad.cast_const(), base.cast_const())
}

fn ibv_sges(sges: &[crate::Sge]) -> Vec<sys::ibv_sge> {
    sges.iter()
        .map(|s| sys::ibv_sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        })
        .collect()
}

/// A post's result: the failing work request's index in the list from `bad`.
fn post_result<T>(rc: libc::c_int, bad: *const T, base: *const T) -> Result<(), PostError> {
    if rc == 0 {
        return Ok(());
    }
    let bad_wr = if bad.is_null() {
        0
    } else {
        // SAFETY: libibverbs points `bad` at an element of the list starting at `base`.
        usize::try_from(unsafe { bad.offset_from(base) }).unwrap_or(0)
    };
    let errno = if rc > 0 { rc } else { libc::EINVAL };
    Err(PostError {
        bad_wr,
        error: io::Error::from_raw_os_error(errno),
    })
}
