// SPDX-License-Identifier: GPL-2.0

//! The verbs objects of one user context of the RDMA core: PDs, MRs, CQs, SRQs and QPs, the
//! ring memory its process maps, and its objects' asynchronous events.
//!
//! Every verb validates its whole argument under the context's object lock before it changes
//! anything, and fails with a precise errno. Nothing waits for the device's page faults while
//! holding that lock (faulting takes the address space's lock, which `mmap()` holds while it
//! takes ours).
//!
//! The context keeps an object's ring memory, for `mmap()`, until the object is destroyed, and
//! after that while a mapping of it remains, so a process may keep the mapping after the
//! destroy and the memory goes with the last mapping. When the device is unbound, all of it is
//! freed at once, after its mappings were removed ([`Objects::revoke`]): DMA memory does not
//! outlive the device, even while the uverbs file stays open.

use super::{
    args, cmd,
    dm::{self, Dm},
    odp::OdpMr,
    pinned::PinnedMr,
    quarantine::{refused, Quarantined},
    MAX_PDS,
};
use crate::{nic::Nic, regs, uapi};
use core::ptr::NonNull;
use kernel::{
    bitmap::BitmapVec,
    dma::SharedCoherent,
    mm::virt::{flags, VmaNew},
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, Mutex},
};

// A process maps exactly its own context's doorbell page.
const _: () = assert!(PAGE_SIZE == regs::DB_PAGE_SIZE);

/// A protection domain: a number MRs, SRQs and QPs are tagged with; in use while they exist.
pub(crate) struct Pd {
    pub(crate) mrs: u32,
    pub(crate) qps: u32,
    pub(crate) srqs: u32,
}

/// A memory region.
pub(crate) struct Mr {
    /// Index in the device's memory key table.
    pub(crate) index: u32,
    pub(crate) key: u32,
    pub(crate) pd: u32,
    pub(crate) access: u32,
    pub(crate) addr: u64,
    pub(crate) length: u64,
    /// The pinned pages behind the MR's translation table (`pinned` mode). Dropped after the
    /// device's MR is cleared.
    pub(crate) pinned: Option<PinnedMr>,
    /// The mirror of the MR's table (`odp` mode), also in the device-wide index of ODP MRs.
    pub(crate) odp: Option<Arc<OdpMr>>,
    /// The device memory allocation the MR is over (`ibv_reg_dm_mr`).
    pub(crate) dm: Option<u32>,
}

impl Mr {
    /// Whether the MR covers `[addr, addr + len)`.
    pub(crate) fn covers(&self, addr: u64, len: u64) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        // The implicit MR's length is 2^64 - 1: its end does not fit in a u64.
        let mr_end = u128::from(self.addr) + u128::from(self.length);
        addr >= self.addr && u128::from(end) <= mr_end
    }
}

/// A completion queue.
pub(crate) struct Cq {
    /// QPs using it, as send or receive CQ (counted twice when both).
    pub(crate) qps: u32,
    /// `mmap()` token of its ring memory.
    pub(crate) ring: u64,
}

/// A shared receive queue.
pub(crate) struct Srq {
    pub(crate) pd: u32,
    /// QPs taking receives from it.
    pub(crate) qps: u32,
    /// Work requests and SGEs per work request.
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    /// `mmap()` token of its ring memory.
    pub(crate) ring: u64,
}

/// A queue pair.
pub(crate) struct Qp {
    pub(crate) pd: u32,
    /// The SRQ it takes receives from.
    pub(crate) srq: Option<u32>,
    pub(crate) send_cq: u32,
    pub(crate) recv_cq: u32,
    pub(crate) sq_sig_all: bool,
    pub(crate) cap: args::QpCap,
    /// `mmap()` token of its ring memory.
    pub(crate) ring: u64,
    /// The attributes as last set (the state is the device's).
    pub(crate) attr: args::QpAttr,
    /// The destination IPv4 address the address vector resolved to (docs/wire.md); 0: this
    /// device (loopback).
    pub(crate) dest_ipv4: u32,
    /// Receive faults park the payload in the backup buffer ([`uapi::PFNIC_QP_CREATE_RECV_FAULT_BACKUP`]).
    pub(crate) backup: bool,
    /// The peer's MAC the device sends to (`QP_SET_DMAC`); all zeroes: the device's neighbour
    /// cache finds it.
    pub(crate) dmac: [u8; 6],
    /// A UD QP ([`uapi::PFNIC_QPT_UD`]): its work requests name their destinations.
    pub(crate) ud: bool,
    /// A UD QP's Q_Key.
    pub(crate) qkey: u32,
}

