// SPDX-License-Identifier: GPL-2.0

//! The auxiliary devices of a pfnic: what the PCI function's driver splits off for other
//! subsystems, as mlx5, ice and nova-core do.
//!
//! The PCI driver ([`crate::driver`]) owns the function (BARs, interrupts, contexts, the
//! admin mailbox) and adds, for NIC N, `pfnic.eth.N` (the port's Ethernet queues, on a
//! device that has them) and `pfnic.rdma.N` (the verbs engine, on a device that has one).
//! Each carries the [`Nic`] as its registration data; their drivers register the netdev
//! ([`crate::eth::EthDriver`]) and the RDMA core's device ([`crate::ib_device::RdmaDriver`]).
//!
//! The RDMA device ties its port to the netdev, which must stay registered as long as the
//! RDMA device is: the PCI driver removes `pfnic.rdma.N` before `pfnic.eth.N`, the module
//! unregisters the PCI driver before the auxiliary drivers, and the Ethernet driver cannot be
//! unbound from userspace (`SUPPRESS_BIND_ATTRS`). The RDMA driver can: unbinding it removes
//! `pfnicN` from the RDMA core and leaves the netdev up; binding it again registers `pfnicN`
//! anew.

use crate::{chardev::NicIndex, nic::Nic};
use kernel::{
    auxiliary,
    device::{Bound, Device},
    prelude::*,
    sync::Arc,
    types::CovariantForLt,
};

/// The auxiliary devices' and drivers' module name (`KBUILD_MODNAME`).
const MODNAME: &CStr = c"pfnic";
/// The Ethernet auxiliary device (`pfnic.eth.N`) and its driver.
pub(crate) const ETH: &CStr = c"eth";
pub(crate) const ETH_DRIVER: &CStr = c"pfnic.eth";
/// The RDMA auxiliary device (`pfnic.rdma.N`) and its driver.
pub(crate) const RDMA: &CStr = c"rdma";
pub(crate) const RDMA_DRIVER: &CStr = c"pfnic.rdma";

/// What both auxiliary devices carry: the NIC they are part of.
pub(crate) type AuxData = CovariantForLt!(Arc<Nic>);

/// A registered auxiliary device; removed (its driver unbound first) when dropped.
pub(crate) type AuxDevice<'bound> = auxiliary::Registration<'bound, AuxData>;

/// The auxiliary devices of one pfnic, as the PCI driver holds them. Fields drop in
/// declaration order: the RDMA device before the Ethernet one, whatever drops them (the
/// unbind, or a probe that fails after adding them).
#[derive(Default)]
pub(crate) struct AuxDevices<'bound> {
    /// `pfnic.rdma.N`; `None` without verbs, or when it could not be added.
    pub(crate) _rdma: Option<AuxDevice<'bound>>,
    /// `pfnic.eth.N`; `None` without the Ethernet queues, or when it could not be added.
    pub(crate) _eth: Option<AuxDevice<'bound>>,
}

/// Adds the auxiliary device `name` (`pfnic.NAME.N`, N the NIC's index) of `nic` under
/// `parent`, its PCI device. Its driver, if registered, binds before this returns.
pub(crate) fn add<'bound>(
    parent: &'bound Device<Bound>,
    name: &'static CStr,
    index: &NicIndex,
    nic: &Arc<Nic>,
) -> Result<AuxDevice<'bound>> {
    auxiliary::Registration::new(
        parent,
        name,
        index.get(),
        MODNAME,
        Ok::<_, Error>(nic.clone()),
    )
}

/// The NIC an auxiliary device of pfnic belongs to.
pub(crate) fn nic(adev: &auxiliary::Device<Bound>) -> Result<Arc<Nic>> {
    Ok(adev.registration_data::<AuxData>()?.get_ref().clone())
}

/// The ID table entry of auxiliary device `name` of pfnic.
pub(crate) const fn id(name: &'static CStr) -> auxiliary::DeviceId {
    auxiliary::DeviceId::new(MODNAME, name)
}
