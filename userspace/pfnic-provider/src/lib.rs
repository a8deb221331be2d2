//! The data path of pfnic's rdma-core provider (`libpfnic-rdmav34.so`).
//!
//! The provider's C part (`userspace/rdma-provider/pfnic.c`) creates every object through the
//! RDMA core and hands the driver's answers here; this part maps the rings from the uverbs
//! file and posts and polls on them with `pfnic-verbs`, the same code as pfnic's own tools
//! and tests, converting libibverbs' work requests and completions:
//!
//! - `ffi.rs`: the C structures of rdma-core's `<infiniband/verbs.h>` the provider reads and
//!   writes, checked against rdma-core's headers by the build script;
//! - `cq.rs`: the attributes of `ibv_create_cq_ex`, and polling completions into `ibv_wc`;
//! - `qp.rs`: the attributes of `ibv_create_qp_ex`, and posting send and receive work
//!   requests;
//! - `inline.rs`: inline data (`IBV_SEND_INLINE`), copied into slots the device reads;
//! - `qp_ex.rs`: the work request builder of an extended QP (`ibv_wr_*`);
//! - `clock.rs`: the device clock (`ibv_query_rt_values_ex`).
//!
//! Each object is a box the C part holds as an opaque pointer (`struct pfnic_rs_*`), created
//! by a `*_new` function (NULL and `errno` on failure) and freed by the matching `*_free`.
//! The functions follow libibverbs' return conventions for the verbs they implement.

mod clock;
mod cq;
mod ffi;
mod inline;
mod qp;
mod qp_ex;

use core::ffi::{c_int, c_void};
use std::io::{self, Write as _};
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::{Mutex, MutexGuard};

use pfnic_sys::uapi::{IbAllocDmResp, IbCreateCqResp, IbCreateQpResp, IbCreateSrqResp};
use pfnic_verbs::{Context, Cq, DmMap, Qp, QpCap, QpInitAttr, Srq};

use crate::clock::rt_values;
use crate::cq::{check_cq_init_attr_ex, poll_into, wc_to_ibv};
use crate::ffi::{
    ibv_cq_init_attr_ex, ibv_qp_cap, ibv_qp_ex, ibv_qp_init_attr_ex, ibv_recv_wr, ibv_send_wr,
    ibv_values_ex, ibv_wc,
};
use crate::inline::{InlineRing, MAX_INLINE_DATA};
use crate::qp::{check_qp_init_attr_ex, post_list, post_send_on, recv_wr_of};
use crate::qp_ex::{install, QpExHost, WrBuilder};

/// A user context: the doorbell page, and the port's LID that receives report.
pub struct PfnicRsContext {
    ctx: Context,
    lid: u16,
}

/// A CQ's ring.
pub struct PfnicRsCq {
    cq: Cq,
    lid: u16,
}

/// A QP's queues, its inline slots when it was asked for inline data, and the work request
/// builder of an extended QP (`ibv_wr_*`).
pub struct PfnicRsQp {
    qp: Qp,
    inline: Option<InlineRing>,
    wr: WrBuilder,
    /// A UD QP: its work requests name address handles.
    ud: bool,
}

extern "C" {
    /// The data path (a `PfnicRsQp`) of an extended QP of the provider (`pfnic.c`).
    fn pfnic_qp_ex_rs(qp: *mut ibv_qp_ex) -> *mut c_void;
}

impl QpExHost for PfnicRsQp {
    unsafe fn host<'a>(qp: *mut ibv_qp_ex) -> &'a Self {
        // SAFETY: the caller passes a live extended QP of the provider, whose data path lives
        // as long as it does.
        unsafe { &*pfnic_qp_ex_rs(qp).cast::<PfnicRsQp>() }
    }

    fn wr_builder(&self) -> &WrBuilder {
        &self.wr
    }

    fn send_qp(&self) -> Option<&Qp> {
        Some(&self.qp)
    }

    fn inline_ring(&self) -> Option<&InlineRing> {
        self.inline.as_ref()
    }

    fn ud(&self) -> bool {
        self.ud
    }
}

