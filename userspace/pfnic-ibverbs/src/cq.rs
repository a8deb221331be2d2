//! Completion channels, completion queues and their events.
//!
//! Each channel is a file of its own, which the driver gives the completion events of the CQs
//! created with it. An event carries the CQ wrapper's address (the `cq_context` the CQ was
//! created with) and its CQN: `ibv_get_cq_event` checks both against the context's live CQs and
//! drops events of CQs destroyed meanwhile.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_uint, c_void};
use core::sync::atomic::{AtomicBool, Ordering};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

use pfnic_verbs::{CompChannel, Cq, CqEvent, Wc, WcOpcode};

use crate::async_event::AsyncAcks;
use crate::device::{ctx_wrap, Shared};
use crate::ffi::*;
use crate::{errno_of, into_c, lock, set_errno, unbox};

/// `struct ibv_comp_channel` and the channel behind it.
#[repr(C)]
struct ChannelWrap {
    /// C reads it; `refcnt` changes under the context's `cqs` lock.
    ibv: UnsafeCell<ibv_comp_channel>,
    chan: CompChannel,
    shared: Arc<Shared>,
}

/// Completion events of one CQ handed out and acknowledged.
#[derive(Default)]
struct EventCount {
    delivered: u32,
    acked: u32,
}

/// `struct ibv_cq` (as the first part of a `struct ibv_cq_ex`: every CQ here is an extended
/// one, whose polling functions `ibv_create_cq_ex` hands out) and the CQ behind it.
#[repr(C)]
pub(crate) struct CqWrap {
    /// C reads it; `comp_events_completed` changes under `events`, `status` and `wr_id` (the
    /// current completion of an extended poll) under `polling`, the rest is set before the
    /// CQ is handed out.
    ibv: UnsafeCell<ibv_cq_ex>,
    /// `None` only while `ibv_destroy_cq` hands it to the driver: only that writes it, and the
    /// caller does not use the CQ meanwhile (except `ibv_ack_cq_events`, which does not read
    /// it), so shared references never see it change.
    cq: UnsafeCell<Option<Cq>>,
    shared: Arc<Shared>,
    events: Mutex<EventCount>,
    /// Signalled by `ibv_ack_cq_events`, for `ibv_destroy_cq` waiting for the acks.
    acked: Condvar,
    /// Its asynchronous events acknowledged (`IBV_EVENT_CQ_ERR`).
    pub(crate) async_acks: AsyncAcks,
    /// Held from `ibv_start_poll` to `ibv_end_poll` (or a `start_poll` that found nothing):
    /// the extended poll of one thread at a time.
    polling: AtomicBool,
    /// The current completion of the extended poll, and its timestamp (0 on a CQ without
    /// timestamps); only the holder of `polling` uses them.
    current: UnsafeCell<ibv_wc>,
    current_ts: UnsafeCell<u64>,
}

/// The CQ wrapper of `cq`.
///
/// # Safety
///
/// `cq` is NULL or a CQ this library created and not yet destroyed.
pub(crate) unsafe fn cq_wrap<'a>(cq: *mut ibv_cq) -> Option<&'a CqWrap> {
    // SAFETY: `ibv` (an `UnsafeCell`, transparent) is the first field of the `#[repr(C)]`
    // `CqWrap` that `ibv_create_cq` boxed; the caller guarantees it is alive.
    unsafe { cq.cast::<CqWrap>().as_ref() }
}

/// A completion as libibverbs reports it, from a device whose port has LID `lid` (the source
/// of every receive: the peer is on this port, or across a wire, where LIDs are 0).
pub fn wc_to_ibv(x: &Wc, lid: u16) -> ibv_wc {
    ibv_wc {
        wr_id: x.wr_id,
        status: x.status.0 as c_int,
        opcode: x.opcode.0 as c_int,
        vendor_err: x.vendor_err,
        byte_len: x.byte_len,
        imm_data: x.imm_data,
        qp_num: x.qp_num,
        src_qp: x.src_qp,
        wc_flags: x.wc_flags,
        pkey_index: 0,
        // Every receive opcode has `IBV_WC_RECV`'s bit.
        slid: if x.opcode.0 & WcOpcode::RECV.0 != 0 {
            lid
        } else {
            0
        },
        sl: 0,
        dlid_path_bits: 0,
    }
}

