//! Address handles (`ibv_ah`) and what UD queue pairs need besides them: the Q_Key, the
//! transitions to RTS without a peer, and the destination of each send.

use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::mr::PdInner;
use crate::{check, non_null, sys, GlobalRoute, Pd, Qp};

/// An address handle: where a UD QP's sends go. Keeps its PD alive.
pub struct Ah {
    ptr: NonNull<sys::ibv_ah>,
    _pd: Arc<PdInner>,
}

// SAFETY: libibverbs' address handles may be used and destroyed from any thread.
unsafe impl Send for Ah {}
// SAFETY: as for `Send`; posting with an AH only reads it.
unsafe impl Sync for Ah {}

impl Pd {
    /// `ibv_create_ah` for port 1 and the global route `grh` (RoCE addresses always have one).
    pub fn create_ah(&self, grh: &GlobalRoute) -> io::Result<Ah> {
        // SAFETY: all-zero bytes are a valid `ibv_ah_attr` (integers and arrays).
        let mut a: sys::ibv_ah_attr = unsafe { std::mem::zeroed() };
        a.port_num = 1;
        a.is_global = 1;
        a.grh.dgid.raw = grh.dgid;
        a.grh.sgid_index = grh.sgid_index;
        a.grh.hop_limit = grh.hop_limit;
        a.grh.traffic_class = grh.traffic_class;
        a.grh.flow_label = grh.flow_label;
        // SAFETY: the PD is allocated and `a` a complete `ibv_ah_attr`.
        let ptr = non_null(unsafe { sys::ibv_create_ah(self.inner.ptr.as_ptr(), &mut a) })?;
        Ok(Ah {
            ptr,
            _pd: self.inner.clone(),
        })
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: the AH exists, and no post in progress uses it (posts borrow it).
        unsafe { sys::ibv_destroy_ah(self.ptr.as_ptr()) };
    }
}

/// A UD send's destination: the address handle, the QP there, and its Q_Key.
#[derive(Clone, Copy)]
pub struct UdPeer<'a> {
    pub ah: &'a Ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

impl Qp {
    /// Takes a UD QP from RESET through INIT (port 1, P_Key index 0, Q_Key `qkey`) and RTR to
    /// RTS (send PSN `sq_psn`): it then receives datagrams carrying `qkey` and sends to any
    /// address handle.
    pub fn ready_ud(&self, qkey: u32, sq_psn: u32) -> io::Result<()> {
        use sys::{
            ibv_qp_attr_mask_IBV_QP_PKEY_INDEX as PKEY_INDEX, ibv_qp_attr_mask_IBV_QP_PORT as PORT,
            ibv_qp_attr_mask_IBV_QP_QKEY as QKEY, ibv_qp_attr_mask_IBV_QP_SQ_PSN as SQ_PSN,
            ibv_qp_attr_mask_IBV_QP_STATE as STATE,
        };
        // SAFETY: all-zero bytes are a valid `ibv_qp_attr` (integers and arrays).
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.port_num = 1;
        a.pkey_index = 0;
        a.qkey = qkey;
        a.sq_psn = sq_psn;
        for (state, mask) in [
            (
                sys::ibv_qp_state_IBV_QPS_INIT,
                STATE | PKEY_INDEX | PORT | QKEY,
            ),
            (sys::ibv_qp_state_IBV_QPS_RTR, STATE),
            (sys::ibv_qp_state_IBV_QPS_RTS, STATE | SQ_PSN),
        ] {
            a.qp_state = state;
            // SAFETY: the QP exists and `a` is complete.
            check(unsafe { sys::ibv_modify_qp(self.as_ptr(), &mut a, mask as i32) })?;
        }
        Ok(())
    }

    /// `ibv_post_send` of `wrs` on a UD QP, each to `to`; as [`Qp::post_send`] otherwise
    /// (the work requests' own `ud` fields are ignored).
    pub fn post_send_ud(
        &self,
        wrs: &[crate::SendWr<'_>],
        to: &UdPeer<'_>,
    ) -> Result<(), crate::PostError> {
        self.post_send_list(wrs, |w| {
            w.wr.ud.ah = to.ah.ptr.as_ptr();
            w.wr.ud.remote_qpn = to.remote_qpn;
            w.wr.ud.remote_qkey = to.remote_qkey;
        })
    }
}
