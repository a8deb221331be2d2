//! The extended QP: libibverbs' work request builder (`ibv_wr_start`, one `ibv_wr_<opcode>`
//! per work request with its `ibv_wr_set_sge`/`ibv_wr_set_sge_list`, `ibv_wr_complete` or
//! `ibv_wr_abort`) over the QP's send queue: on RC QPs every operation of `ibv_post_send`, on
//! UD QPs SEND and SEND with immediate to the destination `ibv_wr_set_ud_addr` names.
//!
//! A batch is built in the QP's data path and handed to the send queue at `ibv_wr_complete`,
//! as `ibv_post_send` hands a list. The builder belongs to one thread from `ibv_wr_start` to
//! `ibv_wr_complete`/`ibv_wr_abort` (another thread's `ibv_wr_start` waits), as libibverbs'
//! providers lock it. Mistakes made while building (an operation pfnic does not have, data
//! set before any operation, an inline payload longer than `max_inline_data` or on a READ or
//! atomic) make `ibv_wr_complete` fail with nothing of the batch posted; a work request the
//! send queue refuses (`EINVAL`: too many SGEs, bad flags; `ENOMEM` when it is full) fails it
//! with the requests before it posted, as `ibv_post_send` does. Inline payloads
//! (`ibv_wr_set_inline_data`) are copied when they are set, and into the QP's inline slots
//! when the batch is posted.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, Ordering};

use pfnic_verbs::{Qp, SendWr, Sge, UdDest, WrOpcode};

use crate::ffi::{ibv_ah, ibv_data_buf, ibv_qp_ex, ibv_sge};
use crate::inline::{carries_payload, InlinePost, InlineRing, MAX_INLINE_DATA, SEND_INLINE};
use crate::qp::ud_dest;

/// `IBV_QPS_RESET`.
const QPS_RESET: c_int = 0;

/// `enum ibv_qp_create_send_ops_flags` that pfnic has: the opcodes of `ibv_post_send`.
pub(crate) const SEND_OPS_SUPPORTED: u64 = 0x7f;

/// The builder of an extended QP: whose thread builds, and its batch.
#[derive(Default)]
pub(crate) struct WrBuilder {
    /// Held by the thread building a batch (`ibv_wr_start` .. `ibv_wr_complete`).
    building: AtomicBool,
    /// The batch; only the holder of `building` uses it.
    builder: UnsafeCell<Builder>,
}

// SAFETY: the batch is used only by the thread that holds `building` (see the module).
unsafe impl Sync for WrBuilder {}

/// What the builder needs of the QP object around the `ibv_qp_ex` libibverbs hands to the
/// builder's entries (the provider's data path of the QP).
pub(crate) trait QpExHost {
    /// The owner of `qp`.
    ///
    /// # Safety
    ///
    /// `qp` is an extended QP of this host, alive for `'a`.
    unsafe fn host<'a>(qp: *mut ibv_qp_ex) -> &'a Self;
    /// The QP's builder.
    fn wr_builder(&self) -> &WrBuilder;
    /// The QP to post on, unless it is being destroyed.
    fn send_qp(&self) -> Option<&Qp>;
    /// The QP's inline slots, if it was created with `max_inline_data`.
    fn inline_ring(&self) -> Option<&InlineRing>;
    /// Whether it is a UD QP, whose work requests name their destination
    /// (`ibv_wr_set_ud_addr`).
    fn ud(&self) -> bool;
}

/// One work request of a batch.
#[derive(Clone)]
struct Pending {
    wr_id: u64,
    opcode: WrOpcode,
    send_flags: u32,
    imm_data: u32,
    remote_addr: u64,
    rkey: u32,
    compare_add: u64,
    swap: u64,
    sges: Vec<Sge>,
    /// The payload set with `wr_set_inline_data(_list)`, copied at posting.
    inline: Option<Vec<u8>>,
    /// A UD QP's destination, set with `wr_set_ud_addr`.
    ud: Option<UdDest>,
}

/// The batch being built.
#[derive(Default)]
struct Builder {
    wrs: Vec<Pending>,
    /// The first mistake made while building (0: none).
    error: c_int,
}

impl Builder {
    fn clear(&mut self) {
        self.wrs.clear();
        self.error = 0;
    }

    fn fail(&mut self, e: c_int) {
        if self.error == 0 {
            self.error = e;
        }
    }
}

