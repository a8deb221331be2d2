// SPDX-License-Identifier: GPL-2.0

//! The port's Ethernet function: the device's transmit and receive rings of frames that are
//! not RoCE (docs/wire.md, "Ethernet queues"), behind a Linux netdev.
//!
//! Frames are copied: each descriptor owns a 2 KiB slot of one coherent buffer, so a frame
//! the stack hands over is copied into its slot and freed at once, and a received frame is
//! copied out into a new socket buffer. This path carries ARP, ICMP and IP for the
//! operating system, not the RDMA traffic, which the device moves itself.
//!
//! Both rings are driven under one interrupt-safe lock: `start_xmit` (bottom halves off), the
//! netdev's NAPI poll (softirq) and the queues' interrupt take it, and `open`/`stop` (under
//! the RTNL lock) set up and tear down what they use. The interrupt only schedules the poll:
//! the device masks it as it fires, and the poll arms it again once the rings are drained
//! (NAPI), so a burst of frames costs one interrupt, and frames reach the stack in softirq
//! context, through GRO.

use crate::{auxdev, nic::Nic, regs};
use kernel::{
    auxiliary,
    device::{Bound, Core, Device as KDevice},
    devres::Devres,
    dma::{Coherent, DmaAddress},
    io::{io_project, io_read, Io},
    net::dev::{self as netdev, Device, Napi, SkBuff, Stats},
    new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex, SpinLockIrq,
    },
};
use zerocopy_derive::{FromBytes as ZFromBytes, Immutable, IntoBytes as ZIntoBytes};

/// Descriptors in each ring (a power of two); one always stays empty.
const RING: u32 = 128;
/// Bytes of each descriptor's buffer: a full frame (1518 bytes with a VLAN tag) fits.
const SLOT: usize = 2048;
/// Received frames one NAPI poll takes at most (the core's budget is `NAPI_POLL_WEIGHT`, 64).
const NAPI_BATCH: usize = 64;
/// The frame lengths the device sends (docs/wire.md): a header to a tagged full frame.
const MIN_FRAME: usize = 14;
const MAX_FRAME: usize = 1518;

/// `status` (docs/wire.md): done, with a code in bits 23:16 and a length in bits 15:0.
const DONE: u32 = 1 << 31;
const CODE_OK: u32 = 1;
const CODE_NO_LINK: u32 = 3;

/// A descriptor of either ring, as the device reads it.
#[repr(C)]
#[derive(Clone, Copy, Default, ZFromBytes, ZIntoBytes, Immutable)]
pub(crate) struct EthDesc {
    addr: u64,
    len: u16,
    flags: u16,
    status: u32,
}

kernel::static_assert!(core::mem::size_of::<EthDesc>() == 16);

// SAFETY: `EthDesc` is `repr(C)` with integer fields only and no padding (the zerocopy
// `IntoBytes` derive proves it), so every bit pattern is valid.
unsafe impl kernel::transmute::FromBytes for EthDesc {}
// SAFETY: As above: no padding, so every byte is initialized.
unsafe impl kernel::transmute::AsBytes for EthDesc {}

/// The driver memory of the queues, freed at unbind (after the netdev is gone and the
/// device reset).
struct EthMem {
    tx: Coherent<[EthDesc]>,
    rx: Coherent<[EthDesc]>,
    /// `RING` transmit slots, then `RING` receive slots.
    buffers: Coherent<[u8]>,
}

/// What the lock guards: the rings' positions and the netdev while it is up.
struct EthState {
    /// The netdev, between `open` and `stop` (both under this lock), so the interrupt handler
    /// only ever sees it while it is registered.
    netdev: Option<*const Device>,
    /// Transmit descriptors posted and reclaimed (free-running).
    tx_posted: u32,
    tx_done: u32,
    /// The next receive descriptor to look at (free-running); `RING - 1` ahead of it are
    /// posted.
    rx_next: u32,
    /// The netdev is promiscuous: the device takes frames for any MAC (`ETH_CTRL.PROMISC`).
    promisc: bool,
}

