//! RC queue pairs: create, modify, query, destroy, and posting work requests.

use core::cell::UnsafeCell;
use core::ffi::c_int;
use std::io::Write as _;

use pfnic_verbs::{qp_attr, PostError, Qp, QpAttr, QpInitAttr, QpState, RecvWr, SendWr, WrOpcode};

use crate::async_event::AsyncAcks;
use crate::cq::{cq_wrap, CqWrap};
use crate::ffi::*;
use crate::inline::{InlinePost, InlineRing, MAX_INLINE_DATA, SEND_INLINE};
use crate::mr::pd_wrap;
use crate::qp_ex::{QpExHost, WrBuilder, SEND_OPS_SUPPORTED};
use crate::srq::srq_wrap;
use crate::{errno_of, into_c, set_errno, sges, unbox};

/// `IBV_QPT_RC`, the only QP type.
const QPT_RC: c_int = pfnic_verbs::pfnic_sys::uapi::PFNIC_QPT_RC as c_int;

/// `struct ibv_qp` (the first part of a `struct ibv_qp_ex`, which `ibv_qp_to_qp_ex` hands out
/// for a QP created with extended send operations) and the QP behind it.
#[repr(C)]
pub(crate) struct QpWrap {
    /// C reads it; `state` changes with `ibv_modify_qp`/`ibv_query_qp` (which libibverbs does
    /// not serialize either), `wr_id` and `wr_flags` are the builder's caller's, the rest is
    /// set before the QP is handed out.
    ibv: UnsafeCell<ibv_qp_ex>,
    /// `None` until `ibv_create_qp` has it, and while `ibv_destroy_qp` hands it to the driver:
    /// only those write it, while the caller does not use the QP (but `ibv_ack_async_event`,
    /// which does not read it), so shared references never see it change.
    qp: UnsafeCell<Option<Qp>>,
    /// Its asynchronous events acknowledged.
    async_acks: AsyncAcks,
    /// Created by `ibv_create_qp_ex` with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
    extended: bool,
    /// The extended QP's builder (`ibv_wr_*`).
    wr: WrBuilder,
    /// The inline slots, for a QP created with `cap.max_inline_data`.
    pub(crate) inline: Option<InlineRing>,
}

impl QpExHost for QpWrap {
    unsafe fn host<'a>(qp: *mut ibv_qp_ex) -> &'a Self {
        // SAFETY: an `ibv_qp_ex` of this library is the first field of its `QpWrap`; the
        // caller passes a live one.
        unsafe { &*qp.cast::<QpWrap>() }
    }

    fn wr_builder(&self) -> &WrBuilder {
        &self.wr
    }

    fn send_qp(&self) -> Option<&Qp> {
        self.qp()
    }

    fn inline_ring(&self) -> Option<&InlineRing> {
        self.inline.as_ref()
    }
}

/// The live QP behind `qp`.
///
/// # Safety
///
/// `qp` is NULL or a QP this library created and not yet destroyed.
unsafe fn qp_wrap<'a>(qp: *mut ibv_qp) -> Option<&'a QpWrap> {
    // SAFETY: `ibv` (an `UnsafeCell`, transparent) is the first field of the `#[repr(C)]`
    // `QpWrap` that `ibv_create_qp` boxed; the caller guarantees it is alive.
    unsafe { qp.cast::<QpWrap>().as_ref() }
}

impl QpWrap {
    /// The QP, unless it is being destroyed.
    pub(crate) fn qp(&self) -> Option<&Qp> {
        // SAFETY: only creation and `ibv_destroy_qp` write the cell, never while the QP is
        // otherwise used (see the field).
        unsafe { (*self.qp.get()).as_ref() }
    }

    /// Records the state C reads in `ibv_qp::state`.
    fn set_state(&self, state: c_int) {
        // SAFETY: a plain integer store into the `UnsafeCell`; C readers race with it as they
        // do with libibverbs.
        unsafe { (*self.ibv.get()).qp_base.state = state };
    }
}