impl CqWrap {
    /// A completion as libibverbs reports it.
    fn to_ibv(&self, x: &Wc) -> ibv_wc {
        wc_to_ibv(x, self.shared.lid)
    }

    /// The CQ, unless it is being destroyed.
    pub(crate) fn cq(&self) -> Option<&Cq> {
        // SAFETY: only `ibv_destroy_cq` writes the cell, never while the CQ is otherwise used
        // (see the field).
        unsafe { (*self.cq.get()).as_ref() }
    }

    /// The CQ's completion channel (NULL for none).
    fn channel(&self) -> *mut ibv_comp_channel {
        // SAFETY: `channel` is set before the CQ is handed out and never written again.
        unsafe { (*self.ibv.get()).channel }
    }
}

/// `ibv_create_comp_channel`.
///
/// # Safety
///
/// `context` is NULL or a live context of this library.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    };
    match w.shared.ctx.create_comp_channel() {
        Ok(chan) => into_c(ChannelWrap {
            ibv: UnsafeCell::new(ibv_comp_channel {
                context,
                fd: chan.fd(),
                refcnt: 0,
            }),
            chan,
            shared: w.shared.clone(),
        })
        .cast(),
        Err(e) => {
            set_errno(errno_of(&e));
            core::ptr::null_mut()
        }
    }
}

/// `ibv_destroy_comp_channel`: 0 or an errno value (`EBUSY` while CQs use it).
///
/// # Safety
///
/// `channel` is NULL or a live channel of this library; on success it is not used
/// afterwards.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    // SAFETY: `ibv` is the first field of the boxed `ChannelWrap`; the caller passes a live
    // channel or NULL.
    let Some(w) = (unsafe { channel.cast::<ChannelWrap>().as_ref() }) else {
        return libc::EINVAL;
    };
    {
        // `refcnt` changes under this lock (CQ creation and destruction).
        let _cqs = lock(&w.shared.cqs);
        // SAFETY: `refcnt` is only written under this lock.
        if unsafe { (*w.ibv.get()).refcnt } > 0 {
            return libc::EBUSY;
        }
    }
    // SAFETY: the boxed `ChannelWrap`, which the caller no longer uses.
    unsafe { unbox(channel.cast::<ChannelWrap>()) };
    0
}

/// `ibv_create_cq`: a CQ of at least `cqe` entries whose completion events go to `channel`
/// (if not NULL). `comp_vector` must be 0 (`num_comp_vectors` is 1).
///
/// # Safety
///
/// `context` is NULL or a live context of this library; `channel` is NULL or a live channel
/// of that context.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    let Ok(entries) = u32::try_from(cqe) else {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    };
    // SAFETY: forwarded to the caller.
    unsafe { create(context, entries, cq_context, channel, comp_vector, false) }.cast()
}

/// What pfnic's completions have of `enum ibv_create_cq_wc_flags`: `IBV_WC_STANDARD_FLAGS`,
/// and `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP` where the device has timestamps.
const WC_STANDARD_FLAGS: u64 = 0x7f;
const WC_EX_WITH_COMPLETION_TIMESTAMP: u64 = 1 << 7;
/// `IBV_CQ_INIT_ATTR_MASK_FLAGS`, `IBV_CQ_INIT_ATTR_MASK_PD`.
const CQ_INIT_ATTR_MASK_FLAGS: u32 = 1;
const CQ_INIT_ATTR_MASK_PD: u32 = 2;
/// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` (a promise pfnic does not need) and
/// `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN` (which it does not have).
const CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1;
const CREATE_CQ_ATTR_IGNORE_OVERRUN: u32 = 2;