impl EthState {
    /// `ETH_CTRL` of running queues, the interrupt armed, in the netdev's receive mode.
    fn running_ctrl(&self) -> regs::ETH_CTRL {
        regs::ETH_CTRL::zeroed()
            .with_enable(true)
            .with_irq_enable(true)
            .with_promisc(self.promisc)
    }
}

// SAFETY: The netdev pointer is used under the lock only, while the device is registered.
unsafe impl Send for EthState {}

/// The counters `ip -s link` shows.
struct EthCounters {
    rx_packets: Atomic<u64>,
    rx_bytes: Atomic<u64>,
    rx_errors: Atomic<u64>,
    rx_dropped: Atomic<u64>,
    tx_packets: Atomic<u64>,
    tx_bytes: Atomic<u64>,
    tx_errors: Atomic<u64>,
    tx_dropped: Atomic<u64>,
}

/// The Ethernet queues of one pfnic.
#[pin_data]
pub(crate) struct EthPort {
    mem: Devres<EthMem>,
    tx_base: DmaAddress,
    rx_base: DmaAddress,
    buf_base: DmaAddress,
    /// The MSI-X vector of the queues.
    pub(crate) vector: u32,
    /// The port's MAC address.
    pub(crate) mac: [u8; 6],
    #[pin]
    state: SpinLockIrq<EthState>,
    counters: EthCounters,
    /// The netdev's IPv4 addresses as the RDMA core's GID table has them (index, address), in
    /// the order it added them; the first is the port's `PORT_IPV4`.
    #[pin]
    pub(crate) addresses: Mutex<KVec<(u16, u32)>>,
    /// The netdev, from the Ethernet auxiliary driver's probe to its unbind ([`EthDriver`]).
    /// It holds the [`Nic`] (its driver data) that holds this: the unbind breaks the cycle.
    #[pin]
    pub(crate) netdev: Mutex<Option<Registration>>,
}

impl EthPort {
    /// Allocates the rings and buffers; `vector` is the queues' interrupt.
    pub(crate) fn new(
        dev: &KDevice<Bound>,
        vector: u32,
        mac: [u8; 6],
    ) -> Result<impl PinInit<Self, Error>> {
        let tx = Coherent::zeroed_slice(dev, RING as usize, GFP_KERNEL)?;
        let rx = Coherent::zeroed_slice(dev, RING as usize, GFP_KERNEL)?;
        let buffers = Coherent::zeroed_slice(dev, 2 * RING as usize * SLOT, GFP_KERNEL)?;
        let (tx_base, rx_base, buf_base) =
            (tx.dma_address(), rx.dma_address(), buffers.dma_address());
        let mem = Devres::new(dev, EthMem { tx, rx, buffers })?;
        Ok(try_pin_init!(Self {
            mem,
            tx_base,
            rx_base,
            buf_base,
            vector,
            mac,
            state <- new_spinlock_irq!(EthState {
                netdev: None,
                tx_posted: 0,
                tx_done: 0,
                rx_next: 0,
                promisc: false,
            }),
            addresses <- new_mutex!(KVec::new()),
            netdev <- new_mutex!(None),
            counters: EthCounters {
                rx_packets: Atomic::new(0),
                rx_bytes: Atomic::new(0),
                rx_errors: Atomic::new(0),
                rx_dropped: Atomic::new(0),
                tx_packets: Atomic::new(0),
                tx_bytes: Atomic::new(0),
                tx_errors: Atomic::new(0),
                tx_dropped: Atomic::new(0),
            },
        }? Error))
    }

    /// The DMA address of buffer slot `slot` (transmit slots first).
    fn slot_dma(&self, slot: usize) -> u64 {
        self.buf_base + (slot * SLOT) as u64
    }

    /// The byte offset of receive slot `index`'s buffer.
    fn rx_slot(index: u32) -> usize {
        (RING + index % RING) as usize * SLOT
    }

