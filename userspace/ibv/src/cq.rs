//! Completion queues and their event channels: `ibv_cq`, `ibv_comp_channel`.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{check, destroy_shared, non_null, sys, wait_readable, Context, Wc, WcOpcode, WcStatus};

/// A completion channel; destroyed once no CQ uses it.
pub(crate) struct ChannelInner {
    ptr: NonNull<sys::ibv_comp_channel>,
    _ctx: Context,
}

// SAFETY: libibverbs' completion channels may be used from any thread.
unsafe impl Send for ChannelInner {}
// SAFETY: as for `Send`.
unsafe impl Sync for ChannelInner {}

impl Drop for ChannelInner {
    fn drop(&mut self) {
        // SAFETY: the channel exists and no CQ uses it any more (they hold `self`).
        unsafe { sys::ibv_destroy_comp_channel(self.ptr.as_ptr()) };
    }
}

/// A completion event: which CQ, and the `cq_context` it was created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqEvent {
    /// The CQ's handle ([`Cq::handle`]).
    pub cq_handle: u32,
    pub cq_context: u64,
}

/// A completion channel: `ibv_comp_channel`, a file the armed CQs' events come through.
pub struct CompChannel {
    inner: Arc<ChannelInner>,
}

impl CompChannel {
    pub(crate) fn create(ctx: &Context) -> io::Result<Self> {
        // SAFETY: the context is open.
        let ptr = non_null(unsafe { sys::ibv_create_comp_channel(ctx.as_ptr()) })?;
        Ok(Self {
            inner: Arc::new(ChannelInner {
                ptr,
                _ctx: ctx.clone(),
            }),
        })
    }

    /// The channel's file descriptor.
    pub fn fd(&self) -> RawFd {
        // SAFETY: the channel exists.
        unsafe { (*self.inner.ptr.as_ptr()).fd }
    }

    /// The next event within `timeout` (`None`: waits for ever), acknowledged at once
    /// (`ibv_get_cq_event`, `ibv_ack_cq_events`); `Ok(None)` when none came in time.
    pub fn get_event(&self, timeout: Option<Duration>) -> io::Result<Option<CqEvent>> {
        if !wait_readable(self.fd(), timeout)? {
            return Ok(None);
        }
        let mut cq = std::ptr::null_mut();
        let mut cq_context = std::ptr::null_mut();
        // SAFETY: the channel exists and the out pointers are writable.
        check(unsafe { sys::ibv_get_cq_event(self.inner.ptr.as_ptr(), &mut cq, &mut cq_context) })?;
        // SAFETY: libibverbs returned a CQ of this channel, alive until its event is
        // acknowledged (ibv_destroy_cq waits for that), which is done here.
        let cq_handle = unsafe {
            let h = (*cq).handle;
            sys::ibv_ack_cq_events(cq, 1);
            h
        };
        Ok(Some(CqEvent {
            cq_handle,
            cq_context: cq_context as u64,
        }))
    }
}

/// A CQ; destroyed once no QP uses it.
pub(crate) struct CqInner {
    pub(crate) ptr: NonNull<sys::ibv_cq>,
    /// The extended CQ of [`Cq::create_timestamped`], polled through it.
    ex: Option<NonNull<sys::ibv_cq_ex>>,
    _channel: Option<Arc<ChannelInner>>,
    _ctx: Context,
    /// Not yet destroyed by [`Cq::destroy`].
    live: bool,
}

// SAFETY: libibverbs' CQs may be used from any thread (the provider locks its polling; a
// poll of an extended CQ starts and ends within one call here).
unsafe impl Send for CqInner {}
// SAFETY: as for `Send`.
unsafe impl Sync for CqInner {}

impl crate::Destroyable for CqInner {
    fn destroyed(&mut self) {
        self.live = false;
    }
}

impl Drop for CqInner {
    fn drop(&mut self) {
        if self.live {
            // SAFETY: the CQ exists and no QP uses it any more (they hold `self`); its events
            // were acknowledged as they were read.
            unsafe { sys::ibv_destroy_cq(self.ptr.as_ptr()) };
        }
    }
}

/// A completion queue: `ibv_cq`.
pub struct Cq {
    pub(crate) inner: Arc<CqInner>,
}