/// `verbs_context.create_cq_ex` (what `ibv_create_cq_ex` calls): a CQ polled with
/// `ibv_start_poll`/`ibv_next_poll`/`ibv_end_poll` and read with `ibv_wc_read_*`, with the
/// device clock of each completion (`ibv_wc_read_completion_ts`) if asked for. NULL with
/// `errno`: `EOPNOTSUPP` for completion fields beyond those (wall-clock timestamps, CVLAN,
/// flow tag, tag matching), for timestamps on a device without them, and
/// `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`; `EINVAL` for unknown
/// `comp_mask` or `flags` bits, a parent domain (pfnic has none) and what `ibv_create_cq`
/// refuses.
///
/// # Safety
///
/// `context` is NULL or a live context of this library; `attr` is NULL or readable, its
/// `channel` NULL or a live channel of that context.
pub(crate) unsafe extern "C" fn create_cq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    let fail = |e| {
        set_errno(e);
        core::ptr::null_mut()
    };
    // SAFETY: the caller passes NULL or a readable attribute structure.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        return fail(libc::EINVAL);
    };
    let timestamps = match check_cq_init_attr_ex(a) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let Ok(comp_vector) = c_int::try_from(a.comp_vector) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: forwarded to the caller.
    unsafe {
        create(
            context,
            a.cqe,
            a.cq_context,
            a.channel,
            comp_vector,
            timestamps,
        )
    }
}

/// What `ibv_create_cq_ex` may ask of pfnic: whether the CQ stamps its completions, or the
/// errno value of [`create_cq_ex`] for attributes pfnic refuses. Shared with pfnic's
/// rdma-core provider, so that both answer alike.
pub fn check_cq_init_attr_ex(a: &ibv_cq_init_attr_ex) -> Result<bool, c_int> {
    let flags = if a.comp_mask & CQ_INIT_ATTR_MASK_FLAGS != 0 {
        a.flags
    } else {
        0
    };
    if a.comp_mask & !(CQ_INIT_ATTR_MASK_FLAGS | CQ_INIT_ATTR_MASK_PD) != 0
        || flags & !(CREATE_CQ_ATTR_SINGLE_THREADED | CREATE_CQ_ATTR_IGNORE_OVERRUN) != 0
        || a.comp_mask & CQ_INIT_ATTR_MASK_PD != 0
    {
        return Err(libc::EINVAL);
    }
    let supported = WC_STANDARD_FLAGS | WC_EX_WITH_COMPLETION_TIMESTAMP;
    if a.wc_flags & !supported != 0 || flags & CREATE_CQ_ATTR_IGNORE_OVERRUN != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(a.wc_flags & WC_EX_WITH_COMPLETION_TIMESTAMP != 0)
}