    /// Brings the queues up for `netdev` (`ndo_open`): programs the rings, posts every receive
    /// buffer and arms the interrupt.
    fn open(&self, nic: &Nic, netdev: &Device) -> Result {
        let mut st = self.state.lock();
        self.mem
            .try_access_with(|mem| {
                for i in 0..RING {
                    io_project!(&mem.tx, [panic: i as usize]).copy_write(EthDesc::default());
                    io_project!(&mem.rx, [panic: i as usize]).copy_write(EthDesc {
                        addr: self.slot_dma(Self::rx_slot(i) / SLOT),
                        len: SLOT as u16,
                        flags: 0,
                        status: 0,
                    });
                }
            })
            .ok_or(ENODEV)?;
        // Taken once the device runs the queues, not before: a failed open leaves no netdev.
        let running = EthState {
            netdev: Some(netdev),
            tx_posted: 0,
            tx_done: 0,
            rx_next: 0,
            promisc: netdev.promiscuous(),
        };
        let link = nic.with_bar(|bar| {
            bar.write_reg(regs::ETH_CTRL::zeroed());
            bar.write_reg(regs::ETH_VECTOR::zeroed().with_vector(self.vector));
            bar.write_reg(regs::ETH_TX_LO::zeroed().with_addr(self.tx_base as u32));
            bar.write_reg(regs::ETH_TX_HI::zeroed().with_addr((self.tx_base >> 32) as u32));
            bar.write_reg(regs::ETH_TX_SIZE::zeroed().with_value(RING));
            bar.write_reg(regs::ETH_RX_LO::zeroed().with_addr(self.rx_base as u32));
            bar.write_reg(regs::ETH_RX_HI::zeroed().with_addr((self.rx_base >> 32) as u32));
            bar.write_reg(regs::ETH_RX_SIZE::zeroed().with_value(RING));
            bar.write_reg(regs::ETH_CTRL::zeroed().with_enable(true));
            bar.write_reg(regs::ETH_RX_TAIL::zeroed().with_index(RING - 1));
            bar.write_reg(running.running_ctrl());
            bar.read(regs::PORT_STATUS).link_up()
        })?;
        *st = running;
        if link {
            netdev.carrier_on();
        } else {
            netdev.carrier_off();
        }
        Ok(())
    }

    /// Takes the queues down (`ndo_stop`): the device stops both rings at once; frames posted
    /// and not sent are dropped.
    fn stop(&self, nic: &Nic) {
        let mut st = self.state.lock();
        // A device already unbound sends nothing anyway.
        let _ = nic.with_bar(|bar| bar.write_reg(regs::ETH_CTRL::zeroed()));
        let lost = st.tx_posted.wrapping_sub(st.tx_done);
        self.counters.tx_dropped.add(u64::from(lost), Relaxed);
        st.netdev = None;
        st.tx_posted = 0;
        st.tx_done = 0;
        st.rx_next = 0;
    }

    /// Sends `skb` (`ndo_start_xmit`).
    fn xmit(&self, nic: &Nic, netdev: &Device, skb: SkBuff) -> Result<(), SkBuff> {
        let mut st = self.state.lock();
        let len = skb.len();
        if st.netdev.is_none() || !(MIN_FRAME..=MAX_FRAME).contains(&len) {
            self.counters.tx_dropped.add(1, Relaxed);
            return Ok(()); // dropped
        }
        let in_flight = st.tx_posted.wrapping_sub(st.tx_done);
        if in_flight >= RING - 1 {
            // Stopped before it could fill up; the core tries again once woken.
            netdev.stop_queue();
            return Err(skb);
        }
        let index = st.tx_posted % RING;
        let slot = index as usize;
        let copied = self.mem.try_access_with(|mem| {
            let start = slot * SLOT;
            // SAFETY: Transmit slot `slot` belongs to descriptor `index`, which the device does
            // not own (posted and not yet done descriptors are `in_flight`, fewer than the
            // ring), so nothing else reads or writes these bytes now; the slot is in bounds.
            let buf = unsafe {
                core::slice::from_raw_parts_mut(
                    mem.buffers.as_mut_ptr().cast::<u8>().add(start),
                    len,
                )
            };
            let ok = skb.copy_to(buf).is_ok();
            io_project!(&mem.tx, [panic: slot]).copy_write(EthDesc {
                addr: self.slot_dma(slot),
                len: len as u16,
                flags: 0,
                status: 0,
            });
            ok
        });
        if copied != Some(true) {
            self.counters.tx_dropped.add(1, Relaxed);
            return Ok(());
        }
        st.tx_posted = st.tx_posted.wrapping_add(1);
        let tail = st.tx_posted % RING;
        if nic
            .with_bar(|bar| bar.write_reg(regs::ETH_TX_TAIL::zeroed().with_index(tail)))
            .is_err()
        {
            st.tx_posted = st.tx_posted.wrapping_sub(1);
            self.counters.tx_dropped.add(1, Relaxed);
            return Ok(());
        }
        if in_flight + 1 >= RING - 1 {
            netdev.stop_queue();
        }
        drop(st);
        skb.consume();
        Ok(())
    }