impl Cq {
    pub(crate) fn create(
        ctx: &Context,
        cqe: u32,
        channel: Option<&CompChannel>,
        cq_context: u64,
    ) -> io::Result<Self> {
        let cqe = i32::try_from(cqe).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let ch = channel.map_or(std::ptr::null_mut(), |c| c.inner.ptr.as_ptr());
        // SAFETY: the context is open and the channel, if any, one of its channels; the
        // context pointer is only handed back with events.
        let ptr = non_null(unsafe {
            sys::ibv_create_cq(ctx.as_ptr(), cqe, cq_context as *mut libc::c_void, ch, 0)
        })?;
        Ok(Self {
            inner: Arc::new(CqInner {
                ptr,
                ex: None,
                _channel: channel.map(|c| c.inner.clone()),
                _ctx: ctx.clone(),
                live: true,
            }),
        })
    }

    /// `ibv_create_cq_ex` with the standard completion fields and the device clock of each
    /// completion (`IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`, [`Wc::completion_ts`]).
    pub(crate) fn create_timestamped(
        ctx: &Context,
        cqe: u32,
        channel: Option<&CompChannel>,
        cq_context: u64,
    ) -> io::Result<Self> {
        let mut attr = sys::ibv_cq_init_attr_ex {
            cqe,
            cq_context: cq_context as *mut libc::c_void,
            channel: channel.map_or(std::ptr::null_mut(), |c| c.inner.ptr.as_ptr()),
            comp_vector: 0,
            wc_flags: u64::from(
                sys::IBV_WC_STANDARD_FLAGS
                    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
            ),
            comp_mask: 0,
            flags: 0,
            parent_domain: std::ptr::null_mut(),
        };
        // SAFETY: the context is open, `attr` complete, its channel one of the context's.
        let ex = non_null(unsafe { sys::ibv_create_cq_ex(ctx.as_ptr(), &mut attr) })?;
        // SAFETY: an extended CQ is an `ibv_cq` too.
        let ptr = non_null(unsafe { sys::ibv_cq_ex_to_cq(ex.as_ptr()) })?;
        Ok(Self {
            inner: Arc::new(CqInner {
                ptr,
                ex: Some(ex),
                _channel: channel.map(|c| c.inner.clone()),
                _ctx: ctx.clone(),
                live: true,
            }),
        })
    }

    /// Whether its completions carry the device clock ([`Context::create_cq_timestamped`]).
    pub fn timestamps(&self) -> bool {
        self.inner.ex.is_some()
    }

    /// Polls an extended CQ (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll`).
    fn try_poll_ex(&self, ex: NonNull<sys::ibv_cq_ex>, wcs: &mut [Wc]) -> io::Result<usize> {
        if wcs.is_empty() {
            return Ok(0);
        }
        let ex = ex.as_ptr();
        let mut attr = sys::ibv_poll_cq_attr { comp_mask: 0 };
        // SAFETY: the CQ exists; `attr` asks for nothing optional.
        match unsafe { sys::ibv_start_poll(ex, &mut attr) } {
            0 => {}
            libc::ENOENT => return Ok(0),
            e => return Err(io::Error::from_raw_os_error(e)),
        }
        let mut got = 0;
        loop {
            // SAFETY: a poll is under way, so the current completion's fields may be read.
            wcs[got] = unsafe {
                Wc {
                    wr_id: (*ex).wr_id,
                    status: WcStatus((*ex).status),
                    opcode: WcOpcode(sys::ibv_wc_read_opcode(ex)),
                    vendor_err: sys::ibv_wc_read_vendor_err(ex),
                    byte_len: sys::ibv_wc_read_byte_len(ex),
                    imm_data: sys::ibv_wc_read_imm_data(ex),
                    qp_num: sys::ibv_wc_read_qp_num(ex),
                    src_qp: sys::ibv_wc_read_src_qp(ex),
                    wc_flags: sys::ibv_wc_read_wc_flags(ex),
                    completion_ts: sys::ibv_wc_read_completion_ts(ex),
                }
            };
            got += 1;
            if got == wcs.len() {
                break;
            }
            // SAFETY: a poll is under way.
            match unsafe { sys::ibv_next_poll(ex) } {
                0 => {}
                libc::ENOENT => break,
                e => {
                    // SAFETY: ends the poll started above.
                    unsafe { sys::ibv_end_poll(ex) };
                    return Err(io::Error::from_raw_os_error(e));
                }
            }
        }
        // SAFETY: ends the poll started above.
        unsafe { sys::ibv_end_poll(ex) };
        Ok(got)
    }