/// Makes a CQ (every CQ can be polled both ways).
///
/// # Safety
///
/// As [`ibv_create_cq`].
unsafe fn create(
    context: *mut ibv_context,
    entries: u32,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
    timestamps: bool,
) -> *mut ibv_cq_ex {
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    };
    // SAFETY: the caller passes NULL or a live channel.
    let chan = unsafe { channel.cast::<ChannelWrap>().as_ref() };
    if entries == 0
        || comp_vector != 0
        || chan
            .as_ref()
            .is_some_and(|c| !Arc::ptr_eq(&c.shared, &w.shared))
    {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    }
    // The wrapper's address is the CQ's event cookie: box it first.
    let wrap = into_c(CqWrap {
        ibv: UnsafeCell::new(ibv_cq_ex {
            context,
            channel,
            cq_context,
            handle: 0,
            cqe: 0,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            cond: libc::PTHREAD_COND_INITIALIZER,
            comp_events_completed: 0,
            async_events_completed: 0,
            comp_mask: 0,
            status: 0,
            wr_id: 0,
            start_poll: Some(start_poll),
            next_poll: Some(next_poll),
            end_poll: Some(end_poll),
            read_opcode: Some(read_opcode),
            read_vendor_err: Some(read_vendor_err),
            read_byte_len: Some(read_byte_len),
            read_imm_data: Some(read_imm_data),
            read_qp_num: Some(read_qp_num),
            read_src_qp: Some(read_src_qp),
            read_wc_flags: Some(read_wc_flags),
            read_slid: Some(read_slid),
            read_sl: Some(read_sl),
            read_dlid_path_bits: Some(read_dlid_path_bits),
            // As rdma-core's providers: only a CQ asked for timestamps reads them.
            read_completion_ts: if timestamps {
                Some(read_completion_ts)
            } else {
                None
            },
            read_cvlan: None,
            read_flow_tag: None,
            read_tm_info: None,
            read_completion_wallclock_ns: None,
        }),
        cq: UnsafeCell::new(None),
        shared: w.shared.clone(),
        events: Mutex::new(EventCount::default()),
        acked: Condvar::new(),
        async_acks: AsyncAcks::default(),
        polling: AtomicBool::new(false),
        // SAFETY: `ibv_wc` is plain integers: all zeroes is valid.
        current: UnsafeCell::new(unsafe { core::mem::zeroed() }),
        current_ts: UnsafeCell::new(0),
    });
    let (ctx, chan_file, handle) = (&w.shared.ctx, chan.map(|c| &c.chan), wrap as usize as u64);
    let made = if timestamps {
        ctx.create_cq_timestamped(entries, chan_file, handle)
    } else {
        ctx.create_cq(entries, chan_file, handle)
    };
    let cq = match made {
        Ok(cq) => cq,
        Err(e) => {
            // SAFETY: `wrap` was boxed above and never handed out.
            unsafe { unbox(wrap) };
            set_errno(errno_of(&e));
            return core::ptr::null_mut();
        }
    };
    // SAFETY: `wrap` was boxed above and is not shared yet.
    let cw = unsafe { &mut *wrap };
    cw.ibv.get_mut().handle = cq.cqn();
    cw.ibv.get_mut().cqe = c_int::try_from(cq.entries()).unwrap_or(c_int::MAX);
    let cqn = cq.cqn();
    *cw.cq.get_mut() = Some(cq);
    let mut cqs = lock(&w.shared.cqs);
    cqs.insert(cqn, wrap as usize);
    if let Some(c) = chan {
        // SAFETY: `refcnt` is only written under the `cqs` lock, held here.
        unsafe { (*c.ibv.get()).refcnt += 1 };
    }
    drop(cqs);
    wrap.cast()
}

/// The CQ wrapper of an extended CQ (the same object).
///
/// # Safety
///
/// `cq` is a CQ this library created and not yet destroyed.
unsafe fn cq_ex_wrap<'a>(cq: *mut ibv_cq_ex) -> &'a CqWrap {
    // SAFETY: an `ibv_cq_ex` of this library is the first field of its `CqWrap`; the caller
    // passes a live one.
    unsafe { &*cq.cast::<CqWrap>() }
}

impl CqWrap {
    /// The next completion, as `ibv_wc`, made current (with the `ibv_cq_ex`'s `status` and
    /// `wr_id`); 0, `ENOENT` if there is none, or `EINVAL` while the CQ is destroyed.
    ///
    /// # Safety
    ///
    /// The caller holds `polling`.
    unsafe fn poll_current(&self) -> c_int {
        let Some(c) = self.cq() else {
            return libc::EINVAL;
        };
        let mut wc = [Wc::default()];
        if c.poll(&mut wc) == 0 {
            return libc::ENOENT;
        }
        let out = self.to_ibv(&wc[0]);
        // SAFETY: the caller holds `polling`, under which `current`, `status` and `wr_id` are
        // written; C reads them only between its own calls.
        unsafe {
            *self.current.get() = out;
            *self.current_ts.get() = wc[0].completion_ts;
            (*self.ibv.get()).status = out.status;
            (*self.ibv.get()).wr_id = out.wr_id;
        }
        0
    }