    /// The queues' interrupt (the hard handler; the device masked it as it fired): schedules
    /// the netdev's NAPI poll, which does the work and arms the interrupt again.
    pub(crate) fn interrupt(&self) {
        let st = self.state.lock();
        if let Some(netdev) = st.netdev {
            // SAFETY: `netdev` is set between `open` and `stop`, under the lock we hold, while
            // the device is registered.
            unsafe { &*netdev }.napi_schedule();
        }
    }

    /// The netdev's NAPI poll: reclaims sent frames, takes at most `budget` received ones
    /// (and reposts their buffers), hands them to the stack once the lock is dropped (the
    /// stack may answer at once, through `xmit`), and, with fewer than `budget`, completes
    /// the poll and arms the interrupt again. Returns how many descriptors it received.
    fn poll(&self, nic: &Nic, netdev: &Device, napi: &Napi, budget: u32) -> u32 {
        let budget = budget.min(NAPI_BATCH as u32);
        let mut frames: [Option<SkBuff>; NAPI_BATCH] = [const { None }; NAPI_BATCH];
        let mut received = 0u32;
        let mut st = self.state.lock();
        if st.netdev.is_none() {
            // Not running (`stop` disables NAPI before it clears the netdev, so this is not
            // expected): nothing to poll; a poll that is not completed would stay scheduled.
            drop(st);
            if budget > 0 {
                napi.complete_done(0);
            }
            return 0;
        }
        let c = &self.counters;
        let _ = self.mem.try_access_with(|mem| {
            while st.tx_done != st.tx_posted {
                let slot = (st.tx_done % RING) as usize;
                let status: u32 = io_read!(&mem.tx, [panic: slot].status);
                if status & DONE == 0 {
                    break;
                }
                let len: u16 = io_read!(&mem.tx, [panic: slot].len);
                match (status >> 16) & 0xff {
                    CODE_OK => {
                        c.tx_packets.add(1, Relaxed);
                        c.tx_bytes.add(u64::from(len), Relaxed);
                    }
                    CODE_NO_LINK => {
                        c.tx_dropped.add(1, Relaxed);
                    }
                    _ => {
                        c.tx_errors.add(1, Relaxed);
                    }
                }
                st.tx_done = st.tx_done.wrapping_add(1);
            }
            while received < budget {
                let slot = (st.rx_next % RING) as usize;
                let status: u32 = io_read!(&mem.rx, [panic: slot].status);
                if status & DONE == 0 {
                    break;
                }
                let len = (status & 0xffff) as usize;
                if (status >> 16) & 0xff == CODE_OK && len <= SLOT {
                    let start = Self::rx_slot(st.rx_next);
                    // SAFETY: The device completed descriptor `slot` and owns its buffer
                    // again only once it is reposted below; `start + len` is in bounds.
                    let frame = unsafe {
                        core::slice::from_raw_parts(
                            mem.buffers.as_ptr().cast::<u8>().add(start),
                            len,
                        )
                    };
                    match SkBuff::from_frame(netdev, frame) {
                        Ok(skb) => {
                            c.rx_packets.add(1, Relaxed);
                            c.rx_bytes.add(len as u64, Relaxed);
                            frames[received as usize] = Some(skb);
                        }
                        Err(_) => {
                            c.rx_dropped.add(1, Relaxed);
                        }
                    }
                } else {
                    c.rx_errors.add(1, Relaxed);
                }
                // Repost: this descriptor's place is taken by the one `RING - 1` ahead.
                let repost = ((st.rx_next + RING - 1) % RING) as usize;
                io_project!(&mem.rx, [panic: repost]).copy_write(EthDesc {
                    addr: self.slot_dma(RING as usize + repost),
                    len: SLOT as u16,
                    flags: 0,
                    status: 0,
                });
                st.rx_next = st.rx_next.wrapping_add(1);
                received += 1;
            }
        });
        let tx_room = st.tx_posted.wrapping_sub(st.tx_done) < RING - 1;
        if received > 0 {
            let rx_tail = (st.rx_next + RING - 1) % RING;
            let _ =
                nic.with_bar(|bar| bar.write_reg(regs::ETH_RX_TAIL::zeroed().with_index(rx_tail)));
        }
        drop(st);
        if tx_room && netdev.queue_stopped() {
            netdev.wake_queue();
        }
        for skb in frames.iter_mut().filter_map(Option::take) {
            skb.receive_napi(netdev, napi);
        }
        // With a budget of 0 (netpoll) the poll is not this one's to complete.
        if received < budget && napi.complete_done(received) {
            let st = self.state.lock();
            if st.netdev.is_some() {
                // Armed last: a completion since the loops above signals at once.
                let _ = nic.with_bar(|bar| bar.write_reg(st.running_ctrl()));
            }
        }
        received
    }