/// Everything one file created.
pub(crate) struct Objects {
    /// The device refused to destroy an object of the file ([`super::quarantine`]): its
    /// context stays out of use after it stops.
    pub(crate) device_keeps_objects: bool,
    /// Next PD or MR handle to try.
    next_handle: u32,
    /// Next `mmap()` token (in pages; 0 is the doorbell page).
    next_token: u64,
    pub(crate) pds: RBTree<u32, Pd>,
    pub(crate) mrs: RBTree<u32, Mr>,
    /// By CQN.
    pub(crate) cqs: RBTree<u32, Cq>,
    /// By QPN.
    pub(crate) qps: RBTree<u32, Qp>,
    /// By SRQN.
    pub(crate) srqs: RBTree<u32, Srq>,
    /// Device memory allocations, by handle.
    pub(crate) dms: RBTree<u32, Dm>,
    /// Bit `p`: page `p` of device memory is the file's, freed, kept for its next
    /// allocations ([`super::dm`]).
    pub(crate) dm_spare: BitmapVec,
    /// Ring memory of the live CQs and QPs, by `mmap()` token.
    pub(crate) rings: RBTree<u64, RingMem>,
    /// Ring memory of destroyed objects that a mapping still uses.
    retired: KVec<RingMem>,
    /// Set when the device is unbound and the rings were freed: no ring is added any more.
    rings_revoked: bool,
    /// `uapi::PFNIC_MEM_MODE_*`: how the file's MRs reach its memory.
    pub(crate) mem_mode: u32,
    /// Set by the first MR registration: the memory mode no longer changes.
    pub(crate) mem_mode_fixed: bool,
}

impl Objects {
    /// A handle no PD, MR or device memory allocation of this file has.
    pub(crate) fn new_handle(&mut self) -> u32 {
        loop {
            let h = self.next_handle;
            self.next_handle = self.next_handle.wrapping_add(1).max(1);
            if self.pds.get(&h).is_none()
                && self.mrs.get(&h).is_none()
                && self.dms.get(&h).is_none()
            {
                return h;
            }
        }
    }

    /// A new `mmap()` token (in pages; 0 is the doorbell page); `ENOSPC` once the offsets run
    /// out.
    pub(crate) fn new_token(&mut self) -> Result<u64> {
        let token = self.next_token;
        token.checked_mul(PAGE_SIZE as u64).ok_or(ENOSPC)?;
        self.next_token += 1;
        Ok(token)
    }

    /// Inserts `mr` at `handle` ([`Objects::new_handle`] under the same lock) into `node`,
    /// reserved beforehand, so the insertion cannot fail for memory after the device knows the
    /// MR. A live MR is never replaced, which would orphan its device key: `mr` comes back.
    pub(crate) fn insert_mr(
        &mut self,
        handle: u32,
        mr: Mr,
        node: RBTreeNodeReservation<u32, Mr>,
    ) -> core::result::Result<(), Mr> {
        if self.mrs.get(&handle).is_some() {
            return Err(mr);
        }
        self.mrs.insert(node.into_node(handle, mr));
        Ok(())
    }

    /// Keeps `mem` until [`Objects::remove_ring`]; returns its `mmap()` token. `ENODEV` once
    /// the device is unbound.
    pub(crate) fn add_ring(&mut self, mem: RingMem) -> Result<u64> {
        if self.rings_revoked {
            return Err(ENODEV);
        }
        let token = self.next_token;
        token.checked_mul(PAGE_SIZE as u64).ok_or(ENOSPC)?;
        self.rings.try_create_and_insert(token, mem, GFP_KERNEL)?;
        self.next_token += 1;
        Ok(token)
    }

