//! Completions: what `ibv_create_cq_ex` may ask of pfnic, and polling completions into
//! libibverbs' `ibv_wc`.

use core::ffi::c_int;

use pfnic_verbs::{Cq, Wc, WcOpcode};

use crate::ffi::{ibv_cq_init_attr_ex, ibv_wc};

/// A completion as libibverbs reports it, from a device whose port has LID `lid` (the source
/// of every receive: the peer is on this port, or across a wire, where LIDs are 0).
pub(crate) fn wc_to_ibv(x: &Wc, lid: u16) -> ibv_wc {
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

/// What `ibv_create_cq_ex` may ask of pfnic: whether the CQ stamps its completions, or the
/// errno value for attributes pfnic refuses: `EOPNOTSUPP` for completion fields beyond those
/// (wall-clock timestamps, CVLAN, flow tag, tag matching) and
/// `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`; `EINVAL` for unknown `comp_mask` or `flags` bits and
/// a parent domain (pfnic has none).
pub(crate) fn check_cq_init_attr_ex(a: &ibv_cq_init_attr_ex) -> Result<bool, c_int> {
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

/// Polls up to `num_entries` completions of `cq` into `wc` as libibverbs reports them, from a
/// device whose port has LID `lid` ([`wc_to_ibv`]): how many, or `-EINVAL` for bad arguments.
///
/// # Safety
///
/// `wc` has room for `num_entries` entries (or is NULL with none asked).
pub(crate) unsafe fn poll_into(cq: &Cq, num_entries: c_int, wc: *mut ibv_wc, lid: u16) -> c_int {
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