    /// The netdev's receive mode changed (`ndo_set_rx_mode`, in atomic context): the device
    /// takes every frame while it is promiscuous, only its own, broadcast and multicast ones
    /// otherwise.
    fn set_rx_mode(&self, nic: &Nic, netdev: &Device) {
        let mut st = self.state.lock();
        st.promisc = netdev.promiscuous();
        if st.netdev.is_some() {
            // Armed as well: an interrupt the handler has not re-armed yet is only signalled
            // early, never lost.
            let _ = nic.with_bar(|bar| bar.write_reg(st.running_ctrl()));
        }
    }

    /// Whether the netdev is up with its carrier on: the state of a RoCE port in the RDMA
    /// core, which follows its netdev's (and sends the port's events when it changes).
    pub(crate) fn netdev_active(&self) -> bool {
        let st = self.state.lock();
        // SAFETY: As in `interrupt`.
        st.netdev
            .is_some_and(|netdev| unsafe { &*netdev }.carrier_ok())
    }

    /// The link went up or down (a `PORT_CHANGE` event).
    pub(crate) fn link_changed(&self, up: bool) {
        let st = self.state.lock();
        if let Some(netdev) = st.netdev {
            // SAFETY: As in `interrupt`.
            let netdev = unsafe { &*netdev };
            if up {
                netdev.carrier_on();
            } else {
                netdev.carrier_off();
            }
        }
    }
}

/// The netdev's operations; its data is the device.
pub(crate) struct PfnicNetdev;

impl PfnicNetdev {
    fn port(nic: &Nic) -> Result<&EthPort> {
        nic.eth.as_deref().ok_or(ENODEV)
    }
}

#[vtable]
impl netdev::Operations for PfnicNetdev {
    type Data = Arc<Nic>;

    fn open(dev: &Device, nic: &Arc<Nic>) -> Result {
        Self::port(nic)?.open(nic, dev)
    }

    fn stop(_dev: &Device, nic: &Arc<Nic>) {
        if let Ok(port) = Self::port(nic) {
            port.stop(nic);
        }
    }

    fn start_xmit(dev: &Device, nic: &Arc<Nic>, skb: SkBuff) -> Result<(), SkBuff> {
        match Self::port(nic) {
            Ok(port) => port.xmit(nic, dev, skb),
            Err(_) => Ok(()), // dropped
        }
    }