/// An SRQ's queue.
pub struct PfnicRsSrq {
    srq: Srq,
}

/// A device memory allocation's mapping.
pub struct PfnicRsDm {
    dm: DmMap,
}

/// The errno an `io::Error` carries (`EIO` for one that carries none).
fn errno_of(e: &io::Error) -> c_int {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Sets the calling thread's `errno` to `e`'s.
fn set_errno(e: &io::Error) {
    // SAFETY: `__errno_location` returns the calling thread's `errno`, always valid to write.
    unsafe { *libc::__errno_location() = errno_of(e) };
}

/// Locks `m`, ignoring poisoning: a panic aborts the process, so a poisoned lock is never
/// seen, and the data behind every lock here stays consistent between statements anyway.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Boxes `r`'s value for C, or returns NULL with `errno` set.
fn into_c<T>(r: io::Result<T>) -> *mut T {
    match r {
        Ok(v) => Box::into_raw(Box::new(v)),
        Err(e) => {
            set_errno(&e);
            core::ptr::null_mut()
        }
    }
}

/// Drops a box made by [`into_c`].
///
/// # Safety
///
/// `p` is NULL or a box of `T` from [`into_c`], not used after this.
unsafe fn free_c<T>(p: *mut T) {
    if !p.is_null() {
        // SAFETY: guaranteed by the caller.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// The memory mode `PFNIC_MEM_MODE` in the environment asks for, into `*mode`
/// (`PFNIC_MEM_MODE_*`, 0 when it is not set, for the driver's default): 0, or `EINVAL` with
/// one line on stderr for a name that is no mode. The names are `pfnic-verbs`' own.
///
/// # Safety
///
/// `mode` is writable.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_env_mem_mode(mode: *mut u32) -> c_int {
    let raw = match std::env::var_os(pfnic_verbs::MEM_MODE_ENV) {
        None => 0,
        Some(name) => match pfnic_verbs::MemMode::parse(&name.to_string_lossy()) {
            Ok(m) => m.raw(),
            Err(_) => {
                // A library does not end its caller's process because stderr is closed.
                let _ = writeln!(
                    io::stderr(),
                    "pfnic: {}={:?} is not a memory mode (sva, pinned or odp)",
                    pfnic_verbs::MEM_MODE_ENV,
                    name
                );
                return libc::EINVAL;
            }
        },
    };
    // SAFETY: guaranteed by the caller.
    unsafe { *mode = raw };
    0
}

/// The environment variable that chooses what a receive fault does on the QPs a process
/// creates on a device with a wire (docs/wire.md, "Receive faults"): `rnr` (or unset) answers
/// the sender with an RNR NAK, `backup` parks the payload in the driver's backup buffer.
const RECV_FAULT_ENV: &str = "PFNIC_RECV_FAULT";

/// The `pfnic_ib_create_qp_req.flags` [`RECV_FAULT_ENV`] asks for, into `*flags`, for a
/// context whose port has a wire (`wire` nonzero; without one no receive faults on the
/// wire, so no flag): 0, or `EINVAL` with one line on stderr for another value.
///
/// # Safety
///
/// `flags` is writable.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_env_recv_fault(wire: c_int, flags: *mut u32) -> c_int {
    let backup = match std::env::var_os(RECV_FAULT_ENV) {
        None => false,
        Some(v) if v == "rnr" => false,
        Some(v) if v == "backup" => true,
        Some(v) => {
            let _ = writeln!(
                io::stderr(),
                "pfnic: {RECV_FAULT_ENV}={v:?} is neither rnr nor backup"
            );
            return libc::EINVAL;
        }
    };
    let f = if backup && wire != 0 {
        pfnic_sys::uapi::PFNIC_QP_CREATE_RECV_FAULT_BACKUP
    } else {
        0
    };
    // SAFETY: guaranteed by the caller.
    unsafe { *flags = f };
    0
}

/// A context over the uverbs file `cmd_fd` (duplicated: libibverbs keeps its own), of a
/// device with `PFNIC_CAP_*` `caps` whose port has LID `lid`.
///
/// # Safety
///
/// `cmd_fd` is an open file descriptor for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_context_new(
    cmd_fd: c_int,
    caps: u64,
    lid: u16,
) -> *mut PfnicRsContext {
    // SAFETY: the caller passes an open descriptor, borrowed only to duplicate it.
    let fd = unsafe { BorrowedFd::borrow_raw(cmd_fd as RawFd) };
    into_c(
        fd.try_clone_to_owned()
            .and_then(|fd| Context::from_core(fd, caps))
            .map(|ctx| PfnicRsContext { ctx, lid }),
    )
}

