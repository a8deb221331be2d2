//! Work requests: what `ibv_create_qp_ex` may ask of pfnic, and posting libibverbs' send and
//! receive work requests on pfnic's queues.

use core::ffi::c_int;

use pfnic_verbs::{PostError, Qp, RecvWr, SendWr, Sge, UdDest, WrOpcode};

use crate::ffi::{ibv_ah, ibv_qp_init_attr_ex, ibv_recv_wr, ibv_send_wr, ibv_sge};
use crate::inline::{InlinePost, InlineRing, SEND_INLINE};
use crate::qp_ex::SEND_OPS_SUPPORTED;

/// `enum ibv_qp_init_attr_mask`: `PD`, `CREATE_FLAGS`, `SEND_OPS_FLAGS` (what pfnic takes);
/// every bit libibverbs defines.
const QP_INIT_ATTR_PD: u32 = 1;
const QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
const QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;
const QP_INIT_ATTR_ALL: u32 = (1 << 7) - 1;
/// `IBV_QPT_UD`.
const QPT_UD: c_int = 4;

/// `IBV_QP_EX_WITH_SEND` and `IBV_QP_EX_WITH_SEND_WITH_IMM`: the builder's operations on a UD
/// QP.
const SEND_OPS_UD: u64 = (1 << 2) | (1 << 3);

extern "C" {
    /// The address vector of an address handle of the provider (`pfnic.c`): the 40 bytes a
    /// UD work queue entry carries, as the driver answered the AH's creation.
    fn pfnic_ah_av(ah: *const ibv_ah) -> *const [u8; 40];
}

/// The destination of a UD work request to `ah`.
///
/// # Safety
///
/// `ah` is a live address handle of this provider.
pub(crate) unsafe fn ud_dest(ah: *const ibv_ah, remote_qpn: u32, remote_qkey: u32) -> UdDest {
    UdDest {
        remote_qpn,
        remote_qkey,
        // SAFETY: the caller passes a live address handle of this provider, whose address
        // vector lives as long as it does.
        av: unsafe { *pfnic_ah_av(ah) },
    }
}