fn cap_from(c: &ibv_qp_cap) -> pfnic_verbs::QpCap {
    pfnic_verbs::QpCap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

fn cap_to(c: &pfnic_verbs::QpCap) -> ibv_qp_cap {
    ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// `ibv_create_qp`: an RC QP in RESET. `qp_init_attr->cap` gets the actual capabilities.
/// Other QP types and shared receive queues fail with `EOPNOTSUPP`.
///
/// # Safety
///
/// `pd` is NULL or a live PD of this library; `qp_init_attr` is NULL or valid for reads and
/// writes, its CQs live CQs of this library.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: the caller passes a live PD or NULL, and a valid attribute structure or NULL.
    let (Some(Some(p)), Some(init)) = (unsafe { pd_wrap(pd) }.map(|w| w.pd.as_ref()), unsafe {
        qp_init_attr.as_mut()
    }) else {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    };
    if init.qp_type != QPT_RC {
        set_errno(libc::EOPNOTSUPP);
        return core::ptr::null_mut();
    }
    // SAFETY: the caller passes NULL or a live SRQ.
    let srq = match unsafe { srq_wrap(init.srq) } {
        None => None,
        Some(s) => match s.srq() {
            Some(s) => Some(s),
            None => {
                set_errno(libc::EINVAL);
                return core::ptr::null_mut();
            }
        },
    };
    // Inline data is the library's (see `inline.rs`): the device is asked for none.
    if init.cap.max_inline_data > MAX_INLINE_DATA {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    }
    let want_inline = init.cap.max_inline_data > 0;
    let mut device_cap = init.cap;
    device_cap.max_inline_data = 0;
    // SAFETY: the caller passes live CQs (or NULL).
    let (Some(Some(scq)), Some(Some(rcq))) = (
        unsafe { cq_wrap(init.send_cq) }.map(CqWrap::cq),
        unsafe { cq_wrap(init.recv_cq) }.map(CqWrap::cq),
    ) else {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    };
    // The wrapper first: its address is the QP's handle in its asynchronous events.
    // SAFETY: `ibv_qp_ex` is pointers, integers, `Option`al function pointers (all zeroes:
    // NULL, 0, `None`) and glibc's mutex and condition variable, whose initializers are all
    // zeroes.
    let wrap = into_c(QpWrap {
        ibv: UnsafeCell::new(unsafe { core::mem::zeroed() }),
        qp: UnsafeCell::new(None),
        async_acks: AsyncAcks::default(),
        extended: false,
        wr: WrBuilder::default(),
        inline: None,
    });
    let fail = |e: c_int| {
        // SAFETY: `wrap` was boxed above and never handed out.
        unsafe { unbox(wrap) };
        set_errno(e);
        core::ptr::null_mut()
    };
    let attr = QpInitAttr {
        send_cq: scq,
        recv_cq: rcq,
        cap: cap_from(&device_cap),
        sq_sig_all: init.sq_sig_all != 0,
        recv_fault_backup: recv_fault_backup(p),
        srq,
        qp_context: wrap as usize as u64,
    };
    let qp = match p.create_qp(&attr) {
        Ok(qp) => qp,
        Err(e) => return fail(errno_of(&e)),
    };
    let inline = if want_inline {
        match InlineRing::new(p, qp.cap().max_send_wr) {
            Ok(r) => Some(r),
            Err(e) => {
                if let Err((_, e)) = qp.destroy() {
                    // A library does not end its caller's process because stderr is closed.
                    let _ = writeln!(
                        std::io::stderr(),
                        "libibverbs: a QP whose inline slots failed stays: {e}"
                    );
                }
                return fail(errno_of(&e));
            }
        }
    } else {
        None
    };
    init.cap = cap_to(&qp.cap());
    if inline.is_some() {
        init.cap.max_inline_data = MAX_INLINE_DATA;
    }
    // SAFETY: `wrap` was boxed above and is not shared yet.
    let w = unsafe { &mut *wrap };
    w.ibv.get_mut().qp_base = ibv_qp {
        // SAFETY: the caller passes a live PD.
        context: unsafe { (*pd).context },
        qp_context: init.qp_context,
        pd,
        send_cq: init.send_cq,
        recv_cq: init.recv_cq,
        srq: init.srq,
        handle: qp.qp_num(),
        qp_num: qp.qp_num(),
        state: QpState::Reset as c_int,
        qp_type: QPT_RC,
        mutex: libc::PTHREAD_MUTEX_INITIALIZER,
        cond: libc::PTHREAD_COND_INITIALIZER,
        events_completed: 0,
    };
    *w.qp.get_mut() = Some(qp);
    w.inline = inline;
    wrap.cast()
}

/// `enum ibv_qp_init_attr_mask`: `PD`, `CREATE_FLAGS`, `SEND_OPS_FLAGS` (what pfnic takes);
/// every bit libibverbs defines.
const QP_INIT_ATTR_PD: u32 = 1;
const QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
const QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;
const QP_INIT_ATTR_ALL: u32 = (1 << 7) - 1;

/// The rules of `ibv_create_qp_ex`'s attributes beyond the PD, pfnic's library's and its
/// provider's: whether the QP is extended (`IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`), `EINVAL` for
/// `comp_mask` bits libibverbs does not define, `EOPNOTSUPP` for what pfnic does not have
/// (XRC, TSO, RSS, creation flags, send operations beyond `ibv_post_send`'s).
pub fn check_qp_init_attr_ex(a: &ibv_qp_init_attr_ex) -> Result<bool, c_int> {
    if a.comp_mask & !QP_INIT_ATTR_ALL != 0 {
        return Err(libc::EINVAL);
    }
    let supported = QP_INIT_ATTR_PD | QP_INIT_ATTR_CREATE_FLAGS | QP_INIT_ATTR_SEND_OPS_FLAGS;
    let extended = a.comp_mask & QP_INIT_ATTR_SEND_OPS_FLAGS != 0;
    if a.comp_mask & !supported != 0
        || (a.comp_mask & QP_INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0)
        || (extended && a.send_ops_flags & !SEND_OPS_SUPPORTED != 0)
    {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(extended)
}

/// `verbs_context.create_qp_ex` (what `ibv_create_qp_ex` calls for anything beyond a PD): an
/// RC QP as `ibv_create_qp` makes, extended (`ibv_qp_to_qp_ex`) with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`. NULL with `errno`: `EINVAL` without a PD of `context`
/// or for unknown `comp_mask` bits; `EOPNOTSUPP` for what pfnic does not have (XRC, TSO,
/// RSS, creation flags, send operations beyond `ibv_post_send`'s).
///
/// # Safety
///
/// `context` is NULL or a live context; `attr` is NULL or valid for reads and writes, its PD
/// and CQs live objects of this library.
pub(crate) unsafe extern "C" fn create_qp_ex(
    context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    let fail = |e| {
        set_errno(e);
        core::ptr::null_mut()
    };
    // SAFETY: the caller passes NULL or a valid attribute structure.
    let Some(a) = (unsafe { attr.as_mut() }) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: the caller passes NULL or a live PD.
    if a.comp_mask & QP_INIT_ATTR_PD == 0 || a.pd.is_null() || unsafe { (*a.pd).context } != context
    {
        return fail(libc::EINVAL);
    }
    let extended = match check_qp_init_attr_ex(a) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    // SAFETY: `ibv_qp_init_attr_ex` begins with the fields of `ibv_qp_init_attr`, laid out
    // alike (both checked against rdma-core's header); the caller's PD is live.
    let qp = unsafe { ibv_create_qp(a.pd, core::ptr::from_mut(a).cast()) };
    if extended && !qp.is_null() {
        // SAFETY: `qp` was just made by `ibv_create_qp`, not handed out yet.
        let w = unsafe { &mut *qp.cast::<QpWrap>() };
        w.extended = true;
        crate::qp_ex::install::<QpWrap>(w.ibv.get_mut());
    }
    qp
}

/// `ibv_modify_qp`: 0 or an errno value (`EINVAL` for a transition, or a set of attributes,
/// that libibverbs' RC rules do not allow).
///
/// # Safety
///
/// `qp` is NULL or a live QP of this library; `attr` is NULL or valid for a read.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    // SAFETY: the caller passes a live QP or NULL, and a readable attribute structure or NULL.
    let (Some(w), Some(a)) = (unsafe { qp_wrap(qp) }, unsafe { attr.as_ref() }) else {
        return libc::EINVAL;
    };
    let Some(q) = w.qp() else {
        return libc::EINVAL;
    };
    let arg = QpAttr {
        qp_state: a.qp_state as u32,
        cur_qp_state: a.cur_qp_state as u32,
        path_mtu: a.path_mtu as u32,
        qp_access_flags: a.qp_access_flags,
        pkey_index: a.pkey_index.into(),
        port_num: a.port_num.into(),
        dest_qp_num: a.dest_qp_num,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        min_rnr_timer: a.min_rnr_timer.into(),
        timeout: a.timeout.into(),
        retry_cnt: a.retry_cnt.into(),
        rnr_retry: a.rnr_retry.into(),
        max_rd_atomic: a.max_rd_atomic.into(),
        max_dest_rd_atomic: a.max_dest_rd_atomic.into(),
        dlid: a.ah_attr.dlid.into(),
        sl: a.ah_attr.sl.into(),
        is_global: a.ah_attr.is_global.into(),
        sgid_index: a.ah_attr.grh.sgid_index.into(),
        hop_limit: a.ah_attr.grh.hop_limit.into(),
        traffic_class: a.ah_attr.grh.traffic_class.into(),
        flow_label: a.ah_attr.grh.flow_label,
        dgid: a.ah_attr.grh.dgid.raw,
        reserved: [0; 2],
    };
    match q.modify(&arg, attr_mask as u32) {
        Ok(()) => {
            if attr_mask as u32 & qp_attr::STATE != 0 {
                w.set_state(a.qp_state);
            }
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// `ibv_query_qp`: the QP's attributes (`qp_state` is the device's current state) and its
/// creation attributes. All attributes are returned whatever `attr_mask` asks. 0 or an errno
/// value.
///
/// # Safety
///
/// `qp` is NULL or a live QP of this library; `attr` and `init_attr` are NULL or valid for a
/// write.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    let _ = attr_mask;
    // SAFETY: the caller passes a live QP or NULL.
    let Some(w) = (unsafe { qp_wrap(qp) }) else {
        return libc::EINVAL;
    };
    let Some(q) = w.qp() else {
        return libc::EINVAL;
    };
    if attr.is_null() || init_attr.is_null() {
        return libc::EINVAL;
    }
    let r = match q.query() {
        Ok(r) => r,
        Err(e) => return errno_of(&e),
    };
    let a = r.attr;
    // SAFETY: `ibv_qp_attr` is plain integers: all zeroes is valid.
    let mut out: ibv_qp_attr = unsafe { core::mem::zeroed() };
    out.qp_state = a.qp_state as c_int;
    out.cur_qp_state = a.qp_state as c_int;
    out.path_mtu = a.path_mtu as c_int;
    out.qp_access_flags = a.qp_access_flags;
    out.pkey_index = a.pkey_index as u16;
    out.port_num = a.port_num as u8;
    out.dest_qp_num = a.dest_qp_num;
    out.rq_psn = a.rq_psn;
    out.sq_psn = a.sq_psn;
    out.min_rnr_timer = a.min_rnr_timer as u8;
    out.timeout = a.timeout as u8;
    out.retry_cnt = a.retry_cnt as u8;
    out.rnr_retry = a.rnr_retry as u8;
    out.max_rd_atomic = a.max_rd_atomic as u8;
    out.max_dest_rd_atomic = a.max_dest_rd_atomic as u8;
    out.ah_attr.dlid = a.dlid as u16;
    out.ah_attr.sl = a.sl as u8;
    out.ah_attr.port_num = a.port_num as u8;
    out.ah_attr.is_global = a.is_global as u8;
    out.ah_attr.grh = ibv_global_route {
        dgid: ibv_gid { raw: a.dgid },
        flow_label: a.flow_label,
        sgid_index: a.sgid_index as u8,
        hop_limit: a.hop_limit as u8,
        traffic_class: a.traffic_class as u8,
    };
    out.cap = cap_to(&r.cap);
    if w.inline.is_some() {
        out.cap.max_inline_data = MAX_INLINE_DATA;
    }
    let cap = out.cap;
    w.set_state(out.qp_state);
    // SAFETY: these fields are set before the QP is handed out and never written again.
    let (qp_context, send_cq, recv_cq, srq) = unsafe {
        let i = &(*w.ibv.get()).qp_base;
        (i.qp_context, i.send_cq, i.recv_cq, i.srq)
    };
    // SAFETY: the caller passes writable structures.
    unsafe {
        attr.write(out);
        init_attr.write(ibv_qp_init_attr {
            qp_context,
            send_cq,
            recv_cq,
            srq,
            cap,
            qp_type: QPT_RC,
            sq_sig_all: c_int::from(r.sq_sig_all != 0),
        });
    }
    0
}

/// `ibv_destroy_qp`: 0 or an errno value (the QP stays on failure). Waits until every
/// asynchronous event handed out for it was acknowledged, as libibverbs does.
///
/// # Safety
///
/// `qp` is NULL or a live QP of this library; on success it is not used afterwards.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    // SAFETY: the caller passes a live QP (or NULL). Other threads may still acknowledge its
    // events, so the wrapper is only shared.
    let Some(w) = (unsafe { qp_wrap(qp) }) else {
        return libc::EINVAL;
    };
    // SAFETY: nothing else uses the QP while it is destroyed (but `ibv_ack_async_event`,
    // which does not touch this cell).
    let slot = unsafe { &mut *w.qp.get() };
    let ret = w.async_acks.destroy(slot, Qp::destroy);
    if ret == 0 {
        // SAFETY: the boxed `QpWrap`, which the caller no longer uses.
        unsafe { unbox(qp.cast::<QpWrap>()) };
    }
    ret
}

/// The acknowledgements of QP `qp`'s asynchronous events.
///
/// # Safety
///
/// `qp` is NULL or a QP this library created and not yet freed.
pub(crate) unsafe fn qp_acks<'a>(qp: *mut ibv_qp) -> Option<&'a AsyncAcks> {
    // SAFETY: forwarded to the caller.
    unsafe { qp_wrap(qp) }.map(|w| &w.async_acks)
}

/// `ibv_qp_to_qp_ex`: the extended QP of a QP made by `ibv_create_qp_ex` with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`, NULL for others.
///
/// # Safety
///
/// `qp` is NULL or a live QP of this library.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    // SAFETY: the caller passes NULL or a live QP.
    match unsafe { qp_wrap(qp) } {
        Some(w) if w.extended => qp.cast(),
        _ => core::ptr::null_mut(),
    }
}

/// What `ibv_post_send`, `ibv_post_recv` and `ibv_post_srq_recv` share: hands the NULL-terminated list at `first`
/// (linked by `next`) to `post` one work request at a time, converted with `convert` (`None`:
/// a work request the device cannot take, `EINVAL`), and reports the first work request not
/// posted in `*bad_wr`. Those before it are posted, as a provider does. Nothing is allocated:
/// the list is read as it is posted.
///
/// # Safety
///
/// `first` is NULL or a valid list of work requests; `bad_wr` is NULL or valid for a write.
pub unsafe fn post_list<N, W, T>(
    q: Option<&T>,
    first: *mut N,
    bad_wr: *mut *mut N,
    next: impl Fn(&N) -> *mut N,
    convert: impl FnMut(&N) -> Option<W>,
    post: impl FnOnce(&T, &mut dyn Iterator<Item = Option<W>>) -> Result<(), PostError>,
) -> c_int {
    let fail = |at: *mut N, e: c_int| {
        if !bad_wr.is_null() {
            // SAFETY: the caller passes NULL or a writable `bad_wr`.
            unsafe { *bad_wr = at };
        }
        e
    };
    let Some(q) = q else {
        return fail(first, libc::EINVAL);
    };
    let mut p = first;
    let mut wrs = core::iter::from_fn(|| {
        // SAFETY: the caller passes a valid NULL-terminated list; each node is read, not kept.
        let w = unsafe { p.as_ref() }?;
        p = next(w);
        Some(w)
    })
    .map(convert);
    match post(q, &mut wrs) {
        Ok(()) => 0,
        Err(e) => {
            // The node of the work request at index `e.bad_wr`.
            let mut at = first;
            for _ in 0..e.bad_wr {
                // SAFETY: as above; the list is at least `e.bad_wr` long.
                let Some(w) = (unsafe { at.as_ref() }) else {
                    break;
                };
                at = next(w);
            }
            fail(at, e.errno())
        }
    }
}

/// `ops.post_send` (what `ibv_post_send` calls): queues the list of work requests and rings the doorbell; no system call.
/// 0, or an errno value with `*bad_wr` the first work request not posted (`EINVAL`: bad
/// opcode, flags or SGE count; `ENOMEM`: send queue full).
///
/// # Safety
///
/// `qp` is NULL or a live QP of this library; `wr` is NULL or a valid list of work requests;
/// `bad_wr` is NULL or valid for a write.
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: the caller passes a live QP or NULL.
    let wrap = unsafe { qp_wrap(qp) };
    let ring = wrap.and_then(|w| w.inline.as_ref());
    // SAFETY: forwarded to the caller.
    unsafe { post_send_on(wrap.and_then(QpWrap::qp), ring, wr, bad_wr) }
}