    /// Lets go of the ring memory of a destroyed object, which the device no longer uses: at
    /// once, or once no mapping uses it (until the device is unbound).
    pub(crate) fn remove_ring(&mut self, token: u64) {
        self.retired.retain(|mem| mem.is_mapped());
        if let Some(mem) = self.rings.remove(&token) {
            if mem.is_mapped() {
                // Should the list not grow, the mapping alone keeps the memory.
                let _ = self.retired.push(mem, GFP_KERNEL);
            }
        }
    }

    /// The device is going away and the context is disassociated (its CQs and QPs destroyed,
    /// so the device uses no ring of it): frees every ring's memory, and closes the
    /// asynchronous events.
    ///
    /// # Safety
    ///
    /// No mapping of the file maps a page of the rings any more, and none can be made.
    pub(crate) unsafe fn revoke(&mut self) {
        self.rings_revoked = true;
        for mem in Iterator::chain(self.rings.values(), self.retired.iter()) {
            // SAFETY: the caller removed every mapping of the file, which is the only way the
            // rings are mapped, and no new one can be made.
            unsafe { mem.revoke() };
        }
    }
}

/// The verbs state of one user context of the RDMA core.
pub(crate) struct VerbsFile {
    pub(crate) nic: Arc<Nic>,
    /// The file's hardware context.
    pub(crate) ctx: u32,
    /// Whether the context has a PASID (SVA); without, only translation tables reach memory.
    pub(crate) sva: bool,
    /// The context's objects, which disassociating it frees ([`Objects::revoke`]).
    pub(crate) objects: Arc<Mutex<Objects>>,
    /// The objects are the RDMA core's kernel clients': the context has no process, and its
    /// MRs may be DMA MRs ([`VerbsFile::reg_dma_mr`]).
    pub(crate) kernel: bool,
}

/// The memory mode (`uapi::PFNIC_MEM_MODE_*`) of a context that asks for none: `sva` where it
/// has a PASID, else `odp` on a device that faults to the driver, else `pinned`.
pub(crate) fn default_mem_mode(nic: &Nic, sva: bool) -> u32 {
    if sva {
        uapi::PFNIC_MEM_MODE_SVA
    } else if nic.info.caps & uapi::PFNIC_CAP_FAULTS != 0 {
        uapi::PFNIC_MEM_MODE_ODP
    } else {
        uapi::PFNIC_MEM_MODE_PINNED
    }
}

/// The ring memory of a CQ or QP: device memory the process maps.
pub(crate) type RingMem = Arc<SharedCoherent<[u8]>>;

/// A new ring's memory with the CPU's address of its bytes: the driver reads and writes the
/// rings of its kernel clients' CQs and QPs itself.
///
/// # Invariants
///
/// `cpu` is the CPU address of the `len` bytes of `mem`, valid while `mem` is not revoked.
#[derive(Clone)]
pub(crate) struct Ring {
    pub(crate) mem: RingMem,
    cpu: NonNull<u8>,
    len: usize,
}

// SAFETY: `cpu` points into DMA memory that `mem` owns; only volatile accesses go through it.
unsafe impl Send for Ring {}
// SAFETY: As above.
unsafe impl Sync for Ring {}

impl Ring {
    /// `bytes` of zeroed ring memory for the device `nic`.
    pub(crate) fn new(nic: &Nic, bytes: usize) -> Result<Self> {
        let mem = nic.alloc_coherent(bytes)?;
        let len = mem.size();
        let cpu = NonNull::new(mem.as_mut_ptr().cast::<u8>()).ok_or(ENOMEM)?;
        // INVARIANT: `cpu` and `len` are the allocation's, which `SharedCoherent` takes over
        // without moving its bytes.
        Ok(Self {
            mem: SharedCoherent::new(mem)?,
            cpu,
            len,
        })
    }

    /// The CPU address of `N` bytes at `offset`, `N`-aligned, inside the ring.
    fn at<const N: usize>(&self, offset: usize) -> Option<*mut u8> {
        (offset.checked_add(N)? <= self.len && offset % N == 0)
            // SAFETY: Inside the allocation, checked above.
            .then(|| unsafe { self.cpu.as_ptr().add(offset) })
    }