/// # Safety
///
/// `ctx` is NULL or from [`pfnic_rs_context_new`], its CQs and QPs freed before.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_context_free(ctx: *mut PfnicRsContext) {
    // SAFETY: forwarded to the caller.
    unsafe { free_c(ctx) }
}

/// The mapped doorbell page.
///
/// # Safety
///
/// `ctx` is from [`pfnic_rs_context_new`].
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_context_doorbell(ctx: *const PfnicRsContext) -> *mut c_void {
    // SAFETY: forwarded to the caller.
    unsafe { (*ctx).ctx.doorbell_ptr().cast() }
}

/// Maps the ring of a CQ of at least `cqe` entries that the core created, `layout` the
/// driver's answer.
///
/// # Safety
///
/// `ctx` is from [`pfnic_rs_context_new`] and outlives the CQ; `layout` is readable.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_cq_new(
    ctx: *const PfnicRsContext,
    layout: *const IbCreateCqResp,
    cqe: u32,
) -> *mut PfnicRsCq {
    // SAFETY: forwarded to the caller.
    let (c, l) = unsafe { (&*ctx, &*layout) };
    into_c(Cq::from_core(&c.ctx, l, cqe).map(|cq| PfnicRsCq { cq, lid: c.lid }))
}

/// # Safety
///
/// `cq` is NULL or from [`pfnic_rs_cq_new`], its QPs freed before.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_cq_free(cq: *mut PfnicRsCq) {
    // SAFETY: forwarded to the caller.
    unsafe { free_c(cq) }
}

/// The mapped ring.
///
/// # Safety
///
/// `cq` is from [`pfnic_rs_cq_new`].
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_cq_ring(cq: *const PfnicRsCq) -> *mut c_void {
    // SAFETY: forwarded to the caller.
    unsafe { (*cq).cq.ring_ptr().cast() }
}

/// Removes QP `qp_num`'s completions from `cq` (the QP was reset); how many.
///
/// # Safety
///
/// `cq` is from [`pfnic_rs_cq_new`].
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_cq_clean(cq: *const PfnicRsCq, qp_num: u32) -> c_int {
    // SAFETY: forwarded to the caller.
    let n = unsafe { &*cq }.cq.clean_qp(qp_num);
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

/// `ibv_poll_cq`: up to `num_entries` completions into `wc`; how many, or `-EINVAL`.
///
/// # Safety
///
/// `cq` is from [`pfnic_rs_cq_new`]; `wc` has room for `num_entries` entries.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_poll_cq(
    cq: *const PfnicRsCq,
    num_entries: c_int,
    wc: *mut ibv_wc,
) -> c_int {
    // SAFETY: forwarded to the caller.
    let c = unsafe { &*cq };
    // SAFETY: forwarded to the caller.
    unsafe { poll_into(&c.cq, num_entries, wc, c.lid) }
}

/// The extended poll (`ibv_start_poll`, `ibv_next_poll`): the next completion into `*wc` and
/// the device clock when it was written into `*ts` (0 on a CQ without timestamps); 1, or 0
/// when there is none.
///
/// # Safety
///
/// `cq` is from [`pfnic_rs_cq_new`]; `wc` and `ts` are writable.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_poll_one(
    cq: *const PfnicRsCq,
    wc: *mut ibv_wc,
    ts: *mut u64,
) -> c_int {
    // SAFETY: forwarded to the caller.
    let c = unsafe { &*cq };
    let mut one = [pfnic_verbs::Wc::default()];
    if c.cq.poll(&mut one) == 0 {
        return 0;
    }
    // SAFETY: forwarded to the caller.
    unsafe {
        wc.write(wc_to_ibv(&one[0], c.lid));
        ts.write(one[0].completion_ts);
    }
    1
}