/// `ibv_post_send` on `q` (`None`: `EINVAL`), the inline work requests copied through
/// `ring` (without one they fail with `EINVAL`): what pfnic's library and its rdma-core
/// provider both run.
///
/// # Safety
///
/// `wr` is NULL or a valid list of work requests whose SGE lists are readable; `bad_wr` is
/// NULL or valid for a write.
pub unsafe fn post_send_on(
    q: Option<&Qp>,
    ring: Option<&InlineRing>,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    if let (Some(q), Some(ring)) = (q, ring) {
        // SAFETY: the caller passes a valid list or NULL.
        if unsafe { has_inline(wr) } {
            // SAFETY: forwarded to the caller.
            return unsafe { post_send_inline(q, ring, wr, bad_wr) };
        }
    }
    // SAFETY: the caller's work requests and their SGE lists.
    let convert = |w: &ibv_send_wr| unsafe { send_wr_of(w) };
    // SAFETY: the caller passes a valid list or NULL, and NULL or a writable `bad_wr`.
    unsafe {
        post_list(
            q,
            wr,
            bad_wr,
            |w| w.next,
            convert,
            |q, w| q.post_send_iter(w),
        )
    }
}

/// Whether a work request of the list at `wr` has `IBV_SEND_INLINE`.
///
/// # Safety
///
/// `wr` is NULL or a valid list of work requests.
unsafe fn has_inline(mut wr: *const ibv_send_wr) -> bool {
    // SAFETY: the caller passes a valid NULL-terminated list.
    while let Some(w) = unsafe { wr.as_ref() } {
        if w.send_flags & SEND_INLINE != 0 {
            return true;
        }
        wr = w.next;
    }
    false
}

