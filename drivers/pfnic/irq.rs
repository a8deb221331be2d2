// SPDX-License-Identifier: GPL-2.0

//! MSI-X interrupt handlers: one registration per allocated vector.

use crate::nic::{IrqOutcome, Nic};
use kernel::{
    irq::{self, IrqReturn, ThreadedIrqReturn},
    pci,
    prelude::*,
    sync::Arc,
};

/// The handler of one MSI-X vector. MSI-X vectors are never shared, but the device's cause
/// register is: the handler acknowledges whatever it finds and reports `None` when nothing was
/// pending, so that a device that interrupts for no reason shows up as spurious.
pub(crate) struct VectorHandler {
    nic: Arc<Nic>,
    vector: usize,
}

impl irq::ThreadedHandler for VectorHandler {
    fn handle(&self) -> ThreadedIrqReturn {
        match self.nic.handle_irq(self.vector) {
            IrqOutcome::None => ThreadedIrqReturn::None,
            IrqOutcome::Handled => ThreadedIrqReturn::Handled,
            IrqOutcome::Faults => ThreadedIrqReturn::WakeThread,
        }
    }

    /// Serves page faults, which may sleep (only the event queue's vector wakes it).
    fn handle_threaded(&self) -> IrqReturn {
        self.nic.serve_faults();
        IrqReturn::Handled
    }
}

/// A registered handler for one vector. Threaded: the event queue's thread serves page faults
/// (unbinding frees the vectors, which waits for it).
pub(crate) type VectorRegistration<'bound> = irq::ThreadedRegistration<'bound, VectorHandler>;

/// Registers a handler on every vector in `vectors`.
pub(crate) fn register_all<'bound>(
    vectors: pci::BoundIrqVectors<'bound>,
    nic: &Arc<Nic>,
) -> Result<KVec<Pin<KBox<VectorRegistration<'bound>>>>> {
    let mut regs = KVec::with_capacity(vectors.len(), GFP_KERNEL)?;
    for vector in 0..vectors.len() {
        let nic = nic.clone();
        let handler = try_init!(VectorHandler { nic, vector }? Error);
        // SAFETY: the registration is pinned in a `KBox` that the driver data owns; it is
        // dropped, never leaked, when the driver unbinds.
        let reg = unsafe {
            irq::ThreadedRegistration::new(
                vectors.index(vector)?,
                irq::Flags::TRIGGER_NONE,
                c"pfnic",
                handler,
            )
        };
        regs.push(KBox::pin_init(reg, GFP_KERNEL)?, GFP_KERNEL)?;
    }
    Ok(regs)
}