/// What `ibv_create_cq_ex` asks of a device with `PFNIC_CAP_*` `caps`: 1 for completion
/// timestamps, 0 without, or a negative errno value for what pfnic refuses (`EOPNOTSUPP` for
/// timestamps on a device without a clock).
///
/// # Safety
///
/// `attr` is readable.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_cq_ex_timestamps(
    attr: *const ibv_cq_init_attr_ex,
    caps: u64,
) -> c_int {
    // SAFETY: forwarded to the caller.
    match check_cq_init_attr_ex(unsafe { &*attr }) {
        Ok(true) if caps & pfnic_sys::uapi::PFNIC_CAP_TIMESTAMPS == 0 => -libc::EOPNOTSUPP,
        Ok(t) => c_int::from(t),
        Err(e) => -e,
    }
}

/// `ibv_req_notify_cq`: the CQ's next completion (the next solicited one with
/// `solicited_only`) raises a completion event on its channel. 0 or an errno value.
///
/// # Safety
///
/// `cq` is from [`pfnic_rs_cq_new`].
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_req_notify_cq(
    cq: *const PfnicRsCq,
    solicited_only: c_int,
) -> c_int {
    // SAFETY: forwarded to the caller.
    match unsafe { &*cq }.cq.req_notify(solicited_only != 0) {
        Ok(()) => 0,
        Err(e) => errno_of(&e),
    }
}

/// Maps the queue of an SRQ the core created with `max_wr` work requests of `max_sge` SGEs,
/// `layout` the driver's answer.
///
/// # Safety
///
/// `ctx` is from [`pfnic_rs_context_new`] and outlives the SRQ; `layout` is readable.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_srq_new(
    ctx: *const PfnicRsContext,
    layout: *const IbCreateSrqResp,
    max_wr: u32,
    max_sge: u32,
) -> *mut PfnicRsSrq {
    // SAFETY: forwarded to the caller.
    let (c, l) = unsafe { (&*ctx, &*layout) };
    into_c(Srq::from_core(&c.ctx, l, max_wr, max_sge).map(|srq| PfnicRsSrq { srq }))
}

/// # Safety
///
/// `srq` is NULL or from [`pfnic_rs_srq_new`], its QPs freed before.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_srq_free(srq: *mut PfnicRsSrq) {
    // SAFETY: forwarded to the caller.
    unsafe { free_c(srq) }
}

/// `ibv_post_srq_recv`: as [`pfnic_rs_post_recv`], for the SRQ.
///
/// # Safety
///
/// As [`pfnic_rs_post_send`], with `srq` from [`pfnic_rs_srq_new`].
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_post_srq_recv(
    srq: *const PfnicRsSrq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: forwarded to the caller.
    let q = unsafe { srq.as_ref() }.map(|s| &s.srq);
    // SAFETY: the caller's work requests and their SGE lists.
    let convert = |w: &ibv_recv_wr| unsafe { recv_wr_of(w) };
    // SAFETY: forwarded to the caller.
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

/// Maps the queues of a QP (RC, or UD if `ud`) the core created with number `qpn` and
/// capabilities `cap` on these CQs (and SRQ, or NULL), `layout` the driver's answer.
///
/// # Safety
///
/// The CQs are from [`pfnic_rs_cq_new`], the SRQ NULL or from [`pfnic_rs_srq_new`], and they
/// outlive the QP; `cap` and `layout` are readable.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_qp_new(
    send_cq: *const PfnicRsCq,
    recv_cq: *const PfnicRsCq,
    srq: *const PfnicRsSrq,
    qpn: u32,
    cap: *const ibv_qp_cap,
    sq_sig_all: c_int,
    ud: c_int,
    layout: *const IbCreateQpResp,
) -> *mut PfnicRsQp {
    // SAFETY: forwarded to the caller.
    let (s, r, c, l) = unsafe { (&*send_cq, &*recv_cq, &*cap, &*layout) };
    // SAFETY: forwarded to the caller.
    let srq = unsafe { srq.as_ref() }.map(|s| &s.srq);
    let cap = QpCap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    };
    let mut attr = QpInitAttr::new(&s.cq, &r.cq, cap.max_send_wr, cap.max_send_sge);
    attr.cap = cap;
    attr.sq_sig_all = sq_sig_all != 0;
    attr.srq = srq;
    into_c(Qp::from_core(&attr, qpn, cap, l).map(|qp| PfnicRsQp {
        qp,
        inline: None,
        wr: WrBuilder::default(),
        ud: ud != 0,
    }))
}