/// A C work request as the uAPI's (`None`: an opcode the device does not have, or a bad SGE
/// list).
///
/// # Safety
///
/// `w.sg_list` holds `w.num_sge` readable entries (or `num_sge` is 0), which outlive the
/// returned work request (`'a`, the caller's to choose, as for [`sges`]).
pub unsafe fn send_wr_of<'a>(w: &ibv_send_wr) -> Option<SendWr<'a>> {
    let opcode = u32::try_from(w.opcode).ok().and_then(WrOpcode::from_raw)?;
    // SAFETY: forwarded to the caller.
    let sg_list = unsafe { sges(w.sg_list, w.num_sge) }.ok()?;
    let (remote_addr, rkey, compare_add, swap) = match opcode {
        WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
            // SAFETY: atomics use the `atomic` member of the union, plain integers.
            let a = unsafe { w.wr.atomic };
            (a.remote_addr, a.rkey, a.compare_add, a.swap)
        }
        _ => {
            // SAFETY: the other opcodes use (or ignore) the `rdma` member, plain integers.
            let r = unsafe { w.wr.rdma };
            (r.remote_addr, r.rkey, 0, 0)
        }
    };
    Some(SendWr {
        wr_id: w.wr_id,
        opcode,
        send_flags: w.send_flags,
        sg_list,
        imm_data: w.imm_data,
        remote_addr,
        rkey,
        compare_add,
        swap,
    })
}