/// The host of `qp` and its builder.
///
/// # Safety
///
/// `qp` is an extended QP of `H`, and the caller the thread building on it (between
/// `wr_start` and `wr_complete`/`wr_abort`).
unsafe fn builder<'a, H: QpExHost>(qp: *mut ibv_qp_ex) -> (&'a H, &'a mut Builder) {
    // SAFETY: the caller passes a live extended QP.
    let w = unsafe { H::host(qp) };
    // SAFETY: the calling thread holds `building`, under which only it uses the builder.
    let b = unsafe { &mut *w.wr_builder().builder.get() };
    (w, b)
}

/// Starts a work request of `opcode` with the QP's current `wr_id` and `wr_flags`.
///
/// # Safety
///
/// As [`builder`].
unsafe fn push<H: QpExHost>(qp: *mut ibv_qp_ex, opcode: WrOpcode, f: impl FnOnce(&mut Pending)) {
    // SAFETY: the caller's QP, which it builds on.
    let (_, b) = unsafe { builder::<H>(qp) };
    // SAFETY: `wr_id` and `wr_flags` are the caller's to set between calls; read here.
    let (wr_id, send_flags) = unsafe { ((*qp).wr_id, (*qp).wr_flags) };
    let mut p = Pending {
        wr_id,
        opcode,
        send_flags,
        imm_data: 0,
        remote_addr: 0,
        rkey: 0,
        compare_add: 0,
        swap: 0,
        sges: Vec::new(),
        inline: None,
        ud: None,
    };
    f(&mut p);
    b.wrs.push(p);
}

/// `ibv_qp_ex.wr_start`: a new batch, this thread's until it is completed or aborted.
///
/// # Safety
///
/// `qp` is an extended QP of `H`.
unsafe extern "C" fn wr_start<H: QpExHost>(qp: *mut ibv_qp_ex) {
    // SAFETY: the caller passes a live extended QP.
    let w = unsafe { H::host(qp) }.wr_builder();
    while w
        .building
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
    // SAFETY: `building` is held by this thread now.
    unsafe { (*w.builder.get()).clear() };
}

/// Ends the batch: clears it and releases the builder.
fn finish<H: QpExHost>(w: &H, b: &mut Builder) {
    b.clear();
    w.wr_builder().building.store(false, Ordering::Release);
}

/// `ibv_qp_ex.wr_complete`: posts the batch. 0, or an errno value (see the module).
///
/// # Safety
///
/// `qp` is an extended QP of `H` this thread builds on.
unsafe extern "C" fn wr_complete<H: QpExHost>(qp: *mut ibv_qp_ex) -> c_int {
    // SAFETY: the caller's QP, which it builds on.
    let (w, b) = unsafe { builder::<H>(qp) };
    // SAFETY: libibverbs keeps the QP's state in its `ibv_qp`, read between its verbs.
    let reset = unsafe { (*qp).qp_base.state } == QPS_RESET;
    let r = match w.send_qp() {
        _ if b.error != 0 => b.error,
        // A QP in the RESET state takes no work request (C10-97.2.1).
        _ if reset => libc::EINVAL,
        // A UD work request is a SEND that goes nowhere without its destination.
        _ if w.ud()
            && b.wrs.iter().any(|p| {
                p.ud.is_none() || !matches!(p.opcode, WrOpcode::Send | WrOpcode::SendWithImm)
            }) =>
        {
            libc::EINVAL
        }
        Some(q) => post(w, q, &b.wrs),
        None => libc::EINVAL,
    };
    finish(w, b);
    r
}

/// The work request `p` describes. `IBV_SEND_INLINE` in `wr_flags` means nothing here: a
/// payload is inline when `ibv_wr_set_inline_data` set it.
fn send_wr(p: &Pending) -> SendWr<'_> {
    SendWr {
        wr_id: p.wr_id,
        opcode: p.opcode,
        send_flags: p.send_flags & !SEND_INLINE,
        sg_list: &p.sges,
        imm_data: p.imm_data,
        remote_addr: p.remote_addr,
        rkey: p.rkey,
        compare_add: p.compare_add,
        swap: p.swap,
        ud: p.ud,
    }
}