    fn set_rx_mode(dev: &Device, nic: &Arc<Nic>) {
        if let Ok(port) = Self::port(nic) {
            port.set_rx_mode(nic, dev);
        }
    }

    fn poll(dev: &Device, nic: &Arc<Nic>, napi: &Napi, budget: u32) -> u32 {
        match Self::port(nic) {
            Ok(port) => port.poll(nic, dev, napi, budget),
            Err(_) => {
                // No queues to poll (never registered so): end the poll.
                if budget > 0 {
                    napi.complete_done(0);
                }
                0
            }
        }
    }

    fn stats(_dev: &Device, nic: &Arc<Nic>, s: &mut Stats) {
        let Ok(port) = Self::port(nic) else { return };
        let c = &port.counters;
        s.rx_packets = c.rx_packets.load(Relaxed);
        s.rx_bytes = c.rx_bytes.load(Relaxed);
        s.rx_errors = c.rx_errors.load(Relaxed);
        s.rx_dropped = c.rx_dropped.load(Relaxed);
        s.tx_packets = c.tx_packets.load(Relaxed);
        s.tx_bytes = c.tx_bytes.load(Relaxed);
        s.tx_errors = c.tx_errors.load(Relaxed);
        s.tx_dropped = c.tx_dropped.load(Relaxed);
        // The device's own drops: a register read is all it takes, and none may sleep here.
        s.rx_missed_errors = nic
            .with_bar(|bar| u64::from(bar.read(regs::PORT_ETH_RX_DROPPED).count().get()))
            .unwrap_or(0);
    }
}

/// The registered netdev of a pfnic's port.
pub(crate) type Registration = netdev::Registration<PfnicNetdev>;

/// Registers the netdev (`ethN`) of `nic`'s port.
fn register(dev: &KDevice<Bound>, nic: &Arc<Nic>) -> Result<Registration> {
    let port = PfnicNetdev::port(nic)?;
    netdev::Registration::new(
        dev,
        &netdev::Options {
            name: c"eth%d",
            mac: port.mac,
        },
        Ok::<_, Error>(nic.clone()),
    )
}

/// The driver of `pfnic.eth.N` ([`crate::auxdev`]): the port's netdev.
pub(crate) struct EthDriver;

kernel::auxiliary_device_table!(
    ETH_TABLE,
    <EthDriver as auxiliary::Driver>::IdInfo,
    [(auxdev::id(auxdev::ETH), ())]
);

/// A bound `pfnic.eth.N`: its netdev is in the port's [`EthPort::netdev`] until the unbind.
pub(crate) struct EthBinding {
    nic: Arc<Nic>,
}

impl auxiliary::Driver for EthDriver {
    type IdInfo = ();
    type Data<'bound> = EthBinding;
    const ID_TABLE: auxiliary::IdTable<Self::IdInfo> = &ETH_TABLE;
    // The RDMA device ties its port to the netdev: only the PCI driver, which removes the
    // RDMA device first, unbinds this one.
    const SUPPRESS_BIND_ATTRS: bool = true;

    fn probe<'bound>(
        adev: &'bound auxiliary::Device<Core<'_>>,
        _info: &'bound Self::IdInfo,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        EthBinding::new(adev)
    }
}

impl EthBinding {
    /// Registers the netdev of `adev`'s NIC and keeps it in its [`EthPort::netdev`].
    fn new(adev: &auxiliary::Device<Core<'_>>) -> Result<Self> {
        let nic = auxdev::nic(adev)?;
        let port = PfnicNetdev::port(&nic)?;
        let reg = register(adev.parent(), &nic)
            .inspect_err(|e| dev_warn!(adev.parent(), "no netdev for the port: {:?}\n", e))?;
        *port.netdev.lock() = Some(reg);
        Ok(Self { nic })
    }
}

impl Drop for EthBinding {
    fn drop(&mut self) {
        // Unregistered outside the lock: the netdev's `stop` runs meanwhile.
        if let Ok(port) = PfnicNetdev::port(&self.nic) {
            let reg = port.netdev.lock().take();
            drop(reg);
        }
    }
}