/// The bytes of inline slots the QP needs ([`pfnic_rs_qp_set_inline`]).
///
/// # Safety
///
/// `qp` is from [`pfnic_rs_qp_new`].
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_qp_inline_bytes(qp: *const PfnicRsQp) -> usize {
    // SAFETY: forwarded to the caller.
    InlineRing::bytes_for(unsafe { &*qp }.qp.cap().max_send_wr)
}

/// The inline payload a work request may carry (`cap.max_inline_data`).
#[no_mangle]
pub extern "C" fn pfnic_rs_max_inline_data() -> u32 {
    MAX_INLINE_DATA
}

/// Gives the QP inline slots: [`pfnic_rs_qp_inline_bytes`] bytes at `addr`, registered through
/// the RDMA core on the QP's PD under `lkey`. `IBV_SEND_INLINE` work requests are then copied
/// there at posting; without, they fail with `EINVAL`.
///
/// # Safety
///
/// `qp` is from [`pfnic_rs_qp_new`], not yet shared with another thread; the memory stays
/// allocated and registered, and untouched by anyone else, until the QP is freed.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_qp_set_inline(qp: *mut PfnicRsQp, addr: *mut c_void, lkey: u32) {
    // SAFETY: forwarded to the caller.
    let q = unsafe { &mut *qp };
    let depth = q.qp.cap().max_send_wr;
    // SAFETY: forwarded to the caller: the memory is lent for the ring's life.
    q.inline = Some(unsafe { InlineRing::lent(addr.cast(), lkey, depth) });
}

/// # Safety
///
/// `qp` is NULL or from [`pfnic_rs_qp_new`].
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_qp_free(qp: *mut PfnicRsQp) {
    // SAFETY: forwarded to the caller.
    unsafe { free_c(qp) }
}

/// `ibv_post_send`: 0, or an errno value with `*bad_wr` the first work request not posted.
///
/// # Safety
///
/// `qp` is from [`pfnic_rs_qp_new`]; `wr` is NULL or a valid list of work requests whose SGE
/// lists are readable; `bad_wr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_post_send(
    qp: *const PfnicRsQp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: forwarded to the caller.
    let rs = unsafe { qp.as_ref() };
    let ring = rs.and_then(|r| r.inline.as_ref());
    // SAFETY: forwarded to the caller.
    let ud = rs.is_some_and(|r| r.ud);
    // SAFETY: forwarded to the caller.
    unsafe { post_send_on(rs.map(|r| &r.qp), ring, ud, wr, bad_wr) }
}

/// `ibv_post_recv`: as [`pfnic_rs_post_send`], for the receive queue.
///
/// # Safety
///
/// As [`pfnic_rs_post_send`].
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_post_recv(
    qp: *const PfnicRsQp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: forwarded to the caller.
    let q = unsafe { qp.as_ref() }.map(|q| &q.qp);
    // SAFETY: the caller's work requests and their SGE lists.
    let convert = |w: &ibv_recv_wr| unsafe { recv_wr_of(w) };
    // SAFETY: forwarded to the caller.
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

/// Maps device memory of `length` bytes that the core allocated, `layout` the driver's answer.
///
/// # Safety
///
/// `ctx` is from [`pfnic_rs_context_new`]; `layout` is readable.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_dm_new(
    ctx: *const PfnicRsContext,
    layout: *const IbAllocDmResp,
    length: u64,
) -> *mut PfnicRsDm {
    // SAFETY: forwarded to the caller.
    let (c, l) = unsafe { (&*ctx, &*layout) };
    into_c(DmMap::from_core(&c.ctx, l, length).map(|dm| PfnicRsDm { dm }))
}