    /// The current completion of the extended poll.
    ///
    /// # Safety
    ///
    /// The caller is the thread between `ibv_start_poll` and `ibv_end_poll`.
    unsafe fn cur(&self) -> &ibv_wc {
        // SAFETY: only the polling thread, the caller, writes it.
        unsafe { &*self.current.get() }
    }
}

/// `ibv_cq_ex.start_poll`: takes the CQ for this thread and makes the first completion
/// current: 0, or `ENOENT` (then the CQ is released: the caller does not end the poll).
/// `attr->comp_mask` must be 0 (`EINVAL`).
///
/// # Safety
///
/// `cq` is a live CQ of this library; `attr` is NULL or readable.
unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    // SAFETY: the caller passes NULL or a readable `attr`.
    if unsafe { attr.as_ref() }.is_some_and(|a| a.comp_mask != 0) {
        return libc::EINVAL;
    }
    // SAFETY: the caller passes a live CQ.
    let w = unsafe { cq_ex_wrap(cq) };
    while w
        .polling
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
    // SAFETY: `polling` is held.
    let r = unsafe { w.poll_current() };
    if r != 0 {
        w.polling.store(false, Ordering::Release);
    }
    r
}

/// `ibv_cq_ex.next_poll`: the next completion current: 0 or `ENOENT`.
///
/// # Safety
///
/// `cq` is a live CQ of this library, polled by this thread (`start_poll` returned 0).
unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    // SAFETY: the caller passes a live CQ it polls, so it holds `polling`.
    unsafe { cq_ex_wrap(cq).poll_current() }
}

/// `ibv_cq_ex.end_poll`: releases the CQ.
///
/// # Safety
///
/// As [`next_poll`].
unsafe extern "C" fn end_poll(cq: *mut ibv_cq_ex) {
    // SAFETY: the caller passes a live CQ.
    unsafe { cq_ex_wrap(cq) }
        .polling
        .store(false, Ordering::Release);
}

/// Defines the `ibv_cq_ex.read_*` functions: each returns a field of the current completion.
macro_rules! readers {
    ($($name:ident -> $t:ty = |$wc:ident| $e:expr;)*) => {$(
        /// `ibv_cq_ex.read_*` of the current completion.
        ///
        /// # Safety
        ///
        /// `cq` is a live CQ of this library that this thread polls.
        unsafe extern "C" fn $name(cq: *mut ibv_cq_ex) -> $t {
            // SAFETY: the caller passes a live CQ it polls.
            let $wc = unsafe { cq_ex_wrap(cq).cur() };
            $e
        }
    )*};
}

readers! {
    read_opcode -> c_int = |wc| wc.opcode;
    read_vendor_err -> u32 = |wc| wc.vendor_err;
    read_byte_len -> u32 = |wc| wc.byte_len;
    read_imm_data -> u32 = |wc| wc.imm_data;
    read_qp_num -> u32 = |wc| wc.qp_num;
    read_src_qp -> u32 = |wc| wc.src_qp;
    read_wc_flags -> c_uint = |wc| wc.wc_flags;
    read_slid -> u32 = |wc| u32::from(wc.slid);
    read_sl -> u8 = |wc| wc.sl;
    read_dlid_path_bits -> u8 = |wc| wc.dlid_path_bits;
}

/// `ibv_cq_ex.read_completion_ts` of the current completion: the device clock (ns) when it
/// was written.
///
/// # Safety
///
/// `cq` is a live CQ of this library, made with timestamps, that this thread polls.
unsafe extern "C" fn read_completion_ts(cq: *mut ibv_cq_ex) -> u64 {
    // SAFETY: the caller passes a live CQ it polls, so it holds `polling`, under which only
    // it writes `current_ts`.
    unsafe { *cq_ex_wrap(cq).current_ts.get() }
}

