//! Completion queues and their event channels: `ibv_cq`, `ibv_comp_channel`.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{check, non_null, sys, Context, Wc, WcOpcode, WcStatus};

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
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
        let mut pfd = libc::pollfd {
            fd: self.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd.
        match unsafe { libc::poll(&mut pfd, 1, ms) } {
            0 => return Ok(None),
            n if n < 0 => return Err(io::Error::last_os_error()),
            _ => {}
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
    _channel: Option<Arc<ChannelInner>>,
    _ctx: Context,
}

// SAFETY: libibverbs' CQs may be used from any thread (the provider locks its polling).
unsafe impl Send for CqInner {}
// SAFETY: as for `Send`.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: the CQ exists and no QP uses it any more (they hold `self`); its events
        // were acknowledged as they were read.
        unsafe { sys::ibv_destroy_cq(self.ptr.as_ptr()) };
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
                _channel: channel.map(|c| c.inner.clone()),
                _ctx: ctx.clone(),
            }),
        })
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
        let inner = match Arc::try_unwrap(self.inner) {
            Ok(inner) => inner,
            Err(inner) => return Err((Cq { inner }, io::Error::from_raw_os_error(libc::EBUSY))),
        };
        // SAFETY: the CQ exists and no other handle on it is left.
        match check(unsafe { sys::ibv_destroy_cq(inner.ptr.as_ptr()) }) {
            Ok(()) => {
                let inner = std::mem::ManuallyDrop::new(inner);
                // SAFETY: each field is read once and `inner` is never dropped.
                unsafe {
                    drop(std::ptr::read(&inner._channel));
                    drop(std::ptr::read(&inner._ctx));
                }
                Ok(())
            }
            Err(e) => Err((
                Cq {
                    inner: Arc::new(inner),
                },
                e,
            )),
        }
    }
}
