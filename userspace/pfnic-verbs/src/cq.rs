//! Completion queues, polled in user space.

use std::io;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pfnic_sys::uapi;
use pfnic_sys::Mapping;

use crate::{errno, Ctx, Wc, WcOpcode, WcStatus, DB_CQ_ARM};

/// Bytes per CQE (docs/verbs.md, "Completion queue entry"), and with a timestamp.
const CQE_SIZE: usize = 32;
const CQE_SIZE_TIMESTAMP: usize = 64;

pub(crate) struct CqInner {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) cqn: u32,
    entries: u32,
    /// 32, or 64 with timestamps.
    cqe_size: usize,
    ring: Mapping,
    record_offset: usize,
    /// CQEs consumed: the free-running consumer index.
    consumer: Mutex<u32>,
}

/// A completion queue: `ibv_cq`.
pub struct Cq {
    pub(crate) inner: Arc<CqInner>,
}

impl Cq {
    /// A CQ of `cqe` entries or more that the RDMA core created for a user context of
    /// [`crate::Context::from_core`]; `layout` is the driver's answer (with timestamps if its
    /// CQEs are 64 bytes). The core destroys it: dropping this only unmaps the ring.
    pub fn from_core(
        ctx: &crate::Context,
        layout: &uapi::IbCreateCqResp,
        cqe: u32,
    ) -> io::Result<Self> {
        let timestamps = layout.cqe_size as usize == CQE_SIZE_TIMESTAMP;
        Self::map(&ctx.inner, layout, cqe, timestamps)
    }