    /// The `ibv_cq` pointer, for calls this crate does not wrap.
    pub fn as_ptr(&self) -> *mut sys::ibv_cq {
        self.inner.ptr.as_ptr()
    }

    /// The CQ's handle in the uverbs file.
    pub fn handle(&self) -> u32 {
        // SAFETY: the CQ exists.
        unsafe { (*self.as_ptr()).handle }
    }

    /// Its entries (`ibv_cq.cqe`, at least what was asked).
    pub fn entries(&self) -> u32 {
        // SAFETY: the CQ exists.
        unsafe { (*self.as_ptr()).cqe as u32 }
    }

    /// `ibv_poll_cq`: up to `wcs.len()` completions, oldest first, into `wcs`.
    pub fn try_poll(&self, wcs: &mut [Wc]) -> io::Result<usize> {
        if let Some(ex) = self.inner.ex {
            return self.try_poll_ex(ex, wcs);
        }
        // SAFETY: all-zero bytes are a valid `ibv_wc` (integers and an integer union).
        let mut raw = vec![unsafe { std::mem::zeroed::<sys::ibv_wc>() }; wcs.len()];
        let n = i32::try_from(raw.len()).unwrap_or(i32::MAX);
        // SAFETY: the CQ exists and `raw` has room for `n` completions.
        let got = unsafe { sys::ibv_poll_cq(self.as_ptr(), n, raw.as_mut_ptr()) };
        if got < 0 {
            // Providers return -1 or a negative errno.
            return Err(io::Error::from_raw_os_error(if got == -1 {
                libc::EIO
            } else {
                -got
            }));
        }
        let got = got as usize;
        for (w, r) in wcs.iter_mut().zip(&raw[..got]) {
            *w = Wc {
                wr_id: r.wr_id,
                status: WcStatus(r.status),
                opcode: WcOpcode(r.opcode),
                vendor_err: r.vendor_err,
                byte_len: r.byte_len,
                // SAFETY: both members are a u32.
                imm_data: unsafe { r.__bindgen_anon_1.imm_data },
                qp_num: r.qp_num,
                src_qp: r.src_qp,
                wc_flags: r.wc_flags,
                completion_ts: 0,
            };
        }
        Ok(got)
    }

    /// [`Cq::try_poll`], a polling error counted as no completion.
    pub fn poll(&self, wcs: &mut [Wc]) -> usize {
        self.try_poll(wcs).unwrap_or(0)
    }

    /// Polls until `n` completions came or `timeout` passed; returns those that came.
    pub fn poll_wait(&self, n: usize, timeout: Duration) -> Vec<Wc> {
        let mut out = vec![Wc::default(); n];
        let mut got = 0;
        let start = Instant::now();
        while got < n && start.elapsed() < timeout {
            let k = self.poll(&mut out[got..]);
            if k == 0 {
                std::thread::yield_now();
            }
            got += k;
        }
        out.truncate(got);
        out
    }

    /// `ibv_req_notify_cq`: the next completion (solicited only, if asked) raises an event.
    pub fn req_notify(&self, solicited_only: bool) -> io::Result<()> {
        // SAFETY: the CQ exists.
        check(unsafe { sys::ibv_req_notify_cq(self.as_ptr(), i32::from(solicited_only)) })
    }

    /// `ibv_destroy_cq`: `EBUSY` (and the CQ back) while a QP uses it.
    pub fn destroy(self) -> Result<(), (Cq, io::Error)> {
        destroy_shared(
            self.inner,
            |inner| Cq { inner },
            // SAFETY: the CQ exists and no other handle on it is left.
            |inner| unsafe { sys::ibv_destroy_cq(inner.ptr.as_ptr()) },
        )
    }
}