/// `ibv_destroy_cq`: 0 or an errno value (`EBUSY` while a QP uses it; it stays). Waits until
/// every completion and asynchronous event handed out for it was acknowledged, as libibverbs
/// does.
///
/// # Safety
///
/// `cq` is NULL or a live CQ of this library; on success it is not used afterwards.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    // SAFETY: the caller passes a live CQ or NULL. Other threads may still acknowledge its
    // events, so the wrapper is only shared.
    let Some(w) = (unsafe { cq_wrap(cq) }) else {
        return libc::EINVAL;
    };
    // SAFETY: nothing else uses the CQ while it is destroyed (but `ibv_ack_cq_events`, which
    // does not touch this cell).
    let slot = unsafe { &mut *w.cq.get() };
    let Some(inner) = slot.take() else {
        return libc::EINVAL;
    };
    let cqn = inner.cqn();
    let reported = match inner.destroy() {
        Ok(reported) => reported,
        Err((inner, e)) => {
            *slot = Some(inner);
            return errno_of(&e);
        }
    };
    w.async_acks.wait_for(reported);
    // No event is handed out for it once it leaves the registry (unless a new CQ already took
    // its number); then wait for the acks of those that were.
    {
        let mut cqs = lock(&w.shared.cqs);
        if cqs.get(&cqn) == Some(&(cq as usize)) {
            cqs.remove(&cqn);
        }
    }
    {
        let mut ev = lock(&w.events);
        while ev.acked != ev.delivered {
            ev = w.acked.wait(ev).unwrap_or_else(|e| e.into_inner());
        }
    }
    {
        let _cqs = lock(&w.shared.cqs);
        let c = w.channel();
        if !c.is_null() {
            // SAFETY: a CQ's channel is a live channel of the context: it outlives its CQs
            // (`ibv_destroy_comp_channel` refuses while `refcnt` counts them). `refcnt` is only
            // written under the `cqs` lock, held here.
            unsafe { (*c).refcnt -= 1 };
        }
    }
    // Events still queued on the channel are dropped when read (the CQ is no longer in the
    // registry).
    // SAFETY: the boxed `CqWrap`, which the caller no longer uses.
    unsafe { unbox(cq.cast::<CqWrap>()) };
    0
}

/// `ops.poll_cq` (what `ibv_poll_cq` calls): up to `num_entries` completions into `wc`; how many, or a negative value
/// (-`EINVAL` for bad arguments).
///
/// # Safety
///
/// `cq` is NULL or a live CQ of this library; `wc` has room for `num_entries` entries.
pub(crate) unsafe extern "C" fn poll_cq(
    cq: *mut ibv_cq,
    num_entries: c_int,
    wc: *mut ibv_wc,
) -> c_int {
    // SAFETY: the caller passes a live CQ or NULL.
    let Some(w) = (unsafe { cq_wrap(cq) }) else {
        return -libc::EINVAL;
    };
    let Some(c) = w.cq() else {
        return -libc::EINVAL;
    };
    // SAFETY: forwarded to the caller.
    unsafe { poll_into(c, num_entries, wc, w.shared.lid) }
}

/// Polls up to `num_entries` completions of `cq` into `wc` as libibverbs reports them, from a
/// device whose port has LID `lid` ([`wc_to_ibv`]): how many, or `-EINVAL` for bad arguments.
///
/// # Safety
///
/// `wc` has room for `num_entries` entries (or is NULL with none asked).
pub unsafe fn poll_into(cq: &Cq, num_entries: c_int, wc: *mut ibv_wc, lid: u16) -> c_int {
    const BATCH: usize = 16;
    let Ok(want) = usize::try_from(num_entries) else {
        return -libc::EINVAL;
    };
    if want > 0 && wc.is_null() {
        return -libc::EINVAL;
    }
    let mut buf = [Wc::default(); BATCH];
    let mut got = 0;
    while got < want {
        let chunk = BATCH.min(want - got);
        let n = cq.poll(&mut buf[..chunk]);
        for x in &buf[..n] {
            // SAFETY: `got < num_entries`, and the caller gives room for that many.
            unsafe { wc.add(got).write(wc_to_ibv(x, lid)) };
            got += 1;
        }
        if n < chunk {
            break;
        }
    }
    got as c_int
}