    /// Checks the driver's `layout` and maps the ring.
    fn map(
        ctx: &Arc<Ctx>,
        layout: &uapi::IbCreateCqResp,
        cqe: u32,
        timestamps: bool,
    ) -> io::Result<Self> {
        let want = if timestamps {
            CQE_SIZE_TIMESTAMP
        } else {
            CQE_SIZE
        };
        let entries = layout.entries;
        let ring_bytes = entries as u64 * want as u64;
        if layout.cqe_size as usize != want
            || !entries.is_power_of_two()
            || entries < cqe
            || layout.record_offset < ring_bytes
            || layout.record_offset + 16 > layout.mmap_len
            || !layout.record_offset.is_multiple_of(4)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "driver returned an inconsistent CQ layout: {} entries, record at {}, {} bytes",
                    entries, layout.record_offset, layout.mmap_len
                ),
            ));
        }
        let len = usize::try_from(layout.mmap_len).map_err(|_| errno(libc::EINVAL))?;
        let ring = ctx.dev.mmap(layout.mmap_offset, len)?;
        Ok(Self {
            inner: Arc::new(CqInner {
                ctx: ctx.clone(),
                cqn: layout.cqn,
                entries,
                cqe_size: want,
                ring,
                record_offset: layout.record_offset as usize,
                consumer: Mutex::new(0),
            }),
        })
    }

    /// The start of the mapped ring (for diagnostics).
    pub fn ring_ptr(&self) -> *mut u8 {
        self.inner.ring.as_ptr()
    }

    /// The CQ number (device-wide; completion events name it).
    pub fn cqn(&self) -> u32 {
        self.inner.cqn
    }

    /// CQEs the ring holds (`ibv_cq::cqe`): at least those requested, a power of 2.
    pub fn entries(&self) -> u32 {
        self.inner.entries
    }

    /// Whether its completions carry the device clock ([`Wc::completion_ts`]).
    pub fn timestamps(&self) -> bool {
        self.inner.cqe_size == CQE_SIZE_TIMESTAMP
    }

    /// `ibv_poll_cq`: moves up to `wcs.len()` completions into `wcs`; how many.
    pub fn poll(&self, wcs: &mut [Wc]) -> usize {
        let inner = &*self.inner;
        let mut ci = inner.consumer.lock().unwrap_or_else(|e| e.into_inner());
        let base = inner.ring.as_ptr();
        let mut n = 0;
        while n < wcs.len() {
            let slot = (*ci & (inner.entries - 1)) as usize;
            // SAFETY: `slot < entries`, and the ring is `entries` CQEs at the mapping's start
            // (checked at creation); the mapping lives as long as `inner`.
            let cqe = unsafe { base.add(slot * inner.cqe_size) };
            let parity = ((*ci / inner.entries) & 1) ^ 1;
            // SAFETY: the owner byte at 0x1b of a CQE in the mapping; the device writes it,
            // hence the volatile read.
            let owner = unsafe { cqe.add(0x1b).read_volatile() };
            if u32::from(owner & 1) != parity {
                break;
            }
            // The rest of the CQE was written before the owner byte.
            fence(Ordering::Acquire);
            // SAFETY: reads of the CQE's aligned fields inside the mapping (the ring is page
            // aligned and CQEs are 32 or 64 bytes), volatile as the device writes them.
            let (wr_id, byte_len, imm, qp_num, src_qp, status, opcode, flags, vendor_err) = unsafe {
                (
                    cqe.cast::<u64>().read_volatile(),
                    cqe.add(0x08).cast::<u32>().read_volatile(),
                    cqe.add(0x0c).cast::<u32>().read_volatile(),
                    cqe.add(0x10).cast::<u32>().read_volatile(),
                    cqe.add(0x14).cast::<u32>().read_volatile(),
                    cqe.add(0x18).read_volatile(),
                    cqe.add(0x19).read_volatile(),
                    cqe.add(0x1a).read_volatile(),
                    cqe.add(0x1c).cast::<u32>().read_volatile(),
                )
            };
            wcs[n] = Wc {
                wr_id: u64::from_le(wr_id),
                status: WcStatus(status.into()),
                opcode: WcOpcode(opcode.into()),
                vendor_err: u32::from_le(vendor_err),
                byte_len: u32::from_le(byte_len),
                // As posted: network order, copied through untouched.
                imm_data: imm,
                qp_num: u32::from_le(qp_num),
                src_qp: u32::from_le(src_qp),
                wc_flags: flags.into(),
                completion_ts: if inner.cqe_size == CQE_SIZE_TIMESTAMP {
                    // SAFETY: the timestamp of a 64-byte CQE, aligned, inside the mapping.
                    u64::from_le(unsafe { cqe.add(0x20).cast::<u64>().read_volatile() })
                } else {
                    0
                },
            };
            *ci = ci.wrapping_add(1);
            n += 1;
        }
        if n > 0 {
            // SAFETY: the CQ record's consumer index, a 4-byte aligned u32 inside the mapping
            // (checked at creation), which the device reads concurrently: atomic access.
            let rec = unsafe { AtomicU32::from_ptr(base.add(inner.record_offset).cast()) };
            // The CQEs were read before the slots are handed back.
            rec.store(ci.to_le(), Ordering::Release);
        }
        n
    }

    /// Removes the completions of QP `qp_num` that wait in the CQ, keeping the others in
    /// their order (what mlx5's provider does when a QP is reset: it starts again with no
    /// completion of its earlier life). The caller makes sure the device writes no more for
    /// that QP (it is in RESET) and is still there (the ring is its mapping); completions of
    /// other QPs the device writes meanwhile land behind the ones looked at. Returns how many
    /// it removed.
    pub fn clean_qp(&self, qp_num: u32) -> usize {
        let inner = &*self.inner;
        let mut ci = inner.consumer.lock().unwrap_or_else(|e| e.into_inner());
        let base = inner.ring.as_ptr();
        let size = inner.cqe_size;
        let slot = |n: u32| -> *mut u8 {
            // SAFETY: the slot is `n % entries`, inside the ring at the mapping's start
            // (checked at creation); the mapping lives as long as `inner`.
            unsafe { base.add((n & (inner.entries - 1)) as usize * size) }
        };
        // The CQEs the device wrote and the consumer has not taken: [ci, prod).
        let mut prod = *ci;
        while prod.wrapping_sub(*ci) < inner.entries {
            let parity = ((prod / inner.entries) & 1) ^ 1;
            // SAFETY: the owner byte of a CQE in the mapping, written by the device.
            let owner = unsafe { slot(prod).add(0x1b).read_volatile() };
            if u32::from(owner & 1) != parity {
                break;
            }
            prod = prod.wrapping_add(1);
        }
        fence(Ordering::Acquire);
        // From the newest back, each kept CQE moves up by the number removed after it, so
        // the removed ones end up at the front, where the consumer index skips them.
        let mut removed = 0u32;
        let mut n = prod;
        while n != *ci {
            n = n.wrapping_sub(1);
            let cqe = slot(n);
            // SAFETY: a CQE the device finished writing (above), inside the mapping.
            let qpn = u32::from_le(unsafe { cqe.add(0x10).cast::<u32>().read_volatile() });
            if qpn == qp_num {
                removed += 1;
            } else if removed > 0 {
                let dest = slot(n.wrapping_add(removed));
                for off in (0..size).filter(|&o| o != 0x1b) {
                    // SAFETY: both CQEs are in [ci, prod), written by the device and not
                    // consumed, so only this function touches them; the owner byte stays
                    // the destination's, which marks its slot valid.
                    unsafe { dest.add(off).write_volatile(cqe.add(off).read_volatile()) };
                }
            }
        }
        if removed > 0 {
            *ci = ci.wrapping_add(removed);
            // SAFETY: as in `poll`: the CQ record's consumer index, atomic.
            let rec = unsafe { AtomicU32::from_ptr(base.add(inner.record_offset).cast()) };
            rec.store(ci.to_le(), Ordering::Release);
        }
        removed as usize
    }

    /// Polls until `n` completions arrived or `timeout` passed; the completions (fewer than
    /// `n` on timeout).
    pub fn poll_wait(&self, n: usize, timeout: Duration) -> Vec<Wc> {
        let start = Instant::now();
        let mut out = vec![Wc::default(); n];
        let mut got = 0;
        while got < n {
            got += self.poll(&mut out[got..]);
            if got < n {
                if start.elapsed() > timeout {
                    break;
                }
                std::thread::yield_now();
            }
        }
        out.truncate(got);
        out
    }

    /// `ibv_req_notify_cq`: the next completion (the next solicited or error one with
    /// `solicited_only`) queues one completion event; at once if completions are waiting.
    pub fn req_notify(&self, solicited_only: bool) -> io::Result<()> {
        self.inner
            .ctx
            .ring(DB_CQ_ARM, self.inner.cqn << 16 | u32::from(solicited_only));
        Ok(())
    }
}