/// Posts a batch; with inline payloads, through the QP's inline ring (see `inline.rs`).
fn post<H: QpExHost>(w: &H, q: &Qp, wrs: &[Pending]) -> c_int {
    let r = if wrs.iter().any(|p| p.inline.is_some()) {
        // Inline data on a QP created without `max_inline_data`.
        let Some(ring) = w.inline_ring() else {
            return libc::EINVAL;
        };
        let posts: Vec<InlinePost<'_>> = wrs
            .iter()
            .map(|p| InlinePost {
                wr: Some(send_wr(p)),
                // An inline payload's SGE describes the batch's own copy of it.
                payload: p.inline.as_ref().map(|_| &p.sges[..]),
            })
            .collect();
        // SAFETY: the payloads are this batch's own copies, readable.
        unsafe { ring.post(q, &posts) }
    } else {
        q.post_send_iter(wrs.iter().map(|p| Some(send_wr(p))))
            .map_err(|e| (e.bad_wr, e.errno()))
    };
    r.err().map_or(0, |(_, e)| e)
}

/// `ibv_qp_ex.wr_abort`: drops the batch.
///
/// # Safety
///
/// As [`wr_complete`].
unsafe extern "C" fn wr_abort<H: QpExHost>(qp: *mut ibv_qp_ex) {
    // SAFETY: the caller's QP, which it builds on.
    let (w, b) = unsafe { builder::<H>(qp) };
    finish(w, b);
}

/// `ibv_qp_ex.wr_rdma_write`.
///
/// # Safety
///
/// As [`wr_complete`].
unsafe extern "C" fn wr_rdma_write<H: QpExHost>(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: forwarded to the caller.
    unsafe {
        push::<H>(qp, WrOpcode::RdmaWrite, |p| {
            p.rkey = rkey;
            p.remote_addr = remote_addr;
        })
    };
}

/// `ibv_qp_ex.wr_rdma_write_imm`.
///
/// # Safety
///
/// As [`wr_complete`].
unsafe extern "C" fn wr_rdma_write_imm<H: QpExHost>(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    imm: u32,
) {
    // SAFETY: forwarded to the caller.
    unsafe {
        push::<H>(qp, WrOpcode::RdmaWriteWithImm, |p| {
            p.rkey = rkey;
            p.remote_addr = remote_addr;
            p.imm_data = imm;
        })
    };
}

/// `ibv_qp_ex.wr_rdma_read`.
///
/// # Safety
///
/// As [`wr_complete`].
unsafe extern "C" fn wr_rdma_read<H: QpExHost>(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: forwarded to the caller.
    unsafe {
        push::<H>(qp, WrOpcode::RdmaRead, |p| {
            p.rkey = rkey;
            p.remote_addr = remote_addr;
        })
    };
}

/// `ibv_qp_ex.wr_send`.
///
/// # Safety
///
/// As [`wr_complete`].
unsafe extern "C" fn wr_send<H: QpExHost>(qp: *mut ibv_qp_ex) {
    // SAFETY: forwarded to the caller.
    unsafe { push::<H>(qp, WrOpcode::Send, |_| {}) };
}

/// `ibv_qp_ex.wr_send_imm`.
///
/// # Safety
///
/// As [`wr_complete`].
unsafe extern "C" fn wr_send_imm<H: QpExHost>(qp: *mut ibv_qp_ex, imm: u32) {
    // SAFETY: forwarded to the caller.
    unsafe { push::<H>(qp, WrOpcode::SendWithImm, |p| p.imm_data = imm) };
}

/// `ibv_qp_ex.wr_atomic_cmp_swp`.
///
/// # Safety
///
/// As [`wr_complete`].
unsafe extern "C" fn wr_atomic_cmp_swp<H: QpExHost>(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    // SAFETY: forwarded to the caller.
    unsafe {
        push::<H>(qp, WrOpcode::AtomicCmpAndSwp, |p| {
            p.rkey = rkey;
            p.remote_addr = remote_addr;
            p.compare_add = compare;
            p.swap = swap;
        })
    };
}

/// `ibv_qp_ex.wr_atomic_fetch_add`.
///
/// # Safety
///
/// As [`wr_complete`].
unsafe extern "C" fn wr_atomic_fetch_add<H: QpExHost>(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    // SAFETY: forwarded to the caller.
    unsafe {
        push::<H>(qp, WrOpcode::AtomicFetchAndAdd, |p| {
            p.rkey = rkey;
            p.remote_addr = remote_addr;
            p.compare_add = add;
        })
    };
}