/// `ibv_post_send` of a list with inline work requests: each is posted through the QP's
/// inline ring ([`InlineRing::post`]), the others as they are. As [`post_send`] otherwise.
///
/// # Safety
///
/// As [`post_send`].
unsafe fn post_send_inline(
    q: &Qp,
    ring: &InlineRing,
    first: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    let mut nodes: Vec<&ibv_send_wr> = Vec::new();
    let mut posts: Vec<InlinePost<'_>> = Vec::new();
    let mut p = first;
    // SAFETY: the caller passes a valid NULL-terminated list, not changed during the post.
    while let Some(w) = unsafe { p.as_ref() } {
        p = w.next;
        // SAFETY: the caller's work request and SGE list.
        let wr = unsafe { send_wr_of(w) };
        // An inline payload is the work request's own SGEs, which the CPU reads.
        let payload = wr
            .as_ref()
            .filter(|_| w.send_flags & SEND_INLINE != 0)
            .map(|wr| wr.sg_list);
        nodes.push(w);
        posts.push(InlinePost { wr, payload });
    }
    // SAFETY: the payloads are the caller's SGE ranges, which it lends for the post.
    match unsafe { ring.post(q, &posts) } {
        Ok(()) => 0,
        Err((at, e)) => {
            if !bad_wr.is_null() {
                let at = nodes.get(at).map_or(core::ptr::null_mut(), |w| {
                    core::ptr::from_ref(*w).cast_mut()
                });
                // SAFETY: the caller passes NULL or a writable `bad_wr`.
                unsafe { *bad_wr = at };
            }
            e
        }
    }
}