/// `ops.req_notify_cq` (what `ibv_req_notify_cq` calls): the next completion (the next solicited one with `solicited_only`)
/// queues a completion event on the CQ's channel. 0 or an errno value.
///
/// # Safety
///
/// `cq` is NULL or a live CQ of this library.
pub(crate) unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: the caller passes a live CQ or NULL.
    let Some(Some(c)) = (unsafe { cq_wrap(cq) }).map(CqWrap::cq) else {
        return libc::EINVAL;
    };
    match c.req_notify(solicited_only != 0) {
        Ok(()) => 0,
        Err(e) => errno_of(&e),
    }
}

/// `ibv_get_cq_event`: waits for the next completion event of a CQ of `channel` (or returns
/// -1 with `EAGAIN` if the channel's fd is non-blocking and none is queued). 0, or -1 with
/// `errno` set.
///
/// # Safety
///
/// `channel` is NULL or a live channel of this library; `cq` and `cq_context` are valid for a
/// write.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    // SAFETY: `ibv` is the first field of the boxed `ChannelWrap`; the caller passes a live
    // channel or NULL.
    let Some(w) = (unsafe { channel.cast::<ChannelWrap>().as_ref() }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if cq.is_null() || cq_context.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: the caller passes a live channel; events name CQs of its context.
    match unsafe { next_event(w, channel) } {
        Ok(found) => {
            // SAFETY: `found` is a live CQ wrapper (checked against the context's CQs); the
            // caller passes writable `cq` and `cq_context`.
            unsafe {
                *cq = found.cast();
                *cq_context = (*(*found).ibv.get()).cq_context;
            }
            0
        }
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// The next event for a CQ of `channel`; counts it as delivered.
///
/// Locks are taken in the order `cqs`, a CQ's `events`.
///
/// # Safety
///
/// `w` is the live wrapper of `channel`.
unsafe fn next_event(
    w: &ChannelWrap,
    channel: *mut ibv_comp_channel,
) -> Result<*mut CqWrap, c_int> {
    loop {
        let ev = w.chan.get_event().map_err(|e| errno_of(&e))?;
        let cqs = lock(&w.shared.cqs);
        // An event of a CQ destroyed since it was queued is dropped.
        let Some(p) = live_cq(&cqs, &ev) else {
            continue;
        };
        // SAFETY: `p` is a live CQ wrapper, kept alive while `cqs` is locked.
        let cw = unsafe { &*p };
        // The driver queues a CQ's events on the channel it was created with only.
        if cw.channel() != channel {
            return Err(libc::EIO);
        }
        lock(&cw.events).delivered += 1;
        return Ok(p);
    }
}

/// The live CQ an event is for: its CQN is registered, with the wrapper the event names.
fn live_cq(cqs: &HashMap<u32, usize>, ev: &CqEvent) -> Option<*mut CqWrap> {
    cqs.get(&ev.cqn)
        .copied()
        .filter(|&p| p as u64 == ev.cq_context)
        .map(|p| p as *mut CqWrap)
}

/// `ibv_ack_cq_events`: acknowledges `nevents` events `ibv_get_cq_event` returned for `cq`.
///
/// # Safety
///
/// `cq` is NULL or a live CQ of this library.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: u32) {
    // SAFETY: the caller passes a live CQ or NULL.
    let Some(w) = (unsafe { cq_wrap(cq) }) else {
        return;
    };
    let mut ev = lock(&w.events);
    ev.acked = ev.acked.wrapping_add(nevents);
    // SAFETY: `comp_events_completed` is only written under `events`, held here.
    unsafe { (*w.ibv.get()).comp_events_completed = ev.acked };
    drop(ev);
    w.acked.notify_all();
}