/// Sets the data of the batch's last work request (`EINVAL` at completion if there is none).
///
/// # Safety
///
/// As [`wr_complete`].
unsafe fn set_sges<H: QpExHost>(qp: *mut ibv_qp_ex, sges: impl Iterator<Item = Sge>) {
    // SAFETY: the caller's QP, which it builds on.
    let (_, b) = unsafe { builder::<H>(qp) };
    match b.wrs.last_mut() {
        Some(p) => {
            p.sges.clear();
            p.sges.extend(sges);
            p.inline = None;
        }
        None => b.fail(libc::EINVAL),
    }
}

/// `ibv_qp_ex.wr_set_sge`.
///
/// # Safety
///
/// As [`wr_complete`].
unsafe extern "C" fn wr_set_sge<H: QpExHost>(
    qp: *mut ibv_qp_ex,
    lkey: u32,
    addr: u64,
    length: u32,
) {
    // SAFETY: forwarded to the caller.
    unsafe { set_sges::<H>(qp, core::iter::once(Sge { addr, length, lkey })) };
}

/// `ibv_qp_ex.wr_set_sge_list`.
///
/// # Safety
///
/// As [`wr_complete`]; `sg_list` holds `num_sge` readable entries.
unsafe extern "C" fn wr_set_sge_list<H: QpExHost>(
    qp: *mut ibv_qp_ex,
    num_sge: usize,
    sg_list: *const ibv_sge,
) {
    if num_sge > 0 && sg_list.is_null() {
        // SAFETY: the caller's QP, which it builds on.
        unsafe { builder::<H>(qp) }.1.fail(libc::EINVAL);
        return;
    }
    let list = if num_sge == 0 {
        &[][..]
    } else {
        // SAFETY: the caller passes `num_sge` readable entries.
        unsafe { core::slice::from_raw_parts(sg_list, num_sge) }
    };
    let sges = list.iter().map(|s| Sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    });
    // SAFETY: forwarded to the caller.
    unsafe { set_sges::<H>(qp, sges) };
}

/// Sets the inline payload of the batch's last work request: the concatenation of
/// `bufs`, copied now (`EINVAL` at completion if there is no work request, or the payload is
/// longer than `max_inline_data`).
///
/// # Safety
///
/// As [`wr_complete`]; each buffer is readable.
unsafe fn set_inline<H: QpExHost>(qp: *mut ibv_qp_ex, bufs: &[(*const u8, usize)]) {
    // SAFETY: the caller's QP, which it builds on.
    let (_, b) = unsafe { builder::<H>(qp) };
    let total: usize = bufs.iter().map(|&(_, n)| n).sum();
    let Some(p) = b.wrs.last_mut() else {
        b.fail(libc::EINVAL);
        return;
    };
    // Checked now, so that a batch with a bad one posts nothing.
    if total > MAX_INLINE_DATA as usize || !carries_payload(p.opcode) {
        b.fail(libc::EINVAL);
        return;
    }
    let mut data = Vec::with_capacity(total);
    for &(addr, n) in bufs.iter().filter(|&&(_, n)| n > 0) {
        // SAFETY: the caller's readable buffer.
        data.extend_from_slice(unsafe { core::slice::from_raw_parts(addr, n) });
    }
    // The SGE of the copy (its heap buffer stays put when the batch's vector grows).
    p.sges.clear();
    p.sges.push(Sge {
        addr: data.as_ptr() as u64,
        length: u32::try_from(total).unwrap_or(u32::MAX),
        lkey: 0,
    });
    p.inline = Some(data);
}

/// `ibv_qp_ex.wr_set_inline_data`.
///
/// # Safety
///
/// As [`set_inline`].
unsafe extern "C" fn wr_set_inline_data<H: QpExHost>(
    qp: *mut ibv_qp_ex,
    addr: *mut c_void,
    length: usize,
) {
    // SAFETY: forwarded to the caller.
    unsafe { set_inline::<H>(qp, &[(addr.cast_const().cast(), length)]) };
}

/// `ibv_qp_ex.wr_set_inline_data_list`.
///
/// # Safety
///
/// As [`set_inline`]; `buf_list` holds `num_buf` readable entries.
unsafe extern "C" fn wr_set_inline_data_list<H: QpExHost>(
    qp: *mut ibv_qp_ex,
    num_buf: usize,
    buf_list: *const ibv_data_buf,
) {
    if num_buf > 0 && buf_list.is_null() {
        // SAFETY: the caller's QP, which it builds on.
        unsafe { builder::<H>(qp) }.1.fail(libc::EINVAL);
        return;
    }
    let list = if num_buf == 0 {
        &[][..]
    } else {
        // SAFETY: the caller passes `num_buf` readable entries.
        unsafe { core::slice::from_raw_parts(buf_list, num_buf) }
    };
    let bufs: Vec<(*const u8, usize)> = list
        .iter()
        .map(|d| (d.addr.cast_const().cast(), d.length))
        .collect();
    // SAFETY: forwarded to the caller.
    unsafe { set_inline::<H>(qp, &bufs) };
}