/// `ops.post_recv` (what `ibv_post_recv` calls): as `ibv_post_send`, for the receive queue.
///
/// # Safety
///
/// As `ibv_post_send`.
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: the caller passes a live QP or NULL.
    let q = unsafe { qp_wrap(qp) }.and_then(QpWrap::qp);
    // SAFETY: the caller's work requests and their SGE lists.
    let convert = |w: &ibv_recv_wr| unsafe { recv_wr_of(w) };
    // SAFETY: the caller passes a valid list or NULL, and NULL or a writable `bad_wr`.
    unsafe {
        post_list(
            q,
            wr,
            bad_wr,
            |w| w.next,
            convert,
            |q, w| q.post_recv_iter(w),
        )
    }
}

/// A receive work request as the library posts it; `None` if its SGE list is unusable.
///
/// # Safety
///
/// `w.sg_list` holds `w.num_sge` readable entries (or the count is 0), alive while the result
/// is.
pub unsafe fn recv_wr_of<'a>(w: &ibv_recv_wr) -> Option<RecvWr<'a>> {
    // SAFETY: forwarded to the caller.
    let sg = unsafe { sges(w.sg_list, w.num_sge) }.ok()?;
    Some(RecvWr {
        wr_id: w.wr_id,
        sg_list: sg,
    })
}

/// `PFNIC_RECV_FAULT=backup` (docs/wire.md, "Receive faults"): the QPs this process creates
/// on a device with a wire park payloads whose page is not present in the driver's backup
/// buffer instead of answering RNR NAK. Unset or `rnr`: RNR NAK.
fn recv_fault_backup(pd: &pfnic_verbs::Pd) -> bool {
    std::env::var_os("PFNIC_RECV_FAULT").is_some_and(|v| v == "backup")
        && pd.context().port_attr().is_ok_and(|p| p.has_wire())
}