    /// Reads the byte at `offset` (0 outside the ring), which the device may write.
    ///
    /// # Safety
    ///
    /// The ring's memory is not revoked: its context is not disassociated.
    pub(crate) unsafe fn read_u8(&self, offset: usize) -> u8 {
        // SAFETY: Inside the live allocation (the caller guarantees it is not revoked);
        // volatile, as the device writes it.
        self.at::<1>(offset)
            .map_or(0, |p| unsafe { p.read_volatile() })
    }

    /// Reads the little-endian `u32` at `offset` (0 outside the ring or unaligned).
    ///
    /// # Safety
    ///
    /// As for [`Ring::read_u8`].
    pub(crate) unsafe fn read_u32(&self, offset: usize) -> u32 {
        self.at::<4>(offset).map_or(0, |p| {
            // SAFETY: As in `read_u8`, aligned.
            let v = unsafe { p.cast::<u32>().read_volatile() };
            u32::from_le(v)
        })
    }

    /// Reads the little-endian `u64` at `offset` (0 outside the ring or unaligned).
    ///
    /// # Safety
    ///
    /// As for [`Ring::read_u8`].
    pub(crate) unsafe fn read_u64(&self, offset: usize) -> u64 {
        self.at::<8>(offset).map_or(0, |p| {
            // SAFETY: As in `read_u8`, aligned.
            let v = unsafe { p.cast::<u64>().read_volatile() };
            u64::from_le(v)
        })
    }

    /// Writes the little-endian `u32` at `offset` (nothing outside the ring or unaligned).
    ///
    /// # Safety
    ///
    /// As for [`Ring::read_u8`].
    pub(crate) unsafe fn write_u32(&self, offset: usize, v: u32) {
        if let Some(p) = self.at::<4>(offset) {
            // SAFETY: As in `read_u8`, aligned.
            unsafe { p.cast::<u32>().write_volatile(v.to_le()) };
        }
    }

    /// Writes the little-endian `u64` at `offset` (nothing outside the ring or unaligned).
    ///
    /// # Safety
    ///
    /// As for [`Ring::read_u8`].
    pub(crate) unsafe fn write_u64(&self, offset: usize, v: u64) {
        if let Some(p) = self.at::<8>(offset) {
            // SAFETY: As in `read_u8`, aligned.
            unsafe { p.cast::<u64>().write_volatile(v.to_le()) };
        }
    }
}

/// Rounds a ring allocation up to whole pages (it is mapped into the process).
pub(crate) fn ring_bytes(bytes: usize) -> Result<usize> {
    bytes.checked_next_multiple_of(PAGE_SIZE).ok_or(EINVAL)
}

impl VerbsFile {
    pub(crate) fn new(nic: &Arc<Nic>, ctx: u32, sva: bool) -> Result<Self> {
        let dm_pages = nic
            .verbs()
            .ok()
            .and_then(|v| v.dm.as_ref())
            .map_or(0, |d| d.pages() as usize);
        let objects = Objects {
            device_keeps_objects: false,
            next_handle: 1,
            next_token: 1,
            pds: RBTree::new(),
            mrs: RBTree::new(),
            cqs: RBTree::new(),
            qps: RBTree::new(),
            srqs: RBTree::new(),
            dms: RBTree::new(),
            dm_spare: BitmapVec::new(dm_pages, GFP_KERNEL)?,
            rings: RBTree::new(),
            retired: KVec::new(),
            rings_revoked: false,
            mem_mode: default_mem_mode(nic, sva),
            mem_mode_fixed: false,
        };
        let file = Self {
            nic: nic.clone(),
            ctx,
            sva,
            objects: Arc::pin_init(new_mutex!(objects), GFP_KERNEL)?,
            kernel: false,
        };
        Ok(file)
    }