/// The rules of `ibv_create_qp_ex`'s attributes beyond the PD: whether the QP is extended
/// (`IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`), `EINVAL` for `comp_mask` bits libibverbs does not
/// define, `EOPNOTSUPP` for what pfnic does not have (XRC, TSO, RSS, creation flags, send
/// operations beyond `ibv_post_send`'s; on a UD QP, the builder's operations other than SEND
/// and SEND with immediate).
pub(crate) fn check_qp_init_attr_ex(a: &ibv_qp_init_attr_ex) -> Result<bool, c_int> {
    if a.comp_mask & !QP_INIT_ATTR_ALL != 0 {
        return Err(libc::EINVAL);
    }
    let supported = QP_INIT_ATTR_PD | QP_INIT_ATTR_CREATE_FLAGS | QP_INIT_ATTR_SEND_OPS_FLAGS;
    let extended = a.comp_mask & QP_INIT_ATTR_SEND_OPS_FLAGS != 0;
    if a.comp_mask & !supported != 0
        || (a.comp_mask & QP_INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0)
        || (extended && a.send_ops_flags & !SEND_OPS_SUPPORTED != 0)
        || (extended && a.qp_type == QPT_UD && a.send_ops_flags & !SEND_OPS_UD != 0)
    {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(extended)
}

/// What `ibv_post_send`, `ibv_post_recv` and `ibv_post_srq_recv` share: hands the
/// NULL-terminated list at `first` (linked by `next`) to `post` one work request at a time,
/// converted with `convert` (`None`: a work request the device cannot take, `EINVAL`), and
/// reports the first work request not posted in `*bad_wr`. Those before it are posted, as a
/// provider does. Nothing is allocated: the list is read as it is posted.
///
/// # Safety
///
/// `first` is NULL or a valid list of work requests; `bad_wr` is NULL or valid for a write.
pub(crate) unsafe fn post_list<N, W, T>(
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

/// `ibv_post_send` on `q` (`None`: `EINVAL`): queues the list of work requests and rings the
/// doorbell, no system call, the inline work requests copied through `ring` (without one they
/// fail with `EINVAL`). 0, or an errno value with `*bad_wr` the first work request not posted
/// (`EINVAL`: bad opcode, flags or SGE count; `ENOMEM`: send queue full).
///
/// # Safety
///
/// `wr` is NULL or a valid list of work requests whose SGE lists are readable; `bad_wr` is
/// NULL or valid for a write.
pub(crate) unsafe fn post_send_on(
    q: Option<&Qp>,
    ring: Option<&InlineRing>,
    ud: bool,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    if let (Some(q), Some(ring)) = (q, ring) {
        // SAFETY: the caller passes a valid list or NULL.
        if unsafe { has_inline(wr) } {
            // SAFETY: forwarded to the caller.
            return unsafe { post_send_inline(q, ring, ud, wr, bad_wr) };
        }
    }
    // SAFETY: the caller's work requests, their SGE lists and address handles.
    let convert = |w: &ibv_send_wr| unsafe { send_wr_of(w, ud) };
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

/// A C work request as the uAPI's, of a UD QP's if `ud` (`None`: an opcode the device does not
/// have, a bad SGE list, no address handle).
///
/// # Safety
///
/// `w.sg_list` holds `w.num_sge` readable entries (or `num_sge` is 0), which outlive the
/// returned work request (`'a`, the caller's to choose, as for [`sges`]); with `ud`, `w.wr.ud.ah`
/// is NULL or a live address handle of this provider.
unsafe fn send_wr_of<'a>(w: &ibv_send_wr, ud: bool) -> Option<SendWr<'a>> {
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
    let ud = if ud {
        // SAFETY: a UD QP's work requests use the `ud` member of the union.
        let u = unsafe { w.wr.ud };
        if u.ah.is_null() {
            return None;
        }
        // SAFETY: the caller passes a live address handle of this provider.
        Some(unsafe { ud_dest(u.ah, u.remote_qpn, u.remote_qkey) })
    } else {
        None
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
        ud,
    })
}

/// `ibv_post_send` of a list with inline work requests: each is posted through the QP's
/// inline ring ([`InlineRing::post`]), the others as they are. As [`post_send_on`] otherwise.
///
/// # Safety
///
/// As [`post_send_on`].
unsafe fn post_send_inline(
    q: &Qp,
    ring: &InlineRing,
    ud: bool,
    first: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    let mut nodes: Vec<&ibv_send_wr> = Vec::new();
    let mut posts: Vec<InlinePost<'_>> = Vec::new();
    let mut p = first;
    // SAFETY: the caller passes a valid NULL-terminated list, not changed during the post.
    while let Some(w) = unsafe { p.as_ref() } {
        p = w.next;
        // SAFETY: the caller's work request, SGE list and address handle.
        let wr = unsafe { send_wr_of(w, ud) };
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

/// A receive work request as the device takes it; `None` if its SGE list is unusable.
///
/// # Safety
///
/// `w.sg_list` holds `w.num_sge` readable entries (or the count is 0), alive while the result
/// is.
pub(crate) unsafe fn recv_wr_of<'a>(w: &ibv_recv_wr) -> Option<RecvWr<'a>> {
    // SAFETY: forwarded to the caller.
    let sg = unsafe { sges(w.sg_list, w.num_sge) }.ok()?;
    Some(RecvWr {
        wr_id: w.wr_id,
        sg_list: sg,
    })
}

/// The scatter/gather list of a work request, as the uAPI's `Sge`s.
///
/// # Safety
///
/// `sg_list` holds `num_sge` readable entries (or `num_sge` is 0), which outlive the use of
/// the returned slice.
unsafe fn sges<'a>(sg_list: *const ibv_sge, num_sge: c_int) -> Result<&'a [Sge], c_int> {
    let n = usize::try_from(num_sge).map_err(|_| libc::EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if sg_list.is_null() {
        return Err(libc::EINVAL);
    }
    const _: () = assert!(
        core::mem::size_of::<ibv_sge>() == core::mem::size_of::<Sge>()
            && core::mem::align_of::<ibv_sge>() == core::mem::align_of::<Sge>()
    );
    // SAFETY: `ibv_sge` and the uAPI's `Sge` are both `#[repr(C)]` `{ u64 addr; u32 length;
    // u32 lkey; }` (size and alignment checked above); the caller passes `n` readable entries.
    Ok(unsafe { core::slice::from_raw_parts(sg_list.cast::<Sge>(), n) })
}