/// `ibv_qp_ex.wr_set_ud_addr`: the destination of the last work request of a UD QP (`ah`,
/// the remote QP and its Q_Key). `EINVAL` at completion without a work request or an AH,
/// `EOPNOTSUPP` on a QP of another type.
///
/// # Safety
///
/// As [`wr_complete`]; `ah` is NULL or a live address handle of this provider, until the
/// batch is completed or aborted (as for `ibv_post_send`).
unsafe extern "C" fn wr_set_ud_addr<H: QpExHost>(
    qp: *mut ibv_qp_ex,
    ah: *mut ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    // SAFETY: the caller's QP, which it builds on.
    let (w, b) = unsafe { builder::<H>(qp) };
    if !w.ud() {
        return b.fail(libc::EOPNOTSUPP);
    }
    if ah.is_null() {
        return b.fail(libc::EINVAL);
    }
    match b.wrs.last_mut() {
        // SAFETY: the caller passes a live address handle of this provider.
        Some(p) => p.ud = Some(unsafe { ud_dest(ah, remote_qpn, remote_qkey) }),
        None => b.fail(libc::EINVAL),
    }
}

/// Defines builder entries for what pfnic does not have: each makes `ibv_wr_complete` fail
/// with `EOPNOTSUPP` (a QP that asked for them was refused at creation, so only a program
/// calling them anyway gets here).
macro_rules! unsupported {
    ($($name:ident($($arg:ident: $t:ty),*);)*) => {$(
        /// An `ibv_qp_ex` operation pfnic does not have (see [`unsupported!`]).
        ///
        /// # Safety
        ///
        /// As [`wr_complete`].
        unsafe extern "C" fn $name<H: QpExHost>(qp: *mut ibv_qp_ex, $(_: $t),*) {
            // SAFETY: the caller's QP, which it builds on.
            unsafe { builder::<H>(qp) }.1.fail(libc::EOPNOTSUPP);
        }
    )*};
}

unsupported! {
    wr_bind_mw(mw: *mut c_void, rkey: u32, info: *const c_void);
    wr_local_inv(rkey: u32);
    wr_send_inv(rkey: u32);
    wr_send_tso(hdr: *mut c_void, hdr_sz: u16, mss: u16);
    wr_set_xrc_srqn(srqn: u32);
    wr_atomic_write(rkey: u32, addr: u64, data: *const c_void);
}

/// The builder's entries in `qp`, for QPs of `H`.
pub(crate) fn install<H: QpExHost>(qp: &mut ibv_qp_ex) {
    qp.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp::<H>);
    qp.wr_atomic_fetch_add = Some(wr_atomic_fetch_add::<H>);
    qp.wr_bind_mw = Some(wr_bind_mw::<H>);
    qp.wr_local_inv = Some(wr_local_inv::<H>);
    qp.wr_rdma_read = Some(wr_rdma_read::<H>);
    qp.wr_rdma_write = Some(wr_rdma_write::<H>);
    qp.wr_rdma_write_imm = Some(wr_rdma_write_imm::<H>);
    qp.wr_send = Some(wr_send::<H>);
    qp.wr_send_imm = Some(wr_send_imm::<H>);
    qp.wr_send_inv = Some(wr_send_inv::<H>);
    qp.wr_send_tso = Some(wr_send_tso::<H>);
    qp.wr_set_ud_addr = Some(wr_set_ud_addr::<H>);
    qp.wr_set_xrc_srqn = Some(wr_set_xrc_srqn::<H>);
    qp.wr_set_inline_data = Some(wr_set_inline_data::<H>);
    qp.wr_set_inline_data_list = Some(wr_set_inline_data_list::<H>);
    qp.wr_set_sge = Some(wr_set_sge::<H>);
    qp.wr_set_sge_list = Some(wr_set_sge_list::<H>);
    qp.wr_start = Some(wr_start::<H>);
    qp.wr_complete = Some(wr_complete::<H>);
    qp.wr_abort = Some(wr_abort::<H>);
    qp.wr_atomic_write = Some(wr_atomic_write::<H>);
}