/// # Safety
///
/// `dm` is NULL or from [`pfnic_rs_dm_new`].
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_dm_free(dm: *mut PfnicRsDm) {
    // SAFETY: forwarded to the caller.
    unsafe { free_c(dm) }
}

/// The unit of the device memory copies' offsets and lengths, in bytes.
const DM_GRANULE: usize = pfnic_sys::uapi::PFNIC_DM_ALIGN as usize;

/// `ibv_memcpy_to_dm`: 0, or `EINVAL` for a range outside the allocation, or an offset or a
/// length that is not a multiple of 4 (what rdma-core's own tests want of any device with
/// device memory: mlx5's rule).
///
/// # Safety
///
/// `dm` is from [`pfnic_rs_dm_new`]; `src` is readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_dm_copy_to(
    dm: *const PfnicRsDm,
    offset: u64,
    src: *const c_void,
    len: usize,
) -> c_int {
    if !len.is_multiple_of(DM_GRANULE) {
        return libc::EINVAL;
    }
    let data = if len == 0 {
        &[][..]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { core::slice::from_raw_parts(src.cast::<u8>(), len) }
    };
    // SAFETY: forwarded to the caller.
    match unsafe { &*dm }.dm.copy_to(offset, data) {
        Ok(()) => 0,
        Err(e) => errno_of(&e),
    }
}

/// `ibv_memcpy_from_dm`: as [`pfnic_rs_dm_copy_to`], the other way.
///
/// # Safety
///
/// `dm` is from [`pfnic_rs_dm_new`]; `dst` is writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_dm_copy_from(
    dm: *const PfnicRsDm,
    dst: *mut c_void,
    offset: u64,
    len: usize,
) -> c_int {
    if !len.is_multiple_of(DM_GRANULE) {
        return libc::EINVAL;
    }
    let out = if len == 0 {
        &mut [][..]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { core::slice::from_raw_parts_mut(dst.cast::<u8>(), len) }
    };
    // SAFETY: forwarded to the caller.
    match unsafe { &*dm }.dm.copy_from(offset, out) {
        Ok(()) => 0,
        Err(e) => errno_of(&e),
    }
}

/// `ibv_create_qp_ex`'s attribute rules beyond the PD: 1 for an extended QP
/// (`IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`), 0 for a plain one, or a negative errno value.
///
/// # Safety
///
/// `attr` is readable.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_check_qp_init_attr_ex(attr: *const ibv_qp_init_attr_ex) -> c_int {
    // SAFETY: forwarded to the caller.
    match check_qp_init_attr_ex(unsafe { &*attr }) {
        Ok(extended) => c_int::from(extended),
        Err(e) => -e,
    }
}

/// Installs the work request builder (`ibv_wr_*`) in an extended QP of the provider.
///
/// # Safety
///
/// `qp` is the `qp_ex` of a provider QP whose data path `pfnic_qp_ex_rs` finds.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_qp_ex_install(qp: *mut ibv_qp_ex) {
    // SAFETY: forwarded to the caller.
    install::<PfnicRsQp>(unsafe { &mut *qp });
}

/// `ibv_query_rt_values_ex`: the device clock from the doorbell page. 0 or an errno value.
///
/// # Safety
///
/// `ctx` is from [`pfnic_rs_context_new`]; `values` is readable and writable.
#[no_mangle]
pub unsafe extern "C" fn pfnic_rs_query_rt_values(
    ctx: *const PfnicRsContext,
    values: *mut ibv_values_ex,
) -> c_int {
    // SAFETY: forwarded to the caller.
    rt_values(unsafe { &(*ctx).ctx }, unsafe { &mut *values })
}