    /// The objects of the RDMA core's kernel clients, in hardware context `ctx` (one without a
    /// PASID: their memory is the kernel's, at DMA addresses).
    pub(crate) fn new_kernel(nic: &Arc<Nic>, ctx: u32) -> Result<Self> {
        let mut file = Self::new(nic, ctx, false)?;
        file.kernel = true;
        Ok(file)
    }

    /// The memory mode the user context asks for (`PFNIC_MEM_MODE`): only before the first MR registration (`EBUSY` after).
    pub(crate) fn set_mem_mode(&self, mode: u32) -> Result {
        self.nic.verbs()?;
        let supported = match mode {
            uapi::PFNIC_MEM_MODE_SVA => self.sva,
            uapi::PFNIC_MEM_MODE_PINNED => self.nic.info.caps & uapi::PFNIC_CAP_TABLES != 0,
            uapi::PFNIC_MEM_MODE_ODP => self.nic.info.caps & uapi::PFNIC_CAP_FAULTS != 0,
            _ => return Err(EINVAL),
        };
        if !supported {
            return Err(EOPNOTSUPP);
        }
        let mut o = self.objects.lock();
        if o.mem_mode_fixed {
            return Err(EBUSY);
        }
        o.mem_mode = mode;
        Ok(())
    }

    /// The file's memory mode, `uapi::PFNIC_MEM_MODE_*`.
    pub(crate) fn mem_mode(&self) -> u32 {
        self.objects.lock().mem_mode
    }

    /// `ibv_query_device_ex`: the device's verbs, with on-demand paging only in a mode that
    /// has it (implicit MRs in `odp` only on a device whose implicit MR may have a table).
    pub(crate) fn query_verbs(&self) -> Result<uapi::QueryVerbs> {
        let mut q = self.nic.query_verbs()?;
        match self.mem_mode() {
            uapi::PFNIC_MEM_MODE_SVA => {}
            uapi::PFNIC_MEM_MODE_ODP if self.nic.info.implicit_tables() => {}
            uapi::PFNIC_MEM_MODE_ODP => q.odp_general_caps &= !uapi::PFNIC_ODP_SUPPORT_IMPLICIT,
            _ => {
                q.odp_general_caps = 0;
                q.odp_rc_caps = 0;
            }
        }
        Ok(q)
    }

    /// `ibv_alloc_pd`: the new PD's handle.
    pub(crate) fn alloc_pd(&self) -> Result<u32> {
        self.nic.verbs()?;
        let mut o = self.objects.lock();
        if o.pds.iter().count() >= MAX_PDS as usize {
            return Err(ENOSPC);
        }
        let pd = o.new_handle();
        o.pds.try_create_and_insert(
            pd,
            Pd {
                mrs: 0,
                qps: 0,
                srqs: 0,
            },
            GFP_KERNEL,
        )?;
        Ok(pd)
    }

    /// `ibv_dealloc_pd`: `EBUSY` while MRs, SRQs or QPs use it.
    pub(crate) fn dealloc_pd(&self, handle: u32) -> Result {
        self.nic.verbs()?;
        let mut o = self.objects.lock();
        let pd = o.pds.get(&handle).ok_or(EINVAL)?;
        if pd.mrs != 0 || pd.qps != 0 || pd.srqs != 0 {
            return Err(EBUSY);
        }
        o.pds.remove(&handle);
        Ok(())
    }

    /// Maps the doorbell page (offset 0) or the rings of a CQ or QP (the offset its create
    /// ioctl returned) into the process. `EINVAL` for another offset, a private mapping or one
    /// larger than the object.
    pub(crate) fn mmap(&self, vma: &VmaNew) -> Result {
        self.nic.verbs()?;
        if vma.flags() & flags::SHARED == 0 {
            return Err(EINVAL);
        }
        vma.try_clear_mayexec()?;
        // A fork child cannot use the context; it does not inherit the mappings either.
        vma.set_dontcopy();
        let token = vma.pgoff() as u64;
        // Nothing is mapped once the device is unbound, and unbinding removes what was.
        self.nic.map_into_process(|| self.map(vma, token))
    }

    /// Maps the doorbell page or the rings of `token` (see [`VerbsFile::mmap`]).
    fn map(&self, vma: &VmaNew, token: u64) -> Result {
        if token == uapi::PFNIC_MMAP_DOORBELL {
            // Refused once the device is unbound (its BAR may be gone); unbinding removes the
            // mappings made before.
            self.nic.with_bar(|_| ())?;
            return self.nic.info.doorbells.map(self.ctx, vma);
        }
        // Mapped under the lock (`mmap()` holds the address space's lock, which we never take
        // while holding ours): a ring the file let go of is not mapped after that, so every
        // mapping's memory is one `revoke` frees. Last: a successful mapping holds a
        // reference to the ring.
        let o = self.objects.lock();
        if let Some(ring) = o.rings.get(&token) {
            return ring.mmap(vma);
        }
        self.map_dm(&o, token, vma).unwrap_or(Err(EINVAL))
    }

    /// Destroys every QP, SRQ, CQ and MR of the file in the device, in that order (QPs use
    /// SRQs, CQs and keys), and gives its device memory back. Runs at release, before the hardware context stops; after an unbind the device
    /// was reset, which emptied its tables, and the commands fail harmlessly.
    fn destroy_all(&self) {
        // The context's refused remote accesses are reported before its count goes.
        self.nic.flush_access_alert(self.ctx);
        let mut o = self.objects.lock();
        let verbs = match self.nic.verbs() {
            Ok(v) => v,
            Err(_) => return,
        };
        // What the device does not let go of is quarantined ([`super::quarantine`]): its
        // ring memory and number stay out of use.
        while let Some((qpn, ring)) = o.qps.iter().next().map(|(n, q)| (*n, q.ring)) {
            o.qps.remove(&qpn);
            verbs.eq.set_qp_owner(qpn, None);
            if verbs.destroy_queue(
                &self.nic,
                &mut o,
                &cmd::QpDestroy { index: qpn },
                "QP",
                ring,
            ) {
                verbs.ids.lock().free_qpn(qpn);
            }
        }
        while let Some((srqn, ring)) = o.srqs.iter().next().map(|(n, s)| (*n, s.ring)) {
            o.srqs.remove(&srqn);
            verbs.eq.set_srq_owner(srqn, None);
            if verbs.destroy_queue(
                &self.nic,
                &mut o,
                &cmd::SrqDestroy { index: srqn },
                "SRQ",
                ring,
            ) {
                verbs.ids.lock().srqns.free(srqn);
            }
        }
        while let Some((cqn, ring)) = o.cqs.iter().next().map(|(n, c)| (*n, c.ring)) {
            o.cqs.remove(&cqn);
            verbs.eq.set_route(cqn, None);
            if verbs.destroy_queue(
                &self.nic,
                &mut o,
                &cmd::CqDestroy { index: cqn },
                "CQ",
                ring,
            ) {
                verbs.ids.lock().cqns.free(cqn);
            }
        }
        loop {
            let Some(handle) = o.mrs.keys().next().copied() else {
                break;
            };
            if let Some(mr) = o.mrs.remove(&handle) {
                if !refused(&self.nic, &mr.clear(&self.nic)) {
                    verbs.ids.lock().mrs.free(mr.index);
                } else {
                    verbs.quarantine(&self.nic, &mut o, "MR", mr.index, Some(Quarantined::mr(mr)));
                }
            }
        }
        // No MR names device memory any more, and no mapping of the file is left (they hold
        // it open): its pages go back to the device.
        loop {
            let Some(handle) = o.dms.keys().next().copied() else {
                break;
            };
            if let Some(dm) = o.dms.remove(&handle) {
                self.release_dm_run(dm.run);
            }
        }
        while let Some(p) = o.dm_spare.next_bit(0) {
            o.dm_spare.clear_bit(p);
            self.release_dm_run(dm::DmRun {
                first: p as u32,
                pages: 1,
            });
        }
    }
}

impl Drop for VerbsFile {
    fn drop(&mut self) {
        self.destroy_all();
        // The objects the device keeps name this context: the next owner of its slot must not
        // reach them (the context stops right after this, as the file's owner drops it).
        if self.objects.lock().device_keeps_objects {
            self.nic.keep_context(self.ctx);
        }
    }
}
